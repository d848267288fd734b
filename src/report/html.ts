// The self-contained HTML report: summary tables per problem, charts rendered to static SVG by ECharts
// (charts.ts), and the evidence (reasons, checks, compile logs, the code judged) in collapsible sections.
// One file, no scripts, no network. Everything that comes from results is HTML-escaped (html-escape.ts).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { OptimizeResult } from "../optimize/optimize.ts";
import type { EvalResult, Verdict } from "../worker/protocol.ts";
import { rooflineChart, speedupChart, timingChart, VERDICT_COLORS } from "./charts.ts";
import { environmentText, reportedByWorker, toleranceText } from "./environment.ts";
import { optimizeInfoOf } from "./extensions.ts";
import { formatDuration, formatError, formatMs, formatSpeedupWithCi, verdictLabel } from "./format.ts";
import { escapeHtml, html, type Raw, raw } from "./html-escape.ts";
import { chartBlock, verdictBadge } from "./html-parts.ts";
import type { ReportData } from "./load.ts";
import { OPTIMIZE_STYLE, optimizeAnchor, optimizeSection } from "./optimize-html.ts";
import { type RooflineEntry, rooflineEntry } from "./roofline.ts";
import { type CandidateSource, readCandidateSource } from "./sources.ts";
import {
  checkCounts,
  compileLogExcerpt,
  errorSummary,
  firstReasonLine,
  groupByProblem,
  speedupClass,
} from "./summary.ts";

export interface HtmlReportOptions {
  title?: string;
  /** Shown in the header; default now. */
  generatedAt?: Date;
  /** Folders against which relative source paths are tried (e.g. the results files' folders). */
  sourceDirs?: string[];
  /** Where each candidate's code comes from; default reads origin.sourcePath (see sources.ts). */
  source?: (result: EvalResult) => CandidateSource;
}

const anchorOf = (index: number) => `result-${index + 1}`;

// A build that fails on every template instantiation can log megabytes; the head and the tail carry
// the story, and the report must stay small enough to open.
const LOG_CAP = 64 * 1024;

function capLog(log: string): string {
  if (log.length <= LOG_CAP) return log;
  const half = LOG_CAP / 2;
  return `${log.slice(0, half)}\n… ${log.length - LOG_CAP} characters cut …\n${log.slice(-half)}`;
}

function speedupText(r: EvalResult): Raw {
  if (!r.timing) return html`<span class="muted">not timed</span>`;
  const cls = speedupClass(r);
  const titles: Record<string, string> = {
    faster: "95% CI entirely above 1×",
    slower: "95% CI entirely below 1×",
    inconclusive: "95% CI contains 1×",
    invalid: `not a valid speedup: the candidate is ${verdictLabel(r.verdict)}`,
  };
  return html`<span class="speedup ${cls}" title="${titles[cls] ?? ""}">${formatSpeedupWithCi(r.timing.speedup, r.timing.speedupCi)}</span>`;
}

/** Failed and warned checks up front; every check that ran, with its outcome, one click away. */
function checksCell(r: EvalResult): Raw {
  if (r.checks.length === 0) return html`<span class="muted">none ran</span>`;
  const counts = checkCounts(r);
  const pill = (c: EvalResult["checks"][number]) =>
    html`<span class="check ${c.outcome}" title="${c.outcome}: ${c.evidence}">${c.name}</span>`;
  const notable = r.checks.filter((c) => c.outcome === "fail" || c.outcome === "warn");
  const summary = [
    `${counts.pass} pass`,
    counts.fail ? `${counts.fail} fail` : "",
    counts.warn ? `${counts.warn} warn` : "",
    counts.skip ? `${counts.skip} skip` : "",
  ]
    .filter(Boolean)
    .join(", ");
  return html`${notable.length ? html`<div class="checks">${notable.map(pill)}</div>` : ""}<details class="all-checks"><summary>${r.checks.length} ran: ${summary}</summary><div class="checks">${r.checks.map(pill)}</div></details>`;
}

