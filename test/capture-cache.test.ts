import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { captureProblem, captureProblems } from "../src/optimize/capture.ts";

const root = mkdtempSync(join(tmpdir(), "kforge-capture-cache-"));
after(() => rmSync(root, { recursive: true, force: true }));

const PROBLEM = `import torch
import torch.nn as nn
from cache_helper import act


class Model(nn.Module):
    def forward(self, x):
        return act(x) + 1


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
`;

function writeProblem(dir: string, helperBody: string): string {
  writeFileSync(join(dir, "cache_helper.py"), `import torch\n\n\ndef act(x):\n    return ${helperBody}\n`);
  const path = join(dir, "problem.py");
  writeFileSync(path, PROBLEM);
  return path;
}

/** Marks every kept graph so that a graph read back from the cache is told from a fresh capture. */
function markEntries(cacheDir: string): void {
  const folder = join(cacheDir, "captures");
  for (const name of readdirSync(folder)) {
    const entry = JSON.parse(readFileSync(join(folder, name), "utf8"));
    entry.graph.failure = "from the cache";
    writeFileSync(join(folder, name), JSON.stringify(entry));
  }
}

test("a capture is reused while the problem and the helpers it imports are unchanged, and redone after", async () => {
  const dir = mkdtempSync(join(root, "p-"));
  const cacheDir = join(dir, "cache");
  const path = writeProblem(dir, "torch.relu(x)");
  const first = await captureProblem(path, { cacheDir });
  assert.deepEqual(
    first.nodes.map((n) => n.op),
    ["relu", "add"],
  );
  assert.ok(
    first.sources?.some((s) => s.endsWith("cache_helper.py")),
    "the helper is a source of the capture",
  );
  markEntries(cacheDir);
  assert.equal((await captureProblem(path, { cacheDir })).failure, "from the cache");
  assert.equal((await captureProblems([path], { cacheDir }))[0] instanceof Error, false);
  // The helper changes: the cached graph no longer holds.
  writeProblem(dir, "torch.sigmoid(x)");
  const again = await captureProblem(path, { cacheDir });
  assert.equal(again.failure, null);
  assert.deepEqual(
    again.nodes.map((n) => n.op),
    ["sigmoid", "add"],
  );
  // The problem file itself changes: another key.
  writeFileSync(path, PROBLEM.replace("act(x) + 1", "act(x) - 1"));
  const edited = await captureProblem(path, { cacheDir });
  assert.deepEqual(
    edited.nodes.map((n) => n.op),
    ["sigmoid", "sub"],
  );
});

test("captureProblems serves hits from the cache and captures only the rest, in the given order", async () => {
  const dir = mkdtempSync(join(root, "s-"));
  const cacheDir = join(dir, "cache");
  const cached = writeProblem(dir, "torch.relu(x)");
  await captureProblem(cached, { cacheDir });
  markEntries(cacheDir);
  const other = join(dir, "other.py");
  writeFileSync(
    other,
    PROBLEM.replace("from cache_helper import act\n", "").replace("act(x)", "torch.tanh(x)"),
  );
  const [fromOther, fromCache] = await captureProblems([other, cached], { cacheDir });
  assert.ok(fromOther && !(fromOther instanceof Error));
  assert.deepEqual(
    fromOther.nodes.map((n) => n.op),
    ["tanh", "add"],
  );
  assert.ok(fromCache && !(fromCache instanceof Error));
  assert.equal(fromCache.failure, "from the cache");
});
