// What a run achieved against what the device can do: the problem's floor (the fewest FLOPs and bytes
// any implementation must spend, METHOD.md's "two numbers") against the device's measured ceilings.

import type { EvalResult, Precision, Workload } from "../worker/protocol.ts";
import { workloadOf } from "./extensions.ts";

export interface ComputeCeiling {
  label: string;
  flopsPerSecond: number;
  precisions: Precision[];
  source: string;
}

export interface DeviceCeilings {
  name: string;
  memoryBytesPerSecond: number;
  memorySource: string;
  compute: ComputeCeiling[];
}

/** Measured on the team's device machines (see /work/.library/device/KINDS.md); datasheet values say so. */
const DEVICES: Array<{ match: RegExp; ceilings: DeviceCeilings }> = [
  {
    match: /\bH100\b/i,
    ceilings: {
      name: "H100 80GB HBM3",
      memoryBytesPerSecond: 2.95e12,
      memorySource: "measured: device-to-device copy, bytes read + written",
      compute: [
        {
          label: "fp16/bf16 tensor",
          flopsPerSecond: 778e12,
          precisions: ["fp16", "bf16"],
          source: "measured: 8192³ bf16 matmul",
        },
        { label: "fp32 (no tensor cores)", flopsPerSecond: 67e12, precisions: ["fp32"], source: "datasheet" },
      ],
    },
  },
  {
    match: /\bH200\b/i,
    ceilings: {
      name: "H200",
      memoryBytesPerSecond: 4.3e12,
      memorySource: "measured: device-to-device copy, bytes read + written",
      compute: [
        {
          label: "fp16/bf16 tensor",
          flopsPerSecond: 788e12,
          precisions: ["fp16", "bf16"],
          source: "measured: 8192³ bf16 matmul",
        },
        { label: "fp32 (no tensor cores)", flopsPerSecond: 67e12, precisions: ["fp32"], source: "datasheet" },
      ],
    },
  },
];

export function ceilingsFor(result: EvalResult): DeviceCeilings | null {
  const gpu = result.environment.gpu;
  if (result.environment.device !== "cuda" || !gpu) return null;
  return DEVICES.find((d) => d.match.test(gpu))?.ceilings ?? null;
}

/** The precision the problem runs in: as requested, else as the outputs came back. */
export function effectivePrecision(result: EvalResult): Precision | null {
  if (result.precision) return result.precision;
  const dtype = result.trials[0]?.outputs[0]?.refDtype ?? "";
  if (/bfloat16/.test(dtype)) return "bf16";
  if (/float16|half/.test(dtype)) return "fp16";
  if (/float32|float\b/.test(dtype)) return "fp32";
  return null;
}

export function computeCeiling(ceilings: DeviceCeilings, precision: Precision | null): ComputeCeiling | null {
  if (precision === null) return null;
  return ceilings.compute.find((c) => c.precisions.includes(precision)) ?? null;
}

/** The problem's work as the worker counted it on the reference (results of older workers carry none). */
export function workloadFor(result: EvalResult): Workload | null {
  return workloadOf(result);
}

export interface RooflinePoint {
  /** FLOP per byte of the problem's floor. */
  intensity: number;
  tflops: number;
  gbps: number;
}

export function achieved(workload: Workload, ms: number): RooflinePoint {
  const seconds = ms / 1000;
  return {
    intensity: workload.flops / workload.bytes,
    tflops: workload.flops / seconds / 1e12,
    gbps: workload.bytes / seconds / 1e9,
  };
}

/** The fastest any implementation could run on this device: max(FLOPs / peak, bytes / bandwidth). */
export function floorMs(workload: Workload, ceilings: DeviceCeilings, compute: ComputeCeiling): number {
  return (
    Math.max(workload.flops / compute.flopsPerSecond, workload.bytes / ceilings.memoryBytesPerSecond) * 1000
  );
}

/** Attainable TFLOP/s at an arithmetic intensity: the roof. */
export function attainableTflops(
  intensity: number,
  ceilings: DeviceCeilings,
  compute: ComputeCeiling,
): number {
  return Math.min(compute.flopsPerSecond, intensity * ceilings.memoryBytesPerSecond) / 1e12;
}

export type RooflineEntry =
  | {
      ok: true;
      result: EvalResult;
      workload: Workload;
      ceilings: DeviceCeilings;
      compute: ComputeCeiling;
      floorMs: number;
      ref: RooflinePoint;
      cand: RooflinePoint;
    }
  | { ok: false; result: EvalResult; why: string };

/** Everything the roofline view needs for one result, or why it cannot be placed on one. */
export function rooflineEntry(result: EvalResult): RooflineEntry {
  if (!result.timing) return { ok: false, result, why: "not timed" };
  const workload = workloadFor(result);
  if (!workload) {
    return {
      ok: false,
      result,
      why: `the result carries no workload (FLOP and byte counts) for ${result.problem}`,
    };
  }
  const ceilings = ceilingsFor(result);
  if (!ceilings) {
    const device = result.environment.gpu ?? result.environment.device;
    return { ok: false, result, why: `no measured ceilings for device ${device}` };
  }
  const precision = effectivePrecision(result);
  const compute = computeCeiling(ceilings, precision);
  if (!compute)
    return { ok: false, result, why: `no compute ceiling for precision ${precision ?? "unknown"}` };
  return {
    ok: true,
    result,
    workload,
    ceilings,
    compute,
    floorMs: floorMs(workload, ceilings, compute),
    ref: achieved(workload, result.timing.ref.medianMs),
    cand: achieved(workload, result.timing.cand.medianMs),
  };
}
