// Messages a newcomer trips over (issue 17): the chart names the clock really used, a transcript's chosen
// block is named in the terminal, and a CI over bimodal timing samples comes with a warning.
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import pc from "picocolors";
import { buildRequest, DEFAULT_TIMING } from "../src/eval.ts";
import { findModes, timingWarning } from "../src/report/bimodal.ts";
import { timingChart } from "../src/report/charts.ts";
import { timerName } from "../src/report/format.ts";
import { loadResultsFile } from "../src/report/load.ts";
import { finishedLine } from "../src/report/progress.ts";
import { formatResultDetail, formatResultsTable } from "../src/report/table.ts";
import type { EvalResult, TimingStats } from "../src/worker/protocol.ts";
import { failedResult } from "../src/worker/results.ts";

const plain = pc.createColors(false);
const [gpuResult] = loadResultsFile(
  join(import.meta.dirname, "fixtures", "results", "sdpa_fp16.json"),
).results;
const gpuTiming = gpuResult?.timing;
if (!gpuResult || !gpuTiming) throw new Error("fixture sdpa_fp16.json has no timed result");

/** A seeded normal sampler (Box-Muller over a small LCG): the same samples on every run. */
function normals(seed: number) {
  let state = seed;
  const uniform = () => {
    state = (state * 1664525 + 1013904223) % 2 ** 32;
    return (state + 0.5) / 2 ** 32;
  };
  return (mean: number, sd: number) =>
    mean + sd * Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
}

function stats(samplesMs: number[]): TimingStats {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.floor(q * (sorted.length - 1))] ?? 0;
  const mean = samplesMs.reduce((a, b) => a + b, 0) / samplesMs.length;
  return {
    n: samplesMs.length,
    medianMs: at(0.5),
    meanMs: mean,
    minMs: at(0),
    maxMs: at(1),
    p25Ms: at(0.25),
    p75Ms: at(0.75),
    stdMs: 0,
    samplesMs,
  };
}

const draw = normals(7);
const unimodal = Array.from({ length: 200 }, () => draw(1, 0.03));
const logNormal = Array.from({ length: 200 }, () => Math.exp(draw(0, 0.5)));
const fewSpikes = [
  ...Array.from({ length: 190 }, () => draw(1, 0.02)),
  ...Array.from({ length: 10 }, () => draw(3, 0.1)),
];
const twoModes = [
  ...Array.from({ length: 140 }, () => draw(1, 0.02)),
  ...Array.from({ length: 60 }, () => draw(1.3, 0.02)),
];

test("two separated modes are found; one mode, a skewed tail or a few spikes are not", () => {
  assert.equal(findModes(unimodal), null);
  assert.equal(findModes(logNormal), null);
  assert.equal(findModes(fewSpikes), null);
  assert.equal(findModes(twoModes.slice(0, 10)), null, "too few samples to judge");
  const modes = findModes(twoModes);
  assert.ok(modes, "the 1.0 / 1.3 ms mixture is bimodal");
  assert.ok(Math.abs(modes.lowMs - 1) < 0.02 && Math.abs(modes.highMs - 1.3) < 0.02, JSON.stringify(modes));
  assert.ok(Math.abs(modes.highShare - 0.3) < 0.02);
});

test("a tight CI over bimodal CPU samples is printed with a warning, in the table and the progress line", () => {
  const cpuTiming = {
    ...gpuTiming,
    method: "cpu perf_counter, interleaved ref/cand",
    ref: stats(twoModes),
    cand: stats(twoModes.map((v) => v * 0.999)),
    speedup: 1.0,
    speedupCi: [1.0, 1.0] as [number, number],
  };
  const cpu: EvalResult = { ...gpuResult, verdict: "correct", reason: null, timing: cpuTiming };
  assert.match(
    timingWarning(cpuTiming) ?? "",
    /^bimodal timing samples — PyTorch 0\.99\d and 1\.29 ms \(30% slow\); candidate /,
  );
  const table = formatResultsTable([cpu], { color: false, width: 160 });
  assert.match(table, /\n {2}! bimodal timing samples — .* the 95% CI assumes one population/);
  assert.match(finishedLine(cpu, "[1/1]", plain), /! bimodal timing samples/);

  const steady = { ...cpu, timing: { ...cpuTiming, ref: stats(unimodal), cand: stats(unimodal) } };
  assert.equal(timingWarning(steady.timing), null);
  assert.doesNotMatch(formatResultsTable([steady], { color: false, width: 160 }), /bimodal/);
});

test("the timing chart names the clock the worker used: CPU wall clock on CPU, CUDA events on a GPU", () => {
  assert.equal(timerName("cpu perf_counter, interleaved ref/cand"), "CPU wall clock");
  assert.equal(
    timerName("cuda events, interleaved ref/cand, L2 flush of 50 MiB before each call"),
    "CUDA events",
  );
  const cpu = {
    ...gpuResult,
    timing: { ...gpuTiming, method: "cpu perf_counter, interleaved ref/cand" },
  };
  const cpuChart = timingChart("p", [cpu]) ?? "";
  assert.match(cpuChart, /ms per forward \(CPU wall clock\)/);
  assert.doesNotMatch(cpuChart, /CUDA events/);
  assert.match(timingChart("p", [gpuResult]) ?? "", /ms per forward \(CUDA events\)/);
});

test("the terminal line of a transcript candidate says which block was taken", () => {
  const fromTranscript: EvalResult = {
    ...gpuResult,
    candidate: "answer.md",
    origin: { kind: "transcript", sourcePath: "answer.md", blockIndex: 3, blockCount: 4, note: null },
  };
  assert.match(finishedLine(fromTranscript, "[1/1]", plain), /answer\.md \(took block 3 of 4\):/);
  assert.doesNotMatch(finishedLine(gpuResult, "[1/1]", plain), /took block/);
});

test("a result the worker never sent says so instead of placeholders that read as measurements", () => {
  const request = buildRequest(
    { name: "big", path: "/p.py", summary: "", builtIn: false },
    {
      label: "c.py",
      codePath: "/c.py",
      origin: { kind: "file", sourcePath: "/c.py", blockIndex: null, blockCount: null, note: null },
    },
    {
      python: "python3",
      cacheDir: "/tmp",
      trials: 5,
      timeoutSeconds: 10,
      device: "cpu",
      precision: null,
      timing: DEFAULT_TIMING,
    },
  );
  const killed = failedResult(request, "runtime_error", "worker killed by SIGKILL before reporting a result");
  const detail = formatResultDetail(killed, { color: false });
  assert.match(detail, /environment not reported \(the worker ended before its result\)/);
  assert.match(detail, /tolerance: not reached/);
  assert.doesNotMatch(detail, /torch \?|Python unknown|atol 0/);
  // A result the worker did send keeps its numbers.
  const reported = formatResultDetail(gpuResult, { color: false });
  assert.match(reported, /torch \S+, CUDA/);
  assert.match(reported, /tolerance: atol/);
});
