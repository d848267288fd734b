// The JSON contract between the TypeScript CLI and the Python worker (`python -m kforge_worker`).
// The worker receives one EvalRequest on stdin and writes WorkerMessages, one JSON object per line, to
// the private result channel (its original stdout; the candidate's own prints are redirected to stderr).
// `npm run schemas` exports these as JSON Schema into python/kforge_worker/schemas/ so the Python tests
// validate what the worker writes against the same definitions.
import { z } from "zod";

export const PROTOCOL_VERSION = 1;

export const Precision = z.enum(["fp32", "fp16", "bf16"]);
export type Precision = z.infer<typeof Precision>;

export const Verdict = z.enum([
  "no_code",
  "import_error",
  "compile_error",
  "runtime_error",
  "timeout",
  /** The problem itself failed (its Model, get_inputs or forward raised; it needs another device): charged
   * to the problem, not to the candidate. */
  "problem_error",
  "shape_mismatch",
  "incorrect",
  "cheating",
  "correct",
]);
export type Verdict = z.infer<typeof Verdict>;

/** Where the candidate's code came from: a plain .py file, or one fenced block of an LLM transcript. */
export const CandidateOrigin = z.object({
  kind: z.enum(["file", "transcript"]),
  sourcePath: z.string(),
  blockIndex: z.number().int().nonnegative().nullable(),
  blockCount: z.number().int().nonnegative().nullable(),
  note: z.string().nullable(),
});
export type CandidateOrigin = z.infer<typeof CandidateOrigin>;

export const TimingOptions = z.object({
  enabled: z.boolean(),
  warmupIters: z.number().int().nonnegative(),
  minIters: z.number().int().positive(),
  maxIters: z.number().int().positive(),
  /** Seconds of timed work after which timing stops once minIters are done. */
  budgetSeconds: z.number().positive(),
  /** Stop early when the speedup's 95% confidence half-width falls under this fraction. */
  targetRelativeCi: z.number().positive(),
});
export type TimingOptions = z.infer<typeof TimingOptions>;

/** sha256 (hex) of each file the builds of one candidate's code left in its extension folder, by path relative to
 * the folder (python/kforge_worker/extension_cache.py). */
export const ExtensionLibraries = z.record(z.string(), z.string());
export type ExtensionLibraries = z.infer<typeof ExtensionLibraries>;

/** What a suite knows of the content-keyed extension cache its candidates share (src/suite/extension-cache.ts): the
 * worker checks the candidate's folder against it before the import and builds afresh where it does not hold. */
export const ExtensionCache = z.object({
  /** When the suite started (ms since the epoch), before any candidate's code ran: a cached file changed after it
   * (its ctime) that no build of the suite recorded is not trusted. */
  since: z.number().nonnegative(),
  /** What this suite's own build of the same code left; null: none recorded yet. */
  libraries: ExtensionLibraries.nullable(),
});
export type ExtensionCache = z.infer<typeof ExtensionCache>;

