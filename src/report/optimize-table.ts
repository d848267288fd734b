// The terminal summary of a `kforge optimize` run over several problems: one row per problem with its
// verdict, eager / torch.compile / ours times, both speedups and what became of its regions, then the
// suite's geomeans. Fits the given width (100 columns by default) by shortening problem names only.
import Table from "cli-table3";
import pc from "picocolors";
import type { OptimizeResult } from "../optimize/optimize.ts";
import { formatMs, formatSpeedup, truncate, verdictLabel, wrap } from "./format.ts";
import { optimizeSummaryLine, speedupTrend, summarizeOptimize } from "./optimize-summary.ts";
import { borderless, type TableOptions, verdictColor } from "./table.ts";

const HEADERS = [
  "problem",
  "verdict",
  "eager\nms",
  "compile\nms",
  "ours\nms",
  "vs\neager",
  "vs\ncompile",
  "regions\nfused",
];
const ALIGNS: Table.HorizontalAlignment[] = [
  "left",
  "left",
  "right",
  "right",
  "right",
  "right",
  "right",
  "left",
];
const MIN_PROBLEM = 12;

function speedupText(speedup: number | null): string {
  return speedup === null ? "–" : formatSpeedup(speedup);
}

/** "1/2 1 dropped": regions shipped as kernels of those planned, and why the rest were not. */
function compactRegions(r: OptimizeResult): string {
  if (r.regions.length === 0) return "–";
  const count = (status: string) => r.regions.filter((g) => g.status === status).length;
  const extra = [
    count("dropped") ? `${count("dropped")} dropped` : "",
    count("rejected") ? `${count("rejected")} rejected` : "",
  ].filter(Boolean);
  return [`${count("fused")}/${r.regions.length}`, ...extra].join(" ");
}

function plainRow(r: OptimizeResult): string[] {
  return [
    r.problem,
    r.verdict ? verdictLabel(r.verdict) : "not verified",
    formatMs(r.eagerMs),
    formatMs(r.compiledMs),
    formatMs(r.oursMs),
    speedupText(r.speedup),
    speedupText(r.speedupVsCompile),
    compactRegions(r),
  ];
}

const widthOf = (text: string) => Math.max(...text.split("\n").map((l) => Array.from(l).length));

interface Layout {
  gap: number;
  /** Columns shown: all, or all but the regions (the last to go, on terminals under about 70 columns). */
  columns: number;
  widths: number[];
}

function fit(rows: string[][], width: number): Layout {
  const natural = HEADERS.map((h, col) => Math.max(widthOf(h), ...rows.map((r) => widthOf(r[col] ?? ""))));
  let last: Layout | null = null;
  for (const [gap, columns] of [
    [2, HEADERS.length],
    [1, HEADERS.length],
    [1, HEADERS.length - 1],
  ] as const) {
    const widths = natural.slice(0, columns);
    const others = widths.slice(1).reduce((a, b) => a + b, 0) + gap * (columns - 1);
    widths[0] = Math.max(MIN_PROBLEM, Math.min(natural[0] ?? 0, width - others));
    last = { gap, columns, widths };
    if (others + MIN_PROBLEM <= width) return last;
  }
  return last as Layout;
}

export function formatOptimizeTable(results: OptimizeResult[], opts: TableOptions): string {
  const width = opts.width ?? 100;
  const colors = pc.createColors(opts.color);
  if (results.length === 0) return "no optimize results\n";
  const rows = results.map(plainRow);
  const { gap, columns, widths } = fit(rows, width);
  const tableWidth = widths.reduce((a, b) => a + b, 0) + gap * (columns - 1);

  const table = new Table({
    head: HEADERS.slice(0, columns).map((h) => colors.bold(h)),
    chars: borderless(" ".repeat(gap)),
    colWidths: widths,
    colAligns: ALIGNS.slice(0, columns),
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
    wordWrap: false,
  });
  const speedupCell = (speedup: number | null) => {
    const text = speedupText(speedup);
    const trend = speedupTrend(speedup);
    return trend === "faster" ? colors.green(text) : trend === "slower" ? colors.red(text) : text;
  };
  for (const [i, r] of results.entries()) {
    const plain = rows[i] ?? [];
    const cells = [
      truncate(r.problem, widths[0] ?? MIN_PROBLEM),
      r.verdict ? verdictColor(colors, r.verdict)(plain[1] ?? "") : colors.dim(plain[1] ?? ""),
      plain[2] ?? "",
      plain[3] ?? "",
      plain[4] ?? "",
      speedupCell(r.speedup),
      speedupCell(r.speedupVsCompile),
      plain[7] ?? "",
    ];
    table.push(cells.slice(0, columns));
  }
  const lines = table.toString().split("\n");
  const headerHeight = Math.max(...HEADERS.map((h) => h.split("\n").length));
  lines.splice(headerHeight, 0, colors.dim("─".repeat(Math.min(width, tableWidth))));
  const summary = wrap(optimizeSummaryLine(summarizeOptimize(results)), width);
  return `${lines.map((l) => l.trimEnd()).join("\n")}\n${summary.join("\n")}\n`;
}
