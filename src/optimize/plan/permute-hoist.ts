// A pointwise op of one tensor read through a permute (`norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)` then
// `F.gelu`, ConvNeXt's channels-last norm; `x.transpose(1, 2).sigmoid()`). The permute reads no data, but as a
// view it stood between the op and the value it permutes, so the op ran as a kernel of its own after the region
// that made that value. Applied elementwise, the op commutes with the permute: it is rewritten to act on the
// unpermuted value (joining the region that makes it) and the permute follows it, under the op's own id.
// Exact: the same values, and, where the permuted value is contiguous, the same strides as PyTorch gives the
// op's output (an elementwise op keeps a dense input's strides) — except for the ops whose CPU kernels round
// differently on a permuted view than on a contiguous tensor (measured with torch 2.x on the CPU, fp32/fp16/bf16:
// erf-GELU and logsigmoid, up to 1.2e-6 in fp32; tanh-GELU, silu, the other activations and arithmetic are
// bit-equal): the fallback, which runs the ops as the graph has them, must equal the reference's exactly.
// A reshape of a contiguous value (view, reshape, flatten, unflatten: `softmax(y.view(B, H, -1)).view(B, -1) * 2`)
// is moved over the same way; the op sees a contiguous tensor on both sides of it, so every op may move. So is a
// copy that only gathers elements (GATHERS below: reflect/replicate padding, nearest upsampling, pixel shuffle).
import type { Arg, GraphNode } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import { REDUCTIONS } from "../ops/reduce.ts";
import { contiguousStride, sameShape, withInput } from "./graph-edit.ts";
import { argNodeIds, GraphView } from "./graph-view.ts";
import { plain } from "./written-norms.ts";

/** Views that only reorder dims: the ops a pointwise op is hoisted above. */
const PERMUTES = new Set(["permute", "transpose", "t"]);
/** Views that regroup the dims of a contiguous value (`softmax(y.view(B, H, -1)).view(B, -1) * 2`): the op's
 * input is contiguous on both sides of them, so no kernel sees another layout. */
const RESHAPES = new Set(["view", "reshape", "flatten", "unflatten"]);
const MOVED_OVER = new Set([...PERMUTES, ...RESHAPES]);

const constOf = (node: GraphNode, key: string): unknown => {
  const arg = node.fn?.[key];
  return arg?.t === "const" ? arg.value : undefined;
};

/** Copies in which every output element is one input element (`F.pad(y, mode="reflect")`, nearest upsampling,
 * pixel shuffle, flip, roll): an elementwise op commutes with them too, and applied before one it joins the region
 * making the value instead of running as a pass of its own over the copy (over fewer elements where the copy
 * grows the tensor). Each entry says which calls of the op are such copies: a constant pad writes its fill value,
 * which the op would not see, and the other interpolation modes mix elements. */
const GATHERS: Record<string, (node: GraphNode) => boolean> = {
  pad: (node) => ["reflect", "replicate", "circular"].includes(String(constOf(node, "mode"))),
  interpolate: (node) =>
    ["nearest", "nearest-exact"].includes(String(constOf(node, "mode"))) &&
    constOf(node, "antialias") !== true,
  pixel_shuffle: () => true,
  pixel_unshuffle: () => true,
  flip: () => true,
  roll: () => true,
};

/** Ops kept below the permute: their CPU kernels give other bits on a permuted view (see above). */
const LAYOUT_SENSITIVE_ON_CPU: Record<string, (node: GraphNode) => boolean> = {
  gelu: (node) => {
    const approximate = node.fn?.approximate;
    return !(approximate?.t === "const" && approximate.value === "tanh");
  },
  logsigmoid: () => true,
};

/** Joins of several tensors (torch.cat, torch.stack): each output element is one element of one part. */
const JOINS = new Set(["cat", "concat", "stack"]);

/** Ops whose region a hoisted op joins. */
const MAKERS = new Set([
  ...Object.keys(POINTWISE),
  ...Object.keys(REDUCTIONS),
  ...Object.keys(NORMALIZATIONS),
  ...["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"],
]);

/** The op and the permute (or reshape) replacing pointwise `node`, or null where it does not read one tensor
 * through a permute or reshape of a contiguous value. */
function hoisted(node: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  const spec = POINTWISE[node.op];
  const out = view.outMeta(node);
  if (!spec || !out || !plain(node) || node.op === "to") return null;
  const tensors = spec.operands.filter((key) => view.tensorOf(node.fn?.[key]));
  const key = tensors[0];
  if (tensors.length !== 1 || !key) return null;
  const arg = node.fn?.[key];
  if (arg?.t !== "node" || view.isGraphInput(arg.id)) return null;
  const permute = view.node(arg.id);
  const source = permute.fn?.input;
  const permuted = view.outMeta(permute);
  const meta = view.tensorOf(source);
  const gather = GATHERS[permute.op]?.(permute) === true;
  if (
    !(MOVED_OVER.has(permute.op) || gather) ||
    !plain(permute) ||
    source?.t !== "node" ||
    !permuted ||
    !meta
  )
    return null;
  // A gather hands the op other elements at each position of its vectorised loop, as a permuted view does.
  if ((PERMUTES.has(permute.op) || gather) && LAYOUT_SENSITIVE_ON_CPU[node.op]?.(node)) return null;
  // A gather is a copy: one read elsewhere stays, and the op would add a second; its kernels take the dtypes
  // the reference gave them (reflect padding has no bool kernel).
  if (gather && (view.usersOf(permute.id).length !== 1 || out.dtype !== meta.dtype)) return null;
  // Only where the op can join the region making the value: a graph input or a library call's output is read
  // through the permute by the op's own region anyway.
  // A join (`torch.stack([sin(a), cos(a)], -1).flatten(-2) * 0.5`) passes the op on to its parts' regions.
  const made = view.isGraphInput(source.id) ? "" : view.node(source.id).op;
  if (!MAKERS.has(made) && !JOINS.has(made)) return null;
  if (!sameShape(meta.stride, contiguousStride(meta.shape)) || meta.dtype !== permuted.dtype) return null;
  if (!sameShape(out.shape, permuted.shape) || !sameShape(out.stride, permuted.stride)) return null;
  let id = `${node.id}_unpermuted`;
  for (let i = 1; taken.has(id); i++) id = `${node.id}_unpermuted_${i}`;
  taken.add(id);
  const op: GraphNode = {
    ...withInput(node, key, permute.id, source),
    id,
    out: { t: "tensor", meta: { ...out, shape: meta.shape, stride: meta.stride } },
  };
  const after: GraphNode = {
    ...withInput(permute, "input", source.id, { t: "node", id }),
    id: node.id,
    out: node.out,
  };
  return [op, after];
}

