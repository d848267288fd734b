// Recipe rules: chains of captured nodes that a hand-written recipe of kernels/ computes as one region. A rule
// is data: the recipe it calls and the chain it replaces, one step per node (its op, which argument carries
// the previous step's value, and the checks its arguments and shapes must pass). `matchRecipe` is the whole
// matcher: it follows the chain through values nobody else reads, then runs the checks. Nothing here knows a
// module or parameter name: a model matches by the ops it calls and the shapes it calls them with.
import type { Arg, GraphNode, TensorMeta } from "../graph.ts";
import type { GraphView } from "./graph-view.ts";
import type { Verdict } from "./rules.ts";

export interface MatchContext {
  view: GraphView;
  /** Nodes of the steps before this one, by their `bind` name. */
  bound: Record<string, GraphNode>;
}

/** A test on one step's node: null when it passes, else why not. */
export type Check = (node: GraphNode, ctx: MatchContext) => Verdict;

export interface ChainStep {
  /** The name the node is bound to (the emitter reads the match by it). */
  bind: string;
  op: string;
  /** Arguments of this node (normalised, node.fn) that may carry the previous step's value. */
  from?: string[];
  checks: Check[];
}

export interface RecipeRule {
  name: string;
  /** The kernels/<recipe>/ folder whose runtime the region calls. */
  recipe: string;
  chain: ChainStep[];
}

export interface RecipeMatch {
  rule: RecipeRule;
  /** Node ids in chain order. */
  nodes: string[];
  bind: Record<string, string>;
}

// ---- checks ------------------------------------------------------------------------------------------

const isNone = (arg: Arg | undefined) => !arg || (arg.t === "const" && arg.pytype === "none");

function metaOf(node: GraphNode, key: string, ctx: MatchContext): TensorMeta | null {
  return ctx.view.tensorOf(node.fn?.[key]);
}

/** `key` is a tensor of one of `dtypes` and of rank `rank`. */
export function tensor(key: string, dtypes: string[], rank: number): Check {
  return (node, ctx) => {
    const meta = metaOf(node, key, ctx);
    if (!meta) return `its ${key} is not a tensor the planner can see`;
    if (!dtypes.includes(meta.dtype)) return `${meta.dtype} ${key} (the recipe takes ${dtypes.join("/")})`;
    if (meta.shape.length !== rank) return `rank-${meta.shape.length} ${key} (the recipe takes rank ${rank})`;
    return null;
  };
}

/** `key` is a parameter or buffer of the model (a value the recipe may cache per Parameter). */
export function parameter(key: string): Check {
  return (node) => (node.fn?.[key]?.t === "param" ? null : `its ${key} is not a parameter of the model`);
}

/** `key` is absent, None, or a tensor of `dtypes` and rank `rank`. */
export function optionalTensor(key: string, dtypes: string[], rank: number): Check {
  const present = tensor(key, dtypes, rank);
  return (node, ctx) => (isNone(node.fn?.[key]) ? null : present(node, ctx));
}

export function absent(key: string): Check {
  return (node) => (isNone(node.fn?.[key]) ? null : `it passes ${key}`);
}

/** `key` is a constant among `values` (absent reads as `dflt`). A model attribute qualifies: the runtime
 * reads it again on every call and falls back when it changed. */
export function constIn(key: string, values: (number | boolean)[], dflt: number | boolean): Check {
  return (node) => {
    const arg = node.fn?.[key];
    if (isNone(arg)) return values.includes(dflt) ? null : `its ${key} is missing`;
    if (arg?.t !== "const" || (typeof arg.value !== "number" && typeof arg.value !== "boolean"))
      return `its ${key} is not a constant`;
    return values.includes(arg.value) ? null : `${key}=${String(arg.value)}`;
  };
}

/** `key` is absent/None or a constant of type `type`. */
export function constOrNone(key: string, type: "number" | "boolean"): Check {
  return (node) => {
    const arg = node.fn?.[key];
    if (isNone(arg)) return null;
    return arg?.t === "const" && typeof arg.value === type ? null : `its ${key} is not a ${type} constant`;
  };
}

/** The node is a call of a module of this class (its mode, buffers and hyper-parameters are the module's). */
export function moduleCall(type: string): Check {
  return (node, ctx) =>
    node.kind === "call_module" && ctx.view.graph.modules[node.target]?.type === type
      ? null
      : `it is not a ${type.split(".").at(-1)} module call`;
}

