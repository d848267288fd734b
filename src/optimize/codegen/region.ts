// One fused region -> its generated code: the functors and launcher (.cu, no torch headers), the host
// function (.cpp, builds the iteration shape and strided views, raises on a CUDA error) and the Python
// method of ModelNew (checks the inputs, calls the kernel, or runs the reference's own ops otherwise).
import type { Arg, GraphNode, TensorMeta } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { floatLiteral, POINTWISE, scalarValue } from "../ops/pointwise.ts";
import { accumulatorOf, REDUCTIONS, type ReduceSpec } from "../ops/reduce.ts";
import { SCANS, scanDim } from "../ops/scan.ts";
import { anchorBias } from "../plan/anchors.ts";
import { argNodeIds, type GraphView, intList, paramReader } from "../plan/graph-view.ts";
import { type Region, regionNodes } from "../plan/planner.ts";
import { poolRegionStream } from "../plan/pool-prologue.ts";
import { isMaxPool, normDims, poolDims, reduceSpecOf, reductionDims, seedInput } from "../plan/rules.ts";
import { type NameOf, pyArg, pyScalar, pyStatement, selfPath } from "./python-expr.ts";
import { recipeBuilder, recipeCall } from "./recipe-region.ts";

export interface RegionCode {
  /** Functors + launcher for the .cu unit. */
  cuda: string;
  /** Launcher declaration + host function for the .cpp unit. */
  host: string;
  /** Name of the host function (exported to Python). */
  fn: string;
  /** Further host functions the method calls (an anchor's layout conversion). */
  helperFns?: string[];
  /** The ModelNew method (indented one level). */
  method: string;
  /** The method call that replaces the region in forward: `self._kf_r0(v_conv)`. */
  call: string;
  /** What the region replaced, for comments and the report. */
  summary: string;
  /** A recipe region: the kernels/<recipe>/ whose runtime the method calls (no generated code). */
  recipe: string | null;
}

const CPP_TYPE: Record<string, string> = {
  float32: "float",
  float16: "__half",
  bfloat16: "__nv_bfloat16",
  int64: "int64_t",
  int32: "int32_t", // read only, converted to fp32 (rules.ts readsIntegerAsFloat), as the narrower ones
  int16: "int16_t",
  int8: "int8_t",
  uint8: "uint8_t",
  bool: "bool", // read only: masks (masked_fill's, where's condition)
};
const AT_TYPE: Record<string, string> = {
  float32: "at::kFloat",
  float16: "at::kHalf",
  bfloat16: "at::kBFloat16",
  int64: "at::kLong",
};

interface Operand {
  /** Python expression of the value passed to the kernel. */
  py: string;
  dtype: string;
  /** Identity of the value (dedupes an operand used twice). */
  key: string;
}

/** Collects a region's operands and runtime scalars while its C++ expressions are written. */
class OperandTable {
  readonly operands: Operand[] = [];
  readonly scalars: string[] = [];

  constructor(
    private readonly view: GraphView,
    private readonly nameOf: NameOf,
    private readonly adapt: (
      py: string,
      meta: TensorMeta,
      layout: "broadcast" | "channel" | "trailing",
    ) => string,
  ) {}

  tensor(arg: Arg, layout: "broadcast" | "channel" | "trailing" = "broadcast"): string {
    const meta = this.view.tensorOf(arg);
    if (!meta) throw new Error("kforge internal: operand is not a tensor");
    return this.raw(this.adapt(this.pyOf(arg), meta, layout), meta.dtype);
  }

  /** A (C,) operand lined up with dim 1 of a rank-`rank` value (a pointwise op's `channel` operand): its
   * (C, 1, ..., 1) view, which then broadcasts as any operand. */
  channelTensor(arg: Arg, rank: number): string {
    const meta = this.view.tensorOf(arg);
    if (!meta) throw new Error("kforge internal: operand is not a tensor");
    const ones = Math.max(rank - 2, 0);
    const viewed = ones ? `${this.pyOf(arg)}.view(-1${", 1".repeat(ones)})` : this.pyOf(arg);
    const shape = [...meta.shape, ...Array<number>(ones).fill(1)];
    return this.raw(this.adapt(viewed, { ...meta, shape }, "broadcast"), meta.dtype);
  }

  private pyOf(arg: Arg): string {
    return arg.t === "param" ? selfPath(arg.path) : pyArg(arg, this.nameOf);
  }

  /** An operand computed by the region's method itself (its Python expression as given). */
  raw(py: string, dtype: string): string {
    let index = this.operands.findIndex((o) => o.key === py);
    if (index < 0) {
      index = this.operands.length;
      this.operands.push({ py, dtype, key: py });
    }
    return `x[${index}]`;
  }

  /** The runtime scalar computed by Python expression `py` when the region's method runs, as C++. */
  private runtimeScalar(py: string): string {
    let index = this.scalars.indexOf(py);
    if (index < 0) {
      index = this.scalars.length;
      this.scalars.push(py);
    }
    return `sc.v[${index}]`;
  }

  scalar(arg: Extract<Arg, { t: "const" }>): string {
    if (arg.attr) return this.runtimeScalar(`float(${selfPath(arg.attr)})`);
    const value = scalarValue(arg);
    if (value === null) throw new Error(`kforge internal: scalar ${String(arg.value)} is not a number`);
    return floatLiteral(value);
  }

  /** A Python number another node computed, read when the region's method runs. */
  numberValue(arg: Arg): string {
    return this.runtimeScalar(`float(${pyArg(arg, this.nameOf)})`);
  }

  runtime = (arg: Arg): string | null => (arg.t === "const" ? this.scalar(arg) : null);

  /** A tensor argument's size along `dim`, as a runtime scalar read when the region's method runs: the
   * iteration shape's (`shape`, the broadcast of the region's operands; its rule makes the argument span it),
   * since the argument itself may be computed inside the region. Reductions only (they bind `shape` first). */
  sizeOf = (arg: Arg, dim: number): string | null => {
    const meta = this.view.tensorOf(arg);
    if (!meta || dim >= meta.shape.length) return null;
    return this.runtimeScalar(`float(shape[${dim}])`);
  };
}

/** C++ statements computing pointwise `nodes`; `resolveArg` resolves args that are not among them. `rounded`:
 * the half-precision results rounded to their dtype (regionRounding; by default those of `nodes` alone). */
function pointwiseLines(
  view: GraphView,
  nodes: string[],
  table: OperandTable,
  resolveArg: (arg: Arg) => string | null,
  rounded: Map<string, string> = roundedHalves(view, nodes),
): string[] {
  const inside = new Set(nodes);
  const lines: string[] = [];
  for (const id of nodes) {
    const node = view.node(id);
    const spec = POINTWISE[node.op];
    const fn = node.fn;
    if (!spec || !fn) throw new Error(`kforge internal: ${node.op} has no pointwise form`);
    const operands = spec.operands.map((key) => {
      const arg = fn[key];
      if (!arg || (arg.t === "const" && arg.pytype === "none")) return "";
      if (arg.t === "node" && inside.has(arg.id)) return `t_${arg.id}`;
      const resolved = resolveArg(arg);
      if (resolved !== null) return resolved;
      if (view.isNumberValue(arg)) return table.numberValue(arg);
      if (arg.t === "const") return table.scalar(arg);
      const rank = view.tensorOf(fn.input)?.shape.length ?? 0;
      return spec.channel?.includes(key) ? table.channelTensor(arg, rank) : table.tensor(arg);
    });
    const expr = spec.emit(operands, paramReader(fn, table.runtime));
    if (expr === null) throw new Error(`kforge internal: ${node.op} declined after planning`);
    const round = rounded.get(id);
    lines.push(`const float t_${id} = ${round ? `${round}(${expr})` : expr};`);
  }
  return lines;
}

const HALF_ROUNDING: Record<string, string> = { float16: "kf_round_f16", bfloat16: "kf_round_bf16" };

/** Ops whose result jumps where their input crosses a threshold (a rounding boundary, a comparison, an
 * argmax's tie): one half-precision ulp of an unrounded input moves them by a whole step. */
const STEP_OPS = new Set([
  ...["round", "floor", "ceil", "trunc", "frac", "sign", "sgn", "heaviside", "remainder", "fmod"],
  ...["gt", "lt", "ge", "le", "eq", "ne", "threshold", "hardshrink", "argmax", "argmin"],
]);

function isStep(node: GraphNode): boolean {
  const mode = node.fn?.rounding_mode;
  return STEP_OPS.has(node.op) || (node.op === "div" && mode?.t === "const" && mode.pytype === "str");
}

/** The half-precision results among `nodes` that are rounded to their dtype as PyTorch rounds them: those
 * whose value reaches a float32 result (`(x.half() * 3 + 1).float()`), inside `nodes` or past them, through
 * any later ops (`y = x * 0.1 + 1` stored half, read by `y.prod(1, dtype=torch.float32)` in another region),
 * where each rounding the reference made stays visible at float32's tolerance; and those reaching a step op
 * inside `nodes` (`torch.round(x * 3, decimals=1)` of fp16 x), which turns one ulp into a whole step. A chain
 * whose value stays in half precision to the outputs, through continuous ops only, computes in fp32
 * throughout: its output's own rounding and tolerance cover the intermediates'. */
function roundedHalves(view: GraphView, nodes: string[]): Map<string, string> {
  // `nodes` in graph order: a user comes after the values it reads.
  const inside = new Set(nodes);
  const reachesFloat = new Set<string>();
  const rounded = new Map<string, string>();
  const downstream = floatReach(view);
  for (const id of [...nodes].reverse()) {
    const reaches = view
      .usersOf(id)
      .some((u) =>
        inside.has(u)
          ? view.outMeta(view.node(u))?.dtype === "float32" || reachesFloat.has(u) || isStep(view.node(u))
          : downstream.has(u),
      );
    if (!reaches) continue;
    reachesFloat.add(id);
    const node = view.node(id);
    const round = HALF_ROUNDING[view.outMeta(node)?.dtype ?? ""];
    if (round && node.op !== "to") rounded.set(id, round);
  }
  return rounded;
}

