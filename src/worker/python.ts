// Finds the Python that runs the worker: --python, then $KFORGE_PYTHON, then python3 on PATH.
// No implicit virtualenv: the test setup's CPU-only .venv must never shadow a GPU host's CUDA torch.
import { execa } from "execa";
import { WORKER_PYTHONPATH } from "../paths.ts";
import { ProbeResult } from "./protocol.ts";

export interface PythonChoice {
  executable: string;
  /** Why this one was picked, for `kforge doctor` and error messages. */
  source: string;
}

export function choosePython(explicit?: string, env: NodeJS.ProcessEnv = process.env): PythonChoice {
  if (explicit) return { executable: explicit, source: "--python" };
  if (env.KFORGE_PYTHON) return { executable: env.KFORGE_PYTHON, source: "$KFORGE_PYTHON" };
  return { executable: "python3", source: "python3 on PATH" };
}

/** The environment every worker process gets: kforge's Python package importable, output unbuffered. */
export function workerEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const pythonPath = [WORKER_PYTHONPATH, process.env.PYTHONPATH].filter(Boolean).join(":");
  return { ...process.env, PYTHONPATH: pythonPath, PYTHONUNBUFFERED: "1", ...extra };
}

export type ProbeOutcome = { ok: true; probe: ProbeResult } | { ok: false; error: string };

/** Asks the Python side what it has (torch, CUDA, GPU, ninja, nvcc); never throws. */
export async function probePython(python: PythonChoice, timeoutMs = 120_000): Promise<ProbeOutcome> {
  try {
    const run = await execa(python.executable, ["-m", "kforge_worker", "--probe"], {
      env: workerEnv(),
      timeout: timeoutMs,
      reject: false,
    });
    if (run.failed && run.exitCode === undefined) {
      const why =
        run.code === "ENOENT" ? "no such program" : (run.shortMessage?.split("\n")[0] ?? "failed to start");
      return { ok: false, error: `cannot run ${python.executable} (${python.source}): ${why}` };
    }
    const line = run.stdout.trim().split("\n").at(-1) ?? "";
    const parsed = ProbeResult.safeParse(JSON.parse(line));
    if (!parsed.success) return { ok: false, error: `unexpected probe output from ${python.executable}` };
    return { ok: true, probe: parsed.data };
  } catch (error) {
    const stderrTail = error instanceof Error ? error.message.split("\n")[0] : String(error);
    return { ok: false, error: `the kforge worker did not answer from ${python.executable}: ${stderrTail}` };
  }
}