/** The ops and the join replacing pointwise `node` where it reads one tensor, a join (`relu(cat([conv1(x),
 * conv2(x)]))`, Inception's branches): the op applied to each part, in the region making that part, and the
 * join of the results under the op's id; null where that does not hold. Each part must be made by a region (a
 * kernel of its own per part would cost more launches than the one pass it saves), read by the join alone (else
 * its region would have to write it twice), and of the join's dtype (torch.cat promotes mixed parts: the op would
 * run in another dtype on each). Exact as over a gather (layout-sensitive ops stay). */
function hoistedOverJoin(node: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  const spec = POINTWISE[node.op];
  const out = view.outMeta(node);
  if (!spec || !out || !plain(node) || node.op === "to" || LAYOUT_SENSITIVE_ON_CPU[node.op]?.(node))
    return null;
  const tensors = spec.operands.filter((key) => view.tensorOf(node.fn?.[key]));
  const key = tensors[0];
  const arg = key ? node.fn?.[key] : undefined;
  if (tensors.length !== 1 || !key || arg?.t !== "node" || view.isGraphInput(arg.id)) return null;
  const join = view.node(arg.id);
  const list = join.fn?.tensors;
  const joined = view.outMeta(join);
  if (!JOINS.has(join.op) || !plain(join) || list?.t !== "list" || !joined || joined.dtype !== out.dtype)
    return null;
  if (view.usersOf(join.id).length !== 1 || !sameShape(out.shape, joined.shape)) return null;
  const parts: GraphNode[] = [];
  const ids = list.items.map((item) => (item.t === "node" ? item.id : ""));
  // A part joined twice (`cat([y, y])`) would be read by two copies of the op: two passes where one was.
  if (new Set(ids).size !== ids.length) return null;
  for (const item of list.items) {
    if (item.t !== "node" || view.isGraphInput(item.id) || !MAKERS.has(view.node(item.id).op)) return null;
    const meta = view.tensorOf(item);
    if (!meta || meta.dtype !== joined.dtype || view.usersOf(item.id).length !== 1) return null;
    let id = `${node.id}_part${parts.length}`;
    for (let i = 1; taken.has(id); i++) id = `${node.id}_part${parts.length}_${i}`;
    taken.add(id);
    parts.push({ ...withInput(node, key, arg.id, item), id, out: { t: "tensor", meta } });
  }
  const items: Arg = { ...list, items: parts.map((p) => ({ t: "node", id: p.id }) as Arg) };
  const swap = (a: Arg): Arg => (a === list || (a.t === "list" && sameItems(a, list)) ? items : a);
  const after: GraphNode = {
    ...join,
    id: node.id,
    args: join.args.map(swap),
    kwargs: Object.fromEntries(Object.entries(join.kwargs).map(([k, a]) => [k, swap(a)])),
    fn: { ...join.fn, tensors: items },
    out: node.out,
  };
  return [...parts, after];
}

function sameItems(a: Arg & { t: "list" }, b: Arg & { t: "list" }): boolean {
  return (
    a.items.length === b.items.length &&
    a.items.every((x, i) => {
      const y = b.items[i];
      return x.t === "node" && y?.t === "node" && x.id === y.id;
    })
  );
}

/** The nodes with each pointwise op of one permuted tensor applied before the permute, repeatedly (a chain of
 * such ops moves up one op at a time). A permute left unread goes. */
export function hoistPointwiseOverPermutes(nodes: GraphNode[], view: GraphView): GraphNode[] {
  let current = nodes;
  let currentView = view;
  for (let round = 0; round < nodes.length; round++) {
    const next = hoistOnce(current, currentView);
    if (next === current) return current;
    current = next;
    currentView = new GraphView({ ...currentView.graph, nodes: current });
  }
  return current;
}

function hoistOnce(nodes: GraphNode[], view: GraphView): GraphNode[] {
  const taken = new Set(nodes.map((n) => n.id));
  const replaced = new Map<string, GraphNode[]>();
  for (const node of nodes) {
    const nodesFor = hoisted(node, view, taken) ?? hoistedOverJoin(node, view, taken);
    if (nodesFor) replaced.set(node.id, nodesFor);
  }
  if (!replaced.size) return nodes;
  const out = nodes.flatMap((node) => replaced.get(node.id) ?? [node]);
  const read = new Set<string>();
  for (const node of out)
    for (const a of [...node.args, ...Object.values(node.kwargs), ...Object.values(node.fn ?? {})])
      for (const id of argNodeIds(a)) read.add(id);
  const dead = (node: GraphNode) =>
    (MOVED_OVER.has(node.op) || node.op in GATHERS || JOINS.has(node.op)) &&
    plain(node) &&
    !read.has(node.id) &&
    !view.usersOf(node.id).includes("@output");
  return out.filter((node) => !dead(node));
}