const FLOAT_REACH = new WeakMap<GraphView, Set<string>>();

/** The graph's nodes whose value reaches a float32 result: a float32 output, or a user that reaches one. */
function floatReach(view: GraphView): Set<string> {
  const known = FLOAT_REACH.get(view);
  if (known) return known;
  const reach = new Set<string>();
  for (const node of [...view.graph.nodes].reverse()) {
    const own = view.outMeta(node)?.dtype === "float32";
    if (own || view.usersOf(node.id).some((u) => reach.has(u))) reach.add(node.id);
  }
  FLOAT_REACH.set(view, reach);
  return reach;
}

/** roundedHalves over a whole seeded region: its prologue, seed and epilogue. The seed is a user like the
 * others: a reduction or normalisation computing in float32 (`log_softmax(x * 3, dtype=torch.float32)` of
 * fp16 x) sees its half-precision prologue rounded, and a half-precision seed whose value reaches a float32
 * result (`softmax(x).float() * 2`, `x.sum(-1).float()`) is rounded itself, as PyTorch stores it. */
function regionRounding(view: GraphView, region: Region): Map<string, string> {
  return roundedHalves(view, [...region.prologue, ...(region.seed ? [region.seed] : []), ...region.epilogue]);
}

/** The seed's value `t_<seed>` (rounded as PyTorch stores it), then the region's pointwise epilogue reading it;
 * `held`: a tensor the epilogue reads as `v`, the value the kernel already holds for it. */
function seededEpilogue(
  view: GraphView,
  region: Region,
  seedId: string,
  seedExpr: string,
  table: OperandTable,
  rounded: Map<string, string>,
  held?: string,
  outer: (arg: Arg) => string | null = () => null,
): string[] {
  return [
    `const float t_${seedId} = ${roundedExpr(rounded, seedId, seedExpr)};`,
    ...pointwiseLines(
      view,
      region.epilogue,
      table,
      (arg) => {
        if (arg.t !== "node") return null;
        if (arg.id === seedId) return `t_${seedId}`;
        return arg.id === held ? "v" : outer(arg);
      },
      rounded,
    ),
  ];
}

function roundedExpr(rounded: Map<string, string>, id: string, expr: string): string {
  const round = rounded.get(id);
  return round ? `${round}(${expr})` : expr;
}

function indent(lines: string[], pad: string): string {
  return lines.map((l) => (l ? pad + l : l)).join("\n");
}

function describe(view: GraphView, ids: string[]): string {
  return ids.map((id) => view.node(id).op).join(" → ");
}

function dtypeList(operands: Operand[]): string {
  return `(${operands.map((o) => `torch.${o.dtype}`).join(", ")}${operands.length === 1 ? "," : ""})`;
}

/** Names a region method binds itself (operands, shapes, the launch's results; its other locals start with
 * `kf_`): a forward input by one of these names is renamed inside the method, or the method would overwrite it. */
const METHOD_LOCALS = new Set(["ins", "shape", "out", "stats", "geo", "out_shape", "ins_shape"]);

/** How a region method names the values `nameOf` names in forward: as forward does, except forward inputs that
 * clash with the method's own locals (`kf_`-prefixed names included), which take a fresh name. */
export function methodNames(inputs: string[], nameOf: NameOf): NameOf {
  const taken = new Set(inputs);
  const renamed = new Map<string, string>();
  for (const name of inputs) {
    if (!METHOD_LOCALS.has(name) && !name.startsWith("kf_")) continue;
    let fresh = `a_${name}`;
    while (taken.has(fresh)) fresh = `a_${fresh}`;
    taken.add(fresh);
    renamed.set(name, fresh);
  }
  return (id) => {
    const name = nameOf(id);
    return renamed.get(name) ?? name;
  };
}

/** Emits a region. `nameOf` names node values in the region's method (methodNames), `callerNameOf` in forward;
 * the method takes the region's external node values as arguments. */
export function generateRegion(
  view: GraphView,
  region: Region,
  nameOf: NameOf,
  callerNameOf: NameOf = nameOf,
): RegionCode {
  const ids = regionNodes(region);
  const inside = new Set(ids);
  const externals: string[] = [];
  for (const id of ids) {
    const node = view.node(id);
    for (const arg of [...node.args, ...Object.values(node.kwargs)]) collectExternal(arg, inside, externals);
  }
  const outNode = view.node(region.output);
  const outMeta = view.outMeta(outNode);
  if (!outMeta) throw new Error("kforge internal: region output is not a tensor");
  const fn = `kf_${region.id}`;
  const fallback = ids.flatMap((id) => pyStatement(view.node(id), nameOf).split("\n"));
  const params = externals.map(nameOf);
  const header = `def _kf_${region.id}(self${params.map((p) => `, ${p}`).join("")}):`;
  const call = `self._kf_${region.id}(${externals.map(callerNameOf).join(", ")})`;
  if (region.recipe) {
    // The recipe's runtime decides per call, modes included (it keeps BatchNorm's own bookkeeping).
    const recipe = region.recipe.name;
    const summary = `${describe(view, ids)} (${recipe} recipe)`;
    const fast = recipeCall(view, region, nameOf);
    const method = [
      `    ${header}`,
      `        """${summary}: ${recipeBuilder(recipe) ? "the recipe's kernels" : "the same math rewritten"}; the reference's ops when the inputs are not what they cover."""`,
      `        if ${JSON.stringify(region.id)} not in _KF_DISABLED and ${fast.guard}:`,
      indent(fast.body, "            "),
      indent(fallback, "        "),
      `        return ${nameOf(region.output)}`,
    ].join("\n");
    return { cuda: "", host: "", fn, method, call, summary, recipe };
  }
  const summary = `${describe(view, ids)} (${region.rule})`;
  // Mode-dependent module calls (BatchNorm, Dropout) were planned for the mode captured: another mode takes
  // the reference's ops.
  const modeGuards = ids
    .map((id) => view.node(id))
    .filter((node) => node.modeDependent && node.kind === "call_module")
    .map(
      (node) =>
        ` and ${selfPath(node.target)}.training is ${view.graph.modules[node.target]?.training === false ? "False" : "True"}`,
    )
    .join("");
  // A cast to a dtype read at run time (dtype-reads.ts) was planned for the dtype captured: while the read gives
  // another, the reference's ops. A read inside the region follows from the operands' dtypes, which are checked.
  const dtypeGuards = ids
    .map((id) => view.node(id).fn)
    .map((fn) => ({ source: fn?.dtype_guard, dtype: fn?.dtype }))
    .flatMap(({ source, dtype }) => {
      if (source?.t !== "node" || inside.has(source.id) || dtype?.t !== "const") return [];
      const read = view.tensorOf(source) ? `${nameOf(source.id)}.dtype` : nameOf(source.id);
      return [` and ${read} == torch.${String(dtype.value)}`];
    })
    .join("");
  const attrGuards = structuralAttrGuards(view, ids) + sizeReadGuards(view, ids, nameOf);
  const gen = region.kind === "recipe" ? undefined : KIND_GENERATORS[region.kind];
  if (!gen) throw new Error(`kforge internal: recipe region ${region.id} without its recipe`);
  const body = gen(view, region, nameOf, fn, outMeta);
  const ready = `_kf_ready(ins, ${dtypeList(body.operands)}, ${body.rank})`;
  const bodyGuards = (body.guards ?? []).map((guard) => ` and ${guard}`).join("");
  const enabled = `${JSON.stringify(region.id)} not in _KF_DISABLED${modeGuards}${dtypeGuards}${attrGuards}${bodyGuards}`;
  const doc = `        """${summary}: one generated kernel; the reference's ops when the inputs are not what it covers."""`;
  const fast = body.anchorPy
    ? [
        `        if ${enabled}:`,
        `            kf_anchor = ${body.anchorPy}`,
        "            if kf_anchor is not None:",
        indent(body.pyPrelude, "                "),
        `                if ${ready}:`,
        indent(body.pyLaunch, "                    "),
      ]
    : [
        indent(body.pyPrelude, "        "),
        `        if ${enabled} and ${ready}:`,
        indent(body.pyLaunch, "            "),
      ];
  const method = [
    `    ${header}`,
    doc,
    ...fast,
    indent(fallback, "        "),
    `        return ${nameOf(region.output)}`,
  ]
    .filter((l) => l !== "")
    .join("\n");
  return {
    cuda: body.cuda,
    host: body.host,
    fn,
    helperFns: body.helperFns,
    method,
    call,
    summary,
    recipe: null,
  };
}

/** Integer and boolean arguments a module attribute holds (dim=self.dim, keepdim=self.keep) were fixed when the
 * kernel was planned (a dim, a window): while an attribute holds another value, the reference's ops. Float
 * arguments are read from the attribute at run time (runtimeScalar) and need no guard. */
function structuralAttrGuards(view: GraphView, ids: string[]): string {
  const captured = new Map<string, string>();
  const visit = (arg: Arg): void => {
    if (arg.t === "list") for (const item of arg.items) visit(item);
    else if (arg.t === "const" && arg.attr && (arg.pytype === "int" || arg.pytype === "bool"))
      captured.set(arg.attr, pyScalar(arg, false));
  };
  // A module call's hyper-parameters are in its normalised call only (`self.softmax(x)`: dim is nn.Softmax's).
  for (const id of ids) {
    const node = view.node(id);
    for (const arg of [...node.args, ...Object.values(node.kwargs), ...Object.values(node.fn ?? {})])
      visit(arg);
  }
  return [...captured].map(([attr, value]) => ` and ${selfPath(attr)} == ${value}`).join("");
}

