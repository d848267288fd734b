// Progress of an eval run on stderr: what is happening now (stage, detail, fraction) for the candidate in
// hand, and a line per finished candidate. On a TTY it is a live cli-progress bar; elsewhere (CI logs,
// files) plain lines with no control codes, rate-limited; disabled, nothing (stdout may carry --json).
import cliProgress from "cli-progress";
import pc from "picocolors";
import type { EvalResult, ProgressMessage } from "../worker/protocol.ts";
import { timingWarning } from "./bimodal.ts";
import { formatDuration, formatSpeedupWithCi, truncate, verdictLabel } from "./format.ts";
import { firstReasonLine } from "./summary.ts";
import { useColor, verdictColor } from "./table.ts";

export interface Progress {
  /** `index` counts from 0, as the eval loop does; shown as [index+1/total]. */
  candidateStarted(label: string, index: number, total: number): void;
  update(msg: ProgressMessage): void;
  candidateFinished(result: EvalResult): void;
  /** A line of other output (e.g. --verbose worker logs) printed without breaking the live bar. */
  log(line: string): void;
  stop(): void;
}

export interface ProgressOptions {
  enabled: boolean;
  /** Default process.stderr. */
  stream?: NodeJS.WriteStream;
  /** Plain mode prints at most one line per stage per this many ms (stage changes always print). */
  plainIntervalMs?: number;
  /** Clock, for tests. */
  now?: () => number;
}

export const STAGE_NAMES: Record<ProgressMessage["stage"], string> = {
  import: "import",
  ready: "ready",
  compile: "compile",
  check: "trials",
  verify: "checks",
  time: "timing",
};

interface Current {
  label: string;
  position: string;
  stage: ProgressMessage["stage"] | null;
  detail: string;
  fraction: number | null;
  startedAt: number;
  stageStartedAt: number;
}

function startCandidate(label: string, index: number, total: number, t: number): Current {
  return {
    label,
    position: `[${index + 1}/${total}]`,
    stage: null,
    detail: "",
    fraction: null,
    startedAt: t,
    stageStartedAt: t,
  };
}

/** Records a worker message; true when it opens a new stage. */
function advance(current: Current, msg: ProgressMessage, t: number): boolean {
  const newStage = msg.stage !== current.stage;
  if (newStage) current.stageStartedAt = t;
  current.stage = msg.stage;
  current.detail = msg.detail;
  current.fraction = msg.fraction;
  return newStage;
}

/** Which fenced block of a transcript was evaluated: a transcript often holds several attempts. */
export function blockNote(result: Pick<EvalResult, "origin">): string | null {
  const o = result.origin;
  if (o.kind !== "transcript" || o.blockIndex === null) return null;
  return `took block ${o.blockIndex} of ${o.blockCount ?? "?"}`;
}

export function finishedLine(
  result: EvalResult,
  position: string,
  colors: ReturnType<typeof pc.createColors>,
): string {
  const parts = [
    `${position} ${result.candidate}${blockNote(result) ? ` (${blockNote(result)})` : ""}:`,
    verdictColor(colors, result.verdict)(verdictLabel(result.verdict)),
  ];
  if (result.timing)
    parts.push(`speedup ${formatSpeedupWithCi(result.timing.speedup, result.timing.speedupCi)}`);
  parts.push(`(${formatDuration(result.seconds)})`);
  const reason = firstReasonLine(result);
  if (reason) parts.push(`— ${truncate(reason, 160)}`);
  const warning = result.timing ? timingWarning(result.timing) : null;
  if (warning) parts.push(colors.yellow(`! ${warning}`));
  return parts.join(" ");
}

const silent: Progress = {
  candidateStarted() {},
  update() {},
  candidateFinished() {},
  log() {},
  stop() {},
};

