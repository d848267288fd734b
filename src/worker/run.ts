// Runs one candidate in one fresh worker process. A CUDA fault poisons its context, a candidate may hang,
// fork or crash: so each gets its own process group, killed whole on timeout and after it ends.
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import type { Duplex } from "node:stream";
import { execa } from "execa";
import { reconcileJudge } from "./judge.ts";
import {
  type EvalRequest,
  type EvalResult,
  type ExtensionCache,
  type ProgressMessage,
  WorkerMessage,
} from "./protocol.ts";
import { workerEnv } from "./python.ts";
import { failedResult } from "./results.ts";
import { STACK_DUMP_GRACE_MS, STACK_DUMP_SIGNAL, whereItWas } from "./stack-dump.ts";

export interface RunWorkerOptions {
  python: string;
  timeoutMs: number;
  onProgress?: (message: ProgressMessage) => void;
  /** Called with each line the worker writes to stderr (the candidate's prints, compiler output, logs). */
  onLog?: (line: string) => void;
  /** Extra environment for the worker (the suite scheduler pins it to one GPU with CUDA_VISIBLE_DEVICES). */
  env?: Record<string, string>;
  /** A worker started ahead of its candidate (request.options.waitForGo): it reads the candidate once this
   * settles (resolved: go; rejected: called off, the worker then reports without judging anything). The time
   * limit counts from then. A resolved value follows the go line, on a line of its own (request.extensionCache). */
  go?: Promise<ExtensionCache | undefined>;
  /** Called with the worker's pid (its process group's id) as soon as it is spawned. */
  onSpawn?: (pid: number) => void;
}

const STDERR_TAIL_LINES = 40;

/** Process groups of the workers (and prebuilds) running now: an interrupted suite kills them all, since a
 * detached group never sees the terminal's Ctrl-C and the candidate's own processes would outlive it. */
const activeGroups = new Set<number>();

export function trackGroup(pid: number | undefined): () => void {
  if (pid === undefined) return () => {};
  activeGroups.add(pid);
  return () => activeGroups.delete(pid);
}

/** Kills every tracked worker group (on SIGINT/SIGTERM of the CLI); returns how many were alive. */
export function killActiveWorkers(): number {
  let alive = 0;
  for (const pid of activeGroups) if (killGroup(pid)) alive += 1;
  activeGroups.clear();
  return alive;
}