/** Checks that the values a region's ops take from shapes (plan/size-reads.ts) are still the captured ones. */
function sizeReadGuards(view: GraphView, ids: string[], nameOf: NameOf): string {
  const captured = new Map<string, string>();
  const visit = (arg: Arg): void => {
    if (arg.t === "list") for (const item of arg.items) visit(item);
    else if (arg.t === "const" && arg.read)
      captured.set(arg.read, pyScalar({ ...arg, read: undefined }, false));
  };
  for (const id of ids) for (const arg of Object.values(view.node(id).fn ?? {})) visit(arg);
  return [...captured].map(([id, value]) => ` and ${nameOf(id)} == ${value}`).join("");
}

function collectExternal(arg: Arg, inside: Set<string>, into: string[]): void {
  if (arg.t === "node" && !inside.has(arg.id) && !into.includes(arg.id)) into.push(arg.id);
  else if (arg.t === "list") for (const item of arg.items) collectExternal(item, inside, into);
  else if (arg.t === "dict")
    for (const item of [...arg.keys, ...arg.values]) collectExternal(item, inside, into);
  else if (arg.t === "slice")
    for (const a of [arg.start, arg.stop, arg.step]) collectExternal(a, inside, into);
}

interface KindCode {
  cuda: string;
  host: string;
  operands: Operand[];
  /** Rank the kernel was planned for (-1: any). */
  rank: number;
  pyPrelude: string[];
  pyLaunch: string[];
  /** An anchored region: the Python expression computing the anchor as `kf_anchor` (None: not covered),
   * before `pyPrelude` runs. */
  anchorPy?: string;
  helperFns?: string[];
  /** Conditions beyond the operands' that the fast path needs (Python, in the region's scope). */
  guards?: string[];
}

type KindGenerator = (
  view: GraphView,
  region: Region,
  nameOf: NameOf,
  fn: string,
  out: TensorMeta,
) => KindCode;

const broadcastAdapt = (py: string) => py;

function channelAdapt(rank: number) {
  return (py: string, _meta: TensorMeta, layout: string) =>
    layout === "channel" ? `${py}.view(-1${", 1".repeat(Math.max(rank - 2, 0))})` : py;
}

/** Group norm's operands as its [N, G, C/G, rest] view (`ins_shape`: the normalised input's shape). */
function groupAdapt(groups: number) {
  return (py: string, _meta: TensorMeta, layout: string) =>
    layout === "channel" ? `${py}.view(${groups}, -1, 1)` : `_kf_groups(${py}, ins_shape, ${groups})`;
}

function functor(
  name: string,
  kIn: number,
  signature: string,
  lines: string[],
  result: string,
  returns = "float",
  traits: string[] = [],
): string {
  return [
    `struct ${name} {`,
    `  static constexpr int kIn = ${kIn};`,
    ...traits.map((t) => `  ${t}`),
    `  __device__ __forceinline__ ${returns} operator()(${signature}) const {`,
    indent(lines, "    "),
    `    return ${result};`,
    "  }",
    "};",
  ].join("\n");
}

/** Rows of the innermost dims longer than the held-row kernels' 32 values per thread (16K) and within their long
 * form's 64 (kf_normalize.cuh, kLongRows): the captured shape asks for that kernel's instantiation. */
function heldRowsAreLong(shape: number[], dims: number[]): boolean {
  const sorted = [...dims].sort((a, b) => a - b);
  const innermost = sorted.every((d, i) => d === shape.length - sorted.length + i);
  const length = sorted.reduce((n, d) => n * (shape[d] ?? 1), 1);
  return sorted.length > 0 && innermost && length > 512 * 32 && length <= 512 * 64;
}

function pyList(items: string[]): string {
  return `[${items.join(", ")}]`;
}

function operandTuple(operands: Operand[]): string {
  return `ins = (${operands.map((o) => o.py).join(", ")}${operands.length === 1 ? "," : ""})`;
}

function types(operands: Operand[]): string {
  return operands.map((o) => CPP_TYPE[o.dtype] ?? "float").join(", ");
}

/** The host function `fn` (torch side): refs and scalars from its arguments, a workspace, then `launch`. It
 * returns a new output tensor, or (kind "stats") the `stats` tensor the launch filled. */
function hostFunction(fn: string, launch: string, outDtype: string, kind: string, nIn: number): string {
  const statsOnly = kind === "stats";
  return [
    `cudaError_t ${fn}_launch(${LAUNCH_PARAMS[kind]});`,
    `size_t ${fn}_workspace(const KfShape& shape, uint32_t mask);`,
    `at::Tensor ${fn}(const std::vector<at::Tensor>& in, const std::vector<double>& sc, const std::vector<int64_t>& iter,`,
    `                 int64_t mask, const std::vector<int64_t>& out_shape, const std::vector<int64_t>& geo, at::Tensor stats) {`,
    `  kf_check_inputs(in, ${nIn}, "${fn}");`,
    "  const KfShape shape = kf_shape_of(iter);",
    "  KfTensorRef refs[KF_MAX_INPUTS];",
    "  for (size_t k = 0; k < in.size(); ++k) refs[k] = kf_ref(in[k], shape);",
    "  const KfScalars scalars = kf_scalars(sc);",
    statsOnly
      ? "  at::Tensor out = stats;"
      : `  at::Tensor out = at::empty(out_shape, in[0].options().dtype(${AT_TYPE[outDtype] ?? "at::kFloat"}));`,
    `  at::Tensor ws = kf_workspace(${fn}_workspace(shape, static_cast<uint32_t>(mask)), in[0]);`,
    "  const c10::cuda::CUDAGuard guard(in[0].device());",
    "  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();",
    `  kf_check_cuda(${launch}, "${fn}");`,
    `  (void)geo; (void)stats;${statsOnly ? " (void)out_shape;" : ""}`,
    "  return out;",
    "}",
  ].join("\n");
}

/** The host function of a kind whose launch takes its own arguments (pool, scan): the inputs from `firstRef` on
 * seen through the iteration shape (`iter`, or the output's `out_shape`), a new output of that shape, then `launch`
 * (the lines calling `${fn}_launch`). */
function ownLaunchHost(
  fn: string,
  kind: string,
  nIn: number,
  shapeArg: "iter" | "out_shape",
  firstRef: 0 | 1,
  outDtype: string,
  launch: string[],
): string {
  return [
    `cudaError_t ${fn}_launch(${LAUNCH_PARAMS[kind]});`,
    `at::Tensor ${fn}(const std::vector<at::Tensor>& in, const std::vector<double>& sc, const std::vector<int64_t>& iter,`,
    "                 int64_t mask, const std::vector<int64_t>& out_shape, const std::vector<int64_t>& geo, at::Tensor stats) {",
    `  kf_check_inputs(in, ${nIn}, "${fn}");`,
    `  const KfShape shape = kf_shape_of(${shapeArg});`,
    "  KfTensorRef refs[KF_MAX_INPUTS];",
    firstRef
      ? "  for (size_t k = 1; k < in.size(); ++k) refs[k - 1] = kf_ref(in[k], shape);"
      : "  for (size_t k = 0; k < in.size(); ++k) refs[k] = kf_ref(in[k], shape);",
    "  const KfScalars scalars = kf_scalars(sc);",
    `  at::Tensor out = at::empty(${shapeArg}, in[0].options().dtype(${AT_TYPE[outDtype] ?? "at::kFloat"}));`,
    "  const c10::cuda::CUDAGuard guard(in[0].device());",
    "  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();",
    ...launch,
    "  return out;",
    "}",
  ].join("\n");
}

const LAUNCH_PARAMS: Record<string, string> = {
  pointwise:
    "const KfShape& shape, void* out, const KfTensorRef* in, const KfScalars& sc, cudaStream_t stream",
  reduce:
    "const KfShape& shape, uint32_t mask, void* out, const KfTensorRef* in, const KfScalars& sc, void* ws, size_t ws_bytes, cudaStream_t stream",
  normalize:
    "const KfShape& shape, uint32_t mask, void* out, const KfTensorRef* in, const KfScalars& sc, float* stats, void* ws, size_t ws_bytes, cudaStream_t stream",
  stats:
    "const KfShape& shape, uint32_t mask, const KfTensorRef* in, const KfScalars& sc, float* stats, void* ws, size_t ws_bytes, cudaStream_t stream",
  pool: "const int64_t* geo, int ngeo, const int64_t* in_shape, int in_rank, const void* in, void* out, const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream",
  scan: "const KfShape& shape, int dim, bool reverse, void* out, const KfTensorRef* in, const KfScalars& sc, cudaStream_t stream",
};

/** An anchored region's first operands (the anchor's output, then its bias per channel) and the line that
 * adds them; `resolve` maps the anchor's value inside the functor. Called before any other operand is
 * registered, so the anchor is operand 0 (the host takes the output's device from it). `groups`: the
 * region iterates over group norm's [N, G, C/G, rest] view, and so do these operands. */
