// Terminal views of eval results: a summary table that fits the terminal (100 columns by default) and a
// per-candidate detail. Colour is decided by the caller (see useColor) so piped output stays plain.
import Table from "cli-table3";
import pc from "picocolors";
import type { EvalResult, Verdict } from "../worker/protocol.ts";
import { timingWarning } from "./bimodal.ts";
import { environmentText, toleranceText } from "./environment.ts";
import {
  formatDuration,
  formatError,
  formatMs,
  formatSpeedup,
  formatSpeedupWithCi,
  truncate,
  truncateVisible,
  verdictLabel,
  wrap,
} from "./format.ts";
import {
  checkCounts,
  compileLogExcerpt,
  errorSummary,
  firstReasonLine,
  groupByProblem,
  speedupClass,
} from "./summary.ts";

export interface TableOptions {
  color: boolean;
  /** Columns available; the table never exceeds it. Default 100. */
  width?: number;
}

type Colors = ReturnType<typeof pc.createColors>;

interface ColorStream {
  isTTY?: boolean;
}

/**
 * Whether to colour output written to `stream`. FORCE_COLOR wins (as in Node itself: "0" or "false"
 * turn colour off, anything else on); then NO_COLOR (any non-empty value) and TERM=dumb turn it off;
 * otherwise colour only a TTY.
 */
export function useColor(stream: ColorStream, env: NodeJS.ProcessEnv = process.env): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined) return !(force === "0" || force.toLowerCase() === "false");
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (env.TERM === "dumb") return false;
  return stream.isTTY === true;
}

export function verdictColor(colors: Colors, verdict: Verdict): (s: string) => string {
  switch (verdict) {
    case "correct":
      return colors.green;
    case "cheating":
      return (s) => colors.bold(colors.magenta(s));
    case "incorrect":
    case "shape_mismatch":
      return colors.red;
    case "compile_error":
    case "import_error":
    case "runtime_error":
      return colors.yellow;
    case "timeout":
      return colors.yellow;
    case "problem_error":
    case "no_code":
      return colors.dim;
  }
}

function speedupText(result: EvalResult, withCi: boolean): string {
  const t = result.timing;
  if (!t) return "–";
  // A cheating candidate's timing is its own account (a forged clock is one way to cheat): no number is shown.
  if (result.verdict === "cheating") return "– (cheating)";
  return withCi ? formatSpeedupWithCi(t.speedup, t.speedupCi) : formatSpeedup(t.speedup);
}

function speedupCell(colors: Colors, result: EvalResult, withCi = true): string {
  const text = speedupText(result, withCi);
  switch (speedupClass(result)) {
    case "faster":
      return colors.green(text);
    case "slower":
      return colors.red(text);
    case "invalid":
      return colors.dim(text);
    default:
      return text;
  }
}

// No vertical or horizontal rules: spaces between columns, and a rule under the header drawn by us.
export function borderless(gap: string): Partial<Record<Table.CharName, string>> {
  const none = [
    "top",
    "top-mid",
    "top-left",
    "top-right",
    "bottom",
    "bottom-mid",
    "bottom-left",
    "bottom-right",
  ];
  const sides = ["left", "left-mid", "mid", "mid-mid", "right", "right-mid"];
  return Object.fromEntries([...none, ...sides].map((k) => [k, ""]).concat([["middle", gap]]));
}

const HEADERS = [
  "problem",
  "candidate",
  "verdict",
  "speedup\n(95% CI)",
  "ref\nms",
  "cand\nms",
  "ref err\nvs fp64",
  "cand err\nvs fp64",
];
const MIN_CANDIDATE = 12;
const REASON_MARK = "\u0000reason:";
const INDENT = "  ";

function visibleWidth(text: string): number {
  return Math.max(...text.split("\n").map((l) => Array.from(l).length));
}

/**
 * How the table fits: with a problem column, or (when problem and candidate names do not both fit) with
 * each problem on a line of its own above its candidates; two spaces between columns, else one; the
 * speedup's CI dropped only as a last resort.
 */
