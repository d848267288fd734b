// Reading saved eval results: a file may hold one EvalResult, an array of them, or `{results: [...]}`
// (what `kforge eval --json` writes). Every entry is validated against the protocol schema; the optional
// report fields of extensions.ts are kept.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { type ReportResult, ReportResult as ResultSchema } from "./extensions.ts";

/** A results file that cannot be used; the message names the file and fits on one line. */
export class ResultsFileError extends Error {
  override name = "ResultsFileError";
}

const ResultsFile = z.union([
  ResultSchema,
  z.array(ResultSchema),
  z.object({ results: z.array(ResultSchema) }),
]);

function describeIssue(error: z.ZodError, data: unknown): string {
  // Explain against the shape the file most likely meant, so the path in the message is useful.
  const meant = Array.isArray(data)
    ? z.array(ResultSchema)
    : data !== null && typeof data === "object" && "results" in data
      ? z.object({ results: z.array(ResultSchema) })
      : ResultSchema;
  const parsed = meant.safeParse(data);
  const issue = (parsed.success ? error : parsed.error).issues[0];
  if (!issue) return "not an EvalResult";
  const where = issue.path.length > 0 ? ` at ${issue.path.join(".")}` : "";
  return `not an EvalResult${where}: ${issue.message}`;
}

export function parseResults(data: unknown, file: string): ReportResult[] {
  const parsed = ResultsFile.safeParse(data);
  if (!parsed.success) throw new ResultsFileError(`${file}: ${describeIssue(parsed.error, data)}`);
  const value = parsed.data;
  if (Array.isArray(value)) return value;
  if ("results" in value) return value.results;
  return [value];
}

export function loadResultsFile(file: string): ReportResult[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ResultsFileError(`${file}: ${code === "ENOENT" ? "no such file" : (err as Error).message}`);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new ResultsFileError(`${file}: not valid JSON (${(err as Error).message.split("\n")[0]})`);
  }
  return parseResults(data, file);
}

/** All results from all files, in order; the first bad file stops the load with a ResultsFileError. */
export function loadResultsFiles(files: string[]): ReportResult[] {
  return files.flatMap((f) => loadResultsFile(f));
}