function anchorOperands(
  view: GraphView,
  region: Region,
  table: OperandTable,
  nameOf: NameOf,
  fn: string,
  groups = 0,
) {
  const id = region.anchor;
  if (!id) return { lines: [], resolve: () => null, anchorPy: undefined, rank: -1, inDtype: null };
  const node = view.node(id);
  const meta = view.outMeta(node);
  if (!meta) throw new Error("kforge internal: anchor output is not a tensor");
  const value = table.raw(groups ? `_kf_groups(kf_anchor, ins_shape, ${groups})` : "kf_anchor", meta.dtype);
  const bias = anchorBiasTerm(view, node, table, groups);
  const inMeta = view.tensorOf(node.fn?.input);
  if (!inMeta) throw new Error("kforge internal: anchor input is not a node");
  const channelsLast = region.anchorLayout === "channels_last";
  return {
    lines: [`const float t_${id} = ${value}${bias};`],
    resolve: (arg: Arg) => (arg.t === "node" && arg.id === id ? `t_${id}` : null),
    anchorPy: anchorCall(region, node, nameOf, channelsLast ? fn : null),
    rank: meta.shape.length,
    inDtype: channelsLast ? inMeta.dtype : null,
  };
}

/** ` + <bias>` adding an anchor's conv bias per channel (an operand registered in `table`; `groups`: seen
 * through group norm's [N, G, C/G, rest] view), or "" for a conv without one. */
function anchorBiasTerm(view: GraphView, node: GraphNode, table: OperandTable, groups = 0): string {
  const biasPath = anchorBias(node);
  const meta = view.outMeta(node);
  if (!biasPath || !meta) return "";
  const biasView = groups ? `view(${groups}, -1, 1)` : `view(-1${", 1".repeat(meta.shape.length - 2)})`;
  return ` + ${table.raw(`${selfPath(biasPath)}.${biasView}`, view.graph.params[biasPath]?.meta.dtype ?? meta.dtype)}`;
}

/** The Python expression computing a region's anchor (`kf_anchor`): its conv without the bias, which the kernel
 * adds; `transposeFn`: the region's host function whose `_cl` kernel converts a channels-last anchor's input
 * (null: the anchor runs in the reference's layout). */
function anchorCall(region: Region, node: GraphNode, nameOf: NameOf, transposeFn: string | null): string {
  const input = node.fn?.input;
  if (input?.t !== "node") throw new Error("kforge internal: anchor input is not a node");
  // The kernel's name, not the kernel: the extension is built only once the anchor's checks pass (on CUDA).
  const transpose = transposeFn ? JSON.stringify(`${transposeFn}_cl`) : "None";
  const bias = anchorBias(node) ? "True" : "False";
  return `_kf_conv_anchor(${selfPath(node.target)}, ${pyArg(input, nameOf)}, ${transpose}, ${bias}${region.anchorExact ? ", exact=True" : ""})`;
}

/** A pointwise host function `fn` over the elementwise template: functor `name` (given), its launcher and
 * the host side (operand types `inTypes`, C++ names; output dtype `outDtype`). */
function pointwiseFunction(
  fn: string,
  name: string,
  functorCode: string,
  outDtype: string,
  inTypes: string[],
) {
  const cuda = [
    functorCode,
    `cudaError_t ${fn}_launch(${LAUNCH_PARAMS.pointwise}) {`,
    `  return kf_launch_elementwise<${name}, ${CPP_TYPE[outDtype] ?? "float"}, ${inTypes.join(", ")}>(shape, out, in, sc, stream);`,
    "}",
    `size_t ${fn}_workspace(const KfShape&, uint32_t) { return 0; }`,
  ].join("\n");
  const launch = `${fn}_launch(shape, out.data_ptr(), refs, scalars, stream)`;
  return { cuda, host: hostFunction(fn, launch, outDtype, "pointwise", inTypes.length) };
}

/** An identity pointwise function: a permuted view in, its contiguous copy out (a layout change). */
function layoutCopy(fn: string, id: string, dtype: string): { cuda: string; host: string } {
  const name = `KfCopy_${id}`;
  const copy = functor(name, 1, "const float (&x)[1], const KfScalars&", [], "x[0]");
  return pointwiseFunction(fn, name, copy, dtype, [CPP_TYPE[dtype] ?? "float"]);
}

const generatePointwise: KindGenerator = (view, region, nameOf, fn, out) => {
  const table = new OperandTable(view, nameOf, broadcastAdapt);
  const anchor = anchorOperands(view, region, table, nameOf, fn);
  const lines = [...anchor.lines, ...pointwiseLines(view, region.epilogue, table, anchor.resolve)];
  const name = `KfPw_${region.id}`;
  const nIn = table.operands.length;
  const signature = `const float (&x)[${Math.max(nIn, 1)}], const KfScalars& sc`;
  const { cuda, host } = pointwiseFunction(
    fn,
    name,
    functor(name, nIn, signature, lines, `t_${region.output}`),
    out.dtype,
    table.operands.map((o) => CPP_TYPE[o.dtype] ?? "float"),
  );
  return withInputConversion(
    {
      cuda,
      host,
      operands: table.operands,
      rank: anchor.rank,
      pyPrelude: [operandTuple(table.operands)],
      pyLaunch: [
        "shape = _kf_broadcast(ins)",
        `return _kf_ext().${fn}(list(ins), ${pyList(table.scalars)}, shape, 0, shape, _KF_NO_INTS, _KF_NO_TENSOR)`,
      ],
      anchorPy: anchor.anchorPy,
    },
    anchor.inDtype,
    fn,
    region.id,
  );
};

/** A region whose anchor runs channels-last also carries the kernel converting the anchor's input (the tiled
 * transpose: faster than PyTorch's strided copy), named `${fn}_cl` as the anchor's call expects. */
function withInputConversion(code: KindCode, inDtype: string | null, fn: string, id: string): KindCode {
  if (!inDtype) return code;
  const convert = layoutCopy(`${fn}_cl`, id, inDtype);
  return {
    ...code,
    cuda: `${code.cuda}\n${convert.cuda}`,
    host: `${code.host}\n${convert.host}`,
    helperFns: [...(code.helperFns ?? []), `${fn}_cl`],
  };
}

function maskOf(dims: number[]): number {
  return dims.reduce((m, d) => m | (1 << d), 0);
}

/** regionRounding, and a half-precision reduction's value and epilogue rounded as PyTorch stores them whatever
 * they reach: once per output, so free, and a sum past half precision's range is inf before `/ n` as in PyTorch. */
function reduceRounding(view: GraphView, region: Region): Map<string, string> {
  const rounded = regionRounding(view, region);
  for (const id of [...(region.seed ? [region.seed] : []), ...region.epilogue]) {
    const node = view.node(id);
    const round = HALF_ROUNDING[view.outMeta(node)?.dtype ?? ""];
    if (round && node.op !== "to") rounded.set(id, round);
  }
  return rounded;
}

