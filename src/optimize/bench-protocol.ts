// The JSON between `kforge optimize` and the worker's timing mode (`python -m kforge_worker --bench-optimize
// FILE`): eager reference, torch.compile(reference) and the emitted ModelNew timed in one process, and each
// fused region timed against the PyTorch ops it replaces (measured planning drops regions that lose).
import { z } from "zod";

export const OptimizeBenchRequest = z.object({
  problemPath: z.string(),
  candidatePath: z.string(),
  device: z.enum(["cuda", "cpu"]),
  /** kforge's cache folder: the extension is looked up where the eval worker builds it. */
  cacheDir: z.string(),
  /** Timed iterations per model (after warm-up); medians are reported. */
  iters: z.number().int().positive(),
  /** Also time torch.compile(reference) (off with --no-compile-baseline). */
  compileBaseline: z.boolean(),
  /** Region ids to time kernel-vs-PyTorch (method names `_kf_<id>`). */
  regions: z.array(z.string()),
});
export type OptimizeBenchRequest = z.infer<typeof OptimizeBenchRequest>;

export const RegionTiming = z.object({
  id: z.string(),
  kernelMs: z.number().nullable(),
  torchMs: z.number().nullable(),
  /** Why it could not be timed (never called, raised), when it could not. */
  note: z.string().nullable(),
});
export type RegionTiming = z.infer<typeof RegionTiming>;

export const OptimizeBenchResult = z.object({
  device: z.string(),
  eagerMs: z.number().nullable(),
  compiledMs: z.number().nullable(),
  oursMs: z.number().nullable(),
  /** Wall seconds torch.compile took to produce its first result (its compile time). */
  compileSeconds: z.number().nullable(),
  regions: z.array(RegionTiming),
  error: z.string().nullable(),
});
export type OptimizeBenchResult = z.infer<typeof OptimizeBenchResult>;

/** `python -m kforge_worker --warm-compile FILE`: torch.compile(reference) run once ahead of the GPU loop,
 * so the bench's compile of the same model loads from inductor's on-disk caches. */
export const WarmCompileRequest = z.object({
  problemPath: z.string(),
  device: z.enum(["cuda", "cpu"]),
});
export type WarmCompileRequest = z.infer<typeof WarmCompileRequest>;

export const WarmCompileResult = z.object({
  seconds: z.number(),
  /** Why it failed; the bench then compiles for itself and reports its own failure. */
  error: z.string().nullable(),
});
export type WarmCompileResult = z.infer<typeof WarmCompileResult>;
