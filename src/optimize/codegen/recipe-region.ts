// A recipe region -> its ModelNew method: the guard and calls of the recipe's runtime (kernels/<recipe>/
// runtime.py, inlined once into the file), then the reference's own ops for inputs the recipe does not
// cover. The runtime holds the recipe's logic (checks, caches, bookkeeping); this module only passes it the
// region's values, by the names the emitted forward uses.
import type { Arg, GraphNode } from "../graph.ts";
import type { GraphView } from "../plan/graph-view.ts";
import type { Region } from "../plan/planner.ts";
import { type NameOf, pyArg, selfPath } from "./python-expr.ts";

/** The fast path of a recipe region: lines of the method body, run under the region's switch. */
export interface RecipeCall {
  /** Python condition under which the recipe is entered (besides the region's _KF_DISABLED switch). */
  guard: string;
  /** Lines run when the guard holds (indented one level below the `if`); they return, or fall through to
   * the reference's ops. */
  body: string[];
}

type RecipeEmitter = (view: GraphView, region: Region, nameOf: NameOf) => RecipeCall;

const isNone = (arg: Arg | undefined) => !arg || (arg.t === "const" && arg.pytype === "none");

function bound(view: GraphView, region: Region, step: string): GraphNode {
  const id = region.recipe?.bind[step];
  if (!id) throw new Error(`kforge internal: recipe region ${region.id} has no ${step} step`);
  return view.node(id);
}

/** An argument as Python, `dflt` when the call left it out. */
function argOr(node: GraphNode, key: string, nameOf: NameOf, dflt: string): string {
  const arg = node.fn?.[key];
  return isNone(arg) || !arg ? dflt : pyArg(arg, nameOf);
}

const attention: RecipeEmitter = (view, region, nameOf) => {
  const sdpa = bound(view, region, "attention");
  const [q, k, v] = ["query", "key", "value"].map((key) => argOr(sdpa, key, nameOf, "None"));
  const mask = argOr(sdpa, "attn_mask", nameOf, "None");
  const dropout = argOr(sdpa, "dropout_p", nameOf, "0.0");
  const causal = argOr(sdpa, "is_causal", nameOf, "False");
  const gqa = argOr(sdpa, "enable_gqa", nameOf, "False");
  const scale = argOr(sdpa, "scale", nameOf, "None");
  return {
    guard: `_kf_attn_fallback_reason(${q}, ${k}, ${v}, ${mask}, ${dropout}, ${causal}, ${gqa}) is None`,
    body: [`return _kf_attn_forward(${q}, ${k}, ${v}, is_causal=${causal}, scale=${scale})`],
  };
};

const linearBnSoftmax: RecipeEmitter = (view, region, nameOf) => {
  const linear = bound(view, region, "linear");
  const bn = bound(view, region, "bn");
  const mul = bound(view, region, "scale");
  const softmax = bound(view, region, "softmax");
  const x = argOr(linear, "input", nameOf, "None");
  const weight = argOr(linear, "weight", nameOf, "None");
  const bias = argOr(linear, "bias", nameOf, "None");
  const bnModule = selfPath(bn.target);
  const scaleKey = mul.fn?.input?.t === "node" && mul.fn.input.id === bn.id ? "other" : "input";
  const scale = argOr(mul, scaleKey, nameOf, "None");
  // nn.Softmax keeps its dim on the module: read it there, as the reference's call does.
  const dim =
    softmax.kind === "call_module" ? `${selfPath(softmax.target)}.dim` : argOr(softmax, "dim", nameOf, "1");
  return {
    guard: `_kf_lbs_gemm_applies(${x}, ${weight}, (${bias}, ${bnModule}.weight, ${bnModule}.bias, ${scale}))`,
    body: [
      `kf_y = _kf_lbs_launch_gemm(${x}, ${weight}, _kf_lbs_split_cache(self, ${JSON.stringify(region.id)}))`,
      `if _kf_lbs_finish_applies(${x}, ${weight}, ${bias}, ${bnModule}, ${scale}, ${dim}):`,
      `    return _kf_lbs_finish(kf_y, ${bias}, ${bnModule}, ${scale})`,
    ],
  };
};

