// Charts for the HTML report, drawn by ECharts in Node (server-side rendering to static SVG): the report
// needs no script and no network to show them, and a browser test can find them as <svg> elements.
import * as echarts from "echarts";
import type { EvalResult, TimingStats, Verdict } from "../worker/protocol.ts";
import { formatMs, formatSpeedup, formatSpeedupWithCi, timerName, verdictLabel } from "./format.ts";
import { escapeHtml } from "./html-escape.ts";
import { attainableTflops, type RooflineEntry } from "./roofline.ts";

export const VERDICT_COLORS: Record<Verdict, string> = {
  correct: "#2e7d32",
  incorrect: "#c62828",
  shape_mismatch: "#c62828",
  cheating: "#8e24aa",
  compile_error: "#ef6c00",
  import_error: "#ef6c00",
  runtime_error: "#ef6c00",
  timeout: "#f9a825",
  problem_error: "#546e7a",
  no_code: "#757575",
};
const REF_COLOR = "#607d8b";
const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";

let chartCounter = 0;

/** Hover text for the mark of one data item, by ECharts series and data index; null for none. */
export type Tooltip = (seriesIndex: number, dataIndex: number) => string | null;

// ECharts' SSR output tags each data mark with its series and data index; a <title> child gives it a
// native browser tooltip, with no script in the page.
const DATA_MARK =
  /<(path|rect|circle|polyline|polygon|text)\b([^>]*?\becmeta_series_index="(\d+)" ecmeta_data_index="(\d+)" ecmeta_ssr_type="chart"[^>]*?)(\/?)>/g;

function addTooltips(svg: string, tooltip: Tooltip): string {
  return svg.replace(
    DATA_MARK,
    (mark, tag: string, attrs: string, series: string, data: string, selfClosing: string) => {
      const text = tooltip(Number(series), Number(data));
      if (text === null) return mark;
      const title = `<title>${escapeHtml(text)}</title>`;
      return selfClosing ? `<${tag}${attrs}>${title}</${tag}>` : `<${tag}${attrs}>${title}`;
    },
  );
}

/** Renders one ECharts option to an SVG string; ids are made unique so several charts share a page. */
export function renderSvg(
  option: echarts.EChartsOption,
  width: number,
  height: number,
  tooltip?: Tooltip,
): string {
  const chart = echarts.init(null, null, { renderer: "svg", ssr: true, width, height });
  try {
    chart.setOption({ animation: false, textStyle: { fontFamily: FONT }, ...option });
    const id = `kfc${++chartCounter}`;
    const svg = chart.renderToSVGString().replace(/\bzr\d+-/g, `${id}-`);
    return tooltip ? addTooltips(svg, tooltip) : svg;
  } finally {
    // Without dispose the renderer keeps timers alive and Node never exits.
    chart.dispose();
  }
}

function shortLabel(text: string, max = 28): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

const timed = (results: EvalResult[]) =>
  results.filter((r): r is EvalResult & { timing: NonNullable<EvalResult["timing"]> } => r.timing !== null);

/**
 * Speedup of every timed candidate as a horizontal bar with its 95% CI as an error bar (a custom series:
 * ECharts has no built-in error bars), coloured by verdict, with the PyTorch baseline at 1×.
 */
