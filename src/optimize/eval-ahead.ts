// The full eval of a problem's emitted file, started before the file exists (worker/ahead.ts): the worker
// imports torch, initialises the device, loads the problem and starts its clean reference process while the
// plan is made and timed, then waits. The candidate file is read only when `run()` lets it go.
import { basename } from "node:path";
import { buildRequest, type EvalOptions } from "../eval.ts";
import type { Problem } from "../problem/problems.ts";
import { startWorkerAhead, type WorkerAhead } from "../worker/ahead.ts";

export type EvalAhead = Pick<WorkerAhead, "ready" | "run" | "cancel">;

export function startEvalAhead(
  problem: Problem,
  candidatePath: string,
  options: EvalOptions,
  env: Record<string, string> = {},
): EvalAhead {
  const request = buildRequest(
    problem,
    {
      label: basename(candidatePath),
      codePath: candidatePath,
      origin: { kind: "file", sourcePath: candidatePath, blockIndex: null, blockCount: null, note: null },
    },
    options,
  );
  return startWorkerAhead(request, { python: options.python, timeoutMs: options.timeoutSeconds * 1000, env });
}
