// A pointwise op whose result is only reshaped for a reduction or normalisation (`torch.relu(fc(x)).view(B, S,
// -1).sum(-2)`, `torch.tanh(h).view(B, G, -1).softmax(-1)`, `torch.relu(conv(x)).flatten(2).mean(-1)`). The view
// reads no data, but it stood between the op and the reduction, so the op ran as a pass of its own (writing a
// tensor the reduction read back) where it could have been the reduction's prologue. The view is moved before
// the op (it reshapes the op's input, which has the op's shape and is contiguous) and the op, under the view's
// id, is read by the reduction directly. Exact: an elementwise op of a contiguous tensor computes the same
// values whatever shape the tensor is viewed as, and its result is contiguous either way.
import type { Arg, GraphNode } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import { REDUCTIONS } from "../ops/reduce.ts";
import { contiguousStride, sameShape, withInput } from "./graph-edit.ts";
import { GraphView } from "./graph-view.ts";
import { plain } from "./written-norms.ts";

/** Views that only reshape a contiguous tensor (squeeze and unsqueeze add or drop size-1 dims). */
const RESHAPES = new Set(["view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze"]);

/** Ops that take a pointwise prologue: the readers a sunk op joins. */
const TAKERS = new Set([...Object.keys(REDUCTIONS), ...Object.keys(NORMALIZATIONS)]);

/** A read of a tensor's shape and nothing else: `size`, `dim`, `.shape`, `.ndim`. */
function readsShapeOnly(node: GraphNode): boolean {
  if (node.op === "size" || node.op === "dim") return true;
  const name = node.fn?.name;
  return node.op === "getattr" && name?.t === "const" && (name.value === "shape" || name.value === "ndim");
}

/** The view of the op's input and the op under the view's id replacing `reshape`, and the op they replace, or
 * null where `reshape` does not reshape one contiguous pointwise result of one tensor for reductions only. */
function sunk(
  reshape: GraphNode,
  view: GraphView,
  taken: Set<string>,
  moved: Set<string>,
): { nodes: GraphNode[]; op: string; sizes: string[] } | null {
  const arg = reshape.fn?.input;
  const shaped = view.outMeta(reshape);
  if (!RESHAPES.has(reshape.op) || !plain(reshape) || arg?.t !== "node" || !shaped) return null;
  if (view.isGraphInput(arg.id)) return null;
  const readers = view.usersOf(reshape.id);
  const takes = (id: string) => id !== "@output" && (TAKERS.has(view.node(id).op) || moved.has(id));
  if (!readers.length || !readers.every(takes)) return null;
  const op = view.node(arg.id);
  const spec = POINTWISE[op.op];
  const out = view.outMeta(op);
  if (!spec || !out || !plain(op) || op.op === "to") return null;
  // Besides the reshape, only reads of the op's shape (`y.view(y.size(0), y.size(1), -1)`, `b, c, h, w = y.shape`):
  // they read its input's, which has the same shape.
  const others = view.usersOf(op.id).filter((id) => id !== reshape.id);
  if (!others.every((id) => id !== "@output" && readsShapeOnly(view.node(id)))) return null;
  const tensors = spec.operands.filter((key) => view.tensorOf(op.fn?.[key]));
  const key = tensors[0];
  const input = key ? op.fn?.[key] : undefined;
  const meta = view.tensorOf(input);
  if (tensors.length !== 1 || !key || input?.t !== "node" || !meta) return null;
  const contiguous = (m: { shape: number[]; stride: number[] }) =>
    sameShape(m.stride, contiguousStride(m.shape));
  if (!sameShape(meta.shape, out.shape) || !contiguous(meta) || !contiguous(out) || !contiguous(shaped))
    return null;
  let id = `${reshape.id}_of_input`;
  for (let i = 1; taken.has(id); i++) id = `${reshape.id}_of_input_${i}`;
  taken.add(id);
  const reshaped: GraphNode = {
    ...withInput(reshape, "input", op.id, input),
    id,
    out: { t: "tensor", meta: { ...shaped, dtype: meta.dtype } },
  };
  const sunkOp: GraphNode = {
    ...withInput(op, key, input.id, { t: "node", id }),
    id: reshape.id,
    out: reshape.out,
  };
  return { nodes: [reshaped, sunkOp], op: op.id, sizes: others };
}

/** The nodes with each pointwise op reshaped only for reductions or normalisations applied after the reshape,
 * repeatedly (a chain moves down one op at a time). */
export function sinkPointwiseBelowReshapes(nodes: GraphNode[], view: GraphView): GraphNode[] {
  let current = nodes;
  let currentView = view;
  const moved = new Set<string>();
  for (let round = 0; round < nodes.length; round++) {
    const taken = new Set(current.map((n) => n.id));
    const replaced = new Map<string, GraphNode[]>();
    const dropped = new Map<string, Arg>();
    const sizeReads = new Map<string, { from: string; by: Arg }>();
    for (const node of current) {
      const result = sunk(node, currentView, taken, moved);
      if (!result || dropped.has(result.op)) continue;
      const input = result.nodes[0]?.fn?.input;
      if (!input) continue;
      replaced.set(node.id, result.nodes);
      dropped.set(result.op, input);
      moved.add(node.id);
      for (const id of result.sizes) sizeReads.set(id, { from: result.op, by: input });
    }
    if (!replaced.size) return current;
    current = current
      .filter((n) => !dropped.has(n.id))
      .flatMap((n) => replaced.get(n.id) ?? [n])
      .map((n) => {
        const read = sizeReads.get(n.id);
        return read ? withInput(n, "input", read.from, read.by) : n;
      });
    currentView = new GraphView({ ...currentView.graph, nodes: current });
  }
  return current;
}
