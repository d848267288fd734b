// Numbers derived from one EvalResult that every view (terminal table, detail, HTML) shows the same way.
import type { EvalResult, Verdict } from "../worker/protocol.ts";

export interface ErrorSummary {
  /** Largest |candidate − float64 reference| over all trials and outputs; null when never measured. */
  candVsFp64: number | null;
  /** Largest |PyTorch reference − float64 reference|: the error the reference itself carries. */
  refVsFp64: number | null;
  /** Largest |candidate − reference|: what the pass mark looks at. */
  candVsRef: number | null;
}

function maxOf(values: Array<number | null>): number | null {
  let best: number | null = null;
  for (const v of values) {
    if (v === null) continue;
    // NaN or Infinity in an error means non-finite outputs; it must win over any finite value.
    if (!Number.isFinite(v)) return v;
    if (best === null || v > best) best = v;
  }
  return best;
}

export function errorSummary(result: EvalResult): ErrorSummary {
  const outputs = result.trials.flatMap((t) => t.outputs);
  return {
    candVsFp64: maxOf(outputs.map((o) => o.candVsFp64.maxAbs)),
    refVsFp64: maxOf(outputs.map((o) => o.refVsFp64.maxAbs)),
    candVsRef: maxOf(outputs.map((o) => o.vsRef.maxAbs)),
  };
}

/** The first non-empty line of the reason, or null. */
export function firstReasonLine(result: EvalResult): string | null {
  const line = result.reason
    ?.split("\n")
    .map((l) => l.trim())
    .find((l) => l.length > 0);
  return line ?? null;
}

/** Verdicts that mean the candidate never produced a usable answer or produced a wrong one. */
export function isFailure(verdict: Verdict): boolean {
  return verdict !== "correct";
}

/**
 * Whether the 95% CI of the speedup lies entirely above 1 (faster), below 1 (slower), or straddles it;
 * "invalid" when the candidate was timed but did not pass (a cheat's speedup is no speedup).
 */
export type SpeedupClass = "faster" | "slower" | "inconclusive" | "invalid" | "none";

export function speedupClass(result: EvalResult): SpeedupClass {
  const t = result.timing;
  if (!t) return "none";
  if (result.verdict !== "correct") return "invalid";
  const [lo, hi] = t.speedupCi;
  if (lo > 1) return "faster";
  if (hi < 1) return "slower";
  return "inconclusive";
}

/** Results grouped by problem, keeping the order in which problems and candidates first appear. */
export function groupByProblem(results: EvalResult[]): Map<string, EvalResult[]> {
  const groups = new Map<string, EvalResult[]>();
  for (const r of results) {
    const list = groups.get(r.problem);
    if (list) list.push(r);
    else groups.set(r.problem, [r]);
  }
  return groups;
}

export function checkCounts(result: EvalResult): Record<"pass" | "fail" | "warn" | "skip", number> {
  const counts = { pass: 0, fail: 0, warn: 0, skip: 0 };
  for (const c of result.checks) counts[c.outcome] += 1;
  return counts;
}

/** Compile calls that failed, and the lines of their logs worth showing first (errors, then the tail). */
export function compileLogExcerpt(log: string, maxLines: number): string[] {
  const lines = log.split("\n").filter((l) => l.trim().length > 0);
  if (lines.length <= maxLines) return lines;
  const errorAt = lines.findIndex((l) => /\berror\b/i.test(l));
  if (errorAt < 0) return lines.slice(-maxLines);
  // Start a line before the first error so its file:line context is kept.
  const start = Math.max(0, Math.min(errorAt - 1, lines.length - maxLines));
  return lines.slice(start, start + maxLines);
}