interface Layout {
  grouped: boolean;
  gap: number;
  withCi: boolean;
  headers: string[];
  widths: number[];
}

function plainRow(r: EvalResult, withCi: boolean): string[] {
  const err = errorSummary(r);
  const t = r.timing;
  return [
    r.problem,
    r.candidate,
    verdictLabel(r.verdict),
    speedupText(r, withCi),
    formatMs(t?.ref.medianMs),
    formatMs(t?.cand.medianMs),
    formatError(err.refVsFp64),
    formatError(err.candVsFp64),
  ];
}

function tryLayout(results: EvalResult[], width: number, grouped: boolean, gap: number, withCi: boolean) {
  const all = withCi ? HEADERS : HEADERS.map((h, i) => (i === 3 ? "speedup" : h));
  const rows = results.map((r) => plainRow(r, withCi));
  const natural = all.map((h, col) =>
    Math.max(visibleWidth(h), ...rows.map((r) => visibleWidth(r[col] ?? ""))),
  );
  natural[1] = (natural[1] ?? 0) + (grouped ? INDENT.length : 0);
  const headers = grouped ? [`problem\n${INDENT}candidate`, ...all.slice(2)] : all;
  const widths = grouped ? natural.slice(1) : natural;
  const fixed = widths.reduce((sum, w) => sum + w, 0) - (widths[0] ?? 0) - (grouped ? 0 : (widths[1] ?? 0));
  const room = width - gap * (headers.length - 1) - fixed;
  if (grouped) {
    // Below MIN_CANDIDATE only as the last resort, on terminals narrower than about 70 columns.
    widths[0] = Math.max(INDENT.length + 2, Math.min(Math.max(widths[0] ?? 0, MIN_CANDIDATE), room));
    return { layout: { grouped, gap, withCi, headers, widths }, fitsFully: (natural[1] ?? 0) <= room, room };
  }
  return {
    layout: { grouped, gap, withCi, headers, widths },
    fitsFully: (natural[0] ?? 0) + (natural[1] ?? 0) <= room,
    room,
  };
}

function fitColumns(results: EvalResult[], width: number): Layout {
  const flat = tryLayout(results, width, false, 2, true);
  if (flat.fitsFully) return flat.layout;
  let last = flat.layout;
  for (const [gap, withCi] of [
    [2, true],
    [1, true],
    [1, false],
  ] as const) {
    const grouped = tryLayout(results, width, true, gap, withCi);
    last = grouped.layout;
    if (grouped.room >= MIN_CANDIDATE + INDENT.length) return last;
  }
  return last;
}

/**
 * The summary table: one row per candidate, grouped by problem, with the first line of the reason on a
 * line of its own under every result that has one (so the numbers keep their columns at 100 wide).
 */
