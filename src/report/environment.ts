// What a result says about where it ran. A result the worker never sent (it was killed, timed out, or never
// started: worker/results.ts's failedResult) has no environment and no tolerance: say so, instead of printing
// placeholders that read as measurements ("torch ?", "Python unknown", "atol 0").
import type { EvalResult } from "../worker/protocol.ts";

/** Whether the worker reported this result (false: the CLI wrote it when no worker result existed). */
export function reportedByWorker(result: EvalResult): boolean {
  return result.environment.python !== "unknown";
}

/** "torch 2.11 · CUDA 13.0 · driver 580 · Python 3.12", or why there is none. */
export function environmentText(result: EvalResult, sep = " · "): string {
  const env = result.environment;
  if (!reportedByWorker(result)) return "environment not reported (the worker ended before its result)";
  return [
    `torch ${env.torch ?? "?"}`,
    `CUDA ${env.cuda ?? "–"}`,
    `driver ${env.driver ?? "–"}`,
    `Python ${env.python}`,
  ].join(sep);
}

/** "atol 0.0001, rtol 0.0001", or "not reached" when the worker never chose one. */
export function toleranceText(result: EvalResult): string {
  if (!reportedByWorker(result)) return "not reached";
  return `atol ${result.tolerance.atol}, rtol ${result.tolerance.rtol}`;
}