/** The node writes no input in place and draws no random numbers, and its output is one tensor. */
const plain: Check = (node, ctx) => {
  if (!node.fn) return "its call could not be normalised";
  if (node.inplace) return "it writes its input in place";
  if (node.rng) return "it draws random numbers";
  return ctx.view.outMeta(node) ? null : "its output is not one tensor";
};

// ---- attention ---------------------------------------------------------------------------------------

const HALF = ["float16", "bfloat16"];
const F32 = ["float32"];
const FLOAT = [...F32, ...HALF];

/** What kernels/attention/runtime.py's `_kf_attn_fallback_reason` lets through (keep the two in step):
 * head dims up to 256 stay with PyTorch's flash/cuDNN kernels, which are faster there. */
export const ATTENTION_LIMITS = {
  pytorchFasterUpTo: 256,
  maxHeadDim: 1024,
  maxGrid: 65535,
  /** float32 runs on the split-fp16 kernel: key rows up to this long, more query rows than a decode step. */
  f32MaxKeys: 512,
  decodeMaxQueries: 16,
};

const attentionShapes: Check = (node, ctx) => {
  const [q, k, v] = ["query", "key", "value"].map((key) => metaOf(node, key, ctx));
  if (!q || !k || !v) return "query, key and value are not all tensors";
  if (q.dtype !== k.dtype || q.dtype !== v.dtype) return "query, key and value differ in dtype";
  const [b, h, sq, e] = q.shape as [number, number, number, number];
  const [kb, kh, sk, ke] = k.shape as [number, number, number, number];
  const [vb, vh, vs, ev] = v.shape as [number, number, number, number];
  const gqa = node.fn?.enable_gqa?.t === "const" && node.fn.enable_gqa.value === true;
  if (kb !== b || vb !== b || kh !== vh) return "batch/head dims broadcast";
  if (kh !== h && !(gqa && kh > 0 && h % kh === 0)) return "batch/head dims broadcast";
  if (ke !== e || vs !== sk) return "query/key/value shapes do not agree";
  const L = ATTENTION_LIMITS;
  if (Math.max(e, ev) <= L.pytorchFasterUpTo)
    return `head dim ${Math.max(e, ev)} <= ${L.pytorchFasterUpTo}: PyTorch's flash/cuDNN kernels are faster`;
  if (e % 8 || ev % 8 || e > L.maxHeadDim || ev > L.maxHeadDim)
    return `head dims ${e}/${ev} (the recipe takes multiples of 8 up to ${L.maxHeadDim})`;
  if (sq === 0 || sk === 0) return "empty sequence";
  if (b > L.maxGrid || h > L.maxGrid) return "batch or heads above the grid limit";
  if (q.dtype === "float32" && sk > L.f32MaxKeys)
    return `float32 with ${sk} keys (the fp32 kernel holds ${L.f32MaxKeys})`;
  if (q.dtype === "float32" && sq <= L.decodeMaxQueries) return `float32 with ${sq} query rows`;
  return null;
};

// ---- linear -> batch norm -> scale -> softmax ----------------------------------------------------------

const BATCH_NORM_1D = "torch.nn.modules.batchnorm.BatchNorm1d";

/** The linear layer's output features, N. */
function features(ctx: MatchContext): number {
  const linear = ctx.bound.linear;
  return (linear && ctx.view.outMeta(linear)?.shape[1]) ?? -1;
}

/** The mul's other operand (not the chain value) is a number, or an fp32 tensor of one value or one per
 * feature broadcast along rows ((N,) or (1, N)), the forms the recipe's row pass takes. */
const scaleOperand: Check = (node, ctx) => {
  const prev = ctx.bound.bn?.id;
  const key = node.fn?.input?.t === "node" && node.fn.input.id === prev ? "other" : "input";
  const arg = node.fn?.[key];
  if (arg?.t === "const")
    return typeof arg.value === "number" && !arg.special ? null : "its scale is not a finite number";
  const meta = ctx.view.tensorOf(arg);
  if (meta?.dtype !== "float32") return "its scale is not a float32 tensor";
  const n = features(ctx);
  const numel = meta.shape.reduce((a, s) => a * s, 1);
  if (meta.shape.length > 2 || !(numel === 1 || (numel === n && meta.shape.at(-1) === n)))
    return `scale of shape [${meta.shape.join(", ")}] (the recipe takes one value or one per feature)`;
  return null;
};

