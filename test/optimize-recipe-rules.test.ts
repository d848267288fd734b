// Golden tests of the recipe rules (plan/recipe-rules.ts): which chains each hand-written recipe must take
// and which it must leave, on hand-built graphs.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Arg, Graph, GraphNode, TensorMeta } from "../src/optimize/graph.ts";
import { GraphView } from "../src/optimize/plan/graph-view.ts";
import { planGraph, regionNodes } from "../src/optimize/plan/planner.ts";
import { matchRecipe, RECIPE_RULES } from "../src/optimize/plan/recipe-rules.ts";

function meta(shape: number[], dtype = "float32"): TensorMeta {
  const stride = shape.map(() => 1);
  for (let i = shape.length - 2; i >= 0; i--) stride[i] = (stride[i + 1] ?? 1) * (shape[i + 1] ?? 1);
  return { shape, dtype, stride };
}
const ref = (id: string): Arg => ({ t: "node", id });
const param = (path: string): Arg => ({ t: "param", path });
const none: Arg = { t: "const", pytype: "none", value: null };
const num = (value: number): Arg => ({
  t: "const",
  pytype: Number.isInteger(value) ? "int" : "float",
  value,
});
const bool = (value: boolean): Arg => ({ t: "const", pytype: "bool", value });

function node(
  id: string,
  op: string,
  fn: Record<string, Arg>,
  out: TensorMeta,
  extra: Partial<GraphNode> = {},
) {
  return {
    id,
    kind: "call_function",
    target: `torch.${op}`,
    args: Object.values(fn).filter((a) => a.t === "node"),
    kwargs: {},
    op,
    fn,
    out: { t: "tensor", meta: out },
    modeDependent: false,
    rng: false,
    inplace: false,
    ...extra,
  } satisfies GraphNode;
}

function graph(
  inputs: Record<string, TensorMeta>,
  nodes: GraphNode[],
  output: Arg,
  params: Record<string, TensorMeta> = {},
  modules: Graph["modules"] = {},
): Graph {
  return {
    captured: "fx",
    failure: null,
    torchVersion: "test",
    inputs: Object.entries(inputs).map(([name, m]) => ({ name, meta: m, value: null })),
    nodes,
    output,
    params: Object.fromEntries(
      Object.entries(params).map(([path, m]) => [
        path,
        { kind: "parameter" as const, meta: m, requiresGrad: true },
      ]),
    ),
    modules,
    scalarAttrs: {},
    source: { prelude: "", init: "", forward: "", methods: [], signature: "self, q, k, v" },
  };
}

// ---- attention -------------------------------------------------------------------------------------

function sdpaGraph(
  opts: { dtype?: string; shape?: number[]; kShape?: number[]; fn?: Record<string, Arg> } = {},
): Graph {
  const dtype = opts.dtype ?? "float16";
  const q = meta(opts.shape ?? [2, 4, 128, 512], dtype);
  const k = meta(opts.kShape ?? q.shape, dtype);
  const fn: Record<string, Arg> = {
    query: ref("q"),
    key: ref("k"),
    value: ref("v"),
    attn_mask: none,
    dropout_p: num(0.0),
    is_causal: bool(false),
    scale: none,
    enable_gqa: bool(false),
    ...opts.fn,
  };
  const out = meta([...q.shape.slice(0, 3), k.shape[3] ?? 0], dtype);
  return graph({ q, k, v: k }, [node("attn", "scaled_dot_product_attention", fn, out)], ref("attn"));
}

const attention = RECIPE_RULES.find((r) => r.name === "attention");

function attentionVerdict(g: Graph) {
  const view = new GraphView(g);
  assert.ok(attention);
  return matchRecipe(attention, view.node("attn"), view);
}

