// The rule table: which captured nodes can seed a fused region, and how far a region may grow around its
// seed. Rules are data, tried in order: a reader adding a fused op adds its spec to ops/ and, if it needs
// a new kind of region, one row here. Each rule is testable on its own (test/optimize-rules.test.ts).
import type { Arg, GraphNode, TensorMeta } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { POINTWISE } from "../ops/pointwise.ts";
import { accumulatorOf, REDUCTIONS, type ReduceSpec } from "../ops/reduce.ts";
import { SCANS, scanDim } from "../ops/scan.ts";
import { mayAlias, written } from "./aliasing.ts";
import { FLOAT_DTYPES, type GraphView, intList, paramReader } from "./graph-view.ts";

export type RegionKind = "pointwise" | "reduce" | "normalize" | "pool" | "scan" | "recipe";

/** Why a node is not a seed/member, or null when it is. */
export type Verdict = string | null;

export interface SeedRule {
  name: string;
  kind: Exclude<RegionKind, "pointwise" | "recipe">;
  /** null: the node seeds a region of this rule; a string: it is this rule's op but cannot be (why). */
  accepts(node: GraphNode, view: GraphView): Verdict;
  /** Whether pointwise producers of the seed's input are fused in front of it. */
  prologue: boolean;
  /** Which pointwise consumers fuse after it: any operands, or only scalars (the output is reduced). */
  epilogue: "operands" | "scalars";
}

const MAX_RANK = 6;
/** Pointwise ops whose bool output may live inside a region (as 1.f / 0.f), read by where or masked_fill. */
const NOT_OPS = new Set(["logical_not", "bitwise_not"]);
/** Bitwise ops are logical ones of bool tensors only (of integers they are integer math). */
const BITWISE_OPS = new Set(["bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"]);
const MASK_OPS = new Set([
  ...["gt", "lt", "ge", "le", "eq", "ne", ...NOT_OPS, ...BITWISE_OPS],
  ...["logical_and", "logical_or", "logical_xor", "isnan", "isinf", "isfinite"],
]);
const probe = () => "sc.v[0]";

/** A pool's geometry argument the kernel can be built for: absent (None), or ints known here. */
function constOrNone(arg: Arg, view: GraphView): boolean {
  return (arg.t === "const" && arg.pytype === "none") || view.ints(arg) !== null;
}

function tensorInputOk(view: GraphView, node: GraphNode, key = "input"): Verdict {
  const meta = view.tensorOf(node.fn?.[key]);
  if (!meta) return `its ${key} is not a tensor the planner can see`;
  if (!FLOAT_DTYPES.has(meta.dtype)) return `${meta.dtype} input (kernels take float32/float16/bfloat16)`;
  if (meta.shape.length > MAX_RANK) return `rank ${meta.shape.length} > ${MAX_RANK}`;
  return null;
}

/** An in-place op on an intermediate nobody else reads (nn.ReLU(inplace=True) after a conv) means the same
 * as its out-of-place form. The written storage is that of the chain of in-place ops and views the target
 * came through (`y.add_(1).sqrt_()` writes y). Each name of it along the chain may be read by others only
 * before the link that writes (or views) it, by ops that neither view nor write it: they see the same value
 * either way (`y.masked_fill_(y.abs() < t, 0)`, `y.sub_(y.mean()); y.abs_()`, `y.relu_(); z = y * 3;
 * y.mul_(0.5)`); reads after it were threaded to the write's result (inplace-threads.ts), or keep the write
 * PyTorch's. */
function inplaceIsPrivate(node: GraphNode, view: GraphView): boolean {
  let link = node;
  let target = written(node);
  for (;;) {
    if (target?.t !== "node" || !readOnlyBefore(target.id, link, view)) return false;
    const value = view.node(target.id);
    if (!value.inplace && !mayAlias(value, view)) return true;
    link = value;
    target = value.inplace ? written(value) : (value.fn?.input ?? value.args[0]);
  }
}

