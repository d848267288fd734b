// Pointwise ops the codegen fuses: for each canonical op, which of its normalised arguments are operands
// (a tensor, or a scalar that may be one) and the fp32 C++ expression computing it. Anything not listed,
// or listed but with an argument combination `emit` declines (returns null), stays a PyTorch call.
// Device helpers (kf_relu, kf_gelu, ...) live in codegen/cuda/kf_pointwise.cuh.
import type { Arg } from "../graph.ts";
import { floatLiteral } from "./float-literal.ts";
import { REDUCTIONS, type ReduceSpec } from "./reduce.ts";

export { floatLiteral };

/** Reads the op's non-operand arguments as C++ float literals (or strings), null when absent/unusable. */
export interface ParamReader {
  /** A numeric argument as a C++ float expression; `fallback` when the argument is absent or None. */
  num(name: string, fallback?: number): string | null;
  str(name: string): string | null;
  bool(name: string): boolean | null;
  has(name: string): boolean;
  /** An integer argument's captured value, also when a module attribute holds it (dim=self.dim): structural
   * arguments (dims) are fixed when the kernel is planned, and the region guards the attribute at run time. */
  int(name: string): number | null;
  /** An integer list argument's captured values (a single int as a list of one); null when absent or not ints. */
  ints(name: string): number[] | null;
  /** The size of tensor argument `name` along `dim`, read at run time (a runtime scalar); null when absent. */
  size(name: string, dim: number): string | null;
}

export interface PointwiseSpec {
  /** fn keys holding operands, in order: each a tensor or a scalar. */
  operands: string[];
  /** Operands that may be absent (None): emit sees "" for them. */
  optional?: string[];
  /** Operands of one value per channel, (C,), lined up with dim 1 of `input` (BatchNorm's statistics): read as
   * their (C, 1, ..., 1) views, not broadcast from the last dim. */
  channel?: string[];
  emit(o: string[], p: ParamReader): string | null;
}

const unary = (f: (a: string) => string): PointwiseSpec => ({
  operands: ["input"],
  emit: ([a]) => f(a ?? ""),
});
const call = (fn: string): PointwiseSpec => unary((a) => `${fn}(${a})`);
const compare = (opr: string): PointwiseSpec => ({
  operands: ["input", "other"],
  emit: ([a, b]) => `((${a}) ${opr} (${b}) ? 1.f : 0.f)`,
});

/** A logical op of two truth values (nonzero is true), as 1.f / 0.f. */
const both = (f: (a: string, b: string) => string): PointwiseSpec => ({
  operands: ["input", "other"],
  emit: ([a, b]) => `((${f(`((${a}) != 0.f)`, `((${b}) != 0.f)`)}) ? 1.f : 0.f)`,
});

function scaled(alpha: string | null, b: string): string | null {
  if (alpha === null) return null;
  return alpha === "1.f" ? b : `${alpha} * (${b})`;
}

/** A factory `*_like(input)` of one value, `value` (null: no kernel form). */
function likeInput(value: (p: ParamReader) => string | null): PointwiseSpec {
  return {
    operands: ["input"],
    emit: (_o, p) => (p.has("device") || p.bool("requires_grad") === true ? null : value(p)),
  };
}

/** A normalisation applied from its running statistics (where `fromRunningStats` says it is): a per-channel
 * affine the kernel reads the statistics for when it runs (never folded: a load_state_dict or an in-place write
 * is seen). */
function runningStatsAffine(fromRunningStats: (p: ParamReader) => boolean): PointwiseSpec {
  return {
    operands: ["input", "running_mean", "running_var", "weight", "bias"],
    optional: ["weight", "bias"],
    channel: ["running_mean", "running_var", "weight", "bias"],
    emit: ([x, mean, variance, w, b], p) => {
      const eps = p.num("eps", 1e-5);
      if (!fromRunningStats(p) || eps === null || !mean || !variance) return null;
      let e = `((${x}) - (${mean})) * (1.f / sqrtf((${variance}) + ${eps}))`;
      if (w) e = `(${e}) * (${w})`;
      return b ? `(${e}) + (${b})` : e;
    },
  };
}

/** The value of a cast to each float dtype, in fp32. */
const CASTS = new Map<string, (a: string) => string>([
  ["float32", (a) => a],
  ["float16", (a) => `kf_round_f16(${a})`],
  ["bfloat16", (a) => `kf_round_bf16(${a})`],
]);

