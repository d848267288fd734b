// Capture: runs `python -m kforge_worker --capture PROBLEM` and returns its graph, validated against the
// zod `Graph` the planner reads. A file that is not a usable problem is the user's error (UsageError, one
// line, from the worker's exit 2); a worker that crashes or answers off-schema is ours, said plainly.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { UsageError } from "../errors.ts";
import { choosePython, workerEnv } from "../worker/python.ts";
import {
  type CaptureSlot,
  cachedCapture,
  captureSlot,
  pythonIdentity,
  storeCapture,
} from "./capture-cache.ts";
import { Graph } from "./graph.ts";

export interface CaptureOptions {
  /** The Python executable (else $KFORGE_PYTHON, else python3). */
  python?: string;
  /** Wall-clock limit; RNN-heavy models can take a minute on a slow CPU. */
  timeoutMs?: number;
  /** kforge's cache folder: graphs captured before from the same sources by the same Python are reused, fresh
   * ones kept (capture-cache.ts). Without it every problem is captured. */
  cacheDir?: string;
}

/** Each path's cache slot (null: uncached), when a cache folder is given and the Python can say who it is. */
async function slotsFor(paths: string[], python: string, cacheDir?: string): Promise<(CaptureSlot | null)[]> {
  const identity = cacheDir ? await pythonIdentity(python) : null;
  return paths.map((path) => (cacheDir && identity ? captureSlot(cacheDir, path, identity) : null));
}

/** The worker's exit status for a problem file it cannot use (python/kforge_worker/__main__.py). */
const BAD_PROBLEM_EXIT = 2;

function lastLines(text: string, count: number): string {
  return text.trim().split("\n").slice(-count).join(" | ");
}

function parseGraph(problemPath: string, text: string): Graph {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new Error(
      `capture worker printed no graph JSON for ${problemPath}: ${lastLines(text, 1).slice(0, 200)}`,
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

/** Several problems in one worker process (torch imported once: ~10 s saved per problem). A problem the batch
 * did not finish (the worker crashed or hung on it, or one before it) is captured in its own process, so one
 * bad file costs only itself. Each entry is its Graph, or the error its own capture would have thrown. */
export async function captureProblems(
  paths: string[],
  opts: CaptureOptions = {},
): Promise<(Graph | Error)[]> {
  const python = choosePython(opts.python);
  const slots = await slotsFor(paths, python.executable, opts.cacheDir);
  const cached = slots.map((slot) => (slot ? cachedCapture(slot) : null));
  const missing = paths.filter((_, index) => cached[index] === null);
  const fresh = missing.length > 0 ? await captureBatch(missing, python.executable, opts) : [];
  let next = 0;
  return paths.map((_, index) => {
    const hit = cached[index];
    if (hit) return hit;
    const result = fresh[next++] as Graph | Error;
    const slot = slots[index];
    if (slot && !(result instanceof Error)) storeCapture(slot, result);
    return result;
  });
}

async function captureBatch(
  paths: string[],
  executable: string,
  opts: CaptureOptions,
): Promise<(Graph | Error)[]> {
  const python = { executable };
  const dir = mkdtempSync(join(tmpdir(), "kforge-capture-"));
  try {
    const list = join(dir, "problems.txt");
    writeFileSync(list, `${paths.join("\n")}\n`);
    await execa(python.executable, ["-m", "kforge_worker", "--capture-batch", list, "--out-dir", dir], {
      env: workerEnv(),
      timeout: (opts.timeoutMs ?? 300_000) * Math.max(1, paths.length),
      reject: false,
    });
    const results: (Graph | Error)[] = [];
    for (const [index, path] of paths.entries()) {
      const graphFile = join(dir, `${index}.json`);
      const errFile = join(dir, `${index}.err`);
      try {
        if (existsSync(graphFile)) results.push(parseGraph(path, readFileSync(graphFile, "utf8")));
        else if (existsSync(errFile)) results.push(new UsageError(readFileSync(errFile, "utf8").trim()));
        else results.push(await captureProblem(path, { ...opts, cacheDir: undefined }));
      } catch (error) {
        results.push(error as Error);
      }
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function captureProblem(problemPath: string, opts: CaptureOptions = {}): Promise<Graph> {
  const python = choosePython(opts.python);
  const [slot] = await slotsFor([problemPath], python.executable, opts.cacheDir);
  const hit = slot ? cachedCapture(slot) : null;
  if (hit) return hit;
  const graph = await captureFresh(problemPath, python, opts);
  if (slot) storeCapture(slot, graph);
  return graph;
}

async function captureFresh(
  problemPath: string,
  python: { executable: string; source?: string },
  opts: CaptureOptions,
): Promise<Graph> {
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
  return parseGraph(problemPath, run.stdout);
}