/** Whether every reader of `id` but `link` reads it earlier than `link`, neither viewing nor writing it, and
 * `id` is a value of this call (not an input, nor the model's own tensor: a get_attr node, a constant export
 * lifted). */
function readOnlyBefore(id: string, link: GraphNode, view: GraphView): boolean {
  if (view.isGraphInput(id)) return false;
  const value = view.node(id);
  if (value.kind === "get_attr" || !view.outMeta(value)) return false;
  const at = view.index.get(link.id) ?? -1;
  return view.usersOf(id).every((user) => {
    if (user === link.id) return true;
    if (user === "@output") return false;
    const reader = view.node(user);
    return !reader.inplace && !mayAlias(reader, view) && (view.index.get(user) ?? at) < at;
  });
}

function common(node: GraphNode, view: GraphView): Verdict {
  if (!node.fn) return "its call could not be normalised";
  if (node.rng) return "it draws random numbers (kept in PyTorch so the RNG stream matches)";
  if (node.inplace && !inplaceIsPrivate(node, view))
    return "it writes in place a value read elsewhere (its input or out= tensor)";
  const out = view.outMeta(node);
  if (!out && !(node.out.t === "tuple")) return "its output is not a tensor";
  return null;
}

/** A bool tensor, or a Python bool (`mask & True`). */
function isBool(view: GraphView, arg: Arg | undefined): boolean {
  if (arg?.t === "const") return arg.pytype === "bool";
  return view.tensorOf(arg)?.dtype === "bool";
}

const INTEGER_DTYPES = new Set(["int64", "int32", "int16", "int8", "uint8"]);

/** An integer operand of an op whose result is float32 (`mask.float()`, `pos * 0.5`, `x * mask`): torch converts
 * it to float32 and computes in float32, as the kernel does (kf_to_float<int64_t>). An integer result, a
 * comparison of integers, or a half-precision result (torch rounds the integer to half first) keeps PyTorch. */
function readsIntegerAsFloat(operand: string, result: string): boolean {
  return INTEGER_DTYPES.has(operand) && result === "float32";
}

function isNumber(arg: Arg | undefined): boolean {
  return arg?.t === "const" && (typeof arg.value === "number" || arg.special !== undefined);
}

/** Why a per-channel operand does not line up with dim 1 of the op's input (one value per channel), or null. */
function channelMisalignment(keys: string[], fn: Record<string, Arg>, view: GraphView): Verdict {
  const input = view.tensorOf(fn.input);
  for (const key of keys) {
    const arg = fn[key];
    if (!arg || (arg.t === "const" && arg.pytype === "none")) continue;
    // A value the forward computes could join the region, where it would broadcast along the last dim.
    if (arg.t !== "param" && !(arg.t === "node" && view.isGraphInput(arg.id)))
      return `its ${key} is computed in the forward`;
    const meta = view.tensorOf(arg);
    if (!input || input.shape.length < 2) return "its input has no channel dim";
    if (meta?.shape.length !== 1 || meta.shape[0] !== input.shape[1])
      return `its ${key} is not one value per channel of its input`;
  }
  return null;
}

