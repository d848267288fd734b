// Two max pools in a row, each over windows that tile its input (stride = kernel, no padding, no dilation, floor
// mode), are one max pool over the product windows: floor(floor(n / a) / b) = floor(n / ab) outputs along each dim,
// each the max of the same elements — bit for bit, as a max rounds nothing and NaN propagates either way. The
// intermediate (an eighth of the input for 2 x 2 x 2 windows) is then neither written nor read back, and one
// launch goes. Average pools compose the same way (the mean of the product window is the mean of the means, each
// window the same size), but not bit for bit: the kernel rounds one sum and one division where the reference
// rounds two of each. So a composed average pool keeps the pools as written (`written`, as written-layernorm.ts
// does), which the emitter writes wherever PyTorch runs it: the file's fallback stays the reference's ops.
import type { Arg, GraphNode } from "../graph.ts";
import { GraphView, intList } from "./graph-view.ts";

const MAX_POOLS: Record<string, number> = { max_pool1d: 1, max_pool2d: 2, max_pool3d: 3 };
const AVG_POOLS: Record<string, number> = { avg_pool1d: 1, avg_pool2d: 2, avg_pool3d: 3 };
const POOL_DIMS: Record<string, number> = { ...MAX_POOLS, ...AVG_POOLS };

const int = (value: number): Arg => ({ t: "const", pytype: "int", value });
const bool = (value: boolean): Arg => ({ t: "const", pytype: "bool", value });
const ints = (values: number[]): Arg => ({ t: "list", kind: "list", items: values.map(int) });

/** An int or a list of ints as `nd` numbers; null for anything else (a value read at run time). */
function perDim(arg: Arg | undefined, nd: number): number[] | null {
  const list = intList(arg);
  if (list?.length === 1) return Array(nd).fill(list[0]);
  return list?.length === nd ? list : null;
}

const isFalse = (arg: Arg | undefined) => arg === undefined || (arg.t === "const" && arg.value === false);
const isNoneOrEmpty = (arg: Arg | undefined) =>
  arg === undefined ||
  (arg.t === "const" && arg.pytype === "none") ||
  (arg.t === "list" && arg.items.length === 0);

/** The windows of a max or average pool whose windows tile its input, per dim; null for any other pool. */
function tilingWindows(node: GraphNode): number[] | null {
  const nd = POOL_DIMS[node.op];
  const fn = node.fn;
  if (!nd || !fn || node.inplace) return null;
  const kernel = perDim(fn.kernel_size, nd);
  if (!kernel || kernel.some((k) => k < 1)) return null;
  const stride = isNoneOrEmpty(fn.stride) ? kernel : perDim(fn.stride, nd);
  const padding = fn.padding === undefined ? Array(nd).fill(0) : perDim(fn.padding, nd);
  const dilation = fn.dilation === undefined ? Array(nd).fill(1) : perDim(fn.dilation, nd);
  if (!stride || !padding || !dilation) return null;
  if (stride.some((s, d) => s !== kernel[d]) || padding.some((p) => p !== 0) || dilation.some((x) => x !== 1))
    return null;
  // an average over the window's own size: no divisor given (with no padding, count_include_pad counts nothing)
  if (node.op in AVG_POOLS && !isNoneOrEmpty(fn.divisor_override)) return null;
  return isFalse(fn.ceil_mode) && isFalse(fn.return_indices) ? kernel : null;
}

/** `outer` reading `inner` as one pool of `inner`'s input, under `outer`'s id; null where they do not compose. */
function composed(outer: GraphNode, view: GraphView): { node: GraphNode; inner: string } | null {
  const input = outer.fn?.input;
  if (input?.t !== "node" || view.isGraphInput(input.id)) return null;
  const inner = view.node(input.id);
  if (inner.op !== outer.op || view.usersOf(inner.id).length !== 1) return null;
  const [a, b] = [tilingWindows(inner), tilingWindows(outer)];
  const source = inner.fn?.input;
  if (!a || !b || !source) return null;
  const windows = ints(a.map((k, d) => k * (b[d] ?? 1)));
  const padding = ints(a.map(() => 0));
  const average = outer.op in AVG_POOLS;
  const kwargs: Record<string, Arg> = average
    ? {
        kernel_size: windows,
        stride: windows,
        padding,
        ceil_mode: bool(false),
        count_include_pad: bool(true),
        ...(outer.op === "avg_pool1d"
          ? {}
          : { divisor_override: { t: "const", pytype: "none", value: null } }),
      }
    : {
        kernel_size: windows,
        stride: windows,
        padding,
        dilation: ints(a.map(() => 1)),
        ceil_mode: bool(false),
      };
  if (!average) kwargs.return_indices = bool(false);
  const node: GraphNode = {
    ...outer,
    kind: "call_function",
    target: `torch.nn.functional.${outer.op}`,
    args: [source],
    kwargs,
    fn: { input: source, ...kwargs },
    ...(average ? { written: [...(inner.written ?? [inner]), ...(outer.written ?? [outer])] } : {}),
  };
  return { node, inner: inner.id };
}

/** The nodes with each run of tiling max (or average) pools as one pool. */
export function composeTilingPools(nodes: GraphNode[], view: GraphView): GraphNode[] {
  let current = nodes;
  let currentView = view;
  for (let round = 0; round < nodes.length; round++) {
    const replaced = new Map<string, GraphNode>();
    const dropped = new Set<string>();
    for (const node of current) {
      if (!(node.op in POOL_DIMS) || dropped.has(node.id)) continue;
      const result = composed(node, currentView);
      if (!result || replaced.has(result.inner)) continue;
      replaced.set(node.id, result.node);
      dropped.add(result.inner);
    }
    if (!replaced.size) return current;
    current = current.filter((n) => !dropped.has(n.id)).map((n) => replaced.get(n.id) ?? n);
    currentView = new GraphView({ ...view.graph, nodes: current });
  }
  return current;
}
