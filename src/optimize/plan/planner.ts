// The planner: groups captured nodes into fused regions with the rule tables, greedily and in four steps.
// 0. Recipe chains (recipe-rules.ts): each match is one region calling a hand-written recipe.
// 1. Seeds (normalisations, reductions, pooling) in graph order, each taking the pointwise producers of
//    its input that nothing else uses (its prologue).
// 2. The remaining pointwise nodes into single-output DAGs, grown backwards from each sink.
// 3. A pointwise region that only consumes a seed's output (and, for reductions, scalars) becomes the
//    seed's epilogue; a normalisation only a reduction's prologue reads joins that reduction (its apply in
//    the prologue, its statistics computed first).
// 4. A region that is the only consumer of a convolution takes it as its anchor (anchors.ts): a pointwise
//    region, or a normalisation that can read it transposed (readsChannelsLast), calls it in channels-last;
//    a reduction or another normalisation takes a 1-d conv in its own layout (bias folded in).
// 5. A 2-d/3-d convolution no region anchored becomes a layout region of its own: called channels-last
//    without its bias, which its kernel adds while writing the reference's layout back. If that loses,
//    a reduction or normalisation reading it takes it in its own layout instead (handAnchorsBack).
// Everything else stays a PyTorch call, with the reason recorded for the report.
import type { Graph, GraphNode } from "../graph.ts";
import { NORMALIZATIONS } from "../ops/normalize.ts";
import { REDUCTIONS } from "../ops/reduce.ts";
import { scanDim } from "../ops/scan.ts";
import { writeInside } from "./aliasing.ts";
import {
  type AnchorLayout,
  anchorBias,
  anchorRuleFor,
  channelsLastRank,
  readsChannelsLast,
  seedTakesAnchor,
} from "./anchors.ts";
import { sameShape } from "./graph-edit.ts";
import { argNodeIds, GraphView } from "./graph-view.ts";
import { poolPrologue, poolRegionStream } from "./pool-prologue.ts";
import { matchRecipe, RECIPE_RULES } from "./recipe-rules.ts";
import {
  pairProjection,
  pointwiseVerdict,
  type RegionKind,
  reduceSpecOf,
  reductionDims,
  SEED_RULES,
  type SeedRule,
  seedInput,
} from "./rules.ts";

export interface Region {
  id: string;
  kind: RegionKind;
  /** The rule that formed it. */
  rule: string;
  /** The normalisation/reduction/pool node (a recipe region: the chain's first), null for a pure pointwise
   * region. */
  seed: string | null;
  /** Pointwise nodes computed before the seed (its input), in graph order. */
  prologue: string[];
  /** Pointwise nodes computed from the seed's output (or all nodes of a pointwise region), graph order. */
  epilogue: string[];
  /** The node whose value the region produces. */
  output: string;
  /** A recipe region: the kernels/<recipe>/ it calls and its chain's nodes by step name. */
  recipe?: { name: string; bind: Record<string, string> };
  /** A library call computed first, which the region's method makes its own way (anchors.ts). */
  anchor?: string;
  /** How the anchor is called: channels-last (its output transposed back by the region's kernel), or in
   * the reference's layout with only its bias moved into the region's kernel. */
  anchorLayout?: AnchorLayout;
  /** The anchor's float32 convolution is computed without TF32 whatever cuDNN's switch says (on by default: a
   * channels-last call then gets a TF32 algorithm where the reference's NCHW one may not): set once the eval
   * found the file's rounding outside the problem's tolerance (withExactAnchors). */
  anchorExact?: boolean;
  /** A reduction's prologue holds this normalisation node: its statistics are computed first, its apply
   * runs inside the reduction's prologue (mergeNormIntoReduction). */
  norm?: string;
  /** A scan between two flips along its dim (`cumsum(x.flip(d), d).flip(d)`, a reverse cumulative sum): the
   * flips are its prologue and the first node of its epilogue, and its kernel scans from the end (reverseScans). */
  reverse?: boolean;
}

export interface KeptNode {
  node: string;
  op: string;
  reason: string;
}

