// A reduction over dims of size 1 only, keeping them (`torch.logsumexp(m, dim=1, keepdim=True)` of a (B, 1) mean,
// KernelBench level 2's Gemm → mean → logsumexp → GELU chains; `x.amax(1, keepdim=True)` of a one-channel conv):
// each output element is the one input element under it. As a reduction it was a kernel of its own (a reduction
// takes no reduction as its prologue, nor joins one as an epilogue); as the pointwise op it equals, it joins the
// region before or after it. Exact, in every float dtype and for -0, inf and NaN (checked against torch on the
// CPU): a sum, mean or log-sum-exp of one element is `x + 0` (it turns -0 into +0, as they do from their +0
// start), an amax, amin or product is `x * 1`. Only where each reduced dim is 1 whatever the inputs' sizes (kept
// by a reduction before it, or made by unsqueeze, through elementwise ops): the emitted forward serves other
// input shapes than the captured ones, and a graph input's size-1 dim may be wider in the next call.
import type { Arg, GraphNode } from "../graph.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import { REDUCTIONS } from "../ops/reduce.ts";
import { contiguousStride, sameShape } from "./graph-edit.ts";
import { FLOAT_DTYPES, type GraphView, intList } from "./graph-view.ts";
import { plain } from "./written-norms.ts";

/** The reductions rewritten, and the identity each is of one element: the op and its scalar operand. */
const ONE_ELEMENT: Record<string, { op: "add" | "mul"; other: number }> = {
  sum: { op: "add", other: 0 },
  mean: { op: "add", other: 0 },
  logsumexp: { op: "add", other: 0 },
  amax: { op: "mul", other: 1 },
  amin: { op: "mul", other: 1 },
  prod: { op: "mul", other: 1 },
};

/** The dims `node` reduces when each is a literal int (a model attribute's value may change after capture). */
function literalDims(arg: Arg | undefined, rank: number): number[] | null {
  if (
    !arg ||
    (arg.t === "const" && arg.attr) ||
    (arg.t === "list" && arg.items.some((i) => i.t === "const" && i.attr))
  )
    return null;
  const dims = intList(arg);
  if (!dims?.length || dims.some((d) => d < -rank || d >= rank)) return null;
  return dims.map((d) => (d < 0 ? d + rank : d));
}

/** Whether `reduction` keeps dim `dim` of its rank-`rank` input as a size-1 dim of its result. */
function keepsReduced(reduction: GraphNode, dim: number, rank: number, view: GraphView): boolean {
  const fn = reduction.fn;
  const kept = fn?.keepdim?.t === "const" && fn.keepdim.value === true;
  const inputRank = view.tensorOf(fn?.input)?.shape.length;
  return kept && inputRank === rank && (literalDims(fn?.dim, rank)?.includes(dim) ?? false);
}

/** Whether dim `dim` of `arg`'s value is 1 for any input sizes: a keepdim reduction over it (or its values or
 * indices), an unsqueeze making it, or an elementwise op of operands each either such a value or a scalar (a 0-d
 * tensor broadcasts to 1). */
function structurallyOne(arg: Arg | undefined, dim: number, view: GraphView, depth = 0): boolean {
  if (arg?.t !== "node" || view.isGraphInput(arg.id) || depth > 32) return false;
  const node = view.node(arg.id);
  const rank = view.outMeta(node)?.shape.length;
  if (!node.fn || rank === undefined || node.inplace) return false;
  if (node.op === "unsqueeze") return literalDims(node.fn.dim, rank)?.[0] === dim;
  if (REDUCTIONS[node.op]) return keepsReduced(node, dim, rank, view);
  const pair = node.fn.input;
  if ((node.op === "getitem" || node.op === "getattr") && pair?.t === "node" && !view.isGraphInput(pair.id)) {
    const reduction = view.node(pair.id);
    return REDUCTIONS[reduction.op] !== undefined && keepsReduced(reduction, dim, rank, view);
  }
  const spec = POINTWISE[node.op];
  if (!spec) return false;
  const tensors = spec.operands.map((key) => node.fn?.[key]).filter((a) => view.tensorOf(a) !== null);
  return tensors.every((a) => {
    const shape = view.tensorOf(a)?.shape ?? [];
    const at = dim - (rank - shape.length); // the operand's dims align with the result's last ones
    return at < 0 || structurallyOne(a, at, view, depth + 1);
  });
}

/** The pointwise op equal to `node`, or null where it is not a plain float reduction of size-1 dims it keeps. */
function asPointwise(node: GraphNode, view: GraphView): GraphNode | null {
  const identity = ONE_ELEMENT[node.op];
  const fn = node.fn;
  const input = fn?.input;
  const meta = view.tensorOf(input);
  const out = view.outMeta(node);
  if (!identity || !fn || !input || !meta || !out || !plain(node)) return null;
  if (!FLOAT_DTYPES.has(meta.dtype) || out.dtype !== meta.dtype) return null;
  if (!(fn.keepdim?.t === "const" && fn.keepdim.value === true)) return null;
  if (fn.dtype && !(fn.dtype.t === "const" && fn.dtype.value === null)) return null;
  const dims = literalDims(fn.dim, meta.shape.length);
  if (!dims || dims.some((d) => meta.shape[d] !== 1 || !structurallyOne(input, d, view))) return null;
  // A pointwise op keeps a strided input's layout where the reduction wrote a contiguous result (a later view of it)
  if (!sameShape(out.shape, meta.shape) || !sameShape(meta.stride, contiguousStride(meta.shape))) return null;
  const other: Arg = { t: "const", pytype: "float", value: identity.other };
  return {
    ...node,
    kind: "call_function",
    target: `torch.${identity.op}`,
    args: [input, other],
    kwargs: {},
    op: identity.op,
    fn: { input, other },
  };
}

/** The nodes with each reduction of size-1 dims it keeps as the pointwise op it equals, under its own id. */
export function unitReductionsAsPointwise(nodes: GraphNode[], view: GraphView): GraphNode[] {
  return nodes.map((node) => asPointwise(node, view) ?? node);
}
