// Numbers derived from `kforge optimize` results that the terminal table and the HTML report show the same
// way: per-region gains, the suite's counts and its geometric-mean speedups.
import { type OptimizeResult, REGION_WIN_MARGIN } from "../optimize/optimize.ts";

type Region = OptimizeResult["regions"][number];

/** Geometric mean of positive finite values; null when there are none. */
export function geomean(values: number[]): number | null {
  const usable = values.filter((v) => Number.isFinite(v) && v > 0);
  if (usable.length === 0) return null;
  return Math.exp(usable.reduce((sum, v) => sum + Math.log(v), 0) / usable.length);
}

/** PyTorch's time for the region's ops over the kernel's: above 1 the kernel won. */
export function regionGain(region: Region): number | null {
  return region.kernelMs && region.torchMs ? region.torchMs / region.kernelMs : null;
}

/** How a region ended, as people read it. A dropped region either lost to its ops, or won alone and went with a
 * file that as a whole was not faster than eager (a host-bound forward steps down to PyTorch's ops). */
export function regionStatusText(region: Region): string {
  if (region.status === "fused") return "fused";
  if (region.status === "rejected") return "left to PyTorch (the file with the kernels failed the eval)";
  const gain = regionGain(region);
  return gain !== null && gain > REGION_WIN_MARGIN
    ? "left to PyTorch (faster alone, but the file with it was not faster than eager)"
    : "left to PyTorch (its kernel was not faster)";
}

/**
 * A speedup counts only for a file that passed the full eval: a wrong file's time is no speedup, as in the
 * eval report. Results with no verdict (--no-verify) carry no timings at all.
 */
export function countsAsTimed(result: OptimizeResult): boolean {
  return result.verdict === "correct";
}

export interface OptimizeSummary {
  /** Distinct problem names. */
  problems: number;
  /** Results whose emitted file passed the full eval. */
  correct: number;
  /** Results that were verified at all (a verdict; --no-verify gives none). */
  verified: number;
  /** Geometric mean over correct results that have the speedup, and how many that was. */
  vsEager: { geomean: number | null; n: number };
  vsCompile: { geomean: number | null; n: number };
  regions: Record<Region["status"], number>;
  /** Operators left to PyTorch by the planner (no recipe, or a recipe that does not support them). */
  kept: number;
  /** Results with a pipeline error (capture, bench). */
  errors: number;
}

export function summarizeOptimize(results: OptimizeResult[]): OptimizeSummary {
  const timed = results.filter(countsAsTimed);
  const vsEager = timed.map((r) => r.speedup).filter((s): s is number => s !== null);
  const vsCompile = timed.map((r) => r.speedupVsCompile).filter((s): s is number => s !== null);
  const regions = { fused: 0, dropped: 0, rejected: 0 };
  for (const r of results) for (const g of r.regions) regions[g.status] += 1;
  return {
    problems: new Set(results.map((r) => r.problem)).size,
    correct: results.filter((r) => r.verdict === "correct").length,
    verified: results.filter((r) => r.verdict !== null).length,
    vsEager: { geomean: geomean(vsEager), n: vsEager.length },
    vsCompile: { geomean: geomean(vsCompile), n: vsCompile.length },
    regions,
    kept: results.reduce((n, r) => n + r.kept.length, 0),
    errors: results.filter((r) => r.error !== null).length,
  };
}

/** "2 of 3 fused (1 dropped)": what became of a problem's planned regions. */
export function regionsText(result: OptimizeResult): string {
  const total = result.regions.length;
  if (total === 0) return "none planned";
  const count = (status: Region["status"]) => result.regions.filter((g) => g.status === status).length;
  const others = [
    count("dropped") ? `${count("dropped")} dropped` : "",
    count("rejected") ? `${count("rejected")} rejected` : "",
  ].filter(Boolean);
  return `${count("fused")} of ${total} fused${others.length ? ` (${others.join(", ")})` : ""}`;
}

/** Single medians carry no CI: within this margin of 1× a speedup is shown as neither a win nor a loss. */
export const EVEN_MARGIN = 0.03;

export function speedupTrend(speedup: number | null): "faster" | "slower" | "even" | "none" {
  if (speedup === null) return "none";
  if (speedup >= 1 + EVEN_MARGIN) return "faster";
  if (speedup <= 1 - EVEN_MARGIN) return "slower";
  return "even";
}

/** One line for the end of a run or the top of a report. */
export function optimizeSummaryLine(summary: OptimizeSummary): string {
  const fmt = (g: { geomean: number | null; n: number }, what: string) =>
    g.geomean === null
      ? `no timings vs ${what}`
      : `geomean ${g.geomean.toFixed(2)}× vs ${what} (over ${g.n} correct, timed problem${g.n === 1 ? "" : "s"})`;
  const p = summary.problems;
  return [
    `${p} problem${p === 1 ? "" : "s"}: ${summary.correct} correct of ${summary.verified} verified`,
    fmt(summary.vsEager, "eager"),
    fmt(summary.vsCompile, "torch.compile"),
  ].join("; ");
}
