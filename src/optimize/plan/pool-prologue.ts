// A pool's prologue: pointwise ops computed on every tap before it is pooled (`maxpool(hardswish(conv(x) - s))`),
// so the values between them and the pool are never stored. The pool kernel walks one full-size tensor by
// window, the stream; every other operand of the prologue is loaded once per output element, so it must be
// the same at every tap of a window: size 1 on each spatial dim (a per-channel parameter, a per-sample value,
// a scalar).
import type { Arg, GraphNode } from "../graph.ts";
import { argNodeIds, FLOAT_DTYPES, type GraphView } from "./graph-view.ts";
import type { Region } from "./planner.ts";

/** Every operand the nodes read from outside them (node outputs, inputs, parameters), once each. */
function outsideOperands(view: GraphView, members: string[]): Arg[] {
  const inside = new Set(members);
  const seen = new Set<string>();
  const out: Arg[] = [];
  for (const id of members) {
    for (const arg of Object.values(view.node(id).fn ?? {})) {
      if (arg.t === "param" && !seen.has(`param:${arg.path}`)) {
        seen.add(`param:${arg.path}`);
        out.push(arg);
      }
      for (const used of argNodeIds(arg)) {
        if (inside.has(used) || seen.has(used)) continue;
        seen.add(used);
        out.push({ t: "node", id: used });
      }
    }
  }
  return out;
}

/** Whether a tensor of `shape` is the same at every tap of a window over `input` (rank >= 3: N, C, spatial):
 * broadcastable to it with size 1 on every spatial dim. */
function constantOverWindows(shape: number[], input: number[]): boolean {
  if (shape.length > input.length) return false;
  const offset = input.length - shape.length;
  return shape.every((size, i) => {
    const dim = i + offset;
    return dim >= 2 ? size === 1 : size === 1 || size === input[dim];
  });
}

/** The stream of a pool prologue made of `members` (the node whose full-size value the kernel pools through
 * the prologue), or null when the members cannot be one: more or less than one full-size operand, a
 * parameter of full size, or an operand varying inside a window. */
export function poolPrologueStream(view: GraphView, pool: GraphNode, members: string[]): string | null {
  const input = view.tensorOf(pool.fn?.input)?.shape;
  const sink = pool.fn?.input;
  if (!input || sink?.t !== "node" || !members.includes(sink.id)) return null;
  let stream: string | null = null;
  for (const arg of outsideOperands(view, members)) {
    if (view.isNumberValue(arg)) continue;
    const meta = view.tensorOf(arg);
    if (!meta) {
      if (arg.t === "node") return null; // a tuple, a list: nothing a prologue reads
      continue;
    }
    const full = meta.shape.length === input.length && meta.shape.every((s, i) => s === input[i]);
    if (full) {
      if (arg.t !== "node" || !FLOAT_DTYPES.has(meta.dtype) || (stream !== null && stream !== arg.id))
        return null;
      stream = arg.id;
    } else if (!constantOverWindows(meta.shape, input)) return null;
  }
  return stream;
}

/** The largest prologue the pool can take: the pointwise producers `grow` gathers (given a lower bound on
 * their graph index), nearest the pool first when the whole of them has no single stream (a residual added
 * upstream, a full-size parameter). Empty when none can be, and when the stream is a region's output
 * (`inRegion`: a normalisation's, say): the ops are then that region's epilogue, computed once per element in
 * the pass that writes the stream, where a prologue computes them once per tap. A conv's output is read by the
 * pool itself, channels-last (kf_pool_cl.cuh), so the ops in between are its prologue. */
export function poolPrologue(
  view: GraphView,
  pool: GraphNode,
  grow: (fromIndex: number) => string[],
  inRegion: (id: string) => boolean,
): string[] {
  const whole = grow(0);
  const starts = whole.map((id) => view.index.get(id) ?? 0).sort((a, b) => a - b);
  for (const start of starts) {
    const members = grow(start);
    const stream = members.length > 0 ? poolPrologueStream(view, pool, members) : null;
    if (stream === null) continue;
    return inRegion(stream) ? [] : members;
  }
  return [];
}

/** The node a pool region's kernel walks by window: its prologue's stream, or the pooled input itself. */
export function poolRegionStream(view: GraphView, region: Region): string | null {
  if (region.kind !== "pool" || !region.seed) return null;
  const pool = view.node(region.seed);
  if (region.prologue.length > 0) return poolPrologueStream(view, pool, region.prologue);
  const input = pool.fn?.input;
  return input?.t === "node" ? input.id : null;
}
