// Assembles the one self-contained ModelNew file: the problem's own prelude (imports, constants, helpers),
// the generated CUDA and host sources as string literals, the small runtime, and ModelNew itself: the
// reference's __init__ verbatim, a forward that reads top to bottom as the reference's did with one call
// per fused region, the region methods (each falling back to the reference's ops), and the reference's
// forward kept for arguments the graph was not specialised for.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../paths.ts";
import { expandSource, renderRuntime } from "../emit.ts";
import type { Graph } from "../graph.ts";
import { GraphView } from "../plan/graph-view.ts";
import { type Plan, type Region, regionNodes } from "../plan/planner.ts";
import { loadRecipe } from "../recipe.ts";
import { type GraphReplay, graphReplayable, replayedAttrs } from "./graph-replay.ts";
import {
  forwardCallArgs,
  OPERATOR_MODULE,
  pyScalar,
  pyStatement,
  RUN_DEVICE,
  selfPath,
} from "./python-expr.ts";
import { recipeBuilder } from "./recipe-region.ts";
import { generateRegion, methodNames, type RegionCode } from "./region.ts";
import { shareIdenticalFunctors } from "./share-functors.ts";

// From the repository root, not this module's folder: the CLI also runs as one bundled file (.carry/).
const HERE = join(REPO_ROOT, "src", "optimize", "codegen");
const CUDA_DIR = join(HERE, "cuda");

/** Headers of each region kind, in include order. */
const KIND_HEADERS: Record<string, string[]> = {
  pointwise: ["kf_elementwise.cuh"],
  reduce: ["kf_reduce.cuh"],
  normalize: ["kf_normalize.cuh"],
  pool: ["kf_pool.cuh", "kf_pool_geometry.cuh"],
  scan: ["kf_scan.cuh"],
};

function regionHeaders(region: Region): string[] {
  // A reduction applying a normalisation in its prologue launches the normalisation's statistics first.
  const own = [
    ...(KIND_HEADERS[region.kind] ?? []),
    ...(region.norm ? ["kf_normalize.cuh", "kf_elementwise.cuh", "kf_normalize_cl.cuh"] : []),
  ];
  if (region.anchorLayout !== "channels_last") return own;
  // A channels-last anchor's input is converted by the elementwise template's tiled copy; a normalisation or a
  // pool reads the anchor's output transposed against its result.
  const reader =
    region.kind === "normalize" ? ["kf_normalize_cl.cuh"] : region.kind === "pool" ? ["kf_pool_cl.cuh"] : [];
  return [...own, "kf_elementwise.cuh", ...reader];
}

/** Headers with their local includes inlined, each file once (the emitted file needs nothing beside it). */
function inlineHeaders(files: string[], seen: Set<string> = new Set()): string {
  const parts: string[] = [];
  for (const file of files) if (!seen.has(file)) parts.push(expandSource(CUDA_DIR, file, seen));
  return parts.join("\n");
}

export interface EmittedModel {
  source: string;
  regions: RegionCode[];
  cuda: string;
  cpp: string;
  extensionName: string;
  /** Whether the file carries graph replay (the mode asked for, or "none" where a graph cannot stand for it). */
  replay: GraphReplay;
}

function pyString(text: string): string {
  if (text.includes('"""')) throw new Error('kforge internal: generated source contains """');
  return `r"""${text}"""`;
}

function fixInit(init: string): string {
  return init.replace(/super\(\s*Model\s*,\s*self\s*\)/g, "super()");
}

function dedent(text: string): string {
  const lines = text.split("\n");
  const pad = Math.min(...lines.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length));
  return lines.map((l) => l.slice(Number.isFinite(pad) ? pad : 0)).join("\n");
}

function reindent(text: string, pad: string): string {
  return dedent(text)
    .split("\n")
    .map((l) => (l.trim() ? pad + l : ""))
    .join("\n");
}

function renameDef(method: string, from: string, to: string): string {
  return method.replace(new RegExp(`def\\s+${from}\\s*\\(`), `def ${to}(`);
}

