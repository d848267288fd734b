// Golden tests of the rule table and planner on hand-built graphs: what each rule must and must not take.
import assert from "node:assert/strict";
import { test } from "node:test";
import { generateRegion } from "../src/optimize/codegen/region.ts";
import type { Arg, Graph, GraphNode } from "../src/optimize/graph.ts";
import { GraphView } from "../src/optimize/plan/graph-view.ts";
import {
  handAnchorsBack,
  LAYOUT_RULE,
  planGraph,
  type Region,
  regionNodes,
  relaxAnchors,
  withExactAnchors,
} from "../src/optimize/plan/planner.ts";
import { canonicalGraph } from "../src/optimize/plan/rewrites.ts";
import {
  normDims,
  pointwiseVerdict,
  reduceSpecOf,
  reductionDims,
  SEED_RULES,
} from "../src/optimize/plan/rules.ts";

const f32 = (shape: number[]) => ({ shape, dtype: "float32", stride: contiguous(shape) });
function contiguous(shape: number[]): number[] {
  const stride = shape.map(() => 1);
  for (let i = shape.length - 2; i >= 0; i--) stride[i] = (stride[i + 1] ?? 1) * (shape[i + 1] ?? 1);
  return stride;
}
const ref = (id: string): Arg => ({ t: "node", id });
const param = (path: string): Arg => ({ t: "param", path });
const num = (value: number, attr?: string): Arg => ({
  t: "const",
  pytype: Number.isInteger(value) ? "int" : "float",
  value,
  ...(attr ? { attr } : {}),
});
const none: Arg = { t: "const", pytype: "none", value: null };
const bool = (value: boolean): Arg => ({ t: "const", pytype: "bool", value });
const ints = (...values: number[]): Arg => ({ t: "list", kind: "list", items: values.map((v) => num(v)) });

function node(
  id: string,
  op: string,
  fn: Record<string, Arg>,
  shape: number[],
  extra: Partial<GraphNode> = {},
): GraphNode {
  return {
    id,
    kind: "call_function",
    target: `torch.${op}`,
    args: Object.values(fn).filter((a) => a.t === "node"),
    kwargs: {},
    op,
    fn,
    out: { t: "tensor", meta: f32(shape) },
    modeDependent: false,
    rng: false,
    inplace: false,
    ...extra,
  };
}

/** The model's `self.conv` (nn.Conv2d with a bias) called on the input x. */
function convModule(): GraphNode {
  return node(
    "conv",
    "conv2d",
    { input: ref("x"), weight: param("conv.weight"), bias: param("conv.bias") },
    X,
    {
      kind: "call_module",
      target: "conv",
    },
  );
}

function graph(nodes: GraphNode[], output: string, params: Record<string, number[]> = {}): Graph {
  return {
    captured: "fx",
    failure: null,
    torchVersion: "test",
    inputs: [{ name: "x", meta: f32([8, 16, 32, 32]), value: null }],
    nodes,
    output: ref(output),
    params: Object.fromEntries(
      Object.entries(params).map(([path, shape]) => [
        path,
        { kind: "parameter" as const, meta: f32(shape), requiresGrad: true },
      ]),
    ),
    modules: {},
    scalarAttrs: {},
    source: { prelude: "", init: "", forward: "", methods: [], signature: "self, x" },
  };
}

const X = [8, 16, 32, 32];

test("a conv's pointwise epilogue (relu, + per-channel bias, * attribute scale) is one region", () => {
  const g = graph(
    [
      node("conv", "conv2d", { input: ref("x"), weight: param("conv.weight") }, X, {
        kind: "call_module",
        target: "conv",
      }),
      node("relu", "relu", { input: ref("conv") }, X),
      node("add", "add", { input: ref("relu"), other: param("bias"), alpha: num(1) }, X),
      node("mul", "mul", { input: ref("add"), other: num(2.5, "scale") }, X),
    ],
    "mul",
    { "conv.weight": [16, 16, 3, 3], bias: [16, 1, 1] },
  );
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1);
  const first = plan.regions[0];
  assert.ok(first);
  assert.deepEqual(regionNodes(first), ["relu", "add", "mul"]);
  assert.equal(plan.regions[0]?.output, "mul");
});

function convGraph(moduleType: string, extraUsers = false, paddingMode = "zeros"): Graph {
  const g = graph(
    [
      convModule(),
      node("relu", "relu", { input: ref("conv") }, X),
      node("add", "add", { input: ref("relu"), other: param("bias"), alpha: num(1) }, X),
      ...(extraUsers
        ? [node("sum", "sum", { input: ref("conv"), dim: none, keepdim: bool(false) }, [])]
        : []),
    ],
    "add",
    { "conv.weight": [16, 16, 3, 3], "conv.bias": [16], bias: [16, 1, 1] },
  );
  const padding: Arg = { t: "const", pytype: "str", value: paddingMode };
  g.modules.conv = { type: moduleType, training: true, hyper: { padding_mode: padding } };
  return g;
}

test("a stock conv whose output only a pointwise region reads becomes that region's anchor", () => {
  const plan = planGraph(convGraph("torch.nn.modules.conv.Conv2d"));
  assert.equal(plan.regions.length, 1);
  const region = plan.regions[0];
  assert.equal(region?.anchor, "conv");
  assert.deepEqual(region && regionNodes(region), ["conv", "relu", "add"]);
});

test("a parametrised stock conv (weight_norm, spectral_norm) anchors; an unknown parametrisation or a parametrised bias does not", () => {
  const parametrized = (weight: string[], bias?: string[]) => {
    const g = convGraph("torch.nn.utils.parametrize.ParametrizedConv2d");
    const conv = g.modules.conv;
    if (conv) conv.parametrized = { weight, ...(bias ? { bias } : {}) };
    return planGraph(g);
  };
  for (const kind of ["_WeightNorm", "_SpectralNorm"])
    assert.equal(parametrized([kind]).regions[0]?.anchor, "conv", kind);
  const custom = parametrized(["_WeightNorm", "Symmetric"]);
  assert.ok(custom.regions.every((r) => r.anchor === undefined));
  assert.match(custom.kept.find((k) => k.node === "conv")?.reason ?? "", /parametrisation/);
  assert.ok(parametrized(["_WeightNorm"], ["_WeightNorm"]).regions.every((r) => r.anchor === undefined));
  // a parametrised subclass of a class that is not a stock conv stays its own call
  const other = convGraph("torch.nn.utils.parametrize.ParametrizedMyConv");
  assert.ok(planGraph(other).regions.every((r) => r.anchor === undefined));
});

test("no anchor: a conv read elsewhere, a subclass, a call with more than its input, padding other than zeros", () => {
  const shared = planGraph(convGraph("torch.nn.modules.conv.Conv2d", true));
  assert.ok(shared.regions.filter((r) => r.rule !== LAYOUT_RULE).every((r) => r.anchor === undefined));
  const subclass = planGraph(convGraph("problem.MyConv"));
  assert.ok(subclass.regions.every((r) => r.anchor === undefined));
  assert.match(
    subclass.kept.find((k) => k.node === "conv")?.reason ?? "",
    /not a stock torch.nn convolution/,
  );
  const sized = convGraph("torch.nn.modules.conv.Conv2d");
  const conv = sized.nodes[0];
  if (conv) conv.kwargs = { output_size: ints(32, 32) };
  assert.ok(planGraph(sized).regions.every((r) => r.anchor === undefined));
  const reflect = planGraph(convGraph("torch.nn.modules.conv.Conv2d", false, "reflect"));
  assert.ok(reflect.regions.every((r) => r.anchor === undefined));
  assert.match(reflect.kept.find((k) => k.node === "conv")?.reason ?? "", /padding_mode/);
});

test("a half-precision conv with a bias is not anchored, nor laid out alone, where its reader widens it to float32", () => {
  // conv(x.half()) + bias -> relu -> .float(): a kernel adding the bias rounds it twice (cuDNN's output, then
  // the sum), PyTorch once: a whole fp16 ulp, seen at float32's tolerance.
  const halfConv = (widened: boolean) => {
    const g = convGraph("torch.nn.modules.conv.Conv2d");
    for (const n of g.nodes) if (n.out.t === "tensor") n.out.meta.dtype = "float16";
    const input = g.inputs[0];
    if (input?.meta) input.meta.dtype = "float16";
    if (widened) {
      const cast = node(
        "f",
        "to",
        { input: ref("add"), dtype: { t: "const", pytype: "dtype", value: "float32" } },
        X,
      );
      g.nodes.push(cast);
      g.output = ref("f");
    }
    return planGraph(g);
  };
  const half = halfConv(false);
  assert.equal(half.regions[0]?.anchor, "conv", "kept in half precision: anchored");
  const widened = halfConv(true);
  assert.ok(widened.regions.every((r) => r.anchor === undefined));
  assert.deepEqual(
    widened.regions.map((r) => regionNodes(r)),
    [["relu", "add", "f"]],
  );
});

test("withExactAnchors marks float32 anchors only, keeps their layout, and has nothing to do without one", () => {
  const g = convGraph("torch.nn.modules.conv.Conv2d");
  const plan = planGraph(g);
  const exact = withExactAnchors(plan, new GraphView(g));
  assert.equal(exact?.regions[0]?.anchorExact, true);
  assert.equal(exact?.regions[0]?.anchorLayout, plan.regions[0]?.anchorLayout);
  assert.equal(plan.regions[0]?.anchorExact, undefined, "the original plan is not modified");
  assert.equal(exact && withExactAnchors(exact, new GraphView(g)), null, "already exact");
  for (const n of g.nodes) if (n.out.t === "tensor") n.out.meta.dtype = "float16";
  assert.equal(
    withExactAnchors(planGraph(g), new GraphView(g)),
    null,
    "a half-precision conv has no TF32 to avoid",
  );
});

test("relaxAnchors steps an anchor down: channels-last, then the reference's layout, then none", () => {
  const plan = planGraph(convGraph("torch.nn.modules.conv.Conv2d"));
  const id = plan.regions[0]?.id ?? "";
  assert.equal(plan.regions[0]?.anchorLayout, "channels_last");
  const native = relaxAnchors(plan, new Set([id]));
  assert.equal(native.regions[0]?.anchor, "conv");
  assert.equal(native.regions[0]?.anchorLayout, "native");
  const plain = relaxAnchors(native, new Set([id]));
  assert.equal(plain.regions[0]?.anchor, undefined);
  assert.deepEqual(plain.regions[0] && regionNodes(plain.regions[0]), ["relu", "add"]);
  assert.equal(plan.regions[0]?.anchorLayout, "channels_last", "the original plan is not modified");
});

test("a layer norm over the last dim reading a 2-d conv runs it channels-last in a layout region; if that loses, takes it natively; a reduction reads it channels-last", () => {
  const planned = (op: string, fn: Record<string, Arg>, shape: number[], bias: Arg = param("conv.bias")) => {
    const g = graph(
      [
        node("conv", "conv2d", { input: ref("x"), weight: param("conv.weight"), bias }, X, {
          kind: "call_module",
          target: "conv",
        }),
        node("seed", op, { input: ref("conv"), ...fn }, shape),
      ],
      "seed",
      { "conv.weight": [16, 16, 3, 3], "conv.bias": [16] },
    );
    g.modules.conv = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
    const plan = planGraph(g);
    const seed = plan.regions.find((r) => r.seed === "seed");
    const layout = plan.regions.find((r) => r.rule === LAYOUT_RULE);
    // Measured planning: the layout region lost, so it leaves the plan and its conv is handed back.
    const relaxed = relaxAnchors(plan, new Set([layout?.id ?? ""]));
    const handed = handAnchorsBack(g, relaxed, ["conv"]);
    return {
      seed,
      layout,
      handed: handed.plan.regions.find((r) => r.seed === "seed"),
      changed: handed.changed,
    };
  };
  // A reduction reads the conv channels-last itself (kf_reduce orders dims by memory layout).
  const sum = planned("sum", { dim: ints(2, 3), keepdim: bool(false) }, [8, 16]);
  assert.equal(sum.seed?.anchor, "conv");
  assert.equal(sum.seed?.anchorLayout, "channels_last");
  assert.equal(sum.layout, undefined);
  const max = planned("amax", { dim: ints(1), keepdim: bool(false) }, [8, 32, 32], none);
  assert.equal(max.seed?.anchorLayout, "channels_last", "channels-last pays without a bias too");
  // Layer norm over the last dim cannot read it channels-last: a layout region first, then its own layout.
  const layer = planned("layer_norm", { normalized_shape: ints(32), eps: num(1e-5) }, X);
  assert.equal(layer.seed?.anchor, undefined);
  assert.equal(layer.layout?.anchorLayout, "channels_last");
  assert.equal(layer.handed?.anchor, "conv");
  assert.equal(layer.handed?.anchorLayout, "native");
  assert.deepEqual(layer.changed, [layer.seed?.id]);
  const biasless = planned("layer_norm", { normalized_shape: ints(32), eps: num(1e-5) }, X, none);
  assert.ok(biasless.layout, "channels-last pays without a bias too");
  assert.equal(biasless.handed?.anchor, undefined, "in its own layout a conv without bias gains nothing");
});

test("a normalisation whose kept dims keep their order in channels-last memory reads the conv channels-last", () => {
  const seedOf = (op: string, fn: Record<string, Arg>) => {
    const g = graph(
      [
        node("conv", "conv2d", { input: ref("x"), weight: param("conv.weight"), bias: none }, X, {
          kind: "call_module",
          target: "conv",
        }),
        node("seed", op, { input: ref("conv"), ...fn }, X),
      ],
      "seed",
      { "conv.weight": [16, 16, 3, 3], "bn.weight": [16], "bn.bias": [16], "ln.weight": X.slice(1) },
    );
    g.modules.conv = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
    const plan = planGraph(g);
    return {
      seed: plan.regions.find((r) => r.seed === "seed"),
      layout: plan.regions.find((r) => r.rule === LAYOUT_RULE),
      relaxed: relaxAnchors(plan, new Set([plan.regions.find((r) => r.seed === "seed")?.id ?? ""])),
    };
  };
  const bn = seedOf("batch_norm", {
    weight: param("bn.weight"),
    bias: param("bn.bias"),
    training: bool(true),
    eps: num(1e-5),
  });
  assert.equal(bn.seed?.anchor, "conv", "batch norm (channel kept, space reduced)");
  assert.equal(bn.seed?.anchorLayout, "channels_last");
  assert.equal(bn.layout, undefined, "no layout region of its own");
  assert.equal(bn.relaxed.regions[0]?.anchorLayout, "native", "a loss steps down to the reference's layout");
  const instance = seedOf("instance_norm", { eps: num(1e-5) });
  assert.equal(instance.seed?.anchorLayout, "channels_last");
  const layerAll = seedOf("layer_norm", { normalized_shape: ints(...X.slice(1)), eps: num(1e-5) });
  assert.equal(layerAll.seed?.anchorLayout, "channels_last", "layer norm over [C, H, W]");
  const softmax = seedOf("softmax", { dim: num(1) });
  assert.equal(softmax.seed?.anchorLayout, "channels_last", "softmax over channels");
  // Channel kept with a spatial dim kept: the statistics' order differs in channels-last memory.
  const layerLast = seedOf("layer_norm", { normalized_shape: ints(X[3] ?? 0), eps: num(1e-5) });
  assert.ok(layerLast.seed);
  assert.equal(layerLast.seed?.anchor, undefined);
  assert.equal(layerLast.layout?.anchor, "conv", "the conv runs channels-last in its own layout region");
  const group = seedOf("group_norm", { num_groups: num(4), eps: num(1e-5) });
  assert.equal(group.seed?.anchorLayout, "channels_last", "group norm: kept N and G stay in order");
});

test("a normalisation only a reduction reads joins it: statistics first, the apply in the reduction's prologue", () => {
  const planned = (
    normOp: string,
    normFn: Record<string, Arg>,
    reduceOp: string,
    dims: number[],
    extraUser = false,
  ) => {
    const g = graph(
      [
        node("norm", normOp, { input: ref("x"), ...normFn }, X),
        node("act", "tanh", { input: ref("norm") }, X),
        node("red", reduceOp, { input: ref("act"), dim: ints(...dims), keepdim: bool(true) }, [8, 1, 32, 32]),
        ...(extraUser ? [node("other", "relu", { input: ref("norm") }, X)] : []),
      ],
      extraUser ? "other" : "red",
      { "gn.weight": [16], "gn.bias": [16] },
    );
    return planGraph(g).regions;
  };
  const gn = { num_groups: num(4), weight: param("gn.weight"), bias: param("gn.bias"), eps: num(1e-5) };
  const merged = planned("group_norm", gn, "logsumexp", [1]);
  assert.equal(merged.length, 1);
  assert.equal(merged[0]?.kind, "reduce");
  assert.equal(merged[0]?.norm, "norm");
  assert.deepEqual(merged[0]?.prologue, ["norm", "act"]);
  const instance = planned("instance_norm", { eps: num(1e-5) }, "sum", [2, 3]);
  assert.equal(instance[0]?.norm, "norm", "any normalisation over the reduction's own shape");
  // Group norm's view takes the spatial dims all or none; a norm read elsewhere is written as before.
  assert.equal(
    planned("group_norm", gn, "sum", [3]).some((r) => r.norm),
    false,
  );
  assert.equal(
    planned("group_norm", gn, "logsumexp", [1], true).some((r) => r.norm),
    false,
  );
});

test("a value used outside the chain ends the region there (single output)", () => {
  const g = graph(
    [
      node("a", "sigmoid", { input: ref("x") }, X),
      node("b", "mul", { input: ref("a"), other: num(2) }, X),
      node("c", "add", { input: ref("b"), other: ref("a") }, X),
      node("d", "matmul", { input: ref("a"), other: ref("c") }, X),
    ],
    "d",
  );
  const plan = planGraph(g);
  const sets = plan.regions.map((r) => regionNodes(r));
  assert.deepEqual(sets, [["a"], ["b", "c"]]);
});

test("softmax takes its pointwise prologue; a pointwise tail after it becomes its epilogue", () => {
  const g = graph(
    [
      node("s", "mul", { input: ref("x"), other: num(0.125) }, X),
      node("sm", "softmax", { input: ref("s"), dim: num(1) }, X),
      node("g", "gelu", { input: ref("sm"), approximate: { t: "const", pytype: "str", value: "none" } }, X),
    ],
    "g",
  );
  const [region, ...rest] = planGraph(g).regions;
  assert.equal(rest.length, 0);
  assert.equal(region?.kind, "normalize");
  assert.deepEqual(region?.prologue, ["s"]);
  assert.deepEqual(region?.epilogue, ["g"]);
});

test("a reduction's epilogue takes scalars only: a tensor operand after it is its own region", () => {
  const reduced = [8, 16];
  const g = graph(
    [
      node("m", "mean", { input: ref("x"), dim: ints(2, 3), keepdim: bool(false), dtype: none }, reduced),
      node("t", "mul", { input: ref("m"), other: num(3) }, reduced),
      node("u", "add", { input: ref("t"), other: param("b") }, reduced),
    ],
    "u",
    { b: [16] },
  );
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 2);
  assert.equal(plan.regions[0]?.kind, "reduce");
  assert.deepEqual(plan.regions[1]?.epilogue, ["t", "u"]);
});

test("dropout in training draws random numbers and is never fused", () => {
  const drop = node(
    "d",
    "dropout",
    { input: ref("x"), p: num(0.2), training: bool(true), inplace: bool(false) },
    X,
    {
      rng: true,
    },
  );
  const view = new GraphView(graph([drop], "d"));
  assert.match(pointwiseVerdict(drop, view) ?? "", /random/);
});

test("non-float inputs and unknown gelu modes are left to PyTorch", () => {
  // relu of an int64 tensor is int64 (an integer read by a float32 result is taken: the test below)
  const intNode = node("i", "relu", { input: ref("x") }, X, {
    out: { t: "tensor", meta: { shape: X, dtype: "int64", stride: contiguous(X) } },
  });
  const g = graph([intNode], "i");
  g.inputs[0] = { name: "x", meta: { shape: X, dtype: "int64", stride: contiguous(X) }, value: null };
  assert.match(pointwiseVerdict(intNode, new GraphView(g)) ?? "", /int64/);

  const gelu = node(
    "g",
    "gelu",
    { input: ref("x"), approximate: { t: "const", pytype: "str", value: "erfc" } },
    X,
  );
  assert.match(pointwiseVerdict(gelu, new GraphView(graph([gelu], "g"))) ?? "", /no kernel form/);
});

function evalBatchNorm(fn: Record<string, Arg> = {}): GraphNode {
  return node(
    "bn",
    "batch_norm",
    {
      input: ref("x"),
      running_mean: param("bn.running_mean"),
      running_var: param("bn.running_var"),
      weight: param("bn.weight"),
      bias: param("bn.bias"),
      training: bool(false),
      momentum: num(0.1),
      eps: num(1e-5),
      ...fn,
    },
    X,
    { kind: "call_module", target: "bn", modeDependent: true },
  );
}

const BN_PARAMS = {
  "bn.running_mean": [16],
  "bn.running_var": [16],
  "bn.weight": [16],
  "bn.bias": [16],
};

test("an eval-mode dropout alone is no region (PyTorch's call launches nothing there); beside arithmetic it joins", () => {
  // a model put in eval(): `x = x.view(n, -1); self.fc(self.dropout(x))`
  const drop = (input: string) =>
    node(
      "drop",
      "dropout",
      { input: ref(input), p: num(0.5), training: bool(false), inplace: bool(false) },
      X,
      {
        kind: "call_module",
        target: "drop",
        modeDependent: true,
      },
    );
  const lone = graph([drop("x")], "drop");
  lone.modules.drop = { type: "torch.nn.modules.dropout.Dropout", training: false, hyper: {} };
  assert.deepEqual(
    planGraph(canonicalGraph(lone)).regions,
    [],
    "a copy kernel where the reference launches none",
  );
  const tanh = node("tanh", "tanh", { input: ref("x") }, X);
  const joined = graph([tanh, drop("tanh")], "drop");
  joined.modules.drop = { type: "torch.nn.modules.dropout.Dropout", training: false, hyper: {} };
  assert.deepEqual(
    planGraph(canonicalGraph(joined)).regions.map((r) => regionNodes(r)),
    [["tanh", "drop"]],
  );
});

