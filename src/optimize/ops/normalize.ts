// Normalisations the codegen fuses (kf_normalize.cuh): statistics over some dims of the input, then a
// per-element apply. `params` are the op's tensor arguments loaded per element and how they line up with
// the input ("channel": dim 1, as BatchNorm's weight; "trailing": the last dims, as LayerNorm's).
import type { ParamReader } from "./pointwise.ts";
import { type Accumulator, REDUCTIONS } from "./reduce.ts";

export type Statistic =
  | "KfStatMaxSumExp"
  | "KfStatWelford"
  | "KfStatMeanSquare"
  | "KfStatSum"
  | "KfStatMax"
  | "KfStatMin";

export interface NormParam {
  key: string;
  layout: "channel" | "trailing";
}

export interface NormSpec {
  stat: Statistic;
  params: NormParam[];
  /** Dims reduced for an input of `rank`, or null when the call is not supported. */
  dims(rank: number, p: ParamReader): number[] | null;
  /** What the statistics are taken of, from the input's value x (softmin: -x); the input itself if absent. */
  value?(x: string, p: ParamReader): string;
  /** The output from v (the value), s (KfStats) and the params' values (absent ones are ""). */
  apply(v: string, params: string[], p: ParamReader): string | null;
  /** Group norm reduces within channel groups: the input is viewed as [N, G, C/G, rest]. */
  groups?: boolean;
  /** Batch statistics feed the running statistics (BatchNorm in training): stats are written out. */
  runningStats?: boolean;
}

function affine(e: string, w: string | undefined, b: string | undefined): string {
  let out = e;
  if (w) out = `(${out}) * (${w})`;
  if (b) out = `(${out}) + (${b})`;
  return out;
}

const normalized = (v: string, eps: string) => `((${v}) - s.a) * (1.f / sqrtf(s.b / s.count + ${eps}))`;

function softmaxDims(rank: number, p: ParamReader): number[] | null {
  const d = p.int("dim");
  if (d === null || rank === 0 || d >= rank || d < -rank) return null;
  return [d < 0 ? d + rank : d];
}

/** The statistic that stands for a reduction's accumulator where its result is broadcast back over its rows. */
export const BROADCAST_STATISTICS: Partial<Record<Accumulator, Statistic>> = {
  KfAccSum: "KfStatSum",
  KfAccMax: "KfStatMax",
  KfAccMin: "KfStatMin",
  KfAccWelford: "KfStatWelford",
};

/** The normalisation op that a reduction with accumulator `acc` becomes when broadcast back (plan/reduce-broadcast.ts). */
export function broadcastOp(acc: Accumulator): string | null {
  const stat = BROADCAST_STATISTICS[acc];
  return stat ? `reduce_broadcast_${stat.slice("KfStat".length).toLowerCase()}` : null;
}

