// The `kforge optimize` part of the HTML report: the suite's numbers, the speedup chart, one overview row
// per problem, and per problem what became of each planned region, which ops were left to PyTorch and why,
// and the full eval of the emitted file as evidence. Everything from results is escaped (html-escape.ts).

import type { OptimizeResult } from "../optimize/optimize.ts";
import { compileCheckNote } from "./compile-check-note.ts";
import { formatDuration, formatMs, formatSpeedup } from "./format.ts";
import { graphReplayNote } from "./graph-replay-note.ts";
import { html, type Raw } from "./html-escape.ts";
import { chartBlock, verdictBadge } from "./html-parts.ts";
import { optimizeSpeedupChart } from "./optimize-chart.ts";
import {
  countsAsTimed,
  EVEN_MARGIN,
  regionGain,
  regionStatusText,
  regionsText,
  speedupTrend,
  summarizeOptimize,
} from "./optimize-summary.ts";

/** The anchor of the i-th optimize result's section. */
export const optimizeAnchor = (index: number) => `optimize-${index + 1}`;

function badge(r: OptimizeResult): Raw {
  return r.verdict
    ? verdictBadge(r.verdict)
    : html`<span class="verdict" style="background:#90a4ae">not verified</span>`;
}

function speedupCell(r: OptimizeResult, speedup: number | null): Raw {
  if (speedup === null) return html`<span class="muted">–</span>`;
  if (!countsAsTimed(r))
    return html`<span class="speedup invalid" title="not a valid speedup: the file did not pass the eval">${formatSpeedup(speedup)}</span>`;
  return html`<span class="speedup ${speedupTrend(speedup)}">${formatSpeedup(speedup)}</span>`;
}

function firstLine(text: string | null | undefined): string {
  return text?.split("\n").find((l) => l.trim().length > 0) ?? "";
}

function stat(label: string, value: string, note?: string): Raw {
  return html`<div class="stat"><div class="stat-value">${value}</div><div class="stat-label">${label}</div>${
    note ? html`<div class="stat-note">${note}</div>` : ""
  }</div>`;
}

function summaryStats(results: OptimizeResult[]): Raw {
  const s = summarizeOptimize(results);
  const mean = (g: { geomean: number | null; n: number }) =>
    g.geomean === null ? "–" : formatSpeedup(g.geomean);
  const over = (g: { n: number }) => `geomean over ${g.n} correct, timed problem${g.n === 1 ? "" : "s"}`;
  return html`<div class="stats">${[
    stat("problems", String(s.problems)),
    stat("correct", `${s.correct} / ${s.verified}`, "passed the full eval / verified"),
    stat("vs eager", mean(s.vsEager), over(s.vsEager)),
    stat("vs torch.compile", mean(s.vsCompile), over(s.vsCompile)),
    stat(
      "regions fused",
      `${s.regions.fused} / ${s.regions.fused + s.regions.dropped + s.regions.rejected}`,
      `${s.regions.dropped} dropped (not faster), ${s.regions.rejected} rejected (failed the eval)`,
    ),
    stat("ops kept in PyTorch", String(s.kept), "by the planner, with the reason"),
  ]}</div>`;
}

function overviewTable(results: OptimizeResult[]): Raw {
  const rows = results.map(
    (r, i) => html`<tr class="optimize-row" data-problem="${r.problem}" data-verdict="${r.verdict ?? "none"}">
  <td><a href="#${optimizeAnchor(i)}">${r.problem}</a></td>
  <td>${badge(r)}</td>
  <td class="num">${formatMs(r.eagerMs)}</td>
  <td class="num">${formatMs(r.compiledMs)}</td>
  <td class="num">${formatMs(r.oursMs)}</td>
  <td class="num">${speedupCell(r, r.speedup)}</td>
  <td class="num">${speedupCell(r, r.speedupVsCompile)}</td>
  <td>${regionsText(r)}${r.kept.length ? html`<div class="muted small">${r.kept.length} op${r.kept.length === 1 ? "" : "s"} kept in PyTorch</div>` : ""}</td>
</tr>`,
  );
  return html`<table class="summary optimize">
<colgroup><col style="width:26%"><col style="width:11%"><col style="width:8%"><col style="width:9%"><col style="width:8%">
<col style="width:9%"><col style="width:10%"><col style="width:19%"></colgroup>
<thead><tr><th>problem</th><th>verdict</th><th class="num">eager ms</th><th class="num">torch.compile ms</th>
<th class="num">ours ms</th><th class="num">vs eager</th><th class="num">vs torch.compile</th><th>regions</th></tr></thead>
<tbody>${rows}</tbody>
</table>`;
}

function regionsTable(r: OptimizeResult): Raw {
  if (r.regions.length === 0)
    return html`<p class="muted">No fused regions planned: the file runs the reference's operators.</p>`;
  return html`<table class="regions"><thead><tr><th>region</th><th>ops replaced</th><th>kind</th><th>status</th>
<th class="num">kernel ms</th><th class="num">PyTorch ops ms</th><th class="num">gain</th></tr></thead><tbody>${r.regions.map(
    (g) => {
      const gain = regionGain(g);
      return html`<tr class="region-row status-${g.status}" data-region="${g.id}" data-status="${g.status}">
<td>${g.id}</td><td>${g.summary || g.ops.join(" → ")}</td><td>${g.kind}</td><td><span class="status ${g.status}">${regionStatusText(g)}</span></td>
<td class="num">${formatMs(g.kernelMs)}</td><td class="num">${formatMs(g.torchMs)}</td>
<td class="num">${gain === null ? "–" : html`<span class="speedup ${speedupTrend(gain)}">${formatSpeedup(gain)}</span>`}</td></tr>`;
    },
  )}</tbody></table>`;
}