export interface Plan {
  regions: Region[];
  /** Nodes left as PyTorch calls, with why (for the report): a rule's reason for turning one down, no rule
   * for its op, or a library call with nothing to fuse; data movement and views are not listed. */
  kept: KeptNode[];
}

export function regionNodes(region: Region): string[] {
  return [
    ...(region.anchor ? [region.anchor] : []),
    ...region.prologue,
    ...(region.seed ? [region.seed] : []),
    ...region.epilogue,
  ];
}

/** Step 4: each region takes as its anchor a convolution whose output only it reads. */
function attachAnchors(view: GraphView, regions: Region[], claimed: Set<string>, kept: KeptNode[]): void {
  for (const region of regions) {
    const takes = region.kind === "pointwise" || seedTakesAnchor(region, view);
    if (!takes) continue;
    attachAnchor(view, region, claimed, kept);
  }
}

/** `region` takes the first convolution among its operands that only it reads (a region that cannot read a
 * 2-d/3-d conv channels-last takes it only when `handedBack`: first it runs channels-last in a layout
 * region). */
function attachAnchor(
  view: GraphView,
  region: Region,
  claimed: Set<string>,
  kept: KeptNode[],
  handedBack = false,
): void {
  const members = regionNodes(region);
  for (const id of operandNodes(view, members)) {
    if (claimed.has(id) || view.isGraphInput(id)) continue;
    const node = view.node(id);
    const match = anchorRuleFor(node, view);
    if (!match) continue;
    if (match.why !== null) {
      kept.push({ node: id, op: node.op, reason: match.why });
      continue;
    }
    if (!view.usersOf(id).every((user) => members.includes(user))) continue;
    // A pool's kernel reads a conv only as the stream its taps walk.
    if (region.kind === "pool" && poolRegionStream(view, region) !== id) continue;
    const channelsLast = channelsLastRank(node, view) && readsChannelsLast(region, view) && !handedBack;
    if (!channelsLast && channelsLastRank(node, view) && !handedBack) continue;
    const layout: AnchorLayout = channelsLast ? "channels_last" : "native";
    // In its own layout a conv without bias gains nothing from being anchored.
    if (layout === "native" && !anchorBias(node)) continue;
    if (roundsBiasTwice(view, node, members)) continue;
    if (rereadsAnchor(view, region, id)) continue;
    region.anchor = id;
    region.anchorLayout = layout;
    claimed.add(id);
    return;
  }
}

/** Whether a normalisation's epilogue reads the conv while its statistics read a prologue of it (`inorm(y * 2) -
 * y`): the apply pass would reload the anchor and its bias beside the row the kernel holds (the held-row kernel
 * spilled 76 bytes). Read unchanged, the conv is the held value and costs nothing. */
function rereadsAnchor(view: GraphView, region: Region, conv: string): boolean {
  if (region.kind !== "normalize" || !region.seed) return false;
  const input = view.node(region.seed).fn?.input;
  if (input?.t === "node" && input.id === conv) return false;
  return region.epilogue.some((id) =>
    Object.values(view.node(id).fn ?? {}).some((a) => argNodeIds(a).includes(conv)),
  );
}

/** Whether anchoring `conv` would round its biased output twice where PyTorch rounds once and what reads it
 * (`members`: the region taking it, or its readers and their regions) widens it to float32
 * (`conv(x.half()).float()`): the anchor's output is stored in half precision before a kernel adds the bias,
 * which is invisible at half precision's tolerance and a whole ulp at float32's. */
function roundsBiasTwice(view: GraphView, conv: GraphNode, members: Iterable<string>): boolean {
  const dtype = view.outMeta(conv)?.dtype;
  if (!anchorBias(conv) || (dtype !== "float16" && dtype !== "bfloat16")) return false;
  return [...members].some((id) => id !== "@output" && view.outMeta(view.node(id))?.dtype === "float32");
}

/** The nodes reading `id` and the members of the regions they are in. */
function readersAndTheirRegions(view: GraphView, id: string, regions: Region[]): Set<string> {
  const readers = new Set(view.usersOf(id));
  for (const region of regions) {
    const members = regionNodes(region);
    if (members.some((m) => readers.has(m))) for (const m of members) readers.add(m);
  }
  return readers;
}

