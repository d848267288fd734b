// The `kforge optimize` chart: per problem, the emitted file's speedup over eager PyTorch and over
// torch.compile(reference) as paired horizontal bars, with 1× marked. Static SVG, like every report chart.
import type * as echarts from "echarts";
import type { OptimizeResult } from "../optimize/optimize.ts";
import { renderSvg } from "./charts.ts";
import { formatMs, formatSpeedup, verdictLabel } from "./format.ts";
import { countsAsTimed } from "./optimize-summary.ts";

const EAGER_COLOR = "#1565c0";
const COMPILE_COLOR = "#ef6c00";

function shortLabel(text: string, max = 40): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Null when no correct result has a speedup to draw. */
export function optimizeSpeedupChart(results: OptimizeResult[]): string | null {
  const rows = results.filter((r) => countsAsTimed(r) && (r.speedup !== null || r.speedupVsCompile !== null));
  if (rows.length === 0) return null;
  // Category values must be unique even when a problem appears twice (two runs in one report).
  const categories = rows.map((r, i) => `${i}\u0000${shortLabel(r.problem)}`);
  const maxX = Math.max(1.2, ...rows.flatMap((r) => [r.speedup ?? 0, r.speedupVsCompile ?? 0])) * 1.08;
  const label = {
    show: true,
    position: "right" as const,
    fontSize: 10,
    formatter: (p: { value?: unknown }) => (typeof p.value === "number" ? formatSpeedup(p.value) : ""),
  };
  const series: echarts.SeriesOption[] = [
    {
      type: "bar",
      name: "vs eager PyTorch",
      barMaxWidth: 14,
      itemStyle: { color: EAGER_COLOR },
      label,
      data: rows.map((r) => r.speedup ?? "-"),
      markLine: {
        silent: true,
        symbol: "none",
        lineStyle: { color: "#333", type: "dashed" },
        label: { formatter: "1×", position: "start", color: "#333" },
        data: [{ xAxis: 1 }],
      },
    },
    {
      type: "bar",
      name: "vs torch.compile",
      barMaxWidth: 14,
      itemStyle: { color: COMPILE_COLOR },
      label,
      data: rows.map((r) => r.speedupVsCompile ?? "-"),
    },
  ];
  return renderSvg(
    {
      title: {
        text: "Speedup of the emitted ModelNew over eager PyTorch and over torch.compile",
        subtext: "median times measured in one process; only files that passed the full eval",
        left: 8,
        textStyle: { fontSize: 14 },
        subtextStyle: { fontSize: 11 },
      },
      legend: { top: 48, right: 10, itemGap: 22 },
      grid: { left: 24, right: 60, top: 80, bottom: 40, containLabel: true },
      xAxis: {
        type: "value",
        min: 0,
        max: Math.ceil(maxX * 4) / 4,
        name: "speedup ×",
        nameLocation: "middle",
        nameGap: 24,
      },
      yAxis: {
        type: "category",
        data: categories,
        inverse: true,
        axisLabel: { fontSize: 11, formatter: (value: string) => value.split("\u0000")[1] ?? value },
      },
      series,
    },
    1100,
    120 + rows.length * 44,
    (series, i) => {
      const r = rows[i];
      if (!r) return null;
      const against =
        series === 0 ? `eager ${formatMs(r.eagerMs)} ms` : `torch.compile ${formatMs(r.compiledMs)} ms`;
      const speedup = series === 0 ? r.speedup : r.speedupVsCompile;
      if (speedup === null) return null;
      return `${r.problem} (${verdictLabel(r.verdict ?? "not verified")}): ${formatSpeedup(speedup)} vs ${series === 0 ? "eager" : "torch.compile"}; ours ${formatMs(r.oursMs)} ms, ${against}`;
    },
  );
}
