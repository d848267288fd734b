// What the CLI refuses up front: missing files, problems without Model, non-Python candidates.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { checkCandidateArg, loadCandidate } from "../src/candidate/load.ts";
import { UsageError } from "../src/errors.ts";
import { builtInProblems, resolveProblem } from "../src/problem/problems.ts";

const dir = mkdtempSync(join(tmpdir(), "kforge-inputs-"));
const file = (name: string, content: string | Buffer) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};

test("a missing problem names the argument and the built-in problems", () => {
  assert.throws(
    () => resolveProblem(join(dir, "nope.py")),
    (e: Error) => {
      return e instanceof UsageError && /problem not found: .*nope\.py/.test(e.message);
    },
  );
});

test("a problem without class Model or get_inputs is refused", () => {
  const noModel = file("nomodel.py", "import torch\ndef get_inputs():\n    return []\n");
  assert.throws(() => resolveProblem(noModel), /does not define class Model/);
  const noInputs = file("noinputs.py", "import torch\nclass Model(torch.nn.Module):\n    pass\n");
  assert.throws(() => resolveProblem(noInputs), /does not define get_inputs/);
  const notPy = file("problem.txt", "class Model: pass\ndef get_inputs(): pass\n");
  assert.throws(() => resolveProblem(notPy), /not a Python \(\.py\) file/);
});

test("built-in problems resolve by name", () => {
  const names = builtInProblems().map((p) => p.name);
  for (const name of ["sdpa_fp16", "gemm_bn_scale_softmax"]) {
    assert.ok(names.includes(name), `${name} missing from ${names.join(",")}`);
    const problem = resolveProblem(name);
    assert.equal(problem.builtIn, true);
    assert.match(readFileSync(problem.path, "utf8"), /class Model\b/);
  }
});

test("candidates that are missing, binary or of another language are refused", () => {
  assert.throws(() => checkCandidateArg(join(dir, "absent.py")), /candidate not found/);
  assert.throws(() => checkCandidateArg(file("kernel.cu", "__global__ void k() {}\n")), /not a Python file/);
  assert.throws(
    () => checkCandidateArg(file("blob.py", Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1]))),
    /binary/,
  );
  assert.throws(() => checkCandidateArg(dir), /not a file/);
});

test("a transcript's chosen block is written to the cache as a .py file", () => {
  const transcript = file("answer.md", "Answer:\n```python\nclass ModelNew:\n    pass\n```\n");
  const loaded = loadCandidate(transcript, join(dir, "cache"));
  assert.ok(loaded.codePath?.endsWith(".py"));
  assert.equal(readFileSync(loaded.codePath ?? "", "utf8"), "class ModelNew:\n    pass\n");
  assert.equal(loaded.origin.blockIndex, 1);
  const empty = loadCandidate(file("prose.md", "no code here"), join(dir, "cache"));
  assert.equal(empty.codePath, null);
});
