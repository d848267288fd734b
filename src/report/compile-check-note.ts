// One line for the terminal and the HTML report when torch.compile(reference), the second yardstick, fails the
// check the emitted file passed (compile_check.py): its speed is then not a like-for-like comparison, and where
// it passes with TF32 off, that time is the one a correct answer has to beat.
import type { OptimizeResult } from "../optimize/optimize.ts";

export function compileCheckNote(r: OptimizeResult): string | null {
  const check = r.compileCheck;
  if (check?.correct !== false) return null;
  const why = check.note?.split("\n")[0] ?? "";
  const ms = (x: number | null | undefined) => (x == null ? "?" : `${x.toFixed(3)} ms`);
  const ratio = (x: number | null | undefined) => (x == null ? "?" : `${x.toFixed(2)}×`);
  const exact =
    r.compiledExactMs !== undefined
      ? `; with TF32 off it passes in ${ms(r.compiledExactMs)} (ours ${ratio(r.speedupVsCompileExact)} of that)`
      : check.exactCorrect === false
        ? "; with TF32 off it fails too"
        : "";
  return `torch.compile's outputs fail the check this file passed (${why})${exact}`;
}
