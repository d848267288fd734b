// The JSON between `kforge optimize` and the worker's timing mode (`python -m kforge_worker --bench-optimize
// FILE`): eager reference, torch.compile(reference) and the emitted ModelNew timed in one process, and each
// fused region timed against the PyTorch ops it replaces (measured planning drops regions that lose).
// One process serves every bench of a problem (`--bench-optimize-serve`: one request per stdin line, one result
// per stdout line), so torch's import, the reference model and torch.compile's first call are paid once.
import { z } from "zod";

export const OptimizeBenchRequest = z.object({
  problemPath: z.string(),
  /** null: load the problem, build the reference and compile it, time nothing (a worker started ahead of its
   * problem's turn, so that this is done off the GPU loop). */
  candidatePath: z.string().nullable(),
  device: z.enum(["cuda", "cpu"]),
  /** kforge's cache folder: the extension is looked up where the eval worker builds it. */
  cacheDir: z.string(),
  /** Timed iterations per model (after warm-up); medians are reported. */
  iters: z.number().int().positive(),
  /** Also time torch.compile(reference) (off with --no-compile-baseline). */
  compileBaseline: z.boolean(),
  /** Region ids to time kernel-vs-PyTorch (method names `_kf_<id>`). */
  regions: z.array(z.string()),
  /** Also time the whole file against eager (and torch.compile): off for a re-timing of regions only. */
  timeFile: z.boolean().optional(),
  /** Epoch ms when the CLI spawned the worker: the bench's `startup` phase is measured from it. */
  spawnedAt: z.number().optional(),
});
export type OptimizeBenchRequest = z.infer<typeof OptimizeBenchRequest>;

export const RegionTiming = z.object({
  id: z.string(),
  kernelMs: z.number().nullable(),
  torchMs: z.number().nullable(),
  /** Why it could not be timed (never called, raised), when it could not. */
  note: z.string().nullable(),
  /** Wall seconds this region's timing took (argument capture excluded: one forward for all regions). */
  seconds: z.number().optional(),
});
export type RegionTiming = z.infer<typeof RegionTiming>;

/** Wall seconds of each step of one bench request, in the order they run. */
export const BenchPhases = z.object({
  /** Spawn to `import torch` done (the interpreter, torch, a CUDA context); null for a request served by a
   * process already running, which paid it before. */
  startup: z.number().nullable(),
  /** The problem file imported (0 when the served process has it already). */
  problemImport: z.number(),
  /** The candidate file imported (its extension is loaded on its first call). */
  candidateImport: z.number(),
  /** Reference and ModelNew built, weights copied, inputs made (the reference 0 when already built). */
  modelBuild: z.number(),
  /** ModelNew's first forward: loads (or builds) its extension. */
  firstCall: z.number(),
  /** torch.compile(reference)'s first call (0 when the served process compiled it before). */
  compile: z.number(),
  /** Three untimed calls of each timed model. */
  warmup: z.number(),
  /** The rotating eager / torch.compile / ours timing. */
  timing: z.number(),
  /** Every region's timing, the forward that records their arguments included. */
  regions: z.number(),
});
export type BenchPhases = z.infer<typeof BenchPhases>;

/** torch.compile(reference)'s outputs put to the check every candidate passes (compile_check.py). */
export const CompileCheck = z.object({
  /** null: not checked (active dropout, no room for the float64 pass, the check raised). */
  correct: z.boolean().nullable(),
  /** The first failing output's message, or why it was not checked. */
  note: z.string().nullable(),
  /** Where it failed on a GPU with TF32 allowed: the same check with TF32 off. */
  exactCorrect: z.boolean().nullable().optional(),
});
export type CompileCheck = z.infer<typeof CompileCheck>;

export const OptimizeBenchResult = z.object({
  device: z.string(),
  eagerMs: z.number().nullable(),
  compiledMs: z.number().nullable(),
  /** torch.compile(reference) with TF32 off, timed in the same rotation where compileCheck failed with TF32
   * and passed without it: the yardstick that meets the check. */
  compiledExactMs: z.number().nullable().optional(),
  compileCheck: CompileCheck.nullable().optional(),
  oursMs: z.number().nullable(),
  /** The file's forward replayed from a CUDA graph (its `_KF_GRAPH` switched on for these calls), timed in the
   * same rotation; absent when the file has no graph replay (or on the CPU), null when it could not be timed. */
  graphedMs: z.number().nullable().optional(),
  /** Wall seconds torch.compile took to produce its first result (its compile time). */
  compileSeconds: z.number().nullable(),
  regions: z.array(RegionTiming),
  error: z.string().nullable(),
  /** Timed iterations per model actually run (the request's, capped for slow forwards: scaledIters). */
  iters: z.number().int().optional(),
  phases: BenchPhases.optional(),
});
export type OptimizeBenchResult = z.infer<typeof OptimizeBenchResult>;
