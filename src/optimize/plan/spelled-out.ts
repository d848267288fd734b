// Ops no rule takes, spelled out as the ops they are, so that the rules take those:
// - F.glu / nn.GLU: `a, b = x.chunk(2, dim); a * torch.sigmoid(b)`. glu is no pointwise op (its output is half
//   its input along `dim`), so the conv or linear before it and the ops after it split around one PyTorch
//   kernel. Spelled out, the halves are views of x and sigmoid → mul fuse with what follows.
// - F.prelu / nn.PReLU: `torch.where(x >= 0, x, w * x)`, the weight one value or one per channel (dim 1, viewed
//   as (C, 1, ..., 1)): a pointwise select that joins the region of the conv or linear before it.
//
// - F.normalize of an order other than 2 (the normalisation rule takes p = 2 in one kernel): `input /
//   input.norm(p, dim, keepdim=True).clamp_min(eps)`, PyTorch's own definition of it (expand_as is the divide's
//   broadcast), so the norm is one reduction and the divide a pointwise region after it, in any float dtype.
// - a global adaptive pool (output size all ones): the mean / amax over its spatial dims, keepdim, a reduction
//   that takes the ops before it as its prologue.
// - an einsum that sums nothing (`'bchw,c->bchw'`, a per-channel scale): the broadcast multiply it computes.
// - cross_entropy with class indices where the reduction rule's one-pass kernel does not take it (a class
//   weight): log_softmax then nll_loss, as ATen computes it (crossEntropySpelledOut).
// - triplet_margin_loss and cosine_embedding_loss (cosine-embedding-spelled-out.ts): the distances or row sums
//   and the hinge ATen computes them from.
//
// Each only where the spelled-out ops equal the op exactly on the CPU (the fallback's check): glu in float32 /
// float64 (glu rounds half precision once, the spelled-out ops twice) along an even size; prelu in any float
// dtype with its weight of the input's dtype (the same products and selects).
import type { Arg, GraphNode, TensorMeta } from "../graph.ts";
import { scalarValue } from "../ops/pointwise.ts";
import { cosineEmbeddingSpelledOut } from "./cosine-embedding-spelled-out.ts";
import { contiguousStride } from "./graph-edit.ts";
import { FLOAT_DTYPES, type GraphView } from "./graph-view.ts";
import { SEED_RULES } from "./rules.ts";

const EXACT_DTYPES = new Set(["float32", "float64"]);

/** An int the call passed as a literal. A model attribute's value (`dim=self.dim`: the const carries `attr`) is
 * no literal: the reference reads the attribute on every call, and a spelled-out op built from its value at
 * capture (chunk's dim, the norm's dims, the pooled dims) would keep computing the old one after it changed. */
function constInt(arg: Arg | undefined): number | null {
  return arg?.t === "const" && arg.pytype === "int" && !arg.attr && typeof arg.value === "number"
    ? arg.value
    : null;
}

/** A fresh node id `base`, `base_1`, ... not in `taken` (which it joins). */
function freshId(base: string, taken: Set<string>): string {
  let id = base;
  for (let i = 1; taken.has(id); i++) id = `${base}_${i}`;
  taken.add(id);
  return id;
}

function plainNode(id: string, rest: Omit<GraphNode, "id" | "modeDependent" | "rng" | "inplace">): GraphNode {
  return { id, ...rest, modeDependent: false, rng: false, inplace: false };
}

/** `input.view(shape)` / `input.reshape(shape)` as a node (`meta`: the input's). */
function shapedNode(
  id: string,
  method: "view" | "reshape",
  input: Arg,
  meta: TensorMeta,
  shape: number[],
): GraphNode {
  const size: Arg = {
    t: "list",
    kind: "tuple",
    items: shape.map((value) => ({ t: "const", pytype: "int", value })),
  };
  return plainNode(id, {
    kind: "call_method",
    target: method,
    args: [input, size],
    kwargs: {},
    op: method,
    fn: { input, [method === "view" ? "size" : "shape"]: size },
    out: { t: "tensor", meta: { ...meta, shape, stride: contiguousStride(shape) } },
  });
}

