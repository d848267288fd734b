// Capture: runs `python -m kforge_worker --capture PROBLEM` and returns its graph, validated against the
// zod `Graph` the planner reads. A file that is not a usable problem is the user's error (UsageError, one
// line, from the worker's exit 2); a worker that crashes or answers off-schema is ours, said plainly.
import { execa } from "execa";
import { UsageError } from "../errors.ts";
import { choosePython, workerEnv } from "../worker/python.ts";
import { Graph } from "./graph.ts";

export interface CaptureOptions {
  /** The Python executable (else $KFORGE_PYTHON, else python3). */
  python?: string;
  /** Wall-clock limit; RNN-heavy models can take a minute on a slow CPU. */
  timeoutMs?: number;
}

/** The worker's exit status for a problem file it cannot use (python/kforge_worker/__main__.py). */
const BAD_PROBLEM_EXIT = 2;

function lastLines(text: string, count: number): string {
  return text.trim().split("\n").slice(-count).join(" | ");
}

export async function captureProblem(problemPath: string, opts: CaptureOptions = {}): Promise<Graph> {
  const python = choosePython(opts.python);
  const run = await execa(python.executable, ["-m", "kforge_worker", "--capture", problemPath], {
    env: workerEnv(),
    timeout: opts.timeoutMs ?? 300_000,
    reject: false,
    maxBuffer: 256 * 1024 * 1024,
  });
  if (run.exitCode === BAD_PROBLEM_EXIT) {
    const line = lastLines(run.stderr, 1).replace(/^kforge_worker: /, "");
    throw new UsageError(line || `cannot capture ${problemPath}`);
  }
  if (run.exitCode !== 0) {
    const why = run.timedOut
      ? `timed out after ${(opts.timeoutMs ?? 300_000) / 1000}s`
      : run.exitCode === undefined
        ? `could not run ${python.executable} (${python.source}): ${run.shortMessage?.split("\n")[0] ?? "failed to start"}`
        : `exit ${run.exitCode}${run.signal ? ` (${run.signal})` : ""}: ${lastLines(run.stderr, 3)}`;
    throw new Error(`capture worker failed on ${problemPath}: ${why}`);
  }
  let data: unknown;
  try {
    data = JSON.parse(run.stdout);
  } catch {
    throw new Error(
      `capture worker printed no graph JSON for ${problemPath}: ${lastLines(run.stdout, 1).slice(0, 200)}`,
    );
  }
  const parsed = Graph.safeParse(data);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new Error(
      `capture worker's graph for ${problemPath} does not match graph.ts: ${issues.join("; ")}`,
    );
  }
  return parsed.data;
}
