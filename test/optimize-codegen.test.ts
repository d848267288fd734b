// Golden tests of the Python the codegen writes for captured nodes and region methods.
import assert from "node:assert/strict";
import { test } from "node:test";
import { forwardCallArgs, pyStatement } from "../src/optimize/codegen/python-expr.ts";
import { generateRegion, methodNames } from "../src/optimize/codegen/region.ts";
import { shareIdenticalFunctors } from "../src/optimize/codegen/share-functors.ts";
import type { Arg, Graph, GraphNode } from "../src/optimize/graph.ts";
import { GraphView } from "../src/optimize/plan/graph-view.ts";
import { planGraph, type Region } from "../src/optimize/plan/planner.ts";
import { canonicalGraph } from "../src/optimize/plan/rewrites.ts";

const ref = (id: string): Arg => ({ t: "node", id });
const zero: Arg = { t: "const", pytype: "int", value: 0 };

function call(id: string, target: string, args: Arg[]): GraphNode {
  return {
    id,
    kind: "call_function",
    target,
    args,
    kwargs: {},
    op: "unknown",
    fn: null,
    out: { t: "value", pytype: "Tensor" },
    modeDependent: false,
    rng: false,
    inplace: false,
  };
}

const names = (id: string) => (id === "x" ? "x" : `v_${id}`);

test("comparisons are expressions, augmented assignments rebind: `!=` and `<=` are not in-place ops", () => {
  for (const [target, op] of [
    ["operator.eq", "=="],
    ["operator.ne", "!="],
    ["operator.le", "<="],
    ["operator.ge", ">="],
    ["operator.gt", ">"],
  ])
    assert.equal(pyStatement(call("c", target as string, [ref("x"), zero]), names), `v_c = (x ${op} 0)`);
  assert.equal(pyStatement(call("a", "operator.iadd", [ref("y"), ref("x")]), names), "v_y += x\nv_a = v_y");
});

test("an operator function with no infix form (abs(x) is operator.abs) is reached through the file's own import", () => {
  assert.equal(pyStatement(call("a", "operator.abs", [ref("x")]), names), "v_a = _kf_operator.abs(x)");
  assert.equal(pyStatement(call("m", "math.sqrt", [ref("x")]), names), "v_m = math.sqrt(x)");
});

test("a region method renames forward inputs that clash with its own locals, and only those", () => {
  const inputs = ["x", "shape", "ins", "a_ins", "kf_anchor"];
  const inMethod = methodNames(inputs, (id) => (inputs.includes(id) ? id : `v_${id}`));
  assert.deepEqual(["x", "shape", "ins", "a_ins", "kf_anchor", "conv"].map(inMethod), [
    "x",
    "a_shape",
    "a_a_ins",
    "a_ins",
    "a_kf_anchor",
    "v_conv",
  ]);
});

test("forward's parameters pass on to the reference's forward in their kinds: keyword-only by keyword", () => {
  assert.deepEqual(forwardCallArgs("self, x, *, scale: float = 2.0"), ["x", "scale=scale"]);
  assert.deepEqual(forwardCallArgs("self, x, y=None, *rest, k: Tuple[int, int] = (1, 2), **extra"), [
    "x",
    "y",
    "*rest",
    "k=k",
    "**extra",
  ]);
  assert.deepEqual(forwardCallArgs("self, x, /, size: str = 'a,b'"), ["x", "size"]);
});

function typed(id: string, op: string, fn: Record<string, Arg>, dtype: string): GraphNode {
  return {
    ...call(id, `torch.${op}`, Object.values(fn)),
    op,
    fn,
    out: { t: "tensor", meta: { shape: [64, 128], dtype, stride: [128, 1] } },
  };
}

