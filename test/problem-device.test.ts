// A problem that hard-codes device="cuda", run with --device cpu where torch has no CUDA: the problem cannot
// run here, and that is charged to the problem (problem_error), never to the candidate, wherever in the
// problem the device is named. Through the real worker process, as `kforge eval` runs it.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { execaSync } from "execa";
import { DEFAULT_TIMING } from "../src/eval.ts";
import { resolveProblem } from "../src/problem/problems.ts";
import { evaluateSuite } from "../src/suite/eval-suite.ts";

const python = process.env.KFORGE_PYTHON ?? "python3";
const hasCuda =
  execaSync(python, ["-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"], {
    reject: false,
  }).exitCode === 0;

const dir = mkdtempSync(join(tmpdir(), "kforge-device-"));
const candidate = join(dir, "relu_new.py");
writeFileSync(
  candidate,
  "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n",
);

/** The same small problem, naming the CUDA device in one place. */
function problemWith(name: string, where: "inputs" | "init" | "forward"): string {
  const path = join(dir, `${name}.py`);
  const device = (w: typeof where) => (w === where ? ', device="cuda"' : "");
  writeFileSync(
    path,
    [
      "import torch",
      "import torch.nn as nn",
      "",
      "class Model(nn.Module):",
      "    def __init__(self):",
      "        super().__init__()",
      `        self.register_buffer("zero", torch.zeros(8${device("init")}))`,
      "    def forward(self, x):",
      `        return torch.relu(x) + torch.zeros(8${device("forward")}) + self.zero`,
      "",
      "def get_inputs():",
      `    return [torch.randn(4, 8${device("inputs")})]`,
      "",
      "def get_init_inputs():",
      "    return []",
      "",
    ].join("\n"),
  );
  return path;
}

test('device="cuda" in get_inputs, __init__ or forward on a CPU run is the problem\'s error', {
  skip: hasCuda ? "this torch has CUDA" : false,
}, async () => {
  const places = ["inputs", "init", "forward"] as const;
  const results = await evaluateSuite(
    places.map((where) => ({
      problem: resolveProblem(problemWith(`needs_cuda_${where}`, where)),
      candidateArg: candidate,
    })),
    {
      python,
      cacheDir: join(dir, "cache"),
      trials: 1,
      timeoutSeconds: 300,
      device: "cpu",
      precision: null,
      timing: { ...DEFAULT_TIMING, enabled: false },
    },
  );
  for (const [i, where] of places.entries()) {
    const result = results[i];
    assert.equal(result?.verdict, "problem_error", `${where}: ${result?.verdict}: ${result?.reason}`);
    assert.match(result?.reason ?? "", /^problem /, where);
  }
});
