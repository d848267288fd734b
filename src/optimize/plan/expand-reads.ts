// `y.expand_as(x)` / `y.expand(...)` read only by pointwise ops (`x * y.expand_as(x)`, the squeeze-excite and
// ECA gates as their papers' code writes them). The expand reads no data, but as a view it stood between its
// input and the op reading it, so a gate's `sigmoid` ran as a kernel of its own before the multiply. Pointwise
// ops broadcast their operands anyway: each such op reads the unexpanded value instead, where its result keeps
// the same shape, and the expand goes.
import type { Arg, GraphNode } from "../graph.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import type { GraphView } from "./graph-view.ts";
import { plain } from "./written-norms.ts";

const EXPANDS = new Set(["expand", "expand_as"]);

/** NumPy broadcasting of `shapes`, or null where they do not broadcast. */
export function broadcastShapes(shapes: number[][]): number[] | null {
  const rank = Math.max(0, ...shapes.map((s) => s.length));
  const out: number[] = Array(rank).fill(1);
  for (const shape of shapes)
    for (let i = 0; i < shape.length; i++) {
      const at = rank - shape.length + i;
      const size = shape[i] as number;
      if (size === 1) continue;
      if (out[at] !== 1 && out[at] !== size) return null;
      out[at] = size;
    }
  return out;
}

export function replaceRef(arg: Arg, id: string, by: Arg): Arg {
  if (arg.t === "node" && arg.id === id) return by;
  if (arg.t === "list") return { ...arg, items: arg.items.map((a) => replaceRef(a, id, by)) };
  return arg;
}

export function mapArgs(node: GraphNode, id: string, by: Arg): GraphNode {
  const map = (record: Record<string, Arg>) =>
    Object.fromEntries(Object.entries(record).map(([k, a]) => [k, replaceRef(a, id, by)]));
  return {
    ...node,
    args: node.args.map((a) => replaceRef(a, id, by)),
    kwargs: map(node.kwargs),
    fn: node.fn ? map(node.fn) : null,
  };
}

/** Whether pointwise `user` reading `expand` has the same result shape when it reads `input` instead. */
function broadcastsAlike(user: GraphNode, expand: GraphNode, input: Arg, view: GraphView): boolean {
  const spec = POINTWISE[user.op];
  const out = view.outMeta(user);
  if (!spec || !out || !plain(user) || spec.channel) return false;
  const shapes: number[][] = [];
  for (const key of spec.operands) {
    const arg = user.fn?.[key];
    const read = arg?.t === "node" && arg.id === expand.id ? input : arg;
    const meta = view.tensorOf(read);
    if (meta) shapes.push(meta.shape);
  }
  return broadcastShapes(shapes)?.join() === out.shape.join();
}

/** The nodes with every expand read only by pointwise ops dropped, those ops reading what it expanded. */
export function dropPointwiseExpands(nodes: GraphNode[], view: GraphView): GraphNode[] {
  const rewrites = new Map<string, { id: string; by: Arg }[]>();
  const dropped = new Set<string>();
  for (const node of nodes) {
    const input = node.fn?.input;
    if (!EXPANDS.has(node.op) || !plain(node) || !input || !view.tensorOf(input)) continue;
    const users = view.usersOf(node.id);
    if (!users.length || users.includes("@output")) continue;
    const readers = users.map((u) => view.node(u));
    if (!readers.every((user) => broadcastsAlike(user, node, input, view))) continue;
    dropped.add(node.id);
    for (const user of readers)
      rewrites.set(user.id, [...(rewrites.get(user.id) ?? []), { id: node.id, by: input }]);
  }
  if (!dropped.size) return nodes;
  return nodes
    .filter((node) => !dropped.has(node.id))
    .map((node) => (rewrites.get(node.id) ?? []).reduce((n, { id, by }) => mapArgs(n, id, by), node));
}
