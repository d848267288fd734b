// The reporting layer: terminal table and detail, progress, results loading, roofline maths, HTML report,
// and the `kforge report` command, all on the fixture results in test/fixtures/results.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, test } from "node:test";
import { execa } from "execa";
import type { OptimizeResult } from "../src/optimize/optimize.ts";
import { escapeHtml, renderHtmlReport } from "../src/report/html.ts";
import { loadResultsFile, loadResultsFiles, ResultsFileError } from "../src/report/load.ts";
import { geomean, regionStatusText, summarizeOptimize } from "../src/report/optimize-summary.ts";
import { formatOptimizeTable } from "../src/report/optimize-table.ts";
import { createProgress } from "../src/report/progress.ts";
import { ceilingsFor, effectivePrecision, floorMs, rooflineEntry } from "../src/report/roofline.ts";
import { errorSummary } from "../src/report/summary.ts";
import { formatResultDetail, formatResultsTable, useColor } from "../src/report/table.ts";
import type { EvalResult, ProgressMessage } from "../src/worker/protocol.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "results");
const fixtureFiles = readdirSync(FIXTURES)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => join(FIXTURES, f));
const { results } = loadResultsFiles(fixtureFiles);
// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes start with ESC
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;
const visible = (line: string) => Array.from(line.replace(ANSI, "")).length;

/** Runs the CLI with colour off (Node warns on stderr when FORCE_COLOR and NO_COLOR are both set). */
function kforgeCli(args: string[]) {
  return execa("node", [join(import.meta.dirname, "..", "bin", "kforge.js"), ...args], {
    reject: false,
    extendEnv: false,
    env: {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== "FORCE_COLOR")),
      NO_COLOR: "1",
    },
  });
}

function byCandidate(name: string): EvalResult {
  const r = results.find((x) => x.candidate === name);
  assert.ok(r, `fixture ${name} exists`);
  return r;
}

/** A copy of a fixture result with some fields replaced. */
function variant(name: string, change: Partial<EvalResult>): EvalResult {
  return { ...structuredClone(byCandidate(name)), ...change };
}

describe("fixtures", () => {
  test("cover several problems and every kind of outcome the report must show", () => {
    const problems = new Set(results.map((r) => r.problem));
    assert.ok(problems.size >= 3);
    const verdicts = new Set(results.map((r) => r.verdict));
    for (const v of ["correct", "incorrect", "compile_error", "cheating", "runtime_error", "no_code"]) {
      assert.ok(verdicts.has(v as EvalResult["verdict"]), `a ${v} fixture`);
    }
    assert.ok(
      results.some((r) => (r.timing?.cand.samplesMs.length ?? 0) >= 100),
      "timing samples present",
    );
  });
});

describe("terminal table", () => {
  for (const width of [100, 80, 60]) {
    for (const color of [false, true]) {
      test(`every line fits ${width} columns (colour ${color ? "on" : "off"})`, () => {
        const text = formatResultsTable(results, { color, width });
        for (const line of text.split("\n"))
          assert.ok(visible(line) <= width, `${visible(line)} > ${width}: ${line}`);
      });
    }
  }

  test("defaults to 100 columns and shows every problem, candidate, verdict and number", () => {
    const text = formatResultsTable(results, { color: false });
    for (const line of text.split("\n")) assert.ok(visible(line) <= 100);
    for (const r of results) {
      assert.ok(text.includes(r.problem), r.problem);
      assert.ok(text.includes(r.candidate), r.candidate);
    }
    const sdpa = byCandidate("sdpa_fp16.kforge.py");
    const line = text.split("\n").find((l) => l.includes("sdpa_fp16.kforge.py")) ?? "";
    assert.match(line, /correct/);
    assert.match(line, /1\.91× \(1\.88–1\.93\)/);
    assert.ok(line.includes(sdpa.timing?.ref.medianMs.toPrecision(3) ?? "?"));
    assert.match(line, /4\.9e-4\s+6\.1e-4$/, "reference and candidate error vs fp64");
    const incorrect = text.split("\n").find((l) => l.includes("000_510f890c0e824915.txt")) ?? "";
    assert.match(incorrect, /incorrect\s+–/, "untimed candidates show a dash, not a number");
    assert.match(incorrect, /3\.8e0$/);
  });

  test("puts the first line of the reason, truncated, under failing results only", () => {
    const lines = formatResultsTable(results, { color: false }).split("\n");
    const reasons = lines.filter((l) => l.includes("↳"));
    assert.equal(reasons.length, results.filter((r) => r.reason).length);
    assert.ok(reasons.some((l) => l.includes("nvcc failed building flash_sdpa") && l.endsWith("…")));
    assert.ok(!reasons.some((l) => l.includes("CUDA kernel errors might be")), "only the first line");
    const afterCorrect = lines[lines.findIndex((l) => l.includes("sdpa_fp16.kforge.py")) + 1] ?? "";
    assert.ok(!afterCorrect.includes("↳"));
  });

  test("keeps a problem column when names are short, and truncates what cannot fit", () => {
    const short = results.map((r, i) => ({ ...r, problem: `p${i % 2}`, candidate: `c${i}` }));
    const shortLines = formatResultsTable(short, { color: false }).split("\n");
    assert.match(shortLines[0] ?? "", /^problem\s+candidate\s+verdict/);
    // The table is narrower than 100; the reasons under it still use the full width.
    const rule = shortLines.find((l) => l.startsWith("─")) ?? "";
    assert.ok(rule.length < 90);
    assert.ok(shortLines.some((l) => l.includes("↳") && l.length > rule.length && l.length <= 100));
    const long = [
      variant("sdpa_fp16.kforge.py", { candidate: `${"very_long_candidate_name_".repeat(6)}.py` }),
    ];
    const text = formatResultsTable(long, { color: false, width: 100 });
    for (const line of text.split("\n")) assert.ok(visible(line) <= 100);
    assert.ok(text.includes("very_long_candidate_name_very_long"));
    assert.ok(text.includes("…"));
  });

  test("colours verdicts and speedups only when asked", () => {
    const plain = formatResultsTable(results, { color: false });
    assert.doesNotMatch(plain, ANSI);
    const colored = formatResultsTable(results, { color: true });
    assert.ok(colored.includes("\x1b[32mcorrect\x1b[39m"), "correct in green");
    assert.ok(colored.includes("\x1b[31mincorrect\x1b[39m"), "incorrect in red");
    assert.ok(colored.includes("\x1b[35mcheating"), "cheating in magenta");
    assert.ok(colored.includes("\x1b[31m0.75× (0.74–0.76)"), "a CI entirely below 1× in red");
    const timedCheat = variant("sdpa_fp16.kforge.py", { verdict: "cheating" });
    const cheatText = formatResultsTable([timedCheat], { color: true });
    // A cheat's timing is its own account (a forged clock is one way to cheat): no number, never green.
    assert.ok(cheatText.includes("\x1b[2m– (cheating)"), cheatText);
    assert.doesNotMatch(cheatText, /1\.91×/);
    assert.ok(
      colored.includes("1.00× (0.99–1.01)") && !colored.includes("m1.00× (0.99–1.01)"),
      "inconclusive uncoloured",
    );
    assert.equal(colored.replace(ANSI, ""), plain);
  });

  test("says so when there is nothing to show", () => {
    assert.equal(formatResultsTable([], { color: false }), "no results\n");
  });
});