function keptTable(r: OptimizeResult): Raw {
  if (r.kept.length === 0) return html``;
  return html`<h4>left to PyTorch by the planner</h4><table class="kept"><thead><tr><th>node</th><th>op</th><th>why</th></tr></thead><tbody>${r.kept.map(
    (k) => html`<tr class="kept-row"><td>${k.node}</td><td>${k.op}</td><td>${k.reason}</td></tr>`,
  )}</tbody></table>`;
}

function notes(r: OptimizeResult): Raw {
  const items: Raw[] = [];
  if (r.verdict && r.verdict !== "correct" && r.reason)
    items.push(html`<li class="bad">${r.verdict}: ${firstLine(r.reason)}</li>`);
  if (r.rejected)
    items.push(
      html`<li class="rejected">kernels rejected: the file with its kernels was ${r.rejected.verdict}${r.rejected.reason ? `: ${firstLine(r.rejected.reason)}` : ""}; it was re-emitted with PyTorch's ops only and verified again</li>`,
    );
  if (r.captured === "none")
    items.push(
      html`<li>not captured: ${r.captureFailure ?? "?"} — the file runs the reference's forward</li>`,
    );
  const replay = graphReplayNote(r);
  if (replay) items.push(html`<li>${replay}</li>`);
  const compileCheck = compileCheckNote(r);
  if (compileCheck) items.push(html`<li>${compileCheck}</li>`);
  if (r.error) items.push(html`<li class="bad">error: ${firstLine(r.error)}</li>`);
  if (r.verdict === null)
    items.push(html`<li class="muted">not verified (--no-verify): no eval, no timings</li>`);
  return items.length ? html`<ul class="notes">${items}</ul>` : html``;
}

function problemSection(r: OptimizeResult, index: number, evidence: Raw): Raw {
  const s = r.seconds;
  return html`<section class="optimize-problem" id="${optimizeAnchor(index)}" data-problem="${r.problem}">
<h3>${r.problem} ${badge(r)}</h3>
<p class="muted small">${r.problemPath} → ${r.output} · captured: ${r.captured}${r.device ? ` · ${r.device}` : ""} · capture ${formatDuration(s.capture)}, plan ${formatDuration(s.plan)}, verify ${formatDuration(s.verify)}, bench ${formatDuration(s.bench)}</p>
${
  r.oursMs !== null
    ? html`<p>eager ${formatMs(r.eagerMs)} ms · torch.compile ${formatMs(r.compiledMs)} ms · ours ${formatMs(r.oursMs)} ms → ${speedupCell(r, r.speedup)} vs eager, ${speedupCell(r, r.speedupVsCompile)} vs torch.compile</p>`
    : ""
}
${notes(r)}
<h4>regions</h4>${regionsTable(r)}
${keptTable(r)}
${evidence}
</section>`;
}

export const OPTIMIZE_STYLE = `
.stats { display: flex; flex-wrap: wrap; gap: 10px; margin: 10px 0 14px; }
.stat { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 150px; background: #fafbfc; }
.stat-value { font-size: 20px; font-weight: 600; font-variant-numeric: tabular-nums; }
.stat-label { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
.stat-note { font-size: 11px; color: var(--muted); max-width: 220px; }
.speedup.even { color: #1f2328; }
.status { font-size: 12px; white-space: nowrap; } .status.fused { color: #1b5e20; font-weight: 600; }
.status.dropped { color: #6d4c00; } .status.rejected { color: #c62828; }
ul.notes { margin: 4px 0 8px; padding-left: 20px; font-size: 13px; } ul.notes li.bad, ul.notes li.rejected { color: #b71c1c; }
section.optimize-problem { border-top: 1px solid var(--line); margin-top: 18px; }
section.optimize-problem h3 .verdict { vertical-align: middle; margin-left: 6px; }
`;

/**
 * The whole optimize part. `evidence` renders the proof behind one result (the report's detail view of
 * its eval), so this module needs nothing of the eval views.
 */
export function optimizeSection(
  results: OptimizeResult[],
  evidence: (r: OptimizeResult, index: number) => Raw,
): Raw {
  const timedNote = `Speedup = eager (or torch.compile) median / the emitted file's median, measured in one process. Speedups count only for files that passed the full eval; single medians carry no CI, so within ±${EVEN_MARGIN * 100}% of 1× is shown as even. A region's gain is PyTorch's time for the ops it replaces over its kernel's.`;
  return html`<h2 id="optimize">Optimize</h2>
${summaryStats(results)}
${chartBlock(
  "Speedup per problem",
  optimizeSpeedupChart(results),
  "No speedup chart: no emitted file was verified and timed (run kforge optimize on a GPU, without --no-verify).",
)}
<p class="small muted">${timedNote}</p>
${overviewTable(results)}
${results.map((r, i) => problemSection(r, i, evidence(r, i)))}`;
}
