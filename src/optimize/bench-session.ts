// One bench worker per problem (`python -m kforge_worker --bench-optimize-serve`): every bench of the problem —
// the region bench, re-timings with simpler anchors, the final comparison of a re-emitted file — is a request to
// the same process, so torch's import, the reference model and torch.compile's first call are paid once.
// Each request still times eager, torch.compile and ours side by side in that process.
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { workerEnv } from "../worker/python.ts";
import { type BenchPhases, type OptimizeBenchRequest, OptimizeBenchResult } from "./bench-protocol.ts";

export function failedBench(why: string): OptimizeBenchResult {
  return {
    device: "",
    eagerMs: null,
    compiledMs: null,
    oursMs: null,
    compileSeconds: null,
    regions: [],
    error: why,
  };
}

interface Pending {
  child: ChildProcess;
  resolve: (result: OptimizeBenchResult) => void;
  timer: NodeJS.Timeout;
}

export class BenchSession {
  private child: ChildProcess | null = null;
  private pending: Pending | null = null;
  private stderrTail: string[] = [];
  private spawnedAt = 0;
  /** Requests answered by a process that was already running (tests assert reuse). */
  served = 0;
  /** Processes started. */
  started = 0;
  /** Requests run one after another: one sent before the last answered waits for it. */
  private queue: Promise<unknown> = Promise.resolve();
  /** The prepare sent ahead of the problem's turn (prepare()), until takeAheadRun() reports it. */
  private ahead: Promise<{ wall: number; phases: BenchPhases | null }> | null = null;
  /** The prepare is still running (torch.compile of the reference, mostly CPU work): the GPU is free. */
  preparing = false;

  constructor(
    private readonly python: string,
    private readonly timeoutSeconds: number,
    private readonly env: Record<string, string> = {},
  ) {}

  /** One request; a crash or a timeout answers with an error result and the next request starts a new process,
   * as does a request that raised (a CUDA error poisons the process's context for what follows). */
  request(request: Omit<OptimizeBenchRequest, "spawnedAt">): Promise<OptimizeBenchResult> {
    const next = this.queue.then(() => this.requestNow(request));
    this.queue = next.catch(() => {});
    return next;
  }

  /** Starts the worker and has it import the problem, build the reference and compile it (when
   * `compileBaseline`), timing nothing: sent ahead of the problem's turn, it is done by the time the first
   * bench comes. */
  prepare(request: Omit<OptimizeBenchRequest, "spawnedAt" | "candidatePath" | "regions" | "iters">): void {
    const started = performance.now();
    this.preparing = true;
    this.ahead = this.request({ ...request, candidatePath: null, regions: [], iters: 1 }).then((result) => {
      this.preparing = false;
      return { wall: (performance.now() - started) / 1000, phases: result.phases ?? null };
    });
  }

  /** The prepare sent ahead, once it is done (null when none was, or it was reported already). */
  async takeAheadRun(): Promise<{ wall: number; phases: BenchPhases | null } | null> {
    const ahead = this.ahead;
    this.ahead = null;
    return ahead;
  }

  private async requestNow(request: Omit<OptimizeBenchRequest, "spawnedAt">): Promise<OptimizeBenchResult> {
    const result = await this.send(request);
    // torch.compile failing is the problem's fact (the worker keeps it and times the rest), not a broken process.
    if (result.error !== null && !result.error.startsWith("torch.compile failed")) this.close();
    return result;
  }

  private send(request: Omit<OptimizeBenchRequest, "spawnedAt">): Promise<OptimizeBenchResult> {
    if (this.pending) throw new Error("BenchSession: one request at a time");
    const fresh = this.child === null;
    const child = this.child ?? this.start();
    if (!fresh) this.served += 1;
    const line = JSON.stringify(fresh ? { ...request, spawnedAt: this.spawnedAt } : request);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.finish(child, failedBench(`bench timed out after ${this.timeoutSeconds} s`));
        this.stop();
      }, this.timeoutSeconds * 1000);
      this.pending = { child, resolve, timer };
      child.stdin?.write(`${line}\n`);
    });
  }

  /** Ends the worker (stdin closed: it exits after the request in flight, if any); a later request starts
   * another. */
  close(): void {
    this.child?.stdin?.end();
    this.child = null;
  }

  private start(): ChildProcess {
    this.spawnedAt = Date.now();
    this.started += 1;
    this.stderrTail = [];
    const child = spawn(this.python, ["-m", "kforge_worker", "--bench-optimize-serve"], {
      env: workerEnv(this.env),
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child = child;
    if (child.stdout) createInterface({ input: child.stdout }).on("line", (line) => this.onLine(child, line));
    if (child.stderr)
      createInterface({ input: child.stderr }).on("line", (line) => {
        this.stderrTail.push(line);
        if (this.stderrTail.length > 2) this.stderrTail.shift();
      });
    child.stdin?.on("error", () => {}); // a worker that died: reported by 'exit'
    child.on("error", (error) => this.onExit(child, error.message));
    child.on("exit", (code) => this.onExit(child, `exit ${code}`));
    return child;
  }

  private onLine(child: ChildProcess, line: string): void {
    if (!line.trim()) return;
    let parsed: OptimizeBenchResult;
    try {
      parsed = OptimizeBenchResult.parse(JSON.parse(line));
    } catch (error) {
      parsed = failedBench(`unreadable bench result: ${(error as Error).message.split("\n")[0]}`);
    }
    this.finish(child, parsed);
  }

  private onExit(child: ChildProcess, why: string): void {
    if (this.child === child) this.child = null;
    this.finish(child, failedBench(this.stderrTail.join(" | ") || why));
  }

  /** Answers the request in flight, when `child` is the process it was sent to. */
  private finish(child: ChildProcess, result: OptimizeBenchResult): void {
    const pending = this.pending;
    if (!pending || pending.child !== child) return;
    this.pending = null;
    clearTimeout(pending.timer);
    pending.resolve(result);
  }

  private stop(): void {
    const child = this.child;
    this.child = null;
    child?.kill("SIGKILL");
  }
}
