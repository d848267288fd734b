// Which candidates `kforge bench` measures for a problem: the included ones under problems/candidates/
// (named <problem>_<variant>.py) and the generated file of every recipe that answers the problem.
import { existsSync, readdirSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { listRecipes, loadRecipe } from "../optimize/recipe.ts";
import { PROBLEMS_DIR, REPO_ROOT } from "../paths.ts";
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
  const problemRel = relative(REPO_ROOT, problem.path);
  for (const name of listRecipes()) {
    const recipe = loadRecipe(name);
    const output = join(REPO_ROOT, recipe.output);
    if (recipe.problems.includes(problemRel) && existsSync(output))
      found.push({ path: output, variant: name });
  }
  return found;
}