export const EvalRequest = z.object({
  protocol: z.literal(PROTOCOL_VERSION),
  /** Random per run; the worker stamps every message with it, so a line forged by the candidate (which
   * cannot see stdin, read before it is imported) is recognised. Absent in hand-written requests. */
  nonce: z.string().min(16).optional(),
  problem: z.object({
    path: z.string(),
    name: z.string(),
    atol: z.number().positive().nullable(),
    rtol: z.number().positive().nullable(),
  }),
  candidate: z.object({
    /** A .py file holding the candidate's code (for transcripts: the extracted block, written by the CLI). */
    path: z.string(),
    label: z.string(),
    origin: CandidateOrigin,
    /** The code as the CLI read it when the suite was set up. The worker judges this text (imported under `path`,
     * so sibling files resolve as before), not the file as it is when the worker starts: in a suite, an earlier
     * candidate's code could have rewritten a later one's file. Absent: the file is read (hand-written requests). */
    source: z.string().optional(),
  }),
  options: z.object({
    trials: z.number().int().positive(),
    seed: z.number().int().nonnegative(),
    precision: Precision.nullable(),
    /** Set torch.backends.cuda.matmul.allow_tf32 (and cuDNN's) before either model runs: PyTorch's own
     * switch for TF32 float32 matmuls, which candidates must follow. */
    allowTf32: z.boolean(),
    /** "cuda" on a GPU host; "cpu" runs the same pipeline on CPU tensors (tests, CPU-only problems). */
    device: z.enum(["cuda", "cpu"]),
    timing: TimingOptions,
    cacheDir: z.string(),
    /** Names of extra verification checks to run (see checks in the result); empty runs the defaults. */
    checks: z.array(z.string()),
    /** The KernelBench reading: running the operator family the problem asks to replace (its GEMM, conv,
     * attention) is `cheating`. Off (absent in older requests): library and PyTorch operators are disclosed
     * in the checks, not condemned. */
    strict: z.boolean().optional(),
    /** Run the reference (the trials' outputs, the float64 evaluation, its side of the timing) in its own
     * process that never imports candidate code (python/kforge_worker/reference_process.py). Absent: on. */
    referenceProcess: z.boolean().optional(),
    /** Started ahead of its candidate file: the worker loads the problem, starts the reference process and
     * initialises the device, says "ready", and reads the candidate only after a `go` line on stdin (after the
     * request's line). Absent: off. */
    waitForGo: z.boolean().optional(),
    /** The descriptor, in the worker, of the CLI's socket for the judge's records (src/worker/judge.ts): the worker
     * hands it to the clean reference process and closes its own copy before the candidate is imported. Absent: no
     * judge channel (hand-written requests, Ray tasks). */
    judgeFd: z.number().int().nonnegative().optional(),
  }),
  /** Absent: the extension cache is used as found (hand-written requests, Ray tasks). A worker started ahead gets it
   * instead as one JSON line after its go line (stdin then closes), once the candidate's prebuild is done. */
  extensionCache: ExtensionCache.optional(),
});
export type EvalRequest = z.infer<typeof EvalRequest>;

export const ErrorStats = z.object({
  maxAbs: z.number().nullable(),
  relL2: z.number().nullable(),
});

export const OutputComparison = z.object({
  index: z.number().int().nonnegative(),
  shape: z.array(z.number().int()),
  refShape: z.array(z.number().int()),
  dtype: z.string(),
  refDtype: z.string(),
  allclose: z.boolean(),
  nonFinite: z.number().int().nonnegative(),
  /** Candidate vs reference (the pass mark's view). */
  vsRef: ErrorStats,
  /** Candidate vs a float64 evaluation of the reference on the same inputs. */
  candVsFp64: ErrorStats,
  /** The reference itself vs float64: how far PyTorch's own answer is from exact. */
  refVsFp64: ErrorStats,
});
export type OutputComparison = z.infer<typeof OutputComparison>;

export const Trial = z.object({
  seed: z.number().int(),
  passed: z.boolean(),
  outputs: z.array(OutputComparison),
  message: z.string().nullable(),
});
export type Trial = z.infer<typeof Trial>;

export const TimingStats = z.object({
  n: z.number().int().nonnegative(),
  medianMs: z.number(),
  meanMs: z.number(),
  minMs: z.number(),
  maxMs: z.number(),
  p25Ms: z.number(),
  p75Ms: z.number(),
  stdMs: z.number(),
  samplesMs: z.array(z.number()),
});
export type TimingStats = z.infer<typeof TimingStats>;

/** How the timed calls were fed and checked: every pair of calls gets the next of `sets` rotating input sets
 * per side, rewritten in place with fresh get_inputs() values (outside the timed region); `sampled` pairs,
 * drawn at random, had the candidate's output compared with the reference's for the same inputs. */
export const TimedInputs = z.object({
  sets: z.number().int().positive(),
  /** How many times an input set was rewritten with fresh values (one per pair, warm-up included). */
  refreshed: z.number().int().nonnegative(),
  /** Where get_inputs() ran for the fresh values: with the device as default device, or on the host. */
  generation: z.enum(["device", "host"]),
  /** Where the reference ran while timed: in the worker beside the candidate, or in its own clean process. */
  reference: z.enum(["in_process", "process"]),
  sampled: z.number().int().nonnegative(),
  wrong: z.number().int().nonnegative(),
});
export type TimedInputs = z.infer<typeof TimedInputs>;

