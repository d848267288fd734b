// A pointwise op that reads fewer elements than it writes (a broadcast: `t[:, None] * freqs[None, :]`, the
// sinusoidal features of a timestep embedding) and is read by several pointwise ops (`sin(a)`, `cos(a)`) ran as
// a region of its own: the full-size value written once and read back by each reader's region. Each reader now
// gets its own copy of the op, which joins that reader's region and computes the value from the small operands
// again, so no region writes it. Recomputing costs less traffic than the value does whenever its operands hold
// fewer elements than it. Exact: the same op on the same operands, elementwise.
import type { Arg, GraphNode } from "../graph.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import { GraphView } from "./graph-view.ts";
import { plain } from "./written-norms.ts";

const numel = (shape: number[]) => shape.reduce((n, s) => n * s, 1);

function renamed(arg: Arg, from: string, to: string): Arg {
  if (arg.t === "node") return arg.id === from ? { t: "node", id: to } : arg;
  if (arg.t === "list") return { ...arg, items: arg.items.map((a) => renamed(a, from, to)) };
  return arg;
}

/** `node` reading node `to` wherever it read node `from`. */
function reading(node: GraphNode, from: string, to: string): GraphNode {
  const swap = (a: Arg) => renamed(a, from, to);
  return {
    ...node,
    args: node.args.map(swap),
    kwargs: Object.fromEntries(Object.entries(node.kwargs).map(([k, a]) => [k, swap(a)])),
    fn: node.fn ? Object.fromEntries(Object.entries(node.fn).map(([k, a]) => [k, swap(a)])) : null,
  };
}

/** `id` and the nodes reachable from it through pointwise ops alone: the region it would fall in, roughly. */
function pointwiseReach(id: string, view: GraphView): Set<string> {
  const reach = new Set([id]);
  const stack = [id];
  while (stack.length) {
    const at = stack.pop() ?? "";
    for (const user of view.usersOf(at)) {
      if (user === "@output" || reach.has(user) || POINTWISE[view.node(user).op] === undefined) continue;
      reach.add(user);
      stack.push(user);
    }
  }
  return reach;
}

/** Whether `node` is a broadcasting pointwise op read only by two or more pointwise ops (never returned). */
function recomputable(node: GraphNode, view: GraphView): boolean {
  const spec = POINTWISE[node.op];
  const out = view.outMeta(node);
  if (!spec || !out || !plain(node) || node.op === "to") return false;
  const users = view.usersOf(node.id);
  if (users.length < 2 || users.includes("@output")) return false;
  if (!users.every((id) => POINTWISE[view.node(id).op] !== undefined && plain(view.node(id)))) return false;
  // Readers that meet again through pointwise ops (`sin(a) + cos(a)`) fall in one region, which reads the value
  // once as it is; copies would only compute it twice there.
  const seen = new Set<string>();
  for (const id of users) {
    for (const reached of pointwiseReach(id, view)) {
      if (seen.has(reached)) return false;
      seen.add(reached);
    }
  }
  let read = 0;
  for (const key of spec.operands) {
    const meta = view.tensorOf(node.fn?.[key]);
    if (meta) read += numel(meta.shape);
  }
  return read < numel(out.shape);
}

/** The nodes with each recomputable broadcast replaced by one copy per reader, each reader reading its own;
 * repeated, so that a broadcast read by broadcasts that are copied is copied too. */
export function recomputeBroadcasts(nodes: GraphNode[], view: GraphView): GraphNode[] {
  let current = nodes;
  let currentView = view;
  for (let round = 0; round < 4; round++) {
    const next = recomputeOnce(current, currentView);
    if (next === current) break;
    current = next;
    currentView = new GraphView({ ...currentView.graph, nodes: current });
  }
  return current;
}

function recomputeOnce(nodes: GraphNode[], view: GraphView): GraphNode[] {
  const taken = new Set([...nodes.map((n) => n.id), ...view.graph.inputs.map((i) => i.name)]);
  const copiesOf = new Map<string, GraphNode[]>();
  const rewired = new Map<string, GraphNode>();
  for (const node of nodes) {
    if (!recomputable(node, view)) continue;
    const base = rewired.get(node.id) ?? node;
    const copies: GraphNode[] = [];
    for (const userId of view.usersOf(node.id)) {
      let id = `${node.id}_for_${userId}`;
      for (let i = 1; taken.has(id); i++) id = `${node.id}_for_${userId}_${i}`;
      taken.add(id);
      copies.push({ ...base, id });
      const user = rewired.get(userId) ?? view.node(userId);
      rewired.set(userId, reading(user, node.id, id));
    }
    copiesOf.set(node.id, copies);
  }
  if (!copiesOf.size) return nodes;
  return nodes.flatMap((node) => copiesOf.get(node.id) ?? [rewired.get(node.id) ?? node]);
}
