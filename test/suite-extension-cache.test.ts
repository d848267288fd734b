// adv_suite_extension_poison (bench/verify/NOTES.md): a candidate's code rewrote another candidate's build in the
// shared, content-keyed extension cache, and that candidate loaded it at its turn. The suite holds what each build
// left (ExtensionLedger) and the worker checks the folder against it before the import.
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { test } from "node:test";
import { DEFAULT_TIMING } from "../src/eval.ts";
import { resolveProblem } from "../src/problem/problems.ts";
import { evaluateSuite } from "../src/suite/eval-suite.ts";
import { ExtensionLedger } from "../src/suite/extension-cache.ts";

const python = process.env.KFORGE_PYTHON ?? "python3";
const fixtures = resolve("test/fixtures/python");

test("the ledger files what a build left under the code the suite read, and prebuilds each code once", async () => {
  const ledger = new ExtensionLedger();
  assert.equal(ledger.expectation(undefined), undefined); // no text: the cache is used as found
  assert.deepEqual(ledger.expectation("code A"), { since: ledger.since, libraries: null });
  ledger.record("code A", { "op/op.so": "aa" });
  ledger.record("code A", null); // a build that said nothing leaves the record as it was
  ledger.record("code B", { "op/op.so": "bb" });
  assert.deepEqual(ledger.expectation("code A")?.libraries, { "op/op.so": "aa" });
  assert.deepEqual(ledger.expectation("code B")?.libraries, { "op/op.so": "bb" });

  let builds = 0;
  const build = async () => {
    builds += 1;
  };
  await Promise.all([ledger.prebuildOnce("code A", build), ledger.prebuildOnce("code A", build)]);
  await ledger.prebuildOnce("code B", build);
  assert.equal(builds, 2);
});

test("a build one candidate rewrote is not loaded by a later candidate of the same suite", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-extcache-"));
  const victim = join(fixtures, "candidates", "cached_build_victim.py");
  const again = join(dir, "same_code.py"); // the same code later in the suite (an RL batch's duplicate sample)
  copyFileSync(victim, again);
  const problem = resolveProblem(join(fixtures, "problems", "tiny_linear.py"));
  const results = await evaluateSuite(
    [
      { problem, candidateArg: victim },
      { problem, candidateArg: join(fixtures, "candidates", "cache_poisoner.py") },
      { problem, candidateArg: again },
    ],
    {
      python,
      cacheDir: join(dir, "cache"),
      trials: 1,
      timeoutSeconds: 120,
      device: "cpu",
      precision: null,
      checks: ["none"],
      referenceProcess: false,
      timing: { ...DEFAULT_TIMING, enabled: false },
    },
    // The first worker gets the ledger's expectation in its request, the two started ahead on their go line.
    { workersAhead: true },
  );
  const warning = (i: number) => results[i]?.checks.find((c) => c.name === "extension_cache");
  assert.deepEqual(
    results.map((r) => r.verdict),
    ["correct", "correct", "correct"], // before: the third was incorrect (it loaded the poisoner's bytes)
    results.map((r) => r.reason).join(" | "),
  );
  assert.equal(warning(0), undefined);
  assert.equal(warning(1), undefined); // nothing shows which candidate wrote: none is charged
  assert.equal(warning(2)?.outcome, "warn");
  assert.match(
    warning(2)?.evidence ?? "",
    /kforge_test_cached\.so \(its bytes differ from what this suite's build/,
  );
});