test("attention: fp16/bf16 rank-4 SDPA with a large head dim is one recipe region", () => {
  for (const dtype of ["float16", "bfloat16"]) {
    const plan = planGraph(sdpaGraph({ dtype, fn: { is_causal: bool(true), scale: num(0.05) } }));
    assert.equal(plan.regions.length, 1);
    const [region] = plan.regions;
    assert.equal(region?.kind, "recipe");
    assert.deepEqual(region?.recipe, { name: "attention", bind: { attention: "attn" } });
    assert.deepEqual(region && regionNodes(region), ["attn"]);
  }
  // Key length up to 1024, head dims up to 1024 (Q/K and V may differ), a missing optional argument.
  const wide = sdpaGraph({ shape: [1, 2, 7, 1024], kShape: [1, 2, 1024, 1024], fn: { enable_gqa: none } });
  assert.ok(attentionVerdict(wide) && !("why" in (attentionVerdict(wide) ?? {})));
  // Any key length: up to 16 query rows the decode kernel, above 1024 keys key chunks (causal too); enable_gqa with
  // K/V heads dividing the query heads.
  const taken = [
    sdpaGraph({ shape: [2, 4, 1, 512], kShape: [2, 4, 32768, 512] }),
    sdpaGraph({ shape: [2, 4, 16, 512], kShape: [2, 4, 4096, 512] }),
    sdpaGraph({ shape: [2, 4, 17, 512], kShape: [2, 4, 1025, 512] }),
    sdpaGraph({
      shape: [1, 16, 8192, 512],
      kShape: [1, 2, 8192, 512],
      fn: { enable_gqa: bool(true), is_causal: bool(true) },
    }),
    sdpaGraph({ shape: [2, 8, 128, 512], kShape: [2, 2, 128, 512], fn: { enable_gqa: bool(true) } }),
    sdpaGraph({ shape: [2, 8, 1, 1024], kShape: [2, 1, 8192, 1024], fn: { enable_gqa: bool(true) } }),
    // float32: the split-fp16 kernel, up to 512 keys, more than 16 query rows.
    sdpaGraph({ dtype: "float32", shape: [32, 32, 512, 1024] }),
    sdpaGraph({
      dtype: "float32",
      shape: [2, 8, 17, 512],
      kShape: [2, 2, 512, 512],
      fn: { enable_gqa: bool(true) },
    }),
  ];
  for (const g of taken) {
    const verdict = attentionVerdict(g);
    assert.ok(verdict && !("why" in verdict), JSON.stringify(verdict));
  }
});

test("attention: what the recipe's host code does not take stays PyTorch's, with the reason", () => {
  const cases: [Graph, RegExp][] = [
    [sdpaGraph({ dtype: "float32", kShape: [2, 4, 513, 512] }), /float32 with 513 keys/],
    [
      sdpaGraph({ dtype: "float32", shape: [2, 4, 16, 512], kShape: [2, 4, 128, 512] }),
      /float32 with 16 query rows/,
    ],
    [sdpaGraph({ dtype: "float64" }), /float64 query/],
    [sdpaGraph({ shape: [2, 4, 128, 64] }), /head dim 64 <= 256/],
    [sdpaGraph({ shape: [2, 4, 128, 1032] }), /head dims 1032/],
    [sdpaGraph({ shape: [2, 4, 128, 300] }), /head dims 300/],
    [sdpaGraph({ kShape: [2, 1, 128, 512] }), /batch\/head dims broadcast/],
    [sdpaGraph({ fn: { attn_mask: ref("k") } }), /attn_mask/],
    [sdpaGraph({ fn: { dropout_p: num(0.1) } }), /dropout_p=0.1/],
    [
      sdpaGraph({ shape: [2, 6, 1, 512], kShape: [2, 4, 64, 512], fn: { enable_gqa: bool(true) } }),
      /broadcast/,
    ],
    [sdpaGraph({ fn: { is_causal: ref("q") } }), /is_causal/],
  ];
  for (const [g, why] of cases) {
    const verdict = attentionVerdict(g);
    assert.ok(verdict && "why" in verdict, `expected a refusal matching ${why}`);
    assert.match(verdict.why, why);
    const plan = planGraph(g);
    assert.equal(plan.regions.length, 0);
    assert.ok(plan.kept.some((k) => k.node === "attn" && why.test(k.reason)));
  }
  const threeD = sdpaGraph({ shape: [4, 128, 512] });
  assert.match((attentionVerdict(threeD) as { why: string }).why, /rank-3 query/);
});

