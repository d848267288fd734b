// Ctrl-C during an evaluation: the workers run in their own process groups (out of the terminal's reach), so
// the CLI must kill them, the candidate's own processes included, before it exits.
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { execa } from "execa";
import { REPO_ROOT } from "../src/paths.ts";

/** Running, as opposed to gone or a zombie (killed, not yet reaped by whoever inherited it). */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^\d+ \(.*\) [ZX]/.test(stat);
  } catch {
    return false;
  }
};

test("an interrupted eval kills its worker's whole process group and exits 130", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-interrupt-"));
  const pidFile = join(dir, "grandchild.pid");
  const probe = JSON.stringify({
    python: "3.12.0",
    executable: "fake",
    torch: "2.11.0",
    torchError: null,
    torchCuda: null,
    cudaAvailable: false,
    gpu: null,
    driver: null,
    ninja: null,
    nvcc: null,
  });
  // A stand-in worker: answers the probe; as a worker, starts a process of its own and never finishes.
  const python = join(dir, "python");
  writeFileSync(
    python,
    [
      "#!/bin/sh",
      `if [ "$3" = "--probe" ]; then echo '${probe}'; exit 0; fi`,
      "cat > /dev/null",
      "sleep 300 &",
      `echo $! > ${pidFile}`,
      "sleep 300",
    ].join("\n"),
  );
  chmodSync(python, 0o755);
  const problem = join(REPO_ROOT, "test", "fixtures", "python", "problems", "tiny_add.py");
  const candidate = join(REPO_ROOT, "test", "fixtures", "python", "candidates", "add_cpp_ok.py");
  const run = execa(
    "node",
    [join(REPO_ROOT, "bin", "kforge.js"), "eval", problem, candidate, "--device", "cpu"],
    {
      reject: false,
      env: { KFORGE_PYTHON: python, KFORGE_CACHE_DIR: join(dir, "cache"), NO_COLOR: "1" },
    },
  );
  const deadline = Date.now() + 60_000;
  while (!existsSync(pidFile) || readFileSync(pidFile, "utf8").trim() === "") {
    assert.ok(Date.now() < deadline, "the stand-in worker never started");
    await new Promise((r) => setTimeout(r, 100));
  }
  const grandchild = Number(readFileSync(pidFile, "utf8").trim());
  assert.ok(alive(grandchild));
  run.kill("SIGINT");
  const exit = await run;
  assert.equal(exit.exitCode, 130);
  await new Promise((r) => setTimeout(r, 200));
  assert.ok(!alive(grandchild), "the candidate's process outlived the interrupted CLI");
});
