// `kforge report <results.json...> -o report.html`: turns saved eval results into the HTML report.
import { dirname, resolve } from "node:path";
import type { Command } from "commander";
import { writeHtmlReport } from "../../report/html.ts";
import { loadResultsFiles, ResultsFileError } from "../../report/load.ts";
import { formatResultDetail, formatResultsTable, useColor } from "../../report/table.ts";

interface ReportFlags {
  output: string;
  title?: string;
  table: boolean;
  details: boolean;
}

export function registerReportCommand(program: Command): void {
  program
    .command("report")
    .description("write a self-contained HTML report (tables, charts, evidence) from saved eval results")
    .argument(
      "<results...>",
      "JSON files from `kforge eval --json`: one result, an array, or {results: [...]}",
    )
    .option("-o, --output <file>", "the HTML file to write", "report.html")
    .option("--title <text>", "the report's title")
    .option("--table", "also print the summary table to stdout", false)
    .option("--details", "also print every failing result's evidence to stdout", false)
    .action((files: string[], flags: ReportFlags) => {
      let results: ReturnType<typeof loadResultsFiles>;
      try {
        results = loadResultsFiles(files);
      } catch (error) {
        if (!(error instanceof ResultsFileError)) throw error;
        process.stderr.write(`kforge report: ${error.message}\n`);
        process.exitCode = 1;
        return;
      }
      if (results.length === 0) {
        process.stderr.write(`kforge report: no results in ${files.join(", ")}\n`);
        process.exitCode = 1;
        return;
      }
      // Transcript and file paths in results may be relative to where the results were saved.
      const sourceDirs = [...new Set(files.map((f) => dirname(resolve(f))))];
      writeHtmlReport(results, flags.output, { title: flags.title, sourceDirs });
      const color = useColor(process.stdout);
      if (flags.table) process.stdout.write(formatResultsTable(results, { color }));
      if (flags.details) {
        for (const r of results.filter((x) => x.verdict !== "correct")) {
          process.stdout.write(`\n${formatResultDetail(r, { color })}`);
        }
      }
      const problems = new Set(results.map((r) => r.problem)).size;
      process.stderr.write(
        `wrote ${flags.output} (${results.length} result${results.length === 1 ? "" : "s"}, ${problems} problem${problems === 1 ? "" : "s"})\n`,
      );
    });
}
