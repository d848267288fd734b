// Problems: KernelBench-format Python files. Built-in ones live in problems/; users may point at any file.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, extname, join, resolve } from "node:path";
import { UsageError } from "../errors.ts";
import { PROBLEMS_DIR } from "../paths.ts";

export interface Problem {
  name: string;
  path: string;
  /** First line of the module docstring, when there is one. */
  summary: string;
  builtIn: boolean;
}

const DEFINES_MODEL = /^class[ \t]+Model\b/m;
const DEFINES_GET_INPUTS = /^def[ \t]+get_inputs\b/m;

function summaryOf(source: string): string {
  const doc = /^\s*(?:[rRuU]?)("""|''')\s*([^\n]*)/.exec(source);
  return doc?.[2]?.replace(/("""|''')\s*$/, "").trim() ?? "";
}

function toProblem(path: string, builtIn: boolean): Problem {
  const source = readFileSync(path, "utf8");
  return { name: basename(path, ".py"), path, summary: summaryOf(source), builtIn };
}

export function builtInProblems(dir: string = PROBLEMS_DIR): Problem[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".py") && !f.startsWith("_"))
    .sort()
    .map((f) => toProblem(join(dir, f), true));
}

/**
 * A problem argument is a built-in name (`sdpa_fp16`) or a path to a .py file. The file must define
 * `class Model` and `get_inputs` at top level; the worker does the real import, this catches the obvious.
 */
export function resolveProblem(arg: string, dir: string = PROBLEMS_DIR): Problem {
  const builtIn = join(dir, `${arg}.py`);
  const isName = !arg.includes("/") && extname(arg) === "" && existsSync(builtIn);
  const path = isName ? builtIn : resolve(arg);
  if (!existsSync(path)) {
    const names = builtInProblems(dir).map((p) => p.name);
    throw new UsageError(`problem not found: ${arg} (built-in problems: ${names.join(", ") || "none"})`);
  }
  if (!statSync(path).isFile() || extname(path) !== ".py") {
    throw new UsageError(`problem ${arg} is not a Python (.py) file`);
  }
  const source = readFileSync(path, "utf8");
  if (!DEFINES_MODEL.test(source)) throw new UsageError(`problem ${arg} does not define class Model`);
  if (!DEFINES_GET_INPUTS.test(source)) throw new UsageError(`problem ${arg} does not define get_inputs()`);
  return toProblem(path, isName || resolve(dir) === resolve(path, ".."));
}
