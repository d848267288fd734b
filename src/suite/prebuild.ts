// The CPU half of a pipelined suite: compiles a candidate's extensions into the content-keyed cache
// (python/kforge_worker/prebuild.py) while the GPUs verify earlier candidates; the worker that evaluates it
// then loads the finished build instead of compiling on the GPU's time.
import { readFileSync } from "node:fs";
import { setPriority } from "node:os";
import { delimiter, dirname, resolve } from "node:path";
import { execa } from "execa";
import { z } from "zod";
import { ExtensionLibraries } from "../worker/protocol.ts";
import { workerEnv } from "../worker/python.ts";
import { killGroup, trackGroup } from "../worker/run.ts";

/** Only files that build something are worth a prebuild process (importing torch alone costs seconds). */
const BUILDS_EXTENSION = /\bload_inline\b|\bcpp_extension\b|\b_kf_build_all\b/;

/** The one JSON line of `python -m kforge_worker --build` (prebuild.py); `libraries`: what the build left. */
export const BuildOutcome = z.object({
  ok: z.boolean(),
  seconds: z.number(),
  error: z.string().nullable(),
  libraries: ExtensionLibraries.nullable().optional(),
});

export function needsPrebuild(codePath: string): boolean {
  try {
    return BUILDS_EXTENSION.test(readFileSync(codePath, "utf8"));
  } catch {
    return false;
  }
}

/**
 * PATH with the interpreter's bin folder first, as the eval worker sets it (environment.ensure_tools_on_path):
 * a venv's ninja then runs the prebuild too. Another ninja writes another build-log version, and the
 * worker's ninja "starts over", rebuilding everything the prebuild did.
 */
function toolPath(python: string): string {
  const path = process.env.PATH ?? "";
  if (!python.includes("/")) return path; // found on PATH: its folder is already there
  return [dirname(resolve(python)), path].filter(Boolean).join(delimiter);
}

export interface PrebuildOptions {
  python: string;
  cacheDir: string;
  timeoutMs: number;
  /** The suite's build environment (a pinned TORCH_CUDA_ARCH_LIST, see gpus.ts buildEnv). */
  env: Record<string, string>;
  /** The code as the suite read it, built in the file's place (as the worker judges it); absent: the file is read. */
  source?: string;
  /** When the suite started (ExtensionLedger.since): a folder changed since by no recorded build is not built on. */
  since?: number;
}

export interface Prebuilt {
  /** The error line, or null. */
  error: string | null;
  /** What the build left in the extension folder (sha256 per file), when it said. */
  libraries: ExtensionLibraries | null;
}

/**
 * Imports the candidate in a process that sees no GPU (its import-time code cannot disturb a timing in
 * progress), at low CPU priority, with the same extension folder the worker will use. Returns the error
 * line, or null, and what the build left; a failure is never a verdict: the worker compiles for itself and
 * reports what happens.
 */
export async function prebuildCandidate(codePath: string, options: PrebuildOptions): Promise<Prebuilt> {
  const args = ["-m", "kforge_worker", "--build", codePath, "--cache-dir", options.cacheDir];
  if (options.source !== undefined) args.push("--source-stdin");
  if (options.since !== undefined) args.push("--since", String(options.since));
  const child = execa(options.python, args, {
    input: options.source ?? "",
    env: workerEnv({ ...options.env, CUDA_VISIBLE_DEVICES: "", PATH: toolPath(options.python) }),
    detached: true,
    reject: false,
    timeout: options.timeoutMs,
    killSignal: "SIGKILL",
  });
  if (child.pid !== undefined) {
    try {
      setPriority(child.pid, 10);
    } catch {
      // Not permitted here: the build simply runs at normal priority.
    }
  }
  const untrack = trackGroup(child.pid);
  const run = await child;
  killGroup(child.pid); // whatever the candidate's import left running
  untrack();
  const line = run.stdout.trim().split("\n").at(-1) ?? "";
  try {
    const outcome = BuildOutcome.parse(JSON.parse(line));
    return {
      error: outcome.ok ? null : (outcome.error ?? "build failed"),
      libraries: outcome.libraries ?? null,
    };
  } catch {
    return {
      error: run.timedOut ? "prebuild timed out" : `prebuild exited with code ${run.exitCode}`,
      libraries: null,
    };
  }
}
