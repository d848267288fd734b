// Which forwards a CUDA graph can stand for (graph_replay.py.txt is the runtime the emitted file carries), and
// what a graph's key must hold beyond the call's own arguments.
import type { Arg, Graph } from "../graph.ts";
import { storageOf, written } from "../plan/aliasing.ts";
import { GraphView } from "../plan/graph-view.ts";
import { forwardCallArgs, OPERATOR_MODULE } from "./python-expr.ts";

/** Whether the file carries CUDA-graph replay of its forward (graph_replay.py.txt): "none", not at all; "off",
 * present and switched off (the optimizer times it both ways); "on", the forward replays a graph. */
export type GraphReplay = "none" | "off" | "on";

/** Module types, and callables by name prefix, whose calls are pure functions of tensors: a graph replaying them
 * does what the calls do. A module of the problem's own (or a function it defines and fx kept whole) may keep
 * Python state that a replay would skip. */
const REPLAYABLE_CALLS = ["torch.", "operator.", `${OPERATOR_MODULE}.`, "math."];
/** Builtins fx records as calls that read no tensor's values (`B, C, H, W = x.shape` is getattr). */
const REPLAYABLE_BUILTINS = new Set(["getattr", "len"]);

/** Calls that wait on the GPU for a value or a size (a host sync): a graph cannot hold them, and a capture that
 * fails part-way leaves torch's CUDA generator in capture mode for the rest of the process (device run 107). */
const HOST_SYNCS = new Set([
  "item",
  "_local_scalar_dense",
  "tolist",
  "cpu",
  "numpy",
  "nonzero",
  "nonzero_static",
  "unique",
  "unique_consecutive",
  "masked_select",
  "argwhere",
  "bincount",
  "repeat_interleave",
  "equal",
  "allclose",
]);

/** Whether a node synchronises with the host: a HOST_SYNCS op, indexing with a boolean mask (its size is the
 * mask's count), or BatchNorm without momentum in training (it reads its batch counter on the host). */
function syncsWithHost(graph: Graph, node: Graph["nodes"][number]): boolean {
  // torch.nn.functional.x / torch.x: the last part; an exported graph's torch.ops.aten.x.overload: the op's name.
  const parts = node.target.split(".");
  const name =
    node.kind !== "call_function"
      ? node.target
      : parts[1] === "ops"
        ? (parts[3] ?? "")
        : (parts.at(-1) ?? "");
  if (HOST_SYNCS.has(node.op) || (node.kind !== "call_module" && HOST_SYNCS.has(name))) return true;
  if (node.op === "getitem")
    return node.args.some((a) => {
      const items = a.t === "list" ? a.items : [a];
      return items.some((item) => item.t === "node" && maskIndex(graph, item.id));
    });
  if (node.op === "batch_norm" || node.op === "instance_norm") {
    const momentum = node.fn?.momentum;
    const training = node.kind === "call_module" ? graph.modules[node.target]?.training : true;
    return training !== false && momentum?.t === "const" && momentum.pytype === "none";
  }
  return false;
}

function maskIndex(graph: Graph, id: string): boolean {
  const producer = graph.nodes.find((n) => n.id === id);
  const input = graph.inputs.find((i) => i.name === id);
  const meta = producer?.out.t === "tensor" ? producer.out.meta : input?.meta;
  return meta?.dtype === "bool";
}

/** Whether a graph can stand for the planned forward: captured, no random op (a replay draws no new numbers
 * from the generator the reference's draws advance), no host sync, no input written in place (the graph writes
 * its own copy), only torch's own modules and functions, positional parameters only. */
export function graphReplayable(graph: Graph, signature: string): boolean {
  if (graph.captured === "none") return false;
  const inputs = new Set(graph.inputs.map((i) => i.name));
  const view = new GraphView(graph);
  for (const node of graph.nodes) {
    if (node.rng || syncsWithHost(graph, node)) return false;
    // through views too: `x.view(-1).mul_(2)` and `x[:, 0] += 1` write the caller's tensor
    if (node.inplace) {
      const storage = storageOf(written(node), view);
      if (storage !== null && inputs.has(storage)) return false;
    }
    if (node.kind === "call_module" && !graph.modules[node.target]?.type.startsWith("torch.nn."))
      return false;
    if (
      node.kind === "call_function" &&
      !REPLAYABLE_BUILTINS.has(node.target) &&
      !REPLAYABLE_CALLS.some((p) => node.target.startsWith(p))
    )
      return false;
  }
  return forwardCallArgs(signature).every((a) => /^[A-Za-z_]\w*$/.test(a));
}

/** The model's number-valued attributes a replayed graph depends on: the model's own (its forward may branch on
 * them) and any attribute an op reads as an argument (a submodule's eps, `self.scale`). Each call passes their
 * values into the graph's key: a graph holds the values it was captured with, and an attribute set after the
 * capture gets a graph of its own. */
export function replayedAttrs(graph: Graph): string[] {
  const paths = new Set(Object.keys(graph.scalarAttrs).filter((path) => !path.includes(".")));
  const visit = (arg: Arg): void => {
    if (arg.t === "list") for (const item of arg.items) visit(item);
    else if (arg.t === "const" && arg.attr) paths.add(arg.attr);
  };
  for (const node of graph.nodes) for (const arg of [...node.args, ...Object.values(node.kwargs)]) visit(arg);
  return [...paths].sort();
}