// ---- linear -> batch norm -> scale -> softmax --------------------------------------------------------

const M = 16;
const K = 24;
const N = 40;
const BN1D = "torch.nn.modules.batchnorm.BatchNorm1d";

interface ChainOptions {
  dtype?: string;
  bnModule?: string | null;
  scale?: Arg;
  scaleShape?: number[];
  scaleFirst?: boolean;
  dim?: number;
  extraUser?: boolean;
  xShape?: number[];
}

function chainGraph(o: ChainOptions = {}): Graph {
  const dtype = o.dtype ?? "float32";
  const x = meta(o.xShape ?? [M, K], dtype);
  const y = meta([...x.shape.slice(0, -1), N], dtype);
  const bnFn: Record<string, Arg> = {
    input: ref("fc"),
    running_mean: param("norm.running_mean"),
    running_var: param("norm.running_var"),
    weight: param("norm.weight"),
    bias: param("norm.bias"),
    training: bool(true),
    momentum: num(0.1),
    eps: num(1e-5),
  };
  const module = o.bnModule === undefined ? BN1D : o.bnModule;
  const scale = o.scale ?? param("alpha");
  const mulFn = o.scaleFirst ? { input: scale, other: ref("norm") } : { input: ref("norm"), other: scale };
  const nodes = [
    node("fc", "linear", { input: ref("x"), weight: param("fc.weight"), bias: param("fc.bias") }, y, {
      kind: "call_module",
      target: "fc",
    }),
    node(
      "norm",
      "batch_norm",
      bnFn,
      y,
      module ? { kind: "call_module", target: "norm", modeDependent: true } : {},
    ),
    node("mul", "mul", mulFn, y),
    node("sm", "softmax", { input: ref("mul"), dim: num(o.dim ?? 1), dtype: none }, y),
  ];
  const output: Arg = o.extraUser ? { t: "list", kind: "tuple", items: [ref("sm"), ref("norm")] } : ref("sm");
  const dt = (shape: number[]) => meta(shape, dtype);
  return graph(
    { x },
    nodes,
    output,
    {
      "fc.weight": dt([N, K]),
      "fc.bias": dt([N]),
      "norm.weight": dt([N]),
      "norm.bias": dt([N]),
      "norm.running_mean": dt([N]),
      "norm.running_var": dt([N]),
      alpha: dt(o.scaleShape ?? [1]),
    },
    module ? { norm: { type: module, training: true, hyper: {} } } : {},
  );
}

test("linear_bn_softmax: the chain is one region whatever the names, scale side or scale form", () => {
  const variants: ChainOptions[] = [
    {},
    { scaleFirst: true },
    { scaleShape: [N] },
    { scaleShape: [1, N] },
    { scale: num(2.5) },
    { dim: -1 },
  ];
  for (const variant of variants) {
    const plan = planGraph(chainGraph(variant));
    assert.equal(plan.regions.length, 1, JSON.stringify(variant));
    const [region] = plan.regions;
    assert.equal(region?.kind, "recipe");
    assert.equal(region?.recipe?.name, "linear_bn_softmax");
    assert.deepEqual(region?.recipe?.bind, { linear: "fc", bn: "norm", scale: "mul", softmax: "sm" });
    assert.deepEqual(region && regionNodes(region), ["fc", "norm", "mul", "sm"]);
    assert.equal(region?.output, "sm");
  }
});

