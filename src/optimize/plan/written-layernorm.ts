// LayerNorm written out, as GPT-style and LLM-written code spells it: `mu = x.mean(-1, keepdim=True)`, a biased
// variance (`x.var(-1, keepdim=True, unbiased=False)` / `correction=0`, `((x - mu) ** 2).mean(-1, keepdim=True)`,
// `(x - mu).pow(2).mean(...)`, `xc = x - mu; (xc * xc).mean(...)`), then `(x - mu) / torch.sqrt(var + eps)` or
// `(x - mu) * torch.rsqrt(var + eps)` (`** 0.5` / `** -0.5` too), over the last k dims with keepdim. Left as
// written it plans as three or four kernels (the mean, the variance, the pointwise apply reading x again); it is
// one normalisation: a `layer_norm` region that a weight and bias after it join as its epilogue.
//
// It is NOT `F.layer_norm`, bit for bit. Measured on the CPU (torch 2.13, float32 and float64, shapes (4, 7) to
// (16, 4096) and odd sizes, 1 and 2 normalised dims, 4 seeds): no spelling above equals F.layer_norm exactly
// (float32: 0 of 96 cases each, up to 9.5e-7 apart; float64: 2 of 96 without the affine, none with it). ATen's
// kernel takes its moments in one vectorised pass and applies `x * rstd + (-mean * rstd)`; the written ops round
// at every step. So the fold cannot call F.layer_norm: the node it makes is `layer_norm` to the rules (the
// planner's normalize region, the kernel's Welford statistics, within the problem's tolerance of the written
// ops), and keeps the written nodes (`written`), which are what the emitter writes for it wherever PyTorch runs
// it: a region's fallback, or forward when no region takes it. The file's fallback stays the reference's ops.
//
// Taken only where the kernel can stand for the written ops: a float32/float64 input (half precision rounds, and
// can overflow `(x - mu) ** 2`, at each written step, which one kernel computing in float32 does not), every
// reduction over the same trailing dims with keepdim and no dtype, dims and keepdim not read from a model
// attribute (fixed when the kernel is planned), `+ eps` a Python number, the variance biased (correction 0),
// every intermediate read by the chain alone (none an output, none written in place), and no in-place op
// between the chain's first node and its result (the written nodes run where the result was).
import type { Arg, GraphNode, Scalar } from "../graph.ts";
import { foldIdioms } from "./graph-edit.ts";
import { argNodeIds, type GraphView, intList } from "./graph-view.ts";
import {
  EXACT_DTYPES,
  intsArg,
  isConstNumber,
  nodeArg,
  plain,
  sameArg,
  squaredInput,
} from "./written-norms.ts";

interface WrittenLn {
  /** The chain's nodes before its result, in graph order: the fold removes them. */
  removed: string[];
  /** The chain's last node (the division or product), replaced by the layer_norm node under its own id. */
  result: GraphNode;
  input: Arg;
  trailing: number[];
  eps: Scalar;
}

/** A constant argument nobody reads from a model attribute or a shape (`dim=self.dim`, `dim=x.dim() - 1`). */
function fixed(arg: Arg | undefined): boolean {
  if (arg?.t === "list") return arg.items.every(fixed);
  return arg?.t === "const" && !arg.attr && !arg.read;
}

function isTrue(arg: Arg | undefined): boolean {
  return arg?.t === "const" && arg.value === true && fixed(arg);
}

/** The trailing dims (sorted, non-negative) a keepdim reduction of a rank-`rank` value takes, or null. */
function trailingDims(node: GraphNode, rank: number): number[] | null {
  const fn = node.fn ?? {};
  if (!isTrue(fn.keepdim) || !fixed(fn.dim)) return null;
  const dtype = fn.dtype;
  if (dtype && !(dtype.t === "const" && dtype.pytype === "none")) return null;
  const dims = intList(fn.dim)?.map((d) => (d < 0 ? d + rank : d));
  if (!dims?.length || rank === 0) return null;
  const sorted = [...new Set(dims)].sort((a, b) => a - b);
  if (sorted.length !== dims.length || sorted.some((d, i) => d !== rank - sorted.length + i)) return null;
  return sorted;
}

function unitAlpha(node: GraphNode): boolean {
  const alpha = node.fn?.alpha;
  return !alpha || isConstNumber(alpha, 1);
}

/** `var + eps` (either order): (the variance's node, eps), or null. */
function plusEps(add: GraphNode): { variance: string; eps: Scalar } | null {
  if (add.op !== "add" || !unitAlpha(add)) return null;
  const [a, b] = [add.fn?.input, add.fn?.other];
  const [node, eps] = a?.t === "node" ? [a, b] : [b, a];
  if (node?.t !== "node" || !isConstNumber(eps) || eps.read) return null;
  return { variance: node.id, eps };
}

