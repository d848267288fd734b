// A worker started before its candidate's turn (request.options.waitForGo): it imports torch, sets up the
// device, loads the problem and starts its clean reference process while something else uses the GPU, then
// waits for `run()`. It reads the candidate file only then, so what is judged is the file on disk at that time.
// `pause()` stops its whole process group (SIGSTOP) so nothing of it competes with a measurement in progress.
import type { EvalRequest, EvalResult, ExtensionCache, ProgressMessage } from "./protocol.ts";
import { type RunWorkerOptions, runWorker } from "./run.ts";

export interface WorkerAhead {
  /** Settles once the worker waits for its go (or has ended): nothing of it runs on the device after. */
  ready: Promise<void>;
  /** Lets the worker read its candidate and judge it; the same result on every call. Progress and log lines
   * are passed to `hooks` from the go on (the set-up before it is nobody's business). `extensionCache` follows
   * the go line (known only once the candidate's prebuild is done). */
  run(
    hooks?: Pick<RunWorkerOptions, "onProgress" | "onLog">,
    extensionCache?: ExtensionCache,
  ): Promise<EvalResult>;
  /** Ends a worker whose eval is not needed (it reports without judging anything). */
  cancel(): void;
  pause(): void;
  resume(): void;
}

export function startWorkerAhead(
  request: EvalRequest,
  options: Omit<RunWorkerOptions, "go" | "onProgress" | "onLog" | "onSpawn">,
): WorkerAhead {
  const gated: EvalRequest = { ...request, options: { ...request.options, waitForGo: true } };
  let letGo: (extensionCache?: ExtensionCache) => void = () => {};
  let callOff = () => {};
  const go = new Promise<ExtensionCache | undefined>((resolve, reject) => {
    letGo = resolve;
    callOff = () => reject(new Error("called off"));
  });
  go.catch(() => {}); // a called-off eval is not an error of the caller's
  let markReady = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  let hooks: Pick<RunWorkerOptions, "onProgress" | "onLog"> = {};
  let pid: number | undefined;
  let paused = false;
  const signal = (sig: NodeJS.Signals) => {
    if (pid === undefined) return;
    try {
      process.kill(-pid, sig);
    } catch {
      // the group has already ended
    }
  };
  const result = runWorker(gated, {
    ...options,
    go,
    onSpawn: (p) => {
      pid = p;
    },
    onProgress: (message: ProgressMessage) => {
      if (message.stage === "ready") markReady();
      hooks.onProgress?.(message);
    },
    onLog: (line) => hooks.onLog?.(line),
  });
  void result.finally(markReady);
  const resume = () => {
    if (!paused) return;
    paused = false;
    signal("SIGCONT");
  };
  return {
    ready,
    run: (runHooks = {}, extensionCache = undefined) => {
      hooks = runHooks;
      resume();
      letGo(extensionCache);
      return result;
    },
    cancel: () => {
      resume();
      callOff();
    },
    pause: () => {
      if (paused) return;
      paused = true;
      signal("SIGSTOP");
    },
    resume,
  };
}