/** SIGKILL to a detached child's whole process group; true when something in it was still alive. */
export function killGroup(pid: number | undefined): boolean {
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

/** How a worker process ended, however it was run (a local child, or a Ray task on another host). */
export interface WorkerExit {
  timedOut: boolean;
  /** Processes of the worker's group were still alive after it exited (and were killed). */
  leftovers: boolean;
  signal: string | null;
  exitCode: number | null;
  seconds: number;
}

/**
 * Turns a worker's stdout/stderr lines into its EvalResult. Shared by the local runner and the Ray driver's
 * streamed outcomes, so a result forged on the channel or left-over processes are judged the same anywhere.
 */
export class WorkerOutput {
  private result: EvalResult | null = null;
  private resultCount = 0;
  private readonly forged: string[] = [];
  private readonly protocolErrors: string[] = [];
  private readonly stderrTail: string[] = [];
  private readonly judgeLines: string[] = [];
  /** stderr from the moment the runner asked for a stack dump (stack-dump.ts): null until then. */
  private dumpLines: string[] | null = null;

  /** judgeNonce: the judge's channel was given to this worker (the first line written into it); its records are
   * reconciled with the worker's result in finish(). */
  constructor(
    private readonly request: EvalRequest,
    private readonly hooks: Pick<RunWorkerOptions, "onProgress" | "onLog"> = {},
    private readonly judgeNonce?: string,
  ) {}

  /** One line read from the judge's channel (the clean reference process's records). */
  judgeLine(line: string): void {
    if (this.judgeLines.length < 5000) this.judgeLines.push(line);
  }

  stdoutLine(line: string): void {
    if (line.trim() === "") return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      this.protocolErrors.push(`not JSON: ${line.slice(0, 200)}`);
      return;
    }
    const message = WorkerMessage.safeParse(parsed);
    if (!message.success) {
      this.protocolErrors.push(
        `invalid message: ${message.error.issues[0]?.message ?? "?"} in ${line.slice(0, 200)}`,
      );
    } else if (this.request.nonce !== undefined && message.data.nonce !== this.request.nonce) {
      this.forged.push(`a ${message.data.type} message without this run's nonce: ${line.slice(0, 160)}`);
    } else if (message.data.type === "progress") {
      this.hooks.onProgress?.(message.data);
    } else {
      this.resultCount += 1;
      this.result = message.data.result;
    }
  }

  /** The runner has asked the worker for its stacks: the stderr lines from now on are read as the dump. */
  expectStackDump(): void {
    this.dumpLines ??= [];
  }

  stderrLine(line: string): void {
    if (this.dumpLines !== null && this.dumpLines.length < 2000) this.dumpLines.push(line);
    this.stderrTail.push(line);
    if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
    this.hooks.onLog?.(line);
  }

  finish(exit: WorkerExit, timeoutMs: number): EvalResult {
    const request = this.request;
    if (exit.timedOut) {
      const where = whereItWas(this.dumpLines ?? [], request.candidate.path);
      return failedResult(
        request,
        "timeout",
        `killed after ${timeoutMs / 1000} s without finishing${where ? `; ${where}` : ""}`,
        exit.seconds,
      );
    }
    const finished = this.result;
    if (finished && (this.forged.length > 0 || this.resultCount > 1)) {
      // Only code inside the worker process can write to its protocol channel: the candidate wrote there.
      const evidence =
        this.forged[0] ?? `${this.resultCount} result messages where the worker sends exactly one`;
      finished.checks.push({ name: "result_channel", outcome: "fail", failVerdict: "cheating", evidence });
      finished.verdict = "cheating";
      finished.reason = `result_channel: ${evidence}`;
    }
    if (finished && this.judgeNonce !== undefined) {
      reconcileJudge(finished, this.judgeLines, this.judgeNonce, request.options.timing.warmupIters);
    }
    if (finished) {
      if (exit.leftovers) {
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
    // SIGKILL that kforge did not send (its own time limit is reported above) most often comes from the kernel's
    // out-of-memory killer: say so, it is the first thing to look at.
    const how = exit.signal
      ? `killed by ${exit.signal}${exit.signal === "SIGKILL" ? " (not by kforge: most often the system's out-of-memory killer)" : ""}`
      : `exited with code ${exit.exitCode}`;
    const detail = lastUsefulLines(this.stderrTail) || this.protocolErrors.slice(-3).join("\n");
    return failedResult(
      request,
      "runtime_error",
      `worker ${how} before reporting a result\n${detail}`.trim(),
      exit.seconds,
    );
  }
}

/** A fresh secret for the worker's trial seeds: it reaches the worker only through its environment, which
 * the worker clears after reading. */
export function secretSeed(): string {
  return randomBytes(8).readBigUInt64BE().toString();
}

/** The worker's descriptor for the judge's channel: its 4th stdio entry, a socket (Node's "pipe"). */
const JUDGE_FD = 3;

export async function runWorker(givenRequest: EvalRequest, options: RunWorkerOptions): Promise<EvalResult> {
  const started = Date.now();
  const gated = options.go !== undefined;
  // The judge's channel, unless the reference stays in the worker: the worker passes it to the clean reference
  // process and closes its own copy before the candidate is imported; the nonce is written into it here, read
  // there, and never seen by the worker.
  const judging = givenRequest.options.referenceProcess !== false;
  const judgeNonce = judging ? randomBytes(16).toString("hex") : undefined;
  const request: EvalRequest = judging
    ? { ...givenRequest, options: { ...givenRequest.options, judgeFd: JUDGE_FD } }
    : givenRequest;
  const child = execa(options.python, ["-m", "kforge_worker"], {
    // The request is one line; a gated worker reads its go line after it, so stdin stays open till then.
    ...(gated ? {} : { input: `${JSON.stringify(request)}\n` }),
    env: workerEnv({ ...options.env, KFORGE_SECRET_SEED: secretSeed() }),
    detached: true,
    buffer: false,
    reject: false,
    stdio: judging ? ["pipe", "pipe", "pipe", "pipe"] : ["pipe", "pipe", "pipe"],
    cleanup: true,
  });
  const untrack = trackGroup(child.pid);
  if (child.pid !== undefined) options.onSpawn?.(child.pid);
  const output = new WorkerOutput(request, options, judgeNonce);
  const judgeSocket = judging ? (child.stdio[JUDGE_FD] as Duplex | undefined) : undefined;
  const judgeDone = (async () => {
    if (!judgeSocket) return;
    judgeSocket.on("error", () => {}); // a worker that never opened it: its record is then missing, and says so
    judgeSocket.write(`${judgeNonce}\n`);
    try {
      for await (const line of createInterface({ input: judgeSocket })) output.judgeLine(line);
    } catch {
      // reset by a worker that exited without reading it (no judge ran): what was read stands
    }
  })();

  const stdoutDone = (async () => {
    if (!child.stdout) return;
    for await (const line of createInterface({ input: child.stdout })) output.stdoutLine(line);
  })();
  const stderrDone = (async () => {
    if (!child.stderr) return;
    for await (const line of createInterface({ input: child.stderr })) output.stderrLine(line);
  })();

  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  let exited = false;
  const startClock = () => {
    if (exited) return;
    timer = setTimeout(() => {
      timedOut = true;
      // Where it was first (stack-dump.ts), then the kill; a worker that ignores the signal is killed all the same.
      output.expectStackDump();
      try {
        if (child.pid !== undefined) process.kill(child.pid, STACK_DUMP_SIGNAL);
      } catch {
        // already gone
      }
      setTimeout(() => killGroup(child.pid), STACK_DUMP_GRACE_MS).unref();
    }, options.timeoutMs);
  };
  if (options.go && child.stdin) {
    const stdin = child.stdin;
    stdin.on("error", () => {}); // a worker that died early closed its end: its exit says why
    stdin.write(`${JSON.stringify(request)}\n`);
    options.go.then(
      (extensionCache) => {
        stdin.end(extensionCache ? `go\n${JSON.stringify(extensionCache)}\n` : "go\n");
        startClock();
      },
      () => {
        stdin.end();
        startClock();
      },
    );
  } else startClock();

  // Wait for the worker itself to exit, not for its pipes to close: a process the candidate forked may hold
  // them open. Anything it left running dies with the group, which also closes the pipes. A program that
  // cannot start emits 'error' and may never emit 'exit'.
  await new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else {
      child.once("exit", () => resolve());
      child.once("error", () => resolve());
    }
  });
  exited = true;
  if (timer) clearTimeout(timer);
  const leftovers = !timedOut && killGroup(child.pid);
  untrack();
  const exit = await child;
  await Promise.all([stdoutDone, stderrDone]);
  // Everything holding the judge's end (the reference process) died with the worker's group at the latest.
  await Promise.race([
    judgeDone.catch(() => {}),
    new Promise((resolve) => setTimeout(resolve, 5000).unref()),
  ]);
  judgeSocket?.destroy();
  return output.finish(
    {
      timedOut,
      leftovers,
      signal: exit.signal ?? null,
      exitCode: exit.exitCode ?? null,
      seconds: (Date.now() - started) / 1000,
    },
    options.timeoutMs,
  );
}
