// Softmax written out, as LLM-written and tutorial code spells it: `m = x.max(dim, keepdim=True)[0]` (or
// `.values`, `torch.max(x, dim=d, keepdim=True)[0]`, `x.amax(dim, keepdim=True)`), `e = torch.exp(x - m)`,
// `e / e.sum(dim, keepdim=True)`. Left as written it plans as three kernels (the max broadcast back into the
// exp, the sum, the divide reading e again); it is one softmax over `dim`: a `softmax` node to the rules (the
// planner's normalize region, the kernel's max-and-sum statistics).
//
// Like a written LayerNorm (written-layernorm.ts) it is not F.softmax bit for bit (ATen's kernel rounds
// otherwise), so the node keeps the written nodes (`written`), which the emitter writes wherever PyTorch runs
// it: the file's fallback stays the reference's ops. Taken only where the kernel stands for them within a
// float tolerance: a float input of 16 or 32 bits (x - m <= 0, so no written step overflows in half
// precision), the max and the sum over the same one dim with keepdim, dims not read from a model attribute,
// every intermediate read by the chain alone, and no in-place op between the chain's first node and its result.
// Without the max (`exp(x) / exp(x).sum(...)`) it is no softmax: exp overflows where softmax does not.
import type { Arg, GraphNode } from "../graph.ts";
import { foldIdioms } from "./graph-edit.ts";
import { argNodeIds, type GraphView, intList } from "./graph-view.ts";
import { isConstNumber, plain, sameArg } from "./written-norms.ts";

const FLOATS = new Set(["float32", "float16", "bfloat16"]);

interface WrittenSoftmax {
  removed: string[];
  result: GraphNode;
  input: Arg;
  dim: number;
}

/** A constant argument nobody reads from a model attribute or a shape. */
function fixed(arg: Arg | undefined): boolean {
  if (arg?.t === "list") return arg.items.every(fixed);
  return arg?.t === "const" && !arg.attr && !arg.read;
}

/** The one dim (non-negative) a keepdim reduction of a rank-`rank` value takes without a dtype, or null. */
function keptDim(node: GraphNode, rank: number): number | null {
  const fn = node.fn ?? {};
  if (!(fn.keepdim?.t === "const" && fn.keepdim.value === true && fixed(fn.keepdim)) || !fixed(fn.dim))
    return null;
  if (fn.dtype && !(fn.dtype.t === "const" && fn.dtype.pytype === "none")) return null;
  const dims = intList(fn.dim);
  const d = dims?.length === 1 ? dims[0] : undefined;
  if (d === undefined || d < -rank || d >= rank) return null;
  return d < 0 ? d + rank : d;
}

/** The row maximum `m` as its nodes (`amax`, or max(dim) and its `[0]` / `.values`) and its dim, or null. */
function rowMax(
  view: GraphView,
  m: GraphNode,
  input: Arg,
  rank: number,
): { nodes: GraphNode[]; dim: number } | null {
  if (m.op === "amax") {
    const dim = sameArg(m.fn?.input, input) ? keptDim(m, rank) : null;
    return dim === null ? null : { nodes: [m], dim };
  }
  const pair = m.fn?.input;
  const values =
    (m.op === "getitem" && isConstNumber(m.fn?.index, 0)) ||
    (m.op === "getattr" && m.fn?.name?.t === "const" && m.fn.name.value === "values");
  if (!values || pair?.t !== "node" || view.isGraphInput(pair.id)) return null;
  const max = view.node(pair.id);
  if (max.op !== "max_dim" || !sameArg(max.fn?.input, input)) return null;
  const dim = keptDim(max, rank);
  return dim === null ? null : { nodes: [max, m], dim };
}

/** The written softmax whose result (the divide) is `result`, or null. */
function matchFromResult(view: GraphView, result: GraphNode): WrittenSoftmax | null {
  if (result.op !== "div" || !plain(result)) return null;
  const mode = result.fn?.rounding_mode;
  if (mode && !(mode.t === "const" && mode.pytype === "none")) return null;
  const isNode = (arg: Arg | undefined) =>
    arg?.t === "node" && !view.isGraphInput(arg.id) ? view.byId.get(arg.id) : undefined;
  const exp = isNode(result.fn?.input);
  const sum = isNode(result.fn?.other);
  if (exp?.op !== "exp" || sum?.op !== "sum" || !sameArg(sum.fn?.input, result.fn?.input)) return null;
  const sub = isNode(exp.fn?.input);
  if (sub?.op !== "sub" || (sub.fn?.alpha && !isConstNumber(sub.fn.alpha, 1))) return null;
  const input = sub.fn?.input;
  const meta = view.tensorOf(input);
  const m = isNode(sub.fn?.other);
  if (!input || !meta || !m || !FLOATS.has(meta.dtype)) return null;
  const rank = meta.shape.length;
  const max = rowMax(view, m, input, rank);
  if (!max || keptDim(sum, rank) !== max.dim) return null;
  const chain = [...max.nodes, sub, exp, sum, result];
  const ids = new Set(chain.map((n) => n.id));
  if (ids.size !== chain.length || !chain.every(plain)) return null;
  // Each value in x's dtype (the max's pair aside), read by the chain alone (the result by anyone).
  for (const node of chain) {
    if (node.op !== "max_dim" && view.outMeta(node)?.dtype !== meta.dtype) return null;
    if (node === result) continue;
    if (!view.usersOf(node.id).every((user) => ids.has(user))) return null;
  }
  if (view.outMeta(result)?.shape.join() !== meta.shape.join()) return null;
  // The chain reads x and its own values, nothing else.
  const reads = chain.flatMap((n) => [...n.args, ...Object.values(n.kwargs)].flatMap((a) => argNodeIds(a)));
  if (reads.some((id) => !ids.has(id) && !(input.t === "node" && id === input.id))) return null;
  // The written nodes run where the result was: nothing in between may write in place.
  const at = chain.map((n) => view.index.get(n.id) ?? -1);
  const [first, last] = [Math.min(...at), view.index.get(result.id) ?? -1];
  if (view.graph.nodes.slice(first, last + 1).some((n) => n.inplace)) return null;
  return { removed: chain.filter((n) => n !== result).map((n) => n.id), result, input, dim: max.dim };
}

function softmaxNode(m: WrittenSoftmax, view: GraphView): GraphNode {
  const written = [...m.removed, m.result.id]
    .map((id) => view.node(id))
    .sort((a, b) => (view.index.get(a.id) ?? 0) - (view.index.get(b.id) ?? 0));
  const dim: Arg = { t: "const", pytype: "int", value: m.dim };
  const none: Arg = { t: "const", pytype: "none", value: null };
  return {
    ...m.result,
    kind: "call_function",
    target: "torch.softmax",
    args: [m.input],
    kwargs: { dim },
    op: "softmax",
    fn: { input: m.input, dim, dtype: none },
    written,
  };
}

/** The graph's nodes with each written softmax as one softmax node (under its result's id) that keeps the
 * written nodes for PyTorch to run. */
export function foldWrittenSoftmaxes(nodes: GraphNode[], view: GraphView): GraphNode[] {
  return foldIdioms(nodes, (node) => {
    const match = matchFromResult(view, node);
    return match ? { removed: match.removed, node: softmaxNode(match, view) } : null;
  });
}
