import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { basename, join, resolve } from "node:path";
import type { Command } from "commander";
import { UsageError } from "../../errors.ts";
import type { BenchSession } from "../../optimize/bench-session.ts";
import { captureProblem, captureProblems } from "../../optimize/capture.ts";
import { type EvalAhead, startEvalAhead } from "../../optimize/eval-ahead.ts";
import type { Graph } from "../../optimize/graph.ts";
import {
  type OptimizeOptions,
  type OptimizeResult,
  type Prepared,
  prebuild,
  prebuildLikelyRetimes,
  prepareProblem,
  reusableResult,
  startBenchAhead,
  verifyEvalOptions,
  verifyProblem,
} from "../../optimize/optimize.ts";
import { SlotAhead } from "../../optimize/slot-ahead.ts";
import { cacheDir } from "../../paths.ts";
import { type Problem, resolveProblem } from "../../problem/problems.ts";
import { compileCheckNote } from "../../report/compile-check-note.ts";
import { graphReplayNote } from "../../report/graph-replay-note.ts";
import { writeHtmlReport } from "../../report/html.ts";
import { loadResultsFile } from "../../report/load.ts";
import { regionStatusText } from "../../report/optimize-summary.ts";
import { formatOptimizeTable } from "../../report/optimize-table.ts";
import { useColor } from "../../report/table.ts";
import { type GpuRequest, gpuSlots, parseGpus } from "../../suite/gpus.ts";
import { schedule } from "../../suite/scheduler.ts";
import { choosePython } from "../../worker/python.ts";
import { positiveInt, positiveNumber } from "../args.ts";
import { requireWorkerProbe } from "./eval.ts";

/** torch.compile warm-ups running at once ahead of a suite's GPU loop. */
const WARM_COMPILES = 2;

interface OptimizeFlags {
  output?: string;
  outDir: string;
  json?: string;
  html?: string;
  verify: boolean;
  python?: string;
  device: "cuda" | "cpu";
  trials: number;
  timeout: number;
  iters: number;
  compileBaseline: boolean;
  jobs: number;
  gpus?: GpuRequest;
  resume: boolean;
}

const DEFINES_MODEL = /^class[ \t]+Model\b/m;

/** Problems named by the arguments: built-in names, files, or folders of KernelBench-format files. */
export function expandTargets(targets: string[]): Problem[] {
  const problems: Problem[] = [];
  for (const target of targets) {
    if (existsSync(target) && statSync(target).isDirectory()) {
      const files = readdirSync(target)
        .filter((f) => f.endsWith(".py") && !f.startsWith("_"))
        .map((f) => join(target, f))
        .filter((f) => DEFINES_MODEL.test(readFileSync(f, "utf8")))
        .sort();
      if (files.length === 0)
        throw new UsageError(`${target}: no KernelBench-format .py files (class Model) in it`);
      problems.push(...files.map((f) => resolveProblem(f)));
    } else {
      problems.push(resolveProblem(target));
    }
  }
  return problems;
}

function fmt(x: number | null, digits = 2, suffix = ""): string {
  return x === null ? "—" : `${x.toFixed(digits)}${suffix}`;
}

function describe(result: OptimizeResult): string {
  const lines = [
    `${result.problem}: ${result.verdict ?? "not verified"}${result.reason ? ` (${result.reason.split("\n")[0]})` : ""}`,
  ];
  if (result.captured === "none")
    lines.push(`  not captured: ${result.captureFailure ?? "?"} — the file runs the reference's forward`);
  if (result.speedup !== null || result.oursMs !== null) {
    lines.push(
      `  eager ${fmt(result.eagerMs, 3, " ms")} · torch.compile ${fmt(result.compiledMs, 3, " ms")} · ours ${fmt(result.oursMs, 3, " ms")}` +
        ` → ${fmt(result.speedup, 2, "×")} vs eager, ${fmt(result.speedupVsCompile, 2, "×")} vs torch.compile`,
    );
  }
  const compileNote = compileCheckNote(result);
  if (compileNote) lines.push(`  ${compileNote}`);
  const replay = graphReplayNote(result);
  if (replay) lines.push(`  ${replay}`);
  for (const region of result.regions) {
    const gain = region.kernelMs && region.torchMs ? ` ${fmt(region.torchMs / region.kernelMs, 2, "×")}` : "";
    lines.push(`  ${region.id} ${region.summary}: ${regionStatusText(region)}${gain}`);
  }
  if (result.rejected)
    lines.push(
      `  kernels rejected: ${result.rejected.verdict} (${result.rejected.reason?.split("\n")[0] ?? ""})`,
    );
  for (const kept of result.kept) lines.push(`  kept ${kept.node} (${kept.op}): ${kept.reason}`);
  lines.push(`  → ${result.output}`);
  return lines.join("\n");
}

