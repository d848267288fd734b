// The pipelined suite with the real worker (CPU): an extension prebuilt ahead of the evaluation lands in the
// content-keyed cache the worker uses, so the worker loads it instead of compiling it again.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { DEFAULT_TIMING } from "../src/eval.ts";
import { resolveProblem } from "../src/problem/problems.ts";
import { evaluateSuite } from "../src/suite/eval-suite.ts";
import { needsPrebuild, prebuildCandidate } from "../src/suite/prebuild.ts";

const python = process.env.KFORGE_PYTHON ?? "python3";
const fixtures = resolve("test/fixtures/python");
const candidate = join(fixtures, "candidates", "add_cpp_ok.py");

test("only files that build an extension get a prebuild", () => {
  assert.equal(needsPrebuild(candidate), true);
  assert.equal(needsPrebuild(join(fixtures, "candidates", "linear_correct.py")), false);
});

test("a prebuilt extension is loaded, not rebuilt, by the worker that evaluates the candidate", async () => {
  const cacheDir = mkdtempSync(join(tmpdir(), "kforge-prebuild-"));
  const started = performance.now();
  const { error } = await prebuildCandidate(candidate, { python, cacheDir, timeoutMs: 300_000, env: {} });
  const prebuildSeconds = (performance.now() - started) / 1000;
  assert.equal(error, null);

  const [result] = await evaluateSuite(
    [{ problem: resolveProblem(join(fixtures, "problems", "tiny_add.py")), candidateArg: candidate }],
    {
      python,
      cacheDir,
      trials: 2,
      timeoutSeconds: 300,
      device: "cpu",
      precision: null,
      checks: ["none"],
      timing: { ...DEFAULT_TIMING, enabled: false },
    },
  );
  assert.equal(result?.verdict, "correct", result?.reason ?? "");
  const build = result?.compile[0];
  assert.ok(build?.ok, "the worker recorded its load_inline call");
  // A cold build of this extension takes tens of seconds on CI's CPUs; loading a finished one, well under 1.
  assert.ok(
    (build?.seconds ?? Infinity) < Math.min(3, prebuildSeconds / 4),
    `the worker's build took ${build?.seconds.toFixed(1)} s after a ${prebuildSeconds.toFixed(1)} s prebuild`,
  );
});