test("a dropout that draws nothing returns its input: an in-place write through it writes that input", () => {
  // a model put in eval(): `h = tanh(x); y = self.drop(h); y.add_(1); return h.sum(-1), y` — the sum sees the +1
  const h = node("h", "tanh", { input: ref("x") }, X);
  const drop = node(
    "drop",
    "dropout",
    { input: ref("h"), p: num(0.3), training: bool(false), inplace: bool(false) },
    X,
    { kind: "call_module", target: "drop", modeDependent: true },
  );
  const add = node("add_", "add", { input: ref("drop"), other: num(1), alpha: num(1) }, X, { inplace: true });
  const sum = node("s", "sum", { input: ref("h"), dim: ints(-1), keepdim: bool(false) }, X.slice(0, 3));
  const g = graph([h, drop, add, sum], "s");
  g.output = { t: "list", kind: "tuple", items: [ref("s"), ref("add_")] };
  g.modules.drop = { type: "torch.nn.modules.dropout.Dropout", training: false, hyper: {} };
  const plan = planGraph(canonicalGraph(g));
  assert.match(plan.kept.find((k) => k.node === "add_")?.reason ?? "", /writes in place/);
  assert.ok(!plan.regions.some((r) => regionNodes(r).includes("add_")));
});

test("a tensor attribute that views it (h.data, h.T, h.mT): an in-place write through it writes h", () => {
  // `h = x * 2; h.T.add_(1); return h.exp()`: the exp reads the written h
  const write = (name: string) => {
    const h = node("h", "mul", { input: ref("x"), other: num(2) }, X);
    const attr = node(
      "t",
      "getattr",
      { input: ref("h"), name: { t: "const", pytype: "str", value: name } },
      X,
      {
        target: "getattr",
      },
    );
    const add = node("add_", "add", { input: ref("t"), other: num(1), alpha: num(1) }, X, { inplace: true });
    const exp = node("e", "exp", { input: ref("h") }, X);
    return planGraph(canonicalGraph(graph([h, attr, add, exp], "e")));
  };
  for (const name of ["data", "T", "mT"]) {
    const plan = write(name);
    assert.match(plan.kept.find((k) => k.node === "add_")?.reason ?? "", /writes in place/, name);
    assert.ok(!plan.regions.some((r) => regionNodes(r).includes("add_")), name);
  }
});

test("an op capture has no name for may return a view (x.swapdims, torch.broadcast_to): a write through it writes x", () => {
  // `h = x * 2; h.swapdims(1, 2).add_(1); return h.exp()`, and Tensor.unfold (a view too)
  const write = (op: string, target: string) => {
    const h = node("h", "mul", { input: ref("x"), other: num(2) }, X);
    const viewed = { ...node("v", op, {}, X, { kind: "call_method", target }), args: [ref("h")], fn: null };
    const add = node("add_", "add", { input: ref("v"), other: num(1), alpha: num(1) }, X, { inplace: true });
    const exp = node("e", "exp", { input: ref("h") }, X);
    return planGraph(canonicalGraph(graph([h, viewed, add, exp], "e")));
  };
  for (const [op, target] of [
    ["unknown", "swapdims"],
    ["unfold", "unfold"],
  ] as const) {
    const plan = write(op, target);
    assert.match(plan.kept.find((k) => k.node === "add_")?.reason ?? "", /writes in place/, target);
    assert.ok(!plan.regions.some((r) => regionNodes(r).includes("add_")), target);
  }
});

test("a training batch norm's running statistics are no kernel operands: RepVGG's dense + 1x1 + id → relu joins a norm", () => {
  // id = bn_id(x); relu(bn_d(x) + bn_p(x) + id): each training BatchNorm has 5 parameters, of which its kernels
  // read weight and bias (the statistics and counter are updated by a launch of their own)
  const train = (id: string) =>
    node(
      id,
      "batch_norm",
      {
        input: ref("x"),
        running_mean: param(`${id}.running_mean`),
        running_var: param(`${id}.running_var`),
        weight: param(`${id}.weight`),
        bias: param(`${id}.bias`),
        training: bool(true),
        momentum: num(0.1),
        eps: num(1e-5),
        num_batches_tracked: param(`${id}.num_batches_tracked`),
      },
      X,
      { kind: "call_module", target: id, modeDependent: true },
    );
  const params = Object.fromEntries(
    ["id", "d", "p"].flatMap((m) =>
      ["running_mean", "running_var", "weight", "bias", "num_batches_tracked"].map((k) => [
        `${m}.${k}`,
        [16],
      ]),
    ),
  );
  const g = graph(
    [
      train("id"),
      train("d"),
      train("p"),
      node("add", "add", { input: ref("d"), other: ref("p"), alpha: num(1) }, X),
      node("add_1", "add", { input: ref("add"), other: ref("id"), alpha: num(1) }, X),
      node("relu", "relu", { input: ref("add_1") }, X),
    ],
    "relu",
    params,
  );
  for (const m of ["id", "d", "p"])
    g.modules[m] = { type: "torch.nn.modules.batchnorm.BatchNorm2d", training: true, hyper: {} };
  const plan = planGraph(g);
  assert.deepEqual(
    plan.regions.map((r) => [r.kind, regionNodes(r)]),
    [
      ["normalize", ["d"]],
      ["normalize", ["p"]],
      ["normalize", ["id", "add", "add_1", "relu"]],
    ],
  );
});

test("batch norm in eval mode is a pointwise per-channel affine of the running statistics; training mode normalises", () => {
  const bn = evalBatchNorm();
  const relu = node("r", "relu", { input: ref("bn") }, X);
  const g = graph([bn, relu], "r", BN_PARAMS);
  g.modules = { bn: { type: "torch.nn.modules.batchnorm.BatchNorm2d", training: false, hyper: {} } };
  const rule = SEED_RULES.find((r) => r.name === "normalize");
  assert.match(rule?.accepts(bn, new GraphView(g)) ?? "", /^no /, "not a normalisation seed in eval mode");
  assert.equal(pointwiseVerdict(bn, new GraphView(g)), null);
  const plan = planGraph(g);
  assert.deepEqual(
    plan.regions.map((r) => [r.kind, regionNodes(r)]),
    [["pointwise", ["bn", "r"]]],
  );
  assert.deepEqual(plan.kept, []);
  const code = generateRegion(new GraphView(g), plan.regions[0] as Region, (id) =>
    id === "x" ? "x" : `v_${id}`,
  );
  // the statistics are read when the region runs, each as a (C, 1, 1) view lined up with dim 1
  assert.match(
    code.method,
    /self\.bn\.running_mean\.view\(-1, 1, 1\), self\.bn\.running_var\.view\(-1, 1, 1\)/,
  );
  assert.match(code.method, /self\.bn\.training is False/, "the module's mode is checked at run time");
  assert.match(code.cuda, /\(\(x\[0\]\) - \(x\[1\]\)\) \* \(1\.f \/ sqrtf\(\(x\[2\]\) \+ 0\.00001f\)\)/);

  // weight and bias may be absent (affine=False): the affine is the normalisation alone
  const plain = evalBatchNorm({ weight: none, bias: none });
  assert.equal(pointwiseVerdict(plain, new GraphView(graph([plain], "bn", BN_PARAMS))), null);

  bn.fn = { ...bn.fn, training: bool(true) };
  assert.equal(rule?.accepts(bn, new GraphView(g)), null, "training mode seeds a normalisation");
  assert.match(pointwiseVerdict(bn, new GraphView(g)) ?? "", /no kernel form/);
});

test("eval-mode batch norm is not pointwise without running statistics, off dim 1, or with statistics the forward computes", () => {
  const verdict = (bn: GraphNode, params: Record<string, number[]> = BN_PARAMS, extra: GraphNode[] = []) =>
    pointwiseVerdict(bn, new GraphView(graph([...extra, bn], "bn", params)));
  assert.match(verdict(evalBatchNorm({ running_mean: none, running_var: none })) ?? "", /missing/);
  assert.match(
    verdict(evalBatchNorm(), { ...BN_PARAMS, "bn.running_mean": [32], "bn.running_var": [32] }) ?? "",
    /one value per channel/,
  );
  // a (C,) value made in the forward would join the region and broadcast along the last dim
  const made = node("m", "abs", { input: param("bn.running_mean") }, [16]);
  assert.match(
    verdict(evalBatchNorm({ running_mean: ref("m") }), BN_PARAMS, [made]) ?? "",
    /computed in the forward/,
  );
  const computed = graph([made, evalBatchNorm({ running_mean: ref("m") })], "bn", BN_PARAMS);
  assert.equal(
    planGraph(computed).kept.find((k) => k.node === "bn")?.reason,
    "its running_mean is computed in the forward",
    "the report names the pointwise rule's reason",
  );
  const flat = evalBatchNorm({ input: param("v") });
  assert.match(verdict(flat, { ...BN_PARAMS, v: [16] }) ?? "", /no channel dim/);
});

test("layer norm over the trailing dims seeds a normalisation; a mismatched normalized_shape does not", () => {
  const ln = node(
    "ln",
    "layer_norm",
    { input: ref("x"), normalized_shape: ints(32, 32), weight: param("w"), bias: param("b"), eps: num(1e-5) },
    X,
  );
  const g = graph([ln], "ln", { w: [32, 32], b: [32, 32] });
  const rule = SEED_RULES.find((r) => r.name === "normalize");
  assert.equal(rule?.accepts(ln, new GraphView(g)), null);
  ln.fn = { ...ln.fn, normalized_shape: ints(16, 32) };
  assert.notEqual(rule?.accepts(ln, new GraphView(g)), null);
});

test("a region reads bool masks (masked_fill, where) but a mask it computes for others stays in PyTorch", () => {
  const boolOut = (n: GraphNode) => {
    n.out = { t: "tensor", meta: { shape: X, dtype: "bool", stride: contiguous(X) } };
    return n;
  };
  // ~mask from a bool input, then masked_fill and where read it: one region, the mask loaded as 1 / 0.
  const inv = boolOut(node("inv", "bitwise_not", { input: ref("m") }, X));
  const fill = node("f", "masked_fill", { input: ref("x"), mask: ref("inv"), value: num(0) }, X);
  const g = graph([inv, fill], "f");
  g.inputs.push({ name: "m", meta: { shape: X, dtype: "bool", stride: contiguous(X) }, value: null });
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1);
  assert.deepEqual(regionNodes(plan.regions[0] as Parameters<typeof regionNodes>[0]).sort(), ["f", "inv"]);
  // bitwise_not of an integer tensor is arithmetic, not a mask: no kernel form.
  const intInv = node("ii", "bitwise_not", { input: ref("k") }, X);
  intInv.out = { t: "tensor", meta: { shape: X, dtype: "int64", stride: contiguous(X) } };
  const ig = graph([intInv], "ii");
  ig.inputs.push({ name: "k", meta: { shape: X, dtype: "int64", stride: contiguous(X) }, value: null });
  assert.match(pointwiseVerdict(intInv, new GraphView(ig)) ?? "", /non-bool|int64/);
  // A comparison whose mask is the graph's output: the region would store bool, so it stays in PyTorch.
  const cmp = boolOut(node("c", "gt", { input: ref("x"), other: num(0) }, X));
  const other = boolOut(node("o", "logical_not", { input: ref("c") }, X));
  const maskPlan = planGraph(graph([cmp, other], "o"));
  assert.equal(maskPlan.regions.length, 0);
  assert.ok(maskPlan.kept.some((k) => /boolean mask/.test(k.reason)));
});

test("torch.max/min with a dim read through one [i] is a reduction of the values or the indices; both read: PyTorch", () => {
  const pair = (reads: number[]) => {
    const out: GraphNode["out"] = {
      t: "tuple",
      items: [f32([8, 32, 32]), { ...f32([8, 32, 32]), dtype: "int64" }],
    };
    const index = (i: number): Arg => ({ t: "const", pytype: "int", value: i });
    const nodes = [
      node("mx", "max_dim", { input: ref("x"), dim: num(1), keepdim: bool(false) }, [8, 32, 32], { out }),
      ...reads.map((i) => {
        const read = node(`get${i}`, "getitem", { input: ref("mx"), index: index(i) }, [8, 32, 32]);
        if (i === 1) read.out = { t: "tensor", meta: { ...f32([8, 32, 32]), dtype: "int64" } };
        return read;
      }),
    ];
    if (reads.includes(0)) nodes.push(node("act", "relu", { input: ref("get0") }, [8, 32, 32]));
    return graph(nodes, reads.includes(0) ? "act" : "get1");
  };
  const values = planGraph(pair([0]));
  assert.equal(values.regions.length, 1);
  const region = values.regions[0];
  assert.equal(region?.kind, "reduce");
  assert.deepEqual(region && regionNodes(region), ["mx", "get0", "act"]);
  assert.equal(region?.output, "act");
  const view = new GraphView(pair([1]));
  const indices = planGraph(pair([1]));
  assert.deepEqual(indices.regions[0] && regionNodes(indices.regions[0]), ["mx", "get1"]);
  assert.equal(reduceSpecOf(view.node("mx"), view)?.acc, "KfAccArgMax");
  const both = planGraph(pair([0, 1]));
  assert.ok(!both.regions.some((r) => r.seed === "mx"));
  assert.match(both.kept.find((k) => k.node === "mx")?.reason ?? "", /both its values and its indices/);
});

test("tuple unpacking's unread field (`m, _ = torch.max(x, 1)`) is dropped: max(dim)'s values are a reduction", () => {
  const out: GraphNode["out"] = {
    t: "tuple",
    items: [f32([8, 32, 32]), { ...f32([8, 32, 32]), dtype: "int64" }],
  };
  const index = (i: number): Arg => ({ t: "const", pytype: "int", value: i });
  const unused = node("get1", "getitem", { input: ref("mx"), index: index(1) }, [8, 32, 32]);
  unused.out = { t: "tensor", meta: { ...f32([8, 32, 32]), dtype: "int64" } };
  const g = graph(
    [
      node("mx", "max_dim", { input: ref("x"), dim: num(1), keepdim: bool(false) }, [8, 32, 32], { out }),
      node("get0", "getitem", { input: ref("mx"), index: index(0) }, [8, 32, 32]),
      unused,
      node("act", "relu", { input: ref("get0") }, [8, 32, 32]),
    ],
    "act",
  );
  const canonical = canonicalGraph(g);
  assert.deepEqual(
    canonical.nodes.map((n) => n.id),
    ["mx", "get0", "act"],
  );
  const plan = planGraph(canonical);
  assert.deepEqual(plan.regions[0] && regionNodes(plan.regions[0]), ["mx", "get0", "act"]);
  // a field the forward returns is read: both stay, and so does PyTorch's call
  const returned = {
    ...g,
    output: { t: "list" as const, kind: "tuple" as const, items: [ref("act"), ref("get1")] },
  };
  assert.ok(canonicalGraph(returned).nodes.some((n) => n.id === "get1"));
  assert.ok(!planGraph(canonicalGraph(returned)).regions.some((r) => r.seed === "mx"));
});

test("a 1-d conv (no channels-last format) anchors a pointwise region in its own layout, with its bias only", () => {
  const conv1d = (bias: Arg) => {
    const L = [8, 16, 30];
    const g = graph(
      [
        node("conv", "conv1d", { input: ref("x"), weight: param("conv.weight"), bias }, L, {
          kind: "call_module",
          target: "conv",
        }),
        node("act", "relu", { input: ref("conv") }, L),
      ],
      "act",
      { "conv.weight": [16, 16, 3], "conv.bias": [16] },
    );
    g.modules.conv = { type: "torch.nn.modules.conv.Conv1d", training: true, hyper: {} };
    return planGraph(g).regions[0];
  };
  const withBias = conv1d(param("conv.bias"));
  assert.equal(withBias?.anchor, "conv");
  assert.equal(withBias?.anchorLayout, "native");
  assert.equal(conv1d(none)?.anchor, undefined);
});

test("ops no rule covers are reported (library calls as such); views and data movement are not", () => {
  const cs = node("cs", "logcumsumexp", { input: ref("x"), dim: num(1) }, X);
  const flat = node("fl", "flatten", { input: ref("cs") }, [8, 16 * 32 * 32]);
  const mm = node("mm", "matmul", { input: ref("fl"), other: param("w") }, [8, 4]);
  const plan = planGraph(graph([cs, flat, mm], "mm", { w: [16 * 32 * 32, 4] }));
  assert.equal(plan.regions.length, 0);
  assert.match(plan.kept.find((k) => k.node === "cs")?.reason ?? "", /no rule covers logcumsumexp/);
  assert.match(plan.kept.find((k) => k.node === "mm")?.reason ?? "", /library call/);
  assert.ok(!plan.kept.some((k) => k.node === "fl"), JSON.stringify(plan.kept));
});

test("a module kept for its hooks is reported as such", () => {
  const g = graph(
    [
      node("conv", "hooked_module", {}, X, {
        kind: "call_module",
        target: "conv",
        args: [ref("x")],
        fn: null,
      }),
      node("relu", "relu", { input: ref("conv") }, X),
    ],
    "relu",
  );
  const plan = planGraph(g);
  assert.deepEqual(
    plan.regions.map((r) => regionNodes(r)),
    [["relu"]],
  );
  assert.match(plan.kept.find((k) => k.node === "conv")?.reason ?? "", /module conv has hooks/);
});

test("an op no rule covers that returns several tensors (torch.std_mean) is reported too", () => {
  // Round 13: `s, m = torch.std_mean(y, dim=(2, 3), keepdim=True)` stayed PyTorch's call and the report said nothing.
  const sm = node("sm", "unknown", { input: ref("x") }, [], {
    target: "torch.std_mean",
    out: { t: "tuple", items: [f32([8, 16, 1, 1]), f32([8, 16, 1, 1])] },
  });
  const s = node("s", "getitem", { input: ref("sm"), index: num(0) }, [8, 16, 1, 1]);
  const m = node("m", "getitem", { input: ref("sm"), index: num(1) }, [8, 16, 1, 1]);
  const div = node("div", "div", { input: ref("m"), other: ref("s") }, [8, 16, 1, 1]);
  const plan = planGraph(graph([sm, s, m, div], "div"));
  assert.match(plan.kept.find((k) => k.node === "sm")?.reason ?? "", /no rule covers torch\.std_mean/);
  assert.ok(!plan.kept.some((k) => k.node === "s" || k.node === "m"), JSON.stringify(plan.kept));
});

test("a pointwise op of a permuted norm output (channels-last norm, then an activation) joins the norm's region", () => {
  // Round 13: `act(norm(y.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))` ran the activation as a kernel of its own
  // after the norm; hoisted above the permute it is the norm's epilogue, and the permute follows it. erf-GELU
  // stays below the permute (its CPU kernel rounds a permuted view differently: the fallback must be exact).
  const NHWC = [8, 32, 32, 16];
  const permuted = (shape: number[], dims: number[]) => {
    const base = contiguous(shape);
    return { shape: dims.map((d) => shape[d] ?? 0), dtype: "float32", stride: dims.map((d) => base[d] ?? 0) };
  };
  const back = permuted(NHWC, [0, 3, 1, 2]);
  const build = (source: string, sourceShape: number[], approximate = "tanh") => {
    const p = node("p", "permute", { input: ref(source), dims: ints(0, 3, 1, 2) }, [], {
      kind: "call_method",
      target: "permute",
      out: { t: "tensor", meta: back },
    });
    const gelu = node(
      "gelu",
      "gelu",
      { input: ref("p"), approximate: { t: "const", pytype: "str", value: approximate } },
      [],
      {
        out: { t: "tensor", meta: back },
      },
    );
    const add = node("add", "add", { input: ref("gelu"), other: num(1), alpha: num(1) }, [], {
      out: { t: "tensor", meta: back },
    });
    return { p, gelu, add, sourceShape };
  };
  const ln = node(
    "ln",
    "layer_norm",
    { input: ref("x"), normalized_shape: ints(16), weight: param("w"), bias: param("b"), eps: num(1e-6) },
    NHWC,
  );
  const { p, gelu, add } = build("ln", NHWC);
  const g = graph([ln, p, gelu, add], "add", { w: [16], b: [16] });
  g.inputs = [{ name: "x", meta: f32(NHWC), value: null }];
  const plan = planGraph(canonicalGraph(g));
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.regions.map(regionNodes)));
  assert.deepEqual(regionNodes(plan.regions[0] ?? ({} as never)), [
    "ln",
    "gelu_unpermuted",
    "add_unpermuted",
  ]);
  const canon = canonicalGraph(g);
  const last = canon.nodes.find((n) => n.id === "add");
  assert.equal(last?.op, "permute", "the permute follows the ops, under the last op's id");
  assert.deepEqual(last?.out, add.out);
  const erf = build("ln", NHWC, "none");
  const g3 = graph([ln, erf.p, erf.gelu, erf.add], "add", { w: [16], b: [16] });
  g3.inputs = g.inputs;
  assert.deepEqual(
    canonicalGraph(g3).nodes.map((n) => n.op),
    ["layer_norm", "permute", "gelu", "add"],
    "erf-GELU keeps the permute before it, and the add after it has a GELU, not a permute, to read",
  );
  // A permuted graph input is read through the view by the op's region anyway: nothing moves.
  const direct = build("x", NHWC);
  const g2 = graph([direct.p, direct.gelu, direct.add], "add");
  g2.inputs = [{ name: "x", meta: f32(NHWC), value: null }];
  assert.deepEqual(
    canonicalGraph(g2).nodes.map((n) => n.op),
    ["permute", "gelu", "add"],
  );
});

