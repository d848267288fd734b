// Runs the real CLI (bin/kforge.js) as a user would, with the test Python and a private cache.
import { join } from "node:path";
import { execa } from "execa";
import { REPO_ROOT } from "../../src/paths.ts";

export const testPython = process.env.KFORGE_PYTHON ?? join(REPO_ROOT, ".venv", "bin", "python");

export function runKforge(args: string[], cacheDir: string, timeoutMs = 300_000) {
  return execa("node", [join(REPO_ROOT, "bin", "kforge.js"), ...args], {
    reject: false,
    env: { KFORGE_PYTHON: testPython, KFORGE_CACHE_DIR: cacheDir, NO_COLOR: "1" },
    timeout: timeoutMs,
  });
}