function originText(r: EvalResult): string {
  const o = r.origin;
  if (o.kind === "file") return `file ${o.sourcePath}`;
  if (o.blockIndex === null) return `transcript ${o.sourcePath} (no block taken)`;
  return `block ${o.blockIndex} of ${o.blockCount ?? "?"} in transcript ${o.sourcePath}`;
}

function problemTable(
  problem: string,
  entries: Array<{ r: EvalResult; index: number }>,
  roof: Map<EvalResult, RooflineEntry>,
): Raw {
  const first = entries[0]?.r;
  const floor = entries
    .map((e) => roof.get(e.r))
    .find((e): e is Extract<RooflineEntry, { ok: true }> => !!e?.ok);
  const rows = entries.map(({ r, index }) => {
    const err = errorSummary(r);
    const reason = firstReasonLine(r);
    return html`<tr class="result-row" data-problem="${r.problem}" data-candidate="${r.candidate}" data-verdict="${r.verdict}">
  <td><a href="#${anchorOf(index)}">${r.candidate}</a><div class="muted small">${originText(r)}</div></td>
  <td>${verdictBadge(r.verdict)}</td>
  <td class="num">${speedupText(r)}</td>
  <td class="num">${formatMs(r.timing?.ref.medianMs)}</td>
  <td class="num">${formatMs(r.timing?.cand.medianMs)}</td>
  <td class="num">${formatError(err.refVsFp64)}</td>
  <td class="num">${formatError(err.candVsFp64)}</td>
  <td class="num">${formatError(err.candVsRef)}</td>
  <td>${checksCell(r)}</td>
</tr>${reason ? html`<tr class="reason-row"><td colspan="9">↳ ${reason}</td></tr>` : ""}`;
  });
  const tol = first ? `atol ${first.tolerance.atol}, rtol ${first.tolerance.rtol}` : "";
  return html`<section class="problem" id="problem-${problem}">
<h3>${problem}</h3>
<p class="muted small">tolerance ${tol}${floor ? html`; floor ${floor.floorMs.toPrecision(3)} ms on ${floor.ceilings.name} (${floor.workload.note})` : ""}</p>
<table class="summary">
<colgroup><col style="width:21%"><col style="width:9%"><col style="width:13%"><col style="width:6%"><col style="width:6%">
<col style="width:8%"><col style="width:8%"><col style="width:7%"><col style="width:22%"></colgroup>
<thead><tr>
  <th>candidate</th><th>verdict</th><th>speedup (95% CI)</th><th>ref ms<br><span class="small">median</span></th>
  <th>cand ms<br><span class="small">median</span></th><th>max err vs fp64<br><span class="small">reference</span></th>
  <th>max err vs fp64<br><span class="small">candidate</span></th><th>max |Δ| vs ref</th><th>checks</th>
</tr></thead>
<tbody>${rows}</tbody>
</table>
</section>`;
}

