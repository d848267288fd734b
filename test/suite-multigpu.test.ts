// A simulated multi-GPU host on CPU: stand-in workers that sleep per task and log which GPU
// (CUDA_VISIBLE_DEVICES) ran which candidate. Proves N GPUs finish a suite in <= 1.15 x (1-GPU time / N),
// that each candidate is placed on exactly one GPU, and that crashes and lost GPUs are charged correctly.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { buildRequest, DEFAULT_TIMING, type EvalOptions } from "../src/eval.ts";
import type { Problem } from "../src/problem/problems.ts";
import { evaluateSuite } from "../src/suite/eval-suite.ts";
import { gpuSlots } from "../src/suite/gpus.ts";
import { JournalEntry, readJournal } from "../src/suite/journal.ts";
import { failedResult } from "../src/worker/results.ts";

const dir = mkdtempSync(join(tmpdir(), "kforge-multigpu-"));
const problemPath = join(dir, "problem.py");
writeFileSync(problemPath, "class Model: pass\ndef get_inputs(): return []\n");
const problem: Problem = { name: "problem", path: problemPath, summary: "", builtIn: false };

function candidates(n: number, prefix: string): string[] {
  return Array.from({ length: n }, (_, i) => {
    const path = join(dir, `${prefix}${i}.py`);
    writeFileSync(path, `class ModelNew: pass  # ${prefix} ${i}\n`);
    return path;
  });
}

/** A worker's result line for some candidate of this problem (the CLI keeps it as the worker sent it). */
function resultLine(verdict: "correct" | "runtime_error", reason: string | null): string {
  const request = buildRequest(
    problem,
    {
      label: "c.py",
      codePath: "c.py",
      origin: { kind: "file", sourcePath: "c.py", blockIndex: null, blockCount: null, note: null },
    },
    options("python3"),
  );
  // The worker stamps its lines with the request's nonce; the fake's shell copies it in for NONCE.
  const line = { type: "result", nonce: "NONCE", result: { ...failedResult(request, verdict, ""), reason } };
  return `echo '${JSON.stringify(line)}' | sed "s/NONCE/$nonce/"`;
}

/**
 * A stand-in for `python -m kforge_worker`: logs "<CUDA_VISIBLE_DEVICES> <candidate path>" and answers
 * after `seconds` with a correct result; `body` runs first and may answer or die instead. A prebuild
 * (`--build`) takes `buildSeconds`.
 */
function fakeWorker(
  name: string,
  seconds: number,
  body = "",
  buildSeconds = 0,
): { python: string; log: string } {
  const log = join(dir, `${name}.log`);
  const python = join(dir, `${name}.sh`);
  // `-m kforge_worker --build FILE`: the CPU-side prebuild, logged as "built FILE" when it ends.
  const build = `if [ "$3" = "--build" ]; then sleep ${buildSeconds}; echo "built $4" >> ${log}; echo '{"ok":true,"seconds":${buildSeconds},"error":null}'; exit 0; fi`;
  writeFileSync(
    python,
    [
      "#!/bin/sh",
      build,
      "req=$(cat)",
      `cand=$(printf '%s' "$req" | sed -n 's/.*"candidate":{"path":"\\([^"]*\\)".*/\\1/p')`,
      `nonce=$(printf '%s' "$req" | sed -n 's/.*"nonce":"\\([0-9a-f]*\\)".*/\\1/p')`,
      `echo "$CUDA_VISIBLE_DEVICES $cand" >> ${log}`,
      body,
      `sleep ${seconds}`,
      resultLine("correct", null),
    ].join("\n"),
  );
  chmodSync(python, 0o755);
  writeFileSync(log, "");
  return { python, log };
}

function options(python: string): EvalOptions {
  return {
    python,
    cacheDir: join(dir, "cache"),
    trials: 1,
    timeoutSeconds: 30,
    device: "cuda",
    precision: null,
    seed: 1,
    timing: { ...DEFAULT_TIMING, enabled: false },
  };
}

const fourGpus = gpuSlots("all", { gpuCount: 4, cudaArchList: "9.0+PTX" }, {});

function placements(log: string): string[][] {
  return readFileSync(log, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => l.split(" "));
}

