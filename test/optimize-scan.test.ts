// Cumulative sums and products (ops/scan.ts, kf_scan.cuh): what the scan rule takes, with the pointwise ops
// before it (a mask multiplied in) and after it, and what it leaves to PyTorch.
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

test("a scan takes the pointwise ops around it, and flips around it as a scan from the end; a scan that casts stays PyTorch's", {
  timeout: 120_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-scan-"));
  const problem = resolveProblem("test/fixtures/optimize/scans.py");
  const { graph, plan } = await prepareProblem(problem, join(dir, "new.py"), {
    python: PYTHON,
    cacheDir: join(dir, "cache"),
    verify: false,
    device: "cpu",
    trials: 1,
    timeoutSeconds: 120,
    benchIters: 1,
    compileBaseline: false,
  });
  const view = new GraphView(graph);
  const ops = plan.regions.map((r) => ({
    kind: r.kind,
    ops: regionNodes(r).map((id) => view.node(id).op),
  }));
  assert.deepEqual(ops, [
    { kind: "scan", ops: ["mul", "cumsum"] },
    { kind: "scan", ops: ["sigmoid", "cumprod", "mul", "add"] },
    { kind: "scan", ops: ["flip", "cumsum", "flip"] },
  ]);
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
