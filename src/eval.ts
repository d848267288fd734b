// `kforge eval` as a library: one problem, several candidates, each in its own worker process.
import { randomBytes, randomInt } from "node:crypto";
import type { Problem } from "./problem/problems.ts";
import { evaluateSuite, type SuiteOptions } from "./suite/eval-suite.ts";
import type {
  EvalRequest,
  EvalResult,
  Precision,
  ProgressMessage,
  TimingOptions,
} from "./worker/protocol.ts";
import { PROTOCOL_VERSION } from "./worker/protocol.ts";

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
  /** The reference in its own clean process (undefined: the worker's default for the device). */
  referenceProcess?: boolean;
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
  candidate: {
    label: string;
    codePath: string;
    origin: EvalRequest["candidate"]["origin"];
    source?: string | null;
  },
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
    candidate: {
      path: candidate.codePath,
      label: candidate.label,
      origin: candidate.origin,
      ...(typeof candidate.source === "string" ? { source: candidate.source } : {}),
    },
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
      ...(options.referenceProcess === undefined ? {} : { referenceProcess: options.referenceProcess }),
    },
  };
}

/**
 * Evaluates candidates, each in its own worker process: a candidate that crashes or hangs does not affect the
 * next. With `suite` options they run as a suite (several GPUs, prebuilds, Ray, a journal); without, one after
 * another on the usual device, as a single-slot suite.
 */
export async function evaluate(
  problem: Problem,
  candidateArgs: string[],
  options: EvalOptions,
  hooks: EvalHooks = {},
  suite: SuiteOptions = {},
): Promise<EvalResult[]> {
  return evaluateSuite(
    candidateArgs.map((candidateArg) => ({ problem, candidateArg })),
    options,
    suite,
    {
      started: (task, _slot, total) => hooks.candidateStarted?.(task.label, task.index, total),
      progress: (_task, _slot, message) => hooks.progress?.(message),
      log: hooks.log ? (_task, _slot, line) => hooks.log?.(line) : undefined,
      finished: (_task, result) => hooks.candidateFinished?.(result),
      note: hooks.log,
    },
  );
}
