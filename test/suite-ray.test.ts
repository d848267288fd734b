// --ray end to end on CPU: a local Ray head (started by the driver) runs every evaluation as a Ray task that
// spawns the isolated worker; results stream back and are judged as a local run's are.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { execaSync } from "execa";
import { DEFAULT_TIMING } from "../src/eval.ts";
import { REPO_ROOT } from "../src/paths.ts";
import { resolveProblem } from "../src/problem/problems.ts";
import { loadResultsFile } from "../src/report/load.ts";
import { suiteTasks } from "../src/suite/eval-suite.ts";
import { runOnRay } from "../src/suite/ray.ts";
import { runKforge, testPython } from "./helpers/kforge.ts";

const python = testPython;
const fixtures = join(REPO_ROOT, "test", "fixtures", "python");
const hasRay = execaSync(python, ["-c", "import ray"], { reject: false }).exitCode === 0;
// CI installs Ray (scripts/setup-python.sh): there this test must run, never skip.
const skip = !hasRay && !process.env.CI ? "ray is not installed in the test Python (npm run setup)" : false;

test("kforge bench --ray local --device cpu evaluates two problems end to end, isolation intact", {
  skip,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-ray-"));
  const add = join(dir, "add_torch.py");
  writeFileSync(
    add,
    "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a + b\n",
  );
  // Correct output, but it leaves a process behind: the Ray task's worker must be judged as a local one is.
  const leaves = join(dir, "add_leaves.py");
  writeFileSync(leaves, `import subprocess\nsubprocess.Popen(["sleep", "60"])\n${readFileSync(add, "utf8")}`);
  const json = join(dir, "results.json");
  const journal = join(dir, "results.jsonl");
  const run = await runKforge(
    [
      "bench",
      join(fixtures, "problems", "tiny_linear.py"),
      join(fixtures, "problems", "tiny_add.py"),
      "--candidate",
      `tiny_linear=${join(fixtures, "candidates", "linear_correct.py")}`,
      "--candidate",
      `tiny_add=${add}`,
      "--candidate",
      `tiny_add=${leaves}`,
      "--device",
      "cpu",
      "--ray",
      "local",
      "--trials",
      "2",
      "--budget",
      "1",
      "--json",
      json,
      "--jsonl",
      journal,
    ],
    join(dir, "cache"),
  );
  assert.match(run.stderr, /Ray cluster: 0 GPU, \d+ CPU; 3 evaluation\(s\) submitted/, run.stderr);
  const { results } = loadResultsFile(json);
  assert.deepEqual(
    results.map((r) => [r.problem, r.candidate, r.verdict]),
    [
      ["tiny_linear", "linear_correct.py", "correct"],
      ["tiny_add", "add_torch.py", "correct"],
      ["tiny_add", "add_leaves.py", "cheating"],
    ],
    run.stderr,
  );
  // The process it starts is seen by the worker itself (thread_count: a process started at import, then ended
  // with the evaluation) or, had it escaped the worker, by the runner after exit (process_leftovers).
  assert.ok(
    results[2]?.checks.some(
      (c) =>
        c.outcome === "fail" &&
        (c.name === "process_leftovers" || (c.name === "thread_count" && /process/.test(c.evidence))),
    ),
    JSON.stringify(results[2]?.checks.filter((c) => c.outcome === "fail")),
  );
  assert.ok(results[0]?.timing !== null, "timed on the Ray node, reference and candidate in one process");
  assert.equal(readFileSync(journal, "utf8").trim().split("\n").length, 3, "each result journaled");
  assert.equal(run.exitCode, 1, "not every candidate is correct");
});

test("without Ray in the driver's Python, --ray fails in one line naming the fix", async () => {
  const bare = process.env.KFORGE_TEST_PYTHON_WITHOUT_RAY ?? "python3";
  if (execaSync(bare, ["-c", "import ray"], { reject: false }).exitCode === 0) return;
  const tasks = suiteTasks(
    [
      {
        problem: resolveProblem(join(fixtures, "problems", "tiny_add.py")),
        candidateArg: join(fixtures, "candidates", "add_cpp_ok.py"),
      },
    ],
    {
      python: bare,
      cacheDir: mkdtempSync(join(tmpdir(), "kforge-noray-")),
      trials: 1,
      timeoutSeconds: 10,
      device: "cpu",
      precision: null,
      timing: DEFAULT_TIMING,
    },
  );
  await assert.rejects(
    runOnRay(
      tasks,
      { address: "local", device: "cpu", python: bare, timeoutMs: 10_000 },
      { finished: () => {} },
    ),
    /--ray local: Ray is not installed in .*pip install ray/,
  );
});