export const Timing = z.object({
  ref: TimingStats,
  cand: TimingStats,
  speedup: z.number(),
  /** 95% confidence interval of the speedup (bootstrap over paired iterations). */
  speedupCi: z.tuple([z.number(), z.number()]),
  l2FlushBytes: z.number().int().nonnegative(),
  method: z.string(),
  smClockMhz: z.object({ start: z.number().nullable(), end: z.number().nullable() }),
  /** Absent in results of older workers (one input set per side, reused). */
  inputs: TimedInputs.optional(),
});
export type Timing = z.infer<typeof Timing>;

export const CheckOutcome = z.enum(["pass", "fail", "warn", "skip"]);

/** One named verification check (anti-cheat, state semantics, ...): what it found and why. */
export const Check = z.object({
  name: z.string(),
  outcome: CheckOutcome,
  /** The verdict a failure of this check implies (e.g. "cheating", "incorrect"). */
  failVerdict: Verdict.nullable(),
  evidence: z.string(),
  /** Wall time of the check group that produced it (absent for static checks and older workers). */
  seconds: z.number().optional(),
  /** The most host memory (resident set) the worker held while that group ran, in bytes (Linux; absent elsewhere). */
  peakHostBytes: z.number().optional(),
  /** The worker's resident set when that group started, in bytes: peakHostBytes less this is what the group held. */
  startHostBytes: z.number().optional(),
  /** The most device memory the CUDA allocator reserved in the worker while that group ran (GPU runs). */
  peakDeviceBytes: z.number().optional(),
});
export type Check = z.infer<typeof Check>;

export const CompileCall = z.object({
  name: z.string(),
  seconds: z.number(),
  ok: z.boolean(),
  log: z.string(),
});

export const Environment = z.object({
  python: z.string(),
  torch: z.string().nullable(),
  cuda: z.string().nullable(),
  driver: z.string().nullable(),
  gpu: z.string().nullable(),
  device: z.enum(["cuda", "cpu"]),
});
export type Environment = z.infer<typeof Environment>;

/** The work one forward pass of the reference must do, counted by the worker on the reference itself:
 * FLOPs (torch.utils.flop_counter) and bytes moved through device memory (every input, parameter, buffer
 * and output once). The roofline in reports and the worker's plausibility check both start from it. */
export const Workload = z.object({
  flops: z.number().positive(),
  bytes: z.number().positive(),
  /** How the numbers were counted, shown next to the roofline. */
  note: z.string(),
});
export type Workload = z.infer<typeof Workload>;

/** What the judge — the clean reference process, which never imports candidate code — found, as the CLI read it
 * from the channel only that process can write (python/kforge_worker/judge.py). */
export const JudgeRecord = z.object({
  /** ok; missing: not one line (no judge ran); truncated: no end record; forged: lines the judge did not write. */
  channel: z.enum(["ok", "missing", "truncated", "forged"]),
  problems: z.array(z.string()),
  /** process: the trials and timed calls were judged there; in_worker: the reference stayed in the worker (active
   * dropout, or inputs that cannot be handed over — decided by the judge itself). */
  mode: z.enum(["process", "in_worker"]).nullable(),
  why: z.string().nullable(),
  pid: z.number().int().nullable(),
  tolerance: z.object({ atol: z.number(), rtol: z.number() }).nullable(),
  trials: z.array(
    z.object({
      trial: z.number().int().nullable(),
      seed: z.number().int().nullable(),
      passed: z.boolean().nullable(),
      message: z.string().nullable(),
    }),
  ),
  /** Pairs of timed calls the judge compared (drawn by it after the candidate's outputs were handed over). */
  sampled: z.number().int().nonnegative(),
  /** The sampled pairs that were wrong (right ones are only counted). */
  samples: z.array(
    z.object({
      pair: z.number().int().nullable(),
      ok: z.boolean().nullable(),
      message: z.string().nullable(),
    }),
  ),
  end: z
    .object({
      trialsGiven: z.number().int().nullable(),
      trialsJudged: z.number().int().nullable(),
      trialsFailed: z.number().int().nullable(),
      calls: z.number().int().nullable(),
      commits: z.number().int().nullable(),
      sampled: z.number().int().nullable(),
      wrong: z.number().int().nullable(),
      failures: z.array(z.string()).nullable(),
      /** The reference's timed calls as the clean process measured them (the speedup's numerator). */
      refTimed: z.number().int().nullable().optional(),
      refMedianMs: z.number().nullable().optional(),
      /** The candidate's timed calls as handed to the clean process after each pair, and the speedup from both. */
      candTimed: z.number().int().nullable().optional(),
      candMedianMs: z.number().nullable().optional(),
      speedup: z.number().nullable().optional(),
    })
    .nullable(),
});
export type JudgeRecord = z.infer<typeof JudgeRecord>;

