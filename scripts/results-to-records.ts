// Turns saved results (kforge eval --json files, or the worker's raw JSONL output) into bench records:
//   tsx scripts/results-to-records.ts <variant> <out-dir> <file...>
// In <variant>, "{candidate}" stands for the candidate file name without its extension.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { recordFileName, toBenchRecord } from "../src/bench/records.ts";
import { EvalResult } from "../src/worker/protocol.ts";

const [variant, outDir, ...files] = process.argv.slice(2);
if (!variant || !outDir || files.length === 0) {
  process.stderr.write("usage: results-to-records.ts <variant> <out-dir> <file...>\n");
  process.exit(2);
}

function resultsIn(text: string): unknown[] {
  const trimmed = text.trim();
  if (trimmed.startsWith("{") && !trimmed.includes("\n{")) {
    const parsed = JSON.parse(trimmed) as { results?: unknown[] };
    return parsed.results ?? [parsed];
  }
  // Worker JSONL: progress lines, then one {"type":"result"} line.
  return trimmed
    .split("\n")
    .map((line) => JSON.parse(line) as { type?: string; result?: unknown })
    .filter((m) => m.type === "result")
    .map((m) => m.result);
}

mkdirSync(outDir, { recursive: true });
for (const file of files) {
  for (const raw of resultsIn(readFileSync(file, "utf8"))) {
    const result = EvalResult.parse(raw);
    const stem = result.candidate.replace(/\.[^.]+$/, "");
    const record = toBenchRecord(result, variant.replaceAll("{candidate}", stem));
    const path = join(outDir, recordFileName(record));
    writeFileSync(path, `${JSON.stringify(record, null, 2)}\n`);
    process.stdout.write(`${path}: ${record.verdict} ${record.speedup?.toFixed(4) ?? "-"}×\n`);
  }
}
