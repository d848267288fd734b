// The full eval of a problem's emitted file, started before the file exists: the worker imports torch,
// initialises the device, loads the problem and starts its clean reference process while the plan is made and
// timed, then waits (options.waitForGo). The candidate file is read only when `run()` lets it go, so what is
// judged is the file on disk then.
import { basename } from "node:path";
import { buildRequest, type EvalOptions } from "../eval.ts";
import type { Problem } from "../problem/problems.ts";
import type { EvalResult } from "../worker/protocol.ts";
import { runWorker } from "../worker/run.ts";

export interface EvalAhead {
  /** Settles once the worker waits for its candidate (or has ended): nothing of it runs on the device after. */
  ready: Promise<void>;
  /** Lets the worker read the candidate file and judge it; the same result on every call. */
  run(): Promise<EvalResult>;
  /** Ends a worker whose eval is not needed (it reports without judging anything). */
  cancel(): void;
}

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
  request.options.waitForGo = true;
  let letGo = () => {};
  let callOff = () => {};
  const go = new Promise<void>((resolve, reject) => {
    letGo = resolve;
    callOff = () => reject(new Error("called off"));
  });
  go.catch(() => {}); // a called-off eval is not an error of the caller's
  let markReady = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  const result = runWorker(request, {
    python: options.python,
    timeoutMs: options.timeoutSeconds * 1000,
    env,
    go,
    onProgress: (message) => {
      if (message.stage === "ready") markReady();
    },
  });
  void result.finally(markReady);
  return {
    ready,
    run: () => {
      letGo();
      return result;
    },
    cancel: () => callOff(),
  };
}