test("4 simulated GPUs finish a suite in <= 1.15 x (1-GPU time / 4), each candidate on exactly one GPU", async () => {
  const files = candidates(12, "speed");
  const items = files.map((candidateArg) => ({ problem, candidateArg }));
  // A GPU phase of 1 s: each fake worker's start (a shell, sed) costs ~0.07 s of CPU, and four of them share CI's two
  // cores; at 0.4 s that start-up alone took the ratio past 1.15 on a quiet CI machine.
  const one = fakeWorker("one", 1.0);
  let t = performance.now();
  await evaluateSuite(items, options(one.python), {
    slots: [{ id: "gpu0", env: { CUDA_VISIBLE_DEVICES: "0" } }],
  });
  const oneGpu = (performance.now() - t) / 1000;

  const four = fakeWorker("four", 1.0);
  t = performance.now();
  const results = await evaluateSuite(items, options(four.python), { slots: fourGpus });
  const fourGpuTime = (performance.now() - t) / 1000;

  assert.deepEqual(
    results.map((r) => r.reason),
    results.map(() => null),
  );
  assert.ok(
    fourGpuTime <= 1.15 * (oneGpu / 4),
    `4 GPUs took ${fourGpuTime.toFixed(2)} s, 1 GPU ${oneGpu.toFixed(2)} s: over 1.15 x 1/4`,
  );
  const placed = placements(four.log);
  assert.equal(placed.length, 12, "12 worker runs for 12 candidates");
  assert.deepEqual(placed.map(([, c]) => c).sort(), [...files].sort(), "each candidate placed exactly once");
  assert.deepEqual(new Set(placed.map(([gpu]) => gpu)), new Set(["0", "1", "2", "3"]));
  assert.equal(fourGpus[0]?.env.TORCH_CUDA_ARCH_LIST, "9.0+PTX", "builds pinned to the GPUs' arch list");
});

test("a crashing worker is charged to its own candidate; a lost GPU's task is requeued and the GPU retired", async () => {
  const files = candidates(6, "faults");
  const crasher = files[2] as string;
  // gpu3's torch sees no GPU (as pipeline.py reports it); candidate 2 kills its own worker.
  const lostGpu = `device cuda requested but torch 2.11 (CUDA 13.0) sees no GPU`;
  const worker = fakeWorker(
    "faults",
    0.05,
    [
      `if [ "$CUDA_VISIBLE_DEVICES" = 3 ]; then ${resultLine("runtime_error", lostGpu)}; exit 0; fi`,
      `case "$cand" in ${crasher}) echo 'Segmentation fault' >&2; kill -SEGV $$;; esac`,
    ].join("\n"),
  );
  const journal = join(dir, "faults.jsonl");
  const notes: string[] = [];
  const results = await evaluateSuite(
    files.map((candidateArg) => ({ problem, candidateArg })),
    options(worker.python),
    { slots: fourGpus, journal },
    { note: (line) => notes.push(line) },
  );
  assert.equal(results[2]?.verdict, "runtime_error");
  assert.match(results[2]?.reason ?? "", /killed by SIGSEGV/);
  for (const i of [0, 1, 3, 4, 5]) assert.equal(results[i]?.verdict, "correct", `candidate ${i}`);
  assert.ok(
    notes.some((n) => /^gpu3 retired/.test(n)),
    notes.join("\n"),
  );
  // The journal holds exactly one entry per candidate: the requeued ones are not charged twice.
  assert.equal(readFileSync(journal, "utf8").trim().split("\n").length, 6);
  assert.equal(readJournal(journal).results.size, 6);
  // Each entry says which GPU ran it and when (the suite's per-GPU busy time); the retired GPU ran none.
  const entries = readFileSync(journal, "utf8")
    .trim()
    .split("\n")
    .map((line) => JournalEntry.parse(JSON.parse(line)));
  for (const entry of entries) {
    assert.match(entry.slot ?? "", /^gpu[012]$/);
    assert.ok(entry.startedAt !== undefined && entry.finishedAt !== undefined);
    assert.ok(entry.startedAt <= entry.finishedAt);
  }
});

test("--resume skips what the journal holds and runs only the rest", async () => {
  const files = candidates(4, "resume");
  const worker = fakeWorker("resume", 0);
  const journal = join(dir, "resume.jsonl");
  const items = files.map((candidateArg) => ({ problem, candidateArg }));
  await evaluateSuite(items.slice(0, 2), options(worker.python), { journal });
  writeFileSync(worker.log, "");
  // An interruption can tear the last line: it is ignored, and nothing else is lost.
  writeFileSync(journal, `${readFileSync(journal, "utf8")}{"key":"torn`);
  let resumed = -1;
  const results = await evaluateSuite(
    items,
    options(worker.python),
    { journal, resume: true },
    { resumed: (n) => (resumed = n) },
  );
  assert.equal(resumed, 2);
  assert.equal(results.length, 4);
  assert.deepEqual(
    placements(worker.log).map(([, c]) => c),
    files.slice(2),
  );
});