/** After layout regions left the plan (they lost): a reduction or normalisation that is the only reader of
 * such a convolution takes it in its own layout, bias folded in. The plan, and the regions that changed. */
export function handAnchorsBack(
  graph: Graph,
  plan: Plan,
  droppedConvs: string[],
): { plan: Plan; changed: string[] } {
  const view = new GraphView(graph);
  const dropped = new Set(droppedConvs);
  // Only the dropped convs are free to take.
  const claimed = new Set(graph.nodes.map((n) => n.id).filter((id) => !dropped.has(id)));
  const changed: string[] = [];
  const regions = plan.regions.map((region) => {
    if (region.anchor || !seedTakesAnchor(region, view)) return region;
    const taker = { ...region };
    attachAnchor(view, taker, claimed, [], true);
    if (!taker.anchor) return region;
    changed.push(region.id);
    return taker;
  });
  return { plan: { regions, kept: plan.kept }, changed };
}

/** Step 5: every 2-d/3-d stock convolution nobody claimed, as a region of its own that runs it channels-last
 * (its users, PyTorch calls or regions that cannot take an anchor, read the reference's layout as before). */
function layoutRegions(view: GraphView, claimed: Set<string>, kept: KeptNode[], planned: Region[]): Region[] {
  const regions: Region[] = [];
  for (const node of view.graph.nodes) {
    if (claimed.has(node.id)) continue;
    const match = anchorRuleFor(node, view);
    if (!match) continue;
    if (match.why !== null) {
      if (!kept.some((k) => k.node === node.id)) kept.push({ node: node.id, op: node.op, reason: match.why });
      continue;
    }
    if (!channelsLastRank(node, view)) continue;
    if (roundsBiasTwice(view, node, readersAndTheirRegions(view, node.id, planned))) continue;
    claimed.add(node.id);
    regions.push({
      id: "",
      kind: "pointwise",
      rule: LAYOUT_RULE,
      seed: null,
      prologue: [],
      epilogue: [],
      output: node.id,
      anchor: node.id,
      anchorLayout: "channels_last",
    });
  }
  return regions;
}

/** The plan with every library call made as the reference makes it: layout regions out, anchors off. */
export function withoutAnchors(plan: Plan): Plan {
  return {
    regions: plan.regions
      .filter((r) => r.rule !== LAYOUT_RULE)
      .map((r) =>
        r.anchor ? { ...r, anchor: undefined, anchorLayout: undefined, anchorExact: undefined } : r,
      ),
    kept: plan.kept,
  };
}

/** The plan with every anchor's float32 convolution computed without TF32 (Region.anchorExact); layout regions,
 * which offer nothing but a faster algorithm, leave it. Null when no anchor computes in float32 (nothing would
 * change). */
export function withExactAnchors(plan: Plan, view: GraphView): Plan | null {
  const float32 = (r: Region) =>
    r.anchor !== undefined && view.outMeta(view.node(r.anchor))?.dtype === "float32";
  if (!plan.regions.some((r) => !r.anchorExact && r.rule !== LAYOUT_RULE && float32(r))) return null;
  return {
    regions: plan.regions
      .filter((r) => r.rule !== LAYOUT_RULE)
      .map((r) => (r.anchor ? { ...r, anchorExact: true } : r)),
    kept: plan.kept,
  };
}

/** The rule of a region that is only a convolution run channels-last (step 5). */
export const LAYOUT_RULE = "conv-layout";

/** The plan with the anchors of `regions` one step simpler: channels-last -> the reference's layout (bias
 * still folded) -> no anchor (the library call made as the reference makes it). A layout region has nothing
 * but its anchor's layout to offer, so it leaves the plan at its first step. */
export function relaxAnchors(plan: Plan, regions: Set<string>): Plan {
  const relax = (r: Region): Region | null => {
    if (r.rule === LAYOUT_RULE) return null;
    return r.anchorLayout === "channels_last"
      ? { ...r, anchorLayout: "native" }
      : { ...r, anchor: undefined, anchorLayout: undefined };
  };
  return {
    regions: plan.regions
      .map((r) => (regions.has(r.id) && r.anchor ? relax(r) : r))
      .filter((r): r is Region => r !== null),
    kept: plan.kept,
  };
}

