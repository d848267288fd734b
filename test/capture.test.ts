import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { UsageError } from "../src/errors.ts";
import { captureProblem, captureProblems } from "../src/optimize/capture.ts";
import { REPO_ROOT } from "../src/paths.ts";

const FIXTURES = join(REPO_ROOT, "test", "fixtures", "capture");

test("captureProblem returns a schema-valid graph with canonical ops, shapes and params", async () => {
  const graph = await captureProblem(join(FIXTURES, "conv_relu_scale.py"));
  assert.equal(graph.captured, "fx");
  assert.deepEqual(
    graph.nodes.map((n) => n.op),
    ["conv2d", "relu", "mul"],
  );
  const [conv, relu, mul] = graph.nodes;
  assert.deepEqual(conv?.fn?.weight, { t: "param", path: "conv.weight" });
  assert.deepEqual(conv?.fn?.padding, {
    t: "list",
    kind: "list",
    items: [
      { t: "const", pytype: "int", value: 1 },
      { t: "const", pytype: "int", value: 1 },
    ],
  });
  assert.deepEqual(relu?.out, {
    t: "tensor",
    meta: { shape: [2, 8, 16, 16], dtype: "float32", stride: [2048, 256, 16, 1] },
  });
  assert.deepEqual(mul?.fn?.other, { t: "const", pytype: "float", value: 0.5, attr: "scaling_factor" });
  assert.deepEqual(graph.output, { t: "node", id: "mul" });
  assert.equal(graph.params["conv.weight"]?.meta.shape.join(","), "8,3,3,3");
  assert.equal(graph.scalarAttrs.scaling_factor, 0.5);
  assert.match(graph.source.forward, /def forward\(self, x\)/);
});

test("captureProblem: a file that is not a usable problem is a one-line UsageError naming it", async () => {
  await assert.rejects(captureProblem(join(FIXTURES, "broken_init.py")), (error: unknown) => {
    assert.ok(error instanceof UsageError);
    assert.match(error.message, /broken_init\.py/);
    assert.match(error.message, /refuses to be built/);
    assert.doesNotMatch(error.message, /\n/);
    return true;
  });
  await assert.rejects(captureProblem(join(FIXTURES, "no_such_problem.py")), UsageError);
});

test("captureProblem: a worker that cannot start is a plain error, not a UsageError", async () => {
  await assert.rejects(
    captureProblem(join(FIXTURES, "conv_relu_scale.py"), { python: "/nonexistent/python" }),
    (error: unknown) => {
      assert.ok(error instanceof Error && !(error instanceof UsageError));
      assert.match(error.message, /capture worker failed/);
      return true;
    },
  );
});

test("captureProblems captures a suite in one worker and keeps each problem's own outcome", async () => {
  const good = join(FIXTURES, "conv_relu_scale.py");
  const bad = join(REPO_ROOT, "test", "fixtures", "python", "problems", "missing_get_inputs.py");
  const [first, second, third] = await captureProblems([good, bad, good]);
  assert.ok(first && !(first instanceof Error) && first.captured === "fx");
  assert.ok(second instanceof UsageError, "a bad problem file is the user's error, not the batch's");
  assert.match(second.message, /missing_get_inputs/);
  assert.deepEqual(third, first, "the batch goes on after a bad file");
});
