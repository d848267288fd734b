// A reduction broadcast back over the rows it reduced, into a pointwise op that reads those rows again:
// `x - x.mean(-1, keepdim=True)`, `e / e.sum(-1, keepdim=True)`, `x / x.amax(dim=(2, 3), keepdim=True)`,
// `x / x.norm(dim=1, keepdim=True)`, `(x - x.mean(0)) ...` (a leading reduced dim broadcasts without keepdim),
// `m = x.max(1).values; x - m[:, None]`. Left as written it plans as a reduction region (the statistic written
// out) and a pointwise region that reads x again: two kernels, x read from memory twice. It is a normalisation —
// statistics over some dims, then a per-element apply — so the reduction and the views that broadcast it back
// become one node of the `reduce_broadcast_*` normalisations (ops/normalize.ts): its value is the reduction's
// statistic at every element of x (x's shape), and the pointwise op reading it joins its region as the apply.
//
// The node keeps the written ops (`written`, as written-layernorm.ts does): wherever PyTorch runs it, it is the
// reduction as the reference computed it, at the reduced shape, which its readers broadcast as the reference's
// did (a region reading it broadcasts it at run time); the node's shape is the input's, where the kernel applies
// it. Pointwise ops of the statistic and numbers alone on the way (`s / n`, `amax + 1e-6`, `sigmoid(mean)`)
// commute with the views: they stay nodes, moved after the new one and reading it, so they join the region's
// apply, and PyTorch runs them on the reduced values (bit for bit the reference's: an expanded operand would take
// CPU kernels' other, non-vectorised path).
//
// Taken only where the normalisation rule takes it and its region gains: a float input of 16 or 32 bits, the
// result in the input's dtype (no dtype=), a single-operand reduction whose accumulator a statistic stands for
// (sums and means, p-norms, max / min, var / std), each op of the chain read by the next alone, and the broadcast
// value read by one pointwise op, of x's shape, that reads x's rows (x, the same ops of x computed again, or what x
// is computed from: the apply reads what the kernel loads), and no other statistic folded into the same chain.
import type { Arg, GraphNode, TensorMeta } from "../graph.ts";
import { broadcastOp, NORMALIZATIONS } from "../ops/normalize.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import { accumulatorOf, REDUCTIONS } from "../ops/reduce.ts";
import { mapArgs } from "./expand-reads.ts";
import { type GraphView, paramReader } from "./graph-view.ts";
import { pairProjection, reductionDims } from "./rules.ts";
import { nodeArg, onlyUser, plain, sameArg } from "./written-norms.ts";

const FLOATS = new Set(["float32", "float16", "bfloat16"]);

/** Views that only add or drop size-1 dims when they turn the reduction's result back into its keepdim shape. */
const UNIT_VIEWS = new Set(["view", "reshape", "unsqueeze", "getitem"]);

/** `m[:, None]`, `m[..., None]`: an index of full slices, None and Ellipsis only (no element is picked). */
function insertsDimsOnly(index: Arg | undefined): boolean {
  const items = index?.t === "list" ? index.items : index ? [index] : [];
  const none = (a: Arg) => a.t === "const" && a.pytype === "none";
  return (
    items.length > 0 &&
    items.every(
      (a) =>
        none(a) ||
        (a.t === "const" && a.pytype === "ellipsis") ||
        (a.t === "slice" && none(a.start) && none(a.stop) && none(a.step)),
    )
  );
}

/** The reduction's statistic op and its reduced dims, or null where no statistic stands for it. */
function statisticOf(view: GraphView, reduction: GraphNode): { op: string; dims: number[] } | null {
  const spec = REDUCTIONS[reduction.op];
  const fn = reduction.fn;
  if (!spec || !fn || !plain(reduction) || spec.operands.length !== 1) return null;
  if (spec.index || spec.finish || spec.reductions || spec.absent || spec.integerOperands) return null;
  if (spec.valuesOfPair && (spec.secondOfPair === "amax" || pairProjection(reduction, view)?.index !== 0))
    return null;
  const dtype = fn.dtype;
  if (dtype && !(dtype.t === "const" && dtype.pytype === "none")) return null;
  const reader = paramReader(fn, () => "sc.v[0]");
  const acc = accumulatorOf(spec, reader);
  const op = acc ? broadcastOp(acc) : null;
  const dims = reductionDims(reduction, view);
  if (!op || !dims || !NORMALIZATIONS[op]) return null;
  if (spec.pro(["x"], reader) === null || spec.epi(reader) === null) return null;
  return { op, dims };
}

