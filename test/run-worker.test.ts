// The worker runner against stand-in workers: protocol parsing, crashes, timeouts and leftover processes.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { toBenchRecord } from "../src/bench/records.ts";
import { buildRequest, DEFAULT_TIMING } from "../src/eval.ts";
import { EvalRequest, type ProgressMessage } from "../src/worker/protocol.ts";
import { failedResult } from "../src/worker/results.ts";
import { runWorker } from "../src/worker/run.ts";
import { stubRequest } from "./helpers/stub-request.ts";

const dir = mkdtempSync(join(tmpdir(), "kforge-run-"));

const request: EvalRequest = stubRequest(dir, 5, 1);

const correct = { ...failedResult(request, "correct", ""), reason: null };
const resultLine = JSON.stringify({ type: "result", result: correct });
const progressLine = JSON.stringify({ type: "progress", stage: "check", detail: "trial 1/5", fraction: 0.2 });

/** A stand-in for `python -m kforge_worker`: a shell script that ignores its arguments. */
function fakeWorker(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\ncat > /dev/null\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

test("progress lines reach the callback and the result line is returned", async () => {
  const python = fakeWorker("ok.sh", `echo '${progressLine}'\necho 'compiling...' >&2\necho '${resultLine}'`);
  const seen: ProgressMessage[] = [];
  const logs: string[] = [];
  const result = await runWorker(request, {
    python,
    timeoutMs: 10_000,
    onProgress: (m) => seen.push(m),
    onLog: (l) => logs.push(l),
  });
  assert.equal(result.verdict, "correct");
  assert.deepEqual(
    seen.map((m) => m.detail),
    ["trial 1/5"],
  );
  assert.deepEqual(logs, ["compiling..."]);
});

test("a worker that dies without a result is a runtime_error with its exit code and last stderr lines", async () => {
  const python = fakeWorker("dies.sh", "echo 'not json'\necho 'Traceback: boom' >&2\nexit 3");
  const result = await runWorker(request, { python, timeoutMs: 10_000 });
  assert.equal(result.verdict, "runtime_error");
  assert.match(result.reason ?? "", /exited with code 3/);
  assert.match(result.reason ?? "", /Traceback: boom/);
});

test("a worker past its time limit is killed and reported as a timeout", async () => {
  const python = fakeWorker("sleeps.sh", "sleep 30");
  const started = Date.now();
  const result = await runWorker(request, { python, timeoutMs: 1_000 });
  assert.equal(result.verdict, "timeout");
  assert.ok(Date.now() - started < 10_000, "killed promptly");
});

test("a worker past its time limit is asked where it was before the kill, and the timeout says whose code ran", async () => {
  // A stand-in that registers the stack dump as the real worker does (python/kforge_worker/__main__.py) and spins in
  // a function of a file that plays the candidate.
  const candidate = join(dir, "spinning_candidate.py");
  writeFileSync(
    candidate,
    "import time\ndef forward_that_never_returns():\n    while True:\n        time.sleep(0.01)\n",
  );
  const program = [
    "import faulthandler, signal, sys, runpy",
    "faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)",
    `runpy.run_path(${JSON.stringify(candidate)})["forward_that_never_returns"]()`,
  ].join("\n");
  const python = fakeWorker("spins.sh", `exec python3 -c '${program}'`);
  const spinning = { ...request, candidate: { ...request.candidate, path: candidate } };
  const result = await runWorker(spinning, { python, timeoutMs: 1_500 });
  assert.equal(result.verdict, "timeout");
  assert.match(
    result.reason ?? "",
    /killed after 1\.5 s without finishing; it was in the candidate's code: /,
  );
  assert.match(result.reason ?? "", /spinning_candidate\.py:4 in forward_that_never_returns/);
});

test("a correct result with processes left behind becomes cheating with a failed process_leftovers check", async () => {
  const python = fakeWorker("leaves.sh", `(sleep 60 >/dev/null 2>&1 &)\necho '${resultLine}'`);
  const result = await runWorker(request, { python, timeoutMs: 10_000 });
  assert.equal(result.verdict, "cheating");
  assert.ok(result.checks.some((c) => c.name === "process_leftovers" && c.outcome === "fail"));
});

test("with a nonce, an unstamped result line is a forgery and the candidate is cheating", async () => {
  const nonce = "0123456789abcdef0123456789abcdef";
  const stamped = JSON.stringify({ type: "result", nonce, result: correct });
  const python = fakeWorker("forged.sh", `echo '${resultLine}'\necho '${stamped}'`);
  const result = await runWorker({ ...request, nonce }, { python, timeoutMs: 10_000 });
  assert.equal(result.verdict, "cheating");
  assert.match(result.reason ?? "", /^result_channel: a result message without this run's nonce/);
});

test("two stamped result lines are tampering; one is accepted", async () => {
  const nonce = "fedcba9876543210fedcba9876543210";
  const stamped = JSON.stringify({ type: "result", nonce, result: correct });
  const once = await runWorker(
    { ...request, nonce },
    { python: fakeWorker("once.sh", `echo '${stamped}'`), timeoutMs: 10_000 },
  );
  assert.equal(once.verdict, "correct");
  const twice = fakeWorker("twice.sh", `echo '${stamped}'\necho '${stamped}'`);
  const result = await runWorker({ ...request, nonce }, { python: twice, timeoutMs: 10_000 });
  assert.equal(result.verdict, "cheating");
  assert.match(result.reason ?? "", /2 result messages/);
});

test("bench records carry the required fields and correct only for a correct verdict", () => {
  const timed = {
    ...correct,
    environment: { ...correct.environment, gpu: "NVIDIA H100 80GB HBM3", torch: "2.11.0", cuda: "13.0" },
    timing: {
      ref: {
        n: 3,
        medianMs: 2,
        meanMs: 2,
        minMs: 2,
        maxMs: 2,
        p25Ms: 2,
        p75Ms: 2,
        stdMs: 0,
        samplesMs: [2, 2, 2],
      },
      cand: {
        n: 3,
        medianMs: 1,
        meanMs: 1,
        minMs: 1,
        maxMs: 1,
        p25Ms: 1,
        p75Ms: 1,
        stdMs: 0,
        samplesMs: [1, 1, 1],
      },
      speedup: 2,
      speedupCi: [1.9, 2.1] as [number, number],
      l2FlushBytes: 0,
      method: "cuda-events",
      smClockMhz: { start: null, end: null },
    },
  };
  const record = toBenchRecord(timed, "identity", new Date("2026-11-22T05:00:00Z"));
  assert.equal(record.device, "NVIDIA H100 80GB HBM3");
  assert.equal(record.date, "2026-11-22");
  assert.deepEqual([record.ref_ms, record.ours_ms, record.speedup, record.correct], [2, 1, 2, true]);
  const wrong = toBenchRecord({ ...timed, verdict: "incorrect" }, "identity");
  assert.equal(wrong.correct, false);
});

test("--reference-process reaches the worker's request only when given (absent: the worker's device default)", () => {
  const problem = { name: "p", path: "p.py", summary: "", builtIn: false };
  const candidate = {
    label: "c.py",
    codePath: "c.py",
    origin: { kind: "file" as const, sourcePath: "c.py", blockIndex: null, blockCount: null, note: null },
  };
  const base = {
    python: "python3",
    cacheDir: "/tmp",
    trials: 1,
    timeoutSeconds: 10,
    device: "cuda" as const,
    precision: null,
    timing: DEFAULT_TIMING,
  };
  const absent = EvalRequest.parse(buildRequest(problem, candidate, base));
  assert.equal(absent.options.referenceProcess, undefined);
  const on = EvalRequest.parse(buildRequest(problem, candidate, { ...base, referenceProcess: true }));
  assert.equal(on.options.referenceProcess, true);
  const off = EvalRequest.parse(buildRequest(problem, candidate, { ...base, referenceProcess: false }));
  assert.equal(off.options.referenceProcess, false);
});