const linearShapes: Check = (node, ctx) => {
  const out = ctx.view.outMeta(node);
  const weight = metaOf(node, "weight", ctx);
  const bias = metaOf(node, "bias", ctx);
  if (!out || !weight || out.shape.length !== 2) return "its output is not a matrix";
  if (weight.shape[0] !== out.shape[1]) return "its weight does not give its output features";
  if (bias && (bias.shape.length !== 1 || bias.shape[0] !== out.shape[1]))
    return "its bias is not per feature";
  return null;
};

// ---- the table ---------------------------------------------------------------------------------------

export const RECIPE_RULES: RecipeRule[] = [
  {
    name: "attention",
    recipe: "attention",
    chain: [
      {
        bind: "attention",
        op: "scaled_dot_product_attention",
        checks: [
          plain,
          tensor("query", FLOAT, 4),
          tensor("key", FLOAT, 4),
          tensor("value", FLOAT, 4),
          absent("attn_mask"),
          constIn("dropout_p", [0], 0),
          constIn("enable_gqa", [false, true], false),
          constOrNone("is_causal", "boolean"),
          constOrNone("scale", "number"),
          attentionShapes,
        ],
      },
    ],
  },
  {
    name: "linear_bn_softmax",
    recipe: "linear_bn_softmax",
    chain: [
      {
        bind: "linear",
        op: "linear",
        checks: [
          plain,
          tensor("input", F32, 2),
          tensor("weight", F32, 2),
          parameter("weight"),
          optionalTensor("bias", F32, 1),
          linearShapes,
        ],
      },
      // The recipe keeps nn.BatchNorm1d's own bookkeeping (mode, running stats, momentum=None), so the
      // normalisation must be that module; training and eval are both the recipe's.
      { bind: "bn", op: "batch_norm", from: ["input"], checks: [plain, moduleCall(BATCH_NORM_1D)] },
      { bind: "scale", op: "mul", from: ["input", "other"], checks: [plain, scaleOperand] },
      {
        bind: "softmax",
        op: "softmax",
        from: ["input"],
        checks: [plain, constIn("dim", [1, -1], 1), absent("dtype")],
      },
    ],
  },
];

// ---- algebraic rewrites -------------------------------------------------------------------------------

/** A float tensor of any rank >= 1. */
function floatTensor(key: string): Check {
  return (node, ctx) => {
    const meta = metaOf(node, key, ctx);
    if (!meta) return `its ${key} is not a tensor the planner can see`;
    if (!FLOAT.includes(meta.dtype)) return `${meta.dtype} ${key}`;
    return meta.shape.length >= 1 ? null : `a 0-d ${key}`;
  };
}

/** The reduction runs over the last dim only (a linear layer's output features). */
const overLastDim: Check = (node, ctx) => {
  const rank = ctx.view.tensorOf(node.fn?.input)?.shape.length ?? 0;
  const dim = node.fn?.dim;
  const dims = dim?.t === "list" ? dim.items : dim ? [dim] : [];
  const only = dims.length === 1 ? dims[0] : undefined;
  if (only?.t !== "const" || typeof only.value !== "number") return "it does not reduce one constant dim";
  const d = only.value < 0 ? only.value + rank : only.value;
  return d === rank - 1 ? null : `it reduces dim ${only.value}, not the output features`;
};

/** The linear layer is a matrix weight with at most one bias per output feature: F.linear also takes a 1-D
 * weight (one dot product per row: no output-feature dim left to sum) and a bias that broadcasts ((1,), 0-d,
 * counted once per feature), and the rewrite's `W.sum(0)` / `b.sum()` would compute neither. */
const matrixLinear: Check = (node, ctx) => {
  const weight = metaOf(node, "weight", ctx);
  if (!weight) return "its weight is not a tensor the planner can see";
  if (weight.shape.length !== 2) return `a rank-${weight.shape.length} weight (not a matrix)`;
  const bias = metaOf(node, "bias", ctx);
  if (bias && (bias.shape.length !== 1 || bias.shape[0] !== weight.shape[0]))
    return `a bias of shape [${bias.shape.join(", ")}] (broadcast over the ${weight.shape[0]} output features)`;
  return null;
};

/** Linear -> sum/mean over its output features: x @ (sum of W's rows) + sum(b), a GEMV instead of a GEMM
 * (an algebraic rewrite in PyTorch ops: no kernels/ folder). */