/** The written LayerNorm whose result (the last op) is `result`, or null. */
function matchFromResult(view: GraphView, result: GraphNode): WrittenLn | null {
  if (!plain(result)) return null;
  // (x - mu) / sqrt(var + eps), or (x - mu) * rsqrt(var + eps) in either order.
  let centred: Arg | undefined;
  let root: GraphNode | undefined;
  const isNode = (arg: Arg | undefined) => (arg?.t === "node" ? view.byId.get(arg.id) : undefined);
  const exponent = (n: GraphNode | undefined, e: number) =>
    n?.op === "pow" && isConstNumber(n.fn?.exponent, e);
  if (result.op === "div") {
    const mode = result.fn?.rounding_mode;
    if (mode && !(mode.t === "const" && mode.pytype === "none")) return null;
    centred = result.fn?.input;
    root = isNode(result.fn?.other);
    if (root?.op !== "sqrt" && !exponent(root, 0.5)) return null;
  } else if (result.op === "mul") {
    for (const [a, b] of [
      [result.fn?.input, result.fn?.other],
      [result.fn?.other, result.fn?.input],
    ]) {
      const candidate = isNode(b);
      if (candidate?.op === "rsqrt" || exponent(candidate, -0.5)) [centred, root] = [a, candidate];
    }
  } else return null;
  const sub = isNode(centred);
  if (!root || !sub || sub.id === root.id) return null;
  const add = isNode(root.fn?.input);
  const plus = add ? plusEps(add) : null;
  if (!add || !plus) return null;
  const variance = view.node(plus.variance);
  // x - mu, mu = x.mean(trailing dims, keepdim=True)
  const mean = sub.op === "sub" && unitAlpha(sub) ? isNode(sub.fn?.other) : undefined;
  const input = sub.fn?.input;
  const meta = view.tensorOf(input);
  if (mean?.op !== "mean" || !input || !meta || !EXACT_DTYPES.has(meta.dtype)) return null;
  if (!sameArg(mean.fn?.input, input)) return null;
  const rank = meta.shape.length;
  const dims = trailingDims(mean, rank);
  if (!dims) return null;
  const chain = [mean, sub, add, root, variance, result];
  if (variance.op === "var") {
    // x.var(dims, keepdim=True, unbiased=False / correction=0)
    if (!sameArg(variance.fn?.input, input) || trailingDims(variance, rank)?.join() !== dims.join())
      return null;
    const correction = variance.fn?.correction;
    const unbiased = variance.fn?.unbiased;
    if (!isConstNumber(correction, 0) || !fixed(correction)) return null;
    if (unbiased && !(unbiased.t === "const" && unbiased.value === false)) return null;
  } else if (variance.op === "mean") {
    // ((x - mu) ** 2).mean(dims, keepdim=True): the square of this x - mu or of another one
    if (trailingDims(variance, rank)?.join() !== dims.join()) return null;
    const square = isNode(variance.fn?.input);
    const squared = square ? isNode(squaredInput(square) ?? undefined) : undefined;
    if (!square || !squared) return null;
    chain.push(square);
    if (squared.id !== sub.id) {
      if (squared.op !== "sub" || !unitAlpha(squared) || !sameArg(squared.fn?.input, input)) return null;
      if (nodeArg(squared.fn?.other) !== mean.id) return null;
      chain.push(squared);
    }
  } else return null;
  const ids = new Set(chain.map((n) => n.id));
  if (ids.size !== chain.length || !chain.every(plain)) return null;
  // Each node's value computed in x's dtype, read by the chain alone (the result by anyone).
  for (const node of chain) {
    if (view.outMeta(node)?.dtype !== meta.dtype) return null;
    if (node === result) continue;
    if (!view.usersOf(node.id).every((user) => ids.has(user))) return null;
  }
  const out = view.outMeta(result);
  if (out?.shape.join() !== meta.shape.join()) return null;
  // The chain reads x and its own values, nothing else: the layer_norm node reads what they read.
  const reads = chain.flatMap((n) => [...n.args, ...Object.values(n.kwargs)].flatMap((a) => argNodeIds(a)));
  if (reads.some((id) => !ids.has(id) && !(input.t === "node" && id === input.id))) return null;
  // The written nodes run where the result was: nothing in between may write in place.
  const at = chain.map((n) => view.index.get(n.id) ?? -1);
  const [first, last] = [Math.min(...at), view.index.get(result.id) ?? -1];
  if (view.graph.nodes.slice(first, last + 1).some((n) => n.inplace)) return null;
  return {
    removed: chain.filter((n) => n !== result).map((n) => n.id),
    result,
    input,
    trailing: meta.shape.slice(rank - dims.length),
    eps: plus.eps,
  };
}

function layerNormNode(m: WrittenLn, view: GraphView): GraphNode {
  const written = [...m.removed, m.result.id]
    .map((id) => view.node(id))
    .sort((a, b) => (view.index.get(a.id) ?? 0) - (view.index.get(b.id) ?? 0));
  return {
    ...m.result,
    kind: "call_function",
    target: "torch.nn.functional.layer_norm",
    args: [m.input, intsArg(m.trailing, "tuple")],
    kwargs: { eps: m.eps },
    op: "layer_norm",
    fn: { input: m.input, normalized_shape: intsArg(m.trailing, "list"), eps: m.eps },
    written,
  };
}

/** The graph's nodes with each written LayerNorm as one layer_norm node (under its result's id) that keeps the
 * written nodes for PyTorch to run. */
export function foldWrittenLayerNorms(nodes: GraphNode[], view: GraphView): GraphNode[] {
  return foldIdioms(nodes, (node) => {
    const match = matchFromResult(view, node);
    return match ? { removed: match.removed, node: layerNormNode(match, view) } : null;
  });
}
