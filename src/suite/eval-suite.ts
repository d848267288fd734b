// Evaluates (problem, candidate) pairs as one suite: every local GPU kept busy by the scheduler (or a Ray
// cluster), extension builds run ahead on the CPU, each result journaled as it arrives, a resumed run
// skipping what a previous one finished.
import { readFileSync } from "node:fs";
import { loadCandidate } from "../candidate/load.ts";
import { buildRequest, type EvalOptions } from "../eval.ts";
import type { Problem } from "../problem/problems.ts";
import { startWorkerAhead } from "../worker/ahead.ts";
import type { EvalRequest, EvalResult, ProgressMessage } from "../worker/protocol.ts";
import { failedResult } from "../worker/results.ts";
import { runWorker } from "../worker/run.ts";
import { ExtensionLedger } from "./extension-cache.ts";
import { appendJournal, readJournal, taskKey } from "./journal.ts";
import { needsPrebuild, prebuildCandidate } from "./prebuild.ts";
import { type RayOptions, runOnRay } from "./ray.ts";
import { type Slot, SlotError, schedule } from "./scheduler.ts";

export interface SuiteItem {
  problem: Problem;
  candidateArg: string;
}

export interface SuiteOptions {
  /** Local worker slots (one per GPU); default one slot with the worker's usual environment. */
  slots?: Slot[];
  /** Extension builds run ahead on the CPU at once; 0 or absent: none (the worker compiles for itself). */
  prebuildJobs?: number;
  /** Environment shared by prebuilds and workers (gpus.ts buildEnv). */
  buildEnv?: Record<string, string>;
  /** Run every evaluation as a Ray task instead of on local slots. */
  ray?: RayOptions;
  /** Append each result here as one JSON line (journal.ts). */
  journal?: string;
  /** Take results already in the journal instead of running those tasks again. */
  resume?: boolean;
  /** Each local slot starts its next candidate's worker while the current one runs (worker/ahead.ts),
   * paused while the current one is timed: the next eval's start-up (torch, the device, the reference
   * process) is then off the GPU's critical path. */
  workersAhead?: boolean;
  /** How many workers each slot keeps started ahead (default 1): two when one start-up outlasts the untimed
   * part of a candidate (the ones ahead are paused while it is timed). */
  aheadDepth?: number;
}

export interface EvalTask {
  index: number;
  problem: Problem;
  label: string;
  request: EvalRequest;
  /** Null when the candidate holds no code (settled as no_code without a worker). */
  codePath: string | null;
  key: string;
}

export interface SuiteHooks {
  started?: (task: EvalTask, slot: string, total: number) => void;
  progress?: (task: EvalTask, slot: string, message: ProgressMessage) => void;
  log?: (task: EvalTask, slot: string, line: string) => void;
  finished?: (task: EvalTask, result: EvalResult, slot: string | null, done: SuiteCounts) => void;
  /** Results taken from the journal, before any work starts. */
  resumed?: (count: number, tornLines: number) => void;
  note?: (line: string) => void;
}

export interface SuiteCounts {
  done: number;
  total: number;
  /** Finished in this run (resumed results excluded): the ETA's rate. */
  ranHere: number;
}

/** Loads every candidate up front, so a bad argument fails the suite before any work starts. */
export function suiteTasks(items: SuiteItem[], options: EvalOptions): EvalTask[] {
  return items.map((item, index) => {
    const candidate = loadCandidate(item.candidateArg, options.cacheDir);
    const codePath = candidate.codePath;
    const request = buildRequest(item.problem, { ...candidate, codePath: codePath ?? "" }, options);
    const key = taskKey({
      files: [readFileSync(item.problem.path), codePath === null ? "" : readFileSync(codePath)],
      settings: {
        problem: item.problem.name,
        candidate: candidate.label,
        source: candidate.origin.sourcePath,
        block: candidate.origin.blockIndex,
        options: { ...request.options, seed: options.seed ?? null, cacheDir: undefined },
        atol: request.problem.atol,
        rtol: request.problem.rtol,
      },
    });
    return { index, problem: item.problem, label: candidate.label, request, codePath, key };
  });
}

/** The worker result that means the GPU itself is unusable, not the candidate: its task goes to another GPU. */
function gpuLost(result: EvalResult): boolean {
  // pipeline.py's message when torch sees no GPU although one was asked for.
  return (
    result.verdict === "runtime_error" &&
    /^device cuda requested but .* sees no GPU/.test(result.reason ?? "")
  );
}

