// Read-only helpers over a captured Graph: node lookup, users of each value, tensor metadata, and the
// argument reader the op tables use.
import type { Arg, Graph, GraphNode, TensorMeta } from "../graph.ts";
import { floatLiteral, type ParamReader, scalarValue } from "../ops/pointwise.ts";

export const FLOAT_DTYPES = new Set(["float32", "float16", "bfloat16"]);

export function argNodeIds(arg: Arg, into: string[] = []): string[] {
  if (arg.t === "node") into.push(arg.id);
  else if (arg.t === "list") for (const item of arg.items) argNodeIds(item, into);
  else if (arg.t === "dict") for (const item of [...arg.keys, ...arg.values]) argNodeIds(item, into);
  else if (arg.t === "slice") for (const a of [arg.start, arg.stop, arg.step]) argNodeIds(a, into);
  return into;
}

export class GraphView {
  readonly byId = new Map<string, GraphNode>();
  readonly index = new Map<string, number>();
  /** Node id -> ids of the nodes using its value ("@output" for the forward's return). */
  readonly users = new Map<string, string[]>();

  constructor(readonly graph: Graph) {
    graph.nodes.forEach((node, i) => {
      this.byId.set(node.id, node);
      this.index.set(node.id, i);
      this.users.set(node.id, []);
    });
    for (const node of graph.nodes) {
      const used = new Set<string>();
      for (const arg of [...node.args, ...Object.values(node.kwargs)])
        for (const id of argNodeIds(arg)) used.add(id);
      for (const id of used) this.users.get(id)?.push(node.id);
    }
    for (const id of argNodeIds(graph.output)) this.users.get(id)?.push("@output");
  }

  node(id: string): GraphNode {
    const node = this.byId.get(id);
    if (!node) throw new Error(`kforge internal: no node ${id} in the captured graph`);
    return node;
  }

  usersOf(id: string): string[] {
    return this.users.get(id) ?? [];
  }

  /** The tensor an Arg holds, when it is a node's single-tensor output, a parameter/buffer, or an input. */
  tensorOf(arg: Arg | undefined): TensorMeta | null {
    if (!arg) return null;
    if (arg.t === "param") return this.graph.params[arg.path]?.meta ?? null;
    if (arg.t !== "node") return null;
    const node = this.byId.get(arg.id);
    if (node) return node.out.t === "tensor" ? node.out.meta : null;
    return this.graph.inputs.find((input) => input.name === arg.id)?.meta ?? null;
  }

  /** Whether an Arg is a Python number another node computed (`1.0 / math.sqrt(k.size(-1))`): a region reads
   * it when it runs, as a runtime scalar. */
  isNumberValue(arg: Arg | undefined): boolean {
    if (arg?.t !== "node") return false;
    const out = this.byId.get(arg.id)?.out;
    return out?.t === "value" && (out.pytype === "float" || out.pytype === "int");
  }

  isGraphInput(id: string): boolean {
    return !this.byId.has(id);
  }

  outMeta(node: GraphNode): TensorMeta | null {
    return node.out.t === "tensor" ? node.out.meta : null;
  }
}

/** Reads an op's normalised arguments (node.fn) as C++ literals; model-attribute scalars become runtime
 * scalars through `runtime`, which returns the C++ expression reading them (sc.v[i]). */
export function paramReader(
  fn: Record<string, Arg>,
  runtime: (arg: Arg) => string | null,
  sizeOf: (arg: Arg, dim: number) => string | null = () => null,
): ParamReader {
  const get = (name: string) => {
    const arg = fn[name];
    return arg && !(arg.t === "const" && arg.pytype === "none") ? arg : undefined;
  };
  return {
    num(name, fallback) {
      const arg = get(name);
      if (!arg) return fallback === undefined ? null : floatLiteral(fallback);
      if (arg.t === "const" && arg.attr) return runtime(arg);
      const value = scalarValue(arg);
      return value === null ? null : floatLiteral(value);
    },
    str(name) {
      const arg = get(name);
      return arg?.t === "const" && typeof arg.value === "string" ? arg.value : null;
    },
    bool(name) {
      const arg = get(name);
      return arg?.t === "const" && typeof arg.value === "boolean" ? arg.value : null;
    },
    has(name) {
      return get(name) !== undefined;
    },
    int(name) {
      const arg = get(name);
      return arg?.t === "const" && typeof arg.value === "number" && Number.isInteger(arg.value)
        ? arg.value
        : null;
    },
    size(name, dim) {
      const arg = get(name);
      return arg ? sizeOf(arg, dim) : null;
    },
  };
}

/** Ints of a list/tuple or single int Arg ([2, 3] / 1), null when not all constant ints. */
export function intList(arg: Arg | undefined): number[] | null {
  if (!arg) return null;
  if (arg.t === "const" && typeof arg.value === "number" && Number.isInteger(arg.value)) return [arg.value];
  if (arg.t !== "list") return null;
  const out: number[] = [];
  for (const item of arg.items) {
    if (item.t !== "const" || typeof item.value !== "number" || !Number.isInteger(item.value)) return null;
    out.push(item.value);
  }
  return out;
}
