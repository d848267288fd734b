// Which storage an op writes and which values share it: in-place ops fuse as their out-of-place forms only
// where no one else sees the write, and a region must not read a value on both sides of a write it leaves to
// PyTorch (the region runs as one call, where its output was).
import type { Arg, GraphNode } from "../graph.ts";
import type { GraphView } from "./graph-view.ts";

/** Ops whose output may share its input's storage: an in-place write through one writes the other. */
export const ALIASING_OPS = new Set([
  ...["view", "reshape", "flatten", "unflatten", "permute", "transpose", "t", "contiguous", "unsqueeze"],
  ...["squeeze", "expand", "expand_as", "view_as", "reshape_as", "getitem", "slice", "select", "narrow"],
  ...["detach", "split", "chunk", "unbind", "movedim", "swapaxes", "diagonal", "as_strided", "to", "float"],
  ...["type_as", "identity", "broadcast_tensors", "unfold"],
  // An op capture has no name for (op "unknown") may return a view: x.moveaxis, torch.broadcast_to,
  // x.ravel(), torch.atleast_2d, x.adjoint() — an in-place write through one fused as its out-of-place form and
  // the readers of x after it missed the write. Likewise Tensor.unfold (a view; F.unfold's im2col copies).
  "unknown",
]);

/** Tensor attributes that are the tensor's storage or a view of it. */
const VIEWING_ATTRS = new Set(["data", "T", "mT", "H", "mH", "real", "imag"]);

/** Casts that return their input itself when its dtype is already the one asked for. */
const CASTS = new Set(["to", "float", "type_as"]);

/** Whether `node`'s output may share its input's storage: an aliasing op, except a cast that changes the dtype
 * (`x.half().float()`, fp16 `x.float()`: always a new tensor). */
export function mayAlias(node: GraphNode, view: GraphView): boolean {
  // A dropout that draws nothing (eval mode, or p = 0) returns its input itself: `y = self.drop(h); y.add_(1)`
  // in a model put in eval() writes h, which a reader of h after it sees.
  if (node.op === "dropout") return !node.rng;
  // A tensor's attributes that view it (`h.data`, `h.T`, `h.mT`): `h.T.add_(1)` writes h. (`.values` of
  // max(dim)'s pair is a tensor of its own.)
  if (node.op === "getattr") {
    const name = node.fn?.name;
    return name?.t === "const" && typeof name.value === "string" && VIEWING_ATTRS.has(name.value);
  }
  if (!ALIASING_OPS.has(node.op)) return false;
  if (!CASTS.has(node.op)) return true;
  const from = view.tensorOf(node.fn?.input ?? node.args[0])?.dtype;
  const to = view.outMeta(node)?.dtype;
  return from === undefined || to === undefined || from === to;
}

/** The tensor an in-place op writes: its `out=` tensor (torch.add(a, b, out=c)), else its input. */
export function written(node: GraphNode): Arg | undefined {
  const out = node.kwargs.out;
  return out?.t === "node" ? out : (node.fn?.input ?? node.args[0]);
}

/** The value whose storage `arg` is (through views and in-place ops), by id: a node, an input, a parameter. */
export function storageOf(arg: Arg | undefined, view: GraphView): string | null {
  let at = arg;
  for (;;) {
    if (at?.t === "param") return `param:${at.path}`;
    if (at?.t !== "node") return null;
    if (view.isGraphInput(at.id)) return at.id;
    const node = view.node(at.id);
    if (node.inplace) at = written(node);
    else if (mayAlias(node, view)) at = node.fn?.input ?? node.args[0];
    else return at.id;
  }
}

function readArgs(node: GraphNode): Arg[] {
  const out: Arg[] = [];
  const walk = (arg: Arg) => {
    if (arg.t === "list") arg.items.forEach(walk);
    else if (arg.t === "node" || arg.t === "param") out.push(arg);
  };
  [...node.args, ...Object.values(node.kwargs)].forEach(walk);
  return out;
}

/** The in-place op outside `members` that writes, after one member reads it and before `output` (where the
 * region's call runs), a storage a member reads; null when there is none. */
export function writeInside(
  view: GraphView,
  members: string[],
  output: string,
  writers: string[],
): string | null {
  const inside = new Set(members);
  const end = view.index.get(output) ?? 0;
  for (const w of writers) {
    const at = view.index.get(w) ?? 0;
    if (inside.has(w) || at >= end) continue;
    const target = storageOf(written(view.node(w)), view);
    if (target === null) continue;
    const readBefore = members.some(
      (id) =>
        (view.index.get(id) ?? 0) < at &&
        readArgs(view.node(id)).some((arg) => storageOf(arg, view) === target),
    );
    if (readBefore) return w;
  }
  return null;
}