/** One round of re-timing after anchored regions lost: their anchors one step simpler (relaxAnchors), and the
 * convolution of a layout region that left handed to the reduction or normalisation reading it
 * (handAnchorsBack). The plan, the regions to time again, and those of them that took a conv. */
export function relaxLosers(
  graph: Graph,
  plan: Plan,
  lost: Set<string>,
): { plan: Plan; retimed: string[]; handed: string[] } {
  const relaxed = relaxAnchors(plan, lost);
  const gone = plan.regions.filter((r) => lost.has(r.id) && !relaxed.regions.some((p) => p.id === r.id));
  const handed = handAnchorsBack(
    graph,
    relaxed,
    gone.map((r) => r.anchor ?? ""),
  );
  const retimed = [...handed.plan.regions.filter((r) => lost.has(r.id)).map((r) => r.id), ...handed.changed];
  return { plan: handed.plan, retimed, handed: handed.changed };
}

function operandNodes(view: GraphView, nodes: Iterable<string>): Set<string> {
  const inside = new Set(nodes);
  const out = new Set<string>();
  for (const id of inside) {
    const node = view.node(id);
    for (const arg of [...node.args, ...Object.values(node.kwargs)])
      for (const used of argNodeIds(arg)) if (!inside.has(used)) out.add(used);
  }
  return out;
}

/** Tensors a region of these nodes reads: the kernel templates take at most 8 (KF_EW_MAX_IN, KF_RED_MAX_IN);
 * one is left for an anchored conv's bias, which attachAnchors may add later. */
const MAX_REGION_OPERANDS = 7;

function operandCount(view: GraphView, nodes: string[]): number {
  return operandNodes(view, nodes).size + operandParams(view, nodes);
}

/** Grows a single-output DAG backwards from `sink` over pointwise nodes nobody else claimed, while the region
 * (with the nodes `joining` it: a seed) reads no more tensors than a kernel takes. */
function growBackwards(
  view: GraphView,
  sinks: string[],
  eligible: (id: string) => boolean,
  joining: string[] = [],
): string[] {
  const members = new Set<string>(sinks);
  let grown = true;
  while (grown) {
    grown = false;
    for (const id of [...members]) {
      const node = view.node(id);
      for (const arg of [...node.args, ...Object.values(node.kwargs)]) {
        for (const producer of argNodeIds(arg)) {
          if (members.has(producer) || view.isGraphInput(producer) || !eligible(producer)) continue;
          if (!view.usersOf(producer).every((user) => members.has(user))) continue;
          if (operandCount(view, [...members, producer, ...joining]) > MAX_REGION_OPERANDS) continue;
          members.add(producer);
          grown = true;
        }
      }
    }
  }
  return [...members].sort((a, b) => (view.index.get(a) ?? 0) - (view.index.get(b) ?? 0));
}

function seedRuleFor(node: GraphNode, view: GraphView): { rule: SeedRule; why: string | null } | null {
  for (const rule of SEED_RULES) {
    const why = rule.accepts(node, view);
    if (why === null) return { rule, why: null };
    if (!why.startsWith("no ")) return { rule, why };
  }
  return null;
}