export async function evaluateSuite(
  items: SuiteItem[],
  options: EvalOptions,
  suite: SuiteOptions = {},
  hooks: SuiteHooks = {},
): Promise<EvalResult[]> {
  const tasks = suiteTasks(items, options);
  const ledger = new ExtensionLedger(); // before any candidate's code runs
  const results = new Array<EvalResult>(tasks.length);
  const counts: SuiteCounts = { done: 0, total: tasks.length, ranHere: 0 };

  const previous = suite.resume && suite.journal ? readJournal(suite.journal) : null;
  const todo: EvalTask[] = [];
  for (const task of tasks) {
    const old = previous?.results.get(task.key);
    if (old) {
      results[task.index] = old;
      counts.done += 1;
    } else todo.push(task);
  }
  if (previous) hooks.resumed?.(counts.done, previous.skipped);

  const startedAt = new Map<number, number>();
  const settle = (task: EvalTask, result: EvalResult, slot: string | null) => {
    results[task.index] = result;
    counts.done += 1;
    counts.ranHere += 1;
    if (suite.journal)
      appendJournal(suite.journal, {
        key: task.key,
        result,
        slot,
        startedAt: startedAt.get(task.index),
        finishedAt: Date.now(),
      });
    hooks.finished?.(task, result, slot, { ...counts });
  };

  const runnable: EvalTask[] = [];
  for (const task of todo) {
    if (task.codePath === null)
      settle(
        task,
        failedResult(task.request, "no_code", task.request.candidate.origin.note ?? "no code found"),
        null,
      );
    else runnable.push(task);
  }

  const timeoutMs = options.timeoutSeconds * 1000;
  if (suite.ray) {
    await runOnRay(
      runnable,
      { ...suite.ray, python: options.python, timeoutMs },
      {
        finished: (task, result, node) => settle(task, result, node),
        note: hooks.note,
      },
    );
  } else {
    const slots = suite.slots ?? [{ id: "local", env: suite.buildEnv ?? {} }];
    await schedule(runnable, {
      slots,
      prepareConcurrency: suite.prebuildJobs ?? 0,
      prepare: async (task) => {
        const codePath = task.codePath;
        if (codePath === null || !needsPrebuild(codePath)) return;
        const source = task.request.candidate.source;
        const prebuild = async () => {
          const built = await prebuildCandidate(codePath, {
            python: options.python,
            cacheDir: options.cacheDir,
            timeoutMs,
            env: suite.buildEnv ?? {},
            source,
            since: source === undefined ? undefined : ledger.since,
          });
          ledger.record(source, built.libraries);
          if (built.error)
            hooks.note?.(`${task.label}: prebuild: ${built.error.split("\n")[0]} (the worker builds it)`);
        };
        await (source === undefined ? prebuild() : ledger.prebuildOnce(source, prebuild));
      },
      aheadDepth: suite.aheadDepth,
      startAhead: suite.workersAhead
        ? (task, slot) => startWorkerAhead(task.request, { python: options.python, timeoutMs, env: slot.env })
        : undefined,
      run: async (task, slot, turn) => {
        const workerHooks = {
          onProgress: (message: ProgressMessage) => {
            // The next candidate's set-up never overlaps this one's timing.
            if (message.stage === "time") for (const next of turn.next) next.pause();
            hooks.progress?.(task, slot.id, message);
          },
          onLog: hooks.log ? (line: string) => hooks.log?.(task, slot.id, line) : undefined,
        };
        // Checked by the worker before the import: what the suite's builds left in the candidate's extension folder.
        const extensionCache = ledger.expectation(task.request.candidate.source);
        let result: EvalResult;
        try {
          result = turn.ahead
            ? await turn.ahead.run(workerHooks, extensionCache)
            : await runWorker(extensionCache ? { ...task.request, extensionCache } : task.request, {
                python: options.python,
                timeoutMs,
                env: slot.env,
                ...workerHooks,
              });
        } finally {
          for (const next of turn.next) next.resume();
        }
        ledger.record(task.request.candidate.source, result.extensionLibraries);
        if (slots.length > 1 && gpuLost(result)) throw new SlotError(result.reason ?? "GPU lost");
        return result;
      },
      giveUp: (task, why) => failedResult(task.request, "runtime_error", `no GPU could run it: ${why}`),
      onStart: (task, slot) => {
        startedAt.set(task.index, Date.now());
        hooks.started?.(task, slot.id, tasks.length);
      },
      onResult: (task, result, slot) => settle(task, result, slot?.id ?? null),
      onSlotRetired: (slot, why) => hooks.note?.(`${slot.id} retired after repeated failures: ${why}`),
    });
  }
  return results;
}
