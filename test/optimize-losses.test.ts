// triplet_margin_loss spelled out (plan/spelled-out.ts): two distance reductions and one reduction of the hinge,
// for every reduction; swap=True stays PyTorch's. (test_optimize_emit.py holds the spelled-out file bit for bit
// equal to the reference on the CPU.)
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { prepareProblem } from "../src/optimize/optimize.ts";
import { GraphView } from "../src/optimize/plan/graph-view.ts";
import { regionNodes } from "../src/optimize/plan/planner.ts";
import { resolveProblem } from "../src/problem/problems.ts";

const PYTHON = process.env.KFORGE_PYTHON ?? ".venv/bin/python";

test("a triplet margin loss is two distance reductions and one hinge reduction; swap stays PyTorch's", {
  timeout: 120_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-losses-"));
  const { graph, plan } = await prepareProblem(
    resolveProblem("test/fixtures/optimize/triplet_losses.py"),
    join(dir, "new.py"),
    {
      python: PYTHON,
      cacheDir: join(dir, "cache"),
      verify: false,
      device: "cpu",
      trials: 1,
      timeoutSeconds: 120,
      benchIters: 1,
      compileBaseline: false,
    },
  );
  const view = new GraphView(graph);
  const ops = plan.regions.map((r) =>
    regionNodes(r)
      .map((id) => view.node(id).op)
      .join(" "),
  );
  const distances = ["pairwise_distance", "pairwise_distance"];
  assert.deepEqual(ops, [
    ...distances,
    "add sub clamp mean",
    ...distances,
    "add sub clamp sum",
    ...distances,
    "add sub clamp mul",
  ]);
  assert.deepEqual(
    plan.kept.map((k) => k.op),
    ["triplet_margin_loss"],
  );
});