/** The keepdim shape of a reduction of `shape` over `dims`. */
function keptShape(shape: number[], dims: number[]): number[] {
  return shape.map((size, d) => (dims.includes(d) ? 1 : size));
}

/** Whether `shape`, aligned to the right against a rank-`rank` tensor as broadcasting does, is `kept`. */
function broadcastsAs(shape: number[], kept: number[]): boolean {
  if (shape.length > kept.length) return false;
  const padded = [...Array(kept.length - shape.length).fill(1), ...shape];
  return padded.every((size, d) => size === kept[d]);
}

interface Match {
  reduction: GraphNode;
  /** The views after the reduction (its `[0]` for max(dim)'s values first), in order: the node absorbs them. */
  chain: GraphNode[];
  /** Pointwise ops of the statistic and numbers alone along the chain, in order: they read the node after it. */
  statOps: GraphNode[];
  /** The chain's last node (or the reduction): where the node goes. */
  last: GraphNode;
  /** The node the reading pointwise op reads (the last of the chain or of statOps). */
  read: GraphNode;
  /** The pointwise op that reads the statistic back with x. */
  reader: GraphNode;
  op: string;
  dims: number[];
  input: Arg;
  inputMeta: TensorMeta;
}

/** A pointwise op whose only tensor operand is `from` (the others numbers): it commutes with unit views. */
function isStatOp(view: GraphView, node: GraphNode, from: string): boolean {
  const spec = POINTWISE[node.op];
  if (!spec || spec.channel || !plain(node) || !FLOATS.has(view.outMeta(node)?.dtype ?? "")) return false;
  let reads = 0;
  for (const key of spec.operands) {
    const arg = node.fn?.[key];
    if (arg?.t === "node" && arg.id === from) reads++;
    else if (view.tensorOf(arg) && !view.isNumberValue(arg)) return false;
  }
  return reads > 0;
}

/** Whether `a` and `b` hold the same values: the same argument, or the same deterministic pointwise op of the
 * same operands (`x.abs()` written twice, a widening cast copied for each reader by recompute-broadcasts.ts). */
function sameValue(view: GraphView, a: Arg | undefined, b: Arg | undefined, depth = 4): boolean {
  if (sameArg(a, b)) return true;
  if (a?.t !== "node" || b?.t !== "node" || depth === 0) return false;
  if (view.isGraphInput(a.id) || view.isGraphInput(b.id)) return false;
  const [na, nb] = [view.node(a.id), view.node(b.id)];
  if (na.op !== nb.op || !POINTWISE[na.op] || !plain(na) || !plain(nb) || !na.fn || !nb.fn) return false;
  if (JSON.stringify(view.outMeta(na)) !== JSON.stringify(view.outMeta(nb))) return false;
  const keys = Object.keys(na.fn);
  if (keys.length !== Object.keys(nb.fn).length) return false;
  return keys.every((key) => {
    const [x, y] = [na.fn?.[key], nb.fn?.[key]];
    if (x?.t === "node" || y?.t === "node") return sameValue(view, x, y, depth - 1);
    return JSON.stringify(x) === JSON.stringify(y);
  });
}

/** `arg` and the tensors it is computed from through pointwise ops, a few ops up: values of the same rows. The
 * reader reads the rows the kernel loads when it reads one of these of the reduction's input (`x / x.abs().amax()`
 * reads x, whose abs is reduced; `sigmoid(y * 2) + y.mean()` reads y's product). */
function pointwiseAncestry(view: GraphView, arg: Arg | undefined, depth = 3): Arg[] {
  if (!arg || !view.tensorOf(arg)) return [];
  if (arg.t !== "node" || view.isGraphInput(arg.id) || depth === 0) return [arg];
  const node = view.node(arg.id);
  const spec = POINTWISE[node.op];
  if (!spec || !plain(node)) return [arg];
  const from = spec.operands.flatMap((key) => pointwiseAncestry(view, node.fn?.[key], depth - 1));
  return [arg, ...from];
}

/** Whether pointwise op `reader` reads `other`'s value through pointwise ops (a few up). */
function readsThrough(view: GraphView, reader: GraphNode, other: GraphNode): boolean {
  const spec = POINTWISE[reader.op];
  const operands = spec ? spec.operands.map((key) => reader.fn?.[key]) : [];
  return operands.some((arg) =>
    pointwiseAncestry(view, arg).some((a) => a.t === "node" && a.id === other.id),
  );
}

