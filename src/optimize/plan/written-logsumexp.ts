// logsumexp written out, the numerically stable way: `m = x.amax(dim, keepdim=True)` (or `x.max(dim,
// keepdim=True)[0]`), then `m + torch.log(torch.exp(x - m).sum(dim, keepdim=True))`, or the keepdim=False form
// adding `m.squeeze(dim)`. Left as written it plans as three kernels (a max, an exp-sum reading x again, the
// log-add); it is `torch.logsumexp(x, dim, keepdim)`, one reduction that reads x once.
//
// Taken only where the fold is exact against the written ops on the CPU (the fallback's check): ATen's
// logsumexp computes amax (keepdim), `exp(x - max)`, sum, log, then adds the max, the written ops in their
// order, for float32/float64 (half precision is left as written). The one difference is an infinite max: ATen
// adds 0 in its place, so a row of -inf gives -inf where the written ops give NaN (inf - inf); finite inputs
// agree bit for bit. Every intermediate is read by the next op alone (none is an output or written in place).
import type { Arg, GraphNode } from "../graph.ts";
import { foldIdioms } from "./graph-edit.ts";
import { type GraphView, intList } from "./graph-view.ts";
import { pairProjection } from "./rules.ts";
import {
  EXACT_DTYPES,
  intsArg,
  isConstNumber,
  nodeArg,
  onlyUser,
  otherOperand,
  plain,
  sameArg,
} from "./written-norms.ts";

interface WrittenLse {
  /** The nodes the fold removes (the max and its [0], sub, exp, sum, log, a squeeze). */
  removed: string[];
  /** The final add, replaced by the logsumexp node under its own id. */
  total: GraphNode;
  input: Arg;
  dims: number[];
  keepdim: boolean;
}

function isTrue(arg: Arg | undefined): boolean {
  return arg?.t === "const" && arg.value === true;
}

function sortedDims(arg: Arg | undefined, rank: number): number[] | null {
  const dims = intList(arg)?.map((d) => (d < 0 ? d + rank : d));
  if (!dims?.length || dims.some((d) => d < 0 || d >= rank)) return null;
  const sorted = [...new Set(dims)].sort((a, b) => a - b);
  return sorted.length === dims.length ? sorted : null;
}

/** The max with keepdim whose value is `m`: (its input, reduced dims, nodes computing m), or null. */
function keptMax(
  view: GraphView,
  node: GraphNode,
): { input: Arg; dims: number[]; m: string; nodes: string[] } | null {
  const input = node.fn?.input;
  const meta = view.tensorOf(input);
  if (!input || !meta || !EXACT_DTYPES.has(meta.dtype) || !plain(node) || !isTrue(node.fn?.keepdim))
    return null;
  const dims = sortedDims(node.fn?.dim, meta.shape.length);
  if (!dims) return null;
  if (node.op === "amax") return { input, dims, m: node.id, nodes: [node.id] };
  if (node.op !== "max_dim") return null;
  const values = pairProjection(node, view);
  if (values?.index !== 0) return null;
  return { input, dims, m: values.id, nodes: [node.id, values.id] };
}

/** The written logsumexp whose max is `node`, or null. */
function matchFromMax(view: GraphView, node: GraphNode): WrittenLse | null {
  const max = keptMax(view, node);
  if (!max) return null;
  const { input, dims, m } = max;
  const dtype = view.tensorOf(input)?.dtype;
  const same = (n: GraphNode | null) => !!n && plain(n) && view.outMeta(n)?.dtype === dtype;
  const mUsers = view.usersOf(m);
  if (mUsers.length !== 2 || mUsers.includes("@output")) return null;
  const sub = mUsers.map((id) => view.node(id)).find((n) => n.op === "sub" && nodeArg(n.fn?.other) === m);
  if (!sub || !same(sub) || !sameArg(sub.fn?.input, input)) return null;
  if (sub.fn?.alpha && !isConstNumber(sub.fn.alpha, 1)) return null;
  const exp = onlyUser(view, sub.id);
  if (exp?.op !== "exp" || !same(exp)) return null;
  const sum = onlyUser(view, exp.id);
  if (sum?.op !== "sum" || !same(sum) || nodeArg(sum.fn?.input) !== exp.id) return null;
  const sumDtype = sum.fn?.dtype;
  if (sumDtype && !(sumDtype.t === "const" && sumDtype.pytype === "none")) return null;
  const rank = view.tensorOf(input)?.shape.length ?? 0;
  if (sortedDims(sum.fn?.dim, rank)?.join() !== dims.join()) return null;
  const keepdim = isTrue(sum.fn?.keepdim);
  const log = onlyUser(view, sum.id);
  if (log?.op !== "log" || !same(log)) return null;
  const total = onlyUser(view, log.id);
  if (total?.op !== "add" || !same(total)) return null;
  if (total.fn?.alpha && !isConstNumber(total.fn.alpha, 1)) return null;
  const added = nodeArg(otherOperand(total, log.id) ?? undefined);
  const removed = [...max.nodes, sub.id, exp.id, sum.id, log.id];
  if (keepdim) {
    if (added !== m) return null;
  } else {
    // keepdim=False: the max is squeezed to the sum's shape before the add.
    const squeeze = added ? view.node(added) : null;
    if (squeeze?.op !== "squeeze" || !plain(squeeze) || nodeArg(squeeze.fn?.input) !== m) return null;
    if (onlyUser(view, squeeze.id)?.id !== total.id) return null;
    if (sortedDims(squeeze.fn?.dim, rank)?.join() !== dims.join()) return null;
    removed.push(squeeze.id);
  }
  if (!mUsers.includes(keepdim ? total.id : (added ?? ""))) return null;
  return { removed, total, input, dims, keepdim };
}

function logsumexpNode(m: WrittenLse): GraphNode {
  const keepdim: Arg = { t: "const", pytype: "bool", value: m.keepdim };
  return {
    ...m.total,
    kind: "call_function",
    target: "torch.logsumexp",
    args: [m.input, intsArg(m.dims, "list"), keepdim],
    kwargs: {},
    op: "logsumexp",
    fn: { input: m.input, dim: intsArg(m.dims, "list"), keepdim },
  };
}

/** The graph's nodes with each written logsumexp as one logsumexp node (under the final add's id). */
export function foldWrittenLogSumExps(nodes: GraphNode[], view: GraphView): GraphNode[] {
  return foldIdioms(nodes, (node) => {
    const match = matchFromMax(view, node);
    return match ? { removed: match.removed, node: logsumexpNode(match) } : null;
  });
}