function rooflineSection(results: EvalResult[], roof: Map<EvalResult, RooflineEntry>): Raw {
  const entries = results.map((r) => roof.get(r)).filter((e): e is RooflineEntry => !!e);
  const placed = entries.filter((e): e is Extract<RooflineEntry, { ok: true }> => e.ok);
  const missing = entries.filter(
    (e): e is Extract<RooflineEntry, { ok: false }> => !e.ok && e.why !== "not timed",
  );
  const byDevice = new Map<string, typeof placed>();
  for (const e of placed) {
    const list = byDevice.get(e.ceilings.name) ?? [];
    list.push(e);
    byDevice.set(e.ceilings.name, list);
  }
  const missingNote =
    missing.length > 0
      ? html`<ul class="missing">${missing.map((e) => html`<li>${e.result.problem} · ${e.result.candidate}: not placed: ${e.why}</li>`)}</ul>`
      : "";
  if (byDevice.size === 0) {
    const why =
      missing.length > 0
        ? `No roofline: ${[...new Set(missing.map((e) => e.why))].join("; ")}.`
        : "No roofline: no timed results.";
    return html`${chartBlock("Roofline", null, why)}${missingNote}`;
  }
  const charts = [...byDevice.entries()].map(([device, list]) => {
    const table = html`<table class="roof"><thead><tr><th>problem</th><th>candidate</th><th>floor ms</th>
<th>ref TFLOP/s</th><th>ref GB/s</th><th>cand TFLOP/s</th><th>cand GB/s</th><th>floor / cand time</th></tr></thead><tbody>${list.map(
      (
        e,
      ) => html`<tr><td>${e.result.problem}</td><td>${e.result.candidate}</td><td class="num">${e.floorMs.toPrecision(3)}</td>
<td class="num">${e.ref.tflops.toFixed(1)}</td><td class="num">${e.ref.gbps.toFixed(0)}</td><td class="num">${e.cand.tflops.toFixed(1)}</td>
<td class="num">${e.cand.gbps.toFixed(0)}</td><td class="num">${((e.floorMs / (e.result.timing?.cand.medianMs ?? Number.NaN)) * 100).toFixed(0)}%</td></tr>`,
    )}</tbody></table>`;
    const c = list[0]?.ceilings;
    const sources = c
      ? html`HBM ${(c.memoryBytesPerSecond / 1e12).toFixed(2)} TB/s (${c.memorySource}); ${[
          ...new Map(list.map((e) => [e.compute.label, e.compute])).values(),
        ]
          .map((k) => `${k.label} ${Math.round(k.flopsPerSecond / 1e12)} TFLOP/s (${k.source})`)
          .join("; ")}`
      : "";
    return html`${chartBlock(`Roofline on ${device}`, rooflineChart(list), "No roofline data.", sources)}${table}`;
  });
  return html`${charts}${missingNote}`;
}

function codeDisclosure(r: EvalResult, source: CandidateSource): Raw {
  const o = r.origin;
  const what =
    o.kind === "transcript"
      ? o.blockIndex === null
        ? `no code taken from transcript ${o.sourcePath} (${o.blockCount ?? 0} blocks)`
        : `extracted code: block ${o.blockIndex} of ${o.blockCount ?? "?"} from transcript ${o.sourcePath}`
      : `code: ${o.sourcePath}`;
  return html`<details class="code"><summary>${what}</summary>${
    o.note ? html`<p class="muted small">${o.note}</p>` : ""
  }${source.code === null ? html`<p class="muted">${source.note}</p>` : html`<p class="muted small">${source.note}</p><pre><code>${source.code}</code></pre>`}</details>`;
}