// Many rows longer than the normalize kernels hold in registers at 32 values a thread stay a reduction and a
// pointwise region: measured on 8192 rows of 16385 (l2_normalize_rows), the folded region ran at 0.81x (scalar block
// per row) and 0.93x (the long held rows) of PyTorch's two kernels, while the two regions ran 1.085x
// (bench/optimize/NOTES.md). Few long rows (a whole-tensor norm: frobenius_normalize, 1.28x folded) take the split
// statistics instead, and fold.
const HELD_ROW_MAX = 16384;
const ROWS_FILLING_THE_GPU = 128; // about one row per multiprocessor (132 on an H100 / H200)

function longRowsFillingTheGpu(shape: number[], dims: number[]): boolean {
  const reduced = new Set(dims.map((d) => (d < 0 ? d + shape.length : d)));
  const innermost = reduced.size > 0 && [...reduced].every((d) => d >= shape.length - reduced.size);
  const count = (keep: boolean) => shape.reduce((n, size, d) => (reduced.has(d) === keep ? n : n * size), 1);
  return innermost && count(false) > HELD_ROW_MAX && count(true) >= ROWS_FILLING_THE_GPU;
}

function match(view: GraphView, reduction: GraphNode): Match | null {
  const stat = statisticOf(view, reduction);
  const input = reduction.fn?.input;
  const inputMeta = view.tensorOf(input);
  if (!stat || !input || !inputMeta || !FLOATS.has(inputMeta.dtype)) return null;
  if (longRowsFillingTheGpu(inputMeta.shape, stat.dims)) return null;
  const kept = keptShape(inputMeta.shape, stat.dims);
  const reducedMeta =
    view.outMeta(reduction) ?? view.outMeta(view.node(pairProjection(reduction, view)?.id ?? ""));
  if (reducedMeta?.dtype !== inputMeta.dtype) return null;
  const chain: GraphNode[] = [];
  const statOps: GraphNode[] = [];
  let last = reduction;
  let read = reduction;
  const projection = REDUCTIONS[reduction.op]?.valuesOfPair ? pairProjection(reduction, view) : null;
  if (projection) {
    last = read = view.node(projection.id);
    chain.push(last);
  }
  // Unit views and pointwise ops of the statistic, each read by the next alone, until the op reading x.
  let reader: GraphNode | null = null;
  for (;;) {
    const meta = view.outMeta(read);
    const next = onlyUser(view, read.id);
    if (!meta || !next) return null;
    const isView =
      UNIT_VIEWS.has(next.op) &&
      plain(next) &&
      next.args[0]?.t === "node" &&
      next.args[0].id === read.id &&
      (next.op !== "getitem" || insertsDimsOnly(next.args[1]));
    const count = (shape: number[] | undefined) => shape?.reduce((a, b) => a * b, 1);
    if (isView && count(view.outMeta(next)?.shape) === count(meta.shape)) {
      chain.push(next);
      last = read = next;
    } else if (isStatOp(view, next, read.id) && view.outMeta(next)?.shape.join() === meta.shape.join()) {
      statOps.push(next);
      read = next;
    } else {
      reader = next;
      break;
    }
  }
  const readMeta = view.outMeta(read);
  if (!readMeta || !broadcastsAs(readMeta.shape, kept)) return null;
  // The value read by one pointwise op of x's shape that reads x (or the same values computed again).
  // An in-place reader (`y.sub_(y.mean(...))`, threaded by inplace-threads.ts) writes its own input, never the
  // statistic (a smaller tensor cannot take the broadcast result in place).
  const spec = POINTWISE[reader.op];
  if (!spec || spec.channel || reader.rng || reader.modeDependent || !reader.fn) return null;
  if (reader.inplace && nodeArg(reader.fn.input) === read.id) return null;
  if (view.outMeta(reader)?.shape.join() !== inputMeta.shape.join()) return null;
  const operands = spec.operands.map((key) => reader.fn?.[key]);
  const rows = pointwiseAncestry(view, input);
  if (
    !operands.some((arg) => pointwiseAncestry(view, arg).some((a) => rows.some((r) => sameValue(view, a, r))))
  )
    return null;
  return { reduction, chain, statOps, last, read, reader, op: stat.op, dims: stat.dims, input, inputMeta };
}

/** Row-major strides of `shape` with 0 along `dims`: the expanded statistic's layout. */
function expandedStrides(shape: number[], dims: number[]): number[] {
  const strides: number[] = [];
  let step = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = dims.includes(d) ? 0 : step;
    if (!dims.includes(d)) step *= shape[d] ?? 1;
  }
  return strides;
}

