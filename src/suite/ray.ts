// `--ray auto|local|ADDRESS`: each evaluation runs as a Ray task that asks for one GPU (one CPU with
// --device cpu) and spawns the same isolated worker process a local run would; the driver
// (python/kforge_worker/ray_driver.py) streams each outcome back as soon as its task ends, and the outcome is
// judged here exactly as a local worker's output is (WorkerOutput: nonce, forged lines, left-over processes).
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { execa } from "execa";
import { UsageError } from "../errors.ts";
import type { EvalResult } from "../worker/protocol.ts";
import { workerEnv } from "../worker/python.ts";
import { failedResult } from "../worker/results.ts";
import { secretSeed, WorkerOutput } from "../worker/run.ts";
import type { EvalTask } from "./eval-suite.ts";
import { RayDriverMessage, type RayOutcome, type RayTask } from "./ray-protocol.ts";

export interface RayOptions {
  /** "auto" (a running cluster found by Ray), "local" (a head started for this run), or a cluster address. */
  address: string;
  device: "cuda" | "cpu";
}

export interface RayHooks {
  finished: (task: EvalTask, result: EvalResult, node: string) => void;
  note?: (line: string) => void;
}

export function rayTask(task: EvalTask, secret: string, timeoutMs: number): RayTask {
  return {
    id: String(task.index),
    request: task.request,
    problemSource: readFileSync(task.problem.path, "utf8"),
    candidateSource:
      task.request.candidate.source ?? (task.codePath === null ? "" : readFileSync(task.codePath, "utf8")),
    timeoutSeconds: timeoutMs / 1000,
    secret,
  };
}

/** The EvalResult of one streamed outcome: the same judgement as a local run of that worker process. */
export function outcomeResult(task: EvalTask, outcome: RayOutcome, timeoutMs: number): EvalResult {
  if (outcome.rayError !== null)
    return failedResult(
      task.request,
      "runtime_error",
      `Ray could not run the evaluation: ${outcome.rayError}`,
    );
  const output = new WorkerOutput(task.request, {}, outcome.judge?.nonce);
  for (const line of outcome.judge?.lines ?? []) output.judgeLine(line);
  for (const line of outcome.stdout) output.stdoutLine(line);
  for (const line of outcome.stderrTail) output.stderrLine(line);
  return output.finish(outcome, timeoutMs);
}

export async function runOnRay(
  tasks: EvalTask[],
  options: RayOptions & { python: string; timeoutMs: number },
  hooks: RayHooks,
): Promise<void> {
  if (tasks.length === 0) return;
  const byId = new Map(tasks.map((t) => [String(t.index), t]));
  const driver = execa(
    options.python,
    ["-m", "kforge_worker.ray_driver", "--address", options.address, "--device", options.device],
    {
      env: workerEnv(),
      reject: false,
      buffer: { stdout: false, stderr: true },
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  let fatal: string | null = null;
  const reading = (async () => {
    if (!driver.stdout) return;
    for await (const line of createInterface({ input: driver.stdout })) {
      if (line.trim() === "") continue;
      let message: RayDriverMessage;
      try {
        message = RayDriverMessage.parse(JSON.parse(line));
      } catch {
        hooks.note?.(`ray driver: ${line.slice(0, 200)}`);
        continue;
      }
      if (message.type === "fatal") fatal = message.message;
      else if (message.type === "ready") {
        const r = message.resources;
        hooks.note?.(
          `Ray cluster: ${r.GPU ?? 0} GPU, ${r.CPU ?? 0} CPU; ${tasks.length} evaluation(s) submitted`,
        );
      } else {
        const task = byId.get(message.id);
        if (!task) continue;
        byId.delete(message.id);
        hooks.finished(task, outcomeResult(task, message, options.timeoutMs), message.node);
      }
    }
  })();
  for (const task of tasks)
    driver.stdin?.write(`${JSON.stringify(rayTask(task, secretSeed(), options.timeoutMs))}\n`);
  driver.stdin?.end();
  const exit = await driver;
  await reading;
  if (byId.size > 0) {
    const stderr = String(exit.stderr ?? "")
      .trim()
      .split("\n")
      .slice(-3)
      .join(" | ");
    const why = fatal ?? (stderr || `the Ray driver exited with code ${exit.exitCode}`);
    if (byId.size === tasks.length) throw new UsageError(`--ray ${options.address}: ${why}`);
    for (const task of byId.values())
      hooks.finished(task, failedResult(task.request, "runtime_error", `Ray driver stopped: ${why}`), "?");
  }
}
