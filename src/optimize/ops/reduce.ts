// Reductions the codegen fuses (kf_reduce.cuh): the accumulator, the per-element prologue (what is
// reduced, e.g. |a - b| for an L1 loss) and the epilogue on the accumulated result (mean = sum / count).
// `dims` says which dims of the first operand are reduced; null from it means "not this call" (PyTorch).
import { floatLiteral } from "./float-literal.ts";
import type { ParamReader } from "./pointwise.ts";

export type Accumulator =
  | "KfAccSum"
  | "KfAccProd"
  | "KfAccMax"
  | "KfAccMin"
  | "KfAccArgMax"
  | "KfAccArgMin"
  | "KfAccLogSumExp"
  | "KfAccWelford"
  | "KfAccSums<2>"
  | "KfAccSums<3>"
  | "KfAccCrossEntropy"
  | "KfAccCrossEntropySmoothed";

export interface ReduceSpec {
  acc: Accumulator;
  /** The accumulator where the call's arguments choose it (a norm's order: max |x| for inf); null: no kernel
   * form. Absent: always `acc`. */
  accOf?(p: ParamReader): Accumulator | null;
  /** The fn's tensor arguments; the first one's rank is the iteration rank `dims` refers to. */
  operands: string[];
  /** Operands that may be absent (None): `pro` sees "" for them (a loss's per-element weight). */
  optional?: string[];
  /** The C++ type `pro` returns: float, or KfSums<K> for a KfAccSums<K> accumulator (several sums at once). */
  value?: string;
  /** The value reduced at one element, from the operands' values there. */
  pro(o: string[], p: ParamReader): string | null;
  /** The output from the accumulated result `r` (a KfAccResult). */
  epi(p: ParamReader): string | null;
  /** "dim": the fn's `dim` argument (int, list or None = all); "all": every dim; "last": the last dim;
   * "class": a loss's class dim (1, or 0 for one sample's scores). */
  dims: "dim" | "all" | "last" | "class";
  /** Operands that are integer tensors (a loss's class-index target), read as fp32: exact below 2^24. */
  integerOperands?: string[];
  /** A loss whose kernel writes one value per row and whose mean or sum over the rows is then taken on those
   * values (cross entropy: a mean over the rows whose target is not ignored). Python statements after the
   * launch, `out` the rows (float32, the kept dims' shape); `operand(key)` an operand's Python value, `arg(key,
   * fallback)` a scalar argument's. Such a seed takes no epilogue: ops after it see the whole loss. */
  finish?(
    operand: (key: string) => string,
    arg: (key: string, fallback: string) => string,
    reduction: string,
  ): string[] | null;
  /** Index output (int64): argmax/argmin. */
  index?: boolean;
  /** Losses: the fn's `reduction` must be one of these for the call to be a reduction. */
  reductions?: string[];
  /** A loss whose reduction='none' is per row, not per element (multilabel_soft_margin_loss's class means): no
   * elementwise form is derived from it. */
  rowwiseNone?: boolean;
  /** Arguments the kernel form does not take (a loss's per-element `weight`): the call must leave them None. */
  absent?: string[];
  /** The call returns a pair (torch.max/min with a dim: values, indices; torch.aminmax: min, max): the region
   * computes the one item read, through the one `[0]` / `[1]` that uses it; `[1]` is the `secondOfPair`
   * reduction's. */
  valuesOfPair?: boolean;
  secondOfPair?: string;
}

const identity = ([a]: string[]) => a ?? null;
const value = () => "r.value";

function correction(p: ParamReader): string | null {
  return p.num("correction", 1);
}

/** Loss epilogue: mean divides by the element count, sum does not. */
const lossEpi = (p: ParamReader) => {
  const reduction = p.str("reduction") ?? "mean";
  if (reduction === "mean") return "r.value / r.count";
  return reduction === "sum" ? "r.value" : null;
};

/** A loss term times a per-element weight where one is given. */
function weighted(term: string, w: string | undefined): string {
  return w ? `(${term}) * (${w})` : term;
}

/** A loss: a per-element term of input and target summed over every element, mean or sum as `reduction`
 * says; `extra` overrides (a custom epilogue, more reductions, arguments that must be absent). */
function loss(pro: ReduceSpec["pro"], extra: Partial<ReduceSpec> = {}): ReduceSpec {
  return {
    acc: "KfAccSum",
    operands: ["input", "target"],
    pro,
    epi: lossEpi,
    dims: "all",
    reductions: ["mean", "sum"],
    ...extra,
  };
}

