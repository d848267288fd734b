// Casts to a dtype read from a tensor at run time: `h.to(x.dtype)`, `h.to(dtype=dt)` with `dt = x.dtype`, and
// `h.type_as(x)` (LLaMA's RMSNorm, Hugging Face's `hidden_states.to(input_dtype)`). The capture binds the dtype
// as a node, so the cast rule declined it and split the region there. The captured graph knows the dtype the
// cast produced (its output's meta); each becomes `to(dtype=<that dtype>)` with `dtype_guard` naming where the
// dtype was read, and the region taking it runs its kernel only while that read still gives the same dtype
// (region.ts: `x.dtype == torch.bfloat16` beside the operand checks). The fallback is the call as captured.
import type { Arg, GraphNode } from "../graph.ts";
import type { GraphView } from "./graph-view.ts";

const CAST_DTYPES = new Set(["float32", "float16", "bfloat16"]);

/** The node a dtype comes from: a `.dtype` read (or any node whose value is a dtype), or null. */
function dtypeSource(arg: Arg | undefined, view: GraphView): Arg | null {
  if (arg?.t === "list" && arg.items.length === 1) return dtypeSource(arg.items[0], view);
  if (arg?.t !== "node" || view.isGraphInput(arg.id)) return null;
  const out = view.node(arg.id).out;
  return out.t === "value" && out.pytype === "dtype" ? arg : null;
}

function isAbsent(arg: Arg | undefined): boolean {
  return arg === undefined || (arg.t === "const" && arg.pytype === "none");
}

/** The nodes with each cast to a run-time dtype read as a cast to the dtype captured, guarded by that read. */
export function resolveDtypeReads(nodes: GraphNode[], view: GraphView): GraphNode[] {
  return nodes.map((node) => {
    const fn = node.fn;
    const out = view.outMeta(node);
    if (!fn || !out || !CAST_DTYPES.has(out.dtype) || node.inplace) return node;
    let source: Arg | null = null;
    if (node.op === "to" && isAbsent(fn.device)) {
      const fromArgs = fn.dtype === undefined ? dtypeSource(fn.args, view) : null;
      source = fromArgs ?? (fn.args === undefined ? dtypeSource(fn.dtype, view) : null);
    } else if (node.op === "type_as") {
      const other = view.tensorOf(fn.other);
      source = other?.dtype === out.dtype && fn.other ? fn.other : null;
    }
    if (!source || !fn.input) return node;
    const dtype: Arg = { t: "const", pytype: "dtype", value: out.dtype };
    return { ...node, op: "to", fn: { input: fn.input, dtype, dtype_guard: source } };
  });
}
