// Golden tests of the Python the codegen writes for captured nodes and region methods.
import assert from "node:assert/strict";
import { test } from "node:test";
import { forwardCallArgs } from "../src/optimize/codegen/model-file.ts";
import { pyStatement } from "../src/optimize/codegen/python-expr.ts";
import { methodNames } from "../src/optimize/codegen/region.ts";
import type { Arg, GraphNode } from "../src/optimize/graph.ts";

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