export function formatResultsTable(results: EvalResult[], opts: TableOptions): string {
  const width = opts.width ?? 100;
  const colors = pc.createColors(opts.color);
  if (results.length === 0) return "no results\n";

  const ordered = [...groupByProblem(results).values()].flat();
  const { grouped, gap, withCi, headers, widths } = fitColumns(ordered, width);
  const tableWidth = Math.min(width, widths.reduce((a, b) => a + b, 0) + gap * (widths.length - 1));
  const aligns: Table.HorizontalAlignment[] = [
    "left",
    "left",
    "left",
    "right",
    "right",
    "right",
    "right",
    "right",
  ];

  const table = new Table({
    head: headers.map((h) => colors.bold(h)),
    chars: borderless(" ".repeat(gap)),
    colWidths: widths,
    colAligns: grouped ? aligns.slice(1) : aligns,
    style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
    wordWrap: false,
  });

  const reasonLines: string[] = [];
  let previousProblem: string | null = null;
  for (const r of ordered) {
    const plain = plainRow(r, withCi);
    const newProblem = r.problem !== previousProblem;
    previousProblem = r.problem;
    const numbers = [
      verdictColor(colors, r.verdict)(plain[2] ?? ""),
      speedupCell(colors, r, withCi),
      plain[4] ?? "",
      plain[5] ?? "",
      plain[6] ?? "",
      plain[7] ?? "",
    ];
    if (grouped) {
      if (newProblem)
        table.push([{ colSpan: headers.length, content: colors.bold(truncate(r.problem, tableWidth)) }]);
      table.push([INDENT + truncate(r.candidate, (widths[0] ?? MIN_CANDIDATE) - INDENT.length), ...numbers]);
    } else {
      table.push([newProblem ? r.problem : "", r.candidate, ...numbers]);
    }
    const reason = firstReasonLine(r);
    const warning = r.timing ? timingWarning(r.timing) : null;
    for (const [note, mark, paint] of [
      [reason, "↳", colors.dim],
      [warning, "!", colors.yellow],
    ] as const) {
      if (!note) continue;
      // A note may use the terminal's whole width, wider than the table: a placeholder row keeps its
      // place and is replaced after rendering (cli-table3 cuts a spanning cell at the table's width).
      const prefix = grouped ? `    ${mark} ` : `  ${mark} `;
      reasonLines.push(paint(prefix + truncate(note, width - prefix.length)));
      table.push([{ colSpan: headers.length, content: `${REASON_MARK}${reasonLines.length - 1}` }]);
    }
  }

  // Draw the rule under the (two-line) header ourselves: cli-table3 would draw one between every row.
  const lines = table
    .toString()
    .split("\n")
    .map((line) => {
      const at = line.indexOf(REASON_MARK);
      return at < 0 ? line : (reasonLines[Number(line.slice(at + REASON_MARK.length).trim())] ?? "");
    });
  const headerHeight = Math.max(...headers.map((h) => h.split("\n").length));
  lines.splice(headerHeight, 0, colors.dim("─".repeat(tableWidth)));
  const summary = wrap(summaryLine(colors, results), width);
  return `${lines.map((l) => l.trimEnd()).join("\n")}\n${summary.join("\n")}\n`;
}

function summaryLine(colors: Colors, results: EvalResult[]): string {
  const counts = new Map<Verdict, number>();
  for (const r of results) counts.set(r.verdict, (counts.get(r.verdict) ?? 0) + 1);
  const parts = [...counts.entries()].map(([v, n]) => verdictColor(colors, v)(`${n} ${verdictLabel(v)}`));
  const faster = results.filter((r) => r.verdict === "correct" && speedupClass(r) === "faster").length;
  const n = results.length;
  return `${n} candidate${n === 1 ? "" : "s"}: ${parts.join(", ")}; ${faster} correct and faster than the reference (95% CI above 1×)`;
}

const DETAIL_LOG_LINES = 12;

