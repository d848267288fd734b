// The options the optimizer's CPU tests run with: verified on the CPU, two trials, three timed iterations, no
// torch.compile baseline, a private cache under the test's folder.
import { join } from "node:path";
import type { OptimizeOptions } from "../../src/optimize/optimize.ts";

export const PYTHON = process.env.KFORGE_PYTHON ?? ".venv/bin/python";

export function cpuOptimizeOptions(dir: string, extra: Partial<OptimizeOptions> = {}): OptimizeOptions {
  return {
    python: PYTHON,
    cacheDir: join(dir, "cache"),
    verify: true,
    device: "cpu",
    trials: 2,
    timeoutSeconds: 300,
    benchIters: 3,
    compileBaseline: false,
    ...extra,
  };
}
