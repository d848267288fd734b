// Small pieces the graph rewrites share: contiguous strides of a shape, shape equality, a node with one of its
// tensor inputs replaced, and the fold of a written idiom into one node.
import type { Arg, GraphNode } from "../graph.ts";

/** Row-major strides of `shape` (elements). */
export function contiguousStride(shape: number[]): number[] {
  const stride = shape.map(() => 1);
  for (let i = shape.length - 2; i >= 0; i--) stride[i] = (stride[i + 1] ?? 1) * (shape[i + 1] ?? 1);
  return stride;
}

export function sameShape(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** `node` reading `by` wherever it read node `from` (its args, kwargs, and its bound operand `key`). */
export function withInput(node: GraphNode, key: string, from: string, by: Arg): GraphNode {
  const swap = (a: Arg): Arg => (a.t === "node" && a.id === from ? by : a);
  return {
    ...node,
    args: node.args.map(swap),
    kwargs: Object.fromEntries(Object.entries(node.kwargs).map(([k, a]) => [k, swap(a)])),
    fn: node.fn ? { ...node.fn, [key]: by } : null,
  };
}

/** One written idiom found from a node: the nodes it takes out, and the node that stands at `node.id` instead. */
export interface IdiomFold {
  removed: string[];
  node: GraphNode;
}

/** `nodes` with each idiom `find` finds folded into its node; a match touching a node an earlier one removed or
 * replaced is left as written. */
export function foldIdioms(nodes: GraphNode[], find: (node: GraphNode) => IdiomFold | null): GraphNode[] {
  const removed = new Set<string>();
  const replaced = new Map<string, GraphNode>();
  for (const node of nodes) {
    if (removed.has(node.id)) continue;
    const fold = find(node);
    if (!fold || [...fold.removed, fold.node.id].some((id) => removed.has(id) || replaced.has(id))) continue;
    for (const id of fold.removed) removed.add(id);
    replaced.set(fold.node.id, fold.node);
  }
  if (!replaced.size) return nodes;
  return nodes.filter((n) => !removed.has(n.id)).map((n) => replaced.get(n.id) ?? n);
}
