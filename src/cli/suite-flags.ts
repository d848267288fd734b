// The options that make `kforge eval` / `kforge bench` a suite run: GPUs, prebuild pool, Ray, journal.
import { availableParallelism } from "node:os";
import type { Command } from "commander";
import { UsageError } from "../errors.ts";
import type { SuiteOptions } from "../suite/eval-suite.ts";
import { buildEnv, type GpuRequest, gpuSlots, parseGpus } from "../suite/gpus.ts";
import { choosePython } from "../worker/python.ts";
import { nonNegativeInt } from "./args.ts";
import { requireWorkerProbe } from "./commands/eval.ts";

export interface SuiteFlags {
  python?: string;
  gpus?: GpuRequest;
  jobs?: number;
  ray?: string;
  jsonl?: string;
  resume?: boolean;
  /** commander's --no-ahead: false when given. */
  ahead?: boolean;
}

export function addSuiteOptions(command: Command): Command {
  return command
    .option(
      "--gpus <n|all>",
      "local GPUs to spread candidates over, one isolated worker per GPU (default: all)",
      parseGpus,
    )
    .option(
      "--jobs <n>",
      "extension builds run ahead on the CPU while GPUs verify (default: half the free cores; 0: none)",
      nonNegativeInt,
    )
    .option(
      "--ray <address>",
      "run each evaluation as a Ray task with one GPU: auto (a running cluster), local, or a cluster address",
    )
    .option("--jsonl <file>", "append each result as one JSON line as soon as it is known")
    .option(
      "--resume",
      "skip candidates whose result is already in the --jsonl file (same files and options)",
    )
    .option(
      "--no-ahead",
      "start a GPU's next worker only after its current one ends (default: started ahead, paused while the current one is timed, when there are 4+ cores per GPU)",
    );
}

/** Workers started ahead need spare cores: their torch import must not slow the candidate being judged. */
export function workersAhead(
  flag: boolean | undefined,
  slots: number,
  cores = availableParallelism(),
): boolean {
  return flag !== false && cores >= 4 * slots;
}

/** Workers kept started ahead per slot: a start-up (torch, the device, the reference process: ~8-10 s on a busy
 * host) outlasts the untimed part of a typical candidate (~5 s), so with cores to spare the slot starts two. */
export function aheadDepth(slots: number, cores = availableParallelism()): number {
  return cores >= 8 * slots ? 2 : 1;
}

/** Extension builds at once beside `slots` busy workers: half the cores left over, at least one. */
export function defaultPrebuildJobs(slots: number, cores = availableParallelism()): number {
  return Math.max(1, Math.floor((cores - slots) / 2));
}

export interface SuiteSetup {
  python: string;
  suite: SuiteOptions;
  /** Candidates finish out of order (several GPUs, or Ray). */
  parallel: boolean;
}

export async function setupSuite(flags: SuiteFlags, device: "cuda" | "cpu"): Promise<SuiteSetup> {
  if (flags.resume && !flags.jsonl)
    throw new UsageError("--resume needs --jsonl FILE (the journal to resume from)");
  const journal = { journal: flags.jsonl, resume: flags.resume ?? false };
  if (flags.ray) {
    if (flags.gpus !== undefined)
      throw new UsageError("--gpus is for local runs; with --ray the cluster decides");
    // The cluster's nodes need torch, not this host: the driver only needs Ray (it says so if it is missing).
    return {
      python: choosePython(flags.python).executable,
      suite: { ray: { address: flags.ray, device }, ...journal },
      parallel: true,
    };
  }
  const { python, probe } = await requireWorkerProbe(flags.python, device);
  if (device === "cpu") {
    if (flags.gpus !== undefined) throw new UsageError("--gpus needs --device cuda");
    return { python, suite: { prebuildJobs: flags.jobs ?? 0, ...journal }, parallel: false };
  }
  const slots = gpuSlots(flags.gpus, probe);
  return {
    python,
    suite: {
      slots,
      prebuildJobs: flags.jobs ?? defaultPrebuildJobs(slots.length),
      buildEnv: buildEnv(probe),
      workersAhead: workersAhead(flags.ahead, slots.length),
      aheadDepth: aheadDepth(slots.length),
      ...journal,
    },
    parallel: slots.length > 1,
  };
}
