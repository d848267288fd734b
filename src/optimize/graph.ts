// The captured graph: what `python -m kforge_worker --capture PROBLEM` writes, and what the planner reads.
// One node per torch-level call of the reference's forward (torch.fx), in execution order, with shapes from
// shape propagation on the meta device. `op` is the canonical name the rules match on; `kind`/`target`/
// `args`/`kwargs` are the raw call, kept so that anything not fused is emitted exactly as the reference
// wrote it; `fn` is the call normalised to the functional signature (module hyper-parameters and parameter
// paths included), so `nn.ReLU()`, `F.relu`, `torch.relu` and `x.relu()` all read the same to a rule.
import { z } from "zod";

export const TensorMeta = z.object({
  shape: z.array(z.number().int().nonnegative()),
  /** torch dtype without the prefix: "float32", "float16", "bfloat16", "int64", "bool", ... */
  dtype: z.string(),
  stride: z.array(z.number().int()),
});
export type TensorMeta = z.infer<typeof TensorMeta>;

/** A Python scalar as it appears in a call. `pytype` keeps int and float apart (2 vs 2.0). */
export const Scalar = z.object({
  t: z.literal("const"),
  pytype: z.enum(["int", "float", "bool", "str", "none", "dtype", "device", "ellipsis", "other"]),
  /** JSON-representable value; dtype as its name ("float16"), device as "cuda:0", other as its repr, an int
   * beyond 2^53 (a slice's end of sys.maxsize) as its decimal digits. */
  value: z.union([z.number(), z.boolean(), z.string(), z.null()]),
  /** When the value came from (equals) a scalar attribute of the model, its path ("scaling_factor",
   * "block.eps"): the emitter reads the attribute at run time instead of baking the number in. */
  attr: z.string().optional(),
  /** When the value is what a node computed from shapes at the captured ones (`dim=x.dim() - 1`), that node's
   * id (plan/size-reads.ts): a region planned on the value checks the node still gives it. */
  read: z.string().optional(),
  /** Non-finite floats do not survive JSON: "inf", "-inf", "nan". */
  special: z.enum(["inf", "-inf", "nan"]).optional(),
});
export type Scalar = z.infer<typeof Scalar>;

export type Arg =
  | { t: "node"; id: string }
  | { t: "param"; path: string }
  | Scalar
  | { t: "list"; kind: "list" | "tuple"; items: Arg[] }
  | { t: "dict"; keys: Arg[]; values: Arg[] }
  | { t: "slice"; start: Arg; stop: Arg; step: Arg };

export const Arg: z.ZodType<Arg> = z.lazy(() =>
  z.union([
    /** The value of another node (a tensor, a tuple, or a Python value such as a size), or a forward
     * input by its argument name (`inputs[].name`). */
    z.object({ t: z.literal("node"), id: z.string() }),
    /** A parameter or buffer by its state_dict path ("conv.weight", "bn.running_mean"). */
    z.object({ t: z.literal("param"), path: z.string() }),
    Scalar,
    z.object({ t: z.literal("list"), kind: z.enum(["list", "tuple"]), items: z.array(Arg) }),
    /** A dict (a forward returning {"out": y, ...}): its keys and values in order. */
    z.object({ t: z.literal("dict"), keys: z.array(Arg), values: z.array(Arg) }),
    z.object({ t: z.literal("slice"), start: Arg, stop: Arg, step: Arg }),
  ]),
);

export const NodeKind = z.enum(["call_function", "call_method", "call_module", "get_attr"]);

export const GraphNode = z.object({
  /** fx node name: a valid Python identifier, unique in the graph. */
  id: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/),
  kind: NodeKind,
  /** call_function: a Python expression naming the callable in the problem module's namespace after
   * `import torch` ("torch.nn.functional.relu", "operator.add", "torch.Tensor.view" is not used: methods
   * are call_method); call_method: the method name ("view"); call_module: the submodule path ("conv",
   * "layers.0"); get_attr: the attribute path. */
  target: z.string(),
  args: z.array(Arg),
  kwargs: z.record(z.string(), Arg),
  /** Canonical op name ("relu", "add", "conv2d", "batch_norm", "softmax", "sum", "getitem", "view"...);
   * "unknown" when capture has no name for it, "hooked_module" for a module with hooks (either stays a
   * PyTorch call). */
  op: z.string(),
  /** The call normalised to the functional signature of `op` (names as in torch.nn.functional / torch):
   * e.g. conv2d {input, weight, bias, stride, padding, dilation, groups}; batch_norm {input, running_mean,
   * running_var, weight, bias, training, momentum, eps}; softmax {input, dim}; sum {input, dim, keepdim}.
   * Null when the call could not be normalised. */
  fn: z.record(z.string(), Arg).nullable(),
  /** The output: one tensor, a tuple of outputs, or a non-tensor Python value (a size, a shape). */
  out: z.union([
    z.object({ t: z.literal("tensor"), meta: TensorMeta }),
    z.object({ t: z.literal("tuple"), items: z.array(TensorMeta.nullable()) }),
    z.object({ t: z.literal("value"), pytype: z.string() }),
  ]),
  /** The op's meaning depends on train/eval mode (batch_norm, dropout, instance_norm with running stats). */
  modeDependent: z.boolean(),
  /** The op draws random numbers (dropout, rand*, bernoulli, ...): it stays a PyTorch call. */
  rng: z.boolean(),
  /** The op writes one of its inputs in place (relu_(), add_, nn.ReLU(inplace=True), ...). */
  inplace: z.boolean(),
});
/** `written`: a node the planner reads as one op that stands for several nodes as the reference wrote them
 * (plan/written-layernorm.ts): the emitter writes those nodes, in order, wherever PyTorch runs it. Made by a
 * rewrite, never captured. */
