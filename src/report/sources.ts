// The code each result was judged on, for the report's disclosures: a .py file is read whole; for a
// transcript the same fenced block the eval took (origin.blockIndex) is extracted again.
import { existsSync, readFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { fencedBlocks } from "../candidate/extract.ts";
import type { CandidateOrigin } from "../worker/protocol.ts";

export interface CandidateSource {
  /** The code, or null when it could not be found (the note says why). */
  code: string | null;
  note: string;
}

/** Where a source path from a result points: absolute as written, relative to cwd or to the results file. */
function locate(sourcePath: string, baseDirs: string[]): string | null {
  if (isAbsolute(sourcePath)) return existsSync(sourcePath) ? sourcePath : null;
  for (const dir of [process.cwd(), ...baseDirs]) {
    const path = resolve(dir, sourcePath);
    if (existsSync(path)) return path;
  }
  return null;
}

export function readCandidateSource(origin: CandidateOrigin, baseDirs: string[] = []): CandidateSource {
  const path = locate(origin.sourcePath, baseDirs);
  if (path === null) return { code: null, note: `source not found on this machine: ${origin.sourcePath}` };
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    return { code: null, note: `could not read ${origin.sourcePath}: ${(err as Error).message}` };
  }
  if (origin.kind === "file") return { code: text, note: `file ${origin.sourcePath}` };
  if (origin.blockIndex === null) {
    return { code: null, note: origin.note ?? `no block was taken from ${origin.sourcePath}` };
  }
  const blocks = fencedBlocks(text);
  const block = blocks.find((b) => b.index === origin.blockIndex);
  if (!block) {
    return {
      code: null,
      note: `${origin.sourcePath} now has ${blocks.length} blocks; block ${origin.blockIndex} is gone (edited since the eval?)`,
    };
  }
  const changed = origin.blockCount !== null && origin.blockCount !== blocks.length;
  return {
    code: block.text,
    note:
      `block ${block.index} of ${blocks.length} in ${origin.sourcePath}` +
      (changed ? ` (the eval saw ${origin.blockCount} blocks: the file has changed since)` : ""),
  };
}
