// CUDA-graph replay of an emitted forward: which graphs may replay, and the optimizer's choice — on only where the
// bench timed it faster, and only once the file with it on passed the eval. On the CPU the replay never runs (the
// file's forward falls through to its launched calls), so these runs check the flow and the emitted file.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { execa } from "execa";
import { evaluate } from "../src/eval.ts";
import { captureProblem, captureProblems } from "../src/optimize/capture.ts";
import { graphReplayable } from "../src/optimize/codegen/graph-replay.ts";
import { emitModelFile } from "../src/optimize/codegen/model-file.ts";
import type { Graph } from "../src/optimize/graph.ts";
import {
  type OptimizeOptions,
  type OptimizeResult,
  prepareProblem,
  type runBench,
  verifyProblem,
} from "../src/optimize/optimize.ts";
import { type Problem, resolveProblem } from "../src/problem/problems.ts";
import { graphReplayNote } from "../src/report/graph-replay-note.ts";
import { cpuOptimizeOptions, PYTHON } from "./helpers/optimize-options.ts";

const problem = resolveProblem("test/fixtures/optimize/conv_bn_chain.py");

function options(dir: string, extra: Partial<OptimizeOptions> = {}): OptimizeOptions {
  return cpuOptimizeOptions(dir, { graphTrial: true, regionWinMargin: 1, ...extra });
}

/** A bench that runs nothing: eager 1.5 ms, ours `oursMs` (1 ms), graphed `graphedMs`, every region 2x; `seen`
 * gets the state of each timed file's graph switch. */
function benchWith(graphedMs: number, seen: string[], oursMs = 1) {
  const bench: typeof runBench = async (_p, candidate, regions) => {
    const source = readFileSync(candidate, "utf8");
    seen.push(
      /^_KF_GRAPH = True$/m.test(source) ? "on" : /^_KF_GRAPH = False$/m.test(source) ? "off" : "none",
    );
    return {
      device: "cpu",
      eagerMs: 1.5,
      compiledMs: null,
      oursMs,
      graphedMs,
      compileSeconds: null,
      regions: regions.map((id) => ({ id, kernelMs: 1, torchMs: 2, note: null })),
      error: null,
    };
  };
  return bench;
}

// The real evaluation of the emitted file, run once for this file's tests: what is under test is which file the
// optimizer ships after each verdict, not the checks (every later call answers with the first call's results).
// Each problem captured once for the file: every run below differs only after the plan (bench, eval, choice).
const graphs = new Map<string, Promise<Graph>>();
async function optimizeProblem(p: Problem, output: string, opts: OptimizeOptions): Promise<OptimizeResult> {
  if (!graphs.has(p.path)) graphs.set(p.path, captureProblem(p.path, { python: PYTHON }));
  return verifyProblem(await prepareProblem(p, output, opts, await graphs.get(p.path)), opts);
}

let firstEvaluation: Promise<Awaited<ReturnType<typeof evaluate>>> | undefined;
const evaluateOnce: typeof evaluate = (p, candidates, opts, hooks, slots) => {
  firstEvaluation ??= evaluate(p, candidates, opts, hooks, slots);
  return firstEvaluation;
};

