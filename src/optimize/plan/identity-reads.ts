// nn.Identity (and export's `alias`) returns its input itself, the same tensor. As a node it stood between that
// tensor and its readers: alone, or beside ops no region takes, it became a pointwise region of its own, a copy
// kernel where the reference launches nothing (timm's disabled `drop_path` / `norm` layers are nn.Identity).
// Its readers read its input instead, which is what they read in PyTorch; an in-place write through it then
// writes that input, as the reference's does.
// Dropout with p a literal 0 (timm's and LLM-written blocks' `nn.Dropout(0.0)`, `attn_drop=0.`) is the same: ATen
// returns its input itself in either mode (`_dropout_impl`: p == 0 || !train), so it launched a copy kernel the
// reference does not, and the region guarded a mode that changes nothing.
import type { Arg, Graph, GraphNode } from "../graph.ts";
import { mapArgs, replaceRef } from "./expand-reads.ts";
import { argNodeIds } from "./graph-view.ts";
import { plain } from "./written-norms.ts";

/** The graph with every plain identity node dropped and its readers (the output too) reading its input. */
export function dropIdentities(graph: Graph): Pick<Graph, "nodes" | "output"> {
  const by = new Map<string, Arg>();
  const resolve = (arg: Arg): Arg => (arg.t === "node" ? (by.get(arg.id) ?? arg) : arg);
  for (const node of graph.nodes) {
    const input = node.fn?.input ?? node.args[0];
    if (((node.op === "identity" && plain(node)) || zeroDropout(node)) && input)
      by.set(node.id, resolve(input));
  }
  if (!by.size) return { nodes: graph.nodes, output: graph.output };
  const rewrite = <T>(value: T, map: (v: T, id: string, to: Arg) => T): T =>
    [...by].reduce((v, [id, to]) => map(v, id, to), value);
  return {
    nodes: graph.nodes.filter((node) => !by.has(node.id)).map((node) => rewrite(node, mapArgs)),
    output: rewrite(graph.output, replaceRef),
  };
}

/** A dropout whose p is the literal 0 (not a model attribute the forward reads, which may change), in either
 * mode, in place or not: ATen returns the input tensor itself. */
function zeroDropout(node: GraphNode): boolean {
  const p = node.fn?.p;
  return node.op === "dropout" && !node.rng && p?.t === "const" && p.value === 0 && p.attr === undefined;
}

/** Tuple unpacking (`m, _ = torch.max(x, dim=1)`) makes a projection for every field, read or not. An unread
 * one is no use of the tuple's data, but a rule taking one field of a pair (max(dim)'s values as amax) sees two
 * readers and leaves the op to PyTorch. The graph without projections nothing reads (not the output either). */
export function dropUnreadProjections(graph: Graph): Graph {
  const read = new Set<string>();
  for (const node of graph.nodes)
    for (const a of [...node.args, ...Object.values(node.kwargs), ...Object.values(node.fn ?? {})])
      for (const id of argNodeIds(a)) read.add(id);
  for (const id of argNodeIds(graph.output)) read.add(id);
  const tuples = new Set(graph.nodes.filter((node) => node.out.t === "tuple").map((node) => node.id));
  const unread = (node: GraphNode): boolean => {
    const source = node.fn?.input ?? node.args[0];
    return (
      (node.op === "getitem" || node.op === "getattr") &&
      plain(node) &&
      source?.t === "node" &&
      tuples.has(source.id) &&
      !read.has(node.id)
    );
  };
  if (!graph.nodes.some(unread)) return graph;
  return { ...graph, nodes: graph.nodes.filter((node) => !unread(node)) };
}