/** An op's output at the input's shape, as broadcast from the statistic. */
function expandedOut(m: Match, dtype: string): GraphNode["out"] {
  const shape = m.inputMeta.shape;
  return { t: "tensor", meta: { shape, dtype, stride: expandedStrides(shape, m.dims) } };
}

/** The views as PyTorch runs them in the node: each reading the view (or reduction) before it, where the reference
 * had an op of the statistic between them (`(s / c).unsqueeze(1)`: that op runs after the node). */
function writtenViews(m: Match): GraphNode[] {
  let previous = m.reduction.id;
  return m.chain.map((node) => {
    const wired = m.statOps.reduce((n, op) => mapArgs(n, op.id, { t: "node", id: previous }), node);
    previous = node.id;
    return wired;
  });
}

function broadcastNode(m: Match): GraphNode {
  const out = expandedOut(m, m.inputMeta.dtype);
  const dims: Arg = {
    t: "list",
    kind: "list",
    items: m.dims.map((d) => ({ t: "const", pytype: "int", value: d })),
  };
  // The views' own arguments (`m.view(b, c, 1, 1)`'s sizes) are read where the node runs: its arguments hold them
  // (what it reads, and what a region's guards on attributes and size reads look at).
  const viewArgs = m.chain.flatMap((n) => [...n.args.slice(1), ...Object.values(n.kwargs)]);
  return {
    id: m.last.id,
    kind: m.reduction.kind,
    target: m.reduction.target,
    args: [...m.reduction.args, ...viewArgs],
    kwargs: m.reduction.kwargs,
    op: m.op,
    fn: {
      ...m.reduction.fn,
      input: m.input,
      reduction: { t: "const", pytype: "str", value: m.reduction.op },
      dims,
      views: { t: "list", kind: "list", items: viewArgs },
    },
    out,
    modeDependent: false,
    rng: false,
    inplace: false,
    written: [m.reduction, ...writtenViews(m)],
  };
}

/** The graph's nodes with each reduction that a pointwise op reads back over its rows as one `reduce_broadcast_*`
 * normalisation node (under the id of the value that op read), which keeps the written nodes for PyTorch to run. */
export function foldReducedBroadcasts(nodes: GraphNode[], view: GraphView): GraphNode[] {
  const removed = new Set<string>();
  const replaced = new Map<string, GraphNode[]>();
  const rewire = new Map<string, [string, string]>();
  const readers: GraphNode[] = [];
  for (const node of nodes) {
    const m = match(view, node);
    if (!m) continue;
    const ids = [m.reduction.id, ...m.chain.map((n) => n.id), ...m.statOps.map((n) => n.id)];
    if (ids.some((id) => removed.has(id) || replaced.has(id))) continue;
    // Two statistics read in one pointwise chain (`(x - x.mean(0)) / x.std(0)`) would both want it as their apply:
    // one region takes it, the other's would be left without it. The first is taken; the second stays a reduction.
    if (readers.some((r) => readsThrough(view, m.reader, r) || readsThrough(view, r, m.reader))) continue;
    // The written nodes run where the last view was, the ops of the statistic after them: nothing between the
    // chain's first node and its last may write in place.
    const at = ids.map((id) => view.index.get(id) ?? -1);
    if (nodes.slice(Math.min(...at), Math.max(...at) + 1).some((n) => n.inplace)) continue;
    readers.push(m.reader);
    for (const id of ids) removed.add(id);
    // Each op of the statistic reads the value before it (the new node for the first: it absorbed the views the
    // op read or was read through) and is computed at the input's shape; the reader reads the last of them.
    const chainIds = [m.reduction.id, ...m.chain.map((n) => n.id)];
    const moved = m.statOps.map((op, k) => {
      const before = k === 0 ? m.last.id : (m.statOps[k - 1]?.id ?? m.last.id);
      const rewired = chainIds.reduce(
        (n, id) => (id === before ? n : mapArgs(n, id, { t: "node", id: before })),
        op,
      );
      return { ...rewired, out: expandedOut(m, view.outMeta(op)?.dtype ?? m.inputMeta.dtype) };
    });
    replaced.set(m.last.id, [broadcastNode(m), ...moved]);
    const final = m.statOps.at(-1);
    if (final && m.read.id === m.last.id) rewire.set(m.reader.id, [m.last.id, final.id]);
  }
  if (!replaced.size) return nodes;
  return nodes.flatMap((n) => {
    const wired = rewire.get(n.id);
    const node = wired ? mapArgs(n, wired[0], { t: "node", id: wired[1] }) : n;
    return replaced.get(n.id) ?? (removed.has(n.id) ? [] : [node]);
  });
}
