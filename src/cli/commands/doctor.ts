import type { Command } from "commander";
import pc from "picocolors";
import { useColor } from "../../report/table.ts";
import { choosePython, probePython } from "../../worker/python.ts";

interface Line {
  ok: boolean;
  /** Missing but not required for everything (e.g. no GPU on a CPU-only machine). */
  optional?: boolean;
  what: string;
  detail: string;
}

const MIN_NODE_MAJOR = 20;

/** What to do about a missing nvcc: nothing on a CPU-only torch (CUDA_HOME changes nothing there). */
export function missingNvccAdvice(torchCuda: string | null): string {
  return torchCuda === null
    ? "not found — needed only with a CUDA build of PyTorch, which this is not"
    : "not found — load_inline cannot compile CUDA (set CUDA_HOME or put nvcc on PATH)";
}

export async function doctorLines(pythonFlag?: string): Promise<Line[]> {
  const lines: Line[] = [];
  const nodeMajor = Number(process.versions.node.split(".")[0]);
  lines.push({
    ok: nodeMajor >= MIN_NODE_MAJOR,
    what: "node",
    detail: `${process.version}${nodeMajor >= MIN_NODE_MAJOR ? "" : ` — kforge needs Node ${MIN_NODE_MAJOR} or newer`}`,
  });
  const python = choosePython(pythonFlag);
  const outcome = await probePython(python);
  if (!outcome.ok) {
    lines.push({
      ok: false,
      what: "python",
      detail: `${outcome.error} — pass --python or set KFORGE_PYTHON`,
    });
    return lines;
  }
  const p = outcome.probe;
  lines.push({ ok: true, what: "python", detail: `${p.python} at ${p.executable} (${python.source})` });
  lines.push({
    ok: p.torch !== null,
    what: "torch",
    detail:
      p.torch ?? `not importable (${p.torchError ?? "unknown error"}) — install PyTorch into this Python`,
  });
  if (p.torch === null) {
    // Without torch, its CUDA build, the GPU it sees and the compilers it would drive cannot be judged.
    lines.push({ ok: false, optional: true, what: "GPU", detail: "not checked: needs torch first" });
    return lines;
  }
  lines.push({
    ok: p.torchCuda !== null,
    optional: true,
    what: "torch CUDA",
    detail: p.torchCuda ?? "this torch is a CPU build — GPU evaluation needs a CUDA build of PyTorch",
  });
  lines.push({
    ok: p.cudaAvailable,
    optional: true,
    what: "GPU",
    detail: p.cudaAvailable
      ? `${(p.gpuCount ?? 1) > 1 ? `${p.gpuCount} × ` : ""}${p.gpu ?? "unknown GPU"} (driver ${p.driver ?? "unknown"})${(p.gpuCount ?? 1) > 1 ? "; suites run one worker per GPU (--gpus)" : ""}`
      : "no CUDA device visible — eval on GPU problems cannot run here; emit, report, problems and CPU problems still work",
  });
  lines.push({
    ok: p.nvcc !== null,
    optional: true,
    what: "nvcc",
    detail: p.nvcc ?? missingNvccAdvice(p.torchCuda),
  });
  lines.push({
    ok: p.ninja !== null,
    what: "ninja",
    detail: p.ninja ?? "not found — torch.utils.cpp_extension needs it (pip install ninja)",
  });
  return lines;
}

export function registerDoctorCommand(program: Command): void {
  program
    .command("doctor")
    .description("check node, python, torch and its CUDA, the GPU, nvcc and ninja")
    .option("--python <path>", "Python interpreter with torch (default: $KFORGE_PYTHON, then python3)")
    .action(async (flags: { python?: string }) => {
      const color = useColor(process.stdout);
      const lines = await doctorLines(flags.python);
      for (const line of lines) {
        const mark = (line.ok ? "ok" : line.optional ? "--" : "MISSING").padEnd(7);
        const paint = !color ? (s: string) => s : line.ok ? pc.green : line.optional ? pc.yellow : pc.red;
        process.stdout.write(`${paint(mark)} ${line.what.padEnd(10)} ${line.detail}\n`);
      }
      if (lines.some((l) => !l.ok && !l.optional)) process.exitCode = 1;
    });
}