test("a pointwise op of a gathering copy (reflect pad, nearest upsampling, pixel shuffle) joins the region making its input", () => {
  // Round 15: conv -> F.pad(mode="reflect") -> relu -> * 0.5 ran the conv alone and the relu and multiply as a
  // second pass over the padded copy. Each output element of such a copy is one input element, so the ops move
  // above it into the conv's epilogue and the copy follows them. A constant pad (its fill is no input element),
  // bilinear upsampling, a copy read twice and erf-GELU (layout-sensitive on the CPU) keep their order.
  const str = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const BIG = [8, 16, 34, 34];
  const conv = convModule();
  const build = (copy: GraphNode, act: Record<string, Arg> = {}, op = "relu", extra: GraphNode[] = []) => {
    const g = graph(
      [
        conv,
        copy,
        node(op, op, { input: ref("copy"), ...act }, copy.out.t === "tensor" ? copy.out.meta.shape : []),
        node(
          "mul",
          "mul",
          { input: ref(op), other: num(0.5) },
          copy.out.t === "tensor" ? copy.out.meta.shape : [],
        ),
        ...extra,
      ],
      extra.length ? "out" : "mul",
      { "conv.weight": [16, 16, 3, 3], "conv.bias": [16] },
    );
    g.modules.conv = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
    return g;
  };
  const pad = (mode: string) =>
    node("copy", "pad", { input: ref("conv"), pad: ints(1, 1, 1, 1), mode: str(mode), value: none }, BIG);
  const reflect = canonicalGraph(build(pad("reflect")));
  assert.deepEqual(
    reflect.nodes.map((n) => [n.id, n.op]),
    [
      ["conv", "conv2d"],
      ["relu_unpermuted", "relu"],
      ["mul_unpermuted", "mul"],
      ["mul", "pad"],
    ],
  );
  assert.deepEqual(
    planGraph(reflect).regions.map((r) => regionNodes(r)),
    [["conv", "relu_unpermuted", "mul_unpermuted"]],
  );
  const moved = (g: Graph) => canonicalGraph(g).nodes.some((n) => n.id.endsWith("_unpermuted"));
  const interpolate = (mode: string) =>
    node(
      "copy",
      "interpolate",
      { input: ref("conv"), size: none, scale_factor: num(2), mode: str(mode), align_corners: none },
      [8, 16, 64, 64],
    );
  assert.ok(moved(build(interpolate("nearest"))), "nearest upsampling");
  assert.ok(
    moved(
      build(node("copy", "pixel_shuffle", { input: ref("conv"), upscale_factor: num(2) }, [8, 4, 64, 64])),
    ),
  );
  assert.ok(!moved(build(pad("constant"))), "a constant pad writes values the op never saw");
  assert.ok(!moved(build(interpolate("bilinear"))), "bilinear mixes elements");
  const erf = build(pad("reflect"), { approximate: str("none") }, "gelu");
  assert.ok(!moved(erf), "erf-GELU rounds differently at other positions of the CPU's vector loop");
  const twice = build(pad("replicate"), {}, "relu", [
    node("out", "add", { input: ref("mul"), other: ref("copy"), alpha: num(1) }, BIG),
  ]);
  assert.ok(!moved(twice), "a copy read twice would be made twice");
});

test("a pointwise op of a join (relu(cat([conv1(x), conv2(x)]))) runs on each part in the region making it", () => {
  // Round 15 (Inception's branches, sinusoidal features stacked then flattened): the op ran as a pass over the
  // joined copy. Applied to each part it joins each part's region, and the join follows under the op's id. A part
  // that is a graph input, a part read elsewhere, or a join read twice keeps the order.
  const conv = (id: string) =>
    node(id, "conv2d", { input: ref("x"), weight: param(`${id}.weight`), bias: param(`${id}.bias`) }, X, {
      kind: "call_module",
      target: id,
    });
  const CAT = [8, 32, 32, 32];
  const parts = (...ids: string[]): Arg => ({ t: "list", kind: "list", items: ids.map(ref) });
  const build = (items: string[], extra: GraphNode[] = [], output = "mul") => {
    const cat = node("cat", "cat", { tensors: parts(...items), dim: num(1) }, CAT, {
      args: [parts(...items)],
    });
    const g = graph(
      [
        conv("a"),
        conv("b"),
        cat,
        node("relu", "relu", { input: ref("cat") }, CAT),
        node("mul", "mul", { input: ref("relu"), other: num(2) }, CAT),
        ...extra,
      ],
      output,
      { "a.weight": [16, 16, 1, 1], "a.bias": [16], "b.weight": [16, 16, 1, 1], "b.bias": [16] },
    );
    for (const id of ["a", "b"])
      g.modules[id] = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
    return g;
  };
  const canon = canonicalGraph(build(["a", "b"]));
  assert.deepEqual(
    canon.nodes.map((n) => [n.id, n.op]),
    [
      ["a", "conv2d"],
      ["b", "conv2d"],
      ["relu_part0", "relu"],
      ["relu_part1", "relu"],
      ["mul_part0", "mul"],
      ["mul_part1", "mul"],
      ["mul", "cat"],
    ],
  );
  const joined = canon.nodes.at(-1);
  assert.deepEqual(joined?.args, [parts("mul_part0", "mul_part1")], "the emitted call reads the new parts");
  assert.deepEqual(joined?.out, build(["a", "b"]).nodes.find((n) => n.id === "mul")?.out);
  assert.deepEqual(
    planGraph(canon).regions.map((r) => regionNodes(r)),
    [
      ["a", "relu_part0", "mul_part0"],
      ["b", "relu_part1", "mul_part1"],
    ],
  );
  const moved = (g: Graph) => canonicalGraph(g).nodes.some((n) => n.id.includes("_part"));
  assert.ok(!moved(build(["a", "x"])), "a graph input as a part");
  assert.ok(!moved(build(["a", "a"])), "one part joined twice");
  const readTwice = [node("out", "add", { input: ref("mul"), other: ref("a"), alpha: num(1) }, CAT)];
  assert.ok(!moved(build(["a", "b"], readTwice, "out")), "a part read elsewhere");
});

test("a broadcast read by several pointwise ops (sin and cos of t[:, None] * freqs) is recomputed in each reader's region", () => {
  // Round 15 (sinusoidal timestep features): the product was a region of its own writing the full-size value,
  // read back by the sin region and the cos region. Each reader now gets its own copy of the product; a value
  // as large as its operands (no broadcast) is still made once.
  const T = [512, 1];
  const F = [1, 128];
  const build = (left: number[], right: number[], out: number[], join = "stack") => {
    const parts: Arg = { t: "list", kind: "list", items: [ref("sin"), ref("cos")] };
    const g = graph(
      [
        node("a", "mul", { input: ref("x"), other: ref("y") }, out),
        node("sin", "sin", { input: ref("a") }, out),
        node("cos", "cos", { input: ref("a") }, out),
        join === "stack"
          ? node("out", "stack", { tensors: parts, dim: num(-1) }, [...out, 2], { args: [parts] })
          : node("out", "add", { input: ref("sin"), other: ref("cos"), alpha: num(1) }, out),
      ],
      "out",
    );
    g.inputs = [
      { name: "x", meta: f32(left), value: null },
      { name: "y", meta: f32(right), value: null },
    ];
    return g;
  };
  const canon = canonicalGraph(build(T, F, [512, 128]));
  assert.deepEqual(
    canon.nodes.map((n) => `${n.id}:${n.op}`),
    ["a_for_sin:mul", "a_for_cos:mul", "sin:sin", "cos:cos", "out:stack"],
  );
  assert.deepEqual(canon.nodes.find((n) => n.id === "cos")?.fn?.input, ref("a_for_cos"));
  assert.deepEqual(canon.nodes.find((n) => n.id === "cos")?.args, [ref("a_for_cos")]);
  assert.deepEqual(
    planGraph(canon).regions.map((r) => regionNodes(r)),
    [
      ["a_for_sin", "sin"],
      ["a_for_cos", "cos"],
    ],
    "no region writes the product",
  );
  assert.deepEqual(
    canonicalGraph(build(T, F, [512, 128], "add")).nodes.map((n) => n.id),
    ["a", "sin", "cos", "out"],
    "readers meeting again (sin(a) + cos(a)) are one region, which reads the product once as it is",
  );
  const same = canonicalGraph(build([512, 128], [512, 128], [512, 128]));
  assert.deepEqual(
    same.nodes.map((n) => n.id),
    ["a", "sin", "cos", "out"],
    "operands as large as the value: made once",
  );
  const returned = build(T, F, [512, 128]);
  returned.output = { t: "list", kind: "tuple", items: [ref("out"), ref("a")] };
  assert.ok(
    canonicalGraph(returned).nodes.some((n) => n.id === "a"),
    "a returned value is made anyway",
  );
});

test("a widening cast read by a reduction and a pointwise op (y = x.float(); y - y.mean(-1, True)) is cast again in each region", () => {
  const f16 = (shape: number[]) => ({ ...f32(shape), dtype: "float16" });
  const dtype = (value: string): Arg => ({ t: "const", pytype: "dtype", value });
  const build = (from: "float16" | "float32", extra: Record<string, Arg> = {}) => {
    const g = graph(
      [
        node("y", "to", { input: ref("x"), memory_format: none, dtype: dtype("float32"), ...extra }, X, {
          kind: "call_method",
          target: "float",
        }),
        node("m", "mean", { input: ref("y"), dim: ints(-1), keepdim: bool(true) }, [8, 16, 32, 1]),
        node("d", "sub", { input: ref("y"), other: ref("m"), alpha: num(1) }, X),
        node("out", "tanh", { input: ref("d") }, X),
      ],
      "out",
    );
    g.inputs = [{ name: "x", meta: from === "float16" ? f16(X) : f32(X), value: null }];
    return canonicalGraph(g);
  };
  const canon = build("float16");
  assert.deepEqual(
    canon.nodes.map((n) => n.id),
    ["y_for_m", "y_for_d", "m", "d", "out"],
  );
  // The mean, broadcast back into the subtract that reads the same cast, is one normalisation (reduce-broadcast.ts).
  assert.deepEqual(
    planGraph(canon).regions.map((r) => regionNodes(r)),
    [["y_for_m", "m", "y_for_d", "d", "out"]],
    "no region writes the fp32 copy",
  );
  assert.deepEqual(
    build("float32").nodes.map((n) => n.id),
    ["y", "m", "d", "out"],
    "a cast to its own dtype is x itself",
  );
  assert.deepEqual(
    build("float16", { copy: bool(true), device: { t: "const", pytype: "str", value: "cuda" } }).nodes.map(
      (n) => n.id,
    ),
    ["y", "m", "d", "out"],
    "a device move is made once",
  );
});

test("a shape read of an elementwise op's value reads its operand (TextCNN's max_pool1d(h, h.size(2)) of h = relu(x))", () => {
  const L = [8, 16, 50];
  const build = (scale: Arg) => {
    const g = graph(
      [
        node("h", "mul", { input: ref("x"), other: scale }, L),
        node("act", "relu", { input: ref("h") }, L),
        node(
          "shape",
          "getattr",
          { input: ref("act"), name: { t: "const", pytype: "str", value: "shape" } },
          L,
          {
            out: { t: "value", pytype: "torch.Size" },
          },
        ),
        node("len", "getitem", { input: ref("shape"), index: num(-1) }, L, {
          out: { t: "value", pytype: "int" },
        }),
        node(
          "pool",
          "max_pool1d",
          {
            input: ref("act"),
            kernel_size: ref("len"),
            stride: ref("len"),
            padding: ints(0),
            dilation: ints(1),
            ceil_mode: bool(false),
            return_indices: bool(false),
          },
          [8, 16, 1],
        ),
      ],
      "pool",
      { p: [16, 1] },
    );
    g.inputs = [{ name: "x", meta: f32(L), value: null }];
    return canonicalGraph(g);
  };
  const canon = build(num(2));
  assert.deepEqual(canon.nodes.find((n) => n.id === "shape")?.fn?.input, ref("x"));
  assert.deepEqual(
    planGraph(canon).regions.map((r) => regionNodes(r)),
    [["h", "act", "pool"]],
    "the values in front of the pool are its prologue",
  );
  // a second tensor operand may broadcast the result past the first's shape: the read stays where it was
  assert.deepEqual(build(param("p")).nodes.find((n) => n.id === "shape")?.fn?.input, ref("h"));
});

test("a pointwise op of a reshaped softmax (softmax(y.view(B, H, -1)).view(B, -1) * 2) joins the softmax's region", () => {
  // The view between the softmax and the multiply made the multiply a pass of its own. On a contiguous value the
  // op moves above the reshape (any op, erf-GELU too: it sees a contiguous tensor either way), which follows it.
  const sm = node("sm", "softmax", { input: ref("x"), dim: num(-1) }, X);
  const flat = node("flat", "view", { input: ref("sm"), size: ints(8, -1) }, [8, 16 * 32 * 32], {
    kind: "call_method",
    target: "view",
  });
  const gelu = node(
    "gelu",
    "gelu",
    { input: ref("flat"), approximate: { t: "const", pytype: "str", value: "none" } },
    [8, 16 * 32 * 32],
  );
  const plan = planGraph(canonicalGraph(graph([sm, flat, gelu], "gelu")));
  assert.deepEqual(
    plan.regions.map((r) => regionNodes(r)),
    [["sm", "gelu_unpermuted"]],
  );
  const canon = canonicalGraph(graph([sm, flat, gelu], "gelu"));
  assert.deepEqual(
    canon.nodes.map((n) => [n.id, n.op]),
    [
      ["sm", "softmax"],
      ["gelu_unpermuted", "gelu"],
      ["gelu", "view"],
    ],
  );
  // a reshape of a value that is not contiguous may copy: nothing moves
  const strided = node("sm", "softmax", { input: ref("x"), dim: num(-1) }, X, {
    out: { t: "tensor", meta: { shape: X, dtype: "float32", stride: [16, 1, 16 * 8 * 32, 16 * 8] } },
  });
  assert.deepEqual(
    canonicalGraph(graph([strided, flat, gelu], "gelu")).nodes.map((n) => n.op),
    ["softmax", "view", "gelu"],
  );
});

test("an einsum that sums nothing ('bchw,c->bchw') is a broadcast multiply; a contraction stays a library call", () => {
  const eq = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const einsum = (equation: string, other: Arg, shape = X) =>
    node(
      "e",
      "einsum",
      { equation: eq(equation), operands: { t: "list", kind: "list", items: [ref("x"), other] } },
      shape,
    );
  const relu = node("r", "relu", { input: ref("e") }, X);
  const canon = canonicalGraph(graph([einsum("bchw,c->bchw", param("w")), relu], "r", { w: [16] }));
  assert.deepEqual(
    canon.nodes.map((n) => [n.op, n.out.t === "tensor" ? n.out.meta.shape : null]),
    [
      ["reshape", [16, 1, 1]],
      ["mul", X],
      ["relu", X],
    ],
  );
  assert.deepEqual(
    planGraph(canon).regions.map((r) => regionNodes(r)),
    [["e", "r"]],
  );
  const kept = (equation: string, shape = X) =>
    canonicalGraph(graph([einsum(equation, param("w"), shape)], "e", { w: [16] })).nodes.map((n) => n.op);
  assert.deepEqual(kept("bchw,c->bhw", [8, 32, 32]), ["einsum"], "a sum over c");
  assert.deepEqual(kept("bchw,c->bhwc", [8, 32, 32, 16]), ["einsum"], "an output in another order");
});

test("nn.Identity's readers read its input: no copy region, and an in-place write through it writes the input", () => {
  const ident = node("ident", "identity", { input: ref("x") }, X, { kind: "call_module", target: "ident" });
  const lone = planGraph(canonicalGraph(graph([ident], "ident")));
  assert.deepEqual(lone.regions, [], "an identity alone launches nothing");
  assert.deepEqual(canonicalGraph(graph([ident], "ident")).output, ref("x"));
  const tanh = node("tanh", "tanh", { input: ref("x") }, X);
  const mid = node("ident", "identity", { input: ref("tanh") }, X, { kind: "call_module", target: "ident" });
  const relu = node("relu", "relu", { input: ref("ident") }, X);
  assert.deepEqual(
    planGraph(canonicalGraph(graph([tanh, mid, relu], "relu"))).regions.map((r) => regionNodes(r)),
    [["tanh", "relu"]],
  );
  // `y = ident(x); y.relu_()` writes x: the write is not private (the reference's input changes)
  const write = node("relu_", "relu", { input: ref("ident") }, X, { inplace: true });
  const plan = planGraph(canonicalGraph(graph([ident, write], "relu_")));
  assert.match(plan.kept.find((k) => k.node === "relu_")?.reason ?? "", /writes in place/);
});

test("dropout with p a literal 0 reads as its input in either mode: no copy region, no mode guard", () => {
  // nn.Dropout(0.0) after a Linear (timm's Mlp, `attn_drop=0.`): ATen returns the input itself, train or eval
  const drop = (id: string, input: string, p: Arg, extra: Partial<GraphNode> = {}) =>
    node(id, "dropout", { input: ref(input), p, training: bool(true), inplace: bool(false) }, X, {
      kind: "call_module",
      target: id,
      modeDependent: true,
      ...extra,
    });
  const lone = canonicalGraph(graph([drop("drop", "x", num(0))], "drop"));
  assert.deepEqual(lone.output, ref("x"));
  assert.deepEqual(planGraph(lone).regions, [], "a p=0 dropout alone launches nothing");
  const tanh = node("tanh", "tanh", { input: ref("x") }, X);
  const relu = node("relu", "relu", { input: ref("drop") }, X);
  const mid = planGraph(canonicalGraph(graph([tanh, drop("drop", "tanh", num(0)), relu], "relu")));
  assert.deepEqual(
    mid.regions.map((r) => regionNodes(r)),
    [["tanh", "relu"]],
  );
  // p read from an attribute may change after capture, and p > 0 in training draws: both stay
  const attr = canonicalGraph(graph([tanh, drop("drop", "tanh", num(0, "p")), relu], "relu"));
  assert.ok(attr.nodes.some((n) => n.id === "drop"));
  const live = canonicalGraph(graph([tanh, drop("drop", "tanh", num(0.1), { rng: true }), relu], "relu"));
  assert.ok(live.nodes.some((n) => n.id === "drop"));
});

test("an in-place write to a value read only before it (y.masked_fill_(y.abs() < t, 0)) fuses; a view read keeps it", () => {
  const mul = node("y", "mul", { input: ref("x"), other: num(2) }, X);
  const abs = node("abs", "abs", { input: ref("y") }, X);
  const lt = node("lt", "lt", { input: ref("abs"), other: num(0.1) }, X, {
    out: { t: "tensor", meta: { shape: X, dtype: "bool", stride: contiguous(X) } },
  });
  const fill = node("fill", "masked_fill", { input: ref("y"), mask: ref("lt"), value: num(0) }, X, {
    inplace: true,
  });
  const plan = planGraph(canonicalGraph(graph([mul, abs, lt, fill], "fill")));
  assert.deepEqual(
    plan.regions.map((r) => regionNodes(r)),
    [["y", "abs", "lt", "fill"]],
  );
  // a view of y read after the write sees it: the write stays PyTorch's
  const flat = node("flat", "view", { input: ref("y"), size: ints(-1) }, [8 * 16 * 32 * 32], {
    kind: "call_method",
    target: "view",
  });
  const add = node("add", "add", { input: ref("y"), other: num(1), alpha: num(1) }, X, { inplace: true });
  const twice = node("twice", "mul", { input: ref("flat"), other: num(2) }, [8 * 16 * 32 * 32]);
  const viewed = planGraph(canonicalGraph(graph([mul, flat, add, twice], "twice")));
  assert.match(viewed.kept.find((k) => k.node === "add")?.reason ?? "", /writes in place/);
  // a graph input is the caller's: never
  const onInput = node("fill", "masked_fill", { input: ref("x"), mask: ref("lt"), value: num(0) }, X, {
    inplace: true,
  });
  const absX = node("abs", "abs", { input: ref("x") }, X);
  const kept = planGraph(canonicalGraph(graph([absX, lt, onInput], "fill"))).kept;
  assert.match(kept.find((k) => k.node === "fill")?.reason ?? "", /writes in place/);
});

test("in-place writes to a dtype-changing cast (y = x.float(); y.sub_(y.mean()); y.abs_(); y.half()) fuse; a same-dtype .to() may be x", () => {
  const f16 = (shape: number[]) => ({ ...f32(shape), dtype: "float16" });
  const chain = (from: "float16" | "float32") => {
    const g = graph(
      [
        node("y", "to", { input: ref("x"), dtype: { t: "const", pytype: "dtype", value: "float32" } }, X, {
          kind: "call_method",
          target: "float",
        }),
        node("m", "mean", { input: ref("y"), dim: ints(2, 3), keepdim: bool(true) }, [8, 16, 1, 1]),
        node("sub_", "sub", { input: ref("y"), other: ref("m"), alpha: num(1) }, X, { inplace: true }),
        node("abs_", "abs", { input: ref("y") }, X, { inplace: true }),
        node("h", "to", { input: ref("y"), dtype: { t: "const", pytype: "dtype", value: "float16" } }, X, {
          kind: "call_method",
          target: "half",
          out: { t: "tensor", meta: f16(X) },
        }),
      ],
      "h",
    );
    g.inputs = [{ name: "x", meta: from === "float16" ? f16(X) : f32(X), value: null }];
    return planGraph(canonicalGraph(g));
  };
  const plan = chain("float16");
  assert.deepEqual(
    plan.kept.filter((k) => /in place/.test(k.reason)),
    [],
  );
  assert.ok(plan.regions.some((r) => ["sub_", "abs_", "h"].every((id) => regionNodes(r).includes(id))));
  // fp32 x: `x.float()` is x itself, so the writes are the caller's input's
  const same = chain("float32");
  assert.ok(same.kept.some((k) => k.node === "sub_" && /writes in place/.test(k.reason)));
});

test("an in-place chain whose middle value is read before the next write (y.relu_(); z = y * 3; y.mul_(0.5)) fuses", () => {
  const nodes = [
    node("y", "mul", { input: ref("x"), other: num(2) }, X),
    node("relu_", "relu", { input: ref("y") }, X, { inplace: true }),
    node("z", "mul", { input: ref("y"), other: num(3) }, X),
    node("mul_", "mul", { input: ref("y"), other: num(0.5) }, X, { inplace: true }),
    node("out", "add", { input: ref("y"), other: ref("z"), alpha: num(1) }, X),
  ];
  const plan = planGraph(canonicalGraph(graph(nodes, "out")));
  assert.deepEqual(plan.kept, []);
  assert.deepEqual(
    plan.regions.map((r) => regionNodes(r)),
    [["y", "relu_", "z", "mul_", "out"]],
  );
  // a view of the value read after the write sees it: the write stays PyTorch's
  const flat = node("flat", "view", { input: ref("y"), size: ints(-1) }, [8 * 16 * 32 * 32], {
    kind: "call_method",
    target: "view",
  });
  const viewed = [...nodes.slice(0, 2), flat, ...nodes.slice(2, 4)];
  const after = node("after", "mul", { input: ref("flat"), other: num(2) }, [8 * 16 * 32 * 32]);
  const kept = planGraph(canonicalGraph(graph([...viewed, after], "after"))).kept;
  assert.ok(kept.some((k) => k.node === "mul_" && /writes in place/.test(k.reason)));
});