export const NORMALIZATIONS: Record<string, NormSpec> = {
  softmax: {
    stat: "KfStatMaxSumExp",
    params: [],
    dims: softmaxDims,
    // s.b >= 1 (the max's own term) or NaN: the approximate divide has no slow path to take.
    apply: (v) => `__fdividef(kf_exp_shifted((${v}) - s.a), s.b)`,
  },
  softmin: {
    stat: "KfStatMaxSumExp",
    params: [],
    dims: softmaxDims,
    value: (x) => `-(${x})`,
    apply: (v) => `__fdividef(kf_exp_shifted((${v}) - s.a), s.b)`,
  },
  // F.normalize: x / max(||x||_p, eps) along dim, for p = 2 (the mean square's statistic times the count).
  normalize: {
    stat: "KfStatMeanSquare",
    params: [],
    dims: (rank, p) => (p.num("p", 2) === "2.f" ? softmaxDims(rank, p) : null),
    apply: (v, _params, p) => {
      const eps = p.num("eps", 1e-12);
      return eps === null ? null : `(${v}) / fmaxf(sqrtf(s.a * s.count), ${eps})`;
    },
  },
  log_softmax: {
    stat: "KfStatMaxSumExp",
    params: [],
    dims: softmaxDims,
    apply: (v) => `(${v}) - s.a - logf(s.b)`,
  },
  layer_norm: {
    stat: "KfStatWelford",
    params: [
      { key: "weight", layout: "trailing" },
      { key: "bias", layout: "trailing" },
    ],
    dims: () => null, // from normalized_shape: resolved by the planner (needs the list's length)
    apply: (v, [w, b], p) => {
      const eps = p.num("eps", 1e-5);
      return eps === null ? null : affine(normalized(v, eps), w, b);
    },
  },
  rms_norm: {
    stat: "KfStatMeanSquare",
    params: [{ key: "weight", layout: "trailing" }],
    dims: () => null,
    apply: (v, [w], p) => {
      const eps = p.num("eps");
      return eps === null ? null : affine(`(${v}) * (1.f / sqrtf(s.a + ${eps}))`, w, undefined);
    },
  },
  group_norm: {
    stat: "KfStatWelford",
    params: [
      { key: "weight", layout: "channel" },
      { key: "bias", layout: "channel" },
    ],
    dims: (rank) => (rank >= 2 ? [2, 3] : null), // over [N, G, C/G, rest]
    apply: (v, [w, b], p) => {
      const eps = p.num("eps", 1e-5);
      return eps === null ? null : affine(normalized(v, eps), w, b);
    },
    groups: true,
  },
  instance_norm: {
    stat: "KfStatWelford",
    params: [
      { key: "weight", layout: "channel" },
      { key: "bias", layout: "channel" },
    ],
    dims: (rank, p) => {
      if (p.bool("use_input_stats") === false || p.has("running_mean") || rank < 3) return null;
      return Array.from({ length: rank - 2 }, (_, i) => i + 2);
    },
    apply: (v, [w, b], p) => {
      const eps = p.num("eps", 1e-5);
      return eps === null ? null : affine(normalized(v, eps), w, b);
    },
  },
  batch_norm: {
    stat: "KfStatWelford",
    params: [
      { key: "weight", layout: "channel" },
      { key: "bias", layout: "channel" },
    ],
    dims: (rank, p) => {
      if (p.bool("training") !== true || rank < 2) return null;
      return [0, ...Array.from({ length: rank - 2 }, (_, i) => i + 2)];
    },
    apply: (v, [w, b], p) => {
      const eps = p.num("eps", 1e-5);
      return eps === null ? null : affine(normalized(v, eps), w, b);
    },
    runningStats: true,
  },
  ...reducedBroadcasts(),
};

/** A reduction over `dims` whose result only pointwise ops read, broadcast back over the rows it reduced
 * (`x - x.mean(d, keepdim=True)`, `e / e.sum(-1, keepdim=True)`): the node's `reduction` names the REDUCTIONS entry
 * whose prologue is the value and whose epilogue is the apply (its `r` the statistics), `dims` the reduced dims. */
function reducedBroadcasts(): Record<string, NormSpec> {
  const entries = Object.entries(BROADCAST_STATISTICS).map(([acc, stat]) => {
    const reduction = (p: ParamReader) => REDUCTIONS[p.str("reduction") ?? ""];
    const spec: NormSpec = {
      stat,
      params: [],
      dims: (rank, p) => {
        const dims = p.ints("dims");
        return dims?.every((d) => d >= 0 && d < rank) ? dims : null;
      },
      value: (x, p) => reduction(p)?.pro([x], p) ?? x,
      apply: (_v, _params, p) => {
        const epi = reduction(p)?.epi(p);
        return epi ? `[&](const KfStatResult r) { return ${epi}; }(KfStatResult{s.a, s.b, s.count})` : null;
      },
    };
    return [broadcastOp(acc as Accumulator) ?? "", spec] as const;
  });
  return Object.fromEntries(entries);
}