/** The --json file's results that still hold for these problems (see reusableResult), by problem path. */
function keptResults(
  file: string,
  problems: Problem[],
  outputOf: (problem: Problem) => string,
  options: OptimizeOptions,
): Map<string, OptimizeResult> {
  const kept = new Map<string, OptimizeResult>();
  if (!existsSync(file)) return kept;
  let previous: OptimizeResult[];
  try {
    previous = loadResultsFile(file).optimize;
  } catch (error) {
    throw new UsageError(`--resume: ${(error as Error).message.split("\n")[0]}`);
  }
  for (const problem of problems) {
    const before = previous.find((r) => r.problemPath === problem.path);
    const reused = reusableResult(before, problem.path, outputOf(problem), options);
    if (reused) kept.set(problem.path, reused);
  }
  return kept;
}

export function registerOptimizeCommand(program: Command): void {
  program
    .command("optimize")
    .description(
      "capture a KernelBench-format model, fuse its ops into generated CUDA kernels, emit one ModelNew file, verify and time it",
    )
    .argument("<targets...>", "built-in problem names, KernelBench-format .py files, or folders of them")
    .option("-o, --output <file>", "where to write the ModelNew (one target only)")
    .option("--out-dir <dir>", "folder for the ModelNew files of several targets", "optimized")
    .option("--json <file>", "write the results as JSON (for kforge report)")
    .option("--html <file>", "write the HTML report of the results (as kforge report does)")
    .option("--no-verify", "capture, plan and emit only (no GPU needed)")
    .option("--python <path>", "Python with torch (default: $KFORGE_PYTHON, then python3)")
    .option("--device <device>", "where to verify and time", "cuda")
    .option("--trials <n>", "correctness trials of the full eval", positiveInt, 5)
    .option(
      "--timeout <seconds>",
      "per-problem limit for each worker (compile included)",
      positiveNumber,
      900,
    )
    .option(
      "--iters <n>",
      "timed rounds of the eager/compile/ours comparison (more for fast forwards, fewer past ~2 s)",
      positiveInt,
      50,
    )
    .option("--no-compile-baseline", "skip timing torch.compile(reference)")
    .option(
      "--jobs <n>",
      "parallel extension builds",
      positiveInt,
      Math.max(1, Math.floor(availableParallelism() / 2)),
    )
    .option("--gpus <n|all>", "GPUs to verify and time problems on, one problem per GPU at a time", parseGpus)
    .option(
      "--resume",
      "keep the --json file's verified results whose problem, emitted file and settings are unchanged",
      false,
    )
    .action(async (targets: string[], flags: OptimizeFlags) => {
      const problems = expandTargets(targets);
      if (flags.output && problems.length > 1)
        throw new UsageError("-o/--output takes one target; use --out-dir for several");
      // The Python the probe checks (requireWorkerProbe picks the same one): work that needs no GPU answer starts
      // beside the probe, which is one more process importing torch.
      const python = choosePython(flags.python).executable;
      const startedAt = performance.now();
      const since = () => Math.round(performance.now() - startedAt) / 1000;
      const options: OptimizeOptions = {
        startedAt,
        python,
        cacheDir: cacheDir(),
        verify: flags.verify,
        device: flags.device,
        trials: flags.trials,
        timeoutSeconds: flags.timeout,
        benchIters: flags.iters,
        compileBaseline: flags.compileBaseline,
        log: (line) => process.stderr.write(`${line}\n`),
      };
      if (flags.resume && !flags.json)
        throw new UsageError("--resume reads the results of --json FILE: give it");
      const outputOf = (problem: Problem) =>
        resolve(flags.output ?? join(flags.outDir, `${basename(problem.path, ".py")}_new.py`));
      const kept =
        flags.resume && flags.json ? keptResults(flags.json, problems, outputOf, options) : new Map();
      const todo = problems.filter((p) => !kept.has(p.path));
      // One capture worker for a suite (torch imported once); a single problem captures on its own.
      const capturing: Promise<(Graph | Error | undefined)[]> =
        todo.length > 1
          ? captureProblems(
              todo.map((p) => p.path),
              { python, cacheDir: options.cacheDir },
            )
          : todo.length === 1 && todo[0]
            ? captureProblem(todo[0].path, { python, cacheDir: options.cacheDir }).then(
                (graph) => [graph],
                (error: unknown) => [error instanceof Error ? error : new Error(String(error))],
              )
            : Promise.resolve([]);
      // A single problem's bench worker (torch.compile of the reference) and eval worker (problem loaded,
      // reference process started, then waiting for the file) start now too, beside its capture: they are
      // what a warm run waits for. A chosen --gpus decides the GPU later, so then they start at its turn.
      const single = todo.length === 1 ? todo[0] : undefined;
      // A single problem's milestones are printed as they come (a suite has its progress lines and ETA).
      const milestone = single
        ? (name: string, seconds: number) =>
            process.stderr.write(`${single.name}: ${seconds.toFixed(1)} s ${name}\n`)
        : undefined;
      options.onMilestone = milestone;
      const early =
        single && flags.verify && flags.device === "cuda" && flags.gpus === undefined
          ? {
              bench: startBenchAhead(single, options),
              eval: startEvalAhead(single, outputOf(single), verifyEvalOptions(options)),
            }
          : null;
      const callOffEarly = () => {
        early?.bench.close();
        early?.eval.cancel();
      };
      const commandMarks: Record<string, number> = {};
      let probe: Awaited<ReturnType<typeof requireWorkerProbe>>["probe"] | undefined;
      try {
        probe = flags.verify ? (await requireWorkerProbe(flags.python, flags.device)).probe : undefined;
        if (probe) {
          commandMarks.probed = since();
          milestone?.("probed", commandMarks.probed);
        }
      } catch (error) {
        callOffEarly();
        throw error;
      }
      if (kept.size > 0)
        process.stderr.write(`kforge: --resume keeps ${kept.size} verified result(s) from ${flags.json}\n`);
      const results: OptimizeResult[] = [...kept.values()];
      for (const result of kept.values()) process.stdout.write(`${describe(result)} (kept: --resume)\n`);
      const started = performance.now();
      const prepared: Prepared[] = [];
      const graphs = await capturing;
      commandMarks.captured = since();
      milestone?.("captured", commandMarks.captured);
      for (const [index, problem] of todo.entries()) {
        const output = outputOf(problem);
        try {
          const graph = graphs[index];
          if (graph instanceof Error) throw graph;
          const item = await prepareProblem(problem, output, options, graph);
          item.result.seconds.timeline = { ...commandMarks, prepared: since() };
          prepared.push(item);
        } catch (error) {
          if (error instanceof UsageError && problems.length === 1) {
            callOffEarly();
            throw error;
          }
          process.stderr.write(`kforge: ${problem.name}: ${(error as Error).message.split("\n")[0]}\n`);
          process.exitCode = 1;
        }
      }
      // The GPU work of a suite goes through the scheduler: one problem per GPU at a time, every step of a
      // problem (region timing, eval, final bench) pinned to that GPU; results keep the problems' order.
      // Extension builds (CPU-bound, independent) run ahead in a pool of --jobs, overlapping the GPU work.
      const builds = flags.verify && flags.device === "cuda";
      const slots = builds ? gpuSlots(flags.gpus, probe ?? {}) : [{ id: "local", env: {} }];
      // The warm-up is the problem's own bench worker (and its eval worker): started ahead, it has imported
      // torch, built the reference and compiled it when the problem's turn comes, and serves every bench of the
      // problem. A single problem's started with its capture (above). On one GPU up to WARM_COMPILES problems
      // ahead. On several, the scheduler reserves each GPU's next problem and its workers start, pinned to that
      // GPU, when the current problem's eval starts (SlotAhead); a problem another GPU takes over from a busy
      // one's reservation starts cold.
      const warmAhead = builds && prepared.length > 1;
      const ahead: (BenchSession | undefined)[] = [];
      const evalAhead: (EvalAhead | undefined)[] = [];
      if (early && prepared.length === 1) {
        ahead[0] = early.bench;
        evalAhead[0] = early.eval;
      } else callOffEarly(); // its capture failed
      // With each bench worker, the problem's eval worker: it waits for the file, idle while the bench times.
      const startAhead = (position: number) => {
        const item = prepared[position];
        if (!warmAhead || slots.length !== 1 || !item || ahead[position]) return;
        const env = slots[0]?.env ?? {};
        ahead[position] = startBenchAhead(item.problem, { ...options, env });
        evalAhead[position] = startEvalAhead(item.problem, item.output, verifyEvalOptions(options), env);
      };
      startAhead(0);
      // One problem builds its file in its first bench; the file a re-timing would emit builds meanwhile.
      const retimesAhead = new AbortController();
      const onlyPrepared = builds && prepared.length === 1 ? prepared[0] : undefined;
      const retimesBuilt = onlyPrepared
        ? prebuildLikelyRetimes(onlyPrepared, options, retimesAhead.signal)
        : Promise.resolve();
      const perSlot = warmAhead && slots.length > 1;
      const byIndex: (OptimizeResult | undefined)[] = [...kept.values()];
      const first = byIndex.length;
      let done = 0;
      await schedule(
        prepared.map((item, index) => ({ item, index: first + index })),
        {
          slots,
          // One problem has nothing to overlap its build with: its first bench builds the extensions, in the
          // process that times them (a prebuild would be one more process importing torch).
          prepareConcurrency:
            builds && prepared.length > 1 ? Math.max(1, Math.min(flags.jobs, prepared.length)) : 0,
          prepare: async ({ item }) => {
            const [error] = await Promise.all([
              prebuild(item, options),
              prebuildLikelyRetimes(item, options),
            ]);
            if (error)
              process.stderr.write(`kforge: ${item.problem.name}: build failed: ${error.split("\n")[0]}\n`);
          },
          onStart: ({ item }, slot) => {
            if (prepared.length <= 1) return;
            const elapsed = (performance.now() - started) / 1000;
            const eta = done > 0 ? ` · ETA ${Math.round((elapsed / done) * (prepared.length - done))} s` : "";
            const where = slots.length > 1 ? ` on ${slot.id}` : "";
            process.stderr.write(`[${done + 1}/${prepared.length}] ${item.problem.name}${where}${eta}\n`);
          },
          startAhead: perSlot
            ? ({ item }, slot) => new SlotAhead(item.problem, item.output, { ...options, env: slot.env })
            : undefined,
          run: async ({ item, index }, slot, turn) => {
            startAhead(index - first);
            turn.ahead?.start();
            return flags.verify
              ? await verifyProblem(item, {
                  ...options,
                  env: slot.env,
                  benchAhead: turn.ahead?.bench ?? ahead[index - first],
                  evalAhead: turn.ahead?.eval ?? evalAhead[index - first],
                  // The next problems' workers start while this one's eval runs: their torch.compile's first
                  // call then lands on a GPU that is not being timed.
                  onEvaluate: () => {
                    turn.next[0]?.start();
                    for (let next = 1; next <= WARM_COMPILES; next++) startAhead(index - first + next);
                  },
                })
              : item.result;
          },
          giveUp: ({ item }, why) => ({ ...item.result, error: why }),
          onResult: ({ index }, result) => {
            done += 1;
            byIndex[index] = result;
            results.splice(0, results.length, ...byIndex.filter((r) => r !== undefined));
            process.stdout.write(`${describe(result)}\n`);
            // Rewritten after every problem, so a long run that is cut short still leaves its results.
            if (flags.json) writeFileSync(flags.json, `${JSON.stringify({ optimize: results }, null, 2)}\n`);
            if (flags.html)
              writeHtmlReport({ results: [], optimize: results }, flags.html, { title: "kforge optimize" });
            if (flags.verify && result.verdict !== "correct") process.exitCode = 1;
          },
        },
      );
      // Those of problems given up before their turn.
      retimesAhead.abort();
      await retimesBuilt.catch(() => {});
      for (const session of ahead) session?.close();
      for (const pending of evalAhead) pending?.cancel();
      if (results.length > 1) {
        const width = process.stdout.columns && process.stdout.columns > 0 ? process.stdout.columns : 100;
        process.stdout.write(`\n${formatOptimizeTable(results, { color: useColor(process.stdout), width })}`);
      }
    });
}