/** Everything about one candidate worth reading in a terminal: trials, failed checks, compile errors. */
export function formatResultDetail(result: EvalResult, opts: TableOptions): string {
  const width = opts.width ?? 100;
  const c = pc.createColors(opts.color);
  const out: string[] = [];
  const line = (text = "") => out.push(truncateVisible(text, width));
  const heading = (text: string) => {
    line();
    line(c.bold(text));
  };

  line(
    `${c.bold(result.candidate)} on ${c.bold(result.problem)}: ${verdictColor(c, result.verdict)(verdictLabel(result.verdict))}`,
  );
  const o = result.origin;
  const originText =
    o.kind === "transcript" && o.blockIndex !== null
      ? `block ${o.blockIndex} of ${o.blockCount ?? "?"} in transcript ${o.sourcePath}`
      : `${o.kind} ${o.sourcePath}`;
  line(`  code from ${originText}${o.note ? ` (${o.note})` : ""}`);
  const env = result.environment;
  line(
    `  ${env.device}${env.gpu ? ` ${env.gpu}` : ""}, ${environmentText(result, ", ")}, ` +
      `precision ${result.precision ?? "as given"}, ${formatDuration(result.seconds)}`,
  );
  line(`  parameters: ${result.paramSync.mode} (${result.paramSync.detail})`);
  line(`  tolerance: ${toleranceText(result)}`);
  line(
    result.strict
      ? "  policy: --strict (running the operator the problem replaces is cheating)"
      : "  policy: library and PyTorch operators disclosed, not condemned (--strict to condemn them)",
  );

  if (result.reason) {
    heading("reason");
    for (const l of result.reason.split("\n").slice(0, DETAIL_LOG_LINES)) line(`  ${l}`);
  }

  if (result.trials.length > 0) {
    heading(`trials (${result.trials.filter((t) => t.passed).length}/${result.trials.length} passed)`);
    const trialTable = new Table({
      head: [
        "seed",
        "out",
        "shape",
        "dtype",
        "allclose",
        "max|Δref|",
        "cand vs fp64",
        "ref vs fp64",
        "non-finite",
      ].map((h) => c.bold(h)),
      chars: borderless("  "),
      style: { head: [], border: [], "padding-left": 0, "padding-right": 0 },
    });
    for (const t of result.trials) {
      if (t.outputs.length === 0) {
        trialTable.push([String(t.seed), { colSpan: 8, content: t.message ?? "no outputs compared" }]);
      }
      for (const o of t.outputs) {
        trialTable.push([
          String(t.seed),
          String(o.index),
          truncate(`[${o.shape.join(",")}]`, 18),
          o.dtype,
          o.allclose ? c.green("yes") : c.red("no"),
          formatError(o.vsRef.maxAbs),
          formatError(o.candVsFp64.maxAbs),
          formatError(o.refVsFp64.maxAbs),
          o.nonFinite > 0 ? c.red(String(o.nonFinite)) : "0",
        ]);
      }
    }
    for (const l of trialTable.toString().split("\n")) line(`  ${l.trimEnd()}`);
    for (const t of result.trials)
      if (t.message && t.outputs.length > 0) line(`  seed ${t.seed}: ${t.message}`);
  }

  const timing = result.timing;
  if (timing) {
    heading("timing");
    const stat = (name: string, s: typeof timing.ref) =>
      line(
        `  ${name.padEnd(9)} median ${formatMs(s.medianMs)} ms  p25–p75 ${formatMs(s.p25Ms)}–${formatMs(s.p75Ms)} ms  n=${s.n}`,
      );
    stat("reference", timing.ref);
    stat("candidate", timing.cand);
    if (result.verdict === "cheating") line("  speedup not shown: the candidate is cheating");
    else line(`  speedup ${speedupCell(c, result)} [95% CI], ${timing.method}`);
  }

  // The disclosure of whose kernels the GPU time went to (the worker's profiled forward).
  const share = result.checks.find(
    (ch) => ch.name === "library_share" && (ch.outcome === "pass" || ch.outcome === "warn"),
  );
  if (share) {
    heading("GPU time (one profiled forward)");
    for (const l of wrap(share.evidence, width - 2)) line(`  ${l}`);
  }

  const counts = checkCounts(result);
  const notable = result.checks.filter((ch) => ch.outcome === "fail" || ch.outcome === "warn");
  if (result.checks.length > 0) {
    heading(
      `checks (${counts.pass} passed, ${counts.fail} failed, ${counts.warn} warned, ${counts.skip} skipped)`,
    );
    for (const ch of notable) {
      const mark = ch.outcome === "fail" ? c.red("FAIL") : c.yellow("WARN");
      line(`  ${mark} ${ch.name}${ch.failVerdict && ch.outcome === "fail" ? ` → ${ch.failVerdict}` : ""}`);
      for (const l of ch.evidence.split("\n").slice(0, 4)) line(`       ${l}`);
    }
    if (notable.length === 0) {
      for (const l of wrap(`all ran clean: ${result.checks.map((ch) => ch.name).join(", ")}`, width - 2))
        line(`  ${l}`);
    }
  }

  const failedCompiles = result.compile.filter((cc) => !cc.ok);
  for (const cc of failedCompiles) {
    heading(`compile log: ${cc.name} (failed after ${cc.seconds.toFixed(1)} s)`);
    for (const l of compileLogExcerpt(cc.log, DETAIL_LOG_LINES)) line(`  ${l}`);
  }
  return `${out.join("\n")}\n`;
}
