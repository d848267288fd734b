// Graph rewrites before planning: equivalences that free a value from a use that reads none of its data, so
// the value can stay inside a fused region (the region's method computes it; forward never sees it); in-place
// statements threaded through their results (inplace-threads.ts); nll_loss of a log_softmax as the cross_entropy it
// is (nll-of-log-softmax.ts), and a gather of each row's target from a log_softmax minus its cross entropy
// (gather-of-log-softmax.ts); glu and prelu spelled out as the ops the
// rules take (spelled-out.ts); written-out ops folded into the one op they spell (written-norms.ts,
// written-logsumexp.ts) and each written softmax as one softmax (written-softmax.ts); a reduction over size-1 dims it keeps as the pointwise identity it is (unit-reductions.ts);
// a written LayerNorm as one layer_norm op that keeps its written ops for PyTorch to run
// (written-layernorm.ts: F.layer_norm is not bit-equal to them); casts to a dtype read at run time as casts to the dtype captured, guarded
// (dtype-reads.ts); a pointwise op of one permuted tensor applied before the permute (permute-hoist.ts), and an
// arithmetic op of a reshaped value and an operand along its kept dims before the reshape (reshape-hoist.ts); a
// pointwise op reshaped only for reductions applied after the reshape (view-sink.ts); a per-channel arithmetic op
// permuted only for pointwise ops applied after the permute (permute-sink.ts); a broadcasting pointwise op read
// by several pointwise ops copied for each (recompute-broadcasts.ts); max or average pools in a row over tiling windows as
// one pool (pool-compose.ts); a reduction broadcast back into a pointwise op that reads its rows as one
// normalisation (reduce-broadcast.ts).
//
// A device read (`torch.tensor(0.0, device=x.device)` after `x = x + 1`): every op below leaves its result on
// its input tensor's device, so the read moves to that input, and on up the chain to a value forward has
// anyway (a graph input, or the first value no rule here sees through).
import type { Arg, Graph, GraphNode } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import { REDUCTIONS } from "../ops/reduce.ts";
import { resolveDtypeReads } from "./dtype-reads.ts";
import { dropPointwiseExpands } from "./expand-reads.ts";
import { gathersOfLogSoftmaxAsCrossEntropy } from "./gather-of-log-softmax.ts";
import { GraphView } from "./graph-view.ts";
import { dropIdentities, dropUnreadProjections } from "./identity-reads.ts";
import { threadInplaceWrites } from "./inplace-threads.ts";
import { foldNllOfLogSoftmax } from "./nll-of-log-softmax.ts";
import { hoistPointwiseOverPermutes } from "./permute-hoist.ts";
import { sinkArithmeticBelowPermutes } from "./permute-sink.ts";
import { composeTilingPools } from "./pool-compose.ts";
import { recomputeBroadcasts } from "./recompute-broadcasts.ts";
import { foldReducedBroadcasts } from "./reduce-broadcast.ts";
import { hoistArithmeticAboveReshapes } from "./reshape-hoist.ts";
import { resolveSizeReads } from "./size-reads.ts";
import { spellOutOps } from "./spelled-out.ts";
import { unitReductionsAsPointwise } from "./unit-reductions.ts";
import { sinkPointwiseBelowReshapes } from "./view-sink.ts";
import { foldWrittenLayerNorms } from "./written-layernorm.ts";
import { foldWrittenLogSumExps } from "./written-logsumexp.ts";
import { foldWrittenRmsNorms, plain } from "./written-norms.ts";
import { foldWrittenSoftmaxes } from "./written-softmax.ts";

