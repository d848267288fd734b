// Writes the worker protocol's zod schemas as JSON Schema files the Python tests validate against,
// so the Python side is held to the same contract the CLI parses. `--check` fails on drift instead.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { OptimizeBenchRequest, OptimizeBenchResult } from "../src/optimize/bench-protocol.ts";
import { Graph } from "../src/optimize/graph.ts";
import { REPO_ROOT } from "../src/paths.ts";
import { RayDriverMessage } from "../src/suite/ray-protocol.ts";
import { EvalRequest, EvalResult, ProbeResult, WorkerMessage } from "../src/worker/protocol.ts";

const OUT_DIR = join(REPO_ROOT, "python", "kforge_worker", "schemas");
const SCHEMAS = {
  EvalRequest,
  EvalResult,
  ProbeResult,
  WorkerMessage,
  Graph,
  RayDriverMessage,
  OptimizeBenchRequest,
  OptimizeBenchResult,
};

const check = process.argv.includes("--check");
let stale = 0;
mkdirSync(OUT_DIR, { recursive: true });
for (const [name, schema] of Object.entries(SCHEMAS)) {
  const path = join(OUT_DIR, `${name}.json`);
  const text = `${JSON.stringify(z.toJSONSchema(schema, { io: "output" }), null, 2)}\n`;
  const current = existsSync(path) ? readFileSync(path, "utf8") : null;
  if (current === text) continue;
  stale += 1;
  if (check) process.stderr.write(`stale schema: ${path} (run npm run schemas)\n`);
  else writeFileSync(path, text);
}
if (check && stale > 0) process.exit(1);
