// The CLI end to end: real processes, real worker, tiny CPU problems.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { execa } from "execa";
import { REPO_ROOT } from "../src/paths.ts";
import { EvalResult } from "../src/worker/protocol.ts";

const fixtures = join(import.meta.dirname, "fixtures", "cli");
const python = process.env.KFORGE_PYTHON ?? join(REPO_ROOT, ".venv", "bin", "python");
const cache = mkdtempSync(join(tmpdir(), "kforge-cli-cache-"));

function kforge(args: string[], env: Record<string, string> = {}) {
  return execa("node", [join(REPO_ROOT, "bin", "kforge.js"), ...args], {
    reject: false,
    env: { KFORGE_PYTHON: python, KFORGE_CACHE_DIR: cache, NO_COLOR: "1", ...env },
    timeout: 240_000,
  });
}

const problem = join(fixtures, "tiny_problem.py");
const cpu = ["--device", "cpu", "--no-timing", "--trials", "3"];

function parseResults(stdout: string): EvalResult[] {
  const payload = JSON.parse(stdout) as { results: unknown[] };
  return payload.results.map((r) => EvalResult.parse(r));
}

test("kforge problems lists the built-in problems", async () => {
  const run = await kforge(["problems"]);
  assert.equal(run.exitCode, 0);
  assert.match(run.stdout, /^sdpa_fp16\b/m);
  assert.match(run.stdout, /^gemm_bn_scale_softmax\b/m);
});

test("bad arguments fail with one line and exit code 2", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-cli-"));
  const notPython = join(dir, "kernel.cu");
  writeFileSync(notPython, "__global__ void k() {}\n");
  const cases: [string[], RegExp][] = [
    [["eval", join(dir, "missing.py"), join(fixtures, "good.py")], /^kforge: problem not found: /],
    [
      ["eval", join(fixtures, "good.py"), join(fixtures, "good.py")],
      /^kforge: problem .* does not define class Model$/,
    ],
    [["eval", problem, join(dir, "absent.py")], /^kforge: candidate not found: /],
    [["eval", problem, notPython], /^kforge: candidate .* is not a Python file or a transcript/],
    [
      ["eval", problem, join(fixtures, "good.py"), "--python", join(dir, "no-python")],
      /^kforge: cannot run /,
    ],
  ];
  for (const [args, pattern] of cases) {
    const run = await kforge(args);
    assert.equal(run.exitCode, 2, `${args.join(" ")}: ${run.stderr}`);
    const lines = run.stderr.trim().split("\n");
    assert.equal(lines.length, 1, `one line expected, got:\n${run.stderr}`);
    assert.match(lines[0] ?? "", pattern);
  }
  const flag = await kforge(["eval", problem, join(fixtures, "good.py"), "--reference-process", "maybe"]);
  assert.equal(flag.exitCode, 2, flag.stderr);
  assert.match(flag.stderr, /--reference-process .*expected on or off/);
});

test("a correct file and a correct transcript pass; state_dict sync and the block taken are reported", async () => {
  const run = await kforge([
    "eval",
    problem,
    join(fixtures, "good.py"),
    join(fixtures, "answer.md"),
    ...cpu,
    "--json",
    "-",
  ]);
  assert.equal(run.exitCode, 0, run.stderr);
  const [file, transcript] = parseResults(run.stdout);
  assert.equal(file?.verdict, "correct");
  assert.equal(file?.paramSync.mode, "state_dict");
  assert.equal(file?.trials.length, 3);
  assert.ok(file?.trials.every((t) => t.passed && t.outputs[0]?.refVsFp64.relL2 !== null));
  assert.equal(transcript?.verdict, "correct");
  assert.equal(transcript?.origin.kind, "transcript");
  assert.equal(transcript?.origin.blockIndex, 1);
  assert.equal(transcript?.origin.blockCount, 1);
});

test("a candidate without ModelNew is an import_error and the exit code is 1", async () => {
  const run = await kforge(["eval", problem, join(fixtures, "no_model_new.py"), ...cpu, "--json", "-"]);
  assert.equal(run.exitCode, 1);
  const [result] = parseResults(run.stdout);
  assert.equal(result?.verdict, "import_error");
  assert.match(result?.reason ?? "", /ModelNew/);
});

test("a hanging candidate is killed at --timeout and the next candidate is unaffected", async () => {
  const started = Date.now();
  const run = await kforge([
    "eval",
    problem,
    join(fixtures, "hangs.py"),
    join(fixtures, "good.py"),
    ...cpu,
    // The limit is each candidate's: the good one's whole evaluation (a tiny CPU problem, ~10 s on a quiet 2-core
    // machine) must fit it with room for a loaded one.
    "--timeout",
    "40",
    "--json",
    "-",
  ]);
  const [hung, good] = parseResults(run.stdout);
  assert.equal(hung?.verdict, "timeout");
  assert.match(hung?.reason ?? "", /killed after 40 s/);
  assert.equal(good?.verdict, "correct");
  assert.equal(run.exitCode, 1);
  assert.ok(Date.now() - started < 150_000);
});

test("a crashing candidate is a runtime_error naming the signal", async () => {
  const run = await kforge(["eval", problem, join(fixtures, "segfaults.py"), ...cpu, "--json", "-"]);
  const [result] = parseResults(run.stdout);
  assert.equal(result?.verdict, "runtime_error");
  assert.match(result?.reason ?? "", /SIGSEGV/);
});

test("processes a candidate leaves behind are killed and flagged", async () => {
  const pidFile = join(mkdtempSync(join(tmpdir(), "kforge-pid-")), "pid");
  const run = await kforge(["eval", problem, join(fixtures, "forks.py"), ...cpu, "--json", "-"], {
    KFORGE_TEST_PIDFILE: pidFile,
  });
  const [result] = parseResults(run.stdout);
  assert.notEqual(result?.verdict, "correct");
  assert.ok(existsSync(pidFile), "the fixture recorded its child's pid");
  const pid = Number(readFileSync(pidFile, "utf8"));
  // A killed process nobody has reaped yet is a zombie: it no longer runs.
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, "utf8") : "";
  const alive = stat !== "" && !/^\d+ \(.*\) Z/.test(stat);
  assert.equal(alive, false, `process ${pid} outlived the worker`);
  assert.ok(
    result?.checks.some((c) => c.outcome === "fail"),
    `a failing check is expected: ${JSON.stringify(result?.checks)}`,
  );
});

test("kforge doctor reports node, python and torch", async () => {
  const run = await kforge(["doctor"]);
  assert.match(run.stdout, /^ok\s+node\s+v\d+/m);
  assert.match(run.stdout, /^ok\s+python\s+/m);
  assert.match(run.stdout, /^ok\s+torch\s+\d+\.\d+/m);
  assert.match(run.stdout, /GPU/);
});
