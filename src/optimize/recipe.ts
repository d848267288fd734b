// A recipe is one folder of kernels/: hand-written kernels, the Python runtime that calls them, and a standalone
// ModelNew template. Which models it serves is the planner's business (plan/recipe-rules.ts matches graphs
// structurally): no recipe is bound to a problem file.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { UsageError } from "../errors.ts";
import { KERNELS_DIR } from "../paths.ts";

export const RecipeManifest = z.object({
  name: z.string().regex(/^[a-z0-9_]+$/),
  description: z.string(),
  /** The recipe's Python runtime (relative to the recipe folder): extension build, applicability checks and
   * calls, inlined by `kforge optimize` into every file with a region of this recipe. */
  runtime: z.string(),
  /** The standalone ModelNew template, relative to the recipe folder (it inlines the runtime). */
  template: z.string(),
  /** Where `kforge emit` writes the generated file, repo-relative. */
  output: z.string(),
});
export type RecipeManifest = z.infer<typeof RecipeManifest>;

export interface Recipe extends RecipeManifest {
  dir: string;
}

export function loadRecipe(name: string, kernelsDir: string = KERNELS_DIR): Recipe {
  const dir = join(kernelsDir, name);
  const manifestPath = join(dir, "recipe.json");
  if (!existsSync(manifestPath)) {
    throw new UsageError(`unknown recipe ${name} (known: ${listRecipes(kernelsDir).join(", ") || "none"})`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(manifestPath, "utf8"));
  } catch (error) {
    throw new UsageError(`${manifestPath} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = RecipeManifest.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new UsageError(
      `${manifestPath}: ${issue?.path.join(".") || "manifest"} ${issue?.message ?? "is invalid"}`,
    );
  }
  return { ...parsed.data, dir };
}

export function listRecipes(kernelsDir: string = KERNELS_DIR): string[] {
  if (!existsSync(kernelsDir)) return [];
  return readdirSync(kernelsDir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(kernelsDir, d.name, "recipe.json")))
    .map((d) => d.name)
    .sort();
}
