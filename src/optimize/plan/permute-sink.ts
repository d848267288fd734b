// An arithmetic op of a value and a per-channel vector whose result is only permuted for pointwise ops
// (ConvNeXt's `x + (gamma * y).permute(0, 3, 1, 2)`, the layer scale on the (N, H, W, C) output of a Linear, then
// the residual in (N, C, H, W)). The permute stood between the multiply and the add, so the multiply was a pass
// of its own writing a tensor the add read back through the view. The op is moved after the permute — it reads
// the permuted value and the vector viewed along the dim its last dim moved to, `gamma.view(C, 1, 1)` — and joins
// the readers' region. Exact: + - * / give the same bits whatever the layout (the elementwise ops whose CPU
// kernels round a permuted view otherwise, permute-hoist.ts, are not among them), and the result has the
// permute's strides, as PyTorch gives an elementwise op of a permuted dense tensor.
import type { Arg, GraphNode } from "../graph.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import type { GraphView } from "./graph-view.ts";
import { plain } from "./written-norms.ts";

const PERMUTES = new Set(["permute", "transpose", "t"]);
/** Ops moved: basic arithmetic, exact in any layout. */
const ARITHMETIC = new Set(["add", "sub", "mul", "div"]);

function permutation(node: GraphNode, rank: number): number[] | null {
  const ints = (a: Arg | undefined): number[] | null => {
    if (a?.t === "const" && a.pytype === "int" && typeof a.value === "number") return [a.value];
    if (a?.t === "list") {
      const items = a.items.map((i) => (i.t === "const" && typeof i.value === "number" ? i.value : null));
      return items.every((i) => i !== null) ? (items as number[]) : null;
    }
    return null;
  };
  const norm = (d: number) => (d < 0 ? d + rank : d);
  if (node.op === "t")
    return rank === 2 ? [1, 0] : rank < 2 ? Array.from({ length: rank }, (_, i) => i) : null;
  if (node.op === "transpose") {
    const a = ints(node.fn?.dim0)?.[0];
    const b = ints(node.fn?.dim1)?.[0];
    if (a === undefined || b === undefined) return null;
    const dims = Array.from({ length: rank }, (_, i) => i);
    [dims[norm(a)], dims[norm(b)]] = [norm(b), norm(a)];
    return dims;
  }
  const dims = ints(node.fn?.dims);
  return dims && dims.length === rank ? dims.map(norm) : null;
}

/** The nodes replacing `permute` (the permute of the op's value, the vector's view, the op under the permute's
 * id) and the op they replace, or null. */
function sunk(
  permute: GraphNode,
  view: GraphView,
  taken: Set<string>,
): { nodes: GraphNode[]; op: string } | null {
  const arg = permute.fn?.input;
  const permuted = view.outMeta(permute);
  if (!PERMUTES.has(permute.op) || !plain(permute) || arg?.t !== "node" || !permuted) return null;
  if (view.isGraphInput(arg.id)) return null;
  const readers = view.usersOf(permute.id);
  if (!readers.length || !readers.every((id) => id !== "@output" && POINTWISE[view.node(id).op])) return null;
  const op = view.node(arg.id);
  const out = view.outMeta(op);
  if (!ARITHMETIC.has(op.op) || !out || !plain(op) || view.usersOf(op.id).join() !== permute.id) return null;
  const rank = out.shape.length;
  const dims = permutation(permute, rank);
  if (!dims) return null;
  const keys = POINTWISE[op.op]?.operands ?? [];
  let full: string | null = null;
  let vector: string | null = null;
  for (const key of keys) {
    const meta = view.tensorOf(op.fn?.[key]);
    if (!meta) continue;
    if (meta.shape.join() === out.shape.join() && meta.dtype === out.dtype && full === null) full = key;
    else if (meta.shape.length === 1 && meta.shape[0] === out.shape[rank - 1] && op.fn?.[key]?.t === "param")
      vector = key;
    else return null;
  }
  const value = full ? op.fn?.[full] : undefined;
  const vec = vector ? op.fn?.[vector] : undefined;
  if (!full || !vector || !value || !vec || value.t !== "node") return null;
  const at = dims.indexOf(rank - 1);
  const size = out.shape[rank - 1] ?? 0;
  const vShape = [size, ...Array(rank - 1 - at).fill(1)];
  const fresh = (base: string) => {
    let id = base;
    for (let i = 1; taken.has(id); i++) id = `${base}_${i}`;
    taken.add(id);
    return id;
  };
  const pid = fresh(`${permute.id}_of_${value.id}`);
  const vid = fresh(`${permute.id}_channel_view`);
  const vecMeta = view.tensorOf(vec);
  if (!vecMeta) return null;
  const sizes: Arg = {
    t: "list",
    kind: "list",
    items: vShape.map((v) => ({ t: "const", pytype: "int", value: v })),
  };
  const reread: GraphNode = {
    ...permute,
    id: pid,
    args: permute.args.map((a) => (a.t === "node" && a.id === op.id ? value : a)),
    fn: { ...permute.fn, input: value },
    out: { t: "tensor", meta: { ...permuted, dtype: view.tensorOf(value)?.dtype ?? permuted.dtype } },
  };
  const channel: GraphNode = {
    id: vid,
    kind: "call_method",
    target: "view",
    args: [vec, sizes],
    kwargs: {},
    op: "view",
    fn: { input: vec, size: sizes },
    out: {
      t: "tensor",
      meta: { shape: vShape, dtype: vecMeta.dtype, stride: vShape.map(() => 1) },
    },
    modeDependent: false,
    rng: false,
    inplace: false,
  };
  const swap = (a: Arg): Arg =>
    a.t === "node" && a.id === value.id
      ? { t: "node", id: pid }
      : a.t === "param" && vec.t === "param" && a.path === vec.path
        ? { t: "node", id: vid }
        : a;
  const moved: GraphNode = {
    ...op,
    id: permute.id,
    args: op.args.map(swap),
    kwargs: Object.fromEntries(Object.entries(op.kwargs).map(([k, a]) => [k, swap(a)])),
    fn: { ...op.fn, [full]: { t: "node", id: pid }, [vector]: { t: "node", id: vid } },
    out: permute.out,
  };
  return { nodes: [reread, channel, moved], op: op.id };
}

/** The nodes with each per-channel arithmetic op only permuted for pointwise ops applied after the permute. */
export function sinkArithmeticBelowPermutes(nodes: GraphNode[], view: GraphView): GraphNode[] {
  const taken = new Set(nodes.map((n) => n.id));
  const replaced = new Map<string, GraphNode[]>();
  const dropped = new Set<string>();
  for (const node of nodes) {
    const result = sunk(node, view, taken);
    if (!result) continue;
    replaced.set(node.id, result.nodes);
    dropped.add(result.op);
  }
  if (!replaced.size) return nodes;
  const out = nodes.filter((n) => !dropped.has(n.id)).flatMap((n) => replaced.get(n.id) ?? [n]);
  return out;
}
