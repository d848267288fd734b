// Where kforge's own files live, resolved from this module so the CLI works from any current directory.
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const PROBLEMS_DIR = join(REPO_ROOT, "problems");
export const KERNELS_DIR = join(REPO_ROOT, "kernels");
export const GENERATED_DIR = join(REPO_ROOT, "generated");
export const WORKER_PYTHONPATH = join(REPO_ROOT, "python");

/** KFORGE_CACHE_DIR, else $XDG_CACHE_HOME/kforge, else ~/.cache/kforge. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KFORGE_CACHE_DIR) return resolve(env.KFORGE_CACHE_DIR);
  return join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "kforge");
}
