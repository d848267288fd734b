// In-place statements threaded through their results. fx records `y = conv(x); y.mul_(0.5); y.add_(1.0);
// return y` as three in-place calls that each read `conv`, and a return of `conv`: read four times, no write
// is private (rules.ts), and the whole chain stays PyTorch's ops. Each statement writes y's storage and
// returns y, so a read of y after it reads what it returned: every read of a value (or of an earlier in-place
// result on it) that comes after an in-place write to it becomes a read of that write's result. The chain
// then reads as `conv -> mul_ -> add_ -> (return)`, each link read by the next alone, as `y.mul_(0.5).add_(1.0)`
// does, and fuses as the out-of-place ops.
//
// Only for a value that owns its storage (a node that is neither a view nor an in-place result, so not an
// input, a parameter or a buffer) and that nothing views: through a view (`v = y.view(-1); y.mul_(2); v`) the
// write is seen under another name, which the renaming would not follow, so such a value is left as captured.
// Nor for a value an item assignment writes (`y.__setitem__(mask, v)`, fx's call of it): that call returns
// None, so no later read can be renamed to its result.
import type { Arg, GraphNode } from "../graph.ts";
import { mayAlias, written } from "./aliasing.ts";
import type { GraphView } from "./graph-view.ts";

function renameArg(arg: Arg, rename: (id: string) => string): Arg {
  switch (arg.t) {
    case "node": {
      const id = rename(arg.id);
      return id === arg.id ? arg : { t: "node", id };
    }
    case "list":
      return { ...arg, items: arg.items.map((a) => renameArg(a, rename)) };
    case "dict":
      return {
        ...arg,
        keys: arg.keys.map((a) => renameArg(a, rename)),
        values: arg.values.map((a) => renameArg(a, rename)),
      };
    case "slice":
      return {
        ...arg,
        start: renameArg(arg.start, rename),
        stop: renameArg(arg.stop, rename),
        step: renameArg(arg.step, rename),
      };
    default:
      return arg;
  }
}

function renameRecord(record: Record<string, Arg>, rename: (id: string) => string): Record<string, Arg> {
  return Object.fromEntries(Object.entries(record).map(([k, a]) => [k, renameArg(a, rename)]));
}

/** In-place ops whose call returns None rather than the tensor it wrote. */
const RETURNS_NONE = new Set(["setitem"]);

function writtenId(node: GraphNode): string | null {
  const target = written(node);
  return node.inplace && target?.t === "node" ? target.id : null;
}

/** Values that own their storage, are written in place, and are never viewed (under any of their names). */
function threadableValues(view: GraphView): Set<string> {
  const rootOf = new Map<string, string>();
  for (const node of view.graph.nodes) {
    const target = writtenId(node);
    if (target === null) continue;
    const root = rootOf.get(target) ?? target;
    if (view.isGraphInput(root)) continue;
    const owner = view.node(root);
    if (owner.inplace || mayAlias(owner, view) || owner.out.t !== "tensor") continue;
    rootOf.set(target, root);
    rootOf.set(node.id, root);
  }
  const viewed = new Set<string>();
  for (const node of view.graph.nodes) {
    const target = writtenId(node);
    if (target !== null && RETURNS_NONE.has(node.op)) viewed.add(rootOf.get(target) ?? target);
  }
  for (const [name, root] of rootOf) {
    for (const user of view.usersOf(name)) {
      if (user === "@output") continue;
      const reader = view.node(user);
      const writesIt = writtenId(reader) === name;
      // A read that may alias (a view, a same-dtype .to()) or an in-place op reading it as an operand only.
      if ((!writesIt && reader.inplace) || (mayAlias(reader, view) && !writesIt)) viewed.add(root);
    }
  }
  return new Set([...rootOf.values()].filter((root) => !viewed.has(root)));
}

/** The nodes and output with each later read of an in-place-written value reading the last write's result. */
export function threadInplaceWrites(view: GraphView): { nodes: GraphNode[]; output: Arg } {
  const { nodes, output } = view.graph;
  const roots = threadableValues(view);
  if (!roots.size) return { nodes, output };
  const rootOf = new Map<string, string>([...roots].map((r) => [r, r]));
  const latest = new Map<string, string>();
  const rename = (id: string) => {
    const root = rootOf.get(id);
    return root === undefined ? id : (latest.get(root) ?? id);
  };
  const out = nodes.map((node) => {
    const threaded: GraphNode = {
      ...node,
      args: node.args.map((a) => renameArg(a, rename)),
      kwargs: renameRecord(node.kwargs, rename),
      fn: node.fn && renameRecord(node.fn, rename),
    };
    const target = writtenId(threaded);
    const root = target === null ? undefined : rootOf.get(target);
    if (root !== undefined) {
      rootOf.set(node.id, root);
      latest.set(root, node.id);
    }
    return threaded;
  });
  return { nodes: out, output: renameArg(output, rename) };
}
