// A problem's bench and eval workers, reserved for one GPU by the suite scheduler and started when the GPU's
// current problem reaches its eval (nothing of the current problem is timed then). The turn's `run` starts a
// reservation that was never started (the current problem ended before its eval) before it uses it.

import type { Problem } from "../problem/problems.ts";
import type { Ahead } from "../suite/scheduler.ts";
import type { BenchSession } from "./bench-session.ts";
import { type EvalAhead, startEvalAhead } from "./eval-ahead.ts";
import { type OptimizeOptions, startBenchAhead, verifyEvalOptions } from "./optimize.ts";

export class SlotAhead implements Ahead {
  bench?: BenchSession;
  eval?: EvalAhead;
  private cancelled = false;

  /** options.env pins the workers to the reserved GPU. */
  constructor(
    private readonly problem: Problem,
    private readonly output: string,
    private readonly options: OptimizeOptions,
  ) {}

  start(): void {
    if (this.cancelled || this.bench) return;
    this.bench = startBenchAhead(this.problem, this.options);
    this.eval = startEvalAhead(
      this.problem,
      this.output,
      verifyEvalOptions(this.options),
      this.options.env ?? {},
    );
  }

  cancel(): void {
    this.cancelled = true;
    this.bench?.close();
    this.eval?.cancel();
  }
}
