import { mkdirSync, writeFileSync } from "node:fs";
import { basename, extname, join } from "node:path";
import { type Command, InvalidArgumentError, Option } from "commander";
import { type BenchCandidate, discoverCandidates } from "../../bench/discover.ts";
import { recordFileName, toBenchRecord } from "../../bench/records.ts";
import { checkCandidateArg } from "../../candidate/load.ts";
import { UsageError } from "../../errors.ts";
import { DEFAULT_TIMING } from "../../eval.ts";
import { cacheDir } from "../../paths.ts";
import { builtInProblems, type Problem, resolveProblem } from "../../problem/problems.ts";
import { writeHtmlReport } from "../../report/html.ts";
import { formatResultsTable, useColor } from "../../report/table.ts";
import { evaluateSuite } from "../../suite/eval-suite.ts";
import { type Pair, readPairs } from "../../suite/pairs.ts";
import { createSuiteProgress } from "../../suite/progress.ts";
import type { EvalResult } from "../../worker/protocol.ts";
import { positiveInt, positiveNumber } from "../args.ts";
import { addSuiteOptions, type SuiteFlags, setupSuite } from "../suite-flags.ts";
import { STRICT_HELP } from "./eval.ts";

interface BenchFlags extends SuiteFlags {
  pairs?: string;
  device: "cuda" | "cpu";
  records?: string;
  json?: string;
  html?: string;
  candidate: string[];
  trials: number;
  timeout: number;
  python?: string;
  budget: number;
  strict?: boolean;
}

/** The named problems (default: every built-in one) with their included candidates. */
function discoveredPlan(problemArgs: string[]): Map<Problem, BenchCandidate[]> {
  const problems = problemArgs.length ? problemArgs.map((p) => resolveProblem(p)) : builtInProblems();
  return new Map(problems.map((p) => [p, discoverCandidates(p)]));
}

/** A manifest's pairs, each problem resolved once, in the manifest's order. */
function planFromPairs(pairs: Pair[]): Map<Problem, BenchCandidate[]> {
  const byArg = new Map<string, Problem>();
  const plan = new Map<Problem, BenchCandidate[]>();
  for (const pair of pairs) {
    const problem = byArg.get(pair.problem) ?? resolveProblem(pair.problem);
    byArg.set(pair.problem, problem);
    checkCandidateArg(pair.candidate);
    const list = plan.get(problem) ?? [];
    list.push({ path: pair.candidate, variant: basename(pair.candidate, extname(pair.candidate)) });
    plan.set(problem, list);
  }
  return plan;
}

function collectPair(value: string, previous: string[]): string[] {
  if (!/^[^=]+=.+$/.test(value)) throw new InvalidArgumentError("expected PROBLEM=PATH");
  return [...previous, value];
}

export function registerBenchCommand(program: Command): void {
  const command = program
    .command("bench")
    .description("evaluate every included and generated candidate of built-in problems; write bench records")
    .argument("[problems...]", "problems to bench (default: all built-in problems)")
    .option(
      "--candidate <problem=path>",
      "also bench this file for that problem (repeatable)",
      collectPair,
      [],
    )
    .option(
      "--pairs <file>",
      "evaluate exactly the PROBLEM=CANDIDATE lines of this file (paths relative to it), nothing discovered",
    )
    .option("--records <dir>", "write one bench record JSON per (problem, variant) into this folder")
    .option("--json <file>", "write the full results as JSON")
    .option("--html <file>", "write a self-contained HTML report")
    .option("--trials <n>", "correctness trials", positiveInt, 5)
    .option("--timeout <seconds>", "per-candidate limit", positiveNumber, 900)
    .option("--budget <seconds>", "timing budget per candidate", positiveNumber, DEFAULT_TIMING.budgetSeconds)
    .option("--python <path>", "Python with torch (default: $KFORGE_PYTHON, then python3)")
    .option("--strict", STRICT_HELP)
    .addOption(new Option("--device <device>", "where to run").choices(["cuda", "cpu"]).default("cuda"));
  addSuiteOptions(command);
  command.action(async (problemArgs: string[], flags: BenchFlags) => {
    if (flags.pairs && problemArgs.length > 0)
      throw new UsageError("--pairs names its problems itself; give no problem arguments with it");
    const plan = flags.pairs ? planFromPairs(readPairs(flags.pairs)) : discoveredPlan(problemArgs);
    const problems = [...plan.keys()];
    for (const pair of flags.candidate) {
      const [name, path] = pair.split(/=(.*)/s) as [string, string];
      const problem = problems.find((p) => p.name === name);
      if (!problem)
        throw new UsageError(`--candidate names ${name}, which is not among the benched problems`);
      plan.get(problem)?.push({ path, variant: basename(path, extname(path)) });
    }
    const device = flags.device;
    const setup = await setupSuite(flags, device);
    const items = [...plan].flatMap(([problem, candidates]) =>
      candidates.map((c) => ({ problem, candidateArg: c.path, variant: c.variant })),
    );
    // Every (problem, candidate) of the run is one suite: all GPUs busy across problems, not per problem.
    const progress = createSuiteProgress({
      enabled: true,
      parallel: setup.parallel,
      stream: process.stderr,
      showProblem: true,
    });
    let all: EvalResult[];
    try {
      all = await evaluateSuite(
        items,
        {
          python: setup.python,
          cacheDir: cacheDir(),
          trials: flags.trials,
          timeoutSeconds: flags.timeout,
          device,
          precision: null,
          strict: flags.strict ?? false,
          timing: { ...DEFAULT_TIMING, budgetSeconds: flags.budget },
        },
        setup.suite,
        progress.hooks,
      );
    } finally {
      progress.stop();
    }
    if (flags.records) {
      mkdirSync(flags.records, { recursive: true });
      for (const [i, result] of all.entries()) {
        const record = toBenchRecord(result, items[i]?.variant ?? result.candidate);
        writeFileSync(join(flags.records, recordFileName(record)), `${JSON.stringify(record, null, 2)}\n`);
      }
    }
    process.stdout.write(`${formatResultsTable(all, { color: useColor(process.stdout) })}\n`);
    if (flags.json) writeFileSync(flags.json, `${JSON.stringify({ results: all }, null, 2)}\n`);
    if (flags.html) writeHtmlReport(all, flags.html);
    process.exitCode = all.length > 0 && all.every((r) => r.verdict === "correct") ? 0 : 1;
  });
}