/** Ops whose result is on the device of their `input` tensor (never a device move such as `.to()`). */
const SAME_DEVICE = new Set([
  ...Object.keys(POINTWISE).filter((op) => op !== "to"),
  ...Object.keys(REDUCTIONS),
  ...Object.keys(NORMALIZATIONS),
  ...["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "linear"],
  ...["matmul", "mm", "bmm", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d"],
  ...["avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"],
  ...["view", "reshape", "flatten", "permute", "transpose", "unsqueeze", "squeeze", "contiguous", "expand"],
]);

/** A read of a tensor's shape (`y.shape`, `y.size(2)`, `y.dim()`, `y.ndim`): no read of its data. */
function isShapeRead(node: GraphNode): boolean {
  const name = node.fn?.name;
  if (node.op === "size" || node.op === "dim") return true;
  return node.op === "getattr" && name?.t === "const" && (name.value === "shape" || name.value === "ndim");
}

/** The value a shape read may read instead of `arg`: up through elementwise ops of one tensor operand (`relu(y)`,
 * `y * 2`, `y.float()`), whose result has that operand's shape whatever it is. A shape read of a value made only
 * for it (TextCNN's `F.max_pool1d(h, h.size(2))` of `h = relu(conv(x))`) was a second reader that kept the
 * value out of the region reading it (a pool's prologue). */
function shapeSource(arg: Arg, view: GraphView): Arg {
  let source = arg;
  while (source.t === "node" && !view.isGraphInput(source.id)) {
    const node = view.node(source.id);
    const input = node.fn?.input;
    if (!input || !plain(node) || POINTWISE[node.op] === undefined || !view.outMeta(node)) break;
    const others = Object.entries(node.fn ?? {}).filter(
      ([k, a]) => k !== "input" && view.tensorOf(a) !== null,
    );
    const from = view.tensorOf(input)?.shape;
    const to = view.outMeta(node)?.shape;
    if (others.length || !from || !to || from.length !== to.length || from.some((d, i) => d !== to[i])) break;
    source = input;
  }
  return source;
}

function isDeviceRead(node: GraphNode): boolean {
  const name = node.fn?.name;
  return node.op === "getattr" && name?.t === "const" && name.value === "device";
}

/** The tensor whose device `arg`'s value is on, as early in the graph as the rules above see. */
function deviceSource(arg: Arg, view: GraphView): Arg {
  let source = arg;
  while (source.t === "node" && !view.isGraphInput(source.id)) {
    const node = view.node(source.id);
    const input = node.fn?.input;
    const meta = view.tensorOf(input);
    // A 0-d operand may be a CPU scalar beside tensors on the GPU: only a tensor with dims tells the device.
    if (!SAME_DEVICE.has(node.op) || !input || !meta || meta.shape.length === 0) break;
    source = input;
  }
  return source;
}

/** The graph with nn.Identity's readers reading its input (identity-reads.ts), later reads of an in-place-written value reading the write's result (inplace-threads.ts),
 * glu and prelu spelled out (spelled-out.ts), runs of tiling max pools as one (pool-compose.ts), each written LayerNorm as one layer_norm op
 * running its written ops where PyTorch runs it (written-layernorm.ts; before the RMSNorm fold, which would take its `xc * rsqrt(mean(xc * xc) + eps)`), each written RMSNorm as one rms_norm op (written-norms.ts)
 * and each written logsumexp as one logsumexp (written-logsumexp.ts),
 * and each device read moved to the earliest tensor known to share the device. */
export function canonicalGraph(captured: Graph): Graph {
  if (captured.captured === "none") return captured;
  const direct = { ...captured, ...dropIdentities(dropUnreadProjections(captured)) };
  const threaded = { ...direct, ...threadInplaceWrites(new GraphView(direct)) };
  const paired = { ...threaded, nodes: foldNllOfLogSoftmax(threaded.nodes, new GraphView(threaded)) };
  const gathered = {
    ...paired,
    nodes: gathersOfLogSoftmaxAsCrossEntropy(paired.nodes, new GraphView(paired)),
  };
  const spelled = { ...gathered, nodes: spellOutOps(gathered.nodes, new GraphView(gathered)) };
  const pooled = { ...spelled, nodes: composeTilingPools(spelled.nodes, new GraphView(spelled)) };
  const layered = { ...pooled, nodes: foldWrittenLayerNorms(pooled.nodes, new GraphView(pooled)) };
  const normed = { ...layered, nodes: foldWrittenRmsNorms(layered.nodes, new GraphView(layered)) };
  const folded = { ...normed, nodes: foldWrittenLogSumExps(normed.nodes, new GraphView(normed)) };
  const softmaxed = { ...folded, nodes: foldWrittenSoftmaxes(folded.nodes, new GraphView(folded)) };
  const unit = { ...softmaxed, nodes: unitReductionsAsPointwise(softmaxed.nodes, new GraphView(softmaxed)) };
  const typed = { ...unit, nodes: resolveDtypeReads(unit.nodes, new GraphView(unit)) };
  const expanded = { ...typed, nodes: dropPointwiseExpands(typed.nodes, new GraphView(typed)) };
  const hoisted = { ...expanded, nodes: hoistPointwiseOverPermutes(expanded.nodes, new GraphView(expanded)) };
  const lifted = { ...hoisted, nodes: hoistArithmeticAboveReshapes(hoisted.nodes, new GraphView(hoisted)) };
  const copied = { ...lifted, nodes: recomputeBroadcasts(lifted.nodes, new GraphView(lifted)) };
  const reshaped = { ...copied, nodes: sinkPointwiseBelowReshapes(copied.nodes, new GraphView(copied)) };
  const sunk = { ...reshaped, nodes: sinkArithmeticBelowPermutes(reshaped.nodes, new GraphView(reshaped)) };
  const sized = { ...sunk, nodes: resolveSizeReads(sunk.nodes, new GraphView(sunk)) };
  const graph = { ...sized, nodes: foldReducedBroadcasts(sized.nodes, new GraphView(sized)) };
  const view = new GraphView(graph);
  const nodes = graph.nodes.map((node) => {
    const input = node.fn?.input;
    if (!input || !(isDeviceRead(node) || isShapeRead(node))) return node;
    const source = isDeviceRead(node) ? deviceSource(input, view) : shapeSource(input, view);
    if (source === input) return node;
    return { ...node, args: [source, ...node.args.slice(1)], fn: { ...node.fn, input: source } };
  });
  return { ...graph, nodes };
}