export const EvalResult = z.object({
  protocol: z.literal(PROTOCOL_VERSION),
  problem: z.string(),
  candidate: z.string(),
  origin: CandidateOrigin,
  verdict: Verdict,
  /** First useful lines of the cause for every failing verdict; null when correct. */
  reason: z.string().nullable(),
  environment: Environment,
  precision: Precision.nullable(),
  /** Whether TF32 float32 matmuls were allowed for this run (absent in results of older workers). */
  allowTf32: z.boolean().optional(),
  /** Whether the run was judged under --strict (absent in results of older workers: not strict). */
  strict: z.boolean().optional(),
  /** How ModelNew got the reference's parameters. */
  paramSync: z.object({ mode: z.enum(["state_dict", "seed"]), detail: z.string() }),
  compile: z.array(CompileCall),
  tolerance: z.object({ atol: z.number(), rtol: z.number() }),
  trials: z.array(Trial),
  timing: Timing.nullable(),
  checks: z.array(Check),
  /** Absent when the run was not timed, the work could not be counted, or it has no FLOPs to count. */
  workload: Workload.nullable().optional(),
  seconds: z.number(),
  /** Wall time of each pipeline stage that ran, in order (absent in results of older workers). */
  stageSeconds: z.record(z.string(), z.number()).optional(),
  /** The memory each stage that ran held, as a check's peaks say it (the verify stage spans its check groups). */
  stageMemory: z
    .record(
      z.string(),
      z.object({
        peakHostBytes: z.number().optional(),
        startHostBytes: z.number().optional(),
        peakDeviceBytes: z.number().optional(),
      }),
    )
    .optional(),
  /** The clean reference process's own judgement, added by the CLI (never by the worker): absent without a judge
   * channel (--reference-process off, Ray). */
  judge: JudgeRecord.optional(),
  /** What the candidate's builds left in the shared extension folder, when the request carried extensionCache and the
   * worker built there (not in a fresh folder): the suite checks later candidates of the same code against it. */
  extensionLibraries: ExtensionLibraries.optional(),
});
export type EvalResult = z.infer<typeof EvalResult>;

export const ProgressMessage = z.object({
  type: z.literal("progress"),
  nonce: z.string().optional(),
  /** "ready": a worker started ahead of its candidate (options.waitForGo) has done everything that does not need
   * the candidate and waits for the go line on stdin. */
  stage: z.enum(["import", "ready", "compile", "check", "time", "verify"]),
  detail: z.string(),
  /** Fraction done within the stage, when known. */
  fraction: z.number().min(0).max(1).nullable(),
});
export type ProgressMessage = z.infer<typeof ProgressMessage>;

export const ResultMessage = z.object({
  type: z.literal("result"),
  nonce: z.string().optional(),
  result: EvalResult,
});

export const WorkerMessage = z.discriminatedUnion("type", [ProgressMessage, ResultMessage]);
export type WorkerMessage = z.infer<typeof WorkerMessage>;

/** `python -m kforge_worker --probe`: what the Python side has, for `kforge doctor`. */
export const ProbeResult = z.object({
  python: z.string(),
  executable: z.string(),
  torch: z.string().nullable(),
  torchError: z.string().nullable(),
  torchCuda: z.string().nullable(),
  cudaAvailable: z.boolean(),
  gpu: z.string().nullable(),
  driver: z.string().nullable(),
  ninja: z.string().nullable(),
  nvcc: z.string().nullable(),
  /** GPUs torch sees (after CUDA_VISIBLE_DEVICES): the suite scheduler runs one worker per GPU. Absent from
   * older workers. */
  gpuCount: z.number().int().nonnegative().optional(),
  /** TORCH_CUDA_ARCH_LIST as torch would derive it from the visible GPUs: pinned for the suite's CPU-side
   * prebuilds (which see no GPU) so they compile with the same flags the GPU worker would. */
  cudaArchList: z.string().nullable().optional(),
});
export type ProbeResult = z.infer<typeof ProbeResult>;