export function planGraph(graph: Graph): Plan {
  const view = new GraphView(graph);
  const claimed = new Set<string>();
  const kept: KeptNode[] = [];
  const pointwiseOk = new Map<string, string | null>();
  for (const node of graph.nodes) pointwiseOk.set(node.id, pointwiseVerdict(node, view));
  const eligible = (id: string) => pointwiseOk.get(id) === null && !claimed.has(id);

  const recipes: Region[] = [];
  for (const node of graph.nodes) {
    if (claimed.has(node.id)) continue;
    for (const rule of RECIPE_RULES) {
      const match = matchRecipe(rule, node, view);
      if (!match) continue;
      if ("why" in match) {
        kept.push({ node: node.id, op: node.op, reason: match.why });
        continue;
      }
      for (const id of match.nodes) claimed.add(id);
      const [first, ...rest] = match.nodes as [string, ...string[]];
      recipes.push({
        id: "",
        kind: "recipe",
        rule: rule.name,
        seed: first,
        prologue: [],
        epilogue: rest,
        output: match.nodes.at(-1) ?? first,
        recipe: { name: rule.recipe, bind: match.bind },
      });
      break;
    }
  }

  const seeds: Region[] = [];
  for (const node of graph.nodes) {
    if (claimed.has(node.id)) continue;
    const match = seedRuleFor(node, view);
    if (!match) continue;
    if (match.why !== null) {
      kept.push({ node: node.id, op: node.op, reason: match.why });
      continue;
    }
    // A loss's every tensor operand may have a prologue (`kl_div(lp, lq.exp())`, `mse_loss(a, relu(b))`), as the
    // kernel reads each operand by element; the other seeds read their first operand through it.
    const operands = match.rule.kind === "reduce" ? (REDUCTIONS[node.op]?.operands ?? []) : [];
    const inputs = operands.length > 1 ? operands.map((key) => node.fn?.[key]) : [seedInput(node)];
    const sinks = [
      ...new Set(
        inputs.flatMap((input) =>
          input?.t === "node" && eligible(input.id) && view.usersOf(input.id).length === 1 ? [input.id] : [],
        ),
      ),
    ];
    const grow = (fromIndex: number) =>
      growBackwards(view, sinks, (id) => eligible(id) && (view.index.get(id) ?? 0) >= fromIndex, [node.id]);
    const prologue =
      !match.rule.prologue || !sinks.length
        ? []
        : match.rule.kind === "pool"
          ? poolPrologue(view, node, grow, (id) => claimed.has(id))
          : grow(0);
    // A (values, indices) reduction is read through one `[i]`: the region produces that node's value.
    const values = REDUCTIONS[node.op]?.valuesOfPair ? (pairProjection(node, view)?.id ?? null) : null;
    for (const id of [...prologue, node.id, ...(values ? [values] : [])]) claimed.add(id);
    seeds.push({
      id: "",
      kind: match.rule.kind,
      rule: match.rule.name,
      seed: node.id,
      prologue,
      epilogue: values ? [values] : [],
      output: values ?? node.id,
    });
  }

  const pointwise: Region[] = [];
  for (const node of [...graph.nodes].reverse()) {
    if (!eligible(node.id)) continue;
    const members = growBackwards(view, [node.id], eligible);
    for (const id of members) claimed.add(id);
    pointwise.push({
      id: "",
      kind: "pointwise",
      rule: "pointwise",
      seed: null,
      prologue: [],
      epilogue: members,
      output: node.id,
    });
  }

  reverseScans(view, seeds, claimed);
  const absorbed = new Set<Region>();
  for (const seed of seeds) {
    const seedId = seed.output; // the seed's value (through its `[0]` for a (values, indices) reduction)
    const rule = SEED_RULES.find((r) => r.name === seed.rule);
    const users = view.usersOf(seedId);
    const host = pointwise.find(
      (p) => !absorbed.has(p) && users.length > 0 && users.every((u) => p.epilogue.includes(u)),
    );
    if (!host || !rule) continue;
    // An index reduction (argmax, max(dim)[1]) stores the index itself, and a loss finished over its rows
    // (cross entropy's mean) is whole only after its kernel: neither runs an epilogue.
    const seedSpec = seed.seed ? reduceSpecOf(view.node(seed.seed), view) : undefined;
    if (seedSpec?.index || seedSpec?.finish) continue;
    const outside = operandNodes(view, host.epilogue);
    const seedShape = view.outMeta(view.node(seedId))?.shape ?? [];
    const hostShape = view.outMeta(view.node(host.output))?.shape ?? [];
    // A number another node computed (`/ x.shape[0]`) is a runtime scalar, which an epilogue takes.
    const onlySeed =
      [...outside].every((id) => id === seedId || view.isNumberValue({ t: "node", id })) &&
      operandParams(view, host.epilogue) === 0;
    if (!sameShape(seedShape, hostShape) || (rule.epilogue === "scalars" && !onlySeed)) continue;
    const merged = [...seed.prologue, seed.seed ?? seedId, ...seed.epilogue, ...host.epilogue];
    if (operandCount(view, merged) > MAX_REGION_OPERANDS) continue;
    seed.epilogue = [...seed.epilogue, ...host.epilogue];
    seed.output = host.output;
    absorbed.add(host);
  }

  const merged = mergeNormsIntoReductions(view, seeds);
  dropLoneBroadcasts(view, seeds, merged, claimed, kept);

  // Kernels read masks but store float types only: a region producing a mask is left to PyTorch.
  const boolBound = (region: Region) => view.outMeta(view.node(region.output))?.dtype === "bool";
  for (const region of pointwise) {
    if (absorbed.has(region) || !boolBound(region)) continue;
    absorbed.add(region);
    for (const id of region.epilogue) {
      claimed.delete(id);
      kept.push({
        node: id,
        op: view.node(id).op,
        reason: "it computes a boolean mask read outside its region",
      });
    }
  }
  // A region of casts and constants alone is a conversion or a fill PyTorch makes as well (and a cast to the
  // same dtype is no copy at all).
  for (const region of pointwise) {
    if (absorbed.has(region) || !region.epilogue.every((id) => NO_ARITHMETIC.has(view.node(id).op))) continue;
    absorbed.add(region);
    for (const id of region.epilogue) claimed.delete(id);
  }
  const regions = [
    ...recipes,
    ...seeds.filter((r) => !merged.has(r)),
    ...pointwise.filter((p) => !absorbed.has(p)),
  ];
  attachAnchors(view, regions, claimed, kept);
  regions.push(...layoutRegions(view, claimed, kept, regions));
  dropRegionsAcrossWrites(view, regions, claimed, kept);
  regions.sort((a, b) => (view.index.get(a.output) ?? 0) - (view.index.get(b.output) ?? 0));
  regions.forEach((region, i) => {
    region.id = `r${i}`;
  });
  for (const node of graph.nodes) {
    const why = pointwiseOk.get(node.id);
    // A call returning several tensors (torch.std_mean, var_mean) is an op kept as much as one returning one.
    const tensorOut =
      node.out.t === "tensor" || (node.out.t === "tuple" && node.out.items.some((m) => m !== null));
    if (!why || !tensorOut || claimed.has(node.id) || kept.some((k) => k.node === node.id)) continue;
    if (!why.startsWith("no ")) kept.push({ node: node.id, op: node.op, reason: why });
    else if (node.kind !== "get_attr" && !PASSTHROUGH_OPS.has(node.op))
      kept.push({ node: node.id, op: node.op, reason: uncoveredReason(node) });
  }
  return { regions, kept };
}