function castChain(last: string): Graph {
  const num = (value: number): Arg => ({ t: "const", pytype: "float", value });
  const dtype = (value: string): Arg => ({ t: "const", pytype: "dtype", value });
  return {
    captured: "fx",
    failure: null,
    torchVersion: "test",
    inputs: [{ name: "x", meta: { shape: [64, 128], dtype: "float32", stride: [128, 1] }, value: null }],
    nodes: [
      typed("h", "to", { input: ref("x"), dtype: dtype("float16") }, "float16"),
      typed("m", "mul", { input: ref("h"), other: num(3) }, "float16"),
      typed("a", "add", { input: ref("m"), other: num(1), alpha: num(1) }, "float16"),
      typed("f", "to", { input: ref("a"), dtype: dtype(last) }, last),
      typed("t", "tanh", { input: ref("f") }, last),
    ],
    output: ref("t"),
    params: {},
    modules: {},
    scalarAttrs: {},
    source: { prelude: "", init: "", forward: "", methods: [], signature: "self, x" },
  };
}

test("half-precision results that widen back to float32 in a region are rounded as PyTorch rounds them", () => {
  const cuda = (g: Graph) => {
    const plan = planGraph(g);
    assert.equal(plan.regions.length, 1);
    const region = plan.regions[0];
    assert.ok(region);
    return generateRegion(new GraphView(g), region, names).cuda;
  };
  const widened = cuda(castChain("float32"));
  assert.match(widened, /t_m = kf_round_f16\(/);
  assert.match(widened, /t_a = kf_round_f16\(/);
  // kept in half precision to the output: fp32 math, rounded once when stored
  const half = cuda(castChain("float16"));
  assert.doesNotMatch(half, /t_m = kf_round_f16|t_a = kf_round_f16/);
});

test("a softmax computing in float32 rounds its half-precision prologue; a half softmax is rounded before widening", () => {
  const int = (value: number): Arg => ({ t: "const", pytype: "int", value });
  const dtype = (value: string): Arg => ({ t: "const", pytype: "dtype", value });
  const cuda = (nodes: GraphNode[], out: string) => {
    const g = castChain("float32");
    g.inputs = [{ name: "x", meta: { shape: [64, 128], dtype: "float16", stride: [128, 1] }, value: null }];
    g.nodes = nodes;
    g.output = ref(out);
    const plan = planGraph(g);
    assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
    const region = plan.regions[0];
    assert.ok(region);
    return generateRegion(new GraphView(g), region, names).cuda;
  };
  const scaled = typed(
    "m",
    "mul",
    { input: ref("x"), other: { t: "const", pytype: "float", value: 3 } },
    "float16",
  );
  // log_softmax(x * 3, dtype=torch.float32): PyTorch rounds x * 3 to fp16, then casts it
  const widening = cuda(
    [
      scaled,
      typed("s", "log_softmax", { input: ref("m"), dim: int(-1), dtype: dtype("float32") }, "float32"),
    ],
    "s",
  );
  assert.match(widening, /t_m = kf_round_f16\(/);
  // softmax(x * 3).float() * 2: the fp16 softmax is stored, so rounded, before it widens
  const widened = cuda(
    [
      scaled,
      typed("s", "softmax", { input: ref("m"), dim: int(-1) }, "float16"),
      typed("f", "to", { input: ref("s"), dtype: dtype("float32") }, "float32"),
      typed("t", "mul", { input: ref("f"), other: { t: "const", pytype: "float", value: 2 } }, "float32"),
    ],
    "t",
  );
  assert.match(widened, /t_m = kf_round_f16\(/);
  assert.match(widened, /t_s = kf_round_f16\(/);
  // kept in half precision to the output: fp32 math, rounded once when stored
  const half = cuda([scaled, typed("s", "softmax", { input: ref("m"), dim: int(-1) }, "float16")], "s");
  assert.doesNotMatch(half, /kf_round_f16\(\(/);
});

test("a half-precision region whose stored value a later region widens rounds its intermediates as PyTorch", () => {
  const int = (value: number): Arg => ({ t: "const", pytype: "int", value });
  const dtype = (value: string): Arg => ({ t: "const", pytype: "dtype", value });
  const f = (value: number): Arg => ({ t: "const", pytype: "float", value });
  const no: Arg = { t: "const", pytype: "bool", value: false };
  const reduced = (id: string, fn: Record<string, Arg>): GraphNode => ({
    ...typed(id, "prod", fn, "float16"),
    out: { t: "tensor", meta: { shape: [64], dtype: "float16", stride: [1] } },
  });
  // y = x * 0.1 + 1 (fp16, read twice: its own region); y.prod(1, dtype=float32) and y.prod(1) read it
  const build = (widened: boolean) => {
    const g = castChain("float32");
    g.inputs = [{ name: "x", meta: { shape: [64, 128], dtype: "float16", stride: [128, 1] }, value: null }];
    g.nodes = [
      typed("m", "mul", { input: ref("x"), other: f(0.1) }, "float16"),
      typed("y", "add", { input: ref("m"), other: f(1), alpha: int(1) }, "float16"),
      reduced("p", {
        input: ref("y"),
        dim: int(1),
        keepdim: no,
        dtype: dtype(widened ? "float32" : "float16"),
      }),
      reduced("q", {
        input: ref("y"),
        dim: int(1),
        keepdim: no,
        dtype: { t: "const", pytype: "none", value: null },
      }),
    ];
    const p = g.nodes[2];
    if (p?.out.t === "tensor" && widened) p.out.meta.dtype = "float32";
    g.output = { t: "list", kind: "tuple", items: [ref("p"), ref("q")] };
    const view = new GraphView(g);
    const plan = planGraph(g);
    const region = plan.regions.find((r) => r.output === "y");
    assert.ok(region, JSON.stringify(plan.regions));
    return generateRegion(view, region, names).cuda;
  };
  // PyTorch stores x * 0.1 in fp16 before adding 1: visible once the product is taken in float32
  assert.match(build(true), /t_m = kf_round_f16\(/);
  // y's value stays in half precision to the outputs: fp32 math, rounded once when stored
  assert.doesNotMatch(build(false), /t_m = kf_round_f16\(/);
});

test("an int beyond 2^53 comes from capture as its digits and is written back exactly", () => {
  const end: Arg = { t: "const", pytype: "int", value: "9223372036854775807" };
  const step: Arg = { t: "const", pytype: "int", value: 7 };
  const slice = call("s", "torch.ops.aten.slice.Tensor", [ref("x"), zero, zero, end, step]);
  assert.equal(
    pyStatement(slice, names),
    "v_s = torch.ops.aten.slice.Tensor(x, 0, 0, 9223372036854775807, 7)",
  );
});

test("a Python number another node computed (1 / sqrt of a size) is a runtime scalar of the region", () => {
  // minGPT's `att * (1.0 / math.sqrt(k.size(-1)))`: the scale is no constant, yet a value the region reads.
  const g = castChain("float32");
  const size: GraphNode = { ...call("d", "size", [ref("x"), { t: "const", pytype: "int", value: -1 }]) };
  const sqrt: GraphNode = { ...call("s", "math.sqrt", [ref("d")]), out: { t: "value", pytype: "float" } };
  g.nodes = [
    { ...size, out: { t: "value", pytype: "int" } },
    sqrt,
    typed("m", "mul", { input: ref("x"), other: ref("s") }, "float32"),
    typed("t", "tanh", { input: ref("m") }, "float32"),
  ];
  g.output = ref("t");
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1);
  const region = plan.regions[0];
  assert.ok(region);
  const code = generateRegion(new GraphView(g), region, names);
  assert.match(code.cuda, /t_m = \(x\[0\]\) \* \(sc\.v\[0\]\)/);
  assert.match(code.method, /\[float\(v_s\)\]/);
});

test("a norm of order inf / -inf / 0 (vector_norm, pairwise_distance) is a reduction with max / min / a count", () => {
  const special = (s: "inf" | "-inf"): Arg => ({ t: "const", pytype: "float", value: null, special: s });
  const int = (value: number): Arg => ({ t: "const", pytype: "int", value });
  const dims: Arg = { t: "list", kind: "list", items: [int(1)] };
  const rowOut = (n: GraphNode): GraphNode => ({
    ...n,
    out: { t: "tensor", meta: { shape: [64], dtype: "float32", stride: [1] } },
  });
  const cuda = (node: GraphNode) => {
    const g = castChain("float32");
    g.inputs.push({ name: "y", meta: { shape: [64, 128], dtype: "float32", stride: [128, 1] }, value: null });
    g.nodes = [rowOut(node)];
    g.output = ref(node.id);
    const plan = planGraph(g);
    assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
    const region = plan.regions[0];
    assert.ok(region);
    return generateRegion(new GraphView(g), region, names).cuda;
  };
  const norm = (ord: Arg) => typed("n", "vector_norm", { input: ref("x"), ord, dim: dims }, "float32");
  assert.match(cuda(norm(special("inf"))), /kf_launch_reduce<KfPro_\w+, KfAccMax,/);
  assert.match(cuda(norm(special("inf"))), /fabsf\(/);
  assert.match(cuda(norm(special("-inf"))), /kf_launch_reduce<KfPro_\w+, KfAccMin,/);
  const zero = cuda(norm(int(0)));
  assert.match(zero, /kf_launch_reduce<KfPro_\w+, KfAccSum,/);
  assert.match(zero, /!= 0\.f \? 1\.f : 0\.f/);
  const pair = typed(
    "n",
    "pairwise_distance",
    { x1: ref("x"), x2: ref("y"), p: special("inf"), eps: { t: "const", pytype: "float", value: 1e-6 } },
    "float32",
  );
  assert.match(cuda(pair), /kf_launch_reduce<KfPro_\w+, KfAccMax,/);
});

test("a half-precision value a step op reads (round, floor, a comparison) is rounded as PyTorch stores it", () => {
  const cuda = (step: GraphNode) => {
    const g = castChain("float16");
    g.inputs = [{ name: "x", meta: { shape: [64, 128], dtype: "float16", stride: [128, 1] }, value: null }];
    const num = (value: number): Arg => ({ t: "const", pytype: "float", value });
    g.nodes = [
      typed("m", "mul", { input: ref("x"), other: num(3) }, "float16"),
      typed("a", "add", { input: ref("m"), other: num(0.5), alpha: num(1) }, "float16"),
      step,
      typed("o", "add", { input: ref("s"), other: num(1), alpha: num(1) }, "float16"),
    ];
    g.output = ref("o");
    const plan = planGraph(g);
    assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
    const region = plan.regions[0];
    assert.ok(region);
    return generateRegion(new GraphView(g), region, names).cuda;
  };
  const int = (value: number): Arg => ({ t: "const", pytype: "int", value });
  for (const step of [
    typed("s", "round", { input: ref("a"), decimals: int(1) }, "float16"),
    typed("s", "floor", { input: ref("a") }, "float16"),
    typed("s", "gt", { input: ref("a"), other: { t: "const", pytype: "float", value: 2 } }, "bool"),
  ]) {
    const code = cuda(step);
    assert.match(code, /t_m = kf_round_f16\(/, step.op);
    assert.match(code, /t_a = kf_round_f16\(/, step.op);
    assert.doesNotMatch(code, /t_s = kf_round_f16|t_o = kf_round_f16/, step.op);
  }
  // continuous all the way: fp32 math, rounded once when stored
  assert.doesNotMatch(cuda(typed("s", "tanh", { input: ref("a") }, "float16")), /kf_round_f16\(/);
});

test("a cast to a dtype read at run time (h.to(x.dtype), h.type_as(x)) fuses, guarded by that read", () => {
  const bf16 = { shape: [64, 128], dtype: "bfloat16", stride: [128, 1] };
  const build = (cast: GraphNode, extra: GraphNode[] = []) => {
    const g = castChain("float32");
    g.inputs = [{ name: "x", meta: bf16, value: null }];
    const dtype = (value: string): Arg => ({ t: "const", pytype: "dtype", value });
    g.nodes = [
      typed("f", "to", { input: ref("x"), dtype: dtype("float32") }, "float32"),
      typed("m", "mul", { input: ref("f"), other: { t: "const", pytype: "float", value: 3 } }, "float32"),
      ...extra,
      cast,
      typed("o", "tanh", { input: ref("c") }, "bfloat16"),
    ];
    g.output = ref("o");
    const canonical = canonicalGraph(g);
    const plan = planGraph(canonical);
    assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
    const region = plan.regions[0];
    assert.ok(region);
    return generateRegion(new GraphView(canonical), region, names).method;
  };
  const read: GraphNode = {
    ...call("dt", "builtins.getattr", [ref("x")]),
    op: "getattr",
    fn: { input: ref("x"), name: { t: "const", pytype: "str", value: "dtype" } },
    out: { t: "value", pytype: "dtype" },
  };
  const toRead = typed(
    "c",
    "to",
    { input: ref("m"), args: { t: "list", kind: "list", items: [ref("dt")] } },
    "bfloat16",
  );
  assert.match(build(toRead, [read]), /not in _KF_DISABLED and v_dt == torch\.bfloat16 and _kf_ready/);
  const typeAs = typed("c", "type_as", { input: ref("m"), other: ref("x") }, "bfloat16");
  assert.match(build(typeAs), /not in _KF_DISABLED and x\.dtype == torch\.bfloat16 and _kf_ready/);
});

test("a half-precision reduction's value is rounded before its epilogue, as PyTorch stores it (a sum past 65504 is inf)", () => {
  const g = castChain("float16");
  g.inputs = [{ name: "x", meta: { shape: [64, 128], dtype: "float16", stride: [128, 1] }, value: null }];
  const row = (n: GraphNode): GraphNode => ({
    ...n,
    out: { t: "tensor", meta: { shape: [64], dtype: "float16", stride: [1] } },
  });
  g.nodes = [
    row(
      typed(
        "s",
        "sum",
        {
          input: ref("x"),
          dim: { t: "list", kind: "list", items: [{ t: "const", pytype: "int", value: 1 }] },
          keepdim: { t: "const", pytype: "bool", value: false },
        },
        "float16",
      ),
    ),
    row(
      typed("d", "mul", { input: ref("s"), other: { t: "const", pytype: "float", value: 0.001 } }, "float16"),
    ),
  ];
  g.output = ref("d");
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  const region = plan.regions[0];
  assert.ok(region);
  const cuda = generateRegion(new GraphView(g), region, names).cuda;
  assert.match(cuda, /t_s = kf_round_f16\(r\.value\)/);
});

test("a normalisation's epilogue reading the normalised input (softmax(x) * x) reads the value the kernel holds", () => {
  const g = castChain("float32");
  g.nodes = [
    typed("s", "softmax", { input: ref("x"), dim: { t: "const", pytype: "int", value: -1 } }, "float32"),
    typed("m", "mul", { input: ref("s"), other: ref("x") }, "float32"),
  ];
  g.output = ref("m");
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  const region = plan.regions[0];
  assert.ok(region);
  const cuda = generateRegion(new GraphView(g), region, names).cuda;
  assert.match(cuda, /t_m = \(t_s\) \* \(v\)/);
  assert.doesNotMatch(cuda.slice(cuda.indexOf("struct KfApply")), /\* \(x\[0\]\)/);
});

test("an int argument a module attribute holds (dim=self.dim) is guarded at run time; a float one is read then", () => {
  const g = castChain("float32");
  const attrDim: Arg = { t: "const", pytype: "int", value: 1, attr: "dim" };
  const attrScale: Arg = { t: "const", pytype: "float", value: 0.5, attr: "block.scale" };
  g.nodes = [
    typed("m", "mul", { input: ref("x"), other: attrScale }, "float32"),
    typed("s", "softmax", { input: ref("m"), dim: attrDim }, "float32"),
  ];
  g.output = ref("s");
  const plan = planGraph(g);
  const region = plan.regions[0];
  assert.ok(region && plan.regions.length === 1, JSON.stringify(plan.kept));
  const code = generateRegion(new GraphView(g), region, names);
  // the kernel normalises the dim captured: another value of the attribute takes the reference's ops
  assert.match(code.method, /not in _KF_DISABLED and self\.dim == 1 and _kf_ready/);
  assert.doesNotMatch(code.method, /self\.block\.scale ==/);
  assert.match(code.method, /float\(self\.block\.scale\)/);
});

test("a pool whose window is read from the input's shape (avg_pool2d(x, x.size()[2:])) fuses, guarded by that read", () => {
  const int = (value: number): Arg => ({ t: "const", pytype: "int", value });
  const none: Arg = { t: "const", pytype: "none", value: null };
  const nchw = { shape: [8, 32, 14, 14], dtype: "float32", stride: [6272, 196, 14, 1] };
  const value = (id: string, op: string, fn: Record<string, Arg>, pytype: string): GraphNode => ({
    ...call(id, op, Object.values(fn)),
    op,
    fn,
    out: { t: "value", pytype },
  });
  const build = (kernel: Arg, reads: GraphNode[]) => {
    const g = castChain("float32");
    g.inputs = [{ name: "x", meta: nchw, value: null }];
    const pool: GraphNode = {
      ...call("p", "torch.nn.functional.avg_pool2d", [ref("x"), kernel]),
      op: "avg_pool2d",
      fn: {
        input: ref("x"),
        kernel_size: kernel,
        stride: none,
        padding: { t: "list", kind: "list", items: [int(0), int(0)] },
      },
      out: { t: "tensor", meta: { shape: [8, 32, 1, 1], dtype: "float32", stride: [32, 1, 1, 1] } },
    };
    g.nodes = [...reads, pool];
    g.output = ref("p");
    const plan = planGraph(g);
    assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
    const region = plan.regions[0];
    assert.ok(region);
    return generateRegion(new GraphView(g), region, names);
  };
  const size = value("s", "size", { input: ref("x"), dim: none }, "Size");
  const tail = value(
    "k",
    "getitem",
    { input: ref("s"), index: { t: "slice", start: int(2), stop: none, step: none } },
    "Size",
  );
  const sliced = build(ref("k"), [size, tail]);
  assert.match(sliced.method, /tuple\(v_k\) == \(14, 14\) and _kf_ready/);
  assert.match(sliced.method, /geo = \[1, 2, 0, 14, 14, 14, 14, /);
  // one size per dim: x.size(2), x.shape[-1]
  const h = value("h", "size", { input: ref("x"), dim: int(2) }, "int");
  const shape = value(
    "sh",
    "getattr",
    { input: ref("x"), name: { t: "const", pytype: "str", value: "shape" } },
    "Size",
  );
  const w = value("w", "getitem", { input: ref("sh"), index: int(-1) }, "int");
  const pair = build({ t: "list", kind: "tuple", items: [ref("h"), ref("w")] }, [h, shape, w]);
  assert.match(pair.method, /v_h == 14 and v_w == 14 and _kf_ready/);
  // a literal window needs no guard
  assert.doesNotMatch(build(int(2), []).method, /tuple\(|== 14/);
  // a stride computed from a size (x.size(-1) // 14) is that int, not the window the kernel would otherwise take
  const floorDiv = value(
    "fd",
    "div",
    { input: ref("w"), other: int(14), rounding_mode: { t: "const", pytype: "str", value: "floor" } },
    "int",
  );
  const strided = (stride: Arg, reads: GraphNode[]) => {
    const g = castChain("float32");
    g.inputs = [{ name: "x", meta: nchw, value: null }];
    const pool: GraphNode = {
      ...call("p", "torch.nn.functional.max_pool2d", [ref("x"), int(2), stride]),
      op: "max_pool2d",
      fn: { input: ref("x"), kernel_size: int(2), stride, padding: int(0), dilation: int(1) },
      out: { t: "tensor", meta: { shape: [8, 32, 13, 13], dtype: "float32", stride: [5408, 169, 13, 1] } },
    };
    g.nodes = [...reads, pool];
    g.output = ref("p");
    return g;
  };
  const byRead = strided(ref("fd"), [shape, w, floorDiv]);
  const region = planGraph(byRead).regions[0];
  assert.ok(region, "planned");
  const method = generateRegion(new GraphView(byRead), region, names).method;
  assert.match(method, /v_fd == 1 and _kf_ready/);
  assert.match(method, /geo = \[0, 2, 0, 2, 2, 1, 1, /);
  // a stride the planner cannot read (a forward argument) keeps PyTorch's call
  const unread = strided(ref("s"), []);
  unread.inputs.push({ name: "s", meta: null, value: null });
  assert.deepEqual(
    planGraph(unread).kept.map((k) => k.reason),
    ["stride is not constant"],
  );
});

test("a 0-d tensor forward makes on the host (torch.tensor(d), no device) is a runtime scalar of the region", () => {
  // On the GPU, a CPU tensor among the kernel's operands would send every call to the reference's ops.
  const build = (kwargs: Record<string, Arg>) => {
    const g = castChain("float32");
    const d: GraphNode = {
      ...call("t", "torch.tensor", [{ t: "const", pytype: "int", value: 128 }]),
      kwargs,
      op: "tensor",
      out: { t: "tensor", meta: { shape: [], dtype: "float32", stride: [] } },
    };
    const root = { ...typed("r", "rsqrt", { input: ref("t") }, "float32") };
    root.out = { t: "tensor", meta: { shape: [], dtype: "float32", stride: [] } };
    g.nodes = [d, root, typed("m", "mul", { input: ref("x"), other: ref("r") }, "float32")];
    g.output = ref("m");
    const plan = planGraph(g);
    assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
    const region = plan.regions[0];
    assert.ok(region);
    return generateRegion(new GraphView(g), region, names);
  };
  const host = build({});
  assert.match(host.method, /ins = \(x,\)/);
  assert.match(host.method, /\[float\(v_t\)\]/);
  assert.match(host.cuda, /sqrtf\(sc\.v\[0\]\)/);
  // made on a device, it is a tensor operand like any other
  const onDevice = build({ device: ref("dev") });
  assert.match(onDevice.method, /ins = \(v_t, x\)|ins = \(x, v_t\)/);
});

test("a reduction over a normalisation reads a prologue value the norm does not (one_hot.float() * log_softmax(x))", () => {
  const int = (value: number): Arg => ({ t: "const", pytype: "int", value });
  const none: Arg = { t: "const", pytype: "none", value: null };
  const g = castChain("float32");
  g.inputs = [
    { name: "x", meta: { shape: [64, 128], dtype: "float32", stride: [128, 1] }, value: null },
    { name: "y", meta: { shape: [64, 128], dtype: "int64", stride: [128, 1] }, value: null },
  ];
  const rowSum = typed(
    "s",
    "sum",
    { input: ref("m"), dim: int(-1), keepdim: { t: "const", pytype: "bool", value: false }, dtype: none },
    "float32",
  );
  rowSum.out = { t: "tensor", meta: { shape: [64], dtype: "float32", stride: [1] } };
  g.nodes = [
    typed(
      "c",
      "to",
      { input: ref("y"), dtype: { t: "const", pytype: "dtype", value: "float32" } },
      "float32",
    ),
    typed("l", "log_softmax", { input: ref("x"), dim: int(-1), dtype: none }, "float32"),
    typed("m", "mul", { input: ref("c"), other: ref("l") }, "float32"),
    rowSum,
  ];
  g.output = ref("s");
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  const region = plan.regions[0];
  assert.ok(region);
  const code = generateRegion(new GraphView(g), region, names);
  // the cast is computed in the kernel, not read as an operand the method never made
  assert.match(code.method, /ins = \(x, v_y\)\n/);
  // the statistics' launch reads x alone
  assert.match(code.method, /_stats\(list\(ins\[:1\]\)/);
});

test("a dim computed from shapes (softmax(x, dim=x.dim() - 1), sum(dim=x.ndim - 1)) is planned at its int, guarded", () => {
  const int = (value: number): Arg => ({ t: "const", pytype: "int", value });
  const none: Arg = { t: "const", pytype: "none", value: null };
  const value = (id: string, op: string, fn: Record<string, Arg>): GraphNode => ({
    ...call(id, op, Object.values(fn)),
    op,
    fn,
    out: { t: "value", pytype: "int" },
  });
  const build = (rank: GraphNode, seed: GraphNode) => {
    const g = castChain("float32");
    g.nodes = [rank, value("d", "sub", { input: ref("r"), other: int(1), alpha: int(1) }), seed];
    g.output = ref("s");
    const canonical = canonicalGraph(g);
    const plan = planGraph(canonical);
    assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
    const region = plan.regions[0];
    assert.ok(region);
    return generateRegion(new GraphView(canonical), region, names).method;
  };
  const softmax = typed("s", "softmax", { input: ref("x"), dim: ref("d"), dtype: none }, "float32");
  const byDim = build(value("r", "dim", { input: ref("x") }), softmax);
  assert.match(byDim, /v_d == 1 and _kf_ready/);
  assert.match(byDim, /torch.softmax\(x, v_d, None\)/, "the fallback reads the dim as forward computes it");
  const sum = typed(
    "s",
    "sum",
    { input: ref("x"), dim: ref("d"), keepdim: { t: "const", pytype: "bool", value: false }, dtype: none },
    "float32",
  );
  sum.out = { t: "tensor", meta: { shape: [64], dtype: "float32", stride: [1] } };
  const ndim = value("r", "getattr", { input: ref("x"), name: { t: "const", pytype: "str", value: "ndim" } });
  assert.match(build(ndim, sum), /v_d == 1 and _kf_ready/);
});

test("an augmented assignment inside a region keeps both of its lines in the method's fallback body", () => {
  // `y += x` as an in-place operator on a private intermediate fuses; its fallback is two statements, whose second
  // line was left at column 0 (an IndentationError importing the emitted file).
  const g = castChain("float32");
  const iadd: GraphNode = {
    ...typed("i", "add", { input: ref("e"), other: ref("x") }, "float32"),
    target: "operator.iadd",
    inplace: true,
  };
  g.nodes = [
    typed("e", "exp", { input: ref("x") }, "float32"),
    iadd,
    typed("t", "tanh", { input: ref("i") }, "float32"),
  ];
  g.output = ref("t");
  const plan = planGraph(g);
  assert.equal(plan.regions.length, 1, JSON.stringify(plan.kept));
  const region = plan.regions[0];
  assert.ok(region);
  const lines = generateRegion(new GraphView(g), region, names).method.split("\n");
  const at = lines.findIndex((l) => l.trim() === "v_e += x");
  assert.ok(at > 0, lines.join("\n"));
  assert.equal(lines[at + 1], `${lines[at]?.match(/^ */)?.[0]}v_i = v_e`);
});

test("regions computing the same thing share one functor (one kernel instantiation); a different constant does not", () => {
  const num = (value: number): Arg => ({ t: "const", pytype: "float", value });
  const chain = (prefix: string, factor: number): Graph => ({
    ...castChain("float32"),
    nodes: [
      typed(`${prefix}m`, "mul", { input: ref("x"), other: num(factor) }, "float32"),
      typed(`${prefix}t`, "tanh", { input: ref(`${prefix}m`) }, "float32"),
    ],
    output: ref(`${prefix}t`),
  });
  const cuda = (g: Graph, id: string) => {
    const plan = planGraph(g);
    assert.equal(plan.regions.length, 1);
    return generateRegion(new GraphView(g), { ...plan.regions[0], id } as Region, names).cuda;
  };
  const [first = "", same = ""] = shareIdenticalFunctors([
    cuda(chain("a_", 3), "r0"),
    cuda(chain("b_", 3), "r1"),
  ]);
  assert.match(first, /^struct Kf\w+_r0 \{/m);
  assert.doesNotMatch(same, /^struct /m);
  assert.match(same, /cudaError_t kf_r1_launch\(/);
  assert.match(same, /<Kf\w+_r0\b/);
  assert.doesNotMatch(same, /Kf\w+_r1\b/);
  const [, other = ""] = shareIdenticalFunctors([cuda(chain("a_", 3), "r0"), cuda(chain("b_", 4), "r1")]);
  assert.match(other, /^struct Kf\w+_r1 \{/m);
  assert.doesNotMatch(other, /Kf\w+_r0\b/);
});
