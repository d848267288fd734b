// kforge's command line: parse, dispatch, and turn user mistakes into one-line errors with a non-zero exit.
import { Command, CommanderError } from "commander";
import { UsageError } from "../errors.ts";
import { killActiveWorkers } from "../worker/run.ts";
import { registerBenchCommand } from "./commands/bench.ts";
import { registerDoctorCommand } from "./commands/doctor.ts";
import { registerEmitCommand } from "./commands/emit.ts";
import { registerEvalCommand } from "./commands/eval.ts";
import { registerOptimizeCommand } from "./commands/optimize.ts";
import { registerProblemsCommand } from "./commands/problems.ts";
import { registerReportCommand } from "./commands/report.ts";

export const EXIT_USAGE = 2;

export function buildProgram(): Command {
  const program = new Command("kforge")
    .description("Forge, verify and benchmark custom-CUDA ModelNew files for PyTorch reference models")
    .version("0.1.0")
    .showHelpAfterError("(run kforge --help for usage)")
    .exitOverride();
  registerDoctorCommand(program);
  registerProblemsCommand(program);
  registerOptimizeCommand(program);
  registerEvalCommand(program);
  registerBenchCommand(program);
  registerEmitCommand(program);
  registerReportCommand(program);
  return program;
}

export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram().parseAsync(argv);
    return process.exitCode === undefined ? 0 : Number(process.exitCode);
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander already printed its message (or help/version, which exit 0).
      return error.exitCode === 0 ? 0 : EXIT_USAGE;
    }
    if (error instanceof UsageError) {
      process.stderr.write(`kforge: ${error.message}\n`);
      return EXIT_USAGE;
    }
    throw error;
  }
}

// Workers run in their own process groups (so a timeout can kill a candidate's whole tree), which the
// terminal's Ctrl-C does not reach: on an interrupt, kill them before leaving. A suite's journal (--jsonl)
// already holds every finished result, so `--resume` picks up from there.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    killActiveWorkers();
    process.exit(signal === "SIGINT" ? 130 : 143);
  });
}

process.exitCode = await main(process.argv);