/** A reduction broadcast back (reduce-broadcast.ts) is worth a region only with the pointwise op that reads it as
 * its apply, or inside the reduction whose prologue reads it (`exp(x - x.amax(-1, True)).sum(-1)`: its statistics
 * first, the apply in that prologue): alone, its region would write the statistic at every element of its input.
 * Without either, the reduction's written nodes run as PyTorch's, and so do the prologue's ops. */
function dropLoneBroadcasts(
  view: GraphView,
  seeds: Region[],
  merged: Set<Region>,
  claimed: Set<string>,
  kept: KeptNode[],
) {
  for (let i = seeds.length - 1; i >= 0; i--) {
    const region = seeds[i];
    const seed = region?.seed ? view.node(region.seed) : null;
    if (!region || merged.has(region)) continue;
    if (!seed?.op.startsWith("reduce_broadcast_") || region.epilogue.length > 0) continue;
    seeds.splice(i, 1);
    for (const id of [...region.prologue, seed.id]) claimed.delete(id);
    kept.push({
      node: seed.id,
      op: seed.written?.[0]?.op ?? seed.op,
      reason: "the op reading its result back over its rows could not join its region",
    });
  }
}

/** A region runs as one call where its output was: one that reads a value before an in-place write it
 * leaves to PyTorch and computes past it (`z = y.sigmoid(); y.mul_(3); z + y`) would read the written value
 * for both. Such a region is left to PyTorch. */