export function emitModelFile(
  graph: Graph,
  plan: Plan,
  problemName: string,
  replayMode: GraphReplay = "none",
): EmittedModel {
  const view = new GraphView(graph);
  const inputNames = new Set(graph.inputs.map((i) => i.name));
  const nameOf = (id: string) => (inputNames.has(id) ? id : `v_${id}`);
  const inMethod = methodNames([...inputNames], nameOf);
  const regions =
    graph.captured === "none" ? [] : plan.regions.map((r) => generateRegion(view, r, inMethod, nameOf));
  const byOutput = new Map(plan.regions.map((r, i) => [r.output, i]));
  const inRegion = new Set(plan.regions.flatMap(regionNodes));

  // Generated regions share one extension; each recipe used brings its runtime (and its own extension).
  const generated = regions.filter((r) => !r.recipe);
  // A rewrite recipe (no builder) is PyTorch ops in the region's method: no runtime to inline.
  const recipes = [...new Set(regions.flatMap((r) => (r.recipe ? [r.recipe] : [])))].filter(
    (name) => recipeBuilder(name) !== null,
  );
  const headers = inlineHeaders([
    "kf_common.cuh",
    "kf_pointwise.cuh",
    ...plan.regions.filter((r) => !r.recipe).flatMap(regionHeaders),
  ]);
  const cuda = `${headers}\n\n${shareIdenticalFunctors(generated.map((r) => r.cuda)).join("\n\n")}\n`;
  const cpp = `${inlineHeaders(["kf_region_host.h"])}\n\n${generated.map((r) => r.host).join("\n\n")}\n`;
  const hash = createHash("sha256").update(cuda).update(cpp).digest("hex").slice(0, 12);
  const extensionName = `kforge_${problemName.replace(/\W/g, "_")}_${hash}`;

  const callArgs = forwardCallArgs(graph.source.signature);
  const forwardLines: string[] = [];
  const training = graph.specialisedTraining;
  if (typeof training === "boolean" && graph.captured !== "none")
    forwardLines.push(
      `if self.training is not ${training ? "True" : "False"}:`,
      `    return self._kf_reference_forward(${callArgs.join(", ")})`,
    );
  // A flag of the model's own its forward reads (`swap=self.swap`, `if self.use_bias:`) was traced as the value
  // it had: another value takes the reference's forward. (Numbers are read at run time where capture matched
  // them to their attribute, or guarded by the region that bakes them.)
  // A submodule's own flag (`if self.gated:` in a class of the problem file) is guarded the same way when the
  // file's other classes read it; torch.nn's modules' flags (`inplace`, `affine`) are their calls' arguments.
  if (graph.captured !== "none")
    for (const [name, value] of Object.entries(graph.scalarAttrs)) {
      if (typeof value !== "boolean" || name === "training") continue;
      const dot = name.lastIndexOf(".");
      const [owner, leaf] = dot < 0 ? ["", name] : [name.slice(0, dot), name.slice(dot + 1)];
      if (leaf === "training" || (owner && (graph.modules[owner]?.type ?? "torch.").startsWith("torch.")))
        continue;
      const read = new RegExp(`\\bself\\.${leaf}\\b`);
      const texts = owner ? [graph.source.prelude] : [graph.source.forward, ...graph.source.methods];
      if (!texts.some((text) => read.test(text))) continue;
      forwardLines.push(
        `if ${selfPath(name)} is not ${value ? "True" : "False"}:`,
        `    return self._kf_reference_forward(${callArgs.join(", ")})`,
      );
    }
  // Lazy modules have no parameters until their first call: that call is the reference's, which makes them.
  const lazy = graph.lazyTensors ?? [];
  if (lazy.length && graph.captured !== "none")
    forwardLines.push(
      `if ${lazy.map((path) => `isinstance(${selfPath(path)}, torch.nn.parameter.UninitializedTensorMixin)`).join(" or ")}:`,
      `    return self._kf_reference_forward(${callArgs.join(", ")})`,
    );
  for (const input of graph.inputs) {
    // torch.export specialises the graph to the captured shapes (a size read in forward becomes a constant):
    // other shapes take the reference's forward.
    if (input.meta && graph.captured === "export") {
      const shape =
        input.meta.shape.length === 1 ? `(${input.meta.shape[0]},)` : `(${input.meta.shape.join(", ")})`;
      forwardLines.push(
        `if not isinstance(${input.name}, torch.Tensor) or tuple(${input.name}.shape) != ${shape}:`,
        `    return self._kf_reference_forward(${callArgs.join(", ")})`,
      );
    }
    if (input.meta || !input.value) continue;
    forwardLines.push(
      `if not _kf_same(${input.name}, ${pyScalar(input.value, false)}):`,
      `    return self._kf_reference_forward(${callArgs.join(", ")})`,
    );
  }
  const nodesStart = forwardLines.length;
  for (const node of graph.nodes) {
    const regionIndex = byOutput.get(node.id);
    if (regionIndex !== undefined) {
      const code = regions[regionIndex];
      if (!code) continue;
      forwardLines.push(`# ${code.summary}`);
      forwardLines.push(`${nameOf(node.id)} = ${code.call}`);
      continue;
    }
    if (inRegion.has(node.id)) continue;
    forwardLines.push(...pyStatement(node, nameOf).split("\n"));
  }
  forwardLines.push(`return ${outputExpr(graph, nameOf)}`);
  if (forwardLines.slice(nodesStart).some((line) => line.includes(RUN_DEVICE)))
    forwardLines.splice(nodesStart, 0, runDeviceLine(graph));

  // No region (nothing captured, or nothing fused): the reference's forward itself, so the file costs what
  // eager costs to the microsecond (a restated forward pays Python for every op it re-spells).
  // A forward without regions may still replay as a graph (a host-bound forward of library calls): its
  // `_kf_planned_forward` is then the reference's own, renamed.
  const verbatim = graph.captured === "none" || regions.length === 0;
  const replay: GraphReplay =
    graph.captured === "none" || !graphReplayable(graph, graph.source.signature) ? "none" : replayMode;
  const planned = [
    `    def ${replay === "none" ? "forward" : "_kf_planned_forward"}(${graph.source.signature}):`,
    ...forwardLines.map((l) => `        ${l}`),
  ].join("\n");
  const argTuple = callArgs.length === 1 ? `(${callArgs[0]},)` : `(${callArgs.join(", ")})`;
  const attrs = replayedAttrs(graph).map(selfPath);
  const attrTuple = attrs.length === 1 ? `(${attrs[0]},)` : `(${attrs.join(", ")})`;
  const plannedName = verbatim ? "_kf_reference_forward" : "_kf_planned_forward";
  const replayed = [
    `    def forward(${graph.source.signature}):`,
    "        if _KF_GRAPH:",
    `            kf_out = _kf_graph_replay(self, self.${plannedName}, ${argTuple}, ${attrTuple})`,
    "            if kf_out is not _KF_NOT_GRAPHED:",
    "                return kf_out",
    `        return self.${plannedName}(${callArgs.join(", ")})`,
  ].join("\n");
  const forward =
    replay !== "none"
      ? verbatim
        ? replayed
        : `${replayed}\n\n${planned}`
      : verbatim
        ? reindent(graph.source.forward, "    ")
        : planned;
  const classBody = [
    reindent(fixInit(graph.source.init), "    "),
    forward,
    ...(verbatim && replay === "none"
      ? []
      : [reindent(renameDef(graph.source.forward, "forward", "_kf_reference_forward"), "    ")]),
    ...graph.source.methods.map((m) => reindent(m, "    ")),
    ...regions.map((r) => r.method),
  ].join("\n\n");

  const doc = docstring(graph, plan, regions, problemName, replay);
  const runtime = readFileSync(join(HERE, "runtime.py.txt"), "utf8");
  const source = [
    `"""${doc}"""`,
    "",
    `import operator as ${OPERATOR_MODULE}`,
    "",
    "import torch",
    "import torch.nn as nn",
    "",
    graph.source.prelude.trim(),
    "",
    generated.length
      ? [
          `_KF_EXTENSION_NAME = ${JSON.stringify(extensionName)}`,
          `_KF_FUNCTIONS = (${generated.flatMap((r) => [r.fn, ...(r.helperFns ?? [])].map((f) => JSON.stringify(f))).join(", ")},)`,
          `_KF_CUDA_SOURCE = ${pyString(cuda)}`,
          `_KF_CPP_SOURCE = ${pyString(cpp)}`,
          "",
          runtime.trim(),
        ].join("\n")
      : "",
    ...recipes.map(
      (name) =>
        `\n# ---- the ${name} recipe (kernels/${name}/) ----\n${renderRuntime(loadRecipe(name)).trim()}`,
    ),
    regions.length ? regionSwitches(generated.length > 0, recipes) : "",
    replay === "none"
      ? ""
      : `\n\n${readFileSync(join(HERE, "graph_replay.py.txt"), "utf8")
          .trim()
          .replace("_KF_GRAPH = False", `_KF_GRAPH = ${replay === "on" ? "True" : "False"}`)}`,
    "",
    "",
    `class ModelNew(${graph.source.bases || "nn.Module"}):`,
    classBody,
    "",
  ].join("\n");
  return { source: source.replace(/\n{4,}/g, "\n\n\n"), regions, cuda, cpp, extensionName, replay };
}