/** glu's replacement nodes (chunk, the two halves, sigmoid, and the product under glu's own id), or null. */
function gluSpelledOut(node: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  const input = node.fn?.input;
  const meta = view.tensorOf(input);
  const out = view.outMeta(node);
  if (!input || !meta || !out || !EXACT_DTYPES.has(meta.dtype) || node.inplace) return null;
  const rank = meta.shape.length;
  const raw = node.fn?.dim === undefined ? -1 : constInt(node.fn.dim);
  if (raw === null || rank === 0 || raw < -rank || raw >= rank) return null;
  const dim = raw < 0 ? raw + rank : raw;
  const size = meta.shape[dim] ?? 0;
  if (size % 2 !== 0) return null;
  const half: TensorMeta = { ...meta, shape: meta.shape.map((s, i) => (i === dim ? size / 2 : s)) };
  const dimArg: Arg = { t: "const", pytype: "int", value: dim };
  const two: Arg = { t: "const", pytype: "int", value: 2 };
  const halves = freshId(`${node.id}_halves`, taken);
  const [first, second] = [0, 1].map((i) => {
    const index: Arg = { t: "const", pytype: "int", value: i };
    const source: Arg = { t: "node", id: halves };
    return plainNode(freshId(`${node.id}_${i ? "gate_in" : "value"}`, taken), {
      kind: "call_function",
      target: "operator.getitem",
      args: [source, index],
      kwargs: {},
      op: "getitem",
      fn: { input: source, index },
      out: { t: "tensor", meta: half },
    });
  });
  if (!first || !second) return null;
  const gate = freshId(`${node.id}_gate`, taken);
  const result: TensorMeta = { ...out, stride: contiguousStride(out.shape) };
  return [
    plainNode(halves, {
      kind: "call_method",
      target: "chunk",
      args: [input, two],
      kwargs: { dim: dimArg },
      op: "chunk",
      fn: { input, chunks: two, dim: dimArg },
      out: { t: "tuple", items: [half, half] },
    }),
    first,
    second,
    plainNode(gate, {
      kind: "call_function",
      target: "torch.sigmoid",
      args: [{ t: "node", id: second.id }],
      kwargs: {},
      op: "sigmoid",
      fn: { input: { t: "node", id: second.id } },
      out: { t: "tensor", meta: result },
    }),
    plainNode(node.id, {
      kind: "call_function",
      target: "operator.mul",
      args: [
        { t: "node", id: first.id },
        { t: "node", id: gate },
      ],
      kwargs: {},
      op: "mul",
      fn: { input: { t: "node", id: first.id }, other: { t: "node", id: gate } },
      out: node.out,
    }),
  ];
}

/** prelu's replacement nodes (the weight's channel view where it needs one, x >= 0, w * x, and the select under
 * prelu's own id), or null. */
function preluSpelledOut(node: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  const input = node.fn?.input;
  const weight = node.fn?.weight;
  const meta = view.tensorOf(input);
  const wMeta = view.tensorOf(weight);
  const out = view.outMeta(node);
  if (!input || !weight || !meta || !wMeta || !out || node.inplace) return null;
  if (!FLOAT_DTYPES.has(meta.dtype) || wMeta.dtype !== meta.dtype || wMeta.shape.length !== 1) return null;
  const rank = meta.shape.length;
  const channels = wMeta.shape[0] ?? 0;
  const perChannel = channels !== 1;
  if (rank === 0 || (perChannel && (rank < 2 || meta.shape[1] !== channels))) return null;
  const nodes: GraphNode[] = [];
  let w: Arg = weight;
  if (perChannel && rank > 2) {
    const shape = [channels, ...Array.from({ length: rank - 2 }, () => 1)];
    const id = freshId(`${node.id}_weight`, taken);
    nodes.push(shapedNode(id, "view", weight, wMeta, shape));
    w = { t: "node", id };
  }
  const dense: TensorMeta = { ...out, stride: contiguousStride(out.shape) };
  const zero: Arg = { t: "const", pytype: "int", value: 0 };
  const positive = freshId(`${node.id}_positive`, taken);
  const scaled = freshId(`${node.id}_scaled`, taken);
  return [
    ...nodes,
    plainNode(positive, {
      kind: "call_function",
      target: "operator.ge",
      args: [input, zero],
      kwargs: {},
      op: "ge",
      fn: { input, other: zero },
      out: { t: "tensor", meta: { ...dense, dtype: "bool" } },
    }),
    plainNode(scaled, {
      kind: "call_function",
      target: "operator.mul",
      args: [w, input],
      kwargs: {},
      op: "mul",
      fn: { input: w, other: input },
      out: { t: "tensor", meta: dense },
    }),
    plainNode(node.id, {
      kind: "call_function",
      target: "torch.where",
      args: [{ t: "node", id: positive }, input, { t: "node", id: scaled }],
      kwargs: {},
      op: "where",
      fn: { condition: { t: "node", id: positive }, input, other: { t: "node", id: scaled } },
      out: node.out,
    }),
  ];
}