/** Linear -> sum/mean over the output features as x @ (column sums of W^T) + sum(b): reads W once and runs
 * a GEMV instead of the GEMM. Sums accumulate in fp32 whatever the dtype; autograd flows through as usual. */
const linearReduce: RecipeEmitter = (view, region, nameOf) => {
  const linear = bound(view, region, "linear");
  const reduce = bound(view, region, "reduce");
  const x = argOr(linear, "input", nameOf, "None");
  const weight = argOr(linear, "weight", nameOf, "None");
  const bias = argOr(linear, "bias", nameOf, "None");
  const keepdim = argOr(reduce, "keepdim", nameOf, "False");
  const mean = reduce.op === "mean" ? ` / ${weight}.shape[0]` : "";
  // The reduction's dim was planned as the last one of an input of this rank.
  const rank = view.tensorOf(linear.fn?.input)?.shape.length ?? 2;
  const result =
    keepdim === "True"
      ? "kf_y.unsqueeze(-1)"
      : keepdim === "False"
        ? "kf_y"
        : `kf_y.unsqueeze(-1) if ${keepdim} else kf_y`;
  return {
    guard: `isinstance(${x}, torch.Tensor) and ${x}.dim() == ${rank} and ${x}.shape[-1] == ${weight}.shape[1]`,
    body: [
      `kf_y = torch.matmul(${x}.float(), ${weight}.sum(0, dtype=torch.float32))`,
      ...(bias === "None" ? [] : [`kf_y = kf_y + ${bias}.sum(dtype=torch.float32)`]),
      `kf_y = (kf_y${mean}).to(${x}.dtype)`,
      `return ${result}`,
    ],
  };
};

/** diag(a) @ B as a[:, None] * B, B @ diag(a) as B * a: the same products, without the zeros' N^3 GEMM. The
 * result is made contiguous, as the GEMM's is. */
const diagMatmul: RecipeEmitter = (view, region, nameOf) => {
  const diag = bound(view, region, "diag");
  const matmul = bound(view, region, "matmul");
  const a = argOr(diag, "input", nameOf, "None");
  const left = matmul.fn?.input?.t === "node" && matmul.fn.input.id === diag.id;
  const b = argOr(matmul, left ? (matmul.op === "mm" ? "mat2" : "other") : "input", nameOf, "None");
  const tensors = `isinstance(${a}, torch.Tensor) and isinstance(${b}, torch.Tensor)`;
  // torch.mm takes matrices only: a batch there is the reference's error to raise.
  const rank = matmul.op === "mm" ? `${b}.dim() == 2` : `${b}.dim() >= 2`;
  const shapes = `${a}.dim() == 1 and ${rank} and ${b}.shape[${left ? -2 : -1}] == ${a}.shape[0]`;
  return {
    guard: `${tensors} and ${shapes} and ${a}.dtype == ${b}.dtype`,
    body: [`return (${left ? `${a}.unsqueeze(-1) * ${b}` : `${b} * ${a}`}).contiguous()`],
  };
};

/** Per recipe: its region emitter and the runtime function that builds its extension (null: a rewrite in
 * PyTorch ops, with no kernels/ folder and nothing to build). */
export const RECIPE_EMITTERS: Record<string, { emit: RecipeEmitter; build: string | null }> = {
  attention: { emit: attention, build: "_kf_attn_extension" },
  linear_bn_softmax: { emit: linearBnSoftmax, build: "_kf_lbs_extension" },
  linear_reduce: { emit: linearReduce, build: null },
  diag_matmul: { emit: diagMatmul, build: null },
};

function emitterOf(name: string) {
  const emitter = RECIPE_EMITTERS[name];
  if (!emitter) throw new Error(`kforge internal: no emitter for recipe ${name}`);
  return emitter;
}

export function recipeCall(view: GraphView, region: Region, nameOf: NameOf): RecipeCall {
  return emitterOf(region.recipe?.name ?? "").emit(view, region, nameOf);
}

/** The runtime function that builds (compiles) the recipe's extension; null for a rewrite in PyTorch ops. */
export function recipeBuilder(name: string): string | null {
  return emitterOf(name).build;
}
