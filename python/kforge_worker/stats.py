"""Timing statistics: per-side summaries and a paired bootstrap confidence interval of the speedup.

Pure numpy, no device code, so the numbers the CLI shows can be unit-tested on synthetic samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

BOOTSTRAP_SEED = 20240607


def summarize(samples_ms: Sequence[float]) -> dict[str, Any]:
    """TimingStats (protocol.ts): median, mean, extremes, quartiles (linear interpolation), sample std."""
    x = np.asarray(samples_ms, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no timing samples")
    return {
        "n": int(x.size),
        "medianMs": float(np.median(x)),
        "meanMs": float(x.mean()),
        "minMs": float(x.min()),
        "maxMs": float(x.max()),
        "p25Ms": float(np.percentile(x, 25)),
        "p75Ms": float(np.percentile(x, 75)),
        "stdMs": float(x.std(ddof=1)) if x.size > 1 else 0.0,
        "samplesMs": [float(v) for v in x],
    }


def speedup(ref_ms: Sequence[float], cand_ms: Sequence[float]) -> float:
    """Reference median over candidate median (> 1 means the candidate is faster)."""
    return float(np.median(ref_ms) / np.median(cand_ms))


def bootstrap_speedup_ci(
    ref_ms: Sequence[float],
    cand_ms: Sequence[float],
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap of median(ref)/median(cand), resampling *pairs* of iterations.

    Iteration i of the reference and of the candidate ran back to back, so they share the machine's
    state at that moment (clocks, thermals, other tenants); resampling pairs keeps that pairing.
    Seeded, so the same samples always give the same interval.
    """
    ref = np.asarray(ref_ms, dtype=np.float64)
    cand = np.asarray(cand_ms, dtype=np.float64)
    if ref.size != cand.size or ref.size == 0:
        raise ValueError("paired samples of equal, non-zero length are required")
    if ref.size == 1:
        s = float(ref[0] / cand[0])
        return (s, s)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, ref.size, size=(resamples, ref.size))
    ratios = np.median(ref[idx], axis=1) / np.median(cand[idx], axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return (float(low), float(high))


def relative_half_width(ci: tuple[float, float], center: float) -> float:
    """Half the interval's width as a fraction of the speedup: the early-stopping criterion."""
    return (ci[1] - ci[0]) / 2.0 / center if center > 0 else float("inf")
