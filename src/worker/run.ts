// Runs one candidate in one fresh worker process. A CUDA fault poisons its context, a candidate may hang,
// fork or crash: so each gets its own process group, killed whole on timeout and after it ends.
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import { execa } from "execa";
import { type EvalRequest, type EvalResult, type ProgressMessage, WorkerMessage } from "./protocol.ts";
import { workerEnv } from "./python.ts";
import { failedResult } from "./results.ts";

export interface RunWorkerOptions {
  python: string;
  timeoutMs: number;
  onProgress?: (message: ProgressMessage) => void;
  /** Called with each line the worker writes to stderr (the candidate's prints, compiler output, logs). */
  onLog?: (line: string) => void;
}

const STDERR_TAIL_LINES = 40;

function killGroup(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(-pid, "SIGKILL");
    return true;
  } catch {
    return false; // the group is already gone
  }
}

function lastUsefulLines(lines: string[], count = 12): string {
  return lines
    .filter((l) => l.trim() !== "")
    .slice(-count)
    .join("\n");
}

export async function runWorker(request: EvalRequest, options: RunWorkerOptions): Promise<EvalResult> {
  const started = Date.now();
  // The secret seed reaches the worker only through its environment, which the worker clears after reading.
  const secret = randomBytes(8).readBigUInt64BE().toString();
  const child = execa(options.python, ["-m", "kforge_worker"], {
    input: JSON.stringify(request),
    env: workerEnv({ KFORGE_SECRET_SEED: secret }),
    detached: true,
    buffer: false,
    reject: false,
    stdio: ["pipe", "pipe", "pipe"],
    cleanup: true,
  });

  let result: EvalResult | null = null;
  let resultCount = 0;
  const forged: string[] = [];
  const protocolErrors: string[] = [];
  const stderrTail: string[] = [];

  const stdoutDone = (async () => {
    if (!child.stdout) return;
    for await (const line of createInterface({ input: child.stdout })) {
      if (line.trim() === "") continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        protocolErrors.push(`not JSON: ${line.slice(0, 200)}`);
        continue;
      }
      const message = WorkerMessage.safeParse(parsed);
      if (!message.success) {
        protocolErrors.push(
          `invalid message: ${message.error.issues[0]?.message ?? "?"} in ${line.slice(0, 200)}`,
        );
      } else if (request.nonce !== undefined && message.data.nonce !== request.nonce) {
        forged.push(`a ${message.data.type} message without this run's nonce: ${line.slice(0, 160)}`);
      } else if (message.data.type === "progress") {
        options.onProgress?.(message.data);
      } else {
        resultCount += 1;
        result = message.data.result;
      }
    }
  })();
  const stderrDone = (async () => {
    if (!child.stderr) return;
    for await (const line of createInterface({ input: child.stderr })) {
      stderrTail.push(line);
      if (stderrTail.length > STDERR_TAIL_LINES) stderrTail.shift();
      options.onLog?.(line);
    }
  })();

  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup(child.pid);
  }, options.timeoutMs);

  // Wait for the worker itself to exit, not for its pipes to close: a process the candidate forked may hold
  // them open. Anything it left running dies with the group, which also closes the pipes.
  await new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
  clearTimeout(timer);
  const leftovers = !timedOut && killGroup(child.pid);
  const exit = await child;
  await Promise.all([stdoutDone, stderrDone]);
  const seconds = (Date.now() - started) / 1000;

  if (timedOut) {
    return failedResult(
      request,
      "timeout",
      `killed after ${options.timeoutMs / 1000} s without finishing`,
      seconds,
    );
  }
  const finished = result as EvalResult | null;
  if (finished && (forged.length > 0 || resultCount > 1)) {
    // Only code inside the worker process can write to its protocol channel: the candidate wrote there.
    const evidence = forged[0] ?? `${resultCount} result messages where the worker sends exactly one`;
    finished.checks.push({ name: "result_channel", outcome: "fail", failVerdict: "cheating", evidence });
    finished.verdict = "cheating";
    finished.reason = `result_channel: ${evidence}`;
  }
  if (finished) {
    if (leftovers) {
      finished.checks.push({
        name: "process_leftovers",
        outcome: "fail",
        failVerdict: "cheating",
        evidence: "processes started by the candidate were still running after the worker exited; killed",
      });
      if (finished.verdict === "correct") {
        finished.verdict = "cheating";
        finished.reason = "the candidate left processes running after the worker exited";
      }
    }
    return finished;
  }
  const how = exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.exitCode}`;
  const detail = lastUsefulLines(stderrTail) || protocolErrors.slice(-3).join("\n");
  return failedResult(
    request,
    "runtime_error",
    `worker ${how} before reporting a result\n${detail}`.trim(),
    seconds,
  );
}