function detailSection(r: EvalResult, anchor: string, source: CandidateSource): Raw {
  const env = r.environment;
  const trials =
    r.trials.length === 0
      ? html`<p class="muted">no trials ran</p>`
      : html`<table class="trials"><thead><tr><th>seed</th><th>passed</th><th>out</th><th>shape</th><th>dtype</th>
<th>max |Δ| vs ref</th><th>rel L2 vs ref</th><th>cand vs fp64</th><th>ref vs fp64</th><th>non-finite</th><th>message</th></tr></thead><tbody>${r.trials.map(
          (t) =>
            t.outputs.length === 0
              ? html`<tr class="${t.passed ? "" : "bad"}"><td>${t.seed}</td><td>${t.passed ? "yes" : "no"}</td><td colspan="8"></td><td>${t.message ?? ""}</td></tr>`
              : t.outputs.map(
                  (
                    o,
                  ) => html`<tr class="${o.allclose ? "" : "bad"}"><td>${t.seed}</td><td>${t.passed ? "yes" : "no"}</td><td>${o.index}</td>
<td>[${o.shape.join(", ")}]${o.shape.join() === o.refShape.join() ? "" : html` <span class="bad">ref [${o.refShape.join(", ")}]</span>`}</td>
<td>${o.dtype}${o.dtype === o.refDtype ? "" : html` <span class="bad">ref ${o.refDtype}</span>`}</td>
<td class="num">${formatError(o.vsRef.maxAbs)}</td><td class="num">${formatError(o.vsRef.relL2)}</td>
<td class="num">${formatError(o.candVsFp64.maxAbs)}</td><td class="num">${formatError(o.refVsFp64.maxAbs)}</td>
<td class="num">${o.nonFinite}</td><td>${t.message ?? ""}</td></tr>`,
                ),
        )}</tbody></table>`;
  const checks =
    r.checks.length === 0
      ? html`<p class="muted">no checks ran</p>`
      : html`<table class="check-table"><thead><tr><th>check</th><th>outcome</th><th>on failure</th><th>evidence</th></tr></thead><tbody>${r.checks.map(
          (c) =>
            html`<tr><td>${c.name}</td><td><span class="check ${c.outcome}">${c.outcome}</span></td><td>${c.failVerdict ? verdictLabel(c.failVerdict) : ""}</td><td class="evidence">${c.evidence}</td></tr>`,
        )}</tbody></table>`;
  const compile =
    r.compile.length === 0
      ? html`<p class="muted">nothing compiled</p>`
      : r.compile.map(
          (c) =>
            html`<details class="log" ${c.ok ? "" : raw("open")}><summary>${c.ok ? "✓" : "✗"} ${c.name} (${c.seconds.toFixed(1)} s${c.ok ? "" : ", failed"})</summary>${
              c.ok
                ? ""
                : html`<p class="small">first error lines:</p><pre class="excerpt">${compileLogExcerpt(c.log, 8).join("\n")}</pre><p class="small">full log:</p>`
            }<pre>${capLog(c.log)}</pre></details>`,
        );
  const t = r.timing;
  const timing = t
    ? html`<table class="timing"><thead><tr><th></th><th>median</th><th>mean</th><th>p25</th><th>p75</th><th>min</th><th>max</th><th>std</th><th>n</th></tr></thead><tbody>${[
        ["PyTorch reference", t.ref] as const,
        ["candidate", t.cand] as const,
      ].map(
        ([name, s]) =>
          html`<tr><td>${name}</td>${[s.medianMs, s.meanMs, s.p25Ms, s.p75Ms, s.minMs, s.maxMs, s.stdMs].map(
            (v) => html`<td class="num">${formatMs(v)}</td>`,
          )}<td class="num">${s.n}</td></tr>`,
      )}</tbody></table><p class="small">speedup ${formatSpeedupWithCi(t.speedup, t.speedupCi)} (95% CI) · ${t.method} · L2 flush ${(t.l2FlushBytes / 2 ** 20).toFixed(0)} MiB · SM clock ${t.smClockMhz.start ?? "?"}→${t.smClockMhz.end ?? "?"} MHz</p>`
    : html`<p class="muted">not timed${r.verdict === "correct" ? "" : " (the worker times only candidates that pass every check)"}</p>`;
  const optimize = optimizeInfoOf(r);
  const optimizeBlock = optimize
    ? html`<h4>fused regions (kforge optimize)</h4><table class="regions"><thead><tr><th>recipe</th><th>reference ops</th><th>kernel</th><th>note</th></tr></thead><tbody>${optimize.regions.map(
        (g) =>
          html`<tr><td>${g.recipe}</td><td>${g.ops.join(" → ")}</td><td>${g.kernel ?? ""}</td><td>${g.note ?? ""}</td></tr>`,
      )}</tbody></table>${
        optimize.keptInPyTorch?.length
          ? html`<p class="small">kept in PyTorch: ${optimize.keptInPyTorch.join(", ")}</p>`
          : ""
      }`
    : "";
  return html`<details class="result" id="${anchor}" ${r.verdict === "correct" ? "" : raw("data-failed")}>
<summary>${verdictBadge(r.verdict)} <strong>${r.problem}</strong> · ${r.candidate} <span class="muted">${r.timing ? formatSpeedupWithCi(r.timing.speedup, r.timing.speedupCi) : ""}</span></summary>
<div class="body">
${r.reason ? html`<h4>reason</h4><pre class="reason">${r.reason}</pre>` : ""}
${codeDisclosure(r, source)}
${optimizeBlock}
<h4>trials</h4>${trials}
<h4>checks</h4>${checks}
<h4>timing</h4>${timing}
<h4>compile</h4>${compile}
<p class="small muted">${env.device}${env.gpu ? ` · ${env.gpu}` : ""} · ${environmentText(r)} · precision ${r.precision ?? "as given"} · parameters: ${r.paramSync.mode} (${r.paramSync.detail}) · tolerance ${toleranceText(r)} · ${formatDuration(r.seconds)}</p>
</div>
</details>`;
}

