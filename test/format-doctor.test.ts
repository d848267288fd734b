import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { doctorLines, missingNvccAdvice } from "../src/cli/commands/doctor.ts";
import { formatDuration } from "../src/report/format.ts";

test("durations round once: never 60 s inside a minute", () => {
  assert.equal(formatDuration(12.34), "12.3 s");
  assert.equal(formatDuration(59.96), "1 min 0 s");
  assert.equal(formatDuration(179.6), "3 min 0 s");
  assert.equal(formatDuration(125.2), "2 min 5 s");
});

function hasTorch(python: string): boolean {
  try {
    execFileSync(python, ["-c", "import torch"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

test("doctor without torch does not go on to judge torch's CUDA build", {
  skip: hasTorch("python3"),
}, async () => {
  const lines = await doctorLines("python3");
  const torch = lines.find((l) => l.what === "torch");
  assert.equal(torch?.ok, false);
  assert.ok(!lines.some((l) => l.what === "torch CUDA"), "no 'CPU build' line after 'torch missing'");
  assert.match(lines.at(-1)?.detail ?? "", /needs torch first/);
});

test("a missing nvcc sends a CPU-only torch's user nowhere near CUDA_HOME", () => {
  assert.doesNotMatch(missingNvccAdvice(null), /CUDA_HOME/);
  assert.match(missingNvccAdvice("12.1"), /CUDA_HOME/);
});

test("doctor counts the GPUs a suite spreads over", async () => {
  const probe = {
    python: "3.12.0",
    executable: "/usr/bin/python3",
    torch: "2.11.0",
    torchError: null,
    torchCuda: "13.0",
    cudaAvailable: true,
    gpu: "NVIDIA H100 80GB HBM3",
    driver: "580.65",
    ninja: "1.11",
    nvcc: "13.0",
    gpuCount: 4,
    cudaArchList: "9.0+PTX",
  };
  const fake = join(mkdtempSync(join(tmpdir(), "kforge-doctor-")), "python");
  writeFileSync(fake, `#!/bin/sh\necho '${JSON.stringify(probe)}'\n`);
  chmodSync(fake, 0o755);
  const gpu = (await doctorLines(fake)).find((l) => l.what === "GPU");
  assert.match(
    gpu?.detail ?? "",
    /^4 × NVIDIA H100 80GB HBM3 \(driver 580\.65\); suites run one worker per GPU/,
  );
});
