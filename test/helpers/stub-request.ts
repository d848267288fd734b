// An EvalRequest for tests that run a stand-in worker: nothing in it is read from disk.
import type { EvalRequest } from "../../src/worker/protocol.ts";

export function stubRequest(cacheDir: string, trials: number, warmupIters: number): EvalRequest {
  return {
    protocol: 1,
    problem: { path: "/p.py", name: "tiny", atol: null, rtol: null },
    candidate: {
      path: "/c.py",
      label: "c.py",
      origin: { kind: "file", sourcePath: "/c.py", blockIndex: null, blockCount: null, note: null },
    },
    options: {
      trials,
      seed: 1,
      precision: null,
      allowTf32: false,
      device: "cpu",
      timing: {
        enabled: false,
        warmupIters,
        minIters: 1,
        maxIters: 1,
        budgetSeconds: 1,
        targetRelativeCi: 0.02,
      },
      cacheDir,
      checks: [],
    },
  };
}
