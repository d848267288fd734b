// One line on a problem's CUDA-graph replay for the terminal and the HTML report: whether the shipped file
// replays its forward, and what the replay was weighed against.
import type { OptimizeResult } from "../optimize/optimize.ts";

export function graphReplayNote(r: OptimizeResult): string | null {
  if (r.graphed === undefined) return null;
  const ms = (x: number | null | undefined) => (x == null ? "?" : `${x.toFixed(3)} ms`);
  if (r.graphed)
    return `the forward replays a CUDA graph: ${ms(r.graphedMs)} against ${ms(r.launchedMs)} with its calls launched one by one (host-bound)`;
  if (r.graphedMs == null) return "a CUDA-graph replay could not be timed: calls launched one by one";
  return `a CUDA-graph replay timed ${ms(r.graphedMs)} against ${ms(r.launchedMs)} launched: not shipped (not faster, or the file with it failed the eval)`;
}
