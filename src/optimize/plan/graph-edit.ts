// Small pieces the graph rewrites share: contiguous strides of a shape, shape equality, and a node with one of
// its tensor inputs replaced.
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