export function speedupChart(results: EvalResult[]): string | null {
  const rows = timed(results);
  if (rows.length === 0) return null;
  // Two-line labels: the candidate, and under it (grey) its problem. Category values must be unique.
  const categories = rows.map(
    (r, i) => `${i}\u0000${shortLabel(r.candidate, 40)}\u0000${shortLabel(r.problem, 40)}`,
  );
  const verdicts = [...new Set(rows.map((r) => r.verdict))];
  const maxX = Math.max(1.2, ...rows.map((r) => r.timing.speedupCi[1])) * 1.05;

  const bars: echarts.SeriesOption[] = verdicts.map((v) => ({
    type: "bar",
    name: verdictLabel(v),
    barGap: "-100%",
    barMaxWidth: 26,
    itemStyle: { color: VERDICT_COLORS[v], opacity: 0.85 },
    label: {
      show: true,
      position: "insideRight",
      distance: 6,
      formatter: (p) => (typeof p.value === "number" ? formatSpeedup(p.value) : ""),
      color: "#fff",
      fontWeight: "bold",
    },
    data: rows.map((r) => (r.verdict === v ? r.timing.speedup : "-")),
    ...(v === verdicts[0]
      ? {
          markLine: {
            silent: true,
            symbol: "none",
            lineStyle: { color: "#333", type: "dashed" },
            label: { formatter: "1× = PyTorch", position: "start", color: "#333" },
            data: [{ xAxis: 1 }],
          },
        }
      : {}),
  }));

  const errorBars: echarts.CustomSeriesOption = {
    type: "custom",
    name: "95% CI",
    itemStyle: { color: "#111" },
    encode: { x: [1, 2], y: 0 },
    data: rows.map((r, i) => [i, r.timing.speedupCi[0], r.timing.speedupCi[1]]),
    renderItem: (_params, api) => {
      const row = api.value(0) as number;
      const lo = api.coord([api.value(1), row]);
      const hi = api.coord([api.value(2), row]);
      const cap = ((api.size?.([0, 1]) as number[] | undefined)?.[1] ?? 20) * 0.22;
      const style = { stroke: "#111", lineWidth: 1.4 };
      const [x0 = 0, y = 0] = lo;
      const [x1 = 0] = hi;
      return {
        type: "group",
        children: [
          { type: "line", shape: { x1: x0, y1: y, x2: x1, y2: y }, style },
          { type: "line", shape: { x1: x0, y1: y - cap, x2: x0, y2: y + cap }, style },
          { type: "line", shape: { x1: x1, y1: y - cap, x2: x1, y2: y + cap }, style },
        ],
      };
    },
    z: 10,
  };

  const height = 100 + rows.length * 42;
  return renderSvg(
    {
      title: {
        text: "Speedup over PyTorch (bars) with 95% CI (whiskers)",
        left: 8,
        textStyle: { fontSize: 14 },
      },
      legend: { top: 26, right: 10, itemGap: 22, data: [...verdicts.map(verdictLabel), "95% CI"] },
      grid: { left: 24, right: 60, top: 60, bottom: 40, containLabel: true },
      xAxis: {
        type: "value",
        min: 0,
        max: Math.ceil(maxX * 2) / 2,
        name: "speedup ×",
        nameLocation: "middle",
        nameGap: 24,
      },
      yAxis: {
        type: "category",
        data: categories,
        inverse: true,
        axisLabel: {
          formatter: (value: string) => {
            const [, candidate = "", problem = ""] = value.split("\u0000");
            return `{c|${candidate}}\n{p|${problem}}`;
          },
          rich: { c: { fontSize: 11, color: "#222" }, p: { fontSize: 10, color: "#78909c" } },
        },
      },
      series: [...bars, errorBars],
    },
    1100,
    height,
    (_series, i) => {
      const r = rows[i];
      if (!r) return null;
      const t = r.timing;
      return `${r.candidate} on ${r.problem}: ${verdictLabel(r.verdict)}, ${formatSpeedupWithCi(t.speedup, t.speedupCi)} (95% CI); median ${formatMs(t.ref.medianMs)} ms PyTorch, ${formatMs(t.cand.medianMs)} ms candidate`;
    },
  );
}

/** Tukey box: quartiles, whiskers at the furthest samples within 1.5 IQR, the rest as outliers. */
export function boxStats(stats: TimingStats): {
  box: [number, number, number, number, number];
  outliers: number[];
} {
  const s = [...stats.samplesMs].sort((a, b) => a - b);
  if (s.length === 0) {
    return { box: [stats.minMs, stats.p25Ms, stats.medianMs, stats.p75Ms, stats.maxMs], outliers: [] };
  }
  const q = (p: number) => {
    const pos = (s.length - 1) * p;
    const lo = Math.floor(pos);
    const hi = Math.ceil(pos);
    return (s[lo] ?? 0) + ((s[hi] ?? 0) - (s[lo] ?? 0)) * (pos - lo);
  };
  const q1 = q(0.25);
  const q3 = q(0.75);
  const iqr = q3 - q1;
  const inside = s.filter((v) => v >= q1 - 1.5 * iqr && v <= q3 + 1.5 * iqr);
  return {
    box: [inside[0] ?? q1, q1, q(0.5), q3, inside[inside.length - 1] ?? q3],
    outliers: s.filter((v) => v < q1 - 1.5 * iqr || v > q3 + 1.5 * iqr),
  };
}

/**
 * Per-candidate distributions of the timed iterations: for each candidate a PyTorch box and a candidate
 * box side by side (one boxplot series, so outlier dots line up with their box), Tukey whiskers.
 */
