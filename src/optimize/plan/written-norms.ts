// RMSNorm written out, as LLaMA and most LLM-era code spell it: `x * torch.rsqrt(x.pow(2).mean(-1,
// keepdim=True) + eps)`. Left as it is, the planner sees a reduction (pow -> mean) and a pointwise chain (add ->
// rsqrt -> mul) that reads x again: two kernels, x read twice, the statistics written between them. The same
// value is `F.rms_norm(x, x.shape[-k:], None, eps)`, one normalisation region that the weight multiply after it
// joins as its epilogue.
//
// Taken only where the rewrite is exact against the written ops on the CPU (the fallback's check): a float32
// or float64 input (F.rms_norm computes those with the same ops; half precision upcasts inside it, which the
// written form does not), the mean over trailing dims with keepdim and no dtype, `+ eps` a Python number, and
// every intermediate read by the next op alone (none is an output, none written in place).
import type { Arg, GraphNode, Scalar } from "../graph.ts";
import { foldIdioms } from "./graph-edit.ts";
import { type GraphView, intList } from "./graph-view.ts";

export const EXACT_DTYPES = new Set(["float32", "float64"]);

export function nodeArg(arg: Arg | undefined): string | null {
  return arg?.t === "node" ? arg.id : null;
}

export function sameArg(a: Arg | undefined, b: Arg | undefined): boolean {
  if (!a || !b) return false;
  if (a.t === "node" && b.t === "node") return a.id === b.id;
  if (a.t === "param" && b.t === "param") return a.path === b.path;
  return false;
}

export function isConstNumber(arg: Arg | undefined, value?: number): arg is Scalar {
  if (arg?.t !== "const" || arg.special || typeof arg.value !== "number") return false;
  if (arg.pytype !== "int" && arg.pytype !== "float") return false;
  return value === undefined || arg.value === value;
}

/** The one operand of a binary op that is not `id` (either order), or null. */
export function otherOperand(node: GraphNode, id: string): Arg | null {
  const input = node.fn?.input;
  const other = node.fn?.other;
  if (nodeArg(input) === id) return other ?? null;
  if (nodeArg(other) === id) return input ?? null;
  return null;
}

/** The only user of `id`, when it has exactly one and that user is a node (not the forward's return). */
export function onlyUser(view: GraphView, id: string): GraphNode | null {
  const [user, ...more] = view.usersOf(id);
  if (user === undefined || more.length || user === "@output") return null;
  return view.node(user);
}

/** `x ** 2`, `x.pow(2)`, `torch.square(x)` or `x * x`: the x squared, else null. */
export function squaredInput(node: GraphNode): Arg | null {
  const input = node.fn?.input;
  if (node.op === "pow" && isConstNumber(node.fn?.exponent, 2)) return input ?? null;
  if (node.op === "square") return input ?? null;
  if (node.op === "mul" && sameArg(input, node.fn?.other) && input?.t === "node") return input;
  return null;
}

export function plain(node: GraphNode): boolean {
  return !node.inplace && !node.rng && !node.modeDependent && node.fn !== null;
}

interface WrittenRms {
  /** The nodes the rewrite removes (square, mean, add, rsqrt). */
  removed: string[];
  /** The final multiply, replaced by the rms_norm node under its own id. */
  product: GraphNode;
  input: Arg;
  trailing: number[];
  eps: Scalar;
}

/** The written RMSNorm whose square is `square`, or null. */
function matchFromSquare(view: GraphView, square: GraphNode): WrittenRms | null {
  const input = squaredInput(square);
  const meta = view.tensorOf(input ?? undefined);
  if (!input || !meta || !EXACT_DTYPES.has(meta.dtype) || !plain(square)) return null;
  if (view.outMeta(square)?.dtype !== meta.dtype) return null;
  const mean = onlyUser(view, square.id);
  if (mean?.op !== "mean" || !plain(mean) || nodeArg(mean.fn?.input) !== square.id) return null;
  const dtype = mean.fn?.dtype;
  if (dtype && !(dtype.t === "const" && dtype.pytype === "none")) return null;
  const keep = mean.fn?.keepdim;
  if (!(keep?.t === "const" && keep.value === true)) return null;
  const rank = meta.shape.length;
  const dims = intList(mean.fn?.dim)?.map((d) => (d < 0 ? d + rank : d));
  if (!dims?.length || rank === 0) return null;
  const sorted = [...new Set(dims)].sort((a, b) => a - b);
  if (sorted.length !== dims.length || sorted.some((d, i) => d !== rank - sorted.length + i)) return null;
  const add = onlyUser(view, mean.id);
  if (add?.op !== "add" || !plain(add)) return null;
  const eps = otherOperand(add, mean.id);
  const alpha = add.fn?.alpha;
  if (!isConstNumber(eps ?? undefined) || (alpha && !isConstNumber(alpha, 1))) return null;
  const rsqrt = onlyUser(view, add.id);
  if (rsqrt?.op !== "rsqrt" || !plain(rsqrt) || nodeArg(rsqrt.fn?.input) !== add.id) return null;
  const product = onlyUser(view, rsqrt.id);
  if (product?.op !== "mul" || !plain(product)) return null;
  const scaled = otherOperand(product, rsqrt.id) ?? undefined;
  if (!sameArg(scaled, input) && !sameArg(scaled, widenedFrom(view, input) ?? undefined)) return null;
  const out = view.outMeta(product);
  if (!out || out.dtype !== meta.dtype || out.shape.join() !== meta.shape.join()) return null;
  return {
    removed: [square.id, mean.id, add.id, rsqrt.id],
    product,
    input,
    trailing: meta.shape.slice(rank - sorted.length),
    eps: eps as Scalar,
  };
}

/** The half-precision value `arg` is the float32 cast of (`h.to(torch.float32)`, `h.float()`), or null. T5's and
 * HF's RMSNorm square the cast but scale h itself: `h * rsqrt(...)` promotes h to float32 exactly as the cast
 * does, so the product is the cast's. */
function widenedFrom(view: GraphView, arg: Arg): Arg | null {
  const cast = arg.t === "node" ? view.byId.get(arg.id) : undefined;
  const from = cast?.fn?.input;
  if (cast?.op !== "to" || !plain(cast) || view.outMeta(cast)?.dtype !== "float32") return null;
  const dtype = view.tensorOf(from)?.dtype;
  return dtype === "float16" || dtype === "bfloat16" ? (from ?? null) : null;
}

export function intsArg(values: number[], kind: "list" | "tuple"): Arg {
  return { t: "list", kind, items: values.map((value) => ({ t: "const", pytype: "int", value })) };
}

function rmsNormNode(m: WrittenRms): GraphNode {
  const none: Scalar = { t: "const", pytype: "none", value: null };
  return {
    ...m.product,
    kind: "call_function",
    target: "torch.nn.functional.rms_norm",
    args: [m.input, intsArg(m.trailing, "tuple")],
    kwargs: { weight: none, eps: m.eps },
    op: "rms_norm",
    fn: { input: m.input, normalized_shape: intsArg(m.trailing, "list"), weight: none, eps: m.eps },
  };
}

/** The graph's nodes with each written RMSNorm as one rms_norm node (under the final multiply's id). */
export function foldWrittenRmsNorms(nodes: GraphNode[], view: GraphView): GraphNode[] {
  return foldIdioms(nodes, (node) => {
    const match = matchFromSquare(view, node);
    return match ? { removed: match.removed, node: rmsNormNode(match) } : null;
  });
}
