// Suite manifests (`kforge bench --pairs FILE`): PROBLEM=CANDIDATE lines, paths relative to the manifest.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { REPO_ROOT } from "../src/paths.ts";
import { loadResultsFile } from "../src/report/load.ts";
import { readPairs } from "../src/suite/pairs.ts";
import { runKforge } from "./helpers/kforge.ts";

const fixtures = join(REPO_ROOT, "test", "fixtures", "python");

test("a manifest's lines become pairs: names stay names, paths are read beside the manifest", () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-pairs-"));
  const manifest = join(dir, "suite.txt");
  writeFileSync(
    manifest,
    [
      "# answers of run 7",
      "sdpa_fp16=answers/a.md",
      "",
      `problems/p.py = /abs/c.py`,
      "  relu_large=b.py  ",
    ].join("\n"),
  );
  assert.deepEqual(readPairs(manifest), [
    { problem: "sdpa_fp16", candidate: join(dir, "answers", "a.md") },
    { problem: join(dir, "problems", "p.py"), candidate: "/abs/c.py" },
    { problem: "relu_large", candidate: join(dir, "b.py") },
  ]);
  writeFileSync(manifest, "sdpa_fp16=a.md\nno equals sign here\n");
  assert.throws(() => readPairs(manifest), /suite\.txt:2: expected PROBLEM=CANDIDATE/);
  writeFileSync(manifest, "# nothing\n");
  assert.throws(() => readPairs(manifest), /no PROBLEM=CANDIDATE lines/);
});

test("kforge bench --pairs evaluates exactly the manifest's pairs, across problems, in its order", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-pairs-cli-"));
  mkdirSync(join(dir, "answers"));
  writeFileSync(
    join(dir, "answers", "add.py"),
    "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a + b\n",
  );
  const manifest = join(dir, "suite.txt");
  writeFileSync(
    manifest,
    [
      `${join(fixtures, "problems", "tiny_add.py")}=answers/add.py`,
      `${join(fixtures, "problems", "tiny_linear.py")}=${join(fixtures, "candidates", "linear_correct.py")}`,
    ].join("\n"),
  );
  const json = join(dir, "results.json");
  const run = await runKforge(
    ["bench", "--pairs", manifest, "--device", "cpu", "--trials", "1", "--budget", "1", "--json", json],
    join(dir, "cache"),
  );
  assert.equal(run.exitCode, 0, run.stderr);
  const { results } = loadResultsFile(json);
  assert.deepEqual(
    results.map((r) => [r.problem, r.candidate, r.verdict]),
    [
      ["tiny_add", "add.py", "correct"],
      ["tiny_linear", "linear_correct.py", "correct"],
    ],
  );
  assert.match(run.stderr, /2\/2 done/, "the suite's progress counts both pairs");
});