/** The per-region switch the optimizer times regions with, and one call building every extension. */
/** Defines RUN_DEVICE: the first tensor input's device, else the module's state's (a forward of plain values). */
function runDeviceLine(graph: Graph): string {
  const tensor = graph.inputs.find((input) => input.meta);
  if (tensor) return `${RUN_DEVICE} = ${tensor.name}.device`;
  return `${RUN_DEVICE} = next(iter(self.state_dict().values()), torch.empty(0)).device`;
}

function regionSwitches(generated: boolean, recipes: string[]): string {
  const builders = [...(generated ? ["_kf_ext"] : []), ...recipes.flatMap((r) => recipeBuilder(r) ?? [])];
  return [
    "",
    "",
    "# Region ids forced onto the reference's ops (the optimizer times each region both ways).",
    "_KF_DISABLED = set()",
    "",
    "",
    "def _kf_build_all():",
    '    """Compiles every extension this file uses (the optimizer builds them before the GPU runs)."""',
    ...builders.map((b) => `    ${b}()`),
  ].join("\n");
}

function outputExpr(graph: Graph, nameOf: (id: string) => string): string {
  const render = (arg: Graph["output"]): string => {
    if (arg.t === "node") return nameOf(arg.id);
    if (arg.t === "list") {
      const items = arg.items.map(render);
      return arg.kind === "list"
        ? `[${items.join(", ")}]`
        : `(${items.join(", ")}${items.length === 1 ? "," : ""})`;
    }
    if (arg.t === "dict")
      return `{${arg.keys.map((k, i) => `${render(k)}: ${render(arg.values[i] ?? k)}`).join(", ")}}`;
    if (arg.t === "const") return pyScalar(arg, false);
    if (arg.t === "param") return `self.${arg.path}`;
    return "None";
  };
  return render(graph.output);
}

