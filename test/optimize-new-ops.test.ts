// Ops planned from captured fixtures: cumulative sums and products as scan regions (ops/scan.ts, kf_scan.cuh), with
// the pointwise ops before them (a mask multiplied in) and after them, and flips around them as a scan from the
// end; triplet_margin_loss spelled out (plan/spelled-out.ts) as two distance reductions and one reduction of the
// hinge. (test_optimize_emit.py holds both fixtures' files bit for bit equal to the reference on the CPU.)
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { emitModelFile } from "../src/optimize/codegen/model-file.ts";
import { prepareProblem } from "../src/optimize/optimize.ts";
import { GraphView } from "../src/optimize/plan/graph-view.ts";
import { regionNodes } from "../src/optimize/plan/planner.ts";
import { resolveProblem } from "../src/problem/problems.ts";

const PYTHON = process.env.KFORGE_PYTHON ?? ".venv/bin/python";

/** The fixture captured and planned on the CPU, with each region's ops in order. */
async function planned(fixture: string) {
  const dir = mkdtempSync(join(tmpdir(), "kforge-ops-"));
  const prepared = await prepareProblem(
    resolveProblem(`test/fixtures/optimize/${fixture}.py`),
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
  const view = new GraphView(prepared.graph);
  const ops = prepared.plan.regions.map((r) =>
    regionNodes(r)
      .map((id) => view.node(id).op)
      .join(" "),
  );
  return { ...prepared, ops };
}

test("a scan takes the pointwise ops around it, and flips around it as a scan from the end; a scan that casts stays PyTorch's", {
  timeout: 120_000,
}, async () => {
  const { graph, plan, ops } = await planned("scans");
  assert.deepEqual(ops, ["mul cumsum", "sigmoid cumprod mul add", "flip cumsum flip"]);
  assert.ok(plan.regions.every((r) => r.kind === "scan"));
  assert.deepEqual(
    plan.regions.map((r) => r.reverse ?? false),
    [false, false, true],
  );
  assert.ok(plan.kept.some((k) => k.op === "cumsum" && /casts \(dtype=float64\)/.test(k.reason)));
  const emitted = emitModelFile(graph, plan, "scans");
  // The masked scan runs along the last dim (2), the product down dim 0; the mask is read as 1 / 0.
  assert.match(emitted.cuda, /kf_launch_scan<KfPro_r0, KfScanSum, KfEpi_r0, float, float, bool>/);
  assert.match(emitted.cuda, /kf_launch_scan<KfPro_r1, KfScanProd, KfEpi_r1, float, float, float>/);
  assert.match(emitted.source, /_kf_ext\(\)\.kf_r0\(list\(ins\), \[\], shape, 2,/);
  assert.match(emitted.source, /_kf_ext\(\)\.kf_r1\(list\(ins\), \[\], shape, 0,/);
  // the reverse scan: dim 1, from the end (+256); neither flip is made
  assert.match(emitted.source, /_kf_ext\(\)\.kf_r2\(list\(ins\), \[\], shape, 257,/);
});

test("a triplet margin loss is two distance reductions and one hinge reduction; with swap three, and a minimum", {
  timeout: 120_000,
}, async () => {
  const { plan, ops } = await planned("triplet_losses");
  const distances = ["pairwise_distance", "pairwise_distance"];
  // In half precision each distance's second operand is read once: its cast runs in the distance's prologue (the
  // first, `a.half()`, is read by both distances and stays PyTorch's cast).
  assert.deepEqual(ops, [
    ...distances,
    "add sub clamp mean",
    "to pairwise_distance",
    "to pairwise_distance",
    "add sub clamp sum",
    ...distances,
    "add sub clamp mul",
    ...distances,
    "pairwise_distance",
    "minimum add sub clamp mean",
  ]);
  assert.deepEqual(
    plan.kept.map((k) => k.op),
    [],
  );
});
