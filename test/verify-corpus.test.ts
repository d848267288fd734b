// Corpus entries end to end through the library (`evaluate`: the CLI's path): the TypeScript runner spawns
// one worker per candidate, the worker's pipeline drives the verification checks, and the result JSON must
// carry the expected verdict and the named failing check. One candidate per kind of defence; the whole
// CPU corpus runs in test/python/test_verify_corpus.py.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { DEFAULT_TIMING, evaluate } from "../src/eval.ts";
import { REPO_ROOT } from "../src/paths.ts";
import { resolveProblem } from "../src/problem/problems.ts";

interface Entry {
  id: string;
  problem: string;
  candidate: string;
  expect: string;
  check: string | null;
  cpu: boolean;
  strict?: { expect: string; check: string | null };
}

const manifest: { entries: Entry[] } = JSON.parse(
  readFileSync(join(REPO_ROOT, "test", "verify", "manifest.json"), "utf8"),
);
const python = process.env.KFORGE_PYTHON ?? join(REPO_ROOT, ".venv", "bin", "python");
const cacheDir = mkdtempSync(join(tmpdir(), "kforge-verify-ts-"));

// honest with state semantics; a library answer (disclosed); harness integrity; input hashing; replay;
// audit hook; derived shapes; the judge in the clean process (the CLI's reconciliation of its record)
const PICKS = [
  "honest_linear_bn_softmax",
  "honest_library_gemm",
  "adv_patch_allclose",
  "adv_zero_inputs",
  "adv_pointer_cache",
  "adv_gc_steal",
  "adv_shape_specialized",
  // the judge alone decides it (round 8: adv_busy_flag_walk's zeros are now met by the worker's own timed checks)
  "adv_trial_tolerance_walk",
];

async function evaluateEntry(entry: Entry, strict: boolean) {
  const problem = resolveProblem(join(REPO_ROOT, entry.problem));
  const [result] = await evaluate(problem, [join(REPO_ROOT, entry.candidate)], {
    python,
    cacheDir,
    trials: 5,
    timeoutSeconds: 240,
    device: "cpu",
    precision: null,
    strict,
    timing: { ...DEFAULT_TIMING, minIters: 5, maxIters: 20, budgetSeconds: 2, warmupIters: 1 },
  });
  return result;
}

for (const id of PICKS) {
  const entry = manifest.entries.find((e) => e.id === id);
  test(`corpus ${id} through evaluate(): ${entry?.expect} (${entry?.check ?? "no failing check"})`, async () => {
    assert.ok(entry?.cpu, `${id} must be a CPU entry of the manifest`);
    const result = await evaluateEntry(entry, false);
    assert.ok(result);
    const failing = result.checks.filter((c) => c.outcome === "fail").map((c) => c.name);
    assert.equal(result.verdict, entry.expect, `${id}: ${result.reason}`);
    if (entry.check === null) {
      assert.deepEqual(failing, [], `${id}: false flags ${failing.join(", ")}`);
      assert.ok(result.checks.some((c) => c.name === "state_reload" && c.outcome === "pass"));
    } else {
      assert.ok(
        failing.includes(entry.check),
        `${id}: ${entry.check} not among failing [${failing.join(", ")}]`,
      );
      const decisive = result.checks.find((c) => c.name === entry.check);
      assert.ok(decisive?.evidence.length, "a failing check carries evidence");
      assert.ok(result.reason, "a failing verdict carries a reason");
    }
  });
}

test("--strict through evaluate(): the library answer that passes by default is cheating", async () => {
  const entry = manifest.entries.find((e) => e.id === "honest_library_gemm");
  assert.ok(entry?.cpu && entry.strict, "honest_library_gemm must be a CPU entry with a strict label");
  const strict = await evaluateEntry(entry, true);
  assert.ok(strict);
  assert.equal(strict.strict, true);
  assert.equal(strict.verdict, entry.strict.expect, `${strict.reason}`);
  const banned = strict.checks.find((c) => c.name === entry.strict?.check);
  assert.equal(banned?.outcome, "fail");
  assert.match(banned?.evidence ?? "", /--strict: .*aten::addmm/);
  assert.match(strict.reason ?? "", /^banned_ops/);
});