test("linear_bn_softmax: chains the recipe does not compute are left to the generated rules", () => {
  const refused: [ChainOptions, RegExp][] = [
    [{ dtype: "float16" }, /float16 input/],
    [{ bnModule: null }, /not a BatchNorm1d module call/],
    [{ bnModule: "torch.nn.modules.batchnorm.BatchNorm2d" }, /not a BatchNorm1d module call/],
    [{ dim: 0 }, /dim=0/],
    [{ scaleShape: [2, N] }, /scale of shape \[2, 40\]/],
    [{ scaleShape: [N, 1] }, /scale of shape \[40, 1\]/],
    [{ xShape: [2, M, K] }, /rank-3 input/],
  ];
  for (const [variant, why] of refused) {
    const plan = planGraph(chainGraph(variant));
    assert.ok(!plan.regions.some((r) => r.kind === "recipe"), JSON.stringify(variant));
    assert.ok(
      plan.kept.some((k) => k.node === "fc" && why.test(k.reason)),
      `${JSON.stringify(variant)}: ${JSON.stringify(plan.kept)}`,
    );
  }
  // The BatchNorm output is also returned: it cannot vanish into the recipe. No chain, nothing to report;
  // the batch norm and the scaled softmax are generated regions instead.
  const shared = planGraph(chainGraph({ extraUser: true }));
  assert.ok(!shared.regions.some((r) => r.kind === "recipe"));
  assert.ok(!shared.kept.some((k) => /recipe/.test(k.reason)));
  assert.deepEqual(
    shared.regions.map((r) => r.kind),
    ["normalize", "normalize"],
  );
  // A softmax over the rows of some other producer is not this chain.
  const g = chainGraph();
  const view = new GraphView(g);
  const rule = RECIPE_RULES.find((r) => r.name === "linear_bn_softmax");
  assert.ok(rule);
  assert.equal(matchRecipe(rule, view.node("norm"), view), null);
  assert.equal(matchRecipe(rule, view.node("sm"), view), null);
});

// ---- linear -> sum/mean over the output features (an algebraic rewrite) ------------------------------

function linearReduceGraph(op: string, dim: number, extraUser = false): Graph {
  const x = meta([32, 64]);
  const y = meta([32, 48]);
  const dims: Arg = { t: "list", kind: "list", items: [num(dim)] };
  const nodes = [
    node("lin", "linear", { input: ref("x"), weight: param("fc.weight"), bias: param("fc.bias") }, y),
    node(
      "red",
      op,
      { input: ref("lin"), dim: dims, keepdim: bool(true) },
      meta(dim === 0 ? [1, 48] : [32, 1]),
    ),
    ...(extraUser ? [node("other", "relu", { input: ref("lin") }, y)] : []),
  ];
  return graph({ x }, nodes, ref("red"), { "fc.weight": meta([48, 64]), "fc.bias": meta([48]) });
}

test("linear -> sum or mean over the output features becomes one rewrite region", () => {
  for (const op of ["sum", "mean"]) {
    for (const dim of [1, -1]) {
      const plan = planGraph(linearReduceGraph(op, dim));
      const region = plan.regions.find((r) => r.recipe?.name === "linear_reduce");
      assert.ok(region, `${op} over dim ${dim}`);
      assert.deepEqual(regionNodes(region), ["lin", "red"]);
    }
  }
});

test("linear -> sum over the batch dim, or a linear output read elsewhere, is not rewritten", () => {
  const batch = planGraph(linearReduceGraph("sum", 0));
  assert.ok(!batch.regions.some((r) => r.recipe?.name === "linear_reduce"));
  assert.match(batch.kept.find((k) => k.node === "lin")?.reason ?? "", /reduces dim 0/);
  const shared = planGraph(linearReduceGraph("sum", 1, true));
  assert.ok(!shared.regions.some((r) => r.recipe?.name === "linear_reduce"));
});

