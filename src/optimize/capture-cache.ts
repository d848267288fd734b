// Captured graphs kept by content. A capture is a Python process importing torch and fx (seconds, the longest
// step before a warm `kforge optimize` can start its GPU work); its graph depends only on the problem's source,
// the modules the problem brought in from outside Python's installation (its own helpers), the worker's capture
// code and the Python and torch that ran it. Those make the key, or are checked against the entry on a hit.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { execa } from "execa";
import { z } from "zod";
import { WORKER_PYTHONPATH } from "../paths.ts";
import { workerEnv } from "../worker/python.ts";
import { Graph } from "./graph.ts";

/** The interpreter a capture ran in: its real path, version, and torch's installed version and location. */
export const PythonIdentity = z.object({
  executable: z.string(),
  python: z.string(),
  torch: z.string().nullable(),
  torchPath: z.string().nullable(),
});
export type PythonIdentity = z.infer<typeof PythonIdentity>;

// Reads torch's distribution metadata only: no torch import (~50 ms against seconds).
const IDENTITY_SCRIPT = `
import importlib.metadata as m, json, os, sys
try:
    d = m.distribution("torch")
    torch, where = d.version, str(d.locate_file(""))
except Exception:
    torch, where = None, None
print(json.dumps({"executable": os.path.realpath(sys.executable), "python": sys.version, "torch": torch,
                  "torchPath": where}))
`;

const identities = new Map<string, Promise<PythonIdentity | null>>();

/** Who `python` is, or null when it cannot say (no cache is used then); asked once per process. */
export function pythonIdentity(python: string): Promise<PythonIdentity | null> {
  let known = identities.get(python);
  if (known === undefined) {
    known = askIdentity(python);
    identities.set(python, known);
  }
  return known;
}

async function askIdentity(python: string): Promise<PythonIdentity | null> {
  const run = await execa(python, ["-c", IDENTITY_SCRIPT], {
    env: workerEnv(),
    timeout: 30_000,
    reject: false,
  });
  if (run.exitCode !== 0) return null;
  const parsed = PythonIdentity.safeParse(safeJson(run.stdout.trim().split("\n").at(-1) ?? ""));
  return parsed.success ? parsed.data : null;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function sha256(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

let workerDigestMemo: string | undefined;

/** Every file of the worker package: any of them may shape a capture. */
function workerDigest(): string {
  if (workerDigestMemo !== undefined) return workerDigestMemo;
  const hash = createHash("sha256");
  const walk = (dir: string, rel: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
      a.name.localeCompare(b.name),
    )) {
      if (entry.name === "__pycache__") continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path, `${rel}/${entry.name}`);
      else if (entry.isFile()) hash.update(`${rel}/${entry.name}\0`).update(readFileSync(path)).update("\0");
    }
  };
  walk(join(WORKER_PYTHONPATH, "kforge_worker"), "");
  workerDigestMemo = hash.digest("hex");
  return workerDigestMemo;
}

const CacheEntry = z.object({
  /** sha256 of each local source the capture imported (the problem file first). */
  sources: z.record(z.string(), z.string()),
  graph: z.unknown(),
});

/** Where one problem's capture by one Python is kept; the problem's bytes are read once, before its capture. */
export interface CaptureSlot {
  file: string;
  problemPath: string;
  problemDigest: string;
}

export function captureSlot(
  cacheDir: string,
  problemPath: string,
  identity: PythonIdentity,
): CaptureSlot | null {
  const absolute = resolve(problemPath);
  const problemDigest = fileHash(absolute);
  if (problemDigest === null) return null;
  const key = sha256(JSON.stringify([problemDigest, workerDigest(), identity, absolute]));
  return { file: join(cacheDir, "captures", `${key}.json`), problemPath: absolute, problemDigest };
}

function fileHash(path: string): string | null {
  try {
    return sha256(readFileSync(path));
  } catch {
    return null;
  }
}

/** The graph captured before from the same sources by the same Python, or null. */
export function cachedCapture(slot: CaptureSlot): Graph | null {
  if (!existsSync(slot.file)) return null;
  const entry = CacheEntry.safeParse(safeJson(readFileSync(slot.file, "utf8")));
  if (!entry.success) return null;
  for (const [source, digest] of Object.entries(entry.data.sources))
    if (fileHash(source) !== digest) return null;
  const graph = Graph.safeParse(entry.data.graph);
  return graph.success ? (graph.data as Graph) : null;
}

/** Keeps a fresh capture. Its `sources` (the local files the worker saw imported) are hashed now, the problem's
 * own bytes as they were when the slot was taken; a graph whose sources cannot all be read is not kept. */
export function storeCapture(slot: CaptureSlot, graph: Graph): void {
  const sources: Record<string, string> = { [slot.problemPath]: slot.problemDigest };
  for (const source of graph.sources ?? []) {
    if (source === slot.problemPath) continue;
    const digest = fileHash(source);
    if (digest === null) return;
    sources[source] = digest;
  }
  try {
    mkdirSync(dirname(slot.file), { recursive: true });
    const tmp = `${slot.file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify({ sources, graph }));
    renameSync(tmp, slot.file);
  } catch {
    // a cache that cannot be written only costs the next run its capture
  }
}