function dropRegionsAcrossWrites(view: GraphView, regions: Region[], claimed: Set<string>, kept: KeptNode[]) {
  const writers = view.graph.nodes.filter((n) => n.inplace && !claimed.has(n.id)).map((n) => n.id);
  if (writers.length === 0) return;
  for (let i = regions.length - 1; i >= 0; i--) {
    const region = regions[i];
    if (!region) continue;
    const members = regionNodes(region);
    const writer = writeInside(view, members, region.output, writers);
    if (writer === null) continue;
    regions.splice(i, 1);
    for (const id of members) {
      claimed.delete(id);
      kept.push({
        node: id,
        op: view.node(id).op,
        reason: `its region would read a value on both sides of ${writer}, an in-place write`,
      });
    }
  }
}

/** Step 2b: a scan read through a flip along its dim and flipped back along it (a reverse cumulative sum, as
 * `torch.cumsum(x.flip(d), d).flip(d)` writes it) is one scan from the end of the dim: its region takes both
 * flips, so neither copy is made. Only where each flip is read by the other side alone. */
function reverseScans(view: GraphView, seeds: Region[], claimed: Set<string>): void {
  const flipAlong = (id: string, dim: number, rank: number) => {
    const node = view.node(id);
    const dims = node.op === "flip" && node.fn?.dims ? view.ints(node.fn.dims) : null;
    return dims?.length === 1 && ((dims[0] ?? 0) + rank) % rank === dim && !node.inplace;
  };
  for (const region of seeds) {
    if (region.kind !== "scan" || !region.seed || region.prologue.length || region.epilogue.length) continue;
    const seed = view.node(region.seed);
    const dim = scanDim(seed, view);
    const rank = view.tensorOf(seed.fn?.input)?.shape.length ?? 0;
    const input = seed.fn?.input;
    if (dim === null || input?.t !== "node" || view.isGraphInput(input.id) || claimed.has(input.id)) continue;
    const users = view.usersOf(region.seed);
    const after = users.length === 1 ? users[0] : undefined;
    if (!after || after === "@output" || claimed.has(after)) continue;
    if (!flipAlong(input.id, dim, rank) || !flipAlong(after, dim, rank)) continue;
    if (view.usersOf(input.id).length !== 1) continue;
    region.prologue = [input.id];
    region.epilogue = [after];
    region.output = after;
    region.reverse = true;
    claimed.add(input.id);
    claimed.add(after);
  }
}

/** Pointwise ops that compute nothing from their input's values. */
// A dropout is pointwise only where it draws nothing (eval mode): there PyTorch's call returns its input and
// launches nothing, so a region of dropouts and casts alone (a classifier head's `self.dropout(x)` between a view
// and a Linear, in a model put in eval()) would be a copy kernel the reference never runs.
const NO_ARITHMETIC = new Set(["to", "zeros_like", "ones_like", "full_like", "dropout"]);

/** Statistics take 3 more operands of a reduction that applies a normalisation in its prologue. */
const NORM_STATS_OPERANDS = 3;

/** Reductions that read a group norm's output in its [N, G, C/G, rest] view: one input, a value result. */
const GROUP_VIEW_REDUCTIONS = new Set(["sum", "mean", "amax", "amin", "logsumexp", "var", "std", "prod"]);

/** Step 3b: a normalisation whose output only a reduction's prologue reads becomes part of that reduction's
 * region: its statistics are computed first, its apply inside the reduction's prologue, so the normalised
 * tensor is never written (group norm, then a logsumexp over channels). The normalisation regions merged. */
function mergeNormsIntoReductions(view: GraphView, seeds: Region[]): Set<Region> {
  const merged = new Set<Region>();
  for (const red of seeds) {
    if (red.kind !== "reduce" || !red.seed) continue;
    const reduceNode = view.node(red.seed);
    // A class-index loss checks its targets against its scores' shape where its own operands are bound; a
    // normalisation before it (softmax, then cross_entropy) stays a region of its own.
    if (reduceSpecOf(reduceNode, view)?.integerOperands) continue;
    const redInput = view.tensorOf(seedInput(reduceNode));
    for (const norm of seeds) {
      if (norm.kind !== "normalize" || !norm.seed || merged.has(norm)) continue;
      const users = view.usersOf(norm.output);
      if (users.length === 0 || !users.every((u) => red.prologue.includes(u) || u === red.seed)) continue;
      const normNode = view.node(norm.seed);
      const spec = NORMALIZATIONS[normNode.op];
      const out = view.outMeta(view.node(norm.output))?.shape ?? [];
      if (!spec || !redInput || !sameShape(out, redInput.shape)) continue;
      if (spec.groups && !groupViewReduction(view, reduceNode, norm)) continue;
      const members = [...norm.prologue, norm.seed, ...norm.epilogue, ...red.prologue];
      if (operandCount(view, [...members, red.seed]) + NORM_STATS_OPERANDS > MAX_REGION_OPERANDS) continue;
      red.prologue = members.sort((a, b) => (view.index.get(a) ?? 0) - (view.index.get(b) ?? 0));
      red.norm = norm.seed;
      merged.add(norm);
      break;
    }
  }
  return merged;
}