test("a forward timed faster as a replayed graph ships with the replay on, verified, at the graphed time", {
  timeout: 300_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-graph-"));
  const output = join(dir, "new.py");
  const seen: string[] = [];
  const evaluated: string[] = [];
  const evaluateFile: typeof evaluate = async (p, candidates, opts, hooks, slots) => {
    evaluated.push(/^_KF_GRAPH = True$/m.test(readFileSync(candidates[0] ?? "", "utf8")) ? "on" : "off");
    return evaluateOnce(p, candidates, opts, hooks, slots);
  };
  const result = await optimizeProblem(
    problem,
    output,
    options(dir, { benchFile: benchWith(0.5, seen), evaluateFile }),
  );
  assert.equal(result.verdict, "correct", result.reason ?? "");
  assert.equal(result.graphed, true);
  assert.equal(result.oursMs, 0.5);
  assert.equal(result.speedup, 3);
  assert.match(graphReplayNote(result) ?? "", /replays a CUDA graph: 0\.500 ms against 1\.000 ms/);
  assert.ok(
    seen.every((s) => s === "off"),
    `every bench timed the file with the switch off: ${seen}`,
  );
  assert.equal(evaluated.at(-1), "on", "the shipped file was evaluated with the replay on");
  const emitted = readFileSync(output, "utf8");
  assert.match(emitted, /^_KF_GRAPH = True$/m);
  assert.match(emitted, /def _kf_planned_forward\(self, x\):/);
  // the graph's key holds the attributes the forward reads (a graph keeps the value it was captured with)
  assert.match(emitted, /_kf_graph_replay\(self, self\._kf_planned_forward, \(x,\), \([^)]*self\.scale\b/);
});

test("a replay no faster than the launched calls, or failing the eval, is not shipped", {
  timeout: 300_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-graph-"));
  const slower = await optimizeProblem(
    problem,
    join(dir, "slower.py"),
    options(dir, { benchFile: benchWith(0.99, []), evaluateFile: evaluateOnce }),
  );
  assert.equal(slower.verdict, "correct");
  assert.equal(slower.graphed, false);
  assert.equal(slower.oursMs, 1);
  assert.match(graphReplayNote(slower) ?? "", /timed 0\.990 ms against 1\.000 ms launched: not shipped/);
  assert.match(readFileSync(join(dir, "slower.py"), "utf8"), /^_KF_GRAPH = False$/m);

  const failing: typeof evaluate = async (p, candidates, opts, hooks, slots) => {
    const results = await evaluateOnce(p, candidates, opts, hooks, slots);
    const on = /^_KF_GRAPH = True$/m.test(readFileSync(candidates[0] ?? "", "utf8"));
    return on ? results.map((r) => ({ ...r, verdict: "incorrect" as const, reason: "injected" })) : results;
  };
  const rejected = await optimizeProblem(
    problem,
    join(dir, "rejected.py"),
    options(dir, { benchFile: benchWith(0.5, []), evaluateFile: failing }),
  );
  assert.equal(rejected.verdict, "correct", "the file verified before the replay was tried stays");
  assert.equal(rejected.graphed, false);
  assert.equal(rejected.oursMs, 1);
  assert.match(readFileSync(join(dir, "rejected.py"), "utf8"), /^_KF_GRAPH = False$/m);
});

test("a file below eager only for its host time ships replayed with its kernels; a replay still below eager gives way to PyTorch's ops", {
  timeout: 300_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-graph-"));
  const floor = { wholeFileFloor: 0.97, evaluateFile: evaluateOnce };
  const rescued = await optimizeProblem(
    problem,
    join(dir, "rescued.py"),
    options(dir, { ...floor, benchFile: benchWith(0.5, [], 2) }),
  );
  assert.equal(rescued.verdict, "correct", rescued.reason ?? "");
  assert.equal(rescued.graphed, true);
  assert.equal(rescued.oursMs, 0.5);
  assert.ok(
    rescued.regions.length > 0 && rescued.regions.every((r) => r.status === "fused"),
    "no region given up",
  );
  assert.match(readFileSync(join(dir, "rescued.py"), "utf8"), /^_KF_GRAPH = True$/m);

  const still = await optimizeProblem(
    problem,
    join(dir, "still.py"),
    options(dir, { ...floor, benchFile: benchWith(1.8, [], 2) }),
  );
  assert.equal(still.verdict, "correct", still.reason ?? "");
  assert.equal(still.graphed, false);
  assert.ok(
    still.regions.every((r) => r.status !== "fused"),
    "PyTorch's ops only, below eager either way",
  );
  assert.doesNotMatch(readFileSync(join(dir, "still.py"), "utf8"), /^_KF_GRAPH = True$/m);
});

test("a forward with no region replays as a graph where that wins, and is the reference's verbatim where not", {
  timeout: 300_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-graph-"));
  const path = join(dir, "library_only.py");
  writeFileSync(
    path,
    `import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 8)

    def forward(self, x):
        return self.fc(x)

def get_inputs():
    return [torch.randn(4, 16)]

def get_init_inputs():
    return []
`,
  );
  const libraryOnly = resolveProblem(path);
  const replayed = await optimizeProblem(
    libraryOnly,
    join(dir, "replayed.py"),
    options(dir, { benchFile: benchWith(0.5, []), evaluateFile: evaluateOnce }),
  );
  assert.equal(replayed.regions.length, 0);
  assert.equal(replayed.verdict, "correct", replayed.reason ?? "");
  assert.equal(replayed.graphed, true);
  const source = readFileSync(join(dir, "replayed.py"), "utf8");
  assert.match(source, /^_KF_GRAPH = True$/m);
  assert.match(source, /_kf_graph_replay\(self, self\._kf_reference_forward, \(x,\), \(\)\)/);
  // the replaying file is the reference where no graph can run (here: the CPU)
  const check = await execa(PYTHON, [
    "-c",
    `import importlib.util as u, torch
def load(p, n):
    s = u.spec_from_file_location(n, p); m = u.module_from_spec(s); s.loader.exec_module(m); return m
ref, new = load(${JSON.stringify(path)}, "ref"), load(${JSON.stringify(join(dir, "replayed.py"))}, "new")
a = ref.Model(); b = new.ModelNew(); b.load_state_dict(a.state_dict())
x = torch.randn(5, 16)
assert torch.equal(a(x), b(x))`,
  ]);
  assert.equal(check.exitCode, 0);

  const plain = await optimizeProblem(
    libraryOnly,
    join(dir, "plain.py"),
    options(dir, { benchFile: benchWith(0.99, []), evaluateFile: evaluateOnce }),
  );
  assert.equal(plain.graphed, false);
  const verbatim = readFileSync(join(dir, "plain.py"), "utf8");
  assert.doesNotMatch(verbatim, /_KF_GRAPH|_kf_reference_forward/);
  assert.match(verbatim, /def forward\(self, x\):\n {8}return self\.fc\(x\)/);
});

test("a file changed after a first bench that timed the replay faster is evaluated replaying: one eval when the final comparison agrees, the launched file evaluated where not", {
  timeout: 300_000,
}, async () => {
  const twoBlocks = resolveProblem("test/fixtures/optimize/conv_two_blocks.py");
  const dir = mkdtempSync(join(tmpdir(), "kforge-graph-"));
  // r1 loses every timing (dropped after its anchor's rounds), r0 wins: the file changes after the first bench.
  const benchGraphed = (graphed: (bench: number) => number, seen: string[]): typeof runBench => {
    return async (_p, candidate, regions, _opts, _compile, timeFile = true) => {
      if (timeFile) seen.push(/^_KF_GRAPH = True$/m.test(readFileSync(candidate, "utf8")) ? "on" : "off");
      return {
        device: "cpu",
        eagerMs: 1.5,
        compiledMs: null,
        oursMs: 1,
        graphedMs: timeFile ? graphed(seen.length) : undefined,
        compileSeconds: null,
        regions: regions.map((id) => ({ id, kernelMs: id === "r1" ? 2 : 1, torchMs: 1.5, note: null })),
        error: null,
      };
    };
  };
  const evaluatedAs = (states: string[]): typeof evaluate => {
    return async (p, candidates, opts, hooks, slots) => {
      states.push(/^_KF_GRAPH = True$/m.test(readFileSync(candidates[0] ?? "", "utf8")) ? "on" : "off");
      return evaluateOnce(p, candidates, opts, hooks, slots);
    };
  };
  const evaluated: string[] = [];
  const agreed = await optimizeProblem(
    twoBlocks,
    join(dir, "agreed.py"),
    options(dir, { benchFile: benchGraphed(() => 0.5, []), evaluateFile: evaluatedAs(evaluated) }),
  );
  assert.equal(agreed.verdict, "correct", agreed.reason ?? "");
  assert.deepEqual(evaluated, ["on"], "the changed file evaluated once, replaying");
  assert.equal(agreed.graphed, true);
  assert.equal(agreed.oursMs, 0.5);
  assert.deepEqual(
    agreed.regions.map((r) => r.status),
    ["fused", "dropped"],
  );
  assert.match(readFileSync(join(dir, "agreed.py"), "utf8"), /^_KF_GRAPH = True$/m);

  const evaluatedAgain: string[] = [];
  const disagreed = await optimizeProblem(
    twoBlocks,
    join(dir, "disagreed.py"),
    options(dir, {
      benchFile: benchGraphed((bench) => (bench === 1 ? 0.5 : 1), []),
      evaluateFile: evaluatedAs(evaluatedAgain),
    }),
  );
  assert.equal(disagreed.verdict, "correct", disagreed.reason ?? "");
  assert.deepEqual(evaluatedAgain, ["on", "off"], "the final comparison did not confirm the replay");
  assert.equal(disagreed.graphed, false);
  assert.equal(disagreed.oursMs, 1);
  assert.match(readFileSync(join(dir, "disagreed.py"), "utf8"), /^_KF_GRAPH = False$/m);
});

test("a graph replays only what a replay reproduces: random ops, host syncs, inputs written in place, functions of the problem's own", {
  timeout: 120_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-graph-"));
  const model = (forward: string, init = "") => `import torch
import torch.nn as nn

def doubled(x):
    return x * 2

torch.fx.wrap("doubled")  # kept whole by fx: a call to the problem's own function

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.1)
        self.bn = nn.BatchNorm1d(8, momentum=None)
${init}
    def forward(self, x):
${forward}

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
`;
  const cases: [string, string, boolean][] = [
    ["pure", "        return torch.relu(x) * 2 + 1", true],
    ["shape_read", "        n, c = x.shape\n        return torch.relu(x).view(n * c) * 2", true],
    ["dropout", "        return self.drop(torch.relu(x))", false],
    ["inplace_input", "        x.mul_(2)\n        return torch.relu(x) + 1", false],
    ["inplace_input_view", "        x.view(-1).mul_(2)\n        return torch.relu(x) + 1", false],
    ["inplace_input_slice", "        x[:, 0] += 1\n        return torch.relu(x) + 1", false],
    ["inplace_own_value", "        y = x * 3\n        y.add_(1)\n        return torch.relu(y)", true],
    ["own_function", "        return torch.relu(doubled(x)) + 1", false],
    ["host_sync", "        return torch.relu(x) * x.max().item()", false],
    ["mask_index", "        return torch.relu(x)[x > 0] + 1", false],
    ["bn_no_momentum", "        return torch.relu(self.bn(x)) + 1", false],
  ];
  mkdirSync(join(dir, "p"), { recursive: true });
  const paths = cases.map(([name, forward]) => {
    const path = join(dir, "p", `${name}.py`);
    writeFileSync(path, model(forward));
    return path;
  });
  const graphs = await captureProblems(paths, { python: PYTHON }); // one Python process for all
  for (const [index, [name, , replayable]] of cases.entries()) {
    const captured = graphs[index];
    assert.ok(captured && !(captured instanceof Error), `${name}: ${captured}`);
    const prepared = await prepareProblem(
      resolveProblem(paths[index] ?? ""),
      join(dir, `${name}_new.py`),
      {
        ...options(dir),
        verify: false,
      },
      captured,
    );
    const { graph } = prepared;
    assert.ok(graph.captured !== "none" || !replayable, name); // not captured: no graph to replay either
    assert.equal(graphReplayable(graph, graph.source.signature), replayable, name);
    const emitted = emitModelFile(graph, prepared.plan, name, "off").source;
    assert.equal(/^_KF_GRAPH = False$/m.test(emitted), replayable, name);
  }
});