test("instance norm from running statistics (track_running_stats in eval) is a per-channel affine", () => {
  const inorm = node(
    "in",
    "instance_norm",
    {
      input: ref("x"),
      running_mean: param("in.running_mean"),
      running_var: param("in.running_var"),
      weight: none,
      bias: none,
      use_input_stats: bool(false),
      momentum: num(0.1),
      eps: num(1e-5),
    },
    X,
  );
  const g = graph([inorm], "in", { "in.running_mean": [16], "in.running_var": [16] });
  assert.equal(pointwiseVerdict(inorm, new GraphView(g)), null);
  assert.deepEqual(
    planGraph(g).regions.map((r) => [r.kind, regionNodes(r)]),
    [["pointwise", ["in"]]],
  );
  inorm.fn = { ...inorm.fn, use_input_stats: bool(true), running_mean: none, running_var: none };
  assert.notEqual(pointwiseVerdict(inorm, new GraphView(g)), null);
  assert.equal(normDims(inorm, new GraphView(g))?.join(), "2,3", "instance statistics: the normalize rule");
});

test("a pointwise op reshaped only for a reduction (relu(h).view(B, S, -1).sum(-2)) is the reduction's prologue", () => {
  // Round 13: the view between the relu and the sum made the relu a pass of its own, writing a tensor the sum
  // read back. The view now reshapes the relu's input and the relu, under the view's id, feeds the sum.
  const h = node("h", "mm", { input: ref("x"), mat2: param("w") }, [400, 128]);
  const relu = node("relu", "relu", { input: ref("h") }, [400, 128]);
  const view = node("view", "view", { input: ref("relu"), size: ints(8, 50, 128) }, [8, 50, 128], {
    kind: "call_method",
    target: "view",
  });
  const sum = node("sum", "sum", { input: ref("view"), dim: ints(1), keepdim: bool(false) }, [8, 128]);
  const g = graph([h, relu, view, sum], "sum", { w: [64, 128] });
  g.inputs = [{ name: "x", meta: f32([400, 64]), value: null }];
  const canon = canonicalGraph(g);
  assert.deepEqual(
    canon.nodes.map((n) => `${n.id}:${n.op}`),
    ["h:mm", "view_of_input:view", "view:relu", "sum:sum"],
  );
  assert.deepEqual(canon.nodes[1]?.fn?.input, ref("h"));
  const plan = planGraph(canon);
  assert.deepEqual(
    plan.regions.map((r) => regionNodes(r)),
    [["view", "sum"]],
  );
  // A reshape read by anything but a reduction or normalisation leaves the op where it is (it may be fused
  // with what made its input).
  const mm2 = node("mm2", "mm", { input: ref("view"), mat2: param("w2") }, [8, 4]);
  const flat = {
    ...view,
    out: { t: "tensor" as const, meta: f32([8, 50 * 128]) },
    fn: { input: ref("relu"), size: ints(8, -1) },
  };
  const g2 = graph([h, relu, flat, mm2], "mm2", { w: [64, 128], w2: [50 * 128, 4] });
  g2.inputs = g.inputs;
  assert.deepEqual(
    canonicalGraph(g2).nodes.map((n) => n.op),
    ["mm", "relu", "view", "mm"],
  );
});

test("a pointwise op whose shape is also read (b, c, h, w = x.shape; x.view(b, c, -1).softmax(2)) still joins the softmax", () => {
  // KernelBench L2 #38: conv_transpose3d -> clamp -> `b, c, d, h, w = x.shape` -> view -> softmax; the `.shape` read
  // of the clamp kept it a pass of its own. The shape is the clamp's input's, which the read now takes.
  const clamp = node("clamp", "clamp", { input: ref("x"), min: num(0), max: num(1) }, [8, 16, 32]);
  const name: Arg = { t: "const", pytype: "str", value: "shape" };
  const shape = node("shape", "getattr", { input: ref("clamp"), name }, [], {
    kind: "call_function",
    target: "builtins.getattr",
    out: { t: "value", pytype: "tuple" },
  });
  const b = node("b", "getitem", { input: ref("shape"), index: num(0) }, [], {
    out: { t: "value", pytype: "int" },
  });
  const c = node("c", "getitem", { input: ref("shape"), index: num(1) }, [], {
    out: { t: "value", pytype: "int" },
  });
  const view = node(
    "view",
    "view",
    { input: ref("clamp"), size: { t: "list", kind: "tuple", items: [ref("b"), ref("c"), num(-1)] } },
    [8, 16, 32],
    {
      kind: "call_method",
      target: "view",
    },
  );
  const soft = node("soft", "softmax", { input: ref("view"), dim: num(2) }, [8, 16, 32]);
  const g = graph([clamp, shape, b, c, view, soft], "soft", {});
  g.inputs = [{ name: "x", meta: f32([8, 16, 32]), value: null }];
  const canon = canonicalGraph(g);
  assert.deepEqual(canon.nodes.find((n) => n.id === "shape")?.fn?.input, ref("x"));
  assert.deepEqual(
    planGraph(canon).regions.map((r) => regionNodes(r)),
    [["view", "soft"]],
  );
});

test("max pools in a row over windows that tile their input are one pool over the product windows", () => {
  // KernelBench L2 #6 and #78: MaxPool3d(2) then MaxPool3d(3) (stride = kernel) wrote and read back an eighth of
  // the conv's output; floor(floor(n / 2) / 3) = floor(n / 6), and each output is the max of the same elements.
  const pool = (id: string, input: string, k: number, shape: number[], extra: Record<string, Arg> = {}) =>
    node(
      id,
      "max_pool3d",
      {
        input: ref(input),
        kernel_size: ints(k, k, k),
        stride: ints(k, k, k),
        padding: ints(0, 0, 0),
        dilation: ints(1, 1, 1),
        ceil_mode: bool(false),
        return_indices: bool(false),
        ...extra,
      },
      shape,
      { kind: "call_module", target: id },
    );
  const build = (second: GraphNode, readers: GraphNode[] = []) => {
    const g = graph(
      [
        pool("p1", "x", 2, [2, 4, 31, 31, 31]),
        second,
        node("r", "relu", { input: ref("p2") }, [2, 4, 10, 10, 10]),
        ...readers,
      ],
      "r",
    );
    g.inputs = [{ name: "x", meta: f32([2, 4, 63, 63, 63]), value: null }];
    return canonicalGraph(g);
  };
  const one = build(pool("p2", "p1", 3, [2, 4, 10, 10, 10]));
  assert.deepEqual(
    one.nodes.map((n) => `${n.id}:${n.op}`),
    ["p2:max_pool3d", "r:relu"],
  );
  const merged = one.nodes[0];
  assert.deepEqual(merged?.fn?.input, ref("x"));
  assert.deepEqual(merged?.fn?.kernel_size, ints(6, 6, 6));
  assert.deepEqual(merged?.kwargs.stride, ints(6, 6, 6));
  assert.equal(merged?.target, "torch.nn.functional.max_pool3d");
  // overlapping windows, padding, a first pool read elsewhere: two pools as written
  const kept = (g: Graph) => g.nodes.filter((n) => n.op === "max_pool3d").length;
  assert.equal(kept(build(pool("p2", "p1", 3, [2, 4, 15, 15, 15], { stride: ints(2, 2, 2) }))), 2);
  assert.equal(kept(build(pool("p2", "p1", 3, [2, 4, 11, 11, 11], { padding: ints(1, 1, 1) }))), 2);
  const other = node("s", "sum", { input: ref("p1"), dim: none, keepdim: bool(false) }, []);
  assert.equal(kept(build(pool("p2", "p1", 3, [2, 4, 10, 10, 10]), [other])), 2);
});

test("a global adaptive pool is the mean or amax over its spatial dims: a reduction taking the conv and the ops before it", () => {
  // Round 13: conv → hardsigmoid → AdaptiveAvgPool2d(1) was a conv-anchored pointwise pass and a pool pass (the
  // pool rule takes no prologue); as `mean((2, 3), keepdim=True)` it is one reduction.
  const conv = convModule();
  const act = node("act", "hardsigmoid", { input: ref("conv") }, X);
  const pooled = (op: string, fn: Record<string, Arg>) => {
    const g = graph(
      [
        conv,
        act,
        node("pool", op, { input: ref("act"), ...fn }, [8, 16, 1, 1], {
          kind: "call_module",
          target: "pool",
        }),
      ],
      "pool",
      { "conv.weight": [16, 16, 3, 3], "conv.bias": [16] },
    );
    g.modules.conv = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
    return g;
  };
  const avg = canonicalGraph(pooled("adaptive_avg_pool2d", { output_size: num(1) }));
  const mean = avg.nodes.find((n) => n.id === "pool");
  assert.equal(mean?.op, "mean");
  assert.deepEqual(mean?.fn?.dim, { t: "list", kind: "tuple", items: [num(2), num(3)] });
  assert.deepEqual(mean?.fn?.keepdim, bool(true));
  const plan = planGraph(avg);
  assert.deepEqual(
    plan.regions.map((r) => [r.kind, r.anchor, ...regionNodes(r)]),
    [["reduce", "conv", "conv", "act", "pool"]],
  );
  const max = canonicalGraph(
    pooled("adaptive_max_pool2d", { output_size: ints(1, 1), return_indices: bool(false) }),
  );
  assert.equal(max.nodes.find((n) => n.id === "pool")?.op, "amax");
  // Another output size, or the indices asked for, stays a pool.
  const seven = canonicalGraph(pooled("adaptive_avg_pool2d", { output_size: ints(7, 7) }));
  assert.equal(seven.nodes.find((n) => n.id === "pool")?.op, "adaptive_avg_pool2d");
  const indices = canonicalGraph(
    pooled("adaptive_max_pool2d", { output_size: num(1), return_indices: bool(true) }),
  );
  assert.equal(indices.nodes.find((n) => n.id === "pool")?.op, "adaptive_max_pool2d");
});

test("a layer scale permuted for the residual (x + (gamma * y).permute(0, 3, 1, 2)) joins the residual's region", () => {
  // Round 13 (ConvNeXt): the multiply ran as a pass of its own, the add read its result through the permute. The
  // multiply now reads the permuted y and gamma viewed as (C, 1, 1), after the permute, in the add's region.
  const NHWC = [8, 32, 32, 16];
  const base = contiguous(NHWC);
  const dims = [0, 3, 1, 2];
  const back = {
    shape: dims.map((d) => NHWC[d] ?? 0),
    dtype: "float32",
    stride: dims.map((d) => base[d] ?? 0),
  };
  const y = node("y", "linear", { input: ref("h"), weight: param("fc.weight") }, NHWC, {
    kind: "call_module",
    target: "fc",
  });
  const build = (op: string) => {
    const scaled = node("scaled", op, { input: param("gamma"), other: ref("y") }, NHWC);
    const p = node("p", "permute", { input: ref("scaled"), dims: ints(...dims) }, [], {
      kind: "call_method",
      target: "permute",
      out: { t: "tensor", meta: back },
    });
    const add = node(
      "add",
      "add",
      { input: ref("x"), other: ref("p"), alpha: num(1) },
      X.slice(0, 1).concat([16, 32, 32]),
    );
    const g = graph([y, scaled, p, add], "add", { "fc.weight": [16, 16], gamma: [16] });
    g.inputs = [
      { name: "x", meta: f32([8, 16, 32, 32]), value: null },
      { name: "h", meta: f32(NHWC), value: null },
    ];
    return g;
  };
  const canon = canonicalGraph(build("mul"));
  assert.deepEqual(
    canon.nodes.map((n) => `${n.id}:${n.op}`),
    ["y:linear", "p_of_y:permute", "p_channel_view:view", "p:mul", "add:add"],
  );
  assert.deepEqual(canon.nodes[2]?.fn?.size, ints(16, 1, 1));
  const plan = planGraph(canon);
  assert.deepEqual(
    plan.regions.map((r) => regionNodes(r)),
    [["p", "add"]],
  );
  // Only + - * /: an op whose CPU kernel may round a permuted view otherwise stays where it is.
  assert.deepEqual(
    canonicalGraph(build("pow")).nodes.map((n) => n.op),
    ["linear", "pow", "permute", "add"],
  );
});

test("kl_div reduces with batchmean / mean / sum; legacy size_average/reduce or mismatched shapes keep PyTorch", () => {
  const text = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const rule = SEED_RULES.find((r) => r.name === "reduce");
  const kl = (extra: Record<string, Arg>, targetShape = X) => {
    const n = node(
      "kl",
      "kl_div",
      { input: ref("x"), target: ref("t"), log_target: bool(false), ...extra },
      [],
    );
    const g = graph([n], "kl");
    g.inputs.push({ name: "t", meta: f32(targetShape), value: null });
    return rule?.accepts(n, new GraphView(g));
  };
  for (const reduction of ["batchmean", "mean", "sum"])
    assert.equal(kl({ reduction: text(reduction) }), null);
  assert.match(kl({ reduction: text("none") }) ?? "", /reduction=none/);
  assert.match(kl({ reduction: text("mean"), reduce: bool(false) }) ?? "", /legacy reduce/);
  assert.match(kl({ reduction: text("batchmean") }, [1, 16, 32, 32]) ?? "", /different shapes/);
  // mse_loss(reduce=False) is elementwise: not a reduction either.
  const mse = node("m", "mse_loss", { input: ref("x"), target: ref("x"), reduce: bool(false) }, X);
  assert.match(rule?.accepts(mse, new GraphView(graph([mse], "m"))) ?? "", /legacy reduce/);
});

test("cosine_similarity is one three-sum reduction over its dim; its x1 grows the prologue; a higher-rank x2 keeps PyTorch", () => {
  const cosine = (x2Shape: number[]) => {
    const scaled = node("s", "mul", { input: ref("x"), other: num(2) }, X);
    const cs = node(
      "cs",
      "cosine_similarity",
      { x1: ref("s"), x2: ref("y"), dim: num(1), eps: num(1e-8) },
      [8, 32, 32],
    );
    const g = graph([scaled, cs], "cs");
    g.inputs.push({ name: "y", meta: f32(x2Shape), value: null });
    return planGraph(g);
  };
  const plan = cosine(X);
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  assert.equal(plan.regions[0]?.seed, "cs");
  assert.deepEqual(plan.regions[0]?.prologue, ["s"]);
  // A broadcast x2 of the same rank is fine; one with an extra leading dim would change what `dim` names.
  assert.equal(cosine([1, 16, 32, 32]).regions.length, 1);
  const wider = cosine([2, ...X]);
  assert.equal(wider.regions.filter((r) => r.seed === "cs").length, 0);
  assert.match(wider.kept.find((k) => k.node === "cs")?.reason ?? "", /more dims than its x1/);
});

test("binary_cross_entropy reduces, with a per-element weight too; a weight of more dims than the input does not", () => {
  const rule = SEED_RULES.find((r) => r.name === "reduce");
  const text = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const bce = (weight: Arg) => {
    const n = node(
      "b",
      "binary_cross_entropy",
      { input: ref("x"), target: ref("t"), weight, reduction: text("mean") },
      [],
    );
    const g = graph([n], "b");
    g.inputs.push(
      { name: "t", meta: f32(X), value: null },
      { name: "w5", meta: f32([2, ...X]), value: null },
    );
    return rule?.accepts(n, new GraphView(g));
  };
  assert.equal(bce(none), null);
  assert.equal(bce(ref("t")), null);
  assert.match(bce(ref("w5")) ?? "", /its weight has more dims than its input/);
});

test("a pointwise chain reading more tensors than a kernel takes is split into regions of at most 7 operands", () => {
  const n = 12;
  const nodes: GraphNode[] = [];
  let prev = "x";
  for (let i = 0; i < n; i++) {
    nodes.push(node(`a${i}`, "add", { input: ref(prev), other: ref(`y${i}`) }, X));
    prev = `a${i}`;
  }
  const g = graph(nodes, prev);
  for (let i = 0; i < n; i++) g.inputs.push({ name: `y${i}`, meta: f32(X), value: null });
  const plan = planGraph(g);
  const view = new GraphView(g);
  const covered = plan.regions.flatMap((r) => regionNodes(r));
  assert.equal(new Set(covered).size, n, "every add is in a region");
  for (const region of plan.regions) {
    const inside = new Set(regionNodes(region));
    const reads = new Set(
      [...inside].flatMap((id) =>
        view.node(id).args.flatMap((a) => (a.t === "node" && !inside.has(a.id) ? [a.id] : [])),
      ),
    );
    assert.ok(reads.size <= 7, `${region.id} reads ${reads.size} tensors`);
  }
  assert.ok(plan.regions.length >= 2);
});

test("torch.max/min(dim).values / .indices (a named-tuple field) reads as [0] / [1]", () => {
  const out: GraphNode["out"] = {
    t: "tuple",
    items: [f32([8, 1, 32, 32]), { ...f32([8, 1, 32, 32]), dtype: "int64" }],
  };
  const field = (name: string): Arg => ({ t: "const", pytype: "str", value: name });
  const read = (name: string) => {
    const g = graph(
      [
        node("mx", "min_dim", { input: ref("x"), dim: num(1), keepdim: bool(true) }, [8, 1, 32, 32], { out }),
        node("vals", "getattr", { input: ref("mx"), name: field(name) }, [8, 1, 32, 32], {
          target: "getattr",
        }),
      ],
      "vals",
    );
    const last = g.nodes[1];
    if (last && name === "indices")
      last.out = { t: "tensor", meta: { ...f32([8, 1, 32, 32]), dtype: "int64" } };
    return g;
  };
  const values = planGraph(read("values"));
  assert.deepEqual(values.regions[0] && regionNodes(values.regions[0]), ["mx", "vals"]);
  const indices = read("indices");
  const view = new GraphView(indices);
  assert.equal(planGraph(indices).regions[0]?.output, "vals");
  assert.equal(reduceSpecOf(view.node("mx"), view)?.acc, "KfAccArgMin");
  // Any other attribute of the pair is no projection of it.
  assert.ok(!planGraph(read("count")).regions.some((r) => r.seed === "mx"));
});

test("casts: a bool mask's .float() and a .half() join a region; a region of casts alone stays PyTorch's", () => {
  const dtypeArg = (value: string): Arg => ({ t: "const", pytype: "dtype", value });
  const withDtype = (n: GraphNode, dtype: string) => {
    n.out = { t: "tensor", meta: { ...f32(X), dtype } };
    return n;
  };
  const chain = graph(
    [
      withDtype(node("gt", "gt", { input: ref("x"), other: num(0) }, X), "bool"),
      node("fl", "to", { input: ref("gt"), dtype: dtypeArg("float32") }, X),
      node("mul", "mul", { input: ref("x"), other: ref("fl") }, X),
      withDtype(node("half", "to", { input: ref("mul"), dtype: dtypeArg("float16") }, X), "float16"),
    ],
    "half",
  );
  const plan = planGraph(chain);
  assert.equal(plan.regions.length, 1);
  assert.deepEqual(plan.regions[0] && regionNodes(plan.regions[0]), ["gt", "fl", "mul", "half"]);
  // A cast that also moves devices, or to a dtype read from a tensor at run time, has no kernel form.
  const moved = node(
    "mv",
    "to",
    { input: ref("x"), device: { t: "const", pytype: "device", value: "cuda:0" } },
    X,
  );
  const view = new GraphView(graph([moved], "mv"));
  assert.match(pointwiseVerdict(moved, view) ?? "", /no kernel form/);
  const alone = planGraph(
    graph([withDtype(node("h", "to", { input: ref("x"), dtype: dtypeArg("float16") }, X), "float16")], "h"),
  );
  assert.equal(alone.regions.length, 0);
});

test("softmax(dtype=) that narrows its input stays PyTorch's (it casts before normalising); widening fuses", () => {
  const softmax = (inDtype: string, outDtype: string) => {
    const g = graph([node("sm", "softmax", { input: ref("x"), dim: num(-1) }, X)], "sm");
    const input = g.inputs[0];
    if (input?.meta) input.meta.dtype = inDtype;
    const sm = g.nodes[0];
    if (sm) sm.out = { t: "tensor", meta: { ...f32(X), dtype: outDtype } };
    return planGraph(g);
  };
  assert.equal(softmax("float16", "float32").regions.length, 1);
  const narrowed = softmax("float32", "float16");
  assert.equal(narrowed.regions.length, 0);
  assert.match(narrowed.kept.find((k) => k.node === "sm")?.reason ?? "", /narrower dtype/);
});

test("sum/mean(dtype=) that widens half precision to float32 reduces; a float64 result stays PyTorch's", () => {
  const reduce = (op: string, inDtype: string, outDtype: string) => {
    const fn = {
      input: ref("x"),
      dim: ints(1),
      keepdim: bool(false),
      dtype: { t: "const", pytype: "dtype", value: outDtype } as Arg,
    };
    const g = graph([node("r", op, fn, [8, 32, 32])], "r");
    const input = g.inputs[0];
    if (input?.meta) input.meta.dtype = inDtype;
    const r = g.nodes[0];
    if (r) r.out = { t: "tensor", meta: { ...f32([8, 32, 32]), dtype: outDtype } };
    return planGraph(g);
  };
  assert.equal(reduce("sum", "float16", "float32").regions.length, 1);
  assert.equal(reduce("mean", "bfloat16", "float32").regions.length, 1);
  assert.equal(reduce("sum", "float32", "float32").regions.length, 1);
  const wider = reduce("mean", "float32", "float64");
  assert.equal(wider.regions.length, 0);
  assert.match(wider.kept.find((k) => k.node === "r")?.reason ?? "", /casts \(dtype=float64\)/);
});

test("an op capture has no name for is reported by the callable the reference calls", () => {
  const det = node("det", "unknown", { input: ref("x") }, [8, 16], { target: "torch.linalg.det", fn: null });
  const plan = planGraph(graph([det], "det"));
  assert.match(plan.kept.find((k) => k.node === "det")?.reason ?? "", /no rule covers torch\.linalg\.det/);
});

