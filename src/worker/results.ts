// Results the CLI writes itself, when no worker result exists (no code to run, timeout, crash).
import { type EvalRequest, type EvalResult, PROTOCOL_VERSION, type Verdict } from "./protocol.ts";

export function failedResult(
  request: EvalRequest,
  verdict: Verdict,
  reason: string,
  seconds = 0,
): EvalResult {
  return {
    protocol: PROTOCOL_VERSION,
    problem: request.problem.name,
    candidate: request.candidate.label,
    origin: request.candidate.origin,
    verdict,
    reason,
    environment: {
      python: "unknown",
      torch: null,
      cuda: null,
      driver: null,
      gpu: null,
      device: request.options.device,
    },
    precision: request.options.precision,
    allowTf32: request.options.allowTf32,
    strict: request.options.strict ?? false,
    paramSync: { mode: "seed", detail: "not reached" },
    compile: [],
    tolerance: { atol: request.problem.atol ?? 0, rtol: request.problem.rtol ?? 0 },
    trials: [],
    timing: null,
    checks: [],
    seconds,
  };
}
