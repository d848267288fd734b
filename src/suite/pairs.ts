// A suite manifest: one `PROBLEM=CANDIDATE` per line (what an RL or LLM loop writes for thousands of
// answers), `#` comments and blank lines ignored. Relative paths are read from the manifest's folder, so a
// manifest and its files move together.
import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { UsageError } from "../errors.ts";

export interface Pair {
  /** A built-in problem name, or a path to a KernelBench-format file. */
  problem: string;
  candidate: string;
}

export function readPairs(path: string): Pair[] {
  if (!existsSync(path)) throw new UsageError(`--pairs: no such file: ${path}`);
  const base = dirname(resolve(path));
  const fromManifest = (p: string) => (isAbsolute(p) ? p : join(base, p));
  const pairs: Pair[] = [];
  for (const [i, raw] of readFileSync(path, "utf8").split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const at = line.indexOf("=");
    if (at <= 0 || at === line.length - 1)
      throw new UsageError(
        `--pairs ${path}:${i + 1}: expected PROBLEM=CANDIDATE, got "${line.slice(0, 80)}"`,
      );
    const problem = line.slice(0, at).trim();
    // A name stays a name (built-in problem); anything with a slash or .py is a file beside the manifest.
    const isPath = problem.includes("/") || problem.endsWith(".py");
    pairs.push({
      problem: isPath ? fromManifest(problem) : problem,
      candidate: fromManifest(line.slice(at + 1).trim()),
    });
  }
  if (pairs.length === 0) throw new UsageError(`--pairs ${path}: no PROBLEM=CANDIDATE lines`);
  return pairs;
}
