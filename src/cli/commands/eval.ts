import { writeFileSync } from "node:fs";
import { type Command, InvalidArgumentError, Option } from "commander";
import { checkCandidateArg } from "../../candidate/load.ts";
import { UsageError } from "../../errors.ts";
import { DEFAULT_TIMING, type EvalOptions } from "../../eval.ts";
import { cacheDir } from "../../paths.ts";
import { resolveProblem } from "../../problem/problems.ts";
import { writeHtmlReport } from "../../report/html.ts";
import { formatResultsTable, useColor } from "../../report/table.ts";
import { evaluateSuite } from "../../suite/eval-suite.ts";
import { createSuiteProgress } from "../../suite/progress.ts";
import type { EvalResult, Precision, ProbeResult } from "../../worker/protocol.ts";
import { choosePython, probePython } from "../../worker/python.ts";
import { nonNegativeInt, positiveInt, positiveNumber } from "../args.ts";
import { addSuiteOptions, type SuiteFlags, setupSuite } from "../suite-flags.ts";

interface EvalFlags extends SuiteFlags {
  json?: string;
  html?: string;
  trials: number;
  timeout: number;
  python?: string;
  precision?: Precision;
  allowTf32?: boolean;
  device: "cuda" | "cpu";
  timing: boolean;
  iters: number;
  budget: number;
  seed?: number;
  atol?: number;
  rtol?: number;
  verbose?: boolean;
  strict?: boolean;
  referenceProcess?: boolean;
}

function onOff(value: string): boolean {
  if (value === "on" || value === "off") return value === "on";
  throw new InvalidArgumentError(`expected on or off, got ${JSON.stringify(value)}`);
}

export const STRICT_HELP =
  "fail candidates that run the operator the problem replaces (its GEMM/conv/attention) through PyTorch " +
  "or a library; by default such calls are disclosed, not condemned";

/** Stops early, in one line, when the Python side cannot run this evaluation at all. */
export async function requireWorker(pythonFlag: string | undefined, device: "cuda" | "cpu"): Promise<string> {
  return (await requireWorkerProbe(pythonFlag, device)).python;
}

/** requireWorker, keeping what the probe found (GPU count and arch list, for suites). */
export async function requireWorkerProbe(
  pythonFlag: string | undefined,
  device: "cuda" | "cpu",
): Promise<{ python: string; probe: ProbeResult }> {
  const python = choosePython(pythonFlag);
  const still = "kforge problems, emit and report still work";
  const outcome = await probePython(python);
  if (!outcome.ok) throw new UsageError(`${outcome.error}; ${still}`);
  const p = outcome.probe;
  if (p.torch === null) {
    throw new UsageError(
      `torch is not importable by ${p.executable} (${python.source}): ${p.torchError}; install PyTorch there or pass --python; ${still}`,
    );
  }
  if (device === "cuda" && !p.cudaAvailable) {
    const build = p.torchCuda ? `CUDA ${p.torchCuda} build` : "a CPU-only build";
    throw new UsageError(
      `no CUDA GPU visible to torch ${p.torch} (${build}) at ${p.executable}; GPU problems need one (--device cpu runs CPU problems); ${still}`,
    );
  }
  return { python: python.executable, probe: p };
}

export function registerEvalCommand(program: Command): void {
  const command = program
    .command("eval")
    .description("check candidate ModelNew files (or LLM transcripts) against a problem and time them")
    .argument("<problem>", "a built-in problem name (see kforge problems) or a KernelBench-format .py file")
    .argument("<candidates...>", "ModelNew .py files or transcripts (.md/.txt with ```python blocks)")
    .option("--json <file>", "write the results as JSON (- for stdout, which also silences the table)")
    .option("--html <file>", "write a self-contained HTML report")
    .option("--trials <n>", "correctness trials, each on fresh random inputs", positiveInt, 5)
    .option("--timeout <seconds>", "per-candidate limit, compile included", positiveNumber, 900)
    .option("--python <path>", "Python with torch (default: $KFORGE_PYTHON, then python3)")
    .addOption(
      new Option("--precision <dtype>", "cast floating inputs and both models").choices([
        "fp32",
        "fp16",
        "bf16",
      ]),
    )
    .option(
      "--allow-tf32",
      "allow TF32 float32 matmuls (torch.backends.cuda.matmul.allow_tf32) in both models",
    )
    .addOption(new Option("--device <device>", "where to run").choices(["cuda", "cpu"]).default("cuda"))
    .option("--no-timing", "check correctness only")
    .option("--iters <n>", "minimum timed iterations per model", positiveInt, DEFAULT_TIMING.minIters)
    .option("--budget <seconds>", "timing budget per candidate", positiveNumber, DEFAULT_TIMING.budgetSeconds)
    .option(
      "--seed <n>",
      "seed for building both models; trials' input seeds also mix in a per-run secret and are recorded (default: random)",
      nonNegativeInt,
    )
    .option("--atol <x>", "absolute tolerance override", positiveNumber)
    .option("--rtol <x>", "relative tolerance override", positiveNumber)
    .option("--strict", STRICT_HELP)
    .option(
      "--reference-process <on|off>",
      "run the reference in its own process that never imports the candidate (default: on)",
      onOff,
    )
    .option("--verbose", "stream the worker's log (compiler output, candidate prints) to stderr");
  addSuiteOptions(command);
  command.action(async (problemArg: string, candidateArgs: string[], flags: EvalFlags) => {
    const problem = resolveProblem(problemArg);
    for (const arg of candidateArgs) checkCandidateArg(arg);
    const setup = await setupSuite(flags, flags.device);
    const options: EvalOptions = {
      python: setup.python,
      cacheDir: cacheDir(),
      trials: flags.trials,
      timeoutSeconds: flags.timeout,
      device: flags.device,
      precision: flags.precision ?? null,
      allowTf32: flags.allowTf32 ?? false,
      strict: flags.strict ?? false,
      referenceProcess: flags.referenceProcess,
      seed: flags.seed,
      atol: flags.atol,
      rtol: flags.rtol,
      timing: {
        ...DEFAULT_TIMING,
        enabled: flags.timing,
        minIters: flags.iters,
        maxIters: Math.max(DEFAULT_TIMING.maxIters, flags.iters),
        budgetSeconds: flags.budget,
      },
    };
    const jsonToStdout = flags.json === "-";
    const progress = createSuiteProgress({
      enabled: !jsonToStdout,
      parallel: setup.parallel,
      stream: process.stderr,
      verbose: flags.verbose,
    });
    let results: EvalResult[];
    try {
      results = await evaluateSuite(
        candidateArgs.map((candidateArg) => ({ problem, candidateArg })),
        options,
        setup.suite,
        progress.hooks,
      );
    } finally {
      progress.stop();
    }
    const payload = `${JSON.stringify({ results }, null, 2)}\n`;
    if (jsonToStdout) process.stdout.write(payload);
    else {
      process.stdout.write(`${formatResultsTable(results, { color: useColor(process.stdout) })}\n`);
      if (flags.json) writeFileSync(flags.json, payload);
    }
    if (flags.html) writeHtmlReport(results, flags.html);
    process.exitCode = results.every((r) => r.verdict === "correct") ? 0 : 1;
  });
}
