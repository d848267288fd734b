// Cumulative ops the codegen fuses (kf_scan.cuh): the combining operation of the scan. The dim it runs along
// is the call's `dim`; the pointwise ops before it (a mask multiplied in) and after it join its kernel.
import type { GraphNode } from "../graph.ts";
import type { GraphView } from "../plan/graph-view.ts";

export interface ScanSpec {
  /** kf_scan.cuh's operation. */
  op: "KfScanSum" | "KfScanProd";
}

export const SCANS: Record<string, ScanSpec> = {
  cumsum: { op: "KfScanSum" },
  cumprod: { op: "KfScanProd" },
};

/** The scanned dim of a scan call (its `dim`, made non-negative against its input's rank), or null when it is
 * not a constant int of that rank. */
export function scanDim(node: GraphNode, view: GraphView): number | null {
  const rank = view.tensorOf(node.fn?.input)?.shape.length;
  const dim = node.fn?.dim;
  if (rank === undefined || rank === 0 || dim?.t !== "const" || dim.pytype !== "int") return null;
  const d = Number(dim.value);
  if (!Number.isInteger(d) || d < -rank || d >= rank) return null;
  return d < 0 ? d + rank : d;
}
