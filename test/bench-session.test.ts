// BenchSession: every bench of a problem served by one `--bench-optimize-serve` process (torch imported, the
// reference built and torch.compile run once), each result parsed by OptimizeBenchResult; a worker that dies
// answers with an error and the next request starts another.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { BenchSession } from "../src/optimize/bench-session.ts";

const PYTHON = process.env.KFORGE_PYTHON ?? ".venv/bin/python";

const PROBLEM = `
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(8, 8)]

def get_init_inputs():
    return []
`;

const CANDIDATE = `
import torch
import torch.nn as nn

_KF_DISABLED = set()

class ModelNew(nn.Module):
    def _kf_r0(self, x):
        return torch.relu(x)
    def forward(self, x):
        print("a candidate's print must not reach the result line")
        return self._kf_r0(x)
`;

test("one process serves every bench of a problem; a dead worker answers with an error", {
  timeout: 120_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-bench-session-"));
  writeFileSync(join(dir, "problem.py"), PROBLEM);
  writeFileSync(join(dir, "new.py"), CANDIDATE);
  const request = (regions: string[], timeFile: boolean) => ({
    problemPath: join(dir, "problem.py"),
    candidatePath: join(dir, "new.py"),
    device: "cpu" as const,
    cacheDir: join(dir, "cache"),
    iters: 3,
    compileBaseline: false,
    regions,
    timeFile,
  });
  const session = new BenchSession(PYTHON, 60);
  try {
    const first = await session.request(request(["r0"], true));
    assert.equal(first.error, null);
    assert.ok(first.eagerMs !== null && first.oursMs !== null);
    assert.ok(first.phases && first.phases.startup !== null, "the first request pays the startup");
    const again = await session.request(request(["r0"], false));
    assert.equal(again.error, null);
    assert.equal(again.eagerMs, null, "regions only");
    assert.notEqual(again.regions[0]?.kernelMs, null);
    assert.equal(again.phases?.startup, null);
    assert.deepEqual({ started: session.started, served: session.served }, { started: 1, served: 1 });
    // A request that raised leaves the process (its CUDA context may be poisoned): the next one starts anew.
    const broken = await session.request({ ...request([], true), candidatePath: join(dir, "missing.py") });
    assert.match(broken.error ?? "", /missing\.py/);
    assert.equal((await session.request(request([], true))).error, null);
    assert.equal(session.started, 2);
  } finally {
    session.close();
  }
  const dead = new BenchSession("/bin/false", 10);
  const failed = await dead.request(request([], true));
  assert.match(failed.error ?? "", /exit 1/);
  await dead.request(request([], true));
  assert.equal(dead.started, 2, "a new process for the next request");
});
