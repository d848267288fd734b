// A suite's results as they arrive, one JSON line each, so an interrupted run keeps what it finished and
// `--resume` skips it. Appending one line per result is safe across crashes: at worst the last line is torn,
// and a torn line is ignored (that task simply runs again).
import { createHash } from "node:crypto";
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { z } from "zod";
import { EvalResult } from "../worker/protocol.ts";

export const JournalEntry = z.object({
  /** What was evaluated and how (see taskKey): a changed file or option is a different task. */
  key: z.string(),
  result: EvalResult,
  /** Where it ran (a GPU slot's id, or a Ray node) and when, epoch ms: the suite's per-GPU busy time. */
  slot: z.string().nullable().optional(),
  startedAt: z.number().optional(),
  finishedAt: z.number().optional(),
});
export type JournalEntry = z.infer<typeof JournalEntry>;

/** A stable key for content and settings: file bytes by hash, everything else as canonical JSON. */
export function taskKey(parts: { files: (string | Buffer)[]; settings: unknown }): string {
  const hash = createHash("sha256");
  for (const file of parts.files) {
    hash.update(createHash("sha256").update(file).digest());
  }
  hash.update(canonicalJson(parts.settings));
  return hash.digest("hex").slice(0, 32);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

export interface ReadJournal {
  results: Map<string, EvalResult>;
  /** Lines that were not a valid entry (a write cut short by the interruption). */
  skipped: number;
}

export function readJournal(path: string): ReadJournal {
  const results = new Map<string, EvalResult>();
  let skipped = 0;
  if (!existsSync(path)) return { results, skipped };
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      skipped += 1;
      continue;
    }
    const entry = JournalEntry.safeParse(parsed);
    if (entry.success) results.set(entry.data.key, entry.data.result);
    else skipped += 1;
  }
  return { results, skipped };
}

export function appendJournal(path: string, entry: JournalEntry): void {
  mkdirSync(dirname(path), { recursive: true });
  // One write call per line: concurrent results never interleave within a line.
  appendFileSync(path, `${JSON.stringify(entry)}\n`);
}
