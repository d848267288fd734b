// `kforge eval` as a library: one problem, several candidates, each in its own worker process.
import { randomBytes, randomInt } from "node:crypto";
import { loadCandidate } from "./candidate/load.ts";
import type { Problem } from "./problem/problems.ts";
import type {
  EvalRequest,
  EvalResult,
  Precision,
  ProgressMessage,
  TimingOptions,
} from "./worker/protocol.ts";
import { PROTOCOL_VERSION } from "./worker/protocol.ts";
import { failedResult } from "./worker/results.ts";
import { runWorker } from "./worker/run.ts";

export interface EvalOptions {
  python: string;
  cacheDir: string;
  trials: number;
  timeoutSeconds: number;
  device: "cuda" | "cpu";
  precision: Precision | null;
  allowTf32?: boolean;
  seed?: number;
  timing: TimingOptions;
  atol?: number;
  rtol?: number;
  checks?: string[];
  /** Running the operator family the problem replaces is cheating (default: disclosed). */
  strict?: boolean;
}

export interface EvalHooks {
  candidateStarted?: (label: string, index: number, total: number) => void;
  progress?: (message: ProgressMessage) => void;
  candidateFinished?: (result: EvalResult) => void;
  log?: (line: string) => void;
}

export const DEFAULT_TIMING: TimingOptions = {
  enabled: true,
  warmupIters: 5,
  minIters: 50,
  maxIters: 1000,
  budgetSeconds: 30,
  targetRelativeCi: 0.02,
};

export function buildRequest(
  problem: Problem,
  candidate: { label: string; codePath: string; origin: EvalRequest["candidate"]["origin"] },
  options: EvalOptions,
): EvalRequest {
  return {
    protocol: PROTOCOL_VERSION,
    nonce: randomBytes(16).toString("hex"),
    problem: {
      path: problem.path,
      name: problem.name,
      atol: options.atol ?? null,
      rtol: options.rtol ?? null,
    },
    candidate: { path: candidate.codePath, label: candidate.label, origin: candidate.origin },
    options: {
      trials: options.trials,
      seed: options.seed ?? randomInt(0, 2 ** 31 - 1),
      precision: options.precision,
      allowTf32: options.allowTf32 ?? false,
      device: options.device,
      timing: options.timing,
      cacheDir: options.cacheDir,
      checks: options.checks ?? [],
      strict: options.strict ?? false,
    },
  };
}

/** Evaluates candidates one after another; a candidate that crashes or hangs does not affect the next. */
export async function evaluate(
  problem: Problem,
  candidateArgs: string[],
  options: EvalOptions,
  hooks: EvalHooks = {},
): Promise<EvalResult[]> {
  // Load everything first so a bad argument fails the batch before any work starts.
  const candidates = candidateArgs.map((arg) => loadCandidate(arg, options.cacheDir));
  const results: EvalResult[] = [];
  for (const [index, candidate] of candidates.entries()) {
    hooks.candidateStarted?.(candidate.label, index, candidates.length);
    let result: EvalResult;
    if (candidate.codePath === null) {
      const request = buildRequest(problem, { ...candidate, codePath: "" }, options);
      result = failedResult(request, "no_code", candidate.origin.note ?? "no code found");
    } else {
      const request = buildRequest(problem, { ...candidate, codePath: candidate.codePath }, options);
      result = await runWorker(request, {
        python: options.python,
        timeoutMs: options.timeoutSeconds * 1000,
        onProgress: hooks.progress,
        onLog: hooks.log,
      });
    }
    hooks.candidateFinished?.(result);
    results.push(result);
  }
  return results;
}