test("a device read moves up to a value forward has, so the chain it read from fuses whole (conv anchored)", () => {
  const dev: Arg = { t: "const", pytype: "str", value: "device" };
  const g = graph(
    [
      convModule(),
      node("add", "add", { input: ref("conv"), other: num(0.5), alpha: num(1) }, X),
      node("dev", "getattr", { input: ref("add"), name: dev }, [], {
        target: "getattr",
        args: [ref("add"), dev],
        out: { t: "value", pytype: "device" },
      }),
      node("zero", "tensor", { data: num(0), device: ref("dev") }, []),
      node("mn", "minimum", { input: ref("add"), other: ref("zero") }, X),
      node("act", "gelu", { input: ref("mn"), approximate: { t: "const", pytype: "str", value: "none" } }, X),
    ],
    "act",
    { "conv.weight": [16, 16, 3, 3], "conv.bias": [16] },
  );
  g.modules.conv = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
  const before = planGraph(g);
  assert.ok(!before.regions.some((r) => regionNodes(r).includes("add") && regionNodes(r).includes("mn")));
  const rewritten = canonicalGraph(g);
  assert.deepEqual(rewritten.nodes.find((n) => n.id === "dev")?.args[0], ref("x"));
  const plan = planGraph(rewritten);
  const region = plan.regions.find((r) => r.output === "act");
  assert.deepEqual(region && regionNodes(region), ["conv", "add", "mn", "act"]);
  assert.deepEqual(g.nodes[2]?.fn?.input, ref("add"), "the captured graph itself is left as it was");
});

test("zeros_like / ones_like / full_like of a region's value fuse as constants; alone they stay PyTorch's", () => {
  const chain = graph(
    [
      node("act", "relu", { input: ref("x") }, X),
      node("z", "zeros_like", { input: ref("act") }, X),
      node("cmp", "gt", { input: ref("act"), other: num(1) }, X, {
        out: { t: "tensor", meta: { ...f32(X), dtype: "bool" } },
      }),
      node("w", "where", { condition: ref("cmp"), input: ref("act"), other: ref("z") }, X),
    ],
    "w",
  );
  const plan = planGraph(chain);
  assert.equal(plan.regions.length, 1);
  assert.deepEqual(plan.regions[0] && regionNodes(plan.regions[0]).sort(), ["act", "cmp", "w", "z"]);
  const onDevice = node(
    "o",
    "ones_like",
    { input: ref("x"), device: { t: "const", pytype: "device", value: "cpu" } },
    X,
  );
  assert.match(pointwiseVerdict(onDevice, new GraphView(graph([onDevice], "o"))) ?? "", /no kernel form/);
  assert.equal(
    planGraph(graph([node("f", "full_like", { input: ref("x"), fill_value: num(2) }, X)], "f")).regions
      .length,
    0,
  );
});

test("an in-place op on a value reached through another in-place op or a view writes that value's storage", () => {
  const g = graph(
    [
      node("m", "mul", { input: ref("x"), other: num(2) }, X),
      node("p", "pow", { input: ref("m"), exponent: num(2) }, X, { inplace: true }),
      node("a", "add", { input: ref("m"), other: num(1), alpha: num(1) }, X, { inplace: true }),
      node("s", "sqrt", { input: ref("a") }, X, { inplace: true }),
      node("v", "view", { input: ref("m"), size: ints(-1) }, [X.reduce((n, d) => n * d)]),
      node("r", "relu", { input: ref("v") }, [X.reduce((n, d) => n * d)], { inplace: true }),
      node("e", "exp", { input: ref("m") }, X),
      node("c", "mul", { input: ref("e"), other: num(2) }, X),
      node("k", "relu", { input: ref("c") }, X, { inplace: true }),
    ],
    "k",
  );
  g.output = { t: "list", kind: "tuple", items: [ref("m"), ref("k")] };
  const view = new GraphView(g);
  // `m.add_(1).sqrt_()` and `m.view(-1).relu_()` write m, which others read
  for (const id of ["s", "r"]) assert.match(pointwiseVerdict(view.node(id), view) ?? "", /in place/, id);
  // relu_ on a value only it reads is its out-of-place form
  assert.equal(pointwiseVerdict(view.node("k"), view), null);
});

test("masks combined with & | ^ (bool) and logical_and/or join the region that reads them; & of integers does not", () => {
  const boolOut = (n: GraphNode) => {
    n.out = { t: "tensor", meta: { shape: X, dtype: "bool", stride: contiguous(X) } };
    return n;
  };
  const g = graph(
    [
      boolOut(node("pos", "gt", { input: ref("x"), other: num(0) }, X)),
      boolOut(node("low", "lt", { input: ref("x"), other: num(-1) }, X)),
      boolOut(node("either", "bitwise_or", { input: ref("pos"), other: ref("low") }, X)),
      boolOut(node("big", "gt", { input: ref("x"), other: num(2) }, X)),
      boolOut(node("keep", "bitwise_and", { input: ref("either"), other: ref("big") }, X)),
      boolOut(node("both", "logical_and", { input: ref("keep"), other: ref("x") }, X)),
      node("w", "where", { condition: ref("both"), input: ref("x"), other: num(0) }, X),
    ],
    "w",
  );
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1);
  assert.deepEqual(regionNodes(plan.regions[0] as Parameters<typeof regionNodes>[0]).length, 7);
  const intAnd = node("ia", "bitwise_and", { input: ref("k"), other: ref("k") }, X);
  intAnd.out = { t: "tensor", meta: { shape: X, dtype: "int64", stride: contiguous(X) } };
  const ig = graph([intAnd], "ia");
  ig.inputs.push({ name: "k", meta: { shape: X, dtype: "int64", stride: contiguous(X) }, value: null });
  assert.match(pointwiseVerdict(intAnd, new GraphView(ig)) ?? "", /non-bool|int64/);
});

test("a call with an out= tensor writes that tensor: fused only where nothing else reads it", () => {
  const g = graph(
    [
      node("buf", "empty_like", { input: ref("x") }, X),
      node("m", "mul", { input: ref("x"), other: num(2) }, X),
      node("s", "sigmoid", { input: ref("m") }, X, { inplace: true, kwargs: { out: ref("buf") } }),
      node("t", "tanh", { input: ref("buf") }, X),
    ],
    "t",
  );
  const view = new GraphView(g);
  // sigmoid's input is private, but it writes buf, which tanh reads
  assert.match(pointwiseVerdict(view.node("s"), view) ?? "", /in place/);
  assert.ok(!planGraph(g).regions.some((r) => regionNodes(r).includes("s")));
});

test("a region does not read a value on both sides of an in-place write it leaves to PyTorch", () => {
  const g = graph(
    [
      node("m", "mul", { input: ref("x"), other: num(2) }, X),
      node("s", "sigmoid", { input: ref("m") }, X),
      node("w", "mul", { input: ref("m"), other: num(3) }, X, { inplace: true }),
      node("a", "add", { input: ref("s"), other: ref("m"), alpha: num(1) }, X),
    ],
    "a",
  );
  const plan = planGraph(g);
  // sigmoid reads m before m.mul_(3), add after it: one call where add was would see the write for both
  assert.ok(!plan.regions.some((r) => regionNodes(r).includes("s") && regionNodes(r).includes("a")));
  assert.ok(plan.kept.some((k) => k.node === "s" && /both sides of w, an in-place write/.test(k.reason)));
  // without the write, the same ops are one region
  const free = graph(
    g.nodes.filter((n) => n.id !== "w"),
    "a",
  );
  assert.ok(
    planGraph(free).regions.some((r) => regionNodes(r).includes("s") && regionNodes(r).includes("a")),
  );
});

test("a loss with reduction='none' is its elementwise term: it joins the reduction after it, its weight too", () => {
  const text = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const lossThenMean = (extra: Record<string, Arg>) => {
    const loss = node(
      "l",
      "binary_cross_entropy",
      { input: ref("x"), target: ref("t"), reduction: text("none"), ...extra },
      X,
    );
    const mean = node("m", "mean", { input: ref("l"), dim: ints(1) }, [8, 32, 32]);
    const g = graph([loss, mean], "m");
    g.inputs.push({ name: "t", meta: f32(X), value: null });
    return planGraph(g);
  };
  const plan = lossThenMean({});
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  assert.deepEqual(regionNodes(plan.regions[0] as never), ["l", "m"]);
  assert.equal(plan.kept.length, 0);
  // A per-element weight multiplies the term.
  const weighted = lossThenMean({ weight: ref("t") });
  assert.deepEqual(weighted.regions.map(regionNodes), [["l", "m"]]);
  // reduction='mean' is still the reduction rule's.
  const rule = SEED_RULES.find((r) => r.name === "reduce");
  const mean = node("l", "mse_loss", { input: ref("x"), target: ref("x"), reduction: text("mean") }, []);
  assert.equal(rule?.accepts(mean, new GraphView(graph([mean], "l"))), null);
  const elementwise = node(
    "l",
    "mse_loss",
    { input: ref("x"), target: ref("x"), reduction: text("none") },
    X,
  );
  assert.match(rule?.accepts(elementwise, new GraphView(graph([elementwise], "l"))) ?? "", /^no /);
  assert.equal(pointwiseVerdict(elementwise, new GraphView(graph([elementwise], "l"))), null);
});

test("pairwise_distance is one reduction over its last dim (an infinite p too); a NaN p stays PyTorch's", () => {
  const distance = (p: number) => {
    const d = node(
      "d",
      "pairwise_distance",
      { x1: ref("x"), x2: ref("x"), p: num(p), eps: num(1e-6), keepdim: bool(false) },
      [8, 16, 32],
    );
    return planGraph(graph([d], "d"));
  };
  const plan = distance(2);
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  assert.equal(plan.regions[0]?.kind, "reduce");
  const d = node("d", "pairwise_distance", { x1: ref("x"), x2: ref("x"), p: num(2) }, [8, 16, 32]);
  assert.deepEqual(reduceSpecOf(d, new GraphView(graph([d], "d")))?.dims, "last");
  const inf: Arg = { t: "const", pytype: "float", value: null, special: "inf" } as Arg;
  const infinite = node("d", "pairwise_distance", { x1: ref("x"), x2: ref("x"), p: inf }, [8, 16, 32]);
  assert.equal(planGraph(graph([infinite], "d")).regions.length, 1);
  const nan: Arg = { t: "const", pytype: "float", value: null, special: "nan" } as Arg;
  const undefinedNorm = node("d", "pairwise_distance", { x1: ref("x"), x2: ref("x"), p: nan }, [8, 16, 32]);
  assert.equal(planGraph(graph([undefinedNorm], "d")).regions.length, 0);
});

test("logaddexp is pointwise: it fuses with the ops around it", () => {
  const lae = node("a", "logaddexp", { input: ref("x"), other: ref("x") }, X);
  const sub = node("s", "sub", { input: ref("a"), other: num(1) }, X);
  const plan = planGraph(graph([lae, sub], "s"));
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  assert.deepEqual(regionNodes(plan.regions[0] as never), ["a", "s"]);
});

test("isnan's mask stays inside the region of the masked_fill that reads it", () => {
  const isnan = node("n", "isnan", { input: ref("x") }, X, {
    out: { t: "tensor", meta: { ...f32(X), dtype: "bool" } },
  });
  const fill = node("f", "masked_fill", { input: ref("x"), mask: ref("n"), value: num(0) }, X);
  const plan = planGraph(graph([isnan, fill], "f"));
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  assert.deepEqual(regionNodes(plan.regions[0] as never), ["n", "f"]);
});

test("a pointwise op takes a Python number another node computed; a non-number value stays out", () => {
  const value = (id: string, target: string, args: Arg[], pytype: string): GraphNode => ({
    ...node(id, "unknown", {}, [], { kind: "call_function", target, args, fn: null }),
    out: { t: "value", pytype },
  });
  const g = graph(
    [
      value("d", "size", [ref("x"), num(-1)], "int"),
      value("s", "math.sqrt", [ref("d")], "float"),
      node("m", "mul", { input: ref("x"), other: ref("s") }, X),
      node("r", "relu", { input: ref("m") }, X),
    ],
    "r",
  );
  const view = new GraphView(g);
  assert.equal(pointwiseVerdict(view.node("m"), view), null);
  assert.deepEqual(regionNodes(planGraph(g).regions[0] ?? assert.fail("no region")), ["m", "r"]);
  const shape = value("sh", "size", [ref("x")], "Size");
  const h = graph([shape, node("m", "mul", { input: ref("x"), other: ref("sh") }, X)], "m");
  const hv = new GraphView(h);
  assert.match(pointwiseVerdict(hv.node("m"), hv) ?? "", /not a tensor or a number/);
});

/** `x * rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w`, the input of dtype `dtype`. */
function writtenRmsNorm(dtype: string, meanUsers: "one" | "two" = "one"): Graph {
  const R = [8, 16, 32, 32];
  const S = [8, 16, 32, 1];
  const g = graph(
    [
      node("sq", "pow", { input: ref("x"), exponent: num(2) }, R),
      node("ms", "mean", { input: ref("sq"), dim: ints(-1), keepdim: bool(true), dtype: none }, S),
      node("add", "add", { input: ref("ms"), other: num(1e-6, "eps"), alpha: num(1) }, S),
      node("inv", "rsqrt", { input: ref("add") }, S),
      node("mul", "mul", { input: ref("x"), other: ref("inv") }, R),
      node("scaled", "mul", { input: ref("mul"), other: param("weight") }, R),
      ...(meanUsers === "two"
        ? [node("out2", "add", { input: ref("scaled"), other: ref("ms"), alpha: num(1) }, R)]
        : []),
    ],
    meanUsers === "two" ? "out2" : "scaled",
    { weight: [32] },
  );
  for (const n of g.nodes) if (n.out.t === "tensor") n.out.meta.dtype = dtype;
  const input = g.inputs[0];
  if (input?.meta) input.meta.dtype = dtype;
  return g;
}

test("a written RMSNorm (x * rsqrt(mean(x^2) + eps)) is one rms_norm: one normalize region with the weight", () => {
  const written = writtenRmsNorm("float32");
  assert.deepEqual(
    planGraph(written).regions.map((r) => r.kind),
    ["reduce", "pointwise"],
    "as written: a reduction and a pointwise pass that reads x again",
  );
  const rewritten = canonicalGraph(written);
  assert.deepEqual(
    rewritten.nodes.map((n) => `${n.id}:${n.op}`),
    ["mul:rms_norm", "scaled:mul"],
  );
  const norm = rewritten.nodes[0];
  assert.equal(norm?.target, "torch.nn.functional.rms_norm");
  assert.deepEqual(norm?.fn?.normalized_shape, ints(32));
  assert.deepEqual(norm?.fn?.eps, num(1e-6, "eps"), "eps keeps the model attribute it came from");
  const plan = planGraph(rewritten);
  assert.equal(plan.regions.length, 1);
  assert.equal(plan.regions[0]?.kind, "normalize");
  assert.deepEqual(plan.regions[0] && regionNodes(plan.regions[0]), ["mul", "scaled"]);
});

test("a written RMSNorm stays as written where rms_norm would not equal it or a statistic is read elsewhere", () => {
  // F.rms_norm upcasts half precision inside; the written ops round at each step.
  assert.equal(canonicalGraph(writtenRmsNorm("bfloat16")).nodes.length, 6);
  // The mean square read by another op must still be computed.
  assert.equal(canonicalGraph(writtenRmsNorm("float32", "two")).nodes.length, 7);
  // Over a leading dim it is no rms_norm.
  const leading = writtenRmsNorm("float32");
  const ms = leading.nodes.find((n) => n.id === "ms");
  if (ms?.fn) ms.fn.dim = ints(1);
  assert.equal(canonicalGraph(leading).nodes.length, 6);
});

test("T5's RMSNorm (the square of h.to(float32), the scale of half h itself) is one rms_norm of the cast", () => {
  // h = x * 2 (half); v = h.to(float32).pow(2).mean(-1, keepdim); h * rsqrt(v + eps): the product promotes h.
  const t5 = (half: string, scaledBy: "h" | "cast") => {
    const g = writtenRmsNorm("float32");
    const R = [8, 16, 32, 32];
    const h = node("h", "mul", { input: ref("x"), other: num(2) }, R);
    const cast = node(
      "c",
      "to",
      { input: ref("h"), dtype: { t: "const", pytype: "dtype", value: "float32" } },
      R,
    );
    if (h.out.t === "tensor") h.out.meta.dtype = half;
    g.nodes = [h, cast, ...g.nodes];
    for (const n of g.nodes) {
      if (n.id === "sq" && n.fn) n.fn.input = ref("c");
      if (n.id === "mul" && n.fn) n.fn.input = ref(scaledBy === "h" ? "h" : "c");
    }
    const input = g.inputs[0];
    if (input?.meta) input.meta.dtype = half;
    return canonicalGraph(g);
  };
  for (const half of ["float16", "bfloat16"]) {
    const folded = t5(half, "h");
    assert.deepEqual(
      folded.nodes.map((n) => `${n.id}:${n.op}`),
      ["h:mul", "c:to", "mul:rms_norm", "scaled:mul"],
      half,
    );
    assert.deepEqual(folded.nodes[2]?.fn?.input, ref("c"), "the norm reads the float32 cast");
    assert.equal(planGraph(folded).regions.length, 1);
  }
  // HF's form (the cast scaled) folded before; a float32 h is no widening and its square reads another value.
  assert.equal(t5("float16", "cast").nodes.length, 4);
  assert.equal(t5("float32", "h").nodes.length, 8);
});

test("an expand read only by pointwise ops (x * s.sigmoid().expand_as(x)) goes: the gate joins the multiply", () => {
  const S = [8, 16, 1, 1];
  const gate = (extraUser: GraphNode[] = [], output = "mul") =>
    graph(
      [
        node("mean", "mean", { input: ref("x"), dim: ints(2, 3), keepdim: bool(true), dtype: none }, S),
        node("sig", "sigmoid", { input: ref("mean") }, S),
        node("exp", "expand_as", { input: ref("sig"), other: ref("x") }, X),
        node("mul", "mul", { input: ref("x"), other: ref("exp") }, X),
        ...extraUser,
      ],
      output,
    );
  const kinds = (g: Graph) => planGraph(canonicalGraph(g)).regions.map((r) => regionNodes(r).join(" "));
  // The gate's mean, broadcast back into the multiply that reads x, is one normalisation (reduce-broadcast.ts).
  assert.deepEqual(kinds(gate()), ["mean sig mul"]);
  const rewritten = canonicalGraph(gate());
  assert.ok(!rewritten.nodes.some((n) => n.op === "expand_as"));
  assert.deepEqual(rewritten.nodes.find((n) => n.id === "mul")?.args, [ref("x"), ref("sig")]);
  // read by an op that would not broadcast to the expanded shape alone (s.expand_as(x) + 1), it stays
  const alone = gate([node("one", "add", { input: ref("exp"), other: num(1), alpha: num(1) }, X)], "one");
  assert.ok(canonicalGraph(alone).nodes.some((n) => n.op === "expand_as"));
  // returned, it stays
  assert.ok(canonicalGraph(gate([], "exp")).nodes.some((n) => n.op === "expand_as"));
});

test("in-place statements on a value (y.mul_(a); y.add_(b); return y) read as a chain and fuse", () => {
  const inplace = { inplace: true };
  const g = graph(
    [
      node("conv", "conv2d", { input: ref("x"), weight: param("conv.weight") }, X, {
        kind: "call_module",
        target: "conv",
      }),
      node("mul_", "mul", { input: ref("conv"), other: num(0.5) }, X, inplace),
      node("add_", "add", { input: ref("conv"), other: num(1), alpha: num(1) }, X, inplace),
      node("clamp_", "clamp", { input: ref("conv"), min: num(0), max: num(1) }, X, inplace),
    ],
    "conv",
    { "conv.weight": [16, 16, 3, 3] },
  );
  const before = planGraph(g);
  assert.ok(
    !before.regions.some((r) => regionNodes(r).includes("mul_")),
    "as captured: each write is shared",
  );
  const threaded = canonicalGraph(g);
  assert.deepEqual(
    threaded.nodes.map((n) => n.fn?.input),
    [ref("x"), ref("conv"), ref("mul_"), ref("add_")],
  );
  assert.deepEqual(threaded.output, ref("clamp_"));
  const region = planGraph(threaded).regions.find((r) => r.output === "clamp_");
  assert.deepEqual(region && regionNodes(region), ["mul_", "add_", "clamp_"]);
  assert.deepEqual(g.nodes[2]?.fn?.input, ref("conv"), "the captured graph itself is left as it was");
});

test("in-place statements stay as captured where a view sees the write; a read before it keeps its place", () => {
  const inplace = { inplace: true };
  const viewed = graph(
    [
      node("act", "relu", { input: ref("x") }, X),
      node("v", "view", { input: ref("act"), size: ints(-1) }, [X.reduce((a, b) => a * b)]),
      node("mul_", "mul", { input: ref("act"), other: num(2) }, X, inplace),
      node("sum", "sum", { input: ref("v"), dim: none, keepdim: bool(false), dtype: none }, []),
      node("out", "add", { input: ref("act"), other: ref("sum"), alpha: num(1) }, X),
    ],
    "out",
  );
  assert.deepEqual(canonicalGraph(viewed).nodes.at(-1)?.fn?.input, ref("act"), "v aliases act: no renaming");
  const readBefore = graph(
    [
      node("act", "relu", { input: ref("x") }, X),
      node("sig", "sigmoid", { input: ref("act") }, X),
      node("mul_", "mul", { input: ref("act"), other: num(3) }, X, inplace),
      node("out", "add", { input: ref("sig"), other: ref("act"), alpha: num(1) }, X),
    ],
    "out",
  );
  const threaded = canonicalGraph(readBefore);
  assert.deepEqual(threaded.nodes[1]?.fn?.input, ref("act"), "sigmoid ran before the write");
  assert.deepEqual(threaded.nodes[3]?.fn?.other, ref("mul_"), "the add after it reads the written value");
  // sigmoid reads act before the write, so the write is no one else's: mul_ fuses as its out-of-place form
  assert.deepEqual(
    planGraph(threaded).regions.map((r) => regionNodes(r)),
    [["act", "sig", "mul_", "out"]],
  );
});