describe("useColor", () => {
  const tty = { isTTY: true };
  const pipe = { isTTY: false };
  test("colours a TTY and nothing else by default", () => {
    assert.equal(useColor(tty, {}), true);
    assert.equal(useColor(pipe, {}), false);
    assert.equal(useColor({}, {}), false);
  });
  test("NO_COLOR (non-empty) and TERM=dumb turn it off", () => {
    assert.equal(useColor(tty, { NO_COLOR: "1" }), false);
    assert.equal(useColor(tty, { NO_COLOR: "" }), true);
    assert.equal(useColor(tty, { TERM: "dumb" }), false);
  });
  test("FORCE_COLOR wins either way", () => {
    assert.equal(useColor(pipe, { FORCE_COLOR: "1" }), true);
    assert.equal(useColor(pipe, { FORCE_COLOR: "" }), true);
    assert.equal(useColor(tty, { FORCE_COLOR: "0" }), false);
    assert.equal(useColor(tty, { FORCE_COLOR: "false" }), false);
    assert.equal(useColor(pipe, { FORCE_COLOR: "1", NO_COLOR: "1" }), true);
  });
});

describe("result detail", () => {
  test("shows failed and warned checks with their evidence", () => {
    const text = formatResultDetail(byCandidate("side_stream_reply.md"), { color: false });
    assert.match(text, /FAIL side_stream → cheating/);
    assert.match(text, /stream 0x7f3a2c001e40/);
    assert.match(text, /checks \(32 passed, 1 failed, 1 warned, 0 skipped\)/);
    assert.match(text, /WARN static_side_stream/);
    assert.match(text, /block 1 of 1 in transcript sources\/side_stream_reply\.md/);
    const warned = formatResultDetail(byCandidate("layernorm_naive.py"), { color: false });
    assert.match(warned, /WARN timing_cross_check/);
    assert.match(warned, /torch::cuda::synchronize\(\) itself/);
  });

  test("discloses the GPU time split and the verification policy", () => {
    const base = byCandidate("side_stream_reply.md");
    const evidence =
      "own kernels 72% of GPU time (3 kernels); library 28%: ampere_sgemm_128x64_tn 25%, elementwise_kernel 3%";
    const disclosed = {
      ...base,
      strict: false,
      checks: [
        ...base.checks,
        { name: "library_share", outcome: "warn" as const, failVerdict: null, evidence },
      ],
    };
    const text = formatResultDetail(disclosed, { color: false });
    assert.match(
      text,
      /GPU time \(one profiled forward\)\n {2}own kernels 72% of GPU time \(3 kernels\); library 28%/,
    );
    assert.match(text, /policy: library and PyTorch operators disclosed, not condemned/);
    assert.match(formatResultDetail({ ...disclosed, strict: true }, { color: false }), /policy: --strict/);
    assert.doesNotMatch(formatResultDetail(base, { color: false }), /GPU time/);
  });

  test("shows the compile errors from a failed build's log", () => {
    const text = formatResultDetail(byCandidate("002_e7edf580a2003a0e.txt"), { color: false });
    assert.match(text, /compile log: flash_sdpa \(failed after 12\.7 s\)/);
    assert.match(text, /cuda\.cu\(41\): error: no suitable conversion/);
    assert.match(text, /cuda\.cu\(77\): error: identifier "hexp" is undefined/);
  });

  test("lists trials with errors against the reference and float64, within the width", () => {
    const text = formatResultDetail(byCandidate("000_510f890c0e824915.txt"), { color: false, width: 100 });
    assert.match(text, /trials \(0\/5 passed\)/);
    assert.match(text, /1001\s+0\s+\[32,32,512,1024\]\s+float16\s+no\s+3\.8e0\s+3\.8e0\s+4\.9e-4/);
    for (const line of text.split("\n")) assert.ok(visible(line) <= 100, line);
    assert.doesNotMatch(text, ANSI);
    const colored = formatResultDetail(byCandidate("000_510f890c0e824915.txt"), { color: true, width: 60 });
    assert.match(colored, ANSI);
    for (const l of colored.split("\n")) {
      assert.ok(visible(l) <= 60, l);
      // Every line that opens a colour closes it: a cut never strands the terminal in bold or red.
      const codes = l.match(ANSI) ?? [];
      const opens = codes.filter((code) => /\[(1|2|3[0-7])m$/.test(code)).length;
      const closes = codes.filter((code) => /\[(22|39)m$/.test(code)).length;
      assert.equal(opens, closes, l);
    }
  });
});

class CaptureStream extends PassThrough {
  text = "";
  isTTY: boolean;
  columns = 100;
  constructor(isTTY: boolean) {
    super();
    this.isTTY = isTTY;
    this.on("data", (chunk: Buffer) => {
      this.text += chunk.toString();
    });
  }
  // What cli-progress uses on a terminal.
  cursorTo(x: number, _y?: number) {
    this.write(`\x1b[${x + 1}G`);
    return true;
  }
  moveCursor(dx: number, dy: number) {
    if (dy) this.write(`\x1b[${Math.abs(dy)}${dy < 0 ? "A" : "B"}`);
    if (dx) this.write(`\x1b[${Math.abs(dx)}${dx < 0 ? "D" : "C"}`);
    return true;
  }
  clearLine() {
    this.write("\x1b[2K");
    return true;
  }
  clearScreenDown() {
    this.write("\x1b[0J");
    return true;
  }
}

const msg = (stage: ProgressMessage["stage"], detail: string, fraction: number | null): ProgressMessage => ({
  type: "progress",
  stage,
  detail,
  fraction,
});

describe("progress", () => {
  test("prints nothing when disabled", () => {
    const stream = new CaptureStream(true);
    const p = createProgress({ enabled: false, stream: stream as unknown as NodeJS.WriteStream });
    p.candidateStarted("a.py", 0, 1);
    p.update(msg("compile", "building", null));
    p.candidateFinished(byCandidate("sdpa_fp16.kforge.py"));
    p.log("x");
    p.stop();
    assert.equal(stream.text, "");
  });

  test("prints plain, rate-limited lines with no control codes when not a TTY", () => {
    const stream = new CaptureStream(false);
    let now = 0;
    const p = createProgress({
      enabled: true,
      stream: stream as unknown as NodeJS.WriteStream,
      plainIntervalMs: 1000,
      now: () => now,
    });
    p.candidateStarted("000_510f890c0e824915.txt", 1, 3);
    p.update(msg("compile", "building extension sdpa_cuda (ninja)", null));
    now += 100;
    p.update(msg("check", "trial 1/5", 0.2));
    now += 100;
    p.update(msg("check", "trial 2/5", 0.4)); // same stage within the interval: held back
    now += 1000;
    p.update(msg("check", "trial 3/5", 0.6));
    p.candidateFinished(byCandidate("000_510f890c0e824915.txt"));
    p.stop();
    assert.ok(!stream.text.includes("\x1b"), "no control codes");
    assert.deepEqual(stream.text.trimEnd().split("\n"), [
      "[2/3] 000_510f890c0e824915.txt: started",
      "[2/3] 000_510f890c0e824915.txt: compile: building extension sdpa_cuda (ninja)",
      "[2/3] 000_510f890c0e824915.txt: trials 20%: trial 1/5",
      "[2/3] 000_510f890c0e824915.txt: trials 60%: trial 3/5",
      "[2/3] 000_510f890c0e824915.txt (took block 6 of 6): incorrect (52.0 s) — output 0 differs from the reference in 5/5 trials: max |Δ| 3.81 at [3, 7, 100, 12] (atol 0.01, rtol 0.01)",
    ]);
  });

  test("draws a live bar with the stage and detail on a TTY, and logs finished candidates above it", async () => {
    const stream = new CaptureStream(true);
    const p = createProgress({ enabled: true, stream: stream as unknown as NodeJS.WriteStream });
    p.candidateStarted("sdpa_fp16.kforge.py", 0, 2);
    p.update(msg("time", "iteration 120/200, CI ±1.7%", 0.6));
    await new Promise((r) => setTimeout(r, 250));
    p.log("worker: compiled in 41 s");
    p.candidateFinished(byCandidate("sdpa_fp16.kforge.py"));
    p.stop();
    const text = stream.text.replace(ANSI, "");
    assert.match(text, /\[1\/2\] sdpa_fp16\.kforge\.py █+░+\s+60% timing iteration 120\/200, CI ±1\.7%/);
    assert.match(text, /worker: compiled in 41 s\n/);
    assert.match(
      text,
      /\[1\/2\] sdpa_fp16\.kforge\.py: correct speedup 1\.91× \(1\.88–1\.93\) \(1 min 13 s\)\n/,
    );
  });
});

describe("results files", () => {
  const dir = mkdtempSync(join(tmpdir(), "kforge-report-load-"));
  const one = byCandidate("sdpa_fp16.kforge.py");
  test("accept one result, an array, or {results: [...]}", () => {
    const shapes = { "one.json": one, "array.json": [one, one], "wrapped.json": { results: [one] } };
    for (const [name, content] of Object.entries(shapes))
      writeFileSync(join(dir, name), JSON.stringify(content));
    assert.equal(loadResultsFile(join(dir, "one.json")).results.length, 1);
    assert.equal(loadResultsFile(join(dir, "array.json")).results.length, 2);
    assert.equal(loadResultsFile(join(dir, "wrapped.json")).results[0]?.candidate, one.candidate);
  });

  test("keep the optional report fields (workload, optimize)", () => {
    const ln = byCandidate("layernorm_bf16.kforge.py") as EvalResult & { workload?: unknown };
    assert.ok(ln.workload, "workload survives validation");
  });

  test("reject a bad file with one line naming it and what is wrong", () => {
    const cases: Array<[string, string, RegExp]> = [
      ["garbage.json", "{not json", /garbage\.json: not valid JSON/],
      [
        "wrong.json",
        JSON.stringify({ ...one, verdict: "great" }),
        /wrong\.json: not an EvalResult at verdict/,
      ],
      [
        "inarray.json",
        JSON.stringify([one, { protocol: 1 }]),
        /inarray\.json: not an EvalResult at 1\.problem/,
      ],
      [
        "results.json",
        JSON.stringify({ results: [{ ...one, timing: 3 }] }),
        /results\.json: not an EvalResult at results\.0\.timing/,
      ],
    ];
    for (const [name, content, expected] of cases) {
      writeFileSync(join(dir, name), content);
      assert.throws(
        () => loadResultsFile(join(dir, name)),
        (e: unknown) =>
          e instanceof ResultsFileError && expected.test(e.message) && !e.message.includes("\n"),
        name,
      );
    }
    assert.throws(() => loadResultsFile(join(dir, "absent.json")), /absent\.json: no such file/);
  });
});

describe("roofline", () => {
  test("the floor is the larger of compute time and memory time on the device's ceilings", () => {
    const sdpa = byCandidate("sdpa_fp16.kforge.py");
    const ceilings = ceilingsFor(sdpa);
    assert.equal(ceilings?.name, "H100 80GB HBM3");
    const w = sdpa.workload; // counted by the worker on the reference, carried in the result
    assert.ok(w && ceilings);
    assert.equal(w.flops, 4 * 32 * 32 * 512 * 512 * 1024);
    const compute = ceilings.compute.find((c) => c.precisions.includes("fp16"));
    assert.ok(compute);
    const expected = Math.max(w.flops / 778e12, w.bytes / 2.95e12) * 1000;
    assert.ok(Math.abs(floorMs(w, ceilings, compute) - expected) < 1e-12);
    const entry = rooflineEntry(sdpa);
    assert.ok(entry.ok);
    assert.ok(Math.abs(entry.cand.tflops - w.flops / (sdpa.timing?.cand.medianMs ?? 0) / 1e9) < 1e-9);
  });

  test("fp32 problems are held to the fp32 ceiling, not the tensor-core one", () => {
    const entry = rooflineEntry(byCandidate("gemm_bn_scale_softmax.kforge.py"));
    assert.ok(entry.ok);
    assert.deepEqual(entry.compute.precisions, ["fp32"]);
  });

  test("explains results it cannot place", () => {
    // A result of an older worker (or an untimed run) carries no workload: no floor to draw.
    const unknown = rooflineEntry(
      variant("sdpa_fp16.kforge.py", { problem: "my_conv", workload: undefined }),
    );
    assert.equal(unknown.ok, false);
    assert.match(!unknown.ok ? unknown.why : "", /carries no workload .* for my_conv/);
    const cpu = variant("sdpa_fp16.kforge.py", {});
    cpu.environment = { ...cpu.environment, device: "cpu", gpu: null };
    const cpuEntry = rooflineEntry(cpu);
    assert.match(!cpuEntry.ok ? cpuEntry.why : "", /no measured ceilings for device cpu/);
    assert.equal(rooflineEntry(byCandidate("softmax_rows.py")).ok, false);
  });

  test("precision falls back to the outputs' dtype", () => {
    const r = variant("layernorm_naive.py", { precision: null });
    assert.equal(effectivePrecision(r), "bf16");
  });

  test("error summary takes the worst over trials and outputs", () => {
    const e = errorSummary(byCandidate("000_510f890c0e824915.txt"));
    assert.equal(e.candVsFp64, 3.81);
    assert.equal(e.refVsFp64, 0.00049);
  });
});

describe("HTML report", () => {
  const page = renderHtmlReport(results, { title: "fixtures", sourceDirs: [FIXTURES] });

  test("has a summary row per result with verdict, speedup and errors vs float64", () => {
    const rows = page.match(/<tr class="result-row"[^>]*>/g) ?? [];
    assert.equal(rows.length, results.length);
    const row = page.slice(page.indexOf('data-candidate="sdpa_fp16.kforge.py"'));
    const cells = row.slice(0, row.indexOf("</tr>"));
    assert.match(cells, /class="verdict"[^>]*>correct</);
    assert.match(cells, /1\.91× \(1\.88–1\.93\)/);
    assert.match(cells, /4\.9e-4/);
    assert.match(cells, /6\.1e-4/);
    assert.match(cells, /class="check pass"[^>]*>banned_ops</);
    assert.match(cells, /34 ran: 34 pass/);
    const cheatRow = page.slice(page.indexOf('data-candidate="side_stream_reply.md"'));
    const cheatCells = cheatRow.slice(0, cheatRow.indexOf("</tr>"));
    // Failed and warned checks are shown up front; the full list sits behind a disclosure.
    const upFront = cheatCells.slice(0, cheatCells.indexOf('<details class="all-checks">'));
    assert.match(upFront, /class="check fail"[^>]*>side_stream</);
    assert.match(upFront, /class="check warn"[^>]*>static_side_stream</);
    assert.doesNotMatch(upFront, /class="check pass"/);
    assert.match(cheatCells, /34 ran: 32 pass, 1 fail, 1 warn/);
    const cheat = renderHtmlReport([variant("sdpa_fp16.kforge.py", { verdict: "cheating" })], {
      source: () => ({ code: null, note: "-" }),
    });
    assert.match(cheat, /class="speedup invalid" title="not a valid speedup: the candidate is cheating"/);
  });

  test("draws the charts as inline SVG: speedup, timing per timed problem, roofline", () => {
    const svgs = page.match(/<svg[\s>]/g) ?? [];
    const timedProblems = new Set(results.filter((r) => r.timing).map((r) => r.problem));
    assert.equal(svgs.length, 1 + timedProblems.size + 1);
    assert.match(page, /Speedup over PyTorch/);
    assert.match(page, /Roofline: H100 80GB HBM3/);
    assert.match(page, /gemm_bn_scale_softmax floor 2\.05 ms/);
    assert.doesNotMatch(page, /<script|<link|src="http|url\(http/i, "no scripts, no external resources");
  });

  test("gives chart marks native hover text (SVG <title>) with the numbers behind them", () => {
    assert.match(
      page,
      /<title>sdpa_fp16\.kforge\.py on sdpa_fp16: correct, 1\.91× \(1\.88–1\.93\) \(95% CI\); median 6\.43 ms PyTorch, 3\.37 ms candidate<\/title>/,
    );
    assert.match(page, /<title>layernorm_naive\.py: median 0\.189 ms, quartiles [^<]*n=200<\/title>/);
    assert.match(
      page,
      /<title>sdpa_fp16: floor 1\.46 ms \(1100 GFLOP, 4295 MB; fp16\/bf16 tensor\)<\/title>/,
    );
    assert.match(
      page,
      /<title>sdpa_fp16\.kforge\.py on sdpa_fp16: 326\.\d TFLOP\/s, \d+ GB\/s, 3\.37 ms \(floor ÷ time 43%\)<\/title>/,
    );
  });

  test("shows the evidence: reasons, failed checks, compile logs, the extracted code, fused regions", () => {
    assert.match(page, /cuda\.cu\(77\): error: identifier &quot;hexp&quot; is undefined/);
    assert.match(page, /extracted code: block 6 of 6 from transcript sources\/000_510f890c0e824915\.txt/);
    assert.match(page, /class ModelNew/, "the transcript's block is shown");
    assert.match(page, /source not found on this machine: \/home\/user\/kforge-out\/sdpa_fp16\.kforge\.py/);
    assert.match(page, /attention\/fused_fwd/);
    assert.match(page, /<details class="result" id="result-\d+"/);
  });

  test("escapes everything that comes from results, in the tables and in the charts", () => {
    const evil = variant("sdpa_fp16.kforge.py", {
      candidate: `<script>alert("x")</script>`,
      problem: `p&<b>`,
      reason: `<img src=x onerror=alert(1)>`,
      verdict: "incorrect",
    });
    const html = renderHtmlReport([evil], {
      source: () => ({ code: "</pre><script>bad()</script>", note: "n" }),
    });
    assert.doesNotMatch(html, /<script|<img|<b>/);
    assert.match(html, /&lt;script&gt;alert\(&quot;x&quot;\)&lt;\/script&gt;/);
    assert.match(html, /&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.match(html, /p&amp;&lt;b&gt;/);
  });

  test("keeps huge compile logs to their head and tail", () => {
    const noisy = variant("002_e7edf580a2003a0e.txt", {});
    const log = `FIRST LINE\n${"cuda.cu(1): error: x\n".repeat(20000)}LAST LINE`;
    noisy.compile = [{ name: "flash_sdpa", seconds: 1, ok: false, log }];
    const html = renderHtmlReport([noisy], { source: () => ({ code: null, note: "-" }) });
    assert.ok(html.length < 200_000, `${html.length} characters`);
    assert.match(html, /FIRST LINE/);
    assert.match(html, /LAST LINE/);
    assert.match(html, /characters cut/);
  });

  test("says why instead of drawing a chart when there is no data for it", () => {
    const untimed = results.filter((r) => !r.timing);
    const html = renderHtmlReport(untimed, { source: () => ({ code: null, note: "-" }) });
    assert.doesNotMatch(html, /<svg/);
    assert.match(html, /No speedup chart: no candidate was timed/);
    assert.match(html, /No roofline: no timed results/);
    const unknown = renderHtmlReport(
      [variant("sdpa_fp16.kforge.py", { problem: "my_conv", workload: undefined })],
      { source: () => ({ code: null, note: "-" }) },
    );
    assert.match(unknown, /No roofline: the result carries no workload .* for my_conv/);
    assert.equal((unknown.match(/<svg/g) ?? []).length, 2, "speedup and timing still drawn");
  });
});

describe("kforge report", () => {
  const kforge = (args: string[]) => kforgeCli(["report", ...args]);
  const dir = mkdtempSync(join(tmpdir(), "kforge-report-cmd-"));

  test("writes the HTML report from several results files", async () => {
    const out = join(dir, "sub", "report.html");
    const run = await kforge([...fixtureFiles, "-o", out, "--title", "nightly <run>"]);
    assert.equal(run.exitCode, 0, run.stderr);
    assert.match(run.stderr, /wrote .*report\.html \(10 results, 3 problems\)/);
    const html = readFileSync(out, "utf8");
    assert.match(html, /<title>nightly &lt;run&gt;<\/title>/);
    assert.equal((html.match(/<tr class="result-row"/g) ?? []).length, 10);
    assert.match(html, /class ModelNew/, "relative transcript paths resolved next to the results files");
  });

  test("prints the table and the failing results' evidence when asked", async () => {
    const run = await kforge([...fixtureFiles, "-o", join(dir, "t.html"), "--table", "--details"]);
    assert.equal(run.exitCode, 0, run.stderr);
    for (const line of run.stdout.split("\n")) assert.ok(visible(line) <= 100, line);
    assert.match(run.stdout, /^problem\s/);
    assert.match(run.stdout, /compile log: flash_sdpa \(failed after 12\.7 s\)/);
    assert.doesNotMatch(run.stdout, /sdpa_fp16\.kforge\.py on sdpa_fp16/, "no details for correct results");
    assert.ok(!run.stdout.includes("\x1b"), "no colour when piped");
  });

  test("a bad file is one line naming it, exit 1, nothing written", async () => {
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify([{ protocol: 1, problem: "x" }]));
    const out = join(dir, "never.html");
    const run = await kforge([fixtureFiles[0] ?? "", bad, "-o", out]);
    assert.equal(run.exitCode, 1);
    assert.equal(run.stderr.trim().split("\n").length, 1);
    assert.match(run.stderr, /^kforge report: .*bad\.json: not an EvalResult at 0\.candidate/);
    assert.equal(existsSync(out), false);
  });
});

describe("kforge optimize results", () => {
  const OPTIMIZE_FIXTURES = join(FIXTURES, "optimize");
  const optimizeFiles = readdirSync(OPTIMIZE_FIXTURES)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => join(OPTIMIZE_FIXTURES, f));
  const { optimize } = loadResultsFiles(optimizeFiles);
  const byProblem = (name: string): OptimizeResult => {
    const r = optimize.find((x) => x.problem === name);
    assert.ok(r, `optimize fixture ${name}`);
    return r;
  };
  const dir = mkdtempSync(join(tmpdir(), "kforge-report-optimize-"));
  /** The H100 swish_scale_residual result with its region rejected by the eval, as verifyProblem leaves it. */
  const rejected = (): OptimizeResult => {
    const r = structuredClone(byProblem("swish_scale_residual"));
    r.rejected = { verdict: "incorrect", reason: "output 0: max |Δ| 3.1e-1 > atol 1e-2\nsecond line" };
    for (const g of r.regions) g.status = "rejected";
    return r;
  };

  test("load from {optimize: [...]} files, validated, beside eval results", () => {
    assert.equal(optimize.length, 13);
    assert.ok(
      optimize.some((r) => r.verdict === null),
      "a --no-verify run",
    );
    assert.ok(
      optimize.some((r) => r.kept.length > 0),
      "ops kept in PyTorch, with reasons",
    );
    assert.ok(optimize.some((r) => r.regions.some((g) => g.status === "dropped")));
    assert.ok(
      optimize.some((r) => r.eval !== null),
      "the eval of the emitted file rides along",
    );
    const mixed = loadResultsFiles([...fixtureFiles, ...optimizeFiles]);
    assert.equal(mixed.results.length, results.length);
    assert.equal(mixed.optimize.length, optimize.length);
    assert.equal(loadResultsFile(optimizeFiles[0] ?? "").results.length, 0);
  });

  test("reject a file that is neither kind, or a bad optimize entry, with one line naming it", () => {
    const good = byProblem("gelu_exact");
    const cases: Array<[string, unknown, RegExp]> = [
      ["neither.json", { rows: [] }, /neither\.json: neither eval results .* nor kforge optimize results/],
      [
        "bad-optimize.json",
        { optimize: [good, { ...good, speedup: "fast" }] },
        /bad-optimize\.json: not kforge optimize results at optimize\.1\.speedup/,
      ],
      [
        "bad-region.json",
        { optimize: [{ ...good, regions: [{ ...good.regions[0], status: "maybe" }] }] },
        /bad-region\.json: not kforge optimize results at optimize\.0\.regions\.0\.status/,
      ],
    ];
    for (const [name, content, expected] of cases) {
      writeFileSync(join(dir, name), JSON.stringify(content));
      assert.throws(
        () => loadResultsFile(join(dir, name)),
        (e: unknown) =>
          e instanceof ResultsFileError && expected.test(e.message) && !e.message.includes("\n"),
        name,
      );
    }
  });

  test("summary: counts, and geomeans over the correct, timed problems only", () => {
    const s = summarizeOptimize(optimize);
    assert.equal(s.problems, 13);
    assert.equal(s.verified, 9);
    assert.equal(s.correct, 9);
    // Worked out independently: the n-th root of the product of the fixture's nine H100 speedups.
    const timed = optimize.filter((r) => r.verdict === "correct");
    const root = (xs: number[]) => xs.reduce((p, x) => p * x, 1) ** (1 / xs.length);
    const vsEager = root(timed.map((r) => r.speedup ?? Number.NaN));
    const vsCompile = root(timed.map((r) => r.speedupVsCompile ?? Number.NaN));
    assert.equal(s.vsEager.n, 9);
    assert.equal(s.vsCompile.n, 9);
    assert.ok(Math.abs((s.vsEager.geomean ?? 0) - vsEager) < 1e-12);
    assert.ok(Math.abs((s.vsCompile.geomean ?? 0) - vsCompile) < 1e-12);
    assert.equal(vsEager.toFixed(2), "1.22");
    assert.equal(vsCompile.toFixed(2), "0.95");
    assert.deepEqual(s.regions, { fused: 8, dropped: 5, rejected: 0 });
    assert.equal(s.kept, 2);
    // A wrong file's time is no speedup: it neither counts nor moves the geomean.
    const wrong = { ...structuredClone(byProblem("gelu_exact")), verdict: "incorrect" as const, speedup: 50 };
    const withWrong = summarizeOptimize([...optimize, wrong]);
    assert.equal(withWrong.vsEager.n, 9);
    assert.equal(withWrong.vsEager.geomean, s.vsEager.geomean);
    assert.equal(withWrong.correct, 9);
    assert.equal(withWrong.verified, 10);
    assert.equal(geomean([]), null);
    assert.equal(geomean([2, 8]), 4);
  });

  test("a dropped region reads as a loser, or as a winner alone given up with a file not faster than eager", () => {
    const region = (
      kernelMs: number | null,
      torchMs: number | null,
      status: "fused" | "dropped" | "rejected",
    ) => ({
      id: "r0",
      kind: "normalize",
      ops: ["softmax"],
      summary: "softmax (normalize)",
      kernelMs,
      torchMs,
      status,
    });
    assert.equal(regionStatusText(region(1, 2, "fused")), "fused");
    assert.match(regionStatusText(region(1.2, 0.78, "dropped")), /its kernel was not faster/);
    assert.match(
      regionStatusText(region(1, 1.01, "dropped")),
      /its kernel was not faster/,
      "a tie within the margin",
    );
    assert.match(regionStatusText(region(null, null, "dropped")), /its kernel was not faster/);
    assert.match(
      regionStatusText(region(0.03, 0.05, "dropped")),
      /faster alone, but the file with it was not faster/,
    );
    assert.match(regionStatusText(region(1, 2, "rejected")), /failed the eval/);
  });

  test("terminal table: a row per problem with both speedups, and the geomeans, within the width", () => {
    for (const width of [100, 80, 60]) {
      for (const color of [false, true]) {
        const text = formatOptimizeTable(optimize, { color, width });
        for (const line of text.split("\n"))
          assert.ok(visible(line) <= width, `${visible(line)} > ${width}: ${line}`);
      }
    }
    const text = formatOptimizeTable(optimize, { color: false });
    for (const r of optimize) assert.ok(text.includes(r.problem.slice(0, 18)), r.problem);
    const swish = text.split("\n").find((l) => l.startsWith("swish_scale_residual")) ?? "";
    assert.match(swish, /correct\s+1\.47\s+0\.633\s+0\.582\s+2\.52×\s+1\.09×\s+1\/1$/);
    const softmax = text.split("\n").find((l) => l.startsWith("softmax_rows")) ?? "";
    assert.match(softmax, /0\/1 1 dropped$/);
    assert.match(text.split("\n").find((l) => l.startsWith("cross_entropy")) ?? "", /not verified.*–$/);
    assert.match(text.replaceAll("\n", " "), /13 problems: 9 correct of 9 verified; geomean 1\.22× vs eager/);
    assert.match(
      text.replaceAll("\n", " "),
      /geomean 0\.95× vs torch\.compile \(over 9 correct, timed problems\)/,
    );
    assert.match(formatOptimizeTable([rejected()], { color: false }), /0\/1 1 rejected/);
  });

  test("HTML: every problem, region and kept reason, the rejection, the chart and the evidence", () => {
    const source = () => ({ code: "class ModelNew: pass", note: "n" });
    const page = renderHtmlReport({ results: [], optimize }, { source });
    const rejectedPage = renderHtmlReport({ results: [], optimize: [rejected()] }, { source });
    const rows = page.match(/<tr class="optimize-row"[^>]*>/g) ?? [];
    assert.equal(rows.length, optimize.length);
    for (const r of optimize) {
      assert.ok(page.includes(`<section class="optimize-problem" id="optimize-`), r.problem);
      assert.ok(page.includes(`data-problem="${r.problem}"`), r.problem);
      for (const g of r.regions) assert.ok(page.includes(escapeHtml(g.summary)), `${r.problem} ${g.summary}`);
      for (const k of r.kept) assert.ok(page.includes(escapeHtml(k.reason)), k.reason);
    }
    assert.match(page, /it draws random numbers \(kept in PyTorch so the RNG stream matches\)/);
    assert.match(page, /<td>abs_1<\/td><td>abs<\/td><td>complex64 operand input<\/td>/);
    // A region row: kernel and PyTorch times and the gain, with its status in words.
    const conv = page.slice(page.indexOf('data-problem="conv2d_relu_bias" data-verdict'));
    assert.match(conv.slice(0, conv.indexOf("</tr>")), /2\.35.*1\.28.*1\.94.*1\.21×.*0\.66×/s);
    assert.match(
      page,
      /data-region="r0" data-status="dropped">\s*<td>r0<\/td><td>softmax \(normalize\)<\/td><td>normalize<\/td><td><span class="status dropped">left to PyTorch \(its kernel was not faster\)<\/span><\/td>\s*<td class="num">1\.20<\/td><td class="num">0\.783<\/td>\s*<td class="num"><span class="speedup slower">0\.65×<\/span>/,
    );
    assert.match(
      rejectedPage,
      /kernels rejected: the file with its kernels was incorrect: output 0: max \|Δ\| 3\.1e-1 &gt; atol 1e-2;/,
    );
    assert.match(
      rejectedPage,
      /class="status rejected">left to PyTorch \(the file with the kernels failed the eval\)/,
    );
    assert.match(page, /not verified \(--no-verify\): no eval, no timings/);
    // Summary numbers and the chart (paired bars per timed problem, hover text with the times).
    assert.match(page, /<div class="stat-value">1\.22×<\/div><div class="stat-label">vs eager<\/div>/);
    assert.match(
      page,
      /<div class="stat-value">0\.95×<\/div><div class="stat-label">vs torch\.compile<\/div>/,
    );
    assert.equal((page.match(/<svg[\s>]/g) ?? []).length, 1, "one chart; no empty eval sections");
    assert.match(
      page,
      /<title>swish_scale_residual \(correct\): 2\.52× vs eager; ours 0\.582 ms, eager 1\.47 ms<\/title>/,
    );
    assert.match(
      page,
      /<title>swish_scale_residual \(correct\): 1\.09× vs torch\.compile; ours 0\.582 ms, torch\.compile 0\.633 ms<\/title>/,
    );
    assert.doesNotMatch(page, /id="roofline"|No speedup chart: no candidate/);
    // The emitted file's eval as evidence: its checks, under its own anchor.
    assert.match(page, /<details class="result" id="optimize-5-eval"/);
    assert.match(page, /static_shortcut/);
    // Well-formed enough to trust: balanced blocks, nothing executable, nothing fetched.
    for (const tag of ["section", "table", "tr", "details", "figure", "ul", "svg"])
      assert.equal(
        (page.match(new RegExp(`<${tag}[\\s>]`, "g")) ?? []).length,
        (page.match(new RegExp(`</${tag}>`, "g")) ?? []).length,
        `<${tag}> balanced`,
      );
    assert.doesNotMatch(page, /<script|<link|src="http|url\(http/i);
  });

  test("HTML: escapes problem names, summaries and reasons", () => {
    const evil = structuredClone(byProblem("scale_dropout_gelu"));
    evil.problem = `<b>p</b>`;
    evil.kept = [{ node: "n<1>", op: "op&", reason: `<img src=x onerror=alert(1)>` }];
    const first = evil.regions[0];
    if (first) first.summary = `<script>x()</script>`;
    const page = renderHtmlReport({ results: [], optimize: [evil] });
    assert.doesNotMatch(page, /<script|<img|<b>/);
    assert.match(page, /&lt;img src=x onerror=alert\(1\)&gt;/);
    assert.match(page, /&lt;b&gt;p&lt;\/b&gt;/);
  });

  test("kforge report takes optimize and eval files together; --table prints both tables", async () => {
    const out = join(dir, "both.html");
    const run = await kforgeCli(["report", ...fixtureFiles, ...optimizeFiles, "-o", out, "--table"]);
    assert.equal(run.exitCode, 0, run.stderr);
    assert.match(run.stderr, /wrote .*both\.html \(10 results, 3 problems; 13 optimized problems\)/);
    const page = readFileSync(out, "utf8");
    assert.equal((page.match(/<tr class="optimize-row"/g) ?? []).length, 13);
    assert.equal((page.match(/<tr class="result-row"/g) ?? []).length, 10);
    assert.match(run.stdout, /geomean 1\.22× vs eager/);
    assert.match(run.stdout, /gemm_bn_scale_softmax\.kforge\.py\s+correct/);
    for (const line of run.stdout.split("\n")) assert.ok(visible(line) <= 100, line);
    const bad = join(dir, "neither.json");
    writeFileSync(bad, JSON.stringify({ rows: [] }));
    const failed = await kforgeCli(["report", ...optimizeFiles, bad, "-o", join(dir, "never.html")]);
    assert.equal(failed.exitCode, 1);
    assert.equal(failed.stderr.trim().split("\n").length, 1);
    assert.match(failed.stderr, /^kforge report: .*neither\.json: neither eval results/);
    assert.equal(existsSync(join(dir, "never.html")), false);
  });

  test("kforge optimize --html writes the report; several problems end with the summary table", async () => {
    const html = join(dir, "run", "optimize.html");
    const json = join(dir, "run", "optimize.json");
    const run = await kforgeCli([
      "optimize",
      "relu_large",
      "scale_dropout_gelu",
      "--no-verify",
      "--out-dir",
      join(dir, "run"),
      "--json",
      json,
      "--html",
      html,
    ]);
    assert.equal(run.exitCode, 0, run.stderr);
    const page = readFileSync(html, "utf8");
    assert.equal((page.match(/<tr class="optimize-row"/g) ?? []).length, 2);
    assert.match(page, /data-problem="scale_dropout_gelu"/);
    assert.match(page, /it draws random numbers/);
    assert.deepEqual(
      loadResultsFile(json).optimize.map((r) => r.problem),
      ["relu_large", "scale_dropout_gelu"],
    );
    const table = run.stdout.slice(run.stdout.lastIndexOf("\nproblem"));
    assert.match(table, /relu_large\s+not verified/);
    assert.match(table, /2 problems: 0 correct of 0 verified; no timings vs eager/);
  });
});
