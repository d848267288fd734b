// The dims a reduction, softmax or normalisation is given as a value computed from shapes (`dim=x.dim() - 1`,
// `sum(dim=x.ndim - 1)`): the rules plan on constant dims, so such a call stayed PyTorch's. Each becomes the
// int it was at the captured shapes, marked with the node that computed it (`read`); a region planned on it
// checks that node still gives the same int (region.ts), and its fallback is the call as captured.
import type { Arg, GraphNode } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { REDUCTIONS } from "../ops/reduce.ts";
import type { GraphView } from "./graph-view.ts";

/** The dim, or each dim of a list, as the int a node read from shapes; null where any is neither. */
function resolved(arg: Arg, view: GraphView): Arg | null {
  if (arg.t === "list") {
    const items = arg.items.map((item) => (item.t === "const" ? item : resolved(item, view)));
    return items.every((item) => item !== null) ? { ...arg, items: items as Arg[] } : null;
  }
  const value = arg.t === "node" ? view.sizeRead(arg) : null;
  if (typeof value !== "number" || arg.t !== "node") return null;
  return { t: "const", pytype: "int", value, read: arg.id };
}

/** The nodes with each reduction's or normalisation's dims read from shapes as the ints captured. */
export function resolveSizeReads(nodes: GraphNode[], view: GraphView): GraphNode[] {
  return nodes.map((node) => {
    const dim = node.fn?.dim;
    if (!dim || !(node.op in REDUCTIONS || node.op in NORMALIZATIONS)) return node;
    if (dim.t !== "node" && !(dim.t === "list" && dim.items.some((item) => item.t === "node"))) return node;
    const ints = resolved(dim, view);
    return ints ? { ...node, fn: { ...node.fn, dim: ints } } : node;
  });
}