export type GraphNode = z.infer<typeof GraphNode> & { written?: GraphNode[] };

export const ForwardInput = z.object({
  name: z.string(),
  /** Null when the argument is not a tensor (an int, a None default). */
  meta: TensorMeta.nullable(),
  /** For a non-tensor argument, the value get_inputs() passed (or its default), as a Scalar. */
  value: Scalar.nullable(),
});

export const ParamInfo = z.object({
  kind: z.enum(["parameter", "buffer"]),
  meta: TensorMeta,
  requiresGrad: z.boolean(),
});

export const ModuleInfo = z.object({
  /** Fully qualified class name ("torch.nn.modules.conv.Conv2d"). */
  type: z.string(),
  training: z.boolean(),
  /** Constructor hyper-parameters that matter for the op (eps, momentum, affine, track_running_stats,
   * normalized_shape, kernel_size, stride, padding, dilation, groups, ceil_mode, approximate, dim, ...). */
  hyper: z.record(z.string(), Arg),
  /** A parametrised module's (torch.nn.utils.parametrize) tensors computed on each read, each with the class
   * names of its parametrisations in order ({"weight": ["_WeightNorm"]}); absent for a plain module. */
  parametrized: z.record(z.string(), z.array(z.string())).optional(),
});

export const Graph = z.object({
  /** How the graph was captured; "none" when neither fx nor export could: `failure` says why. */
  captured: z.enum(["fx", "export", "none"]),
  failure: z.string().nullable(),
  torchVersion: z.string(),
  inputs: z.array(ForwardInput),
  nodes: z.array(GraphNode),
  /** The forward's return value: a node, or a tuple/list of them. */
  output: Arg,
  params: z.record(z.string(), ParamInfo),
  modules: z.record(z.string(), ModuleInfo),
  /** The model's `training` flag when the graph holds the train/eval mode it was captured in (fx evaluated
   * `self.training` while tracing; an export graph is always taken to): another mode runs the reference's
   * forward. Null or absent when the graph reads the same in either mode. */
  specialisedTraining: z.boolean().nullable().optional(),
  /** One parameter or buffer path per lazy module (nn.LazyLinear, ...) the model had before its first call: the
   * graph holds the shapes that call gave them, so until a ModelNew's own first call has run, its forward is the
   * reference's. Absent when none. */
  lazyTensors: z.array(z.string()).optional(),
  /** Scalar (int/float/bool) attributes of the model and its submodules, by path. */
  scalarAttrs: z.record(z.string(), z.union([z.number(), z.boolean()])),
  /** Absolute paths of the problem file and of every module it imported from outside Python's installation
   * (its own helpers): a cached capture holds while these are unchanged (capture-cache.ts). */
  sources: z.array(z.string()).optional(),
  /** The problem's source split for the emitter (from Python's ast on the problem file). */
  source: z.object({
    /** Top-level statements before and after class Model, without Model, get_inputs, get_init_inputs. */
    prelude: z.string(),
    /** The `def __init__` of Model, verbatim (indented as in the file). */
    init: z.string(),
    /** The `def forward` of Model, verbatim. */
    forward: z.string(),
    /** Other methods of Model, verbatim (helpers the forward calls). */
    methods: z.array(z.string()),
    /** The forward's parameter list as written ("self, x, y=None"). */
    signature: z.string(),
    /** Model's base classes as written ("nn.Module", "Base"): ModelNew derives from them. */
    bases: z.string().optional(),
  }),
});
/** Its nodes as GraphNode: a rewritten graph's may stand for written ones (`written`). */
export type Graph = Omit<z.infer<typeof Graph>, "nodes"> & { nodes: GraphNode[] };
