import type { Command } from "commander";
import { builtInProblems } from "../../problem/problems.ts";

export function registerProblemsCommand(program: Command): void {
  program
    .command("problems")
    .description("list the built-in problems")
    .option("--json", "print JSON instead of a list")
    .action((opts: { json?: boolean }) => {
      const problems = builtInProblems();
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(problems, null, 2)}\n`);
        return;
      }
      const width = Math.max(0, ...problems.map((p) => p.name.length));
      for (const p of problems) process.stdout.write(`${p.name.padEnd(width)}  ${p.summary}\n`);
    });
}