/** normalize's replacement nodes (the norm with keepdim, its clamp_min, and the divide under normalize's id), or
 * null. */
function normalizeSpelledOut(node: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  const fn = node.fn;
  const input = fn?.input;
  const meta = view.tensorOf(input);
  const out = view.outMeta(node);
  if (!fn || !input || !meta || !out || node.inplace || !FLOAT_DTYPES.has(meta.dtype)) return null;
  const { p, eps } = fn;
  const order = p?.t === "const" && !p.attr ? scalarValue(p) : null;
  if (!p || order === null || Number.isNaN(order) || order === 2) return null;
  if (eps?.t !== "const" || eps.attr || typeof eps.value !== "number") return null;
  const rank = meta.shape.length;
  const raw = constInt(fn.dim);
  if (raw === null || rank === 0 || raw < -rank || raw >= rank) return null;
  const dim = raw < 0 ? raw + rank : raw;
  const shape = meta.shape.map((s, i) => (i === dim ? 1 : s));
  const normMeta: TensorMeta = { ...meta, shape, stride: contiguousStride(shape) };
  const dims: Arg = { t: "list", kind: "list", items: [{ t: "const", pytype: "int", value: dim }] };
  const keep: Arg = { t: "const", pytype: "bool", value: true };
  const none: Arg = { t: "const", pytype: "none", value: null };
  const norm = freshId(`${node.id}_norm`, taken);
  const clamped = freshId(`${node.id}_denom`, taken);
  return [
    plainNode(norm, {
      kind: "call_function",
      target: "torch.linalg.vector_norm",
      args: [input, p, dims, keep],
      kwargs: {},
      op: "vector_norm",
      fn: { input, ord: p, dim: dims, keepdim: keep, dtype: none },
      out: { t: "tensor", meta: normMeta },
    }),
    plainNode(clamped, {
      kind: "call_function",
      target: "torch.clamp_min",
      args: [{ t: "node", id: norm }, eps],
      kwargs: {},
      op: "clamp",
      fn: { input: { t: "node", id: norm }, min: eps, max: none },
      out: { t: "tensor", meta: normMeta },
    }),
    plainNode(node.id, {
      kind: "call_function",
      target: "operator.truediv",
      args: [input, { t: "node", id: clamped }],
      kwargs: {},
      op: "div",
      fn: { input, other: { t: "node", id: clamped }, rounding_mode: none },
      out: node.out,
    }),
  ];
}

/** A global adaptive pool (`nn.AdaptiveAvgPool2d(1)`, `F.adaptive_max_pool1d(x, 1)`, output size all ones) as
 * the reduction it is, `x.mean((2, 3), keepdim=True)` / `x.amax(...)`, or null. The pool rule takes no prologue,
 * so `conv → relu → AdaptiveAvgPool2d(1)` was two passes; as a reduction it is one, its conv read channels-last.
 * Bit-equal on the CPU (fp32, fp16, bf16; contiguous and channels-last, measured with torch 2.x). */
function globalPoolSpelledOut(node: GraphNode, view: GraphView): GraphNode[] | null {
  const input = node.fn?.input;
  const meta = view.tensorOf(input);
  const out = view.outMeta(node);
  if (!input || !meta || !out || node.inplace) return null;
  const n = Number.parseInt(node.op.slice(-2, -1), 10);
  const rank = meta.shape.length;
  if (!(n >= 1 && n <= 3) || rank < n + 1) return null;
  const size = node.fn?.output_size;
  const one = (a: Arg | undefined) => constInt(a) === 1;
  const allOnes = one(size) || (size?.t === "list" && size.items.length === n && size.items.every(one));
  const indices = node.fn?.return_indices;
  if (!allOnes || (indices && !(indices.t === "const" && indices.value === false))) return null;
  const dims = Array.from({ length: n }, (_, i) => rank - n + i);
  if (out.shape.join() !== meta.shape.map((s, i) => (dims.includes(i) ? 1 : s)).join()) return null;
  const dimArg: Arg = {
    t: "list",
    kind: "tuple",
    items: dims.map((d) => ({ t: "const", pytype: "int", value: d })),
  };
  const keep: Arg = { t: "const", pytype: "bool", value: true };
  const avg = node.op.startsWith("adaptive_avg");
  return [
    plainNode(node.id, {
      kind: "call_function",
      target: avg ? "torch.mean" : "torch.amax",
      args: [input, dimArg, keep],
      kwargs: {},
      op: avg ? "mean" : "amax",
      fn: avg
        ? { input, dim: dimArg, keepdim: keep, dtype: { t: "const", pytype: "none", value: null } }
        : { input, dim: dimArg, keepdim: keep },
      out: node.out,
    }),
  ];
}