export function timingChart(problem: string, results: EvalResult[]): string | null {
  const rows = timed(results);
  if (rows.length === 0) return null;
  const categories = rows.flatMap((r) => ["PyTorch", shortLabel(r.candidate, 20)]);
  const boxes = rows.flatMap((r) => [boxStats(r.timing.ref), boxStats(r.timing.cand)]);
  const colorOf = (i: number) => (i % 2 === 0 ? REF_COLOR : "#1565c0");
  const outliers = (side: 0 | 1) =>
    boxes.flatMap((b, i) => (i % 2 === side ? b.outliers.map((v) => [i, v]) : []));
  return renderSvg(
    {
      title: {
        text: `Timing distributions: ${problem}`,
        // The clock the worker really used: CPU runs are wall-clock timed, not with CUDA events.
        subtext: `ms per forward (${[...new Set(rows.map((r) => timerName(r.timing.method)))].join(", ")}) · box: quartiles · whiskers: 1.5 IQR · dots: outliers`,
        left: 8,
        textStyle: { fontSize: 14 },
        subtextStyle: { fontSize: 11 },
      },
      legend: { top: 50, left: 8, itemGap: 22, data: ["PyTorch reference", "candidate"] },
      grid: { left: 24, right: 24, top: 84, bottom: 30, containLabel: true },
      xAxis: {
        type: "category",
        data: categories,
        axisLabel: { fontSize: 10, interval: 0, width: 110, overflow: "truncate" },
        splitLine: { show: true, interval: (i: number) => i % 2 === 1, lineStyle: { color: "#cfd8dc" } },
      },
      yAxis: { type: "value", name: "ms", nameLocation: "middle", nameGap: 46, scale: true },
      series: [
        {
          type: "boxplot",
          name: "timing",
          boxWidth: [10, 46],
          data: boxes.map((b, i) => ({
            value: b.box,
            itemStyle: {
              color: i % 2 === 0 ? "#eceff1" : "#e3f2fd",
              borderColor: colorOf(i),
              borderWidth: 1.5,
            },
          })),
        },
        {
          type: "scatter",
          name: "PyTorch reference",
          symbolSize: 4,
          itemStyle: { color: REF_COLOR },
          data: outliers(0),
        },
        {
          type: "scatter",
          name: "candidate",
          symbolSize: 4,
          itemStyle: { color: "#1565c0" },
          data: outliers(1),
        },
      ],
    },
    Math.max(560, Math.min(1100, 160 + rows.length * 220)),
    360,
    (series, i) => {
      if (series !== 0) return null;
      const r = rows[Math.floor(i / 2)];
      const stats = i % 2 === 0 ? r?.timing.ref : r?.timing.cand;
      const b = boxes[i];
      if (!r || !stats || !b) return null;
      const who = i % 2 === 0 ? `PyTorch (timed beside ${r.candidate})` : r.candidate;
      return `${who}: median ${formatMs(stats.medianMs)} ms, quartiles ${formatMs(stats.p25Ms)}–${formatMs(stats.p75Ms)} ms, whiskers ${formatMs(b.box[0])}–${formatMs(b.box[4])} ms, ${b.outliers.length} outliers, n=${stats.n}`;
    },
  );
}

/**
 * Log-log roofline of one device: the memory slope and the compute roofs of the precisions present, the
 * problems' floors (their intensity on the roof), and where the reference and each candidate landed.
 */