function docstring(
  graph: Graph,
  plan: Plan,
  regions: RegionCode[],
  problemName: string,
  replay: GraphReplay,
): string {
  const lines = [`ModelNew for ${problemName}, generated by kforge optimize.`, ""];
  if (graph.captured === "none") {
    lines.push(
      `The model could not be captured (${graph.failure ?? "unknown reason"}): this file runs the reference's`,
    );
    lines.push("own forward, unchanged. It is correct, and no faster.");
    return lines.join("\n");
  }
  if (regions.length === 0)
    lines.push(
      "No region of this model is covered by a fused kernel: this file runs the reference's own forward.",
    );
  else
    lines.push(
      "Fused regions (a generated CUDA kernel or a hand-written recipe each; PyTorch's ops when the inputs are not covered):",
    );
  for (const r of regions) lines.push(`  ${r.fn}: ${r.summary}`);
  if (replay === "on")
    lines.push(
      "",
      "The forward replays a CUDA graph of these calls (captured per call signature; inputs copied in, outputs",
      "copied out): its host time, not its GPU time, bounded it.",
    );
  if (plan.kept.length) {
    lines.push("", "Left to PyTorch:");
    for (const k of plan.kept) lines.push(`  ${k.node} (${k.op}): ${k.reason}`);
  }
  return lines.join("\n").replace(/\\/g, "\\\\");
}
