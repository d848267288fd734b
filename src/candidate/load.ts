// Reads a candidate argument, checks it is something kforge can evaluate, and materialises its code as a .py file.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, extname, join, resolve } from "node:path";
import { UsageError } from "../errors.ts";
import type { CandidateOrigin } from "../worker/protocol.ts";
import { extractCandidate } from "./extract.ts";

const TRANSCRIPT_EXTENSIONS = new Set([".md", ".markdown", ".txt", ""]);

export interface LoadedCandidate {
  label: string;
  /** The .py file the worker imports (the file itself, or the extracted block written to the cache). */
  codePath: string | null;
  origin: CandidateOrigin;
  /** The code as read here, when the suite was set up: the worker judges this text, not whatever the file holds by
   * the time its turn comes (an earlier candidate of the same suite could have rewritten it). */
  source: string | null;
}

function looksBinary(bytes: Buffer): boolean {
  return bytes.subarray(0, 8192).includes(0);
}

/** Validates a candidate argument up front so a batch fails before any work, with one clear line. */
export function checkCandidateArg(arg: string): string {
  const path = resolve(arg);
  if (!existsSync(path)) throw new UsageError(`candidate not found: ${arg}`);
  if (!statSync(path).isFile()) throw new UsageError(`candidate ${arg} is not a file`);
  const ext = extname(path).toLowerCase();
  if (ext !== ".py" && !TRANSCRIPT_EXTENSIONS.has(ext)) {
    throw new UsageError(`candidate ${arg} is not a Python file or a transcript (.py, .md, .txt)`);
  }
  if (looksBinary(readFileSync(path))) throw new UsageError(`candidate ${arg} is a binary file, not Python`);
  return path;
}

export function loadCandidate(arg: string, cacheRoot: string): LoadedCandidate {
  const path = checkCandidateArg(arg);
  const text = readFileSync(path, "utf8");
  const { code, origin } = extractCandidate(path, text);
  const label = basename(path);
  if (code === null) return { label, codePath: null, origin, source: null };
  if (origin.kind === "file") return { label, codePath: path, origin, source: text };
  const digest = createHash("sha256").update(code).digest("hex").slice(0, 16);
  const dir = join(cacheRoot, "candidates");
  mkdirSync(dir, { recursive: true });
  const codePath = join(dir, `${basename(path, extname(path))}_block${origin.blockIndex}_${digest}.py`);
  const source = code.endsWith("\n") ? code : `${code}\n`;
  writeFileSync(codePath, source);
  return { label, codePath, origin, source };
}
