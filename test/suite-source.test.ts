// Red team round 15: the code each candidate is judged on is read when the suite is set up. An earlier candidate of
// the same suite could rewrite a later one's file before its turn (adv_suite_sibling_rewrite, bench/verify/NOTES.md);
// the request carries the text read up front and the worker imports that under the file's path.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { DEFAULT_TIMING } from "../src/eval.ts";
import { REPO_ROOT } from "../src/paths.ts";
import { resolveProblem } from "../src/problem/problems.ts";
import { suiteTasks } from "../src/suite/eval-suite.ts";
import { EvalRequest } from "../src/worker/protocol.ts";

test("a suite's requests carry each candidate's code as read when the suite was set up", () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-source-"));
  const file = join(dir, "b.py");
  const original = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    pass\n";
  writeFileSync(file, original);
  const transcript = join(dir, "answer.md");
  writeFileSync(transcript, `Here it is:\n\n\`\`\`python\n${original}\`\`\`\n`);
  const problem = resolveProblem(join(REPO_ROOT, "test", "fixtures", "python", "problems", "tiny_add.py"));
  const tasks = suiteTasks(
    [
      { problem, candidateArg: file },
      { problem, candidateArg: transcript },
    ],
    {
      python: "python3",
      cacheDir: mkdtempSync(join(tmpdir(), "kforge-source-cache-")),
      trials: 1,
      timeoutSeconds: 10,
      device: "cpu",
      precision: null,
      timing: DEFAULT_TIMING,
    },
  );
  writeFileSync(file, "raise ImportError('rewritten by an earlier candidate')\n"); // after set-up, before its turn
  assert.equal(tasks[0]?.request.candidate.source, original);
  assert.equal(tasks[1]?.request.candidate.source, original);
  for (const task of tasks) EvalRequest.parse(task.request);
});