const BASE: Record<string, PointwiseSpec> = {
  identity: unary((a) => a),
  relu: call("kf_relu"),
  relu6: unary((a) => `kf_hardtanh(${a}, 0.f, 6.f)`),
  sigmoid: call("kf_sigmoid"),
  tanh: call("tanhf"),
  silu: call("kf_silu"),
  mish: call("kf_mish"),
  hardswish: call("kf_hardswish"),
  hardsigmoid: call("kf_hardsigmoid"),
  logsigmoid: call("kf_logsigmoid"),
  softsign: call("kf_softsign"),
  tanhshrink: unary((a) => `(${a}) - tanhf(${a})`),
  selu: unary((a) => `kf_elu(${a}, 1.6732632423543772f, 1.0507009873554805f, 1.f)`),
  gelu: {
    operands: ["input"],
    emit: ([a], p) => {
      const approx = p.str("approximate") ?? "none";
      if (approx === "none") return `kf_gelu(${a})`;
      return approx === "tanh" ? `kf_gelu_tanh(${a})` : null;
    },
  },
  leaky_relu: {
    operands: ["input"],
    emit: ([a], p) => `kf_leaky_relu(${a}, ${p.num("negative_slope", 0.01)})`,
  },
  elu: { operands: ["input"], emit: ([a], p) => `kf_elu(${a}, ${p.num("alpha", 1)}, 1.f, 1.f)` },
  celu: {
    operands: ["input"],
    emit: ([a], p) => {
      const alpha = p.num("alpha", 1);
      return alpha === null ? null : `kf_elu(${a}, ${alpha}, 1.f, 1.f / ${alpha})`;
    },
  },
  softplus: {
    operands: ["input"],
    emit: ([a], p) => `kf_softplus(${a}, ${p.num("beta", 1)}, ${p.num("threshold", 20)})`,
  },
  hardtanh: {
    operands: ["input"],
    emit: ([a], p) => `kf_hardtanh(${a}, ${p.num("min_val", -1)}, ${p.num("max_val", 1)})`,
  },
  threshold: {
    operands: ["input"],
    emit: ([a], p) => `kf_threshold(${a}, ${p.num("threshold")}, ${p.num("value")})`,
  },
  clamp: {
    operands: ["input", "min", "max"],
    optional: ["min", "max"],
    emit: ([a, lo, hi]) => {
      let e = a ?? "";
      if (lo) e = `kf_clamp_min(${e}, ${lo})`;
      if (hi) e = `kf_clamp_max(${e}, ${hi})`;
      return lo || hi ? e : null;
    },
  },
  // Eval-mode RReLU is leaky_relu at the mean slope (training draws slopes: the planner keeps it, `rng`).
  rrelu: {
    operands: ["input"],
    emit: ([a], p) => {
      const lower = p.num("lower", 0.125);
      const upper = p.num("upper", 1 / 3);
      if (p.bool("training") !== false || lower === null || upper === null) return null;
      return `kf_leaky_relu(${a}, (${lower} + ${upper}) * 0.5f)`;
    },
  },
  // nan_to_num's default bounds are the dtype's largest finite values: float32's here (the planner declines a
  // half-precision result without explicit bounds).
  nan_to_num: {
    operands: ["input"],
    emit: ([a], p) =>
      `kf_nan_to_num(${a}, ${p.num("nan", 0)}, ${p.num("posinf", 3.4028234663852886e38)}, ${p.num("neginf", -3.4028234663852886e38)})`,
  },
  softshrink: { operands: ["input"], emit: ([a], p) => `kf_softshrink(${a}, ${p.num("lambd", 0.5)})` },
  hardshrink: { operands: ["input"], emit: ([a], p) => `kf_hardshrink(${a}, ${p.num("lambd", 0.5)})` },
  neg: unary((a) => `-(${a})`),
  abs: call("fabsf"),
  exp: call("expf"),
  exp2: call("exp2f"),
  expm1: call("expm1f"),
  log: call("logf"),
  log2: call("log2f"),
  log10: call("log10f"),
  log1p: call("log1pf"),
  sqrt: call("sqrtf"),
  rsqrt: unary((a) => `(1.f / sqrtf(${a}))`),
  reciprocal: unary((a) => `(1.f / (${a}))`),
  square: unary((a) => `((${a}) * (${a}))`),
  sin: call("kf_sin"),
  cos: call("kf_cos"),
  erf: call("erff"),
  erfc: call("erfcf"),
  asin: call("asinf"),
  acos: call("acosf"),
  atan: call("atanf"),
  sinh: call("sinhf"),
  cosh: call("coshf"),
  asinh: call("asinhf"),
  acosh: call("acoshf"),
  atanh: call("atanhf"),
  frac: unary((a) => `((${a}) - truncf(${a}))`),
  floor: call("floorf"),
  ceil: call("ceilf"),
  round: {
    operands: ["input"],
    emit: ([a], p) => {
      const decimals = Number.parseFloat(p.num("decimals", 0) ?? "");
      if (!Number.isInteger(decimals)) return null;
      if (decimals === 0) return `rintf(${a})`;
      const tenPow = floatLiteral(10 ** Math.abs(decimals));
      return `kf_round_decimals(${a}, ${tenPow}, ${decimals < 0})`;
    },
  },
  trunc: call("truncf"),
  sign: call("kf_sign"),
  sgn: call("kf_sign"),
  sinc: call("kf_sinc"),
  entr: call("kf_entr"),
  ndtr: call("kf_ndtr"),
  log_ndtr: call("kf_log_ndtr"),
  // eps clamps the input to [eps, 1 - eps]; absent (or negative, which PyTorch ignores) it does not.
  logit: {
    operands: ["input"],
    emit: ([a], p) => {
      if (!p.has("eps")) return `kf_logit(${a})`;
      const eps = p.num("eps");
      if (eps === null) return null;
      return eps.startsWith("-") ? `kf_logit(${a})` : `kf_logit_eps(${a}, ${eps})`;
    },
  },
  add: {
    operands: ["input", "other"],
    emit: ([a, b], p) => {
      const term = scaled(p.num("alpha", 1), b ?? "");
      return term === null ? null : `(${a}) + ${term}`;
    },
  },
  sub: {
    operands: ["input", "other"],
    emit: ([a, b], p) => {
      const term = scaled(p.num("alpha", 1), b ?? "");
      return term === null ? null : `(${a}) - ${term}`;
    },
  },
  mul: { operands: ["input", "other"], emit: ([a, b]) => `(${a}) * (${b})` },
  div: {
    operands: ["input", "other"],
    emit: ([a, b], p) => {
      const mode = p.str("rounding_mode");
      if (mode === null) return `(${a}) / (${b})`;
      if (mode === "trunc") return `truncf((${a}) / (${b}))`;
      return mode === "floor" ? `kf_floor_div(${a}, ${b})` : null;
    },
  },
  remainder: { operands: ["input", "other"], emit: ([a, b]) => `kf_remainder(${a}, ${b})` },
  fmod: { operands: ["input", "other"], emit: ([a, b]) => `fmodf(${a}, ${b})` },
  logaddexp: { operands: ["input", "other"], emit: ([a, b]) => `kf_logaddexp(${a}, ${b})` },
  logaddexp2: { operands: ["input", "other"], emit: ([a, b]) => `kf_logaddexp2(${a}, ${b})` },
  xlogy: { operands: ["input", "other"], emit: ([a, b]) => `kf_xlogy(${a}, ${b})` },
  xlog1py: { operands: ["input", "other"], emit: ([a, b]) => `kf_xlog1py(${a}, ${b})` },
  heaviside: { operands: ["input", "values"], emit: ([a, v]) => `kf_heaviside(${a}, ${v})` },
  atan2: { operands: ["input", "other"], emit: ([a, b]) => `atan2f(${a}, ${b})` },
  hypot: { operands: ["input", "other"], emit: ([a, b]) => `hypotf(${a}, ${b})` },
  copysign: { operands: ["input", "other"], emit: ([a, b]) => `copysignf(${a}, ${b})` },
  // fmax / fmin ignore a NaN operand (maximum / minimum propagate it): fmaxf / fminf exactly.
  fmax: { operands: ["input", "other"], emit: ([a, b]) => `fmaxf(${a}, ${b})` },
  fmin: { operands: ["input", "other"], emit: ([a, b]) => `fminf(${a}, ${b})` },
  lerp: { operands: ["input", "end", "weight"], emit: ([a, b, w]) => `kf_lerp(${a}, ${b}, ${w})` },
  addcmul: {
    operands: ["input", "tensor1", "tensor2"],
    emit: ([a, b, c], p) => {
      const term = scaled(p.num("value", 1), `(${b}) * (${c})`);
      return term === null ? null : `(${a}) + ${term}`;
    },
  },
  addcdiv: {
    operands: ["input", "tensor1", "tensor2"],
    emit: ([a, b, c], p) => {
      const term = scaled(p.num("value", 1), `(${b}) / (${c})`);
      return term === null ? null : `(${a}) + ${term}`;
    },
  },
  pow: { operands: ["input", "exponent"], emit: ([a, e]) => `kf_pow(${a}, ${e})` },
  maximum: { operands: ["input", "other"], emit: ([a, b]) => `kf_max(${a}, ${b})` },
  minimum: { operands: ["input", "other"], emit: ([a, b]) => `kf_min(${a}, ${b})` },
  where: {
    operands: ["condition", "input", "other"],
    emit: ([c, a, b]) => `((${c}) != 0.f ? (${a}) : (${b}))`,
  },
  masked_fill: {
    operands: ["input", "mask", "value"],
    emit: ([a, m, v]) => `((${m}) != 0.f ? (${v}) : (${a}))`,
  },
  // Of a bool tensor only (the planner checks): ~mask.
  logical_not: unary((a) => `((${a}) != 0.f ? 0.f : 1.f)`),
  bitwise_not: unary((a) => `((${a}) != 0.f ? 0.f : 1.f)`),
  // Of bool masks (bitwise: the planner checks), or of any values (logical: nonzero is true).
  bitwise_and: both((a, b) => `${a} && ${b}`),
  bitwise_or: both((a, b) => `${a} || ${b}`),
  bitwise_xor: both((a, b) => `${a} != ${b}`),
  logical_and: both((a, b) => `${a} && ${b}`),
  logical_or: both((a, b) => `${a} || ${b}`),
  logical_xor: both((a, b) => `${a} != ${b}`),
  // Float classes as masks (1.f / 0.f): nvcc's fast math keeps NaN and inf, and these test their bits.
  isnan: unary((a) => `(isnan(${a}) ? 1.f : 0.f)`),
  isinf: unary((a) => `(isinf(${a}) ? 1.f : 0.f)`),
  isfinite: unary((a) => `(isfinite(${a}) ? 1.f : 0.f)`),
  gt: compare(">"),
  lt: compare("<"),
  ge: compare(">="),
  le: compare("<="),
  eq: compare("=="),
  ne: compare("!="),
  // A dtype cast (x.float(), x.half(), x.to(torch.bfloat16)): exact to float32 (from a mask, a half or a
  // float), rounded to nearest-even to half precision. A cast that also moves devices is not one.
  to: {
    operands: ["input"],
    emit: ([a], p) => {
      if (p.has("args") || p.has("device")) return null;
      const cast = CASTS.get(p.str("dtype") ?? "");
      return cast === undefined ? null : cast(a ?? "");
    },
  },
  // A constant the shape of its input (torch.where(c, y, torch.zeros_like(y))): the input is read for its
  // shape alone. A tensor made on another device, or one that records gradients, is not one.
  zeros_like: likeInput(() => "0.f"),
  ones_like: likeInput(() => "1.f"),
  full_like: likeInput((p) => p.num("fill_value")),
  // Eval-mode batch norm, and instance norm from running statistics (track_running_stats in eval), are a
  // per-channel affine of those statistics. Training mode and batch statistics are the normalize rule's.
  batch_norm: runningStatsAffine((p) => p.bool("training") === false),
  instance_norm: runningStatsAffine((p) => p.bool("use_input_stats") === false),
  // Dropout is pointwise only where it draws nothing: eval mode or p = 0 (the planner checks `rng`).
  dropout: {
    operands: ["input"],
    emit: ([a], p) => (p.bool("training") === false || p.num("p") === "0.f" ? (a ?? "") : null),
  },
};