test("glu is spelled out as chunk -> sigmoid -> mul, which fuses with the ops after it (float32, even size)", () => {
  const H = [8, 8, 32, 32];
  const g = graph(
    [
      node("glu", "glu", { input: ref("x"), dim: num(1) }, H),
      node("out", "add", { input: ref("glu"), other: num(1), alpha: num(1) }, H),
    ],
    "out",
  );
  assert.equal(planGraph(g).regions.length, 1, "as captured: the add alone");
  const spelled = canonicalGraph(g);
  assert.deepEqual(
    spelled.nodes.map((n) => `${n.id}:${n.op}`),
    [
      "glu_halves:chunk",
      "glu_value:getitem",
      "glu_gate_in:getitem",
      "glu_gate:sigmoid",
      "glu:mul",
      "out:add",
    ],
  );
  assert.deepEqual(spelled.nodes[0]?.fn?.dim, num(1));
  const region = planGraph(spelled).regions.find((r) => r.output === "out");
  assert.deepEqual(region && regionNodes(region), ["glu_gate", "glu", "out"]);
  const half = graph([node("glu", "glu", { input: ref("x"), dim: num(1) }, H)], "glu");
  const input = half.inputs[0];
  if (input?.meta) input.meta.dtype = "float16";
  assert.deepEqual(
    canonicalGraph(half).nodes.map((n) => n.op),
    ["glu"],
    "half precision: glu rounds once, the spelled-out ops twice",
  );
  const odd = graph([node("glu", "glu", { input: ref("x"), dim: num(0) }, [1, 16, 32, 32])], "glu");
  const oddInput = odd.inputs[0];
  if (oddInput?.meta) oddInput.meta.shape = [3, 16, 32, 32];
  assert.deepEqual(
    canonicalGraph(odd).nodes.map((n) => n.op),
    ["glu"],
    "an odd size along dim 0",
  );
});

test("cross_entropy with class indices is log_softmax over the class dim then nll_loss; label smoothing stays", () => {
  // Round 15: F.cross_entropy(logits / T, targets) was one PyTorch call, so nothing fused; ATen computes it as
  // log_softmax then nll_loss, which the log_softmax's normalisation region (with the divide) now does.
  const L = [64, 1000];
  const str = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const build = (fn: Record<string, Arg>, targetDtype = "int64", shape = L) => {
    const g = graph(
      [
        node("div", "div", { input: ref("x"), other: num(0.7) }, shape),
        node("ce", "cross_entropy", { input: ref("div"), target: ref("t"), ...fn }, [], {
          kind: "call_function",
          target: "torch.nn.functional.cross_entropy",
        }),
      ],
      "ce",
    );
    g.inputs = [
      { name: "x", meta: f32(shape), value: null },
      {
        name: "t",
        meta: { shape: [shape[0] ?? 0, ...shape.slice(2)], dtype: targetDtype, stride: [1] },
        value: null,
      },
    ];
    return g;
  };
  const canon = canonicalGraph(build({ weight: param("w"), ignore_index: num(3), reduction: str("sum") }));
  assert.deepEqual(
    canon.nodes.map((n) => `${n.id}:${n.op}`),
    ["div:div", "ce_log_probs:log_softmax", "ce:nll_loss"],
  );
  assert.deepEqual(canon.nodes[1]?.fn?.dim, num(1));
  const nll = canon.nodes[2];
  assert.deepEqual(nll?.args, [ref("ce_log_probs"), ref("t")]);
  assert.deepEqual(nll?.kwargs, { weight: param("w"), ignore_index: num(3), reduction: str("sum") });
  assert.deepEqual(
    planGraph(canon).regions.map((r) => regionNodes(r)),
    [["div", "ce_log_probs"]],
  );
  const kept = (g: Graph) => canonicalGraph(g).nodes.map((n) => n.op);
  assert.deepEqual(kept(build({ label_smoothing: num(0.1) })), ["div", "cross_entropy"], "label smoothing");
  assert.deepEqual(kept(build({}, "float32")), ["div", "cross_entropy"], "probability targets");
  // (N, C, H, W) logits with (N, H, W) targets: the class dim is still 1
  const dense = canonicalGraph(build({ weight: param("w") }, "int64", [2, 5, 8, 8]));
  assert.deepEqual(dense.nodes[1]?.fn?.dim, num(1));
});

test("cross_entropy over class indices without a class weight is one reduction over the class dim, finished alone", () => {
  const str = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const build = (fn: Record<string, Arg>, shape = [64, 1000], targetDtype = "int64", after = false) => {
    const targetShape = [shape[0] ?? 0, ...shape.slice(2)];
    const g = graph(
      [
        node("div", "div", { input: ref("x"), other: num(0.7) }, shape),
        node("ce", "cross_entropy", { input: ref("div"), target: ref("t"), ...fn }, [], {
          kind: "call_function",
          target: "torch.nn.functional.cross_entropy",
        }),
        ...(after ? [node("twice", "mul", { input: ref("ce"), other: num(2) }, [])] : []),
      ],
      after ? "twice" : "ce",
    );
    g.inputs = [
      { name: "x", meta: f32(shape), value: null },
      { name: "t", meta: { shape: targetShape, dtype: targetDtype, stride: [] }, value: null },
    ];
    return g;
  };
  const regions = (g: Graph) =>
    planGraph(canonicalGraph(g)).regions.map((r) => `${r.rule}:${regionNodes(r).join(",")}`);
  assert.deepEqual(regions(build({})), ["reduce:div,ce"], "mean, the divide its prologue");
  assert.deepEqual(
    regions(build({ ignore_index: num(3), label_smoothing: num(0.1), reduction: str("none") })),
    ["reduce:div,ce"],
  );
  assert.deepEqual(
    regions(build({ reduction: str("sum") }, [2, 5, 8, 8])),
    ["reduce:div,ce"],
    "a (N, C, H, W) map",
  );
  const dense = canonicalGraph(build({}, [2, 5, 8, 8]));
  const denseView = new GraphView(dense);
  const seed = planGraph(dense).regions[0]?.seed ?? "";
  assert.deepEqual(reductionDims(denseView.node(seed), denseView), [1], "the class dim of (N, C, H, W)");
  // the mean is whole only after the kernel: an op after it is not its epilogue
  assert.deepEqual(regions(build({}, [64, 1000], "int64", true)), ["reduce:div,ce", "pointwise:twice"]);
  // softmax applied before it (a common slip): its own region, not merged into the loss's prologue
  const slip = build({});
  slip.nodes[0] = node("div", "softmax", { input: ref("x"), dim: num(1) }, [64, 1000]);
  assert.deepEqual(regions(slip), ["normalize:div", "reduce:ce"]);
  // probability targets and a class weight are not this kernel's (the weight: log_softmax then nll_loss)
  assert.deepEqual(regions(build({}, [64, 1000], "float32")), ["pointwise:div"]);
  assert.deepEqual(regions(build({ weight: param("w") })), ["normalize:div,ce_log_probs"]);
  // more classes than fp32 counts exactly, or an ignore_index beyond that: ATen's two ops, as with a weight
  assert.deepEqual(regions(build({}, [4, 2 ** 24])), ["normalize:div,ce_log_probs"]);
  assert.deepEqual(regions(build({ ignore_index: num(2 ** 25) })), ["normalize:div,ce_log_probs"]);
});

test("a spelled-out op is not built from a model attribute's value (the reference reads it every call)", () => {
  // Round 17: `F.normalize(x, p=1.0, dim=self.dim)`, `F.glu(x, dim=self.dim)` and `F.cross_entropy(...,
  // label_smoothing=self.smoothing)` were spelled out from the attribute's value at capture; after the model
  // set the attribute again, ModelNew kept the old dim (a wrong result, or a shape error) or dropped the smoothing
  // (a class-weighted cross entropy: without a weight the one-pass reduction reads the smoothing at run time).
  const H = [8, 8, 32, 32];
  const glu = (dim: Arg) => graph([node("glu", "glu", { input: ref("x"), dim }, H)], "glu");
  assert.deepEqual(
    canonicalGraph(glu(num(1, "dim"))).nodes.map((n) => n.op),
    ["glu"],
  );
  assert.equal(canonicalGraph(glu(num(1))).nodes.length, 5, "a literal dim is still spelled out");
  const normalize = (dim: Arg) =>
    graph([node("n", "normalize", { input: ref("x"), p: num(1), dim, eps: num(1e-12) }, X)], "n");
  assert.deepEqual(
    canonicalGraph(normalize(num(1, "dim"))).nodes.map((n) => n.op),
    ["normalize"],
  );
  assert.deepEqual(
    canonicalGraph(normalize(num(1))).nodes.map((n) => n.op),
    ["reduce_broadcast_sum", "clamp", "div"],
    "spelled out: the norm, broadcast back into the divide, is one normalisation",
  );
  const ce = (smoothing: Arg) => {
    const g = graph(
      [
        node(
          "ce",
          "cross_entropy",
          { input: ref("x"), target: ref("t"), weight: param("w"), label_smoothing: smoothing },
          [],
          {
            kind: "call_function",
            target: "torch.nn.functional.cross_entropy",
          },
        ),
      ],
      "ce",
    );
    g.inputs = [
      { name: "x", meta: f32([64, 1000]), value: null },
      { name: "t", meta: { shape: [64], dtype: "int64", stride: [1] }, value: null },
    ];
    return g;
  };
  const zero: Arg = { t: "const", pytype: "float", value: 0 };
  assert.deepEqual(
    canonicalGraph(ce({ ...zero, attr: "smoothing" })).nodes.map((n) => n.op),
    ["cross_entropy"],
  );
  assert.deepEqual(
    canonicalGraph(ce(zero)).nodes.map((n) => n.op),
    ["log_softmax", "nll_loss"],
  );
});

test("prelu is spelled out as where(x >= 0, x, w * x); a per-channel weight is viewed (C, 1, 1)", () => {
  const g = graph(
    [
      node("conv", "conv2d", { input: ref("x"), weight: param("conv.weight") }, X, {
        kind: "call_module",
        target: "conv",
      }),
      node("act", "prelu", { input: ref("conv"), weight: param("act.weight") }, X, {
        kind: "call_module",
        target: "act",
      }),
      node("one", "prelu", { input: ref("act"), weight: param("one.weight") }, X),
    ],
    "one",
    { "conv.weight": [16, 16, 3, 3], "act.weight": [16], "one.weight": [1] },
  );
  assert.ok(!planGraph(g).regions.some((r) => regionNodes(r).includes("act")), "as captured: no rule");
  const spelled = canonicalGraph(g);
  assert.deepEqual(
    spelled.nodes.map((n) => `${n.id}:${n.op}`),
    [
      "conv:conv2d",
      "act_weight:view",
      "act_positive:ge",
      "act_scaled:mul",
      "act:where",
      "one_positive:ge",
      "one_scaled:mul",
      "one:where",
    ],
  );
  assert.deepEqual(spelled.nodes[1]?.fn?.size, {
    t: "list",
    kind: "tuple",
    items: [num(16), num(1), num(1)],
  });
  assert.equal(spelled.nodes[4]?.kind, "call_function", "the module call is gone: its weight is an operand");
  const region = planGraph(spelled).regions.find((r) => r.output === "one");
  assert.deepEqual(region && regionNodes(region), [
    "act_positive",
    "act_scaled",
    "act",
    "one_positive",
    "one_scaled",
    "one",
  ]);
  const mismatched = graph([node("act", "prelu", { input: ref("x"), weight: param("w") }, X)], "act", {
    w: [3],
  });
  assert.deepEqual(
    canonicalGraph(mismatched).nodes.map((n) => n.op),
    ["prelu"],
    "3 weights for 16 channels",
  );
});

test("an integer operand is read as fp32 where the op's result is float32; integer or half results keep PyTorch", () => {
  const shape = [4, 8];
  const meta = (dtype: string) => ({ t: "tensor" as const, meta: { ...f32(shape), dtype } });
  const g = graph(
    [
      node("m", "relu", { input: ref("x") }, shape, { out: meta("int64") }),
      node("i", "relu", { input: ref("x") }, shape, { out: meta("int32") }),
      node("prod", "mul", { input: ref("x"), other: ref("m") }, shape),
      node(
        "cast",
        "to",
        { input: ref("i"), dtype: { t: "const", pytype: "dtype", value: "float32" } },
        shape,
      ),
      node("ints", "add", { input: ref("m"), other: num(1), alpha: num(1) }, shape, { out: meta("int64") }),
      node("half", "mul", { input: ref("x"), other: ref("m") }, shape, { out: meta("float16") }),
      node("cmp", "ne", { input: ref("m"), other: num(-1) }, shape, { out: meta("bool") }),
    ],
    "prod",
  );
  const view = new GraphView(g);
  const verdict = (id: string) => pointwiseVerdict(view.node(id), view);
  assert.equal(verdict("prod"), null);
  assert.equal(verdict("cast"), null);
  assert.equal(verdict("ints"), "int64 output");
  assert.equal(verdict("half"), "int64 operand other");
  assert.equal(verdict("cmp"), "int64 operand input", "a comparison of integers is exact only in integers");
});

/** `m = x.amax(1, keepdim=True); m + log(exp(x - m).sum(1, keepdim))`, or keepdim=False with `m.squeeze(1)`. */
function writtenLogSumExp(dtype: string, keepdim: boolean, maxReadElsewhere = false): Graph {
  const S = [8, 1, 32, 32];
  const K = keepdim ? S : [8, 32, 32];
  const g = graph(
    [
      node("m", "amax", { input: ref("x"), dim: ints(1), keepdim: bool(true) }, S),
      node("d", "sub", { input: ref("x"), other: ref("m"), alpha: num(1) }, X),
      node("e", "exp", { input: ref("d") }, X),
      node("s", "sum", { input: ref("e"), dim: ints(1), keepdim: bool(keepdim), dtype: none }, K),
      node("l", "log", { input: ref("s") }, K),
      ...(keepdim ? [] : [node("q", "squeeze", { input: ref("m"), dim: ints(1) }, K)]),
      node("t", "add", { input: ref(keepdim ? "m" : "q"), other: ref("l"), alpha: num(1) }, K),
      ...(maxReadElsewhere ? [node("o", "mul", { input: ref("t"), other: ref("m") }, S)] : []),
    ],
    maxReadElsewhere ? "o" : "t",
  );
  for (const n of g.nodes) if (n.out.t === "tensor") n.out.meta.dtype = dtype;
  const input = g.inputs[0];
  if (input?.meta) input.meta.dtype = dtype;
  return g;
}

test("a written logsumexp (m + log(sum(exp(x - m)))) is one logsumexp reduction, keepdim or squeezed", () => {
  assert.equal(planGraph(writtenLogSumExp("float32", true)).regions.length, 3, "as written: three kernels");
  for (const keepdim of [true, false]) {
    const rewritten = canonicalGraph(writtenLogSumExp("float32", keepdim));
    assert.deepEqual(
      rewritten.nodes.map((n) => `${n.id}:${n.op}`),
      ["t:logsumexp"],
    );
    assert.deepEqual(rewritten.nodes[0]?.fn?.dim, ints(1));
    assert.deepEqual(rewritten.nodes[0]?.fn?.keepdim, bool(keepdim));
    const plan = planGraph(rewritten);
    assert.deepEqual(
      plan.regions.map((r) => r.kind),
      ["reduce"],
    );
  }
  // half precision: ATen's logsumexp need not round as the written ops do; the max read elsewhere is kept
  assert.equal(canonicalGraph(writtenLogSumExp("float16", true)).nodes.length, 6);
  assert.equal(canonicalGraph(writtenLogSumExp("float32", true, true)).nodes.length, 7);
});

type LnVariance = "var" | "square-of-another-sub" | "square-of-the-sub";
interface LnOptions {
  variance?: LnVariance;
  root?: "sqrt" | "rsqrt";
  dims?: number[];
  dtype?: string;
  correction?: number;
  /** Mean the variance over these dims instead (a variance over other dims than the mean's). */
  varianceDims?: number[];
  eps?: Arg;
  /** Another op reads this chain node (the forward returns it beside the norm). */
  readElsewhere?: string;
  /** An in-place op between the mean and the result. */
  inplaceBetween?: boolean;
}

/** LayerNorm written out over x's last dims, then `* w + b`: `mu = x.mean(dims, keepdim=True)`, the variance as
 * `x.var(dims, keepdim=True, correction=0)`, `((x - mu) ** 2).mean(...)` (its own `x - mu`) or `(xc * xc).mean(...)`
 * (`xc = x - mu`, read by the apply too); `(x - mu) / sqrt(var + eps)` or `(x - mu) * rsqrt(var + eps)`. */
function writtenLayerNorm(o: LnOptions = {}): Graph {
  const dims = o.dims ?? [-1];
  const rank = X.length;
  const sorted = dims.map((d) => (d < 0 ? d + rank : d));
  const S = X.map((s, i) => (sorted.includes(i) ? 1 : s));
  const V = o.varianceDims ? X.map((s, i) => (o.varianceDims?.includes(i - rank) ? 1 : s)) : S;
  const reduced = { dim: ints(...dims), keepdim: bool(true) };
  const variance = o.variance ?? "var";
  const tail = X.slice(rank - dims.length);
  const eps = o.eps ?? num(1e-5, "eps");
  const g = graph(
    [
      node("mu", "mean", { input: ref("x"), ...reduced, dtype: none }, S),
      ...(variance === "var"
        ? [
            node("var", "var", { input: ref("x"), ...reduced, correction: num(o.correction ?? 0) }, S, {
              kind: "call_method",
              target: "var",
            }),
          ]
        : []),
      node("xc", "sub", { input: ref("x"), other: ref("mu"), alpha: num(1) }, X),
      ...(variance === "square-of-another-sub"
        ? [
            node("xc2", "sub", { input: ref("x"), other: ref("mu"), alpha: num(1) }, X),
            node("sq", "pow", { input: ref("xc2"), exponent: num(2) }, X),
          ]
        : []),
      ...(variance === "square-of-the-sub"
        ? [node("sq", "mul", { input: ref("xc"), other: ref("xc") }, X, { args: [ref("xc"), ref("xc")] })]
        : []),
      ...(variance !== "var"
        ? [
            node(
              "var",
              "mean",
              {
                input: ref("sq"),
                dim: o.varianceDims ? ints(...o.varianceDims) : reduced.dim,
                keepdim: bool(true),
                dtype: none,
              },
              V,
            ),
          ]
        : []),
      ...(o.inplaceBetween
        ? [node("w_", "mul_", { input: param("w"), other: num(1) }, tail, { inplace: true })]
        : []),
      node("plus", "add", { input: ref("var"), other: eps, alpha: num(1) }, S),
      node("root", o.root ?? "sqrt", { input: ref("plus") }, S),
      o.root === "rsqrt"
        ? node("y", "mul", { input: ref("xc"), other: ref("root") }, X)
        : node("y", "div", { input: ref("xc"), other: ref("root"), rounding_mode: none }, X),
      node("scaled", "mul", { input: ref("y"), other: param("w") }, X),
      node("shifted", "add", { input: ref("scaled"), other: param("b"), alpha: num(1) }, X),
      ...(o.readElsewhere
        ? [node("out2", "add", { input: ref("shifted"), other: ref(o.readElsewhere), alpha: num(1) }, X)]
        : []),
    ],
    o.readElsewhere ? "out2" : "shifted",
    { w: tail, b: tail, ...(o.eps?.t === "param" ? { [o.eps.path]: [1] } : {}) },
  );
  const dtype = o.dtype ?? "float32";
  for (const n of g.nodes) if (n.out.t === "tensor") n.out.meta.dtype = dtype;
  const input = g.inputs[0];
  if (input?.meta) input.meta.dtype = dtype;
  return g;
}