/** Lines for logs: one when a candidate starts, on each new stage, at most every interval within one. */
function plainProgress(stream: NodeJS.WritableStream, intervalMs: number, now: () => number): Progress {
  let current: Current | null = null;
  let lastPrinted = 0;
  let lastText = "";
  const write = (text: string) => stream.write(`${text}\n`);
  return {
    candidateStarted(label, index, total) {
      current = startCandidate(label, index, total, now());
      write(`${current.position} ${label}: started`);
    },
    update(msg) {
      if (!current) return;
      const t = now();
      const newStage = advance(current, msg, t);
      const percent = msg.fraction === null ? "" : ` ${Math.round(msg.fraction * 100)}%`;
      const text = `${current.position} ${current.label}: ${STAGE_NAMES[msg.stage]}${percent}: ${msg.detail}`;
      if (text === lastText) return;
      if (!newStage && t - lastPrinted < intervalMs) return;
      lastPrinted = t;
      lastText = text;
      write(text);
    },
    candidateFinished(result) {
      const position = current?.position ?? "";
      write(finishedLine(result, position, pc.createColors(false)).trim());
      current = null;
      lastText = "";
    },
    log(line) {
      write(line);
    },
    stop() {
      current = null;
    },
  };
}

/** A live bar on a terminal; finished candidates scroll above it. */
function ttyProgress(stream: NodeJS.WriteStream, now: () => number): Progress {
  const colors = pc.createColors(useColor(stream));
  let current: Current | null = null;
  const spinner = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

  const format: cliProgress.GenericFormatter = (options, params) => {
    if (!current) return "";
    const c = current;
    const elapsed = formatDuration((now() - c.stageStartedAt) / 1000);
    const stage = c.stage ? STAGE_NAMES[c.stage] : "starting";
    let indicator: string;
    if (c.fraction === null) {
      const tick = spinner[Math.floor(now() / 100) % spinner.length] ?? "";
      indicator = colors.cyan(tick);
    } else {
      indicator = `${cliProgress.Format.BarFormat(params.progress, options)} ${String(Math.round(params.progress * 100)).padStart(3)}%`;
    }
    const head = `${colors.dim(c.position)} ${colors.bold(c.label)} ${indicator} ${colors.cyan(stage)}`;
    const columns = stream.columns ?? 100;
    // The bar must stay on one line or the redraw scrolls; the detail gives way.
    const fixed = `${c.position} ${c.label} ${c.fraction === null ? "x" : `${"x".repeat(options.barsize ?? 20)} 100%`} ${stage}  ${elapsed}`;
    const room = columns - 1 - Array.from(fixed).length - 2;
    const detail = room > 8 ? ` ${colors.dim(truncate(c.detail, room))}` : "";
    return `${head}${detail} ${colors.dim(elapsed)}`;
  };

  const multibar = new cliProgress.MultiBar({
    stream,
    format,
    barsize: 20,
    // Hiding the cursor would leave it hidden after a Ctrl-C (cli-progress restores it only on stop, and
    // its gracefulExit would swallow SIGINT).
    hideCursor: false,
    clearOnComplete: true,
    fps: 10,
    barCompleteChar: "█",
    barIncompleteChar: "░",
    autopadding: true,
  });
  let bar: cliProgress.SingleBar | null = null;

  return {
    candidateStarted(label, index, total) {
      current = startCandidate(label, index, total, now());
      if (bar) multibar.remove(bar);
      bar = multibar.create(1, 0);
    },
    update(msg) {
      if (!current || !bar) return;
      advance(current, msg, now());
      bar.update(msg.fraction ?? 0);
    },
    candidateFinished(result) {
      const position = current?.position ?? "";
      multibar.log(`${finishedLine(result, position, colors)}\n`);
      if (bar) multibar.remove(bar);
      bar = null;
      current = null;
    },
    log(line) {
      multibar.log(`${line}\n`);
    },
    stop() {
      multibar.stop();
      bar = null;
      current = null;
    },
  };
}

export function createProgress(opts: ProgressOptions): Progress {
  if (!opts.enabled) return silent;
  const stream = opts.stream ?? process.stderr;
  const now = opts.now ?? Date.now;
  if (stream.isTTY) return ttyProgress(stream, now);
  return plainProgress(stream, opts.plainIntervalMs ?? 2000, now);
}
