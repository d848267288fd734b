// cosine_embedding_loss as the calls ATen makes of it (aten/src/ATen/native/Loss.cpp), bit for bit on the CPU in
// float32 and float16 (every reduction, margins 0 and 0.3, targets 1, -1 and 0):
//   cos = (x1 * x2).sum(1) / sqrt(((x1 * x1).sum(1) + 1e-12) * ((x2 * x2).sum(1) + 1e-12))
//   out = where(t == 1, 1 - cos, 0) + where(t == -1, clamp_min(cos - margin, 0), 0), then the reduction.
// No rule took the loss whole; spelled out, the three row sums are reductions reading x1 and x2 through their
// products (ATen writes the three products out first) and the rest one small reduction of a value a row.
// For (N, D) inputs and (N,) targets, the batched form every loss module passes.
import type { Arg, GraphNode, TensorMeta } from "../graph.ts";
import { FLOAT_DTYPES, type GraphView } from "./graph-view.ts";

/** ATen's EPSILON added to each squared magnitude. */
const EPSILON = 1e-12;

const none: Arg = { t: "const", pytype: "none", value: null };
const float = (value: number): Arg => ({ t: "const", pytype: "float", value });
const isNone = (arg: Arg | undefined) => arg === undefined || (arg.t === "const" && arg.pytype === "none");

function plainNode(id: string, rest: Omit<GraphNode, "id" | "modeDependent" | "rng" | "inplace">): GraphNode {
  return { id, ...rest, modeDependent: false, rng: false, inplace: false };
}

/** The loss's nodes, the last under its id, or null where it is not the batched form or not a float one. */
export function cosineEmbeddingSpelledOut(
  node: GraphNode,
  view: GraphView,
  taken: Set<string>,
): GraphNode[] | null {
  const fn = node.fn;
  const [x1, x2, target] = [fn?.input1, fn?.input2, fn?.target];
  const meta = view.tensorOf(x1);
  const targetMeta = view.tensorOf(target);
  const out = view.outMeta(node);
  if (!fn || !x1 || !x2 || !target || !meta || !targetMeta || !out || node.inplace) return null;
  if (!FLOAT_DTYPES.has(meta.dtype) || meta.shape.length !== 2) return null;
  const other = view.tensorOf(x2);
  if (other?.shape.join() !== meta.shape.join() || other.dtype !== meta.dtype) return null;
  if (targetMeta.shape.join() !== `${meta.shape[0]}`) return null;
  if (!isNone(fn.size_average) || !isNone(fn.reduce)) return null;
  const reduction = fn.reduction?.t === "const" ? fn.reduction.value : "mean";
  if (reduction !== "mean" && reduction !== "sum" && reduction !== "none") return null;
  const margin = fn.margin ?? float(0);

  const fresh = (suffix: string): string => {
    let id = `${node.id}_${suffix}`;
    for (let i = 1; taken.has(id); i++) id = `${node.id}_${suffix}_${i}`;
    taken.add(id);
    return id;
  };
  const rows: TensorMeta = { shape: [meta.shape[0] ?? 0], dtype: meta.dtype, stride: [1] };
  const mask: TensorMeta = { ...rows, dtype: "bool" };
  const nodes: GraphNode[] = [];
  /** `a <infix> b` as Python's operator (a number on either side), `op` to the rules. */
  const infix = (suffix: string, op: string, a: Arg, b: Arg, m: TensorMeta, id = fresh(suffix)): Arg => {
    const target = {
      add: "operator.add",
      sub: "operator.sub",
      mul: "operator.mul",
      div: "operator.truediv",
      eq: "operator.eq",
    };
    const extra: Record<string, Arg> = op === "add" || op === "sub" ? { alpha: float(1) } : {};
    const rest = op === "div" ? { rounding_mode: none } : extra;
    nodes.push(
      plainNode(id, {
        kind: "call_function",
        target: target[op as keyof typeof target],
        args: [a, b],
        kwargs: {},
        op,
        fn: { input: a, other: b, ...rest },
        out: { t: "tensor", meta: m },
      }),
    );
    return { t: "node", id };
  };
  const call = (
    suffix: string,
    target: string,
    op: string,
    args: Arg[],
    kwargs: Record<string, Arg>,
    fields: Record<string, Arg>,
    m: TensorMeta,
    id = fresh(suffix),
  ): Arg => {
    nodes.push(
      plainNode(id, {
        kind: "call_function",
        target,
        args,
        kwargs,
        op,
        fn: fields,
        out: { t: "tensor", meta: m },
      }),
    );
    return { t: "node", id };
  };
  const rowSum = (suffix: string, a: Arg, b: Arg): Arg => {
    const product = infix(`${suffix}_prod`, "mul", a, b, meta);
    const dim: Arg = { t: "const", pytype: "int", value: 1 };
    const dims: Arg = { t: "list", kind: "list", items: [dim] };
    return call(
      suffix,
      "torch.sum",
      "sum",
      [product, dim],
      {},
      { input: product, dim: dims, keepdim: { t: "const", pytype: "bool", value: false }, dtype: none },
      rows,
    );
  };
  const dot = rowSum("dot", x1, x2);
  const mag1 = infix("mag1", "add", rowSum("sq1", x1, x1), float(EPSILON), rows);
  const mag2 = infix("mag2", "add", rowSum("sq2", x2, x2), float(EPSILON), rows);
  const magnitudes = infix("mags", "mul", mag1, mag2, rows);
  const denom = call("denom", "torch.sqrt", "sqrt", [magnitudes], {}, { input: magnitudes }, rows);
  const cos = infix("cos", "div", dot, denom, rows);
  const isLabel = (suffix: string, label: number) =>
    infix(suffix, "eq", target, { t: "const", pytype: "int", value: label }, mask);
  const selected = (suffix: string, condition: Arg, value: Arg) =>
    call(
      suffix,
      "torch.where",
      "where",
      [condition, value, float(0)],
      {},
      { condition, input: value, other: float(0) },
      rows,
    );
  const pos = selected("pos", isLabel("is_pos", 1), infix("one_minus", "sub", float(1), cos, rows));
  const shifted = infix("shifted", "sub", cos, margin, rows);
  const hinged = call(
    "hinged",
    "torch.clamp_min",
    "clamp",
    [shifted, float(0)],
    {},
    { input: shifted, min: float(0), max: none },
    rows,
  );
  const neg = selected("neg", isLabel("is_neg", -1), hinged);
  if (reduction === "none") {
    infix("", "add", pos, neg, rows, node.id);
    nodes[nodes.length - 1] = { ...(nodes.at(-1) as GraphNode), out: node.out };
    return nodes;
  }
  const each = infix("each", "add", pos, neg, rows);
  nodes.push(
    plainNode(node.id, {
      kind: "call_function",
      target: `torch.${reduction}`,
      args: [each],
      kwargs: {},
      op: reduction,
      fn: { input: each, dim: none, keepdim: { t: "const", pytype: "bool", value: false }, dtype: none },
      out: node.out,
    }),
  );
  return nodes;
}