const STYLE = `
:root { color-scheme: light; --muted: #5f6b76; --line: #d8dee4; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1f2328;
  margin: 0 auto; padding: 24px 32px 64px; max-width: 1240px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 16px; margin: 20px 0 2px; } h4 { font-size: 13px; margin: 14px 0 4px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
.muted { color: var(--muted); } .small { font-size: 12px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 13px; }
table.summary { table-layout: fixed; } table.summary td { overflow-wrap: anywhere; }
th, td { border-bottom: 1px solid var(--line); padding: 5px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.reason-row td { color: #7a2e0e; background: #fff8f2; font-size: 12px; border-top: none; }
tr.bad td { background: #fff1f0; } span.bad { color: #c62828; }
.verdict { color: #fff; border-radius: 10px; padding: 1px 8px; font-size: 12px; white-space: nowrap; }
.speedup.faster { color: #1b5e20; font-weight: 600; } .speedup.slower { color: #b71c1c; }
.speedup.invalid { color: var(--muted); text-decoration: line-through; }
.checks { display: flex; flex-wrap: wrap; gap: 3px; }
.check { border-radius: 3px; padding: 0 5px; font-size: 11px; border: 1px solid; white-space: nowrap; }
.check.pass { color: #1b5e20; border-color: #a5d6a7; background: #f1f8e9; }
.check.fail { color: #fff; border-color: #c62828; background: #c62828; }
.check.warn { color: #6d4c00; border-color: #ffca28; background: #fff8e1; }
.check.skip { color: var(--muted); border-color: var(--line); background: #fafafa; }
details.all-checks > summary { cursor: pointer; font-size: 12px; color: var(--muted); margin-top: 2px; }
details.all-checks .checks { margin-top: 4px; }
.chips { display: flex; gap: 6px; flex-wrap: wrap; margin: 10px 0; }
figure.chart { margin: 12px 0; } figcaption { font-weight: 600; margin-bottom: 4px; }
figure.chart svg { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
.no-chart { border: 1px dashed #b0bec5; padding: 24px; color: var(--muted); background: #fafbfc; border-radius: 4px; }
details.result { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; }
details.result > summary { cursor: pointer; padding: 8px 12px; background: #f6f8fa; border-radius: 6px; }
details.result > .body { padding: 4px 14px 12px; }
details.code > summary, details.log > summary { cursor: pointer; color: #0b57d0; margin: 6px 0; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 4px; padding: 8px 10px; overflow: auto;
  max-height: 480px; font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, monospace; white-space: pre; }
pre.reason, pre.excerpt { white-space: pre-wrap; max-height: none; } pre.excerpt { border-color: #ef9a9a; background: #fff5f5; }
td.evidence { white-space: pre-wrap; font-size: 12px; }
ul.missing { color: var(--muted); font-size: 12px; }
nav a { margin-right: 14px; }
`;