/** Can this node be a member of a pointwise region? */
export function pointwiseVerdict(node: GraphNode, view: GraphView): Verdict {
  const spec = POINTWISE[node.op];
  if (!spec) return `no pointwise rule for ${node.op}`;
  const base = common(node, view);
  if (base) return base;
  const out = view.outMeta(node);
  if (!out) return "its output is not one tensor";
  if (!FLOAT_DTYPES.has(out.dtype) && !MASK_OPS.has(node.op)) return `${out.dtype} output`;
  if (BITWISE_OPS.has(node.op) && !spec.operands.every((k) => isBool(view, node.fn?.[k])))
    return `${node.op} of a non-bool operand (bitwise on integers)`;
  if (out.shape.length > MAX_RANK) return `rank ${out.shape.length} > ${MAX_RANK}`;
  const fn = node.fn ?? {};
  if (
    node.op === "nan_to_num" &&
    out.dtype !== "float32" &&
    !["posinf", "neginf"].every((k) => isNumber(fn[k]))
  )
    return `nan_to_num's default bounds are ${out.dtype}'s largest values`;
  for (const key of spec.operands) {
    const arg = fn[key];
    const absent = !arg || (arg.t === "const" && arg.pytype === "none");
    if (absent) {
      if (spec.optional?.includes(key)) continue;
      return `its ${key} is missing`;
    }
    if (arg.t === "const") {
      if (typeof arg.value !== "number" && typeof arg.value !== "boolean" && !arg.special)
        return `its ${key} is a ${arg.pytype}`;
      continue;
    }
    if (view.isNumberValue(arg)) continue;
    const meta = view.tensorOf(arg);
    if (!meta) return `its ${key} is not a tensor or a number`;
    if (!FLOAT_DTYPES.has(meta.dtype) && meta.dtype !== "bool" && !readsIntegerAsFloat(meta.dtype, out.dtype))
      return `${meta.dtype} operand ${key}`;
    if (meta.shape.length > MAX_RANK) return `operand rank ${meta.shape.length} > ${MAX_RANK}`;
  }
  const misaligned = channelMisalignment(spec.channel ?? [], fn, view);
  if (misaligned) return misaligned;
  const expr = spec.emit(
    spec.operands.map((k) => (fn[k] && !(fn[k]?.t === "const" && fn[k]?.pytype === "none") ? "a" : "")),
    paramReader(fn, probe),
  );
  return expr === null ? `${node.op} with these arguments has no kernel form` : null;
}

function reduceDims(node: GraphNode, rank: number): number[] | null {
  const spec = REDUCTIONS[node.op];
  if (!spec) return null;
  const dimArg = node.fn?.dim;
  if (spec.dims === "last") return rank > 0 ? [rank - 1] : null;
  if (spec.dims === "class") return rank > 0 ? [rank === 1 ? 0 : 1] : null;
  if (spec.dims === "all" || !dimArg || (dimArg.t === "const" && dimArg.pytype === "none"))
    return Array.from({ length: rank }, (_, i) => i);
  const dims = intList(dimArg);
  if (!dims) return null;
  if (dims.length === 0) return Array.from({ length: rank }, (_, i) => i);
  return [...new Set(dims.map((d) => (d < 0 ? d + rank : d)))].sort((a, b) => a - b);
}

/** The dims a normalisation seed reduces (of its input), or null. */
export function normDims(node: GraphNode, view: GraphView): number[] | null {
  const spec = NORMALIZATIONS[node.op];
  const meta = view.tensorOf(node.fn?.input);
  if (!spec || !meta || !node.fn) return null;
  const rank = meta.shape.length;
  if (node.op === "layer_norm" || node.op === "rms_norm") {
    const shape = intList(node.fn.normalized_shape);
    if (!shape || shape.length === 0 || shape.length > rank) return null;
    const tail = meta.shape.slice(rank - shape.length);
    if (tail.some((s, i) => s !== shape[i])) return null;
    return Array.from({ length: shape.length }, (_, i) => rank - shape.length + i);
  }
  return spec.dims(rank, paramReader(node.fn, probe));
}

/** The named-tuple fields of a (values, indices) result, by position. */
const PAIR_FIELDS = new Map<string, 0 | 1>([
  ["values", 0],
  ["indices", 1],
  ["min", 0],
  ["max", 1],
]);