test("pipelined: builds run ahead on the CPU, so a suite's wall time stays near the sum of its GPU phases", async () => {
  // Every candidate builds an extension (1 s of CPU each) and then needs 0.5 s of GPU: strictly in turn
  // that is 12 s; with two builds at a time ahead of the GPU, about 0.5 + 8 x 0.5 + the first build.
  const files = Array.from({ length: 8 }, (_, i) => {
    const path = join(dir, `pipelined${i}.py`);
    writeFileSync(path, `from torch.utils.cpp_extension import load_inline  # ${i}\nclass ModelNew: pass\n`);
    return path;
  });
  const worker = fakeWorker("pipelined", 0.5, "", 1);
  const started = performance.now();
  const results = await evaluateSuite(
    files.map((candidateArg) => ({ problem, candidateArg })),
    options(worker.python),
    { slots: [{ id: "gpu0", env: {} }], prebuildJobs: 2 },
  );
  const wall = (performance.now() - started) / 1000;
  assert.ok(results.every((r) => r.verdict === "correct"));
  const gpuPhases = 8 * 0.5;
  const firstBuild = 1;
  assert.ok(
    wall <= 1.3 * gpuPhases + firstBuild,
    `wall ${wall.toFixed(2)} s for ${gpuPhases} s of GPU phases`,
  );
  // Each evaluation started only after its own build had finished.
  const lines = readFileSync(worker.log, "utf8").split("\n");
  for (const file of files) {
    const built = lines.indexOf(`built ${file}`);
    const evaluated = lines.findIndex((l) => l.endsWith(` ${file}`) && !l.startsWith("built"));
    assert.ok(built >= 0 && evaluated > built, `${file}: built at line ${built}, evaluated at ${evaluated}`);
  }
});

/**
 * A stand-in worker with a start-up (as torch's import and the device's set-up take seconds): it ticks into
 * `<name>.ticks` while starting, then reads its request (and, started ahead, its go line), says it is timing,
 * and logs when its timing starts and ends.
 */
function workerWithStartUp(
  name: string,
  startupTicks: number,
  seconds: number,
): { python: string; dir: string } {
  const python = join(dir, `${name}.sh`);
  const ticks = join(dir, `${name}.ticks`);
  const timing = join(dir, `${name}.timing`);
  const progress = `echo '{"type":"progress","nonce":"NONCE","stage":"time","detail":"timing","fraction":null}' | sed "s/NONCE/$nonce/"`;
  writeFileSync(
    python,
    [
      "#!/bin/sh",
      `i=0; while [ $i -lt ${startupTicks} ]; do date +%s%N >> ${ticks}; sleep 0.02; i=$((i+1)); done`,
      "req=$(cat)",
      // Started ahead and called off (no go line): nothing to judge.
      `case "$req" in *'"waitForGo":true'*) printf '%s\\n' "$req" | grep -qx go || exit 0;; esac`,
      `nonce=$(printf '%s' "$req" | sed -n 's/.*"nonce":"\\([0-9a-f]*\\)".*/\\1/p')`,
      progress,
      "sleep 0.1", // the pause reaches the next worker while this one warms up
      `echo "start $(date +%s%N)" >> ${timing}`,
      `sleep ${seconds}`,
      `echo "end $(date +%s%N)" >> ${timing}`,
      resultLine("correct", null),
    ].join("\n"),
  );
  chmodSync(python, 0o755);
  writeFileSync(ticks, "");
  writeFileSync(timing, "");
  return { python, dir };
}

test("workers started ahead take the start-up off the GPU's path and never run while a candidate is timed", async () => {
  const files = candidates(5, "ahead");
  const items = files.map((candidateArg) => ({ problem, candidateArg }));
  const slot = [{ id: "gpu0", env: { CUDA_VISIBLE_DEVICES: "0" } }];

  const cold = workerWithStartUp("cold", 20, 0.2); // ~0.4 s of start-up, 0.3 s of work
  let t = performance.now();
  const coldResults = await evaluateSuite(items, options(cold.python), { slots: slot });
  const coldSeconds = (performance.now() - t) / 1000;

  const warm = workerWithStartUp("warm", 20, 0.2);
  t = performance.now();
  const warmResults = await evaluateSuite(items, options(warm.python), { slots: slot, workersAhead: true });
  const warmSeconds = (performance.now() - t) / 1000;

  for (const results of [coldResults, warmResults])
    assert.deepEqual(
      results.map((r) => r.verdict),
      files.map(() => "correct"),
    );
  assert.ok(
    warmSeconds < 0.8 * coldSeconds,
    `ahead ${warmSeconds.toFixed(2)} s vs cold ${coldSeconds.toFixed(2)} s`,
  );
  // Start-up ticks of the next worker never fall inside a candidate's timing.
  const ticks = readFileSync(join(dir, "warm.ticks"), "utf8").trim().split("\n").map(BigInt);
  const lines = readFileSync(join(dir, "warm.timing"), "utf8").trim().split("\n");
  assert.equal(lines.length, 10, "five timings, each with a start and an end");
  for (let i = 0; i < lines.length; i += 2) {
    const start = BigInt((lines[i] as string).split(" ")[1] as string);
    const end = BigInt((lines[i + 1] as string).split(" ")[1] as string);
    const inside = ticks.filter((tick) => tick > start && tick < end);
    assert.equal(inside.length, 0, `${inside.length} start-up ticks inside timing ${i / 2}`);
  }
});