/** The whole report as one HTML document (no external resources, no scripts). */
export function renderHtmlReport(data: ReportData | EvalResult[], opts: HtmlReportOptions = {}): string {
  const { results, optimize } = Array.isArray(data) ? { results: data, optimize: [] } : data;
  const title = opts.title ?? "kforge report";
  const generatedAt = opts.generatedAt ?? new Date();
  const sourceOf = opts.source ?? ((r: EvalResult) => readCandidateSource(r.origin, opts.sourceDirs ?? []));
  const indexed = results.map((r, index) => ({ r, index }));
  const groups = groupByProblem(results);
  const roof = new Map(results.map((r) => [r, rooflineEntry(r)] as const));

  const counts = new Map<Verdict, number>();
  for (const r of results) counts.set(r.verdict, (counts.get(r.verdict) ?? 0) + 1);
  const evals = [...results, ...optimize.flatMap((o) => (o.eval ? [o.eval] : []))];
  const environments = [
    ...new Set(
      evals
        .filter(reportedByWorker)
        .map((r) => `${r.environment.gpu ?? r.environment.device} · ${environmentText(r)}`),
    ),
  ];

  const summaries = [...groups.keys()].map((problem) =>
    problemTable(
      problem,
      indexed.filter((e) => e.r.problem === problem),
      roof,
    ),
  );
  const timingCharts = [...groups.entries()].map(([problem, list]) => {
    const samples = list
      .filter((r) => r.timing)
      .map((r) => `${r.candidate}: ${r.timing?.ref.n} reference / ${r.timing?.cand.n} candidate iterations`);
    return chartBlock(
      `Timing: ${problem}`,
      timingChart(problem, list),
      `No timing for ${problem}: no candidate was timed (the worker times only candidates that pass every check).`,
      samples.length ? samples.join(" · ") : undefined,
    );
  });
  const details = indexed.map(({ r, index }) => detailSection(r, anchorOf(index), sourceOf(r)));
  const evidence = (o: OptimizeResult, index: number) =>
    o.eval
      ? html`<h4>verification: kforge eval of the emitted file</h4>${detailSection(o.eval, `${optimizeAnchor(index)}-eval`, sourceOf(o.eval))}`
      : html``;
  const optimizeProblems = new Set(optimize.map((o) => o.problem)).size;
  const what = [
    results.length > 0 || optimize.length === 0
      ? `${results.length} result${results.length === 1 ? "" : "s"} · ${groups.size} problem${groups.size === 1 ? "" : "s"}`
      : "",
    optimize.length > 0
      ? `kforge optimize: ${optimizeProblems} problem${optimizeProblems === 1 ? "" : "s"}`
      : "",
  ].filter(Boolean);
  const nav = [
    ...(optimize.length > 0 ? [["optimize", "optimize"]] : []),
    ...(results.length > 0 || optimize.length === 0
      ? [
          ["speedup", "overview"],
          ["summary", "summary"],
          ["timing", "timing"],
          ["roofline", "roofline"],
          ["details", "details"],
        ]
      : []),
  ];
  // An optimize-only report has no eval results of its own: their sections would only say "no data".
  const evalSections =
    results.length === 0 && optimize.length > 0
      ? html``
      : html`<h2 id="speedup">Overview</h2>
${chartBlock("Speedup", speedupChart(results), "No speedup chart: no candidate was timed (the worker times only candidates that pass every check).")}
<h2 id="summary">Summary</h2>
<p class="small muted">Speedup = PyTorch median / candidate median, measured in the same process; the CI is a 95% bootstrap interval. Errors are the largest absolute differences over all trials and outputs; “vs fp64” compares with the reference evaluated in float64, so the reference column is PyTorch's own error.</p>
${summaries}
<h2 id="timing">Timing distributions</h2>
${timingCharts}
<h2 id="roofline">Roofline</h2>
<p class="small muted">Achieved throughput counts the problem's floor FLOPs and bytes (not what a kernel actually moved) over the median time, against the device's measured ceilings. The red triangle marks the best any implementation could do.</p>
${rooflineSection(results, roof)}
<h2 id="details">Details</h2>
${details}`;

  const body = html`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>${raw(STYLE + OPTIMIZE_STYLE)}</style>
</head>
<body>
<header>
<h1>${title}</h1>
<p class="muted">${what.join(" · ")} · generated ${generatedAt.toISOString().replace("T", " ").slice(0, 19)} UTC</p>
<div class="chips">${[...counts.entries()].map(([v, n]) => html`<span class="verdict" style="background:${VERDICT_COLORS[v]}">${n} ${verdictLabel(v)}</span>`)}</div>
<p class="small muted">${environments.map((e, i) => html`${i > 0 ? raw("<br>") : ""}${e}`)}</p>
<nav class="small">${nav.map(([id, label]) => html`<a href="#${id ?? ""}">${label ?? ""}</a>`)}</nav>
</header>
<main>
${optimize.length > 0 ? optimizeSection(optimize, evidence) : ""}
${evalSections}
</main>
</body>
</html>
`;
  return body.html;
}

/** Writes the report to `file` (creating its folder); relative source paths are also tried from there. */
export function writeHtmlReport(
  data: ReportData | EvalResult[],
  file: string,
  opts: HtmlReportOptions = {},
): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, renderHtmlReport(data, opts));
}

export { escapeHtml };