const generateReduce: KindGenerator = (view, region, nameOf, fn, out) => {
  const seed = view.node(region.seed ?? "");
  const spec = reduceSpecOf(seed, view);
  const seedFn = seed.fn;
  const inMeta = view.tensorOf(seedInput(seed));
  const dims = reductionDims(seed, view);
  if (!spec || !seedFn || !inMeta || !dims) throw new Error(`kforge internal: ${seed.op} is not a reduction`);
  const rounded = reduceRounding(view, region);
  // A loss finished over its rows (spec.finish) writes its rows in fp32: the mean or sum over them rounds once.
  if (spec.finish) rounded.delete(seed.id);
  const norm = region.norm ? normInPrologue(view, region, nameOf, fn, inMeta.shape.length, rounded) : null;
  const table = norm?.table ?? new OperandTable(view, nameOf, broadcastAdapt);
  const anchor = norm?.anchor ?? anchorOperands(view, region, table, nameOf, fn);
  const proLines = norm
    ? norm.lines
    : [...anchor.lines, ...pointwiseLines(view, region.prologue, table, anchor.resolve, rounded)];
  const values = spec.operands.map((key) => {
    const arg = seedFn[key];
    if (spec.optional?.includes(key) && (!arg || (arg.t === "const" && arg.pytype === "none"))) return "";
    if (!arg) return "0.f";
    if (arg.t === "node" && region.prologue.includes(arg.id)) return `t_${arg.id}`;
    const anchored = anchor.resolve(arg);
    if (anchored) return anchored;
    if (arg.t === "const") return table.scalar(arg);
    // Class indices lack the scores' class dim 1: their (N, 1, ...) view broadcasts along it.
    if (spec.integerOperands?.includes(key) && inMeta.shape.length > 1)
      return table.raw(`${pyArg(arg, nameOf)}.unsqueeze(1)`, view.tensorOf(arg)?.dtype ?? "int64");
    return table.tensor(arg);
  });
  const operandIndex = (key: string) => {
    const index = values[spec.operands.indexOf(key)]?.match(/^x\[(\d+)\]$/)?.[1];
    if (index === undefined) throw new Error(`kforge internal: ${seed.op}'s ${key} is not an operand`);
    return Number(index);
  };
  const operandPy = (key: string) => `ins[${operandIndex(key)}]`;
  const reader = paramReader(seedFn, table.runtime, table.sizeOf);
  const proExpr = spec.pro(values, reader);
  const epiExpr = spec.epi(reader);
  const acc = accumulatorOf(spec, reader);
  if (proExpr === null || epiExpr === null || acc === null)
    throw new Error(`kforge internal: ${seed.op} declined after planning`);
  const epiLines = [`const float t_${seed.id} = ${roundedExpr(rounded, seed.id, epiExpr)};`];
  // A (values, indices) reduction's `[i]` is its value (the indices: reduceSpecOf gave argmax/argmin).
  const pairValues = REDUCTIONS[seed.op]?.valuesOfPair ? region.epilogue[0] : undefined;
  if (pairValues) epiLines.push(`const float t_${pairValues} = t_${seed.id};`);
  epiLines.push(
    ...pointwiseLines(
      view,
      region.epilogue.filter((id) => id !== pairValues),
      table,
      (arg) => (arg.t === "node" && (arg.id === seed.id || arg.id === pairValues) ? `t_${arg.id}` : null),
      rounded,
    ),
  );
  const nIn = table.operands.length;
  const pro = `KfPro_${region.id}`;
  const epi = `KfEpi_${region.id}`;
  const rowsDtype = spec.finish ? "float32" : out.dtype;
  const outType = spec.index ? "int64_t" : CPP_TYPE[rowsDtype];
  const cuda = [
    functor(
      pro,
      nIn,
      `const float (&x)[${Math.max(nIn, 1)}], const KfScalars& sc`,
      proLines,
      proExpr,
      spec.value,
    ),
    [
      `struct ${epi} {`,
      "  __device__ __forceinline__ float operator()(const KfAccResult& r, const KfScalars& sc) const {",
      indent(epiLines, "    "),
      `    return t_${region.output};`,
      "  }",
      "};",
    ].join("\n"),
    `cudaError_t ${fn}_launch(${LAUNCH_PARAMS.reduce}) {`,
    `  return kf_launch_reduce<${pro}, ${acc}, ${epi}, ${outType}, ${types(table.operands)}>(shape, mask, out, in, sc, ws, ws_bytes, stream);`,
    "}",
    `size_t ${fn}_workspace(const KfShape& shape, uint32_t mask) { return kf_reduce_workspace_bytes<${acc}>(shape, mask); }`,
  ].join("\n");
  const host = hostFunction(
    fn,
    `${fn}_launch(shape, static_cast<uint32_t>(mask), out.data_ptr(), refs, scalars, ws.data_ptr(), static_cast<size_t>(ws.numel()), stream)`,
    spec.index ? "int64" : rowsDtype,
    "reduce",
    nIn,
  );
  const rank = inMeta.shape.length;
  const kept = Array.from({ length: rank }, (_, i) => i).filter((d) => !dims.includes(d));
  // The reference's output shape; a group-norm prologue iterates over [N, G, C/G, rest] (norm.iterDims).
  const refShape = norm?.groups ? "ins_shape" : "shape";
  const iterDims = norm?.groups ? groupViewDims(dims) : dims;
  const iterKept = Array.from({ length: norm?.groups ? 4 : rank }, (_, i) => i).filter(
    (d) => !iterDims.includes(d),
  );
  const outView = pyList(
    out.shape.length === kept.length || spec.finish
      ? kept.map((d) => `${refShape}[${d}]`)
      : Array.from({ length: rank }, (_, d) => (dims.includes(d) ? "1" : `${refShape}[${d}]`)),
  );
  const call = `_kf_ext().${fn}(list(ins), ${pyList(table.scalars)}, shape, ${maskOf(iterDims)}, ${pyList(iterKept.map((d) => `shape[${d}]`))}, _KF_NO_INTS, _KF_NO_TENSOR)`;
  const launch = spec.finish
    ? finishLines(spec, seedFn, call, outView, operandPy, nameOf, out)
    : [`out = ${call}`, `return out.view(${outView})`];
  const code: KindCode = norm
    ? {
        cuda: `${cuda}\n${norm.cuda}`,
        host: `${host}\n${norm.host}${norm.runningStats ? `\n${runningStatsHost(fn)}` : ""}`,
        operands: table.operands.filter((_, i) => !norm.statsAt.includes(i)),
        rank: norm.groups ? 4 : rank,
        pyPrelude: [
          ...norm.prelude,
          operandTuple(table.operands.filter((_, i) => !norm.statsAt.includes(i))),
        ],
        pyLaunch: [...norm.launch(table.scalars), ...launch],
        anchorPy: anchor.anchorPy,
        helperFns: [`${fn}_stats`, ...(norm.runningStats ? [`${fn}_running`] : [])],
      }
    : {
        cuda,
        host,
        operands: table.operands,
        rank,
        pyPrelude: [operandTuple(table.operands)],
        pyLaunch: classTargetLaunch(spec, operandIndex, rank, launch) ?? [
          "shape = _kf_broadcast(ins)",
          ...launch,
        ],
        anchorPy: anchor.anchorPy,
      };
  return withInputConversion(code, anchor.inDtype, fn, region.id);
};

/** A loss over class-index targets: the iteration shape is the scores' (the targets broadcast along their class
 * dim), and the kernel runs only where the targets are shaped as the scores without it; other targets take the
 * reference's ops (which raise, as PyTorch does for a batch mismatch, rather than broadcast). */
function classTargetLaunch(
  spec: ReduceSpec,
  operandIndex: (key: string) => number,
  rank: number,
  launch: string[],
): string[] | null {
  const key = spec.integerOperands?.[0];
  if (!key) return null;
  const index = operandIndex(key);
  const expected = rank === 1 ? "[]" : "[shape[0], 1, *shape[2:]]";
  return [
    `shape = _kf_broadcast(ins[:${index}] + ins[${index + 1}:])`,
    `if list(ins[${index}].shape) == ${expected}:`,
    ...launch.map((line) => `    ${line}`),
  ];
}

/** The fast path's last lines for a loss finished over its rows: the kernel's fp32 rows in the kept dims'
 * shape, then the spec's mean / sum over them, in the reference output's dtype. */
function finishLines(
  spec: ReduceSpec,
  seedFn: Record<string, Arg>,
  call: string,
  outView: string,
  operandPy: (key: string) => string,
  nameOf: NameOf,
  out: TensorMeta,
): string[] {
  const reductionArg = seedFn.reduction;
  const reduction =
    reductionArg?.t === "const" && typeof reductionArg.value === "string" ? reductionArg.value : "mean";
  const arg = (key: string, fallback: string) => {
    const given = seedFn[key];
    return given && !(given.t === "const" && given.pytype === "none") ? pyArg(given, nameOf) : fallback;
  };
  const lines = spec.finish?.(operandPy, arg, reduction);
  if (!lines) throw new Error(`kforge internal: reduction=${reduction} has no finish`);
  const cast = out.dtype === "float32" ? "" : `.to(torch.${out.dtype})`;
  return [
    `out = ${call}.view(${outView})`,
    ...lines.map((line) => (line.startsWith("return ") && cast ? `return (${line.slice(7)})${cast}` : line)),
  ];
}

/** A reduction's dims over [N, C, spatial...] as dims of group norm's [N, G, C/G, rest] view (the planner
 * took the channels and the spatial dims whole: groupViewReduction). */
function groupViewDims(dims: number[]): number[] {
  const mapped: number[] = [];
  if (dims.includes(0)) mapped.push(0);
  if (dims.includes(1)) mapped.push(1, 2);
  if (dims.some((d) => d >= 2)) mapped.push(3);
  return mapped;
}

/** A normalisation node's kernel setup: its spec and call, the operand table (group norm's operands in its
 * [N, G, C/G, rest] view, others per channel of a rank-`rank` input) and the anchor's operands, registered first. */
function normSetup(
  view: GraphView,
  region: Region,
  node: GraphNode,
  nameOf: NameOf,
  fn: string,
  rank: number,
) {
  const spec = NORMALIZATIONS[node.op];
  const call = node.fn;
  const dims = normDims(node, view);
  if (!spec || !call || !dims || !call.input)
    throw new Error(`kforge internal: ${node.op} is not a normalisation`);
  const groups = spec.groups ? (intList(call.num_groups)?.[0] ?? 1) : 0;
  const table = new OperandTable(view, nameOf, groups ? groupAdapt(groups) : channelAdapt(rank));
  const anchor = anchorOperands(view, region, table, nameOf, fn, groups);
  return { spec, call, input: call.input, dims, groups, table, anchor };
}

/** The normalisation's apply of value `v` with statistics `s`, its parameters registered in `table` now. */
function normApplyExpr(node: GraphNode, table: OperandTable): string {
  const spec = NORMALIZATIONS[node.op];
  const call = node.fn ?? {};
  const params = (spec?.params ?? []).map((param) => {
    const arg = call[param.key];
    if (!arg || (arg.t === "const" && arg.pytype === "none")) return "";
    return table.tensor(arg, param.layout);
  });
  const applyExpr = spec?.apply("v", params, paramReader(call, table.runtime)) ?? null;
  if (applyExpr === null) throw new Error(`kforge internal: ${node.op} declined after planning`);
  return applyExpr;
}

/** The nodes of `among` that `arg`'s value is computed from. */
function ancestorsAmong(view: GraphView, arg: Arg, among: Set<string>): Set<string> {
  const found = new Set<string>();
  const visit = (a: Arg): void => {
    if (a.t === "list") for (const item of a.items) visit(item);
    if (a.t !== "node" || !among.has(a.id) || found.has(a.id)) return;
    found.add(a.id);
    for (const next of Object.values(view.node(a.id).fn ?? {})) visit(next);
  };
  visit(arg);
  return found;
}

/** A reduction region holding a normalisation in its prologue (planner: mergeNormsIntoReductions): the
 * normalisation's statistics come from their own launch (`${fn}_stats`, over the operands the norm's input
 * needs: the first `m`), then three broadcast views of them join the reduction's operands, and the prologue
 * applies the normalisation element by element. The normalised tensor is never written. */