test("linear -> sum with a 1-D weight or a broadcast bias is not rewritten", () => {
  // F.linear(x, v) with v of shape (in,) is one dot product per row: the sum that follows reduces the rows.
  const dot = linearReduceGraph("sum", -1);
  const weight = dot.params["fc.weight"];
  assert.ok(weight);
  weight.meta = meta([64]);
  const lin = dot.nodes.find((n) => n.id === "lin");
  assert.ok(lin?.fn);
  delete lin.fn.bias;
  lin.out = { t: "tensor", meta: meta([32]) };
  const red = dot.nodes.find((n) => n.id === "red");
  assert.ok(red?.fn);
  red.fn.keepdim = bool(false);
  red.out = { t: "tensor", meta: meta([]) };
  const vector = planGraph(dot);
  assert.ok(!vector.regions.some((r) => r.recipe?.name === "linear_reduce"));
  assert.match(vector.kept.find((k) => k.node === "lin")?.reason ?? "", /rank-1 weight/);
  // A bias of shape (1,) broadcasts: each of the 48 outputs adds it, not once per row.
  for (const shape of [[1], [48, 1]]) {
    const shared = linearReduceGraph("sum", -1);
    const bias = shared.params["fc.bias"];
    assert.ok(bias);
    bias.meta = meta(shape);
    const plan = planGraph(shared);
    assert.ok(!plan.regions.some((r) => r.recipe?.name === "linear_reduce"), `bias ${shape}`);
  }
  // The per-feature bias of the usual layer is still the rewrite's.
  assert.ok(planGraph(linearReduceGraph("sum", -1)).regions.some((r) => r.recipe?.name === "linear_reduce"));
});

// ---- diag(a) @ B and B @ diag(a) (an algebraic rewrite) ------------------------------------------------

function diagMatmulGraph(op: "matmul" | "mm", left: boolean, b = meta([64, 32]), a = meta([64])): Graph {
  const [first, second] = op === "mm" ? ["input", "mat2"] : ["input", "other"];
  const n = a.shape[0] ?? 0;
  const fn = left ? { [first]: ref("d"), [second]: ref("b") } : { [first]: ref("b"), [second]: ref("d") };
  const out = left ? b : meta([...b.shape.slice(0, -1), n], b.dtype);
  return graph(
    { a, b },
    [
      node("d", "diag", { input: ref("a"), diagonal: num(0) }, meta([n, n], a.dtype)),
      node("mm", op, fn, out),
    ],
    ref("mm"),
  );
}

test("diag(a) @ B and B @ diag(a) become one rewrite region, by matmul and by mm", () => {
  for (const op of ["matmul", "mm"] as const) {
    for (const left of [true, false]) {
      const b = left ? meta([64, 32]) : meta([32, 64]);
      const plan = planGraph(diagMatmulGraph(op, left, b));
      const region = plan.regions.find((r) => r.recipe?.name === "diag_matmul");
      assert.ok(region, `${op} ${left ? "left" : "right"}`);
      assert.deepEqual(regionNodes(region), ["d", "mm"]);
    }
  }
  // a batch of matrices broadcasts against the diagonal under matmul
  assert.ok(planGraph(diagMatmulGraph("matmul", true, meta([4, 64, 32]))).regions.some((r) => r.recipe));
});

test("a diagonal that does not meet B's dim, a dtype mix or a 2-d diag input is not rewritten", () => {
  // diag(a) is 64x64; B (32, 64) on the left meets it by its columns only: the product is the reference's error
  const miss = planGraph(diagMatmulGraph("matmul", true, meta([32, 64])));
  assert.ok(!miss.regions.some((r) => r.recipe?.name === "diag_matmul"));
  assert.match(miss.kept.find((k) => k.node === "d")?.reason ?? "", /does not meet the diagonal/);
  const mixed = planGraph(diagMatmulGraph("matmul", true, meta([64, 32], "float16")));
  assert.ok(!mixed.regions.some((r) => r.recipe?.name === "diag_matmul"));
  // diag of a matrix extracts its diagonal: no product to rewrite
  const g = diagMatmulGraph("matmul", true, meta([64, 32]), meta([64, 64]));
  assert.ok(!planGraph(g).regions.some((r) => r.recipe?.name === "diag_matmul"));
});