/** Whether a reduction can run in group norm's [N, G, C/G, rest] view: its dims take the channels whole and
 * the spatial dims all or none, and the norm reads a tensor the region does not compute (its shape sizes the
 * view before anything runs). */
function groupViewReduction(view: GraphView, reduceNode: GraphNode, norm: Region): boolean {
  const dims = reductionDims(reduceNode, view);
  const rank = view.tensorOf(seedInput(reduceNode))?.shape.length ?? 0;
  const spec = reduceSpecOf(reduceNode, view);
  if (!dims || rank < 3 || !spec || spec.index || !GROUP_VIEW_REDUCTIONS.has(reduceNode.op)) return false;
  const spatial = dims.filter((d) => d >= 2).length;
  return (spatial === 0 || spatial === rank - 2) && norm.prologue.length === 0;
}

/** Ops that view, move or describe data and are nobody's kernel work: left to PyTorch without a word. */
const PASSTHROUGH_OPS = new Set([
  ...["view", "reshape", "flatten", "unflatten", "permute", "transpose", "t", "contiguous", "unsqueeze"],
  ...["squeeze", "expand", "expand_as", "view_as", "reshape_as", "getitem", "getattr", "size", "numel"],
  ...["dim", "slice", "select", "narrow", "clone", "detach", "split", "chunk", "identity", "to", "float"],
  ...["type_as", "broadcast_tensors"],
]);

/** Library ops (cuBLAS / cuDNN / PyTorch's attention) every emitted file calls as the reference does. */
const LIBRARY_OPS = new Set([
  ...["linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "mv", "dot", "bilinear"],
  ...["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"],
  "scaled_dot_product_attention",
]);

/** Why an op no rule covers stays a PyTorch call, for the report (a call capture has no name for by what the
 * reference calls). */
function uncoveredReason(node: GraphNode): string {
  if (LIBRARY_OPS.has(node.op))
    return "a library call (cuBLAS/cuDNN through PyTorch): kept as the reference calls it";
  if (node.op === "hooked_module")
    return `the module ${node.target} has hooks (a legacy weight_norm's, say), which a fused region would skip: its own call`;
  const what =
    node.op !== "unknown"
      ? node.op
      : node.kind === "call_method"
        ? `.${node.target}()`
        : node.kind === "call_module"
          ? `the module ${node.target}`
          : node.target;
  return `no rule covers ${what}: PyTorch's own kernel`;
}

/** A batch norm on batch statistics updates its running statistics and step counter in a launch of their own
 * (the emitted `_kf_batch_norm`): they are no operands of the region's kernels, which read the input, weight and
 * bias. Counted as operands, a training-mode BatchNorm weighed 5 and its residual epilogue of two tensors (RepVGG's
 * `dense + 1x1 + id`) went over MAX_REGION_OPERANDS into a pass of its own. In eval mode (`training=False`) the
 * statistics are the per-channel affine's operands and count. */
const UPDATED_STATS = new Set(["running_mean", "running_var", "num_batches_tracked"]);

function operandParams(view: GraphView, nodes: string[]): number {
  let count = 0;
  for (const id of nodes) {
    const node = view.node(id);
    const training = node.fn?.training;
    const updates = node.op === "batch_norm" && !(training?.t === "const" && training.value === false);
    for (const [key, arg] of Object.entries(node.fn ?? {}))
      if (arg.t === "param" && !(updates && UPDATED_STATS.has(key))) count += 1;
  }
  return count;
}
