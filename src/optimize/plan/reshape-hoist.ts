// An arithmetic op of a reshaped value and an operand broadcast along the dims the reshape keeps
// (`softmax(x.view(b, c, -1), -1).view(b, c, d, h, w) * self.scale` with a (1, C, 1, 1, 1) scale, KernelBench
// level 2's 38; `norm(y.flatten(2)).view_as(y) + bias.view(1, C, 1, 1)`). The reshape reads no data, but it stood
// between the op and the value it reshapes, so the op ran as a pass of its own after the region making that value.
// The op is moved before the reshape — it reads the unreshaped value and the operand viewed at that rank (its
// sizes over the kept leading dims, 1 over the rest) — and the reshape follows it under the op's id, so the op
// joins the region making the value. Exact: + - * / give the same bits whatever the shape the elements are
// indexed by, and the result is contiguous either way (the reshape of a contiguous value is a view of it).
// Permute-hoist.ts moves ops of one tensor over reshapes; this one takes a second operand that broadcasts.
import type { Arg, GraphNode, TensorMeta } from "../graph.ts";
import { contiguousStride, sameShape } from "./graph-edit.ts";
import { GraphView } from "./graph-view.ts";
import { plain } from "./written-norms.ts";

const RESHAPES = new Set(["view", "reshape", "view_as", "reshape_as"]);
const ARITHMETIC = new Set(["add", "sub", "mul", "div"]);

/** The leading dims a reshape from `from` to `to` keeps as they are. */
function keptPrefix(from: number[], to: number[]): number {
  let k = 0;
  while (k < from.length && k < to.length && from[k] === to[k]) k++;
  return k;
}

/** The nodes replacing `op` (the operand's view, the op on the unreshaped value, the reshape under the op's id),
 * or null where `op` is not an arithmetic op of one reshaped contiguous value and an operand broadcast along the
 * kept dims only. */
function hoisted(op: GraphNode, view: GraphView, taken: Set<string>): GraphNode[] | null {
  const out = view.outMeta(op);
  if (!ARITHMETIC.has(op.op) || !plain(op) || !out || !op.fn) return null;
  const keys = ["input", "other"].filter((k) => view.tensorOf(op.fn?.[k]) !== null);
  const reshapedKey = keys.find((k) => {
    const arg = op.fn?.[k];
    return arg?.t === "node" && !view.isGraphInput(arg.id) && RESHAPES.has(view.node(arg.id).op);
  });
  if (!reshapedKey) return null;
  const reshape = view.node((op.fn[reshapedKey] as { id: string }).id);
  const source = reshape.fn?.input;
  const from = view.tensorOf(source);
  const to = view.outMeta(reshape);
  if (!plain(reshape) || !source || !from || !to || view.usersOf(reshape.id).join() !== op.id) return null;
  if (!sameShape(from.stride, contiguousStride(from.shape)) || !sameShape(to.shape, out.shape)) return null;
  if (from.dtype !== out.dtype || sameShape(from.shape, to.shape)) return null;
  const otherKey = keys.find((k) => k !== reshapedKey);
  const operand = otherKey ? op.fn[otherKey] : undefined;
  const meta = operand ? view.tensorOf(operand) : null;
  if (!otherKey || !operand || !meta || (operand.t !== "param" && operand.t !== "node")) return null;
  // The operand, right-aligned to the reshaped value, may vary along its kept leading dims only.
  const k = keptPrefix(from.shape, to.shape);
  const offset = to.shape.length - meta.shape.length;
  if (offset < 0 || meta.shape.some((size, i) => size !== 1 && i + offset >= k)) return null;
  const sizes = from.shape.map((_, d) => (d < k && d >= offset ? (meta.shape[d - offset] ?? 1) : 1));
  const fresh = (base: string) => {
    let id = base;
    for (let i = 1; taken.has(id); i++) id = `${base}_${i}`;
    taken.add(id);
    return id;
  };
  const operandView = fresh(`${op.id}_operand`);
  const applied = fresh(`${op.id}_unreshaped`);
  const sizeList: Arg = {
    t: "list",
    kind: "list",
    items: sizes.map((v) => ({ t: "const", pytype: "int", value: v })),
  };
  const viewMeta: TensorMeta = { shape: sizes, dtype: meta.dtype, stride: contiguousStride(sizes) };
  const plainNode = (
    id: string,
    rest: Omit<GraphNode, "id" | "modeDependent" | "rng" | "inplace">,
  ): GraphNode => ({
    id,
    ...rest,
    modeDependent: false,
    rng: false,
    inplace: false,
  });
  // reshape, not view: the operand (a parameter, an expanded value) may not be contiguous
  const operandNode = plainNode(operandView, {
    kind: "call_method",
    target: "reshape",
    args: [operand, sizeList],
    kwargs: {},
    op: "reshape",
    fn: { input: operand, shape: sizeList },
    out: { t: "tensor", meta: viewMeta },
  });
  const isOperand = (a: Arg) =>
    (a.t === "param" && operand.t === "param" && a.path === operand.path) ||
    (a.t === "node" && operand.t === "node" && a.id === operand.id);
  const swap = (a: Arg): Arg => {
    if (a.t === "node" && a.id === reshape.id) return source;
    return isOperand(a) ? { t: "node", id: operandView } : a;
  };
  const appliedNode: GraphNode = {
    ...op,
    id: applied,
    args: op.args.map(swap),
    kwargs: Object.fromEntries(Object.entries(op.kwargs).map(([key, a]) => [key, swap(a)])),
    fn: { ...op.fn, [reshapedKey]: source, [otherKey]: { t: "node", id: operandView } },
    out: { t: "tensor", meta: { ...from, dtype: out.dtype } },
  };
  const reshaped: GraphNode = {
    ...reshape,
    id: op.id,
    args: reshape.args.map((a) =>
      a.t === "node" && a.id === (source as { id?: string }).id ? { t: "node", id: applied } : a,
    ),
    fn: { ...reshape.fn, input: { t: "node", id: applied } },
    out: op.out,
  };
  return [operandNode, appliedNode, reshaped];
}

/** The id of the reshape `op` reads. */
function reshapeRead(op: GraphNode, view: GraphView): string | null {
  for (const a of [op.fn?.input, op.fn?.other])
    if (a?.t === "node" && !view.isGraphInput(a.id) && RESHAPES.has(view.node(a.id).op)) return a.id;
  return null;
}

/** The nodes with each arithmetic op of a reshaped value and a kept-dims operand applied before the reshape,
 * repeatedly (a chain of them moves up one op at a time). */
export function hoistArithmeticAboveReshapes(nodes: GraphNode[], view: GraphView): GraphNode[] {
  let current = nodes;
  let currentView = view;
  for (let round = 0; round < nodes.length; round++) {
    const taken = new Set(current.map((n) => n.id));
    const replaced = new Map<string, GraphNode[]>();
    const dropped = new Set<string>();
    for (const node of current) {
      const result = hoisted(node, currentView, taken);
      const gone = result ? reshapeRead(node, currentView) : null;
      if (!result || !gone || dropped.has(gone)) continue;
      replaced.set(node.id, result);
      dropped.add(gone);
    }
    if (!replaced.size) return current;
    current = current.filter((n) => !dropped.has(n.id)).flatMap((n) => replaced.get(n.id) ?? [n]);
    currentView = new GraphView({ ...view.graph, nodes: current });
  }
  return current;
}