/** The `[0]` / `.values` or `[1]` / `.indices` node that alone reads a (values, indices) reduction, or null. */
export function pairProjection(node: GraphNode, view: GraphView): { id: string; index: 0 | 1 } | null {
  const users = view.usersOf(node.id);
  const only = users.length === 1 && users[0] !== "@output" ? view.node(users[0] ?? "") : null;
  if (!only || !view.outMeta(only)) return null;
  if (only.op === "getattr") {
    const name = only.fn?.name;
    const index =
      name?.t === "const" && typeof name.value === "string" ? PAIR_FIELDS.get(name.value) : undefined;
    return index === undefined ? null : { id: only.id, index };
  }
  const index = only.fn?.index;
  if (only.op !== "getitem" || index?.t !== "const" || (index.value !== 0 && index.value !== 1)) return null;
  return { id: only.id, index: index.value };
}

/** The reduction a node computes: a pair's `[1]` is its `secondOfPair` (max(dim)'s indices: argmax; aminmax's max). */
export function reduceSpecOf(node: GraphNode, view: GraphView): ReduceSpec | undefined {
  const spec = REDUCTIONS[node.op];
  if (!spec?.valuesOfPair || pairProjection(node, view)?.index !== 1) return spec;
  return spec.secondOfPair ? REDUCTIONS[spec.secondOfPair] : undefined;
}

/** A seed's main tensor argument: its `input`, or a reduction's first operand (whose dims `dim` names). */
export function seedInput(node: GraphNode): Arg | undefined {
  return node.fn?.[REDUCTIONS[node.op]?.operands[0] ?? "input"];
}

/** Class indices read as fp32 are exact below 2^24, and an ignore_index is compared with them as fp32. */
const CLASS_INDEX_LIMIT = 2 ** 24;

/** Why a loss's class-index operand has no kernel form (null: it has one): int64 class indices shaped as the
 * scores without their class dim, fewer than 2^24 classes, and an int ignore_index within that range. */
function classTargetVerdict(
  view: GraphView,
  node: GraphNode,
  meta: TensorMeta | null | undefined,
  key: string,
) {
  const scores = view.tensorOf(seedInput(node));
  if (!meta || !scores || meta.dtype !== "int64") return `its ${key} is not int64 class indices`;
  const rank = scores.shape.length;
  const expected = rank === 1 ? [] : [scores.shape[0], ...scores.shape.slice(2)];
  if (meta.shape.join() !== expected.join())
    return `its ${key} is not shaped as its scores without the class dim`;
  if ((scores.shape[rank === 1 ? 0 : 1] ?? 0) >= CLASS_INDEX_LIMIT) return "2^24 classes or more";
  const ignore = node.fn?.ignore_index;
  if (
    ignore &&
    !(ignore.t === "const" && (ignore.attr || Math.abs(Number(ignore.value)) < CLASS_INDEX_LIMIT))
  )
    return "its ignore_index is not a constant below 2^24";
  return null;
}

export function reductionDims(node: GraphNode, view: GraphView): number[] | null {
  const meta = view.tensorOf(seedInput(node));
  return meta ? reduceDims(node, meta.shape.length) : null;
}

const POOLS = new Set([
  "max_pool1d",
  "max_pool2d",
  "max_pool3d",
  "avg_pool1d",
  "avg_pool2d",
  "avg_pool3d",
  "adaptive_avg_pool1d",
  "adaptive_avg_pool2d",
  "adaptive_avg_pool3d",
  "adaptive_max_pool1d",
  "adaptive_max_pool2d",
  "adaptive_max_pool3d",
]);

/** Whether a pooling op (plain or adaptive) takes the maximum of its window rather than the mean. */
export function isMaxPool(op: string): boolean {
  return op.startsWith("max_pool") || op.startsWith("adaptive_max_pool");
}

export function poolDims(op: string): number {
  return Number.parseInt(op.slice(-2, -1), 10);
}

