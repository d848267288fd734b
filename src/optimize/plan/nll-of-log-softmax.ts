// `F.nll_loss(F.log_softmax(x, 1), target)` (nn.LogSoftmax then nn.NLLLoss, or x.log_softmax(dim=1)) is the
// `F.cross_entropy(x, target)` it spells: ATen's cross_entropy over class indices without label smoothing is
// exactly those two calls — log_softmax in x's dtype over the class dim (1, or 0 for one sample's scores), then
// nll_loss_nd with the same weight, ignore_index and reduction — so the fold is bit for bit, and the one
// cross_entropy node is what the reduction rule reads in one pass (the log-probabilities, as large as x, are
// never written). Where that rule does not take it (a class weight), spelled-out.ts writes the two calls back.
import type { Arg, GraphNode } from "../graph.ts";
import type { GraphView } from "./graph-view.ts";
import { onlyUser, plain } from "./written-norms.ts";

const isNone = (arg: Arg | undefined) => arg === undefined || (arg.t === "const" && arg.pytype === "none");

/** The cross_entropy node replacing `nll` and the log_softmax it reads, or null where the pair is not that. */
function crossEntropyOf(nll: GraphNode, view: GraphView): { node: GraphNode; removed: string } | null {
  const fn = nll.fn;
  const logProbs = fn?.input;
  if (!fn || nll.op !== "nll_loss" || !plain(nll) || logProbs?.t !== "node" || view.isGraphInput(logProbs.id))
    return null;
  const lsm = view.node(logProbs.id);
  const scores = lsm.fn?.input;
  const meta = view.tensorOf(scores);
  const targetMeta = view.tensorOf(fn.target);
  if (lsm.op !== "log_softmax" || !plain(lsm) || !scores || !meta || !targetMeta) return null;
  if (onlyUser(view, lsm.id)?.id !== nll.id || !isNone(lsm.fn?.dtype)) return null;
  if (targetMeta.dtype !== "int64" || !isNone(fn.size_average) || !isNone(fn.reduce)) return null;
  const rank = meta.shape.length;
  const dim = lsm.fn?.dim;
  const classDim = rank === 1 ? 0 : 1;
  if (rank === 0 || dim?.t !== "const" || typeof dim.value !== "number") return null;
  if ((dim.value < 0 ? dim.value + rank : dim.value) !== classDim) return null;
  const kwargs: Record<string, Arg> = {
    weight: fn.weight ?? { t: "const", pytype: "none", value: null },
    ignore_index: fn.ignore_index ?? { t: "const", pytype: "int", value: -100 },
    reduction: fn.reduction ?? { t: "const", pytype: "str", value: "mean" },
  };
  const target = fn.target;
  if (!target) return null;
  return {
    removed: lsm.id,
    node: {
      ...nll,
      kind: "call_function",
      target: "torch.nn.functional.cross_entropy",
      op: "cross_entropy",
      args: [scores, target],
      kwargs,
      fn: { input: scores, target, ...kwargs },
    },
  };
}

/** The graph's nodes with each nll_loss of a log_softmax over the class dim as one cross_entropy. */
export function foldNllOfLogSoftmax(nodes: GraphNode[], view: GraphView): GraphNode[] {
  if (!nodes.some((n) => n.op === "nll_loss")) return nodes;
  const removed = new Set<string>();
  const replaced = new Map<string, GraphNode>();
  for (const node of nodes) {
    const folded = crossEntropyOf(node, view);
    if (!folded) continue;
    removed.add(folded.removed);
    replaced.set(node.id, folded.node);
  }
  return nodes.filter((n) => !removed.has(n.id)).map((n) => replaced.get(n.id) ?? n);
}
