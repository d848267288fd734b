// Which local GPUs a suite runs on, and the one-GPU environment of each worker slot.
import { InvalidArgumentError } from "commander";
import { UsageError } from "../errors.ts";
import type { ProbeResult } from "../worker/protocol.ts";
import type { Slot } from "./scheduler.ts";

export type GpuRequest = number | "all";

/** commander parser for `--gpus N|all`. */
export function parseGpus(value: string): GpuRequest {
  if (value === "all") return "all";
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("expected a positive integer or all");
  return n;
}

/** The physical ids behind torch's device indices: CUDA_VISIBLE_DEVICES when the user set it (so
 * `CUDA_VISIBLE_DEVICES=2,3 kforge eval --gpus all` uses GPUs 2 and 3), else 0..count-1. */
export function visibleGpuIds(count: number, env: NodeJS.ProcessEnv = process.env): string[] {
  const listed = env.CUDA_VISIBLE_DEVICES?.split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (listed && listed.length >= count) return listed.slice(0, count);
  return Array.from({ length: count }, (_, i) => String(i));
}

/**
 * One slot per GPU used. Without --gpus a single GPU keeps the worker's environment untouched (as before
 * suites existed); with several, each slot pins its workers to one GPU, so a candidate and its reference are
 * always timed on the same device and two candidates never share one.
 */
export function gpuSlots(
  request: GpuRequest | undefined,
  probe: Pick<ProbeResult, "gpuCount" | "cudaArchList">,
  env: NodeJS.ProcessEnv = process.env,
): Slot[] {
  const available = probe.gpuCount ?? 1;
  if (request !== undefined && request !== "all" && request > available)
    throw new UsageError(`--gpus ${request}: only ${available} GPU(s) visible to torch`);
  const count = request === undefined || request === "all" ? available : request;
  const ids = visibleGpuIds(available, env).slice(0, Math.max(1, count));
  const arch = buildEnv(probe, env);
  if (ids.length <= 1 && request === undefined) return [{ id: "gpu", env: arch }];
  return ids.map((id) => ({ id: `gpu${id}`, env: { CUDA_VISIBLE_DEVICES: id, ...arch } }));
}

/** The environment every build of a suite shares, workers and prebuilds alike: the arch list torch would
 * derive from the GPUs, pinned, so a prebuild that sees no GPU passes nvcc the same flags (and the worker
 * then finds the build done instead of redoing it). The user's own TORCH_CUDA_ARCH_LIST wins. */
export function buildEnv(
  probe: Pick<ProbeResult, "cudaArchList">,
  env: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  return probe.cudaArchList && !env.TORCH_CUDA_ARCH_LIST ? { TORCH_CUDA_ARCH_LIST: probe.cudaArchList } : {};
}