export const SEED_RULES: SeedRule[] = [
  {
    name: "normalize",
    kind: "normalize",
    prologue: true,
    epilogue: "operands",
    accepts(node, view) {
      const spec = NORMALIZATIONS[node.op];
      if (!spec) return `no normalisation rule for ${node.op}`;
      // Without statistics to take (eval-mode batch norm) the op is elementwise: the pointwise rule's, whose
      // reason is the one to report where it declines.
      const elementwise = POINTWISE[node.op] ? pointwiseVerdict(node, view) : undefined;
      if (elementwise === null) return "no statistics: elementwise in this mode";
      if (elementwise && !normDims(node, view)) return elementwise;
      const bad = common(node, view) ?? tensorInputOk(view, node);
      if (bad) return bad;
      const out = view.outMeta(node);
      if (!out) return "its output is not one tensor";
      const fn = node.fn ?? {};
      // softmax(x, dtype=): PyTorch casts x first. The kernel reads x in fp32 whatever it is, which is that
      // cast only when it widens (or keeps) x's dtype.
      const inDtype = view.tensorOf(fn.input)?.dtype;
      if (out.dtype !== inDtype && out.dtype !== "float32")
        return "it casts its input to a narrower dtype (dtype=)";
      for (const param of spec.params) {
        const arg = fn[param.key];
        if (!arg || (arg.t === "const" && arg.pytype === "none")) continue;
        const meta = view.tensorOf(arg);
        if (!meta || !FLOAT_DTYPES.has(meta.dtype)) return `its ${param.key} is not a float tensor`;
      }
      if (
        spec.runningStats &&
        fn.running_mean &&
        fn.running_mean.t !== "param" &&
        fn.running_mean.t !== "const"
      )
        return "its running statistics are not the module's buffers";
      if (spec.groups) {
        const meta = view.tensorOf(fn.input);
        const groups = intList(fn.num_groups)?.[0];
        if (!meta || !groups || meta.shape.length < 2 || (meta.shape[1] ?? 0) % groups !== 0)
          return "channels not divisible by the group count";
      }
      if (!normDims(node, view)) return `${node.op} with these arguments has no kernel form`;
      return spec.apply(
        "v",
        spec.params.map(() => "p"),
        paramReader(fn, probe),
      ) === null
        ? `${node.op} with these arguments has no kernel form`
        : null;
    },
  },
  {
    name: "reduce",
    kind: "reduce",
    prologue: true,
    epilogue: "scalars",
    accepts(node, view) {
      const spec = REDUCTIONS[node.op];
      if (!spec) return `no reduction rule for ${node.op}`;
      const primary = spec.operands[0] ?? "input";
      const bad = common(node, view) ?? tensorInputOk(view, node, primary);
      if (bad) return bad;
      const fn = node.fn ?? {};
      const rank = view.tensorOf(fn[primary])?.shape.length;
      for (const key of spec.operands.slice(1)) {
        const arg = fn[key];
        if (spec.optional?.includes(key) && (!arg || (arg.t === "const" && arg.pytype === "none"))) continue;
        const meta = view.tensorOf(arg);
        if (spec.integerOperands?.includes(key)) {
          const bad = classTargetVerdict(view, node, meta, key);
          if (bad) return bad;
          continue;
        }
        if (!meta || !FLOAT_DTYPES.has(meta.dtype)) return `its ${key} is not a float tensor`;
        // dims index the first operand: a higher-rank operand would broadcast it into a longer shape.
        if (meta.shape.length > (rank ?? 0)) return `its ${key} has more dims than its ${primary}`;
      }
      const given = (key: string) =>
        fn[key] !== undefined && !(fn[key]?.t === "const" && fn[key]?.pytype === "none");
      // sum/mean(x, dtype=): PyTorch casts x, then reduces. The kernel reads x in fp32 and accumulates in fp32,
      // which is that cast where the result keeps x's dtype or is float32 from a float x (half precision's sum
      // with dtype=torch.float32); a float64 or integer result is not.
      if (given("dtype")) {
        const inDtype = view.tensorOf(fn[primary])?.dtype ?? "";
        const outDtype = view.outMeta(node)?.dtype;
        if (outDtype !== inDtype && !(outDtype === "float32" && FLOAT_DTYPES.has(inDtype)))
          return `it casts (dtype=${outDtype ?? "?"})`;
      }
      const unsupported = (spec.absent ?? []).find(given);
      if (unsupported) return `its ${unsupported} argument`;
      if (spec.reductions) {
        const legacy = ["size_average", "reduce"].find(given);
        if (legacy) return `the legacy ${legacy} argument (it overrides reduction)`;
        const reduction = fn.reduction?.t === "const" ? fn.reduction.value : "mean";
        // Its per-element term, a pointwise op: the pointwise rule takes the call.
        if (reduction === "none" && POINTWISE[node.op]) return "no reduction: reduction=none is elementwise";
        if (typeof reduction !== "string" || !spec.reductions.includes(reduction))
          return `reduction=${String(reduction)}`;
        if (reduction === "batchmean") {
          // The kernel divides by the iteration shape's first size: the input must span it.
          const input = view.tensorOf(fn.input)?.shape ?? [];
          const target = view.tensorOf(fn.target)?.shape ?? [];
          if (!input.length || input.length !== target.length || input.some((s, i) => s !== target[i]))
            return "batchmean over an input and target of different shapes";
        }
      }
      if (spec.valuesOfPair) {
        if (!pairProjection(node, view)) return "both its values and its indices are used";
      } else if (!view.outMeta(node)) return "its output is not one tensor";
      if (!reductionDims(node, view)) return "its dims are not constant";
      const reader = paramReader(fn, probe, probe);
      const ok =
        spec.pro(
          spec.operands.map(() => "a"),
          reader,
        ) !== null &&
        spec.epi(reader) !== null &&
        accumulatorOf(spec, reader) !== null;
      return ok ? null : `${node.op} with these arguments has no kernel form`;
    },
  },
  {
    name: "scan",
    kind: "scan",
    prologue: true,
    epilogue: "operands",
    accepts(node, view) {
      if (!SCANS[node.op]) return `no scan rule for ${node.op}`;
      const bad = common(node, view) ?? tensorInputOk(view, node);
      if (bad) return bad;
      const fn = node.fn ?? {};
      if (scanDim(node, view) === null) return "its dim is not a constant int";
      const out = view.outMeta(node);
      if (!out) return "its output is not one tensor";
      // cumsum(x, dtype=): PyTorch casts x, then scans; the kernel reads x in fp32 and scans in fp32, which is
      // that cast where the result keeps x's dtype or is float32 (as reductions take it).
      const inDtype = view.tensorOf(fn.input)?.dtype ?? "";
      if (out.dtype !== inDtype && out.dtype !== "float32") return `it casts (dtype=${out.dtype})`;
      return null;
    },
  },
  {
    name: "pool",
    kind: "pool",
    prologue: true,
    epilogue: "operands",
    accepts(node, view) {
      if (!POOLS.has(node.op)) return `no pooling rule for ${node.op}`;
      const bad = common(node, view) ?? tensorInputOk(view, node);
      if (bad) return bad;
      const fn = node.fn ?? {};
      const meta = view.tensorOf(fn.input);
      const nd = poolDims(node.op);
      if (!meta || meta.shape.length !== nd + 2) return `unbatched or rank-${meta?.shape.length} input`;
      if (fn.return_indices?.t === "const" && fn.return_indices.value === true) return "it returns indices";
      if (!view.outMeta(node)) return "its output is not one tensor";
      if (node.op.startsWith("adaptive")) {
        const size = view.ints(fn.output_size);
        if (!size) return "output_size has a None entry";
        return null;
      }
      if (!view.ints(fn.kernel_size)) return "kernel_size is not constant";
      const geometry = ["stride", "padding", "dilation"].find(
        (name) => fn[name] && !constOrNone(fn[name], view),
      );
      if (geometry) return `${geometry} is not constant`;
      return null;
    },
  },
];
