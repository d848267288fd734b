// `kforge report <results.json...> -o report.html`: turns saved eval and optimize results into the HTML
// report.
import { dirname, resolve } from "node:path";
import type { Command } from "commander";
import { writeHtmlReport } from "../../report/html.ts";
import { loadResultsFiles, type ReportData, ResultsFileError } from "../../report/load.ts";
import { formatOptimizeTable } from "../../report/optimize-table.ts";
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
    .description(
      "write a self-contained HTML report (tables, charts, evidence) from saved eval or optimize results",
    )
    .argument(
      "<results...>",
      "JSON files from `kforge eval --json` (one result, an array, or {results: [...]}) or `kforge optimize --json` ({optimize: [...]})",
    )
    .option("-o, --output <file>", "the HTML file to write", "report.html")
    .option("--title <text>", "the report's title")
    .option("--table", "also print the summary tables to stdout", false)
    .option("--details", "also print every failing result's evidence to stdout", false)
    .action((files: string[], flags: ReportFlags) => {
      let data: ReportData;
      try {
        data = loadResultsFiles(files);
      } catch (error) {
        if (!(error instanceof ResultsFileError)) throw error;
        process.stderr.write(`kforge report: ${error.message}\n`);
        process.exitCode = 1;
        return;
      }
      const { results, optimize } = data;
      if (results.length === 0 && optimize.length === 0) {
        process.stderr.write(`kforge report: no results in ${files.join(", ")}\n`);
        process.exitCode = 1;
        return;
      }
      // Transcript and file paths in results may be relative to where the results were saved.
      const sourceDirs = [...new Set(files.map((f) => dirname(resolve(f))))];
      writeHtmlReport(data, flags.output, { title: flags.title, sourceDirs });
      const color = useColor(process.stdout);
      if (flags.table && optimize.length > 0) process.stdout.write(formatOptimizeTable(optimize, { color }));
      if (flags.table && results.length > 0) process.stdout.write(formatResultsTable(results, { color }));
      if (flags.details) {
        // An optimize result's evidence is the eval of its emitted file.
        const evals = [...results, ...optimize.flatMap((o) => (o.eval ? [o.eval] : []))];
        for (const r of evals.filter((x) => x.verdict !== "correct")) {
          process.stdout.write(`\n${formatResultDetail(r, { color })}`);
        }
      }
      const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;
      const contents = [
        results.length > 0
          ? `${plural(results.length, "result")}, ${plural(new Set(results.map((r) => r.problem)).size, "problem")}`
          : "",
        optimize.length > 0
          ? `${plural(new Set(optimize.map((r) => r.problem)).size, "optimized problem")}`
          : "",
      ].filter(Boolean);
      process.stderr.write(`wrote ${flags.output} (${contents.join("; ")})\n`);
    });
}
