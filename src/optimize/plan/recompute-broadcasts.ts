// A pointwise op that reads fewer elements than it writes (a broadcast: `t[:, None] * freqs[None, :]`, the
// sinusoidal features of a timestep embedding) and is read by several pointwise ops (`sin(a)`, `cos(a)`) ran as
// a region of its own: the full-size value written once and read back by each reader's region. Each reader now
// gets its own copy of the op, which joins that reader's region and computes the value from the small operands
// again, so no region writes it. Recomputing costs less traffic than the value does whenever its operands hold
// fewer elements than it. Exact: the same op on the same operands, elementwise.
//
// A widening cast (`y = x.float()` of an fp16 x) read by several regions is the same case in bytes: each reader
// of the fp32 copy read 4 bytes an element that its own cast of x reads in 2. Its readers may be reductions and
// normalisations too (`y.sub_(y.mean(dim, keepdim=True))`), whose prologue the copy joins.
import type { Arg, GraphNode } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import { REDUCTIONS } from "../ops/reduce.ts";
import { written } from "./aliasing.ts";
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

const BYTES: Record<string, number> = { float64: 8, float32: 4, float16: 2, bfloat16: 2 };

/** `node` is `input.to(dtype)` with nothing else asked (no device, copy or memory format), to a wider float
 * dtype: reading its input costs fewer bytes than reading its value. */
function wideningCast(node: GraphNode, view: GraphView): boolean {
  const unset = (a: Arg) => a.t === "const" && (a.pytype === "none" || a.value === false);
  if (node.op !== "to" || !node.fn) return false;
  if (Object.entries(node.fn).some(([k, a]) => k !== "input" && k !== "dtype" && !unset(a))) return false;
  const from = BYTES[view.tensorOf(node.fn.input)?.dtype ?? ""];
  const to = BYTES[view.outMeta(node)?.dtype ?? ""];
  return from !== undefined && to !== undefined && from < to;
}

/** A reader that takes the copy into its region: a pointwise op, or a reduction / normalisation whose input it is.
 * A cast's reader may write it in place (`y.sub_(m)`, after y's other reads): it then writes its own copy, which
 * nothing else reads. */
function takesCopy(id: string, of: string, view: GraphView, seeds: boolean): boolean {
  const user = view.node(id);
  const target = written(user);
  const writesIt = seeds && user.inplace && target?.t === "node" && target.id === of;
  if (!plain(user) && !(writesIt && !user.rng && !user.modeDependent && user.fn !== null)) return false;
  if (POINTWISE[user.op] !== undefined) return true;
  if (!seeds || (REDUCTIONS[user.op] === undefined && NORMALIZATIONS[user.op] === undefined)) return false;
  const input = user.fn?.input;
  return input?.t === "node" && input.id === of;
}

/** Whether `node` is a broadcasting pointwise op read only by two or more pointwise ops, or a widening cast read
 * only by two or more pointwise ops, reductions and normalisations (never returned). */
function recomputable(node: GraphNode, view: GraphView): boolean {
  const spec = POINTWISE[node.op];
  const out = view.outMeta(node);
  if (!spec || !out || !plain(node)) return false;
  const cast = wideningCast(node, view);
  if (node.op === "to" && !cast) return false;
  const users = view.usersOf(node.id);
  if (users.length < 2 || users.includes("@output")) return false;
  if (!users.every((id) => takesCopy(id, node.id, view, cast))) return false;
  // Readers that meet again through pointwise ops (`sin(a) + cos(a)`) fall in one region, which reads the value
  // once as it is; copies would only compute it twice there. A reduction's or normalisation's value read by the
  // other reader's ops (`y - y.mean()`) is another region's operand: the reach stops at it.
  const seen = new Set<string>();
  for (const id of users) {
    const seed = POINTWISE[view.node(id).op] === undefined;
    for (const reached of seed ? [id] : pointwiseReach(id, view)) {
      if (seen.has(reached)) return false;
      seen.add(reached);
    }
  }
  if (cast) return true;
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