const INF = floatLiteral(Number.POSITIVE_INFINITY);
const NEG_INF = floatLiteral(Number.NEGATIVE_INFINITY);

/** A p-norm's accumulator: max |d| for ord inf, min |d| for -inf, else a sum. */
function pNormAcc(ord: string | null): Accumulator | null {
  if (ord === null) return null;
  return ord === INF ? "KfAccMax" : ord === NEG_INF ? "KfAccMin" : "KfAccSum";
}

/** |d|^ord summed, then its 1/ord-th power: a p-norm's prologue and epilogue (2 and 1 without pow); |d| for
 * ord ±inf (maximised / minimised); for ord 0 the count of nonzero d, as torch's norm counts them. */
function pNormPro(d: string, ord: string | null): string | null {
  if (ord === "2.f") return `(${d}) * (${d})`;
  if (ord === "1.f" || ord === INF || ord === NEG_INF) return `fabsf(${d})`;
  if (ord === "0.f") return `((${d}) != 0.f ? 1.f : 0.f)`;
  return ord === null || ord.includes("__int_as_float") ? null : `powf(fabsf(${d}), ${ord})`;
}

function pNormEpi(ord: string | null): string | null {
  if (ord === "2.f") return "sqrtf(r.value)";
  if (ord === "1.f" || ord === "0.f" || ord === INF || ord === NEG_INF) return "r.value";
  return ord === null ? null : `powf(r.value, 1.f / ${ord})`;
}

/** The accumulator of a call of `spec` with these arguments. */
export function accumulatorOf(spec: ReduceSpec, p: ParamReader): Accumulator | null {
  return spec.accOf ? spec.accOf(p) : spec.acc;
}