test("a written LayerNorm is one layer_norm: one normalize region with the weight and bias, whatever its spelling", () => {
  assert.ok(
    planGraph(writtenLayerNorm()).regions.length >= 3,
    "as written: the mean, the variance, the apply",
  );
  const variances: LnVariance[] = ["var", "square-of-another-sub", "square-of-the-sub"];
  for (const variance of variances)
    for (const root of ["sqrt", "rsqrt"] as const)
      for (const dims of [[-1], [-2, -1], [2, 3]]) {
        const what = `${variance} ${root} ${dims.join()}`;
        const written = writtenLayerNorm({ variance, root, dims });
        const rewritten = canonicalGraph(written);
        assert.deepEqual(
          rewritten.nodes.map((n) => `${n.id}:${n.op}`),
          ["y:layer_norm", "scaled:mul", "shifted:add"],
          what,
        );
        const norm = rewritten.nodes[0];
        assert.deepEqual(norm?.fn?.normalized_shape, ints(...X.slice(X.length - dims.length)), what);
        assert.deepEqual(norm?.fn?.eps, num(1e-5, "eps"), "eps keeps the model attribute it came from");
        // PyTorch runs the written nodes, in their order, never F.layer_norm (not bit-equal to them)
        const order = written.nodes.map((n) => n.id).filter((id) => norm?.written?.some((w) => w.id === id));
        assert.deepEqual(
          norm?.written?.map((n) => n.id),
          order,
          what,
        );
        assert.equal(order.at(-1), "y");
        const plan = planGraph(rewritten);
        assert.deepEqual(
          plan.regions.map((r) => [r.kind, regionNodes(r)]),
          [["normalize", ["y", "scaled", "shifted"]]],
          what,
        );
        const region = plan.regions[0] as Region;
        const code = generateRegion(new GraphView(rewritten), region, (id) => (id === "x" ? "x" : `v_${id}`));
        assert.doesNotMatch(code.method, /layer_norm\(/, what);
        assert.match(code.method, /\n\s+v_mu = torch\.mean\(x/, what);
        assert.match(code.method, /\n\s+v_y = .*\n\s+v_scaled = /, what);
        assert.match(code.method, /def _kf_r0\(self, x\)/, "the written nodes read x alone");
      }
});

test("a written LayerNorm stays as written where a kernel cannot stand for it or a value is read elsewhere", () => {
  const kept = (o: LnOptions) =>
    canonicalGraph(writtenLayerNorm(o)).nodes.every((n) => n.op !== "layer_norm");
  assert.ok(!kept({}), "the plain form folds");
  // the unbiased variance (var(unbiased=True): correction 1) is no layer norm
  assert.ok(kept({ correction: 1 }));
  // the mean over a leading dim, a trailing dim beside a leading one, or a variance over other dims than the mean
  assert.ok(kept({ dims: [1] }));
  assert.ok(kept({ dims: [1, 3] }));
  assert.ok(kept({ variance: "square-of-another-sub", dims: [-2, -1], varianceDims: [-1] }));
  // the mean, the variance or the centred x read by another op (or returned) must still be computed
  for (const value of ["mu", "var", "xc", "plus", "root"]) assert.ok(kept({ readElsewhere: value }), value);
  assert.ok(kept({ variance: "square-of-another-sub", readElsewhere: "sq" }));
  // half precision: each written op rounds (and `(x - mu) ** 2` may overflow) where one float32 kernel does not
  assert.ok(kept({ dtype: "float16" }));
  assert.ok(kept({ dtype: "bfloat16", variance: "square-of-the-sub", root: "rsqrt" }));
  // eps as a tensor (a buffer), or the dims read from a model attribute
  assert.ok(kept({ eps: param("eps") }));
  const attrDims = writtenLayerNorm();
  for (const n of attrDims.nodes)
    if (n.fn && (n.id === "mu" || n.id === "var"))
      n.fn.dim = { t: "list", kind: "list", items: [num(-1, "dim")] };
  assert.ok(canonicalGraph(attrDims).nodes.every((n) => n.op !== "layer_norm"));
  // an in-place write between the chain's first node and its result: the written nodes would run after it
  assert.ok(kept({ inplaceBetween: true }));
});

test("a written LayerNorm's centred square is not taken for an RMSNorm of x - mu (two kernels): one layer_norm", () => {
  const rewritten = canonicalGraph(writtenLayerNorm({ variance: "square-of-the-sub", root: "rsqrt" }));
  assert.deepEqual(
    rewritten.nodes.map((n) => n.op),
    ["layer_norm", "mul", "add"],
  );
  // where the chain cannot be a layer norm (its mean read elsewhere), the RMSNorm fold still takes x - mu
  const shared = canonicalGraph(
    writtenLayerNorm({ variance: "square-of-the-sub", root: "rsqrt", readElsewhere: "mu" }),
  );
  assert.deepEqual(
    shared.nodes.map((n) => n.op),
    ["mean", "sub", "rms_norm", "mul", "add", "add"],
  );
});

test("inverse-trig, hyperbolic, atan2/hypot/copysign/fmax, frac, eval rrelu and nan_to_num join pointwise regions", () => {
  const shape = [4, 8];
  const half = { t: "tensor" as const, meta: { ...f32(shape), dtype: "float16" } };
  const g = graph(
    [
      node("a", "atan2", { input: ref("x"), other: num(0.5) }, shape),
      node("h", "hypot", { input: ref("a"), other: ref("x") }, shape),
      node("c", "copysign", { input: ref("h"), other: ref("x") }, shape),
      node("s", "asinh", { input: ref("c") }, shape),
      node("f", "frac", { input: ref("s") }, shape),
      node("m", "fmax", { input: ref("f"), other: ref("x") }, shape),
      node("r", "rrelu", { input: ref("m"), lower: num(0.1), upper: num(0.3), training: bool(false) }, shape),
      node("n", "nan_to_num", { input: ref("r"), nan: num(0), posinf: none, neginf: none }, shape),
      node(
        "rt",
        "rrelu",
        { input: ref("n"), lower: num(0.1), upper: num(0.3), training: bool(true) },
        shape,
        {
          rng: true,
        },
      ),
      node("nh", "nan_to_num", { input: ref("x"), nan: num(0), posinf: none, neginf: none }, shape, {
        out: half,
      }),
      node("nb", "nan_to_num", { input: ref("x"), nan: num(0), posinf: num(1e4), neginf: num(-1e4) }, shape, {
        out: half,
      }),
    ],
    "rt",
  );
  const view = new GraphView(g);
  const verdict = (id: string) => pointwiseVerdict(view.node(id), view);
  for (const id of ["a", "h", "c", "s", "f", "m", "r", "n", "nb"]) assert.equal(verdict(id), null, id);
  assert.match(verdict("rt") ?? "", /random/);
  assert.equal(verdict("nh"), "nan_to_num's default bounds are float16's largest values");
  const plan = planGraph(g);
  assert.deepEqual(plan.regions.map(regionNodes), [["a", "h", "c", "s", "f", "m", "r", "n"], ["nb"]]);
});

test("sgn, sinc, logit, round(decimals), xlogy/xlog1py, entr, ndtr/log_ndtr, heaviside and logaddexp2 join a region", () => {
  const shape = [4, 8];
  const g = graph(
    [
      node("s", "sgn", { input: ref("x") }, shape),
      node("c", "sinc", { input: ref("s") }, shape),
      node("l", "logit", { input: ref("c"), eps: num(1e-4) }, shape),
      node("r", "round", { input: ref("l"), decimals: num(2) }, shape),
      node("y", "xlogy", { input: ref("r"), other: ref("x") }, shape),
      node("p", "xlog1py", { input: ref("y"), other: ref("x") }, shape),
      node("e", "entr", { input: ref("p") }, shape),
      node("n", "ndtr", { input: ref("e") }, shape),
      node("ln", "log_ndtr", { input: ref("n") }, shape),
      node("h", "heaviside", { input: ref("ln"), values: num(0.5) }, shape),
      node("a", "logaddexp2", { input: ref("h"), other: ref("x") }, shape),
      node("ro", "round", { input: ref("a"), decimals: num(1.5) }, shape),
    ],
    "ro",
  );
  const view = new GraphView(g);
  const verdict = (id: string) => pointwiseVerdict(view.node(id), view);
  for (const id of ["s", "c", "l", "r", "y", "p", "e", "n", "ln", "h", "a"])
    assert.equal(verdict(id), null, id);
  assert.match(verdict("ro") ?? "", /no kernel form/);
  assert.deepEqual(planGraph(g).regions.map(regionNodes), [
    ["s", "c", "l", "r", "y", "p", "e", "n", "ln", "h", "a"],
  ]);
});

test("torch.aminmax read through [0] / .min is an amin reduction, through [1] / .max an amax; both read: PyTorch", () => {
  const pair = (reads: Arg[]) => {
    const out: GraphNode["out"] = { t: "tuple", items: [f32([8, 32]), f32([8, 32])] };
    const nodes = [
      node("mm", "aminmax", { input: ref("x"), dim: num(-1), keepdim: bool(false) }, [8, 32], { out }),
      ...reads.map((index, i) =>
        index.t === "const" && typeof index.value === "string"
          ? node(`get${i}`, "getattr", { input: ref("mm"), name: index }, [8, 32])
          : node(`get${i}`, "getitem", { input: ref("mm"), index }, [8, 32]),
      ),
    ];
    nodes.push(node("act", "relu", { input: ref("get0") }, [8, 32]));
    return graph(nodes, "act");
  };
  const field = (name: string): Arg => ({ t: "const", pytype: "str", value: name });
  for (const [read, acc] of [
    [num(0), "KfAccMin"],
    [num(1), "KfAccMax"],
    [field("min"), "KfAccMin"],
    [field("max"), "KfAccMax"],
  ] as const) {
    const g = pair([read]);
    const plan = planGraph(g);
    assert.deepEqual(plan.regions.map(regionNodes), [["mm", "get0", "act"]]);
    const view = new GraphView(g);
    assert.equal(reduceSpecOf(view.node("mm"), view)?.acc, acc);
  }
  const both = planGraph(pair([num(0), num(1)]));
  assert.ok(!both.regions.some((r) => r.seed === "mm"));
});

test("poisson_nll_loss reduces (log input or not, with Stirling's term or not)", () => {
  const loss = (fn: Record<string, Arg>) =>
    planGraph(
      graph(
        [
          node(
            "l",
            "poisson_nll_loss",
            {
              input: ref("x"),
              target: ref("x"),
              eps: num(1e-8),
              reduction: { t: "const", pytype: "str", value: "mean" },
              ...fn,
            },
            [],
          ),
        ],
        "l",
      ),
    ).regions.length;
  assert.equal(loss({ log_input: bool(true), full: bool(false) }), 1);
  assert.equal(loss({ log_input: bool(false), full: bool(false) }), 1);
  assert.equal(loss({ log_input: bool(true), full: bool(true) }), 1);
});

test("an index reduction (argmax, max(dim)[1]) takes no epilogue: its kernel stores the index, so `.float() * 0.5` stays apart", () => {
  const out = { t: "tensor" as const, meta: { ...f32([8, 1, 32]), dtype: "int64" } };
  const g = graph(
    [
      node("am", "argmax", { input: ref("x"), dim: num(1), keepdim: bool(true) }, [8, 1, 32], { out }),
      node(
        "f",
        "to",
        { input: ref("am"), dtype: { t: "const", pytype: "dtype", value: "float32" } },
        [8, 1, 32],
      ),
      node("m", "mul", { input: ref("f"), other: num(0.5) }, [8, 1, 32]),
    ],
    "m",
  );
  assert.deepEqual(planGraph(g).regions.map(regionNodes), [["am"], ["f", "m"]]);
});

test("an item assignment (fx's y.__setitem__(mask, v), which returns None) is not a name later reads take", () => {
  const g = graph(
    [
      node("m", "mul", { input: ref("x"), other: num(2) }, X),
      node("lt", "lt", { input: ref("m"), other: num(-1) }, X, {
        out: { t: "tensor", meta: { ...f32(X), dtype: "bool" } },
      }),
      node("set", "setitem", { input: ref("m"), index: ref("lt"), value: num(-1) }, X, {
        inplace: true,
        out: { t: "value", pytype: "NoneType" },
      }),
      node("s", "sum", { input: ref("m"), dim: ints(-1), keepdim: bool(false), dtype: none }, X.slice(0, -1)),
    ],
    "s",
  );
  const threaded = canonicalGraph(g);
  assert.deepEqual(threaded.nodes.at(-1)?.fn?.input, ref("m"), "the sum reads the written tensor, not None");
  assert.ok(
    !planGraph(threaded).regions.some((r) => regionNodes(r).includes("s") && regionNodes(r).includes("m")),
  );
});

test("F.normalize of an order other than 2 is spelled out as its norm (a reduction), clamp_min and a divide", () => {
  const special = (s: "inf"): Arg => ({ t: "const", pytype: "float", value: null, special: s });
  const normalize = (p: Arg) =>
    graph([node("n", "normalize", { input: ref("x"), p, dim: num(1), eps: num(1e-12) }, X)], "n");
  // The norm is then a reduction broadcast back into the divide (reduce-broadcast.ts): one normalisation whose
  // statistic is the norm's accumulator (a sum of |x|^p, or max |x| for inf), the clamp applied per element.
  for (const [p, stat] of [
    [num(1), "reduce_broadcast_sum"],
    [num(3.5), "reduce_broadcast_sum"],
    [special("inf"), "reduce_broadcast_max"],
  ] as [Arg, string][]) {
    const g = canonicalGraph(normalize(p));
    assert.deepEqual(
      g.nodes.map((n) => n.op),
      [stat, "clamp", "div"],
    );
    assert.deepEqual(g.nodes[0]?.fn?.ord, p);
    assert.deepEqual(g.nodes[0]?.fn?.reduction, { t: "const", pytype: "str", value: "vector_norm" });
    assert.deepEqual(
      g.nodes[0]?.written?.map((n) => n.op),
      ["vector_norm"],
    );
    assert.deepEqual(view4(g.nodes[0]?.written?.[0]), [8, 1, 32, 32]);
    assert.deepEqual(view4(g.nodes[0]), X, "the statistic at every element");
    assert.equal(g.nodes.at(-1)?.id, "n", "the divide keeps normalize's id: its readers are unchanged");
    assert.deepEqual(
      planGraph(g).regions.map((r) => r.kind),
      ["normalize"],
    );
  }
  // p = 2 is the normalisation rule's, one kernel
  assert.deepEqual(
    canonicalGraph(normalize(num(2))).nodes.map((n) => n.op),
    ["normalize"],
  );
});

function view4(n: GraphNode | undefined): number[] | undefined {
  return n?.out.t === "tensor" ? n.out.meta.shape : undefined;
}

test("binary_cross_entropy_with_logits reduces with pos_weight (a per-class row) and weight", () => {
  const text = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const g = graph(
    [
      node(
        "b",
        "binary_cross_entropy_with_logits",
        { input: ref("x"), target: ref("t"), weight: none, pos_weight: ref("pw"), reduction: text("mean") },
        [],
      ),
    ],
    "b",
  );
  g.inputs.push({ name: "t", meta: f32(X), value: null }, { name: "pw", meta: f32([32]), value: null });
  const plan = planGraph(g);
  assert.deepEqual(plan.regions.map(regionNodes), [["b"]], JSON.stringify(plan.kept));
});

test("multilabel_soft_margin_loss reduces with reduction='mean'; its 'none' is per row, so never elementwise", () => {
  const text = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const loss = (reduction: string) => {
    const g = graph(
      [
        node(
          "l",
          "multilabel_soft_margin_loss",
          { input: ref("x"), target: ref("t"), weight: none, reduction: text(reduction) },
          reduction === "none" ? [8] : [],
        ),
      ],
      "l",
    );
    g.inputs = [
      { name: "x", meta: f32([8, 80]), value: null },
      { name: "t", meta: f32([8, 80]), value: null },
    ];
    return planGraph(g);
  };
  assert.deepEqual(loss("mean").regions.map(regionNodes), [["l"]]);
  assert.equal(loss("none").regions.length, 0);
  assert.equal(loss("sum").regions.length, 0);
});

test("a reduction's epilogue takes a number another node computed (`/ x.shape[0]`): a runtime scalar", () => {
  const size: GraphNode = {
    ...node("n", "size", { input: ref("x"), dim: num(0) }, []),
    out: { t: "value", pytype: "int" },
  };
  const g = graph(
    [
      size,
      node("s", "sum", { input: ref("x"), dim: none, keepdim: bool(false), dtype: none }, []),
      node("d", "div", { input: ref("s"), other: ref("n"), rounding_mode: none }, []),
    ],
    "d",
  );
  assert.deepEqual(planGraph(g).regions.map(regionNodes), [["s", "d"]]);
});

test("a softmax whose dim is a module attribute (dim=self.dim) normalises that dim, as a literal one does", () => {
  for (const op of ["softmax", "log_softmax"]) {
    for (const dim of [1, -1, 0]) {
      const literal = graph([node("sm", op, { input: ref("x"), dim: num(dim) }, X)], "sm");
      const attr = graph([node("sm", op, { input: ref("x"), dim: num(dim, "dim") }, X)], "sm");
      const dims = (g: Graph) => normDims(g.nodes[0] as GraphNode, new GraphView(g));
      assert.deepEqual(dims(attr), dims(literal), `${op}(dim=self.dim) with self.dim = ${dim}`);
      assert.deepEqual(dims(literal), [dim < 0 ? dim + X.length : dim]);
    }
  }
});

test("a conv-anchored normalisation whose epilogue reads the conv's output (gn(y) + y * 0.5) reads the held value", () => {
  const g = graph(
    [
      convModule(),
      node("gn", "group_norm", { input: ref("conv"), num_groups: num(4), eps: num(1e-5) }, X),
      node("half", "mul", { input: ref("conv"), other: num(0.5) }, X),
      node("sum", "add", { input: ref("gn"), other: ref("half"), alpha: num(1) }, X),
    ],
    "sum",
    { "conv.weight": [16, 16, 3, 3], "conv.bias": [16] },
  );
  g.modules.conv = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  const region = plan.regions[0];
  assert.ok(region?.anchor === "conv" && region.epilogue.includes("half"));
  const code = generateRegion(new GraphView(g), region, (id) => (id === "x" ? "x" : `v_${id}`));
  // the fast path has no v_conv to read (the anchor is kf_anchor): the apply functor uses the held value
  assert.doesNotMatch(
    code.method
      .split("\n")
      .filter((l) => l.includes("ins = "))
      .join("\n"),
    /v_conv/,
  );
  assert.match(code.cuda, /const float t_half = \(v\) \* \(0\.5f\);/);
});

test("a normalisation reading a conv through a prologue, and the conv itself after (inorm(y * 2) - y), does not anchor it", () => {
  // Anchored, the apply pass would reload the conv and its bias beside the held row (76 bytes of spills).
  const g = graph(
    [
      convModule(),
      node("twice", "mul", { input: ref("conv"), other: num(2) }, X),
      node("inorm", "instance_norm", { input: ref("twice"), eps: num(1e-5) }, X),
      node("diff", "sub", { input: ref("inorm"), other: ref("conv"), alpha: num(1) }, X),
    ],
    "diff",
    { "conv.weight": [16, 16, 3, 3], "conv.bias": [16] },
  );
  g.modules.conv = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
  const plan = planGraph(g);
  const region = plan.regions.find((r) => r.seed === "inorm");
  assert.ok(region && !region.anchor && region.prologue.includes("twice"), JSON.stringify(region));
  assert.ok(
    plan.regions.some((r) => r.rule === LAYOUT_RULE && r.anchor === "conv"),
    "the conv runs in a layout region",
  );
  const code = generateRegion(new GraphView(g), region, (id) => (id === "x" ? "x" : `v_${id}`));
  assert.match(
    code.method,
    /ins = \(v_conv,\)/,
    "the conv's output, bound in forward, is the region's one operand",
  );
});

test("a loss's every operand takes a prologue (kl_div(lp, lq.exp()), mse_loss(tanh(x), sigmoid(t)))", () => {
  const text = (value: string): Arg => ({ t: "const", pytype: "str", value });
  const lossOf = (op: string, target: GraphNode, reduction = "batchmean") => {
    const input = node("a", "tanh", { input: ref("x") }, X);
    const loss = node("l", op, { input: ref("a"), target: ref(target.id), reduction: text(reduction) }, []);
    const g = graph([input, target, loss], "l");
    g.inputs.push({ name: "t", meta: f32(X), value: null });
    return planGraph(g);
  };
  const kl = lossOf("kl_div", node("e", "exp", { input: ref("t") }, X));
  assert.deepEqual(kl.regions.map(regionNodes), [["a", "e", "l"]]);
  const mse = lossOf("mse_loss", node("s", "sigmoid", { input: ref("t") }, X), "mean");
  assert.deepEqual(mse.regions.map(regionNodes), [["a", "s", "l"]]);
  // a target read elsewhere too stays its own region
  const target = node("s", "sigmoid", { input: ref("t") }, X);
  const input = node("a", "tanh", { input: ref("x") }, X);
  const loss = node("l", "mse_loss", { input: ref("a"), target: ref("s"), reduction: text("mean") }, []);
  const sum = node("m", "add", { input: ref("l"), other: ref("s") }, X);
  const g = graph([input, target, loss, sum], "m");
  g.inputs.push({ name: "t", meta: f32(X), value: null });
  assert.ok(!planGraph(g).regions.some((r) => regionNodes(r).includes("s") && regionNodes(r).includes("l")));
});

test("nll_loss of a log_softmax over the class dim is the cross_entropy it spells; over another dim, or read twice, it is not", () => {
  const shape = [16, 10];
  const build = (lsmDim: number, readTwice = false, weight = false) => {
    const g = graph(
      [
        node("lsm", "log_softmax", { input: ref("x"), dim: num(lsmDim) }, shape),
        node(
          "nll",
          "nll_loss",
          {
            input: ref("lsm"),
            target: ref("t"),
            ignore_index: num(0),
            ...(weight ? { weight: param("w") } : {}),
          },
          [],
          { kind: "call_function", target: "torch.nn.functional.nll_loss" },
        ),
        ...(readTwice ? [node("probs", "exp", { input: ref("lsm") }, shape)] : []),
      ],
      "nll",
    );
    g.inputs = [
      { name: "x", meta: f32(shape), value: null },
      { name: "t", meta: { shape: [16], dtype: "int64", stride: [1] }, value: null },
    ];
    return g;
  };
  const folded = canonicalGraph(build(1));
  assert.deepEqual(
    folded.nodes.map((n) => `${n.id}:${n.op}`),
    ["nll:cross_entropy"],
  );
  assert.equal(folded.nodes[0]?.target, "torch.nn.functional.cross_entropy");
  assert.deepEqual(folded.nodes[0]?.args, [ref("x"), ref("t")]);
  assert.deepEqual(folded.nodes[0]?.kwargs.ignore_index, num(0));
  assert.deepEqual(
    planGraph(folded).regions.map((r) => regionNodes(r)),
    [["nll"]],
  );
  assert.deepEqual(
    canonicalGraph(build(-1)).nodes.map((n) => n.op),
    ["cross_entropy"],
    "dim -1 of (N, C) is dim 1",
  );
  // a weight: the pair ATen computes, as written
  assert.deepEqual(
    canonicalGraph(build(1, false, true)).nodes.map((n) => n.op),
    ["log_softmax", "nll_loss"],
  );
  assert.deepEqual(
    canonicalGraph(build(1, true)).nodes.map((n) => n.op),
    ["log_softmax", "nll_loss", "exp"],
    "read twice",
  );
  assert.deepEqual(
    canonicalGraph(build(0)).nodes.map((n) => n.op),
    ["log_softmax", "nll_loss"],
    "not the class dim",
  );
});

test("a pool takes the pointwise ops in front of it when they stream one full-size tensor and read only values constant over a window", () => {
  const P = [8, 16, 16, 16];
  const pool = (input: string) =>
    node("pool", "max_pool2d", { input: ref(input), kernel_size: ints(2), stride: ints(2) }, P);
  const planned = (nodes: GraphNode[], params: Record<string, number[]> = {}) => {
    const plan = planGraph(graph([...nodes, pool(nodes.at(-1)?.id ?? "x")], "pool", params));
    return plan.regions.find((r) => r.seed === "pool");
  };
  // swish written out reads the stream twice; a per-channel parameter and a number join it.
  const swish = planned(
    [
      node("scaled", "mul", { input: ref("x"), other: param("scale") }, X),
      node("sig", "sigmoid", { input: ref("scaled") }, X),
      node("swish", "mul", { input: ref("scaled"), other: ref("sig") }, X),
      node("shifted", "sub", { input: ref("swish"), other: num(0.5), alpha: num(1) }, X),
    ],
    { scale: [16, 1, 1] },
  );
  assert.deepEqual(swish?.prologue, ["scaled", "sig", "swish", "shifted"]);
  // A parameter varying along a spatial dim would differ between the taps of one window.
  const rows = planned(
    [
      node("added", "add", { input: ref("x"), other: param("rows"), alpha: num(1) }, X),
      node("act", "relu", { input: ref("added") }, X),
    ],
    { rows: [16, 32, 1] },
  );
  assert.deepEqual(rows?.prologue, ["act"], "only what follows it: the add is a region of its own");
  // Two full-size tensors added: two streams; the relu after them still joins. (`x * 2 + x` is one.)
  const residual = planned([
    node("skip", "no_rule_op", { input: ref("x") }, X),
    node("sum", "add", { input: ref("skip"), other: ref("x"), alpha: num(1) }, X),
    node("act", "relu", { input: ref("sum") }, X),
  ]);
  assert.deepEqual(residual?.prologue, ["act"]);
  const once = planned([
    node("twice", "mul", { input: ref("x"), other: num(2) }, X),
    node("sum", "add", { input: ref("twice"), other: ref("x"), alpha: num(1) }, X),
  ]);
  assert.deepEqual(once?.prologue, ["twice", "sum"]);
  // Ops after a region's output are its epilogue, once per element (a prologue runs them once per tap).
  const afterNorm = planGraph(
    graph(
      [
        node("soft", "softmax", { input: ref("x"), dim: num(1) }, X),
        node("act", "tanh", { input: ref("soft") }, X),
        pool("act"),
      ],
      "pool",
    ),
  );
  assert.deepEqual(afterNorm.regions.find((r) => r.seed === "pool")?.prologue, []);
  assert.deepEqual(afterNorm.regions.find((r) => r.seed === "soft")?.epilogue, ["act"]);
  // A full-size parameter is no stream the kernel walks.
  const full = planned([node("added", "add", { input: ref("x"), other: param("w"), alpha: num(1) }, X)], {
    w: X,
  });
  assert.deepEqual(full?.prologue, []);
});

test("a pool reading a conv through the ops in front of it takes it channels-last (kf_pool_cl), then in the reference's layout, then as the reference calls it", () => {
  const P = [8, 16, 16, 16];
  const g = graph(
    [
      convModule(),
      node("shifted", "sub", { input: ref("conv"), other: num(0.5), alpha: num(1) }, X),
      node("act", "hardswish", { input: ref("shifted") }, X),
      node("pool", "max_pool2d", { input: ref("act"), kernel_size: ints(2), stride: ints(2) }, P),
    ],
    "pool",
    { "conv.weight": [16, 16, 3, 3], "conv.bias": [16] },
  );
  g.modules.conv = { type: "torch.nn.modules.conv.Conv2d", training: true, hyper: {} };
  const plan = planGraph(g);
  const pooled = plan.regions.find((r) => r.seed === "pool");
  assert.deepEqual(pooled?.prologue, ["shifted", "act"]);
  assert.equal(pooled?.anchor, "conv");
  assert.equal(pooled?.anchorLayout, "channels_last");
  assert.equal(plan.regions.length, 1, "no layout region: the pool reads the conv's layout itself");
  const view = new GraphView(g);
  const cl = generateRegion(view, pooled as Region, (id) => `v_${id}`);
  assert.match(
    cl.cuda,
    /kf_launch_pool_cl<KF_POOL_MAX, 1, 2, 2, KfPro_r\d+, KfEpi_r\d+/,
    "unrolled for its 2x2 window",
  );
  assert.match(cl.method, /kf_anchor = _kf_conv_anchor\(self\.conv, v_x, "kf_r\d+_cl", True\)/);
  assert.match(cl.method, /kf_anchor\.contiguous\(memory_format=torch\.channels_last\)/);
  const native = relaxAnchors(plan, new Set([pooled?.id ?? ""])).regions[0];
  assert.equal(native?.anchorLayout, "native");
  const code = generateRegion(view, native as Region, (id) => `v_${id}`);
  assert.match(code.cuda, /const float t_conv = tap \+ x\[0\];/, "the bias, per channel, at every tap");
  assert.match(code.cuda, /kf_launch_pool_fixed<KF_POOL_MAX, 1, 2, 2, 2, KfPro_r\d+, KfEpi_r\d+/);
  assert.match(code.method, /kf_anchor = _kf_conv_anchor\(self\.conv, v_x, None, True\)/);
  const plain = relaxAnchors({ regions: [native as Region], kept: [] }, new Set([native?.id ?? ""]))
    .regions[0];
  assert.equal(plain?.anchor, undefined);
  assert.deepEqual(
    plain?.prologue,
    ["shifted", "act"],
    "the conv's output, made as the reference makes it, is the stream",
  );
});

test("a reduction broadcast back into a pointwise op that reads its rows is one normalisation; misaligned, read twice or of other rows it is not", () => {
  const S = [8, 16, 32, 1];
  const plan = (nodes: GraphNode[], out: string) => {
    const g = canonicalGraph(graph(nodes, out));
    return { g, regions: planGraph(g).regions.map((r) => `${r.kind}: ${regionNodes(r).join(" ")}`) };
  };
  // keepdim: the mean becomes the node, the subtract and the relu its apply; PyTorch runs the written mean
  const centred = plan(
    [
      node("m", "mean", { input: ref("x"), dim: ints(-1), keepdim: bool(true), dtype: none }, S),
      node("d", "sub", { input: ref("x"), other: ref("m"), alpha: num(1) }, X),
      node("out", "relu", { input: ref("d") }, X),
    ],
    "out",
  );
  const m = centred.g.nodes.find((n) => n.id === "m");
  assert.equal(m?.op, "reduce_broadcast_sum");
  assert.deepEqual(m?.fn?.dims, ints(3));
  assert.deepEqual(
    m?.written?.map((n) => n.op),
    ["mean"],
  );
  assert.deepEqual(normDims(m as GraphNode, new GraphView(centred.g)), [3]);
  assert.deepEqual(centred.regions, ["normalize: m d out"]);
  // keepdim=False read back through unsqueeze after an op of the statistic and a number: the op moves after the node
  const viewed = plan(
    [
      node("s", "sum", { input: ref("x"), dim: ints(1), keepdim: bool(false), dtype: none }, [8, 32, 32]),
      node("q", "div", { input: ref("s"), other: num(16) }, [8, 32, 32]),
      node("u", "unsqueeze", { input: ref("q"), dim: num(1) }, [8, 1, 32, 32]),
      node("out", "sub", { input: ref("x"), other: ref("u"), alpha: num(1) }, X),
    ],
    "out",
  );
  assert.deepEqual(
    viewed.g.nodes.map((n) => `${n.id}:${n.op}`),
    ["u:reduce_broadcast_sum", "q:div", "out:sub"],
  );
  assert.deepEqual(viewed.g.nodes[1]?.fn?.input, ref("u"), "the divide reads the node");
  assert.deepEqual(viewed.g.nodes[2]?.fn?.other, ref("q"), "the subtract reads the divide");
  assert.deepEqual(
    viewed.g.nodes[0]?.written?.map((n) => `${n.op}(${JSON.stringify(n.fn?.input)})`),
    ['sum({"t":"node","id":"x"})', 'unsqueeze({"t":"node","id":"s"})'],
    "PyTorch runs the sum and its view, the divide after them",
  );
  assert.deepEqual(viewed.regions, ["normalize: u q out"]);
  // a statistic that only a reduction's prologue reads joins that reduction (exp(x - amax) summed)
  const summed = plan(
    [
      node("mx", "amax", { input: ref("x"), dim: ints(-1), keepdim: bool(true) }, S),
      node("d", "sub", { input: ref("x"), other: ref("mx"), alpha: num(1) }, X),
      node("e", "exp", { input: ref("d") }, X),
      node("out", "sum", { input: ref("e"), dim: ints(-1), keepdim: bool(false), dtype: none }, [8, 16, 32]),
    ],
    "out",
  );
  assert.deepEqual(summed.regions, ["reduce: mx d e out"]);
  // must not: keepdim=False over the last dim of a square tensor broadcasts along the other dim
  const square = graph(
    [
      node("m", "mean", { input: ref("x"), dim: ints(1), keepdim: bool(false), dtype: none }, [9]),
      node("out", "add", { input: ref("x"), other: ref("m"), alpha: num(1) }, [9, 9]),
    ],
    "out",
  );
  square.inputs = [{ name: "x", meta: f32([9, 9]), value: null }];
  assert.deepEqual(
    canonicalGraph(square).nodes.map((n) => n.op),
    ["mean", "add"],
  );
  // must not: the statistic read twice, or read with rows it was not taken of, or taken with a dtype
  const twice = plan(
    [
      node("m", "mean", { input: ref("x"), dim: ints(-1), keepdim: bool(true), dtype: none }, S),
      node("d", "sub", { input: ref("x"), other: ref("m"), alpha: num(1) }, X),
      node("n", "mul", { input: ref("m"), other: num(2) }, S),
      node("out", "add", { input: ref("d"), other: ref("n"), alpha: num(1) }, X),
    ],
    "out",
  );
  assert.ok(!twice.g.nodes.some((n) => n.op.startsWith("reduce_broadcast_")), "read twice");
  const other = plan(
    [
      node("m", "mean", { input: ref("x"), dim: ints(-1), keepdim: bool(true), dtype: none }, S),
      node("out", "sub", { input: param("w"), other: ref("m"), alpha: num(1) }, X),
    ],
    "out",
  );
  assert.ok(!other.g.nodes.some((n) => n.op.startsWith("reduce_broadcast_")), "another tensor's rows");
  const typed = plan(
    [
      node(
        "m",
        "mean",
        {
          input: ref("x"),
          dim: ints(-1),
          keepdim: bool(true),
          dtype: { t: "const", pytype: "dtype", value: "float32" },
        },
        S,
      ),
      node("out", "sub", { input: ref("x"), other: ref("m"), alpha: num(1) }, X),
    ],
    "out",
  );
  assert.ok(!typed.g.nodes.some((n) => n.op.startsWith("reduce_broadcast_")), "dtype=");
});

test("many rows longer than the held rows stay a reduction and a pointwise region; few long rows fold", () => {
  const divided = (shape: number[], dims: number[]) => {
    const kept = shape.map((n, d) => (dims.includes(d) ? 1 : n));
    const g = graph(
      [
        node("n", "sum", { input: ref("x"), dim: ints(...dims), keepdim: bool(true), dtype: none }, kept),
        node("out", "div", { input: ref("x"), other: ref("n") }, shape),
      ],
      "out",
    );
    g.inputs = [{ name: "x", meta: f32(shape), value: null }];
    return canonicalGraph(g).nodes.map((n) => n.op);
  };
  // 8192 rows of 16385 (l2_normalize_rows): the folded region lost to PyTorch's two kernels, the two regions won
  assert.deepEqual(divided([8192, 16385], [1]), ["sum", "div"]);
  // rows the normalize kernels hold (16384), or few long rows (the split statistics): one normalisation
  assert.deepEqual(divided([8192, 16384], [1]), ["reduce_broadcast_sum", "div"]);
  assert.deepEqual(divided([64, 100000], [1]), ["reduce_broadcast_sum", "div"]);
  // not rows: a long reduction over the leading dim (columns) folds whatever its length
  assert.deepEqual(divided([20000, 512], [0]), ["reduce_broadcast_sum", "div"]);
});

test("a reduction over size-1 dims it keeps is the pointwise identity it is (x + 0, x * 1) and joins the reduction before it", () => {
  // KernelBench level 2's `mean(dim=1, keepdim=True)` then `logsumexp(dim=1, keepdim=True)` then GELU
  const R = [8, 1, 32, 32];
  const chain = (second: GraphNode) =>
    canonicalGraph(
      graph(
        [
          node("m", "mean", { input: ref("x"), dim: ints(1), keepdim: bool(true), dtype: none }, R),
          second,
          node("g", "gelu", { input: ref("l"), approximate: { t: "const", pytype: "str", value: "none" } }, [
            ...(second.out.t === "tensor" ? second.out.meta.shape : []),
          ]),
        ],
        "g",
      ),
    );
  const lse = (dim: Arg, keepdim: boolean, shape: number[]) =>
    node("l", "logsumexp", { input: ref("m"), dim, keepdim: bool(keepdim) }, shape);
  const kept = chain(lse(ints(-3), true, R));
  const l = kept.nodes.find((n) => n.id === "l");
  assert.equal(l?.op, "add");
  assert.deepEqual(l?.fn?.other, { t: "const", pytype: "float", value: 0 });
  assert.deepEqual(planGraph(kept).regions.map(regionNodes), [["m", "l", "g"]]);
  const amax = canonicalGraph(
    graph([node("l", "amax", { input: ref("x"), dim: ints(1), keepdim: bool(true) }, [8, 1, 32, 32])], "l"),
  );
  assert.equal(amax.nodes[0]?.op, "amax", "a dim of size 16 is reduced");
  // dropped dims change the shape; a model attribute's dim may change after capture
  assert.equal(chain(lse(ints(1), false, [8, 32, 32])).nodes[1]?.op, "logsumexp");
  assert.equal(chain(lse(num(1, "dim"), true, R)).nodes[1]?.op, "logsumexp");
  // a size-1 dim of a view (or of a graph input) may be wider at other input sizes, which the forward serves
  const viewed = canonicalGraph(
    graph(
      [
        node("v", "view", { input: ref("x"), size: ints(8, 1, -1) }, [8, 1, 16384]),
        node("s", "sum", { input: ref("v"), dim: ints(1), keepdim: bool(true), dtype: none }, [8, 1, 16384]),
      ],
      "s",
    ),
  );
  assert.equal(viewed.nodes[1]?.op, "sum");
  const prod = canonicalGraph(
    graph(
      [
        node("m", "amax", { input: ref("x"), dim: ints(1), keepdim: bool(true) }, R),
        node("p", "prod", { input: ref("m"), dim: num(1), keepdim: bool(true), dtype: none }, R),
      ],
      "p",
    ),
  );
  assert.equal(prod.nodes[1]?.op, "mul", "a product of one element is x * 1 (it keeps -0)");
  // through the values of a (values, indices) reduction that kept the dim (KernelBench level 2's 18)
  const pair = { t: "tuple" as const, items: [f32(R), { ...f32(R), dtype: "int64" }] };
  const values = canonicalGraph(
    graph(
      [
        node("mx", "max_dim", { input: ref("x"), dim: num(1), keepdim: bool(true) }, R, { out: pair }),
        node("v", "getitem", { input: ref("mx"), index: num(0) }, R),
        node("m", "mean", { input: ref("v"), dim: ints(1), keepdim: bool(true), dtype: none }, R),
      ],
      "m",
    ),
  );
  assert.equal(values.nodes[2]?.op, "add");
});

test("a written softmax (exp(x - max) / sum) is one softmax that keeps its written ops for PyTorch", () => {
  const R = [8, 16, 32, 1];
  const written = (sumDim: number, extraReader = false) =>
    canonicalGraph(
      graph(
        [
          node("m", "amax", { input: ref("x"), dim: ints(-1), keepdim: bool(true) }, R),
          node("c", "sub", { input: ref("x"), other: ref("m"), alpha: num(1) }, X),
          node("e", "exp", { input: ref("c") }, X),
          node("s", "sum", { input: ref("e"), dim: ints(sumDim), keepdim: bool(true), dtype: none }, R),
          node("d", "div", { input: ref("e"), other: ref("s"), rounding_mode: none }, X),
          ...(extraReader ? [node("t", "tanh", { input: ref("e") }, X)] : []),
          node("o", "mul", { input: ref("d"), other: num(2) }, X),
        ],
        "o",
      ),
    );
  const folded = written(3);
  const softmax = folded.nodes.find((n) => n.id === "d");
  assert.equal(softmax?.op, "softmax");
  assert.deepEqual(softmax?.fn?.dim, num(3));
  assert.deepEqual(
    softmax?.written?.map((n) => n.op),
    ["amax", "sub", "exp", "sum", "div"],
  );
  assert.deepEqual(planGraph(folded).regions.map(regionNodes), [["d", "o"]]);
  // e read outside the chain, or a sum over another dim than the max: no softmax
  assert.ok(written(3, true).nodes.some((n) => n.op === "exp"));
  assert.ok(written(1).nodes.every((n) => n.op !== "softmax"));
});

test("a gather of each row's target from a log_softmax is minus the row's cross entropy, and its mean one reduction after it", () => {
  // `-F.log_softmax(x, 1).gather(1, t.unsqueeze(1)).squeeze(1).mean()` over (N, C) scores
  const [N, C] = [64, 1000];
  const i64 = (shape: number[]) => ({ t: "tensor" as const, meta: { ...f32(shape), dtype: "int64" } });
  const g = graph(
    [
      node("scores", "view", { input: ref("x"), size: ints(N, C) }, [N, C]),
      node("t", "argmax", { input: ref("x"), dim: num(-1), keepdim: bool(false) }, [N], { out: i64([N]) }),
      node("lsm", "log_softmax", { input: ref("scores"), dim: num(1), dtype: none }, [N, C]),
      node("idx", "unsqueeze", { input: ref("t"), dim: num(1) }, [N, 1], { out: i64([N, 1]) }),
      node("picked", "gather", { input: ref("lsm"), dim: num(1), index: ref("idx") }, [N, 1]),
      node("sq", "squeeze", { input: ref("picked"), dim: num(1) }, [N]),
      node("m", "mean", { input: ref("sq"), dim: none, keepdim: bool(false), dtype: none }, []),
      node("loss", "neg", { input: ref("m") }, []),
    ],
    "loss",
  );
  const rewritten = canonicalGraph(g);
  const ops = rewritten.nodes.map((n) => n.op);
  assert.ok(!ops.includes("gather") && !ops.includes("log_softmax"), ops.join());
  const ce = rewritten.nodes.find((n) => n.op === "cross_entropy");
  assert.deepEqual(ce?.fn?.reduction, { t: "const", pytype: "str", value: "none" });
  assert.deepEqual(ce?.fn?.target, ref("t"));
  const plan = planGraph(rewritten);
  const kinds = plan.regions.map((r) =>
    regionNodes(r).map((id) => rewritten.nodes.find((n) => n.id === id)?.op),
  );
  // the negation sinks below the squeeze into the mean's prologue
  assert.deepEqual(kinds.slice(-2), [["cross_entropy"], ["neg", "mean", "neg"]]);
  // the log-probabilities read by anything else stay a log_softmax and a gather
  const twice = canonicalGraph({
    ...g,
    nodes: [...g.nodes, node("e", "exp", { input: ref("lsm") }, [N, C])],
    output: ref("e"),
  });
  assert.ok(twice.nodes.some((n) => n.op === "gather"));
});

test("cosine_embedding_loss is spelled out as ATen computes it: three row sums, then one reduction of the hinge", () => {
  const [N, D] = [128, 128];
  const i64 = (shape: number[]) => ({ t: "tensor" as const, meta: { ...f32(shape), dtype: "int64" } });
  const loss = (reduction: string, rank2 = true) =>
    canonicalGraph(
      graph(
        [
          node("a", "view", { input: ref("x"), size: ints(N, D) }, [N, D]),
          node("b", "mul", { input: ref("a"), other: num(2) }, [N, D]),
          node("t", "argmax", { input: ref("a"), dim: num(1), keepdim: bool(false) }, [N], { out: i64([N]) }),
          node(
            "l",
            "cosine_embedding_loss",
            {
              input1: rank2 ? ref("a") : ref("x"),
              input2: rank2 ? ref("b") : ref("x"),
              target: ref("t"),
              margin: num(0.25),
              reduction: { t: "const", pytype: "str", value: reduction },
            },
            reduction === "none" ? [N] : [],
          ),
        ],
        "l",
      ),
    );
  const mean = loss("mean");
  assert.equal(mean.nodes.filter((n) => n.op === "sum").length, 3);
  assert.equal(mean.nodes.at(-1)?.id, "l");
  assert.equal(mean.nodes.at(-1)?.op, "mean");
  const regions = planGraph(mean).regions.map((r) =>
    regionNodes(r).map((id) => mean.nodes.find((n) => n.id === id)?.op),
  );
  assert.equal(regions.filter((ops) => ops.join() === "mul,sum").length, 3, JSON.stringify(regions));
  assert.ok(regions.some((ops) => ops.at(-1) === "mean" && ops.includes("where") && ops.includes("sqrt")));
  assert.equal(loss("none").nodes.at(-1)?.op, "add");
  assert.ok(
    loss("mean", false).nodes.some((n) => n.op === "cosine_embedding_loss"),
    "4-d inputs stay PyTorch's",
  );
});

test("average pools in a row over tiling windows are one pool that keeps the written pools for PyTorch", () => {
  const avg = (id: string, input: string, shape: number[], extra: Record<string, Arg> = {}) =>
    node(
      id,
      "avg_pool2d",
      { input: ref(input), kernel_size: ints(2), stride: none, padding: num(0), ...extra },
      shape,
    );
  const composed = canonicalGraph(
    graph([avg("p1", "x", [8, 16, 16, 16]), avg("p2", "p1", [8, 16, 8, 8])], "p2"),
  );
  assert.equal(composed.nodes.length, 1);
  const pool = composed.nodes[0];
  assert.deepEqual(pool?.fn?.kernel_size, ints(4, 4));
  assert.deepEqual(
    pool?.written?.map((n) => n.id),
    ["p1", "p2"],
  );
  const divisor = { divisor_override: num(3) };
  const kept = canonicalGraph(
    graph([avg("p1", "x", [8, 16, 16, 16], divisor), avg("p2", "p1", [8, 16, 8, 8])], "p2"),
  );
  assert.equal(kept.nodes.length, 2, "a divisor of its own is no mean of the window");
});

test("an arithmetic op of a reshaped value and an operand along the kept dims moves before the reshape into its region", () => {
  // `softmax(x.view(B, C, -1), -1).view(B, C, H, W) * scale` with a (1, C, 1, 1) scale (KernelBench L2 38)
  const flat = [8, 16, 1024];
  const chain = (scale: number[]) =>
    canonicalGraph(
      graph(
        [
          node("flat", "view", { input: ref("x"), size: ints(8, 16, -1) }, flat),
          node("sm", "softmax", { input: ref("flat"), dim: num(-1), dtype: none }, flat),
          node("back", "view", { input: ref("sm"), size: ints(8, 16, 32, 32) }, X),
          node("out", "mul", { input: ref("back"), other: param("scale") }, X),
        ],
        "out",
        { scale },
      ),
    );
  const moved = chain([1, 16, 1, 1]);
  const out = moved.nodes.find((n) => n.id === "out");
  assert.equal(out?.op, "view", "the reshape follows the op, under its id");
  const operand = moved.nodes.find((n) => n.op === "reshape");
  assert.deepEqual(operand?.fn?.shape, ints(1, 16, 1));
  assert.deepEqual(planGraph(moved).regions.map(regionNodes), [["sm", "out_unreshaped"]]);
  // an operand varying along the merged dims stays after the reshape
  assert.equal(chain([1, 1, 32, 32]).nodes.find((n) => n.id === "out")?.op, "mul");
});
