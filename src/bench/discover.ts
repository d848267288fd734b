// Which candidates `kforge bench` measures for a problem: the included ones under problems/candidates/
// (named <problem>_<variant>.py). Recipes answer no problem by name: `kforge optimize` plans a problem's
// graph onto them, and a recipe's standalone file is benched with `--candidate problem=generated/...`.
import { existsSync, readdirSync } from "node:fs";
import { basename, join } from "node:path";
import { PROBLEMS_DIR } from "../paths.ts";
import type { Problem } from "../problem/problems.ts";

export interface BenchCandidate {
  path: string;
  variant: string;
}

export function discoverCandidates(problem: Problem): BenchCandidate[] {
  const found: BenchCandidate[] = [];
  const included = join(PROBLEMS_DIR, "candidates");
  if (existsSync(included)) {
    for (const file of readdirSync(included).sort()) {
      const prefix = `${problem.name}_`;
      if (file.startsWith(prefix) && file.endsWith(".py")) {
        found.push({ path: join(included, file), variant: basename(file, ".py").slice(prefix.length) });
      }
    }
  }
  return found;
}