function normInPrologue(
  view: GraphView,
  region: Region,
  nameOf: NameOf,
  fn: string,
  rank: number,
  rounded: Map<string, string>,
) {
  const normNode = view.node(region.norm ?? "");
  const { spec, call, input, dims, groups, table, anchor } = normSetup(
    view,
    region,
    normNode,
    nameOf,
    fn,
    rank,
  );
  // Running statistics to update: a training-mode batch norm with its buffers (none: nothing to update).
  const runningStats = !!spec.runningStats && hasRunningBuffers(normNode);
  // The statistics' launch reads the operands of the ops the norm's input needs, and only those: a prologue op
  // the norm does not read (`one_hot.float()` of `one_hot.float() * log_softmax(x)`) runs after it.
  const at = region.prologue.indexOf(normNode.id);
  const feeds = ancestorsAmong(view, input, new Set(region.prologue.slice(0, at)));
  const before = region.prologue.slice(0, at).filter((id) => feeds.has(id));
  const after = [
    ...region.prologue.slice(0, at).filter((id) => !feeds.has(id)),
    ...region.prologue.slice(at + 1),
  ];
  const beforeLines = [...anchor.lines, ...pointwiseLines(view, before, table, anchor.resolve, rounded)];
  const xExpr =
    input.t === "node" && before.includes(input.id)
      ? `t_${input.id}`
      : (anchor.resolve(input) ?? table.tensor(input));
  const vExpr = spec.value ? spec.value(xExpr, paramReader(call, table.runtime)) : xExpr;
  const m = table.operands.length;
  const statsAt = [m, m + 1, m + 2];
  const stats = ["kf_st[..., 0]", "kf_st[..., 1]", "kf_st[..., 2]"].map((py) => table.raw(py, "float32"));
  const applyExpr = normApplyExpr(normNode, table);
  const lines = [
    ...beforeLines,
    `const float t_${normNode.id} = [&] {`,
    `  const float v = ${vExpr};`,
    `  const KfStats s{${stats.join(", ")}};`,
    `  return ${roundedExpr(rounded, normNode.id, applyExpr)};`,
    "}();",
    // After the norm, an op may read a prologue value computed before it that the norm does not read
    // (`one_hot.float() * log_softmax(x)`): the same functor has it.
    ...pointwiseLines(
      view,
      after,
      table,
      (arg) =>
        arg.t === "node" && (arg.id === normNode.id || before.includes(arg.id))
          ? `t_${arg.id}`
          : (anchor.resolve(arg) ?? null),
      rounded,
    ),
  ];
  const pro = `KfNormPro_${region.id}`;
  const operandTypes = table.operands.slice(0, m);
  const cuda = [
    functor(pro, m, `const float (&x)[${m}], const KfScalars& sc`, beforeLines, vExpr),
    `cudaError_t ${fn}_stats_launch(${LAUNCH_PARAMS.stats}) {`,
    `  return kf_launch_normalize_stats<${pro}, ${spec.stat}, ${types(operandTypes)}>(shape, mask, in, sc, stats, ws, ws_bytes, stream);`,
    "}",
    `size_t ${fn}_stats_workspace(const KfShape& shape, uint32_t mask) { return kf_normalize_stats_workspace_bytes<${spec.stat}>(shape, mask); }`,
  ].join("\n");
  const host = hostFunction(
    `${fn}_stats`,
    `${fn}_stats_launch(shape, static_cast<uint32_t>(mask), refs, scalars, stats.data_ptr<float>(), ws.data_ptr(), static_cast<size_t>(ws.numel()), stream)`,
    "float32",
    "stats",
    m,
  );
  const normIter = groups ? [2, 3] : dims;
  const iterRank = groups ? 4 : rank;
  const keptView = Array.from({ length: iterRank }, (_, d) => (normIter.includes(d) ? "1" : `shape[${d}]`));
  const prelude = groups ? [`ins_shape = _kf_broadcast_shapes(${normInputShape(view, region, nameOf)})`] : [];
  const launch = (scalars: string[]) => [
    groups
      ? `shape = [ins_shape[0], ${groups}, ins_shape[1] // ${groups}, _kf_numel(ins_shape[2:])]`
      : "shape = _kf_broadcast(ins)",
    `kf_st = torch.empty((${normIter.length === iterRank ? "1" : `_kf_numel([${keptView.filter((k) => k !== "1").join(", ")}])`}, 3), device=ins[0].device, dtype=torch.float32)`,
    `_kf_ext().${fn}_stats(list(ins[:${m}]), ${pyList(scalars)}, shape, ${maskOf(normIter)}, shape, _KF_NO_INTS, kf_st)`,
    ...(runningStats
      ? [
          `_kf_running_stats(_kf_ext().${fn}_running, ${runningStatArgs(normNode)}, kf_st, _kf_numel(shape) / kf_st.shape[0])`,
        ]
      : []),
    `kf_st = kf_st.view(${pyList([...keptView, "3"])})`,
    `ins = ins[:${m}] + (kf_st[..., 0], kf_st[..., 1], kf_st[..., 2]) + ins[${m}:]`,
  ];
  return {
    table,
    anchor,
    lines,
    cuda,
    host,
    statsAt,
    prelude,
    launch,
    groups,
    runningStats,
  };
}

/** The shape of a merged normalisation's input, known before the region's method computes anything. */
function normInputShape(view: GraphView, region: Region, nameOf: NameOf): string {
  const input = view.node(region.norm ?? "").fn?.input;
  if (input?.t !== "node") throw new Error("kforge internal: merged group norm without a node input");
  return shapeInMethod(input, region, nameOf);
}

/** An argument's shape in the region's method: an anchor is computed there, as `kf_anchor`. */
function shapeInMethod(arg: Arg, region: Region, nameOf: NameOf): string {
  return arg.t === "node" && arg.id === region.anchor ? "kf_anchor.shape" : `${pyArg(arg, nameOf)}.shape`;
}

const generateNormalize: KindGenerator = (view, region, nameOf, fn, out) => {
  const seed = view.node(region.seed ?? "");
  const inMeta = view.tensorOf(seed.fn?.input);
  if (!inMeta) throw new Error(`kforge internal: ${seed.op} is not a normalisation`);
  const rank = inMeta.shape.length;
  const { spec, call, input, dims, groups, table, anchor } = normSetup(view, region, seed, nameOf, fn, rank);
  const rounded = regionRounding(view, region);
  const proLines = [
    ...anchor.lines,
    ...pointwiseLines(view, region.prologue, table, anchor.resolve, rounded),
  ];
  const xExpr =
    input.t === "node" && region.prologue.includes(input.id)
      ? `t_${input.id}`
      : (anchor.resolve(input) ?? table.tensor(input));
  const vExpr = spec.value ? spec.value(xExpr, paramReader(call, table.runtime)) : xExpr;
  const applyExpr = normApplyExpr(seed, table);
  // `softmax(x) * x`: the epilogue's x is the value v the kernel holds (v = Pro(x) = x without a prologue);
  // read as x[0] it kept the row twice in registers (rows_resident_kernel spilled 56 bytes at 24 values).
  const direct = input.t === "node" && !region.prologue.includes(input.id) && anchor.resolve(input) === null;
  const held = direct && input.t === "node" && vExpr === xExpr ? input.id : undefined;
  // `gn(conv(x)) + conv(x) * 0.5`: the epilogue reads the anchor's output, which the apply functor computes
  // from the anchor's operands as the prologue does (or is the held v, where the norm reads it unchanged).
  const anchorId = region.anchor;
  const readsAnchor = (id: string) =>
    Object.values(view.node(id).fn ?? {}).some((arg) => !!anchorId && argNodeIds(arg).includes(anchorId));
  const anchorRead = region.epilogue.some(readsAnchor);
  const anchorIsV = anchorRead && input.t === "node" && input.id === anchorId && vExpr === xExpr;
  const applyLines = [
    ...(anchorRead && !anchorIsV ? anchor.lines : []),
    ...seededEpilogue(
      view,
      region,
      seed.id,
      applyExpr,
      table,
      rounded,
      anchorIsV ? anchorId : held,
      anchor.resolve,
    ),
  ];
  const nIn = table.operands.length;
  const pro = `KfPro_${region.id}`;
  const apply = `KfApply_${region.id}`;
  // A channels-last anchor's output is transposed against the result: kf_normalize_cl.cuh's launcher reads it
  // in its own order and writes the reference's layout (and is the plain launcher otherwise).
  const launcher = anchor.inDtype ? "kf_launch_normalize_cl" : "kf_launch_normalize";
  const workspace = anchor.inDtype ? "kf_normalize_cl_workspace_bytes" : "kf_normalize_workspace_bytes";
  const cuda = [
    functor(
      pro,
      nIn,
      `const float (&x)[${nIn}], const KfScalars& sc`,
      proLines,
      vExpr,
      "float",
      !spec.groups && heldRowsAreLong(inMeta.shape, dims) ? ["static constexpr bool kLongRows = true;"] : [],
    ),
    functor(
      apply,
      nIn,
      `float v, const KfStats& s, const float (&x)[${nIn}], const KfScalars& sc`,
      applyLines,
      `t_${region.output}`,
    ),
    `cudaError_t ${fn}_launch(${LAUNCH_PARAMS.normalize}) {`,
    `  return ${launcher}<${pro}, ${spec.stat}, ${apply}, ${CPP_TYPE[out.dtype]}, ${types(table.operands)}>(shape, mask, out, in, sc, stats, ws, ws_bytes, stream);`,
    "}",
    `size_t ${fn}_workspace(const KfShape& shape, uint32_t mask) { return ${workspace}<${spec.stat}>(shape, mask); }`,
  ].join("\n");
  const host = hostFunction(
    fn,
    `${fn}_launch(shape, static_cast<uint32_t>(mask), out.data_ptr(), refs, scalars, stats.defined() && stats.numel() ? stats.data_ptr<float>() : nullptr, ws.data_ptr(), static_cast<size_t>(ws.numel()), stream)`,
    out.dtype,
    "normalize",
    nIn,
  );
  const iterDims = spec.groups ? [2, 3] : dims;
  // Group norm iterates over [N, G, C/G, rest]: its operands are reshaped to that (see _kf_groups), from the
  // shape of the normalised input, which is known before the operands are built.
  const prelude = spec.groups
    ? [`ins_shape = _kf_broadcast_shapes(${regionInputShapes(view, region, nameOf)})`]
    : [];
  const launch = spec.groups
    ? [`shape = [ins_shape[0], ${groups}, ins_shape[1] // ${groups}, _kf_numel(ins_shape[2:])]`]
    : ["shape = _kf_broadcast(ins)"];
  // A batch norm with running buffers: the kernel and their update in one host call (_kf_batch_norm).
  const deviceUpdate = !!spec.runningStats && hasRunningBuffers(seed);
  if (spec.runningStats)
    launch.push(
      `return _kf_batch_norm(_kf_ext().${fn}, ${deviceUpdate ? `_kf_ext().${fn}_bn` : "None"}, ins, ${pyList(table.scalars)}, shape, ${maskOf(iterDims)}, ${runningStatArgs(seed)})`,
    );
  else {
    launch.push(
      `out = _kf_ext().${fn}(list(ins), ${pyList(table.scalars)}, shape, ${maskOf(iterDims)}, shape, _KF_NO_INTS, _KF_NO_TENSOR)`,
    );
    launch.push(spec.groups ? "return out.view(ins_shape)" : "return out");
  }
  return withInputConversion(
    {
      cuda,
      host: deviceUpdate ? `${host}\n${batchNormHost(fn)}` : host,
      helperFns: deviceUpdate ? [`${fn}_bn`] : undefined,
      operands: table.operands,
      rank: spec.groups ? 4 : rank, // group norm's operands are its [N, G, C/G, rest] views
      pyPrelude: [...prelude, operandTuple(table.operands)],
      pyLaunch: launch,
      anchorPy: anchor.anchorPy,
    },
    anchor.inDtype,
    fn,
    region.id,
  );
};

