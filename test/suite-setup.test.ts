// Which slots a suite gets (GPU ids, their environment), the suite options' one-line errors, and the ETA.
import assert from "node:assert/strict";
import { test } from "node:test";
import { aheadDepth, defaultPrebuildJobs, setupSuite, workersAhead } from "../src/cli/suite-flags.ts";
import { UsageError } from "../src/errors.ts";
import type { EvalTask } from "../src/suite/eval-suite.ts";
import { buildEnv, gpuSlots, parseGpus, visibleGpuIds } from "../src/suite/gpus.ts";
import { countsLine, createSuiteProgress, etaSeconds } from "../src/suite/progress.ts";
import type { ProgressMessage } from "../src/worker/protocol.ts";

test("one slot per GPU, each pinned to its physical id; a user's CUDA_VISIBLE_DEVICES is respected", () => {
  const probe = { gpuCount: 2, cudaArchList: "9.0+PTX" };
  assert.deepEqual(
    gpuSlots("all", probe, { CUDA_VISIBLE_DEVICES: "2,3" }).map((s) => [s.id, s.env.CUDA_VISIBLE_DEVICES]),
    [
      ["gpu2", "2"],
      ["gpu3", "3"],
    ],
  );
  assert.deepEqual(visibleGpuIds(3, {}), ["0", "1", "2"]);
  assert.equal(gpuSlots(1, { gpuCount: 4 }, {}).length, 1);
  assert.equal(gpuSlots(1, { gpuCount: 4 }, {})[0]?.env.CUDA_VISIBLE_DEVICES, "0", "--gpus 1 pins GPU 0");
  // No --gpus on a one-GPU host: the worker's environment is left as it was (bar the pinned arch list).
  assert.deepEqual(gpuSlots(undefined, { gpuCount: 1, cudaArchList: "9.0+PTX" }, {}), [
    { id: "gpu", env: { TORCH_CUDA_ARCH_LIST: "9.0+PTX" } },
  ]);
  assert.throws(() => gpuSlots(3, { gpuCount: 2 }, {}), /--gpus 3: only 2 GPU\(s\) visible/);
});

test("the user's TORCH_CUDA_ARCH_LIST wins over the probed one", () => {
  assert.deepEqual(buildEnv({ cudaArchList: "9.0+PTX" }, { TORCH_CUDA_ARCH_LIST: "8.0" }), {});
  assert.deepEqual(buildEnv({ cudaArchList: null }, {}), {});
});

test("--gpus takes a positive integer or all", () => {
  assert.equal(parseGpus("all"), "all");
  assert.equal(parseGpus("4"), 4);
  assert.throws(() => parseGpus("0"), /positive integer or all/);
  assert.throws(() => parseGpus("two"), /positive integer or all/);
});

test("suite options that cannot work together fail in one line before any work", async () => {
  await assert.rejects(
    setupSuite({ resume: true }, "cuda"),
    (e) => e instanceof UsageError && /--resume needs --jsonl/.test(e.message),
  );
  await assert.rejects(setupSuite({ ray: "auto", gpus: 2 }, "cuda"), /--gpus is for local runs/);
  const ray = await setupSuite({ ray: "auto", jsonl: "x.jsonl", resume: true }, "cpu");
  assert.deepEqual(ray.suite, { ray: { address: "auto", device: "cpu" }, journal: "x.jsonl", resume: true });
  assert.equal(ray.parallel, true);
});

test("prebuild jobs take half the cores the GPU workers leave, at least one", () => {
  assert.equal(defaultPrebuildJobs(1, 16), 7);
  assert.equal(defaultPrebuildJobs(8, 16), 4);
  assert.equal(defaultPrebuildJobs(1, 2), 1);
});

test("the ETA comes from this run's own rate; resumed results cost nothing", () => {
  assert.equal(etaSeconds({ done: 0, total: 10, ranHere: 0 }, 5), null);
  assert.equal(etaSeconds({ done: 4, total: 10, ranHere: 2 }, 20), 60);
  assert.equal(etaSeconds({ done: 10, total: 10, ranHere: 10 }, 50), null);
  assert.equal(
    countsLine({ done: 4, total: 10, ranHere: 2 }, 20),
    "4/10 done · 20.0 s elapsed · ETA 1 min 0 s",
  );
});

test("with several GPUs each slot prints its stage changes, and within a stage at most one line per interval", () => {
  const lines: string[] = [];
  const stream = { write: (s: string) => lines.push(s.trimEnd()) } as unknown as NodeJS.WriteStream;
  let t = 0;
  const progress = createSuiteProgress({
    enabled: true,
    parallel: true,
    stream,
    now: () => t,
    stageLineMs: 1000,
  });
  const task = { problem: { name: "p" }, label: "c.py" } as unknown as EvalTask;
  const msg = (stage: ProgressMessage["stage"], detail: string): ProgressMessage => ({
    type: "progress",
    stage,
    detail,
    fraction: null,
  });
  progress.hooks.started?.(task, "gpu1", 2);
  progress.hooks.progress?.(task, "gpu1", msg("verify", "check 1"));
  t = 500;
  progress.hooks.progress?.(task, "gpu1", msg("verify", "check 2"));
  progress.hooks.progress?.(task, "gpu0", msg("verify", "check 1 elsewhere"));
  t = 1600;
  progress.hooks.progress?.(task, "gpu1", msg("verify", "check 3"));
  progress.hooks.progress?.(task, "gpu1", msg("time", "timing"));
  assert.deepEqual(lines, [
    "[gpu1] c.py: started",
    "[gpu1] c.py: checks: check 1",
    "[gpu0] c.py: checks: check 1 elsewhere",
    "[gpu1] c.py: checks: check 3",
    "[gpu1] c.py: timing: timing",
  ]);
});

test("workers start ahead only with 4+ cores per GPU, and never with --no-ahead", () => {
  assert.equal(workersAhead(undefined, 2, 32), true);
  assert.equal(workersAhead(true, 1, 4), true);
  assert.equal(workersAhead(undefined, 1, 2), false); // a small box: the import would slow the timed candidate
  assert.equal(workersAhead(undefined, 8, 16), false);
  assert.equal(workersAhead(false, 1, 64), false);
  // Two ahead where a GPU has 8+ cores (one start-up outlasts a candidate's untimed part), else one.
  assert.equal(aheadDepth(1, 16), 2);
  assert.equal(aheadDepth(2, 12), 1);
  assert.equal(aheadDepth(4, 64), 2);
});
