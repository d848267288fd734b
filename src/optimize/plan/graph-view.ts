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

/** Python's int operators on sizes (`x.size(2) // 2`, `h * w`), by op; null where Python would raise. */
const INT_ARITHMETIC: Record<string, (a: number, b: number) => number | null> = {
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  div: (a, b) => (b === 0 ? null : Math.floor(a / b)),
};

/** Factories that make a tensor on the CPU unless given a device. */
const HOST_FACTORIES = new Set(["torch.tensor", "torch.scalar_tensor", "torch.as_tensor"]);

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
    if (out?.t === "value") return out.pytype === "float" || out.pytype === "int";
    return this.isHostScalarTensor(arg.id);
  }

  /** Whether a node is a 0-d tensor forward makes on the host (`torch.tensor(x.shape[-1], dtype=x.dtype)`, no
   * device): PyTorch passes such a CPU scalar to a CUDA op as a number, and a region must too — as a tensor
   * operand it is on no GPU, and the region would never take its fast path. 0-d tensors promote like numbers. */
  isHostScalarTensor(id: string): boolean {
    const node = this.byId.get(id);
    if (node?.kind !== "call_function" || !HOST_FACTORIES.has(node.target)) return false;
    if (node.out.t !== "tensor" || node.out.meta.shape.length !== 0) return false;
    const device = node.kwargs.device ?? node.fn?.device;
    return !device || (device.t === "const" && device.pytype === "none");
  }

  isGraphInput(id: string): boolean {
    return !this.byId.has(id);
  }

  /** A size the graph reads from a tensor's shape (`x.size(2)`, `x.shape[-1]`, `x.size()[2:]`), as its value at
   * the captured shapes; null for any other value. A region planned on it checks the read at run time
   * (`sizeReadGuards`). */
  sizeRead(arg: Arg | undefined): number | number[] | null {
    if (arg?.t !== "node") return null;
    const node = this.byId.get(arg.id);
    const fn = node?.fn;
    if (!node || !fn) return null;
    const shape = this.tensorOf(fn.input)?.shape;
    if (node.op === "size" && shape) {
      const dim = fn.dim;
      if (!dim || (dim.t === "const" && dim.pytype === "none")) return [...shape];
      const d = dim.t === "const" && typeof dim.value === "number" ? dim.value : Number.NaN;
      return shape[d < 0 ? d + shape.length : d] ?? null;
    }
    if (node.op === "getattr" && shape && fn.name?.t === "const" && fn.name.value === "shape")
      return [...shape];
    if (node.op === "dim" && shape) return shape.length;
    if (node.op === "getattr" && shape && fn.name?.t === "const" && fn.name.value === "ndim")
      return shape.length;
    const arithmetic = INT_ARITHMETIC[node.op];
    if (arithmetic && node.out.t === "value" && node.out.pytype === "int") {
      const one = (a: Arg | undefined) => {
        const v = a?.t === "const" && typeof a.value === "number" ? a.value : this.sizeRead(a);
        return typeof v === "number" && Number.isInteger(v) ? v : null;
      };
      const [a, b] = [one(fn.input), one(fn.other)];
      if (fn.alpha && !(fn.alpha.t === "const" && fn.alpha.value === 1)) return null;
      const mode = fn.rounding_mode;
      if (node.op === "div" && !(mode?.t === "const" && mode.value === "floor")) return null;
      return a === null || b === null ? null : arithmetic(a, b);
    }
    if (node.op !== "getitem") return null;
    const whole = this.sizeRead(fn.input);
    if (!Array.isArray(whole)) return null;
    const index = fn.index;
    const int = (a: Arg | undefined) =>
      a?.t === "const" && typeof a.value === "number" && Number.isInteger(a.value) ? a.value : null;
    const none = (a: Arg | undefined) => !a || (a.t === "const" && a.pytype === "none");
    if (index?.t === "slice") {
      if (!none(index.step)) return null;
      const start = none(index.start) ? 0 : int(index.start);
      const stop = none(index.stop) ? whole.length : int(index.stop);
      return start === null || stop === null ? null : whole.slice(start, stop);
    }
    const i = int(index);
    return i === null ? null : (whole[i < 0 ? i + whole.length : i] ?? null);
  }

  /** Ints of a structural argument (`kernel_size`): literals as intList reads them, and sizes read from
   * tensors' shapes (`x.size()[2:]`, `(x.size(2), 3)`) at their captured values; null otherwise. */
  ints(arg: Arg | undefined): number[] | null {
    const literal = intList(arg);
    if (literal || !arg) return literal;
    const read = this.sizeRead(arg);
    if (read !== null) return Array.isArray(read) ? read : [read];
    if (arg.t !== "list") return null;
    const out: number[] = [];
    for (const item of arg.items) {
      const one = intList(item) ?? this.sizeRead(item);
      if (one === null || (Array.isArray(one) && one.length !== 1)) return null;
      out.push(Array.isArray(one) ? (one[0] as number) : one);
    }
    return out;
  }

  /** Run-time checks that the sizes a structural argument reads still have their captured values: a region
   * planned on them is the reference's ops at any other shape. `name` spells a node's value in the region. */
  sizeReadGuards(arg: Arg | undefined, name: (id: string) => string): string[] {
    if (!arg) return [];
    const items = arg.t === "list" ? arg.items : [arg];
    return items.flatMap((item) => {
      const read = item.t === "node" ? this.sizeRead(item) : null;
      if (read === null || item.t !== "node") return [];
      return Array.isArray(read)
        ? [`tuple(${name(item.id)}) == (${read.join(", ")}${read.length === 1 ? "," : ""})`]
        : [`${name(item.id)} == ${read}`];
    });
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
    ints(name) {
      const arg = get(name);
      return arg ? intList(arg) : null;
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