function regionInputShapes(view: GraphView, region: Region, nameOf: NameOf): string {
  const seed = view.node(region.seed ?? "");
  const input = seed.fn?.input;
  const shapeOf = (arg: Arg) => shapeInMethod(arg, region, nameOf);
  if (input?.t === "node" && !region.prologue.includes(input.id)) return shapeOf(input);
  const shapes: string[] = [];
  for (const id of region.prologue) {
    for (const arg of Object.values(view.node(id).fn ?? {})) {
      if ((arg.t === "node" && !region.prologue.includes(arg.id)) || arg.t === "param") {
        if (view.tensorOf(arg)) shapes.push(shapeOf(arg));
      }
    }
  }
  return shapes.join(", ");
}

/** Running-statistics arguments; a module's momentum is read from the module at run time. */
/** The host function updating a batch norm's running statistics on the device (kf_running_stats.cuh), named
 * `${fn}_running`: `_kf_running_stats` in the runtime calls it, and takes PyTorch's ops where it declines. */
function runningStatsHost(fn: string): string {
  return [
    `bool ${fn}_running(at::Tensor stats, at::Tensor mean, at::Tensor var, at::Tensor batches, bool cumulative,`,
    "                   double momentum, double count) {",
    `  return kf_running_stats(stats, mean, var, batches, cumulative, momentum, count, "${fn}_running");`,
    "}",
  ].join("\n");
}

/** A training-mode batch norm region's kernel followed by the running statistics' update, in one host call
 * (`${fn}_bn`): the batch statistics are allocated and consumed in C++, and the update is one launch. An undefined
 * result (None) where kf_running_stats does not cover the buffers: `_kf_batch_norm` then takes the plain path. */
function batchNormHost(fn: string): string {
  return [
    `at::Tensor ${fn}_bn(const std::vector<at::Tensor>& in, const std::vector<double>& sc, const std::vector<int64_t>& iter,`,
    "                 int64_t mask, at::Tensor mean, at::Tensor var, at::Tensor batches, bool cumulative, double momentum) {",
    "  int64_t channels = 1;",
    "  double count = 1.0;",
    "  for (size_t d = 0; d < iter.size(); ++d) {",
    "    if ((mask >> d) & 1) count *= static_cast<double>(iter[d]);",
    "    else channels *= iter[d];",
    "  }",
    "  if (in.empty() || !kf_running_stats_covers(in[0], mean, var, batches, cumulative, channels)) return at::Tensor();",
    "  at::Tensor stats = at::empty({channels, 3}, in[0].options().dtype(at::kFloat));",
    `  at::Tensor out = ${fn}(in, sc, iter, mask, iter, {}, stats);`,
    `  kf_running_stats(stats, mean, var, batches, cumulative, momentum, count, "${fn}_bn");`,
    "  return out;",
    "}",
  ].join("\n");
}

/** Whether a batch norm updates running statistics (track_running_stats, or F.batch_norm given them). */
function hasRunningBuffers(node: GraphNode): boolean {
  return node.fn?.running_mean?.t === "param" && node.fn?.running_var?.t === "param";
}

function runningStatArgs(node: GraphNode): string {
  const fn = node.fn ?? {};
  const ref = (key: string) => {
    const arg = fn[key];
    return arg?.t === "param" ? selfPath(arg.path) : "None";
  };
  const momentum =
    node.kind === "call_module"
      ? `${selfPath(node.target)}.momentum`
      : fn.momentum?.t === "const"
        ? pyScalar(fn.momentum)
        : "0.1";
  return `${ref("running_mean")}, ${ref("running_var")}, ${ref("num_batches_tracked")}, ${momentum}`;
}

/** A pool's prologue (kf_pool.cuh's Pro): the stream's tap (its anchor's bias added), then the region's prologue
 * ops, the pooled input's value its result. Its operands are registered first, so the epilogue's follow them in
 * the one list both functors read. Null (KfPoolNoPrologue) for a pool of its input as it is. */
function poolPrologueParts(
  view: GraphView,
  region: Region,
  nameOf: NameOf,
  fn: string,
  table: OperandTable,
  rounded: Map<string, string>,
): { lines: string[]; result: string; stream: string; anchorPy?: string } | null {
  if (region.prologue.length === 0 && !region.anchor) return null;
  const stream = poolRegionStream(view, region);
  const pooled = view.node(region.seed ?? "").fn?.input;
  if (!stream || pooled?.t !== "node" || (region.anchor && region.anchor !== stream))
    throw new Error(`kforge internal: pool region ${region.id} has no stream its prologue reads`);
  const anchor = region.anchor ? view.node(region.anchor) : null;
  const tap = anchor ? `tap${anchorBiasTerm(view, anchor, table)}` : "tap";
  const anchorPy = anchor
    ? anchorCall(region, anchor, nameOf, region.anchorLayout === "channels_last" ? fn : null)
    : undefined;
  const isStream = (arg: Arg) => (arg.t === "node" && arg.id === stream ? `t_${stream}` : null);
  return {
    lines: [
      `const float t_${stream} = ${tap};`,
      ...pointwiseLines(view, region.prologue, table, isStream, rounded),
    ],
    result: `t_${pooled.id}`,
    stream,
    anchorPy,
  };
}

const generatePool: KindGenerator = (view, region, nameOf, fn, out) => {
  const seed = view.node(region.seed ?? "");
  const seedFn = seed.fn;
  const inMeta = view.tensorOf(seedFn?.input);
  if (!seedFn || !inMeta || !seedFn.input) throw new Error(`kforge internal: ${seed.op} is not a pool`);
  const nd = poolDims(seed.op);
  const table = new OperandTable(view, nameOf, broadcastAdapt);
  const rounded = regionRounding(view, region);
  const prologue = poolPrologueParts(view, region, nameOf, fn, table, rounded);
  const channelsLast = region.anchor !== undefined && region.anchorLayout === "channels_last";
  const epiLines = seededEpilogue(view, region, seed.id, "pooled", table, rounded);
  const nExtra = table.operands.length;
  const epi = `KfEpi_${region.id}`;
  const pro = prologue ? `KfPro_${region.id}` : "KfPoolNoPrologue";
  const kind = isMaxPool(seed.op) ? "KF_POOL_MAX" : "KF_POOL_AVG";
  const streamMeta = prologue ? view.tensorOf({ t: "node", id: prologue.stream }) : inMeta;
  if (!streamMeta) throw new Error(`kforge internal: pool region ${region.id} streams no tensor`);
  const inType = CPP_TYPE[streamMeta.dtype];
  const geo = poolGeometry(seed.op, seedFn, nd, (arg) => view.ints(arg));
  const xs = `const float (&x)[${Math.max(nExtra, 1)}], const KfScalars& sc`;
  const args = `${pro}, ${epi}, ${CPP_TYPE[out.dtype]}, ${inType}${nExtra ? `, ${types(table.operands)}` : ""}`;
  const launcher = channelsLast ? poolLauncherCl(geo, nd, kind, args) : poolLauncher(geo, nd, kind, args);
  const cuda = [
    ...(prologue ? [functor(pro, nExtra, `float tap, ${xs}`, prologue.lines, prologue.result)] : []),
    functor(epi, nExtra, `float pooled, ${xs}`, epiLines, `t_${region.output}`),
    `cudaError_t ${fn}_launch(${LAUNCH_PARAMS.pool}) {`,
    "  KfPoolParams p;",
    "  KF_RETURN_IF_ERROR(kf_pool_params_from(geo, ngeo, in_shape, in_rank, &p));",
    `  return ${launcher}(p, in, out, extra, sc, stream);`,
    "}",
  ].join("\n");
  // in[0] is the pooled stream, read by the pool geometry; the prologue's and epilogue's operands follow it.
  const host = ownLaunchHost(fn, "pool", nExtra + 1, "out_shape", 1, out.dtype, [
    "  const std::vector<int64_t> in_shape = in[0].sizes().vec();",
    `  kf_check_cuda(${fn}_launch(geo.data(), static_cast<int>(geo.size()), in_shape.data(), static_cast<int>(in_shape.size()), in[0].data_ptr(), out.data_ptr(), refs, scalars, stream), "${fn}");`,
    "  (void)iter; (void)mask; (void)stats;",
  ]);
  const streamPy = prologue?.anchorPy
    ? "kf_anchor"
    : pyArg(prologue ? { t: "node", id: prologue.stream } : seedFn.input, nameOf);
  // kf_pool_cl.cuh reads the channels-last conv's output as it is stored, the others read it contiguous.
  const layout = nd === 3 ? "torch.channels_last_3d" : "torch.channels_last";
  const operands: Operand[] = [
    {
      py: channelsLast ? `${streamPy}.contiguous(memory_format=${layout})` : `${streamPy}.contiguous()`,
      dtype: streamMeta.dtype,
      key: "in",
    },
    ...table.operands,
  ];
  // A channels-last conv's input is converted by the region's own tiled copy (`${fn}_cl`), as a pointwise
  // region's is.
  const convInput = channelsLast ? view.tensorOf(view.node(region.anchor ?? "").fn?.input) : null;
  const code: KindCode = {
    cuda,
    host,
    operands,
    rank: nd + 2,
    pyPrelude: [operandTuple(operands)],
    // The geometry was built from the sizes these arguments read at the captured shapes.
    guards: ["kernel_size", "stride", "padding", "dilation", "output_size"].flatMap((name) =>
      view.sizeReadGuards(seedFn[name], (id) => nameOf(id)),
    ),
    pyLaunch: [
      `geo = [${geo.join(", ")}]`,
      `out_shape = _kf_pool_out_shape(ins[0].shape, geo)`,
      `return _kf_ext().${fn}(list(ins), ${pyList(table.scalars)}, _KF_NO_INTS, 0, out_shape, geo, _KF_NO_TENSOR)`,
    ],
    anchorPy: prologue?.anchorPy,
  };
  return withInputConversion(code, convInput?.dtype ?? null, fn, region.id);
};

