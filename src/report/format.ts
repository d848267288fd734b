// Number and text formatting shared by the terminal and HTML views.

/** Milliseconds with three significant digits: 0.0123, 1.23, 12.3, 1234. */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  if (ms >= 100) return ms.toFixed(0);
  return ms.toPrecision(3);
}

/** An absolute error in short scientific notation (1.2e-3); exact zero stays 0. */
export function formatError(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return "inf";
  if (value === 0) return "0";
  const [mantissa, exponent] = value.toExponential(1).split("e");
  return `${mantissa}e${Number(exponent)}`;
}

export function formatSpeedup(value: number): string {
  return `${value >= 10 ? value.toFixed(1) : value.toFixed(2)}×`;
}

/** "2.31× (2.25–2.38)": the point estimate and its 95% confidence interval. */
export function formatSpeedupWithCi(speedup: number, ci: readonly [number, number]): string {
  const digits = (v: number) => (v >= 10 ? v.toFixed(1) : v.toFixed(2));
  return `${formatSpeedup(speedup)} (${digits(ci[0])}–${digits(ci[1])})`;
}

/** Cuts text to `width` characters, ending with an ellipsis when it had to cut. */
export function truncate(text: string, width: number): string {
  if (width <= 0) return "";
  const chars = Array.from(text);
  if (chars.length <= width) return text;
  if (width === 1) return "…";
  return `${chars.slice(0, width - 1).join("")}…`;
}

/** Verdict names as people read them. */
export function verdictLabel(verdict: string): string {
  return verdict.replaceAll("_", " ");
}

/** The clock a timing used, from its method ("cuda events, interleaved …" / "cpu perf_counter, …"). */
export function timerName(method: string): string {
  const clock = method.split(/[,;]/)[0]?.trim() ?? "";
  if (/^cuda events?$/i.test(clock)) return "CUDA events";
  if (/^cpu perf_counter$/i.test(clock)) return "CPU wall clock";
  return clock || "unknown timer";
}

export function formatDuration(seconds: number): string {
  if (seconds < 59.95) return `${seconds.toFixed(1)} s`;
  // Round once, then split: 179.6 s is "3 min 0 s", never "2 min 60 s".
  const whole = Math.round(seconds);
  const m = Math.floor(whole / 60);
  return `${m} min ${whole - m * 60} s`;
}

// ANSI colour codes take no columns; widths must ignore them.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching the ESC of colour codes is the point
const ANSI = /\x1b\[[0-9;]*m/g;

export function visibleLength(text: string): number {
  return Array.from(text.replace(ANSI, "")).length;
}

/** Breaks text at spaces into lines of at most `width` visible columns (a longer word is cut). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let current = "";
  for (const word of text.split(" ")) {
    const candidate = current === "" ? word : `${current} ${word}`;
    if (visibleLength(candidate) <= width) {
      current = candidate;
      continue;
    }
    if (current !== "") lines.push(current);
    current = visibleLength(word) <= width ? word : truncate(word, width);
  }
  if (current !== "") lines.push(current);
  return lines;
}

/** Like truncate, for text that may hold colour codes: they take no columns, and a cut line loses its colour
 * rather than ending inside an escape sequence. */
export function truncateVisible(text: string, width: number): string {
  if (visibleLength(text) <= width) return text;
  return truncate(text.replace(ANSI, ""), width);
}
