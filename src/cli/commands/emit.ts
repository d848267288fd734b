import { relative } from "node:path";
import type { Command } from "commander";
import { UsageError } from "../../errors.ts";
import { emitRecipe } from "../../optimize/emit.ts";
import { listRecipes, loadRecipe } from "../../optimize/recipe.ts";
import { REPO_ROOT } from "../../paths.ts";

interface EmitFlags {
  out?: string;
  all?: boolean;
  check?: boolean;
}

export function registerEmitCommand(program: Command): void {
  program
    .command("emit")
    .description("generate a recipe's self-contained ModelNew file from kernels/<recipe>/")
    .argument("[recipes...]", `recipes to emit (${listRecipes().join(", ") || "none yet"})`)
    .option("-o, --out <file>", "write here instead of the recipe's output path (one recipe only)")
    .option("--all", "emit every recipe")
    .option("--check", "write nothing; exit 1 if a generated file differs from what emit would write")
    .action((names: string[], flags: EmitFlags) => {
      const chosen = flags.all ? listRecipes() : names;
      if (chosen.length === 0) throw new UsageError("name a recipe or pass --all");
      if (flags.out && chosen.length > 1) throw new UsageError("--out takes one recipe");
      let stale = 0;
      for (const name of chosen) {
        const outcome = emitRecipe(loadRecipe(name), { out: flags.out, check: flags.check });
        const where = relative(REPO_ROOT, outcome.path) || outcome.path;
        if (flags.check) {
          if (outcome.changed) stale += 1;
          process.stdout.write(`${outcome.changed ? "stale" : "up to date"}  ${where}\n`);
        } else {
          process.stdout.write(`${outcome.changed ? "wrote" : "unchanged"}  ${where}\n`);
        }
      }
      if (stale > 0) {
        process.stderr.write(`kforge: ${stale} generated file(s) out of date; run kforge emit --all\n`);
        process.exitCode = 1;
      }
    });
}