/** A cumulative sum or product (kf_scan.cuh) of the region's pointwise prologue along the call's dim, its
 * pointwise epilogue applied at each element. The iteration shape is the scan's own (the planner grows neither
 * side past it), so a line of the kernel is a line of the reference's scan. */
const generateScan: KindGenerator = (view, region, nameOf, fn, out) => {
  const seed = view.node(region.seed ?? "");
  const spec = SCANS[seed.op];
  const input = seed.fn?.input;
  const inMeta = view.tensorOf(input);
  const dim = scanDim(seed, view);
  if (!spec || !input || !inMeta || dim === null)
    throw new Error(`kforge internal: ${seed.op} is not a scan`);
  const rounded = regionRounding(view, region);
  const table = new OperandTable(view, nameOf, broadcastAdapt);
  // A reverse scan's flips (reverseScans) are no arithmetic: the kernel reads the flipped input where it is and
  // writes the result where the flip back puts it.
  const [flipIn, flipOut] = region.reverse ? [region.prologue[0] ?? "", region.epilogue[0] ?? ""] : ["", ""];
  const flipped = flipIn ? view.node(flipIn).fn?.input : undefined;
  const proLines = flipIn ? [] : pointwiseLines(view, region.prologue, table, () => null, rounded);
  const scanned = flipped
    ? table.tensor(flipped)
    : input.t === "node" && region.prologue.includes(input.id)
      ? `t_${input.id}`
      : table.tensor(input);
  const epilogue = flipOut ? { ...region, epilogue: region.epilogue.slice(1) } : region;
  const epiLines = seededEpilogue(view, epilogue, seed.id, "s", table, rounded, undefined, (arg) =>
    arg.t === "node" && arg.id === flipOut ? `t_${seed.id}` : null,
  );
  const result = region.output === flipOut ? `t_${seed.id}` : `t_${region.output}`;
  const nIn = table.operands.length;
  const pro = `KfPro_${region.id}`;
  const epi = `KfEpi_${region.id}`;
  const xs = `const float (&x)[${Math.max(nIn, 1)}]`;
  const cuda = [
    functor(pro, nIn, `${xs}, const KfScalars& sc`, proLines, scanned),
    // The prologue's lines again: an epilogue op may read a prologue value (`cumsum(x * m) + x * m`); the
    // compiler drops those no epilogue op reads.
    functor(epi, nIn, `float s, ${xs}, const KfScalars& sc`, [...proLines, ...epiLines], result),
    `cudaError_t ${fn}_launch(${LAUNCH_PARAMS.scan}) {`,
    `  return kf_launch_scan<${pro}, ${spec.op}, ${epi}, ${CPP_TYPE[out.dtype]}, ${types(table.operands)}>(shape, dim, reverse, out, in, sc, stream);`,
    "}",
  ].join("\n");
  const host = ownLaunchHost(fn, "scan", nIn, "iter", 0, out.dtype, [
    // mask: the scanned dim, plus 256 for a scan from the end
    `  kf_check_cuda(${fn}_launch(shape, static_cast<int>(mask & 255), (mask & 256) != 0, out.data_ptr(), refs, scalars, stream), "${fn}");`,
    "  (void)out_shape; (void)geo; (void)stats;",
  ]);
  return {
    cuda,
    host,
    operands: table.operands,
    rank: inMeta.shape.length,
    pyPrelude: [operandTuple(table.operands)],
    pyLaunch: [
      "shape = _kf_broadcast(ins)",
      `return _kf_ext().${fn}(list(ins), ${pyList(table.scalars)}, shape, ${dim + (region.reverse ? 256 : 0)}, _KF_NO_INTS, _KF_NO_INTS, _KF_NO_TENSOR)`,
    ],
  };
};

/** Pool geometry as a flat int list for the host: [kind, nd, adaptive, k*, s*, p*, d*, ceil, count_include_pad, divisor, out*]. */
function poolGeometry(
  op: string,
  fn: Record<string, Arg>,
  nd: number,
  ints: (arg: Arg | undefined) => number[] | null,
): number[] {
  const spread = (arg: Arg | undefined, fallback: number[]) => {
    const list = ints(arg) ?? fallback;
    return list.length === 1 ? Array(nd).fill(list[0]) : list;
  };
  const flag = (arg: Arg | undefined, dflt: boolean) =>
    arg?.t === "const" && typeof arg.value === "boolean" ? arg.value : dflt;
  const adaptive = op.startsWith("adaptive");
  const outSize = adaptive ? spread(fn.output_size, [1]) : Array(nd).fill(0);
  const kernel = adaptive ? Array(nd).fill(1) : spread(fn.kernel_size, [1]);
  const strideArg = fn.stride;
  const stride =
    adaptive ||
    !strideArg ||
    (strideArg.t === "const" && strideArg.pytype === "none") ||
    ints(strideArg)?.length === 0
      ? kernel
      : spread(strideArg, kernel);
  const padding = adaptive ? Array(nd).fill(0) : spread(fn.padding, [0]);
  const dilation = adaptive || !isMaxPool(op) ? Array(nd).fill(1) : spread(fn.dilation, [1]);
  const divisor =
    fn.divisor_override?.t === "const" && typeof fn.divisor_override.value === "number"
      ? fn.divisor_override.value
      : 0;
  const values = [
    isMaxPool(op) ? 0 : 1,
    nd,
    adaptive ? 1 : 0,
    ...kernel,
    ...stride,
    ...padding,
    ...dilation,
    flag(fn.ceil_mode, false) ? 1 : 0,
    flag(fn.count_include_pad, true) ? 1 : 0,
    divisor,
    ...outSize,
  ];
  return values;
}

/** Largest window (taps) the fixed-window pool kernel unrolls; larger ones take the generic kernel. */
const FIXED_POOL_MAX_TAPS = 64;

/**
 * The launcher of a pool with geometry `geo`: the fixed-window kernel instantiated for its window and H stride
 * when those are known here (not adaptive, a window small enough to unroll), the generic one otherwise.
 */
function poolLauncher(geo: number[], nd: number, kind: string, rest: string): string {
  const window = fixedPoolWindow(geo, nd);
  if (!window) return `kf_launch_pool<${kind}, ${rest}>`;
  const stride = geo.slice(3 + nd, 3 + 2 * nd);
  const strideH = nd >= 2 ? (stride[nd - 2] ?? 1) : 1;
  return `kf_launch_pool_fixed<${kind}, ${window.join(", ")}, ${strideH}, ${rest}>`;
}

/** kf_launch_pool_cl's launcher (a channels-last input): unrolled for its window where poolLauncher's would be. */
function poolLauncherCl(geo: number[], nd: number, kind: string, rest: string): string {
  const window = fixedPoolWindow(geo, nd) ?? [0, 0, 0];
  return `kf_launch_pool_cl<${kind}, ${window.join(", ")}, ${rest}>`;
}

/** The (KD, KH, KW) window a pool's kernel is unrolled for, leading dims of 1-D and 2-D pools 1; null when it is
 * adaptive or too large to unroll. */
function fixedPoolWindow(geo: number[], nd: number): number[] | null {
  const kernel = geo.slice(3, 3 + nd);
  const taps = kernel.reduce((a, b) => a * b, 1);
  const fixed = geo[2] === 0 && taps <= FIXED_POOL_MAX_TAPS && (kernel[nd - 1] ?? 0) <= 16;
  return fixed ? [...Array(3 - nd).fill(1), ...kernel] : null;
}

const KIND_GENERATORS: Record<Exclude<Region["kind"], "recipe">, KindGenerator> = {
  pointwise: generatePointwise,
  reduce: generateReduce,
  normalize: generateNormalize,
  pool: generatePool,
  scan: generateScan,
};
