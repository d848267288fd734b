// Anchor rules: a library call (a cuDNN convolution) taken into the region that consumes its output, so that
// the region decides how the library is called. The convolution runs without its bias, which the region's
// kernel adds in the same pass as its other ops; a pointwise region or a normalisation (readsChannelsLast)
// also runs it on channels-last input and weight (cuDNN's NHWC kernels beat its NCHW ones at most shapes)
// and writes the result back in the reference's layout. Measured planning keeps an anchor only where the region wins, stepping down from
// channels-last to the reference's layout to no anchor (bench/optimize/NOTES.md).
import type { GraphNode } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { FLOAT_DTYPES, type GraphView } from "./graph-view.ts";
import type { Region } from "./planner.ts";
import { normDims, type Verdict } from "./rules.ts";

export type AnchorLayout = "channels_last" | "native";

export interface AnchorRule {
  name: string;
  /** Canonical ops the rule takes. */
  ops: string[];
  /** Exact module classes: a subclass may override forward, so it keeps its own call. */
  moduleTypes: string[];
  /** Batched output ranks it takes (channels-last exists for 4 and 5 only: 1-d convs stay in their layout). */
  ranks: number[];
}

const CONV = "torch.nn.modules.conv";

export const ANCHOR_RULES: AnchorRule[] = [
  {
    name: "conv-channels-last",
    ops: ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"],
    moduleTypes: ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"].map(
      (c) => `${CONV}.${c}`,
    ),
    ranks: [3, 4, 5],
  },
];

/** torch.nn.utils.parametrize's class for a parametrised module (`ParametrizedConv2d`, made by weight_norm or
 * spectral_norm) subclasses the stock class with no forward of its own: its `weight` is a property computing
 * the parametrisation, which the anchor reads once per call as the module's forward does. */
const PARAMETRIZED_PREFIX = "torch.nn.utils.parametrize.Parametrized";

/** Parametrisations whose value the anchor may compute in the module's place: weight norm (a function of its
 * parameters), spectral norm (its power iteration updates buffers in training mode only, where the emitted
 * anchor declines at run time). Any other may keep state the anchor cannot account for. */
const READ_ONCE_PARAMETRIZATIONS = new Set(["_WeightNorm", "_SpectralNorm"]);

function stockType(module: { type: string }): string {
  if (!module.type.startsWith(PARAMETRIZED_PREFIX)) return module.type;
  return `${CONV}.${module.type.slice(PARAMETRIZED_PREFIX.length)}`;
}

/** The rule under which `node` can anchor the region consuming it, or why not (null: no rule covers its op). */
export function anchorRuleFor(node: GraphNode, view: GraphView): { rule: AnchorRule; why: Verdict } | null {
  const rule = ANCHOR_RULES.find((r) => r.ops.includes(node.op));
  if (!rule) return null;
  const fail = (why: string) => ({ rule, why });
  if (node.kind !== "call_module") return fail("a functional convolution keeps its own call");
  const module = view.graph.modules[node.target];
  if (!module || !rule.moduleTypes.includes(stockType(module)))
    return fail(`${module?.type ?? "its module"} is not a stock torch.nn convolution`);
  const parametrized = Object.keys(module.parametrized ?? {});
  if (parametrized.some((name) => name !== "weight")) return fail("a parametrisation computes its bias");
  if ((module.parametrized?.weight ?? []).some((p) => !READ_ONCE_PARAMETRIZATIONS.has(p)))
    return fail("its weight's parametrisation is not known to be a function of its parameters alone");
  const padding = module.hyper.padding_mode;
  if (padding && !(padding.t === "const" && padding.value === "zeros"))
    return fail("padding_mode is not zeros");
  if (node.inplace || node.rng || !node.fn) return fail("its call could not be normalised");
  // The anchor calls the module's own configuration: an output_size given to a transposed conv is not in it.
  if (node.args.length !== 1 || Object.keys(node.kwargs).length > 0)
    return fail("it is called with more than its input");
  const input = node.fn.input;
  if (input?.t !== "node") return fail("its input is not a tensor the planner can see");
  const bias = node.fn.bias;
  if (bias && !(bias.t === "param" || (bias.t === "const" && bias.pytype === "none")))
    return fail("its bias is not a parameter");
  const out = view.outMeta(node);
  if (!out || !FLOAT_DTYPES.has(out.dtype)) return fail("its output is not a float tensor");
  if (!rule.ranks.includes(out.shape.length)) return fail(`rank ${out.shape.length} output`);
  return { rule, why: null };
}

/** Whether a seed region's kernel can take an anchor's output plus its bias as its input: reductions, pools
 * (the conv's output as the stream their prologue reads, the bias added to every tap) and normalisations
 * (group norm views the anchor's output as [N, G, C/G, rest], as its other operands). */
export function seedTakesAnchor(region: Region, view: GraphView): boolean {
  if (region.kind === "reduce" || region.kind === "pool") return true;
  return (
    region.kind === "normalize" &&
    region.seed !== null &&
    NORMALIZATIONS[view.node(region.seed).op] !== undefined
  );
}

/** Whether `region` reads an anchor's channels-last output directly: a pointwise region (its tiled kernel
 * writes the reference's layout), a reduction (kf_reduce.cuh orders the dims by the input's memory layout;
 * its output is small), a pool (kf_pool_cl.cuh: channel tiles in, the reference's layout out), or a normalisation whose kept dims stay in order when its input is read channels-last
 * (the channel kept with every spatial dim reduced, as BatchNorm and InstanceNorm; or the channel reduced; group
 * norm): kf_normalize_cl.cuh takes the statistics in memory order and transposes the apply. */
export function readsChannelsLast(region: Region, view: GraphView): boolean {
  if (region.kind === "pointwise" || region.kind === "reduce" || region.kind === "pool") return true;
  if (region.kind !== "normalize" || !region.seed || !seedTakesAnchor(region, view)) return false;
  // Group norm's kept dims (N, G) keep their order; its statistics are spread over a group's channels.
  if (NORMALIZATIONS[view.node(region.seed).op]?.groups) return true;
  const dims = normDims(view.node(region.seed), view);
  const rank = view.tensorOf(view.node(region.seed).fn?.input)?.shape.length ?? 0;
  if (!dims || rank < 4) return false;
  const spatialKept = Array.from({ length: rank - 2 }, (_, i) => i + 2).some((d) => !dims.includes(d));
  return dims.includes(1) || !spatialKept;
}

/** Whether an anchor's output has a channels-last memory format (4-D and 5-D tensors). */
export function channelsLastRank(node: GraphNode, view: GraphView): boolean {
  const rank = view.outMeta(node)?.shape.length ?? 0;
  return rank === 4 || rank === 5;
}

/** The conv bias parameter path the region's kernel adds, or null (bias=False). */
export function anchorBias(node: GraphNode): string | null {
  const bias = node.fn?.bias;
  return bias?.t === "param" ? bias.path : null;
}