/** A loss with reduction='none' is its per-element term: the reduction rule's prologue, elementwise. */
function elementwiseLoss(spec: ReduceSpec): PointwiseSpec {
  return {
    operands: spec.operands,
    optional: spec.optional,
    emit: (o, p) => {
      if (p.str("reduction") !== "none") return null;
      if (["size_average", "reduce", ...(spec.absent ?? [])].some((key) => p.has(key))) return null;
      return spec.pro(o, p);
    },
  };
}

export const POINTWISE: Record<string, PointwiseSpec> = {
  ...BASE,
  ...Object.fromEntries(
    Object.entries(REDUCTIONS)
      .filter(([, spec]) => spec.reductions && !spec.rowwiseNone)
      .map(([op, spec]) => [op, elementwiseLoss(spec)]),
  ),
};

/** A scalar Arg's numeric value (inf/nan included), or null when it is not a number. */
export function scalarValue(arg: Arg | undefined): number | null {
  if (arg?.t !== "const") return null;
  if (arg.special === "inf") return Number.POSITIVE_INFINITY;
  if (arg.special === "-inf") return Number.NEGATIVE_INFINITY;
  if (arg.special === "nan") return Number.NaN;
  if (typeof arg.value === "number") return arg.value;
  if (typeof arg.value === "boolean") return arg.value ? 1 : 0;
  return null;
}