export function rooflineChart(entries: Array<Extract<RooflineEntry, { ok: true }>>): string | null {
  const first = entries[0];
  if (!first) return null;
  const ceilings = first.ceilings;
  const intensities = entries.map((e) => e.cand.intensity);
  const xMin = 10 ** Math.floor(Math.log10(Math.min(...intensities) / 4));
  const xMax = 10 ** Math.ceil(Math.log10(Math.max(...intensities, 1000) * 2));
  const bw = ceilings.memoryBytesPerSecond;
  const computes = [...new Map(entries.map((e) => [e.compute.label, e.compute])).values()];

  const roofs: echarts.SeriesOption[] = computes.map((c) => {
    const ridge = c.flopsPerSecond / bw;
    return {
      type: "line",
      name: `roof: ${c.label}`,
      showSymbol: false,
      lineStyle: { color: "#37474f", width: 2 },
      itemStyle: { color: "#37474f" },
      endLabel: {
        show: true,
        formatter: `${c.label} ${Math.round(c.flopsPerSecond / 1e12)} TFLOP/s`,
        fontSize: 10,
        offset: [-170, -10],
      },
      data: [
        [xMin, (xMin * bw) / 1e12],
        [ridge, c.flopsPerSecond / 1e12],
        [xMax, c.flopsPerSecond / 1e12],
      ],
    };
  });
  const yMin =
    10 **
    Math.floor(
      Math.log10(Math.min((xMin * bw) / 1e12, ...entries.map((e) => Math.min(e.ref.tflops, e.cand.tflops)))),
    );

  const problems = [...new Map(entries.map((e) => [e.result.problem, e])).values()];
  const floors: echarts.SeriesOption = {
    type: "scatter",
    name: "problem floor (best possible)",
    symbol: "triangle",
    symbolSize: 13,
    itemStyle: { color: "#d32f2f", opacity: 1 },
    label: {
      show: true,
      position: "left",
      formatter: "{b}",
      fontSize: 10,
      color: "#b71c1c",
      backgroundColor: "#fff",
      padding: [1, 3],
    },
    data: problems.map((e) => ({
      name: `${e.result.problem} floor ${e.floorMs.toPrecision(3)} ms`,
      value: [e.cand.intensity, attainableTflops(e.cand.intensity, e.ceilings, e.compute)],
      // On the flat compute roof a label to the left would sit on the line; above it is clear.
      label: { position: e.cand.intensity * bw >= e.compute.flopsPerSecond ? "top" : "left" },
    })),
    markLine: {
      silent: true,
      symbol: "none",
      lineStyle: { color: "#d32f2f", type: "dotted" },
      label: { show: false },
      data: problems.map((e) => [
        { coord: [e.cand.intensity, yMin] },
        { coord: [e.cand.intensity, attainableTflops(e.cand.intensity, e.ceilings, e.compute)] },
      ]),
    },
  };
  const refPoints: echarts.SeriesOption = {
    type: "scatter",
    name: "PyTorch reference",
    symbol: "circle",
    symbolSize: 10,
    itemStyle: { color: "#fff", borderColor: REF_COLOR, borderWidth: 2 },
    data: problems.map((e) => ({
      name: `${e.result.problem} reference`,
      value: [e.ref.intensity, e.ref.tflops],
    })),
  };
  const candPoints: echarts.SeriesOption = {
    type: "scatter",
    name: "candidate",
    symbol: "diamond",
    symbolSize: 11,
    itemStyle: { color: "#1565c0", opacity: 1 },
    label: {
      show: true,
      position: "right",
      formatter: "{b}",
      fontSize: 10,
      backgroundColor: "#fff",
      padding: [1, 3],
    },
    labelLayout: { moveOverlap: "shiftY" },
    data: entries.map((e) => ({
      name: shortLabel(e.result.candidate, 22),
      value: [e.cand.intensity, e.cand.tflops],
      itemStyle: { color: VERDICT_COLORS[e.result.verdict] },
    })),
  };
  return renderSvg(
    {
      title: {
        text: `Roofline: ${ceilings.name}`,
        subtext: `HBM ${(bw / 1e12).toFixed(2)} TB/s; ${computes
          .map((c) => `${c.label} ${Math.round(c.flopsPerSecond / 1e12)} TFLOP/s`)
          .join("; ")} (sources below)`,
        left: 8,
        textStyle: { fontSize: 14 },
        subtextStyle: { fontSize: 11 },
      },
      legend: {
        top: 52,
        left: 8,
        itemGap: 22,
        data: ["problem floor (best possible)", "PyTorch reference", "candidate"],
      },
      grid: { left: 24, right: 40, top: 90, bottom: 44, containLabel: true },
      xAxis: {
        type: "log",
        min: xMin,
        max: xMax,
        name: "arithmetic intensity of the problem floor (FLOP/byte)",
        nameLocation: "middle",
        nameGap: 28,
      },
      yAxis: { type: "log", min: yMin, name: "achieved TFLOP/s", nameLocation: "middle", nameGap: 44 },
      series: [...roofs, floors, refPoints, candPoints],
    },
    1100,
    460,
    (series, i) => {
      const at = series - roofs.length;
      const point = (e: (typeof entries)[number], p: typeof e.cand, who: string, ms: number | undefined) =>
        `${who}: ${p.tflops.toFixed(1)} TFLOP/s, ${p.gbps.toFixed(0)} GB/s, ${formatMs(ms)} ms (floor ÷ time ${((e.floorMs / (ms ?? Number.NaN)) * 100).toFixed(0)}%)`;
      if (at === 0) {
        const e = problems[i];
        return e
          ? `${e.result.problem}: floor ${e.floorMs.toPrecision(3)} ms (${(e.workload.flops / 1e9).toPrecision(4)} GFLOP, ${(e.workload.bytes / 1e6).toPrecision(4)} MB; ${e.compute.label})`
          : null;
      }
      if (at === 1) {
        const e = problems[i];
        return e ? point(e, e.ref, `PyTorch on ${e.result.problem}`, e.result.timing?.ref.medianMs) : null;
      }
      if (at === 2) {
        const e = entries[i];
        return e
          ? point(e, e.cand, `${e.result.candidate} on ${e.result.problem}`, e.result.timing?.cand.medianMs)
          : null;
      }
      return null;
    },
  );
}