function linearReduce(op: "sum" | "mean"): RecipeRule {
  return {
    name: `linear_${op}`,
    recipe: "linear_reduce",
    chain: [
      {
        bind: "linear",
        op: "linear",
        checks: [
          plain,
          floatTensor("input"),
          parameter("weight"),
          optionalTensor("bias", FLOAT, 1),
          matrixLinear,
        ],
      },
      { bind: "reduce", op, from: ["input"], checks: [plain, overLastDim, absent("dtype")] },
    ],
  };
}

RECIPE_RULES.push(linearReduce("sum"), linearReduce("mean"));

/** The matmul's other operand (not the diagonal matrix) has the diagonal's dtype and a matrix dim that meets it:
 * rows for diag(a) @ B, columns for B @ diag(a); leading dims broadcast as a batch. */
function diagMatmulOperand(diagKey: string, otherKey: string, left: boolean): Check {
  return (node, ctx) => {
    const diag = ctx.bound.diag;
    const vector = diag ? ctx.view.tensorOf(diag.fn?.input) : null;
    const meta = metaOf(node, otherKey, ctx);
    if (!vector || !meta) return `its ${otherKey} is not a tensor the planner can see`;
    if (meta.dtype !== vector.dtype) return `${meta.dtype} ${otherKey} beside a ${vector.dtype} diagonal`;
    if (meta.shape.length < 2) return `a rank-${meta.shape.length} ${otherKey}`;
    const met = left ? meta.shape.at(-2) : meta.shape.at(-1);
    if (met !== vector.shape[0])
      return `its ${otherKey} does not meet the diagonal's ${vector.shape[0]} entries`;
    const carried = node.fn?.[diagKey];
    return carried?.t === "node" && carried.id === diag?.id ? null : `the diagonal is not its ${diagKey}`;
  };
}

/** diag(a) @ B = a[:, None] * B and B @ diag(a) = B * a: a broadcast product in place of an N^3 GEMM on a
 * matrix that is zero off its diagonal (an algebraic rewrite in PyTorch ops: no kernels/ folder). */
function diagMatmul(op: "matmul" | "mm", left: boolean): RecipeRule {
  const [first, second] = op === "mm" ? ["input", "mat2"] : ["input", "other"];
  const [diagKey, otherKey] = left ? [first, second] : [second, first];
  return {
    name: `diag_${op}_${left ? "left" : "right"}`,
    recipe: "diag_matmul",
    chain: [
      { bind: "diag", op: "diag", checks: [plain, tensor("input", FLOAT, 1), constIn("diagonal", [0], 0)] },
      { bind: "matmul", op, from: [diagKey], checks: [plain, diagMatmulOperand(diagKey, otherKey, left)] },
    ],
  };
}

RECIPE_RULES.push(
  ...(["matmul", "mm"] as const).flatMap((op) => [diagMatmul(op, true), diagMatmul(op, false)]),
);

// ---- the matcher -------------------------------------------------------------------------------------

/** The chain of `rule` starting at `start`: null when the graph does not have its structure there; a
 * verdict when it does but a check fails; the match otherwise. */
export function matchRecipe(
  rule: RecipeRule,
  start: GraphNode,
  view: GraphView,
): RecipeMatch | { why: string } | null {
  const nodes: GraphNode[] = [];
  let current: GraphNode | undefined = start;
  for (const [i, step] of rule.chain.entries()) {
    if (!current || current.op !== step.op) return null;
    const prev = nodes.at(-1);
    if (prev) {
      const carried = (step.from ?? []).some((key) => {
        const arg = current?.fn?.[key];
        return arg?.t === "node" && arg.id === prev.id;
      });
      if (!carried) return null;
    }
    nodes.push(current);
    if (i === rule.chain.length - 1) break;
    // Only a value nobody else reads can disappear into the recipe.
    const users = view.usersOf(current.id);
    const next = users.length === 1 && users[0] !== "@output" ? users[0] : undefined;
    current = next === undefined ? undefined : view.node(next);
  }
  const bound: Record<string, GraphNode> = {};
  for (const [i, step] of rule.chain.entries()) {
    const node = nodes[i] as GraphNode;
    for (const check of step.checks) {
      const why = check(node, { view, bound });
      if (why !== null) return { why: `${rule.name} recipe: ${why}` };
    }
    bound[step.bind] = node;
  }
  return {
    rule,
    nodes: nodes.map((n) => n.id),
    bind: Object.fromEntries(Object.entries(bound).map(([k, n]) => [k, n.id])),
  };
}
