// Where a worker was when kforge stopped it at its time limit. Before the kill the runner asks the worker for its
// Python stacks (SIGUSR1: faulthandler, registered in python/kforge_worker/__main__.py, writes every thread's stack
// to stderr from the signal handler, so also while native code holds the GIL); this reads the main thread's block
// back, so that a timeout says whose code was running — the candidate's, or kforge's own check — instead of only
// how long it took.

/** The signal the worker dumps its stacks on. */
export const STACK_DUMP_SIGNAL = "SIGUSR1";
/** How long the runner waits for the dump before it kills the worker's group. */
export const STACK_DUMP_GRACE_MS = 1500;

const BLOCK_START = /^(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):\s*$/;
const FRAME = /^\s+File "(.+)", line (\d+) in (.+?)\s*$/;

interface Frame {
  file: string;
  line: number;
  fn: string;
}

/** The thread blocks of a faulthandler dump, innermost frame first. */
function blocks(lines: string[]): { current: boolean; frames: Frame[] }[] {
  const found: { current: boolean; frames: Frame[] }[] = [];
  for (const line of lines) {
    const start = BLOCK_START.exec(line);
    if (start) {
      found.push({ current: start[1] === "Current thread", frames: [] });
      continue;
    }
    const frame = FRAME.exec(line);
    const block = found.at(-1);
    if (frame && block)
      block.frames.push({ file: frame[1] ?? "", line: Number(frame[2]), fn: frame[3] ?? "" });
  }
  return found.filter((b) => b.frames.length > 0);
}

function short(file: string): string {
  const at = file.lastIndexOf("/kforge_worker/");
  return at >= 0 ? file.slice(at + 1) : file.split("/").slice(-2).join("/");
}

/**
 * One line naming where the worker's main thread was (its innermost frames) and whether that was the candidate's
 * code (`candidatePath`), or null when the lines hold no dump.
 */
export function whereItWas(lines: string[], candidatePath: string): string | null {
  const all = blocks(lines);
  const main =
    all.find((b) => b.frames.some((f) => f.file.endsWith("kforge_worker/__main__.py"))) ??
    all.find((b) => b.current) ??
    all[0];
  if (!main) return null;
  const inner = main.frames.slice(0, 3).map((f) => `${short(f.file)}:${f.line} in ${f.fn}`);
  const candidate = candidatePath !== "" && main.frames.some((f) => f.file === candidatePath);
  const whose = candidate
    ? "in the candidate's code"
    : "in kforge's or a library's code, not the candidate's";
  return `it was ${whose}: ${inner.join(" <- ")}`;
}
