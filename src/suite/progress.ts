// Progress of a suite on stderr. One slot keeps the per-candidate live display of `kforge eval`; several
// slots (GPUs, a Ray cluster) finish candidates out of order, so each start and finish is its own line,
// tagged with where it ran. Either way every finished candidate says how many are done and the ETA.
import pc from "picocolors";
import { formatDuration } from "../report/format.ts";
import { createProgress, finishedLine, STAGE_NAMES } from "../report/progress.ts";
import type { SuiteCounts, SuiteHooks } from "./eval-suite.ts";

/** Remaining time at the rate this run has kept so far (resumed results cost nothing and are not counted). */
export function etaSeconds(counts: SuiteCounts, elapsedSeconds: number): number | null {
  if (counts.ranHere === 0 || counts.done >= counts.total) return null;
  return (elapsedSeconds / counts.ranHere) * (counts.total - counts.done);
}

export function countsLine(counts: SuiteCounts, elapsedSeconds: number): string {
  const eta = etaSeconds(counts, elapsedSeconds);
  const parts = [`${counts.done}/${counts.total} done`, `${formatDuration(elapsedSeconds)} elapsed`];
  if (eta !== null) parts.push(`ETA ${formatDuration(eta)}`);
  return parts.join(" · ");
}

export interface SuiteProgressOptions {
  enabled: boolean;
  /** Several slots (or Ray): line mode. */
  parallel: boolean;
  stream?: NodeJS.WriteStream;
  /** Prefix each finished line with the problem (suites over several problems). */
  showProblem?: boolean;
  verbose?: boolean;
  now?: () => number;
  /** Several slots: at most one line per slot per this many ms within a stage (default 15 s). */
  stageLineMs?: number;
}

const STAGE_LINE_MS = 15_000;

export interface SuiteProgress {
  hooks: SuiteHooks;
  stop(): void;
}

export function createSuiteProgress(options: SuiteProgressOptions): SuiteProgress {
  const stream = options.stream ?? process.stderr;
  const now = options.now ?? Date.now;
  const started = now();
  const elapsed = () => (now() - started) / 1000;
  const name = (problem: string, label: string) => (options.showProblem ? `${problem}: ${label}` : label);
  if (!options.enabled) return { hooks: {}, stop() {} };

  if (!options.parallel) {
    const progress = createProgress({ enabled: true, stream });
    return {
      hooks: {
        started: (task, _slot, total) =>
          progress.candidateStarted(name(task.problem.name, task.label), task.index, total),
        progress: (_task, _slot, message) => progress.update(message),
        log: options.verbose ? (_task, _slot, line) => progress.log(`  | ${line}`) : undefined,
        finished: (_task, result, _slot, counts) => {
          progress.candidateFinished(result);
          if (counts.total > 1) progress.log(`  ${countsLine(counts, elapsed())}`);
        },
        resumed: (count, torn) => progress.log(resumedLine(count, torn)),
        note: (line) => progress.log(line),
      },
      stop: () => progress.stop(),
    };
  }

  const colors = pc.createColors(false);
  const write = (line: string) => stream.write(`${line}\n`);
  // Per slot: the stage last printed and when. A new stage always prints; within one, a line at most every
  // STAGE_LINE_MS, so a long checks phase on one GPU still shows it is alive without flooding the log.
  const lastStage = new Map<string, { stage: string; at: number }>();
  return {
    hooks: {
      started: (task, slot) => {
        lastStage.delete(slot);
        write(`[${slot}] ${name(task.problem.name, task.label)}: started`);
      },
      progress: (task, slot, message) => {
        const last = lastStage.get(slot);
        const t = now();
        if (last && last.stage === message.stage && t - last.at < (options.stageLineMs ?? STAGE_LINE_MS))
          return;
        lastStage.set(slot, { stage: message.stage, at: t });
        const percent = message.fraction === null ? "" : ` ${Math.round(message.fraction * 100)}%`;
        write(`[${slot}] ${task.label}: ${STAGE_NAMES[message.stage]}${percent}: ${message.detail}`);
      },
      log: options.verbose ? (task, slot, line) => write(`[${slot}] ${task.label} | ${line}`) : undefined,
      finished: (task, result, slot, counts) => {
        const where = slot ? `[${slot}] ` : "";
        const line = finishedLine(
          { ...result, candidate: name(task.problem.name, result.candidate) },
          "",
          colors,
        );
        write(`${where}${line.trim()} · ${countsLine(counts, elapsed())}`);
      },
      resumed: (count, torn) => write(resumedLine(count, torn)),
      note: write,
    },
    stop() {},
  };
}

function resumedLine(count: number, torn: number): string {
  const tornNote = torn > 0 ? ` (${torn} unreadable line(s) ignored: those run again)` : "";
  return `resumed: ${count} result(s) taken from the journal${tornNote}`;
}
