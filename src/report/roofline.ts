// What a run achieved against what the device can do: the problem's floor (the fewest FLOPs and bytes
// any implementation must spend, METHOD.md's "two numbers") against the device's measured ceilings.

import type { EvalResult, Precision } from "../worker/protocol.ts";
import { type Workload, workloadOf } from "./extensions.ts";

const elems = (...dims: number[]) => dims.reduce((a, b) => a * b, 1);

/**
 * Floors of the built-in problems, counted by hand from their shapes. A result may carry its own
 * `workload` (same shape as Workload) which takes precedence.
 */
export const KNOWN_WORKLOADS: Record<string, Workload> = {
  // softmax(Q Kᵀ / √D) V with B=32, H=32, S=512, D=1024, fp16: two S×S×D products per head.
  sdpa_fp16: {
    flops: 4 * elems(32, 32, 512, 512, 1024),
    bytes: 4 * elems(32, 32, 512, 1024) * 2,
    note: "4·B·H·S²·D FLOPs; Q, K, V read and O written once in fp16 (B=32, H=32, S=512, D=1024)",
  },
  // Linear(8192→8192) on 1024 rows, then BatchNorm1d (training mode), scale, softmax, fp32.
  gemm_bn_scale_softmax: {
    flops: 2 * elems(1024, 8192, 8192) + 10 * elems(1024, 8192),
    bytes: (elems(1024, 8192) * 2 + elems(8192, 8192) + 6 * 8192) * 4,
    note: "2·M·N·K for the GEMM plus ~10 FLOPs per output for BN, scale and softmax; x, W, bias, BN and the output once in fp32 (M=1024, N=K=8192)",
  },
};

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

export function workloadFor(result: EvalResult): Workload | null {
  return workloadOf(result) ?? KNOWN_WORKLOADS[result.problem] ?? null;
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
    return { ok: false, result, why: `no FLOP/byte counts known for problem ${result.problem}` };
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
