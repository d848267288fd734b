// Reading saved results. A file holds either eval results — one EvalResult, an array of them, or
// `{results: [...]}` (what `kforge eval --json` writes) — or optimize results, `{optimize: [...]}` (what
// `kforge optimize --json` writes). Every entry is validated against its zod schema; the optional report
// fields of extensions.ts are kept.
import { readFileSync } from "node:fs";
import { z } from "zod";
import { OptimizeResult } from "../optimize/optimize.ts";
import { type ReportResult, ReportResult as ResultSchema } from "./extensions.ts";

/** A results file that cannot be used; the message names the file and fits on one line. */
export class ResultsFileError extends Error {
  override name = "ResultsFileError";
}

/** Everything a report shows: eval results and `kforge optimize` results, each in file order. */
export interface ReportData {
  results: ReportResult[];
  optimize: OptimizeResult[];
}

const EvalFile = z.union([ResultSchema, z.array(ResultSchema), z.object({ results: z.array(ResultSchema) })]);
const OptimizeFile = z.object({ optimize: z.array(OptimizeResult) });

const isObject = (data: unknown): data is Record<string, unknown> =>
  data !== null && typeof data === "object" && !Array.isArray(data);

function firstIssue(error: z.ZodError, what: string): string {
  const issue = error.issues[0];
  if (!issue) return what;
  const where = issue.path.length > 0 ? ` at ${issue.path.join(".")}` : "";
  return `${what}${where}: ${issue.message}`;
}

function describeEvalIssue(error: z.ZodError, data: unknown): string {
  // Explain against the shape the file most likely meant, so the path in the message is useful.
  const meant = Array.isArray(data)
    ? z.array(ResultSchema)
    : isObject(data) && "results" in data
      ? z.object({ results: z.array(ResultSchema) })
      : ResultSchema;
  const parsed = meant.safeParse(data);
  return firstIssue(parsed.success ? error : parsed.error, "not an EvalResult");
}

export function parseResults(data: unknown, file: string): ReportData {
  // An EvalResult may carry an `optimize` field of its own (extensions.ts); it also has `protocol`.
  if (isObject(data) && "optimize" in data && !("protocol" in data)) {
    const parsed = OptimizeFile.safeParse(data);
    if (!parsed.success)
      throw new ResultsFileError(`${file}: ${firstIssue(parsed.error, "not kforge optimize results")}`);
    return { results: [], optimize: parsed.data.optimize };
  }
  if (isObject(data) && !("results" in data) && !("protocol" in data))
    throw new ResultsFileError(
      `${file}: neither eval results (an EvalResult, an array of them, {results: [...]}) nor kforge optimize results ({optimize: [...]})`,
    );
  const parsed = EvalFile.safeParse(data);
  if (!parsed.success) throw new ResultsFileError(`${file}: ${describeEvalIssue(parsed.error, data)}`);
  const value = parsed.data;
  const results = Array.isArray(value) ? value : "results" in value ? value.results : [value];
  return { results, optimize: [] };
}

export function loadResultsFile(file: string): ReportData {
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
export function loadResultsFiles(files: string[]): ReportData {
  const loaded = files.map((f) => loadResultsFile(f));
  return {
    results: loaded.flatMap((d) => d.results),
    optimize: loaded.flatMap((d) => d.optimize),
  };
}