/** The letters of an einsum equation with two operands and no sum (`bchw,c->bchw`: every input letter is in
 * the output, none twice in one term), or null. */
function productEquation(equation: Arg | undefined): { terms: [string, string]; out: string } | null {
  if (equation?.t !== "const" || typeof equation.value !== "string") return null;
  const match = /^([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$/.exec(equation.value.replace(/\s+/g, ""));
  if (!match) return null;
  const [, a = "", b = "", out = ""] = match;
  const unique = (t: string) => new Set(t).size === t.length;
  if (![a, b, out].every(unique) || ![...a, ...b].every((c) => out.includes(c))) return null;
  return { terms: [a, b], out };
}

/** An einsum that sums nothing, one operand spanning the output in its order (`torch.einsum('bchw,c->bchw', y,
 * w)`: a per-channel scale), as the multiply it is: the other operand viewed to broadcast along its letters'
 * dims. einsum computes such an equation as that product (one rounding per element), or null. */
function einsumSpelledOut(node: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  const parsed = productEquation(node.fn?.equation);
  const operands = node.fn?.operands;
  const out = view.outMeta(node);
  if (!parsed || operands?.t !== "list" || operands.items.length !== 2 || !out || node.inplace) return null;
  const [first, second] = operands.items as [Arg, Arg];
  const fullAt = parsed.terms.indexOf(parsed.out);
  if (fullAt < 0) return null;
  const full = fullAt === 0 ? first : second;
  const other = fullAt === 0 ? second : first;
  const letters = parsed.terms[1 - fullAt] ?? "";
  const fullMeta = view.tensorOf(full);
  const otherMeta = view.tensorOf(other);
  if (!fullMeta || !otherMeta || !FLOAT_DTYPES.has(fullMeta.dtype) || otherMeta.dtype !== fullMeta.dtype)
    return null;
  if (out.shape.join() !== fullMeta.shape.join() || out.stride.join() !== contiguousStride(out.shape).join())
    return null;
  const positions = [...letters].map((c) => parsed.out.indexOf(c));
  if (positions.some((p, i) => i > 0 && p <= (positions[i - 1] ?? -1))) return null; // not in the output's order
  const start = positions[0] ?? parsed.out.length;
  const shape = [...parsed.out.slice(start)].map((c) => {
    const at = letters.indexOf(c);
    return at < 0 ? 1 : (otherMeta.shape[at] ?? -1);
  });
  if ([...letters].some((c, i) => ![1, out.shape[parsed.out.indexOf(c)]].includes(otherMeta.shape[i])))
    return null;
  const nodes: GraphNode[] = [];
  let operand = other;
  if (shape.join() !== otherMeta.shape.join()) {
    const id = freshId(`${node.id}_operand`, taken);
    nodes.push(shapedNode(id, "reshape", other, otherMeta, shape));
    operand = { t: "node", id };
  }
  return [
    ...nodes,
    plainNode(node.id, {
      kind: "call_function",
      target: "operator.mul",
      args: [full, operand],
      kwargs: {},
      op: "mul",
      fn: { input: full, other: operand },
      out: node.out,
    }),
  ];
}

const isNone = (arg: Arg | undefined) => arg === undefined || (arg.t === "const" && arg.pytype === "none");

/** cross_entropy with class-index targets and no label smoothing as the two calls ATen makes of it:
 * `F.nll_loss(F.log_softmax(input, class_dim), target, weight, ignore_index=, reduction=)`, bit for bit (the
 * log_softmax in the input's dtype, the class dim 1, or 0 for one sample's logits). The log_softmax is then a
 * normalisation region that takes the ops before it (`logits / T`) as its prologue; the nll_loss, a gather
 * of one value a row, stays PyTorch's. Probability targets and label smoothing take other paths in ATen. */
function crossEntropySpelledOut(node: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  // The reduction rule's one-pass kernel (REDUCTIONS.cross_entropy) takes it whole: left as the call it is.
  if (SEED_RULES.find((rule) => rule.name === "reduce")?.accepts(node, view) === null) return null;
  const fn = node.fn;
  const input = fn?.input;
  const target = fn?.target;
  const meta = view.tensorOf(input);
  const targetMeta = view.tensorOf(target);
  if (!fn || !input || !target || !meta || !targetMeta || node.inplace || !FLOAT_DTYPES.has(meta.dtype))
    return null;
  if (targetMeta.dtype !== "int64" || !isNone(fn.size_average) || !isNone(fn.reduce)) return null;
  // Label smoothing held by a model attribute (0.0 when captured) is read by the reference on every call: the
  // spelled-out calls drop it, so only a literal 0 (or none) is spelled out.
  const smoothing = fn.label_smoothing;
  if (smoothing && !(smoothing.t === "const" && smoothing.value === 0 && !smoothing.attr)) return null;
  const rank = meta.shape.length;
  if (rank === 0 || targetMeta.shape.length !== rank - 1) return null;
  const dim: Arg = { t: "const", pytype: "int", value: rank === 1 ? 0 : 1 };
  const none: Arg = { t: "const", pytype: "none", value: null };
  const logProbs = freshId(`${node.id}_log_probs`, taken);
  const lsm: Arg = { t: "node", id: logProbs };
  const kwargs: Record<string, Arg> = {
    weight: fn.weight ?? none,
    ignore_index: fn.ignore_index ?? { t: "const", pytype: "int", value: -100 },
    reduction: fn.reduction ?? { t: "const", pytype: "str", value: "mean" },
  };
  return [
    plainNode(logProbs, {
      kind: "call_function",
      target: "torch.nn.functional.log_softmax",
      args: [input],
      kwargs: { dim },
      op: "log_softmax",
      fn: { input, dim, dtype: none },
      out: { t: "tensor", meta: { ...meta, stride: contiguousStride(meta.shape) } },
    }),
    plainNode(node.id, {
      kind: "call_function",
      target: "torch.nn.functional.nll_loss",
      args: [lsm, target],
      kwargs,
      op: "nll_loss",
      fn: { input: lsm, target, ...kwargs },
      out: node.out,
    }),
  ];
}

/** triplet_margin_loss as the calls ATen makes of it: `clamp_min(margin + pairwise_distance(a, p) -
 * pairwise_distance(a, n), 0)` then the reduction (with swap, `minimum(pairwise_distance(a, n),
 * pairwise_distance(p, n))` for the negative's distance), bit for bit in the inputs' dtype. The two distances are then
 * reductions reading the inputs once each (ATen writes a - p + eps out first), the rest one reduction after them. */
function tripletSpelledOut(node: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  const fn = node.fn;
  const [anchor, positive, negative] = [fn?.anchor, fn?.positive, fn?.negative];
  const meta = view.tensorOf(anchor);
  const out = view.outMeta(node);
  if (!fn || !anchor || !positive || !negative || !meta || !out || node.inplace) return null;
  if (!FLOAT_DTYPES.has(meta.dtype) || meta.shape.length < 1) return null;
  const same = (arg: Arg) => {
    const other = view.tensorOf(arg);
    return other?.shape.join() === meta.shape.join() && other?.dtype === meta.dtype;
  };
  if (!same(positive) || !same(negative)) return null;
  if (!isNone(fn.size_average) || !isNone(fn.reduce)) return null;
  if (fn.swap && !(fn.swap.t === "const" && typeof fn.swap.value === "boolean")) return null;
  const swap = fn.swap?.t === "const" && fn.swap.value === true;
  const reduction = fn.reduction?.t === "const" ? fn.reduction.value : "mean";
  if (reduction !== "mean" && reduction !== "sum" && reduction !== "none") return null;
  const margin = fn.margin ?? { t: "const", pytype: "float", value: 1.0 };
  const p = fn.p ?? { t: "const", pytype: "float", value: 2.0 };
  const eps = fn.eps ?? { t: "const", pytype: "float", value: 1e-6 };
  const none: Arg = { t: "const", pytype: "none", value: null };
  const rowShape = meta.shape.slice(0, -1);
  const rowMeta: TensorMeta = { ...meta, shape: rowShape, stride: contiguousStride(rowShape) };
  const ids = ["dist_pos", "dist_neg", "shifted", "gap", "hinged", "dist_swap", "dist_min"].map((s) =>
    freshId(`${node.id}_${s}`, taken),
  );
  const [dPos, dAnchorNeg, shifted, gap, hinged, dSwap, dMin] = ids.map((id) => ({ t: "node", id }) as Arg);
  // With swap, ATen takes the nearer of the negative's distances to the anchor and to the positive.
  const dNeg = swap ? dMin : dAnchorNeg;
  const distance = (id: string, x1: Arg, x2: Arg) =>
    plainNode(id, {
      kind: "call_function",
      target: "torch.nn.functional.pairwise_distance",
      args: [x1, x2],
      kwargs: { p, eps },
      op: "pairwise_distance",
      fn: { x1, x2, p, eps, keepdim: { t: "const", pytype: "bool", value: false } },
      out: { t: "tensor", meta: rowMeta },
    });
  const swapped = [
    distance(ids[5] ?? "", positive, negative),
    plainNode(ids[6] ?? "", {
      kind: "call_function",
      target: "torch.minimum",
      args: [dAnchorNeg as Arg, dSwap as Arg],
      kwargs: {},
      op: "minimum",
      fn: { input: dAnchorNeg as Arg, other: dSwap as Arg },
      out: { t: "tensor", meta: rowMeta },
    }),
  ];
  const binary = (id: string, op: "add" | "sub", input: Arg, other: Arg) =>
    plainNode(id, {
      kind: "call_function",
      target: `torch.${op}`,
      args: [input, other],
      kwargs: {},
      op,
      fn: { input, other },
      out: { t: "tensor", meta: rowMeta },
    });
  const zero: Arg = { t: "const", pytype: "float", value: 0.0 };
  const nodes = [
    distance(ids[0] ?? "", anchor, positive),
    distance(ids[1] ?? "", anchor, negative),
    ...(swap ? swapped : []),
    binary(ids[2] ?? "", "add", dPos as Arg, margin),
    binary(ids[3] ?? "", "sub", shifted as Arg, dNeg as Arg),
    plainNode(reduction === "none" ? node.id : (ids[4] ?? ""), {
      kind: "call_function",
      target: "torch.clamp_min",
      args: [gap as Arg, zero],
      kwargs: {},
      op: "clamp",
      fn: { input: gap as Arg, min: zero, max: none },
      out: reduction === "none" ? node.out : { t: "tensor", meta: rowMeta },
    }),
  ];
  if (reduction === "none") return nodes;
  return [
    ...nodes,
    plainNode(node.id, {
      kind: "call_function",
      target: `torch.${reduction}`,
      args: [hinged as Arg],
      kwargs: {},
      op: reduction,
      fn: {
        input: hinged as Arg,
        dim: none,
        keepdim: { t: "const", pytype: "bool", value: false },
        dtype: none,
      },
      out: node.out,
    }),
  ];
}

type SpellOut = (node: GraphNode, view: GraphView, taken: Set<string>) => GraphNode[] | null;

/** Op -> its spelled-out nodes (the last one under the op's own id, so its readers are unchanged). */
const SPELLED_OUT: Record<string, SpellOut> = {
  glu: gluSpelledOut,
  prelu: preluSpelledOut,
  normalize: normalizeSpelledOut,
  einsum: einsumSpelledOut,
  cross_entropy: crossEntropySpelledOut,
  triplet_margin_loss: tripletSpelledOut,
  cosine_embedding_loss: cosineEmbeddingSpelledOut,
  ...Object.fromEntries(
    [1, 2, 3]
      .flatMap((n) => [`adaptive_avg_pool${n}d`, `adaptive_max_pool${n}d`])
      .map((op) => [op, globalPoolSpelledOut]),
  ),
};

/** The graph's nodes with each op of SPELLED_OUT spelled out where it is exact. */
export function spellOutOps(nodes: GraphNode[], view: GraphView): GraphNode[] {
  if (!nodes.some((n) => n.op in SPELLED_OUT)) return nodes;
  const taken = new Set([...nodes.map((n) => n.id), ...view.graph.inputs.map((i) => i.name)]);
  return nodes.flatMap((node) => {
    const spell = SPELLED_OUT[node.op];
    return spell?.(node, view, taken) ?? [node];
  });
}