export const REDUCTIONS: Record<string, ReduceSpec> = {
  sum: { acc: "KfAccSum", operands: ["input"], pro: identity, epi: value, dims: "dim" },
  mean: { acc: "KfAccSum", operands: ["input"], pro: identity, epi: () => "r.value / r.count", dims: "dim" },
  prod: { acc: "KfAccProd", operands: ["input"], pro: identity, epi: value, dims: "dim" },
  // NaNs count as zero (torch.nansum); infinities stay.
  nansum: {
    acc: "KfAccSum",
    operands: ["input"],
    pro: ([a]) => `(isnan(${a}) ? 0.f : (${a}))`,
    epi: value,
    dims: "dim",
  },
  amax: { acc: "KfAccMax", operands: ["input"], pro: identity, epi: value, dims: "dim" },
  amin: { acc: "KfAccMin", operands: ["input"], pro: identity, epi: value, dims: "dim" },
  max: { acc: "KfAccMax", operands: ["input"], pro: identity, epi: value, dims: "all" },
  min: { acc: "KfAccMin", operands: ["input"], pro: identity, epi: value, dims: "all" },
  max_dim: {
    acc: "KfAccMax",
    operands: ["input"],
    pro: identity,
    epi: value,
    dims: "dim",
    valuesOfPair: true,
    secondOfPair: "argmax",
  },
  min_dim: {
    acc: "KfAccMin",
    operands: ["input"],
    pro: identity,
    epi: value,
    dims: "dim",
    valuesOfPair: true,
    secondOfPair: "argmin",
  },
  // torch.aminmax: (min, max) over `dim` (every dim when None).
  aminmax: {
    acc: "KfAccMin",
    operands: ["input"],
    pro: identity,
    epi: value,
    dims: "dim",
    valuesOfPair: true,
    secondOfPair: "amax",
  },
  argmax: { acc: "KfAccArgMax", operands: ["input"], pro: identity, epi: value, dims: "dim", index: true },
  argmin: { acc: "KfAccArgMin", operands: ["input"], pro: identity, epi: value, dims: "dim", index: true },
  logsumexp: { acc: "KfAccLogSumExp", operands: ["input"], pro: identity, epi: value, dims: "dim" },
  var: {
    acc: "KfAccWelford",
    operands: ["input"],
    pro: identity,
    epi: (p) => {
      const c = correction(p);
      return c === null ? null : `r.m2 / fmaxf(r.count - ${c}, 0.f)`;
    },
    dims: "dim",
  },
  std: {
    acc: "KfAccWelford",
    operands: ["input"],
    pro: identity,
    epi: (p) => {
      const c = correction(p);
      return c === null ? null : `sqrtf(r.m2 / fmaxf(r.count - ${c}, 0.f))`;
    },
    dims: "dim",
  },
  vector_norm: {
    acc: "KfAccSum",
    accOf: (p) => pNormAcc(p.num("ord", 2)),
    operands: ["input"],
    pro: ([a], p) => pNormPro(a ?? "", p.num("ord", 2)),
    epi: (p) => pNormEpi(p.num("ord", 2)),
    dims: "dim",
  },
  // torch: the p-norm of x1 - x2 + eps over the last dim.
  pairwise_distance: {
    acc: "KfAccSum",
    accOf: (p) => pNormAcc(p.num("p", 2)),
    operands: ["x1", "x2"],
    pro: ([a, b], p) => {
      const eps = p.num("eps", 1e-6);
      return eps === null ? null : pNormPro(`(${a}) - (${b}) + ${eps}`, p.num("p", 2));
    },
    epi: (p) => pNormEpi(p.num("p", 2)),
    dims: "last",
  },
  mse_loss: loss(([a, b]) => `((${a}) - (${b})) * ((${a}) - (${b}))`),
  l1_loss: loss(([a, b]) => `fabsf((${a}) - (${b}))`),
  smooth_l1_loss: loss(([a, b], p) => {
    const beta = p.num("beta", 1);
    if (beta === null) return null;
    const d = `fabsf((${a}) - (${b}))`;
    return `(${d} < ${beta} ? 0.5f * ${d} * ${d} / ${beta} : ${d} - 0.5f * ${beta})`;
  }),
  kl_div: loss(
    // torch's pointwise term: xlogy(t, t) - t * x (0 where t == 0), or exp(t) * (t - x) for a log target.
    ([x, t], p) =>
      p.bool("log_target")
        ? `expf(${t}) * ((${t}) - (${x}))`
        : `((${t}) == 0.f ? 0.f : (${t}) * logf(${t})) - (${t}) * (${x})`,
    {
      epi: (p) => {
        const reduction = p.str("reduction") ?? "mean";
        if (reduction === "batchmean") {
          const batch = p.size("input", 0);
          return batch === null ? null : `r.value / ${batch}`;
        }
        return lossEpi(p);
      },
      reductions: ["mean", "sum", "batchmean"],
    },
  ),
  // torch's terms, logs clamped at -100 as torch clamps them: -(t log p + (1 - t) log(1 - p)), times the weight.
  binary_cross_entropy: loss(
    ([p, t, w]) =>
      weighted(`((${t}) - 1.f) * fmaxf(log1pf(-(${p})), -100.f) - (${t}) * fmaxf(logf(${p}), -100.f)`, w),
    { operands: ["input", "target", "weight"], optional: ["weight"] },
  ),
  // (1 - t) x - (1 + (pos_weight - 1) t) logsigmoid(x), times the weight (torch's); -logsigmoid(x) written as
  // torch's stable max(-x, 0) + log1p(exp(-|x|)).
  binary_cross_entropy_with_logits: loss(
    ([x, t, w, pw]) => {
      const softplus = `(fmaxf(-(${x}), 0.f) + log1pf(expf(-fabsf(${x}))))`;
      const term = pw ? `(1.f + ((${pw}) - 1.f) * (${t})) * ${softplus}` : softplus;
      return weighted(`(1.f - (${t})) * (${x}) + ${term}`, w);
    },
    { operands: ["input", "target", "weight", "pos_weight"], optional: ["weight", "pos_weight"] },
  ),
  soft_margin_loss: loss(([x, t]) => `log1pf(expf(-(${t}) * (${x})))`),
  // torch: -(t logsigmoid(x) + (1 - t) logsigmoid(-x)) times the per-class weight, averaged over the classes, then
  // over the batch: the mean of every term.
  multilabel_soft_margin_loss: loss(
    ([x, t, w]) => weighted(`-((${t}) * kf_logsigmoid(${x}) + (1.f - (${t})) * kf_logsigmoid(-(${x})))`, w),
    {
      operands: ["input", "target", "weight"],
      optional: ["weight"],
      reductions: ["mean"],
      rowwiseNone: true,
    },
  ),
  // torch: exp(x) - t x of a log input, else x - t log(x + eps); full=True adds Stirling's term
  // t log(t) - t + log(2 pi t) / 2 where t > 1 (PyTorch's masked_fill(t <= 1, 0)).
  poisson_nll_loss: loss(([x, t], p) => {
    const logInput = p.bool("log_input");
    const full = p.bool("full");
    const eps = p.num("eps", 1e-8);
    if (full === null || logInput === null || eps === null) return null;
    const nll = logInput ? `expf(${x}) - (${t}) * (${x})` : `(${x}) - (${t}) * logf((${x}) + ${eps})`;
    if (!full) return nll;
    const stirling = `(${t}) * logf(${t}) - (${t}) + 0.5f * logf(6.283185307179586f * (${t}))`;
    return `${nll} + ((${t}) > 1.f ? ${stirling} : 0.f)`;
  }),
  // torch: where(t != 1, clamp_min(margin - x, 0), 0) + where(t != -1, x, 0).
  hinge_embedding_loss: loss(([x, t], p) => {
    const margin = p.num("margin", 1);
    return margin === null
      ? null
      : `((${t}) != 1.f ? kf_clamp_min(${margin} - (${x}), 0.f) : 0.f) + ((${t}) != -1.f ? (${x}) : 0.f)`;
  }),
  // torch divides each input by its clamped L2 norm, then sums the products: dot / (max(|x1|, eps) max(|x2|, eps)).
  cosine_similarity: {
    acc: "KfAccSums<3>",
    value: "KfSums<3>",
    operands: ["x1", "x2"],
    pro: ([a, b]) => `KfSums<3>{{(${a}) * (${b}), (${a}) * (${a}), (${b}) * (${b})}}`,
    epi: (p) => {
      const eps = p.num("eps", 1e-8);
      return eps === null
        ? null
        : `r.part[0] / fmaxf(sqrtf(r.part[1]), ${eps}) / fmaxf(sqrtf(r.part[2]), ${eps})`;
    },
    dims: "dim",
  },
  // torch: clamp_min(-target * (input1 - input2) + margin, 0).
  margin_ranking_loss: loss(
    ([a, b, t], p) => {
      const margin = p.num("margin", 0);
      return margin === null ? null : `kf_clamp_min(-(${t}) * ((${a}) - (${b})) + ${margin}, 0.f)`;
    },
    { operands: ["input1", "input2", "target"] },
  ),
  // torch's cross_entropy with class-index targets and no weight, one row of logits at a time: (m - x[t]) +
  // log sum exp(x - m) (log_softmax's -x[t] as ATen rounds it: the max taken out first), label smoothing's
  // share (1 - eps) of it plus eps times the row's mean of -log p; 0 where the target is ignore_index, NaN where
  // it is no class at all (ATen raises there). The logits are read once, no log-probabilities written.
  cross_entropy: {
    acc: "KfAccCrossEntropy",
    // the row's logit sum only where label smoothing's mean term needs it
    accOf: (p) => {
      const eps = p.num("label_smoothing", 0);
      return eps === null ? null : eps === "0.f" ? "KfAccCrossEntropy" : "KfAccCrossEntropySmoothed";
    },
    value: "KfSums<2>",
    operands: ["input", "target"],
    integerOperands: ["target"],
    pro: ([x, t]) => `KfSums<2>{{${x}, ${t}}}`,
    epi: (p) => {
      const ignore = p.num("ignore_index", -100);
      const eps = p.num("label_smoothing", 0);
      if (ignore === null || eps === null) return null;
      const nll = "(r.m2 - r.part[0]) + r.value";
      const smooth = "(r.m2 - r.part[1] / r.count) + r.value";
      const row = eps === "0.f" ? nll : `(1.f - ${eps}) * (${nll}) + ${eps} * (${smooth})`;
      return `(r.part[3] == ${ignore} ? 0.f : (r.part[2] == 1.f ? ${row} : NAN))`;
    },
    dims: "class",
    reductions: ["none", "mean", "sum"],
    rowwiseNone: true,
    absent: ["weight"],
    finish: (operand, arg, reduction) => {
      if (reduction === "none") return ["return out"];
      if (reduction === "sum") return ["return out.sum()"];
      // ATen's mean: the rows' sum over the count of targets not ignored (0 / 0 = NaN when all are)
      const kept = `(${operand("target")} != ${arg("ignore_index", "-100")}).sum()`;
      return reduction === "mean" ? [`return out.sum() / ${kept}`] : null;
    },
  },
  huber_loss: loss(([a, b], p) => {
    const delta = p.num("delta", 1);
    if (delta === null) return null;
    const d = `fabsf((${a}) - (${b}))`;
    return `(${d} < ${delta} ? 0.5f * ${d} * ${d} : ${delta} * (${d} - 0.5f * ${delta}))`;
  }),
};
