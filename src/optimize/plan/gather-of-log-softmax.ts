// The log-probability of each row's target picked by a gather (`F.log_softmax(x, dim=1).gather(1,
// t.unsqueeze(1))`, the negative log-likelihood as LLM-written and tutorial code spells it, then `-....mean()`):
// it is minus the per-row cross entropy, `-F.cross_entropy(x, t, reduction="none").unsqueeze(1)`, bit for bit —
// ATen's cross_entropy is nll_loss of that same log_softmax, whose unweighted "none" output is -logp[i, t_i], and
// negation is exact. Left as written the log-probabilities, as large as x, were written by a normalize region and
// read back by PyTorch's gather; as a cross entropy the reduction rule reads x once and writes one value a row.
// Taken for rank-2 scores of a float dtype, the log_softmax over dim 1 read by the gather alone, and an index of
// int64 targets (N,) made (N, 1) by unsqueeze / view / reshape. A target no gather takes (out of range) raises in
// the reference and gives NaN in the kernel; the ignore_index is a value no valid index has.
import type { Arg, GraphNode, TensorMeta } from "../graph.ts";
import { FLOAT_DTYPES, type GraphView, intList } from "./graph-view.ts";
import { isConstNumber, onlyUser, plain } from "./written-norms.ts";

/** Within the class-index kernels' exact range (|ignore_index| < 2^24, rules.ts), below every gather index. */
const NO_CLASS = -(2 ** 24 - 1);

const isNone = (arg: Arg | undefined) => arg === undefined || (arg.t === "const" && arg.pytype === "none");

/** The int64 (N,) targets that `index` makes (N, 1), or null. */
function targetsOf(index: Arg | undefined, rows: number, view: GraphView): Arg | null {
  if (index?.t !== "node" || view.isGraphInput(index.id)) return null;
  const node = view.node(index.id);
  const input = node.fn?.input;
  const meta = view.tensorOf(input);
  if (!plain(node) || !input || meta?.dtype !== "int64" || meta.shape.join() !== `${rows}`) return null;
  if (view.outMeta(node)?.shape.join() !== `${rows},1`) return null;
  if (node.op === "unsqueeze") {
    const dim = node.fn?.dim;
    return isConstNumber(dim, 1) || isConstNumber(dim, -1) ? input : null;
  }
  if (node.op === "view" || node.op === "reshape") return input; // to (N, 1), whatever the spelling of its sizes
  return null;
}

function derived(
  id: string,
  op: string,
  target: string,
  fn: Record<string, Arg>,
  meta: TensorMeta,
): GraphNode {
  return {
    id,
    kind: "call_function",
    target,
    args: [fn.input as Arg],
    kwargs: Object.fromEntries(Object.entries(fn).filter(([k]) => k !== "input")),
    op,
    fn,
    out: { t: "tensor", meta },
    modeDependent: false,
    rng: false,
    inplace: false,
  };
}

/** The nodes replacing `gather` (the last under its id) and the log_softmax they drop, or null. */
function rewritten(
  gather: GraphNode,
  view: GraphView,
  taken: Set<string>,
): { nodes: GraphNode[]; removed: string } | null {
  const fn = gather.fn;
  const logProbs = fn?.input;
  const out = view.outMeta(gather);
  if (gather.op !== "gather" || !fn || !plain(gather) || logProbs?.t !== "node" || !out) return null;
  if (view.isGraphInput(logProbs.id) || !(isConstNumber(fn.dim, 1) || isConstNumber(fn.dim, -1))) return null;
  if (fn.sparse_grad && !(fn.sparse_grad.t === "const" && fn.sparse_grad.value === false)) return null;
  const lsm = view.node(logProbs.id);
  const scores = lsm.fn?.input;
  const meta = view.tensorOf(scores);
  if (lsm.op !== "log_softmax" || !plain(lsm) || !scores || !meta || !isNone(lsm.fn?.dtype)) return null;
  if (onlyUser(view, lsm.id)?.id !== gather.id || meta.shape.length !== 2 || !FLOAT_DTYPES.has(meta.dtype))
    return null;
  const dim = intList(lsm.fn?.dim);
  if (dim?.length !== 1 || (dim[0] !== 1 && dim[0] !== -1)) return null;
  const rows = meta.shape[0] ?? 0;
  const target = targetsOf(fn.index, rows, view);
  if (!target || out.shape.join() !== `${rows},1`) return null;
  const fresh = (base: string) => {
    let id = base;
    for (let i = 1; taken.has(id); i++) id = `${base}_${i}`;
    taken.add(id);
    return id;
  };
  const rowMeta: TensorMeta = { shape: [rows], dtype: meta.dtype, stride: [1] };
  const ce = fresh(`${gather.id}_nll`);
  const unsqueezed = fresh(`${gather.id}_nll_rows`);
  const none: Arg = { t: "const", pytype: "none", value: null };
  return {
    removed: lsm.id,
    nodes: [
      derived(
        ce,
        "cross_entropy",
        "torch.nn.functional.cross_entropy",
        {
          input: scores,
          target,
          weight: none,
          ignore_index: { t: "const", pytype: "int", value: NO_CLASS },
          reduction: { t: "const", pytype: "str", value: "none" },
          label_smoothing: { t: "const", pytype: "float", value: 0 },
        },
        rowMeta,
      ),
      derived(
        unsqueezed,
        "unsqueeze",
        "torch.unsqueeze",
        { input: { t: "node", id: ce }, dim: fn.dim as Arg },
        {
          ...out,
          dtype: meta.dtype,
        },
      ),
      // the negation last, so that a reduction after it takes it as its prologue
      derived(gather.id, "neg", "torch.neg", { input: { t: "node", id: unsqueezed } }, out),
    ],
  };
}

/** The graph's nodes with each gather of a row's target log-probability as minus its cross entropy. */
export function gathersOfLogSoftmaxAsCrossEntropy(nodes: GraphNode[], view: GraphView): GraphNode[] {
  if (!nodes.some((n) => n.op === "gather")) return nodes;
  const taken = new Set([...nodes.map((n) => n.id), ...view.graph.inputs.map((i) => i.name)]);
  const removed = new Set<string>();
  const replaced = new Map<string, GraphNode[]>();
  for (const node of nodes) {
    const match = rewritten(node, view, taken);
    if (!match || removed.has(match.removed)) continue;
    removed.add(match.removed);
    replaced.set(node.id, match.nodes);
  }
  if (!replaced.size) return nodes;
  return nodes.filter((n) => !removed.has(n.id)).flatMap((n) => replaced.get(n.id) ?? [n]);
}
