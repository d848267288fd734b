// Optional fields a results file may carry beyond the worker protocol's EvalResult. They are additive:
// a plain EvalResult is a valid ReportResult, and the loader keeps these fields instead of stripping them.
import { z } from "zod";
import { EvalResult, Workload } from "../worker/protocol.ts";

/** One region of the reference graph that `kforge optimize` replaced by a recipe's kernel. */
export const FusedRegion = z.object({
  recipe: z.string(),
  /** The reference operators the region covers, in order (e.g. ["linear", "batch_norm", "softmax"]). */
  ops: z.array(z.string()),
  kernel: z.string().nullable().optional(),
  note: z.string().nullable().optional(),
});

export const OptimizeInfo = z.object({
  regions: z.array(FusedRegion),
  /** Operators left to PyTorch, and why, where kforge could not win. */
  keptInPyTorch: z.array(z.string()).optional(),
});
export type OptimizeInfo = z.infer<typeof OptimizeInfo>;

export const ReportResult = EvalResult.extend({
  optimize: OptimizeInfo.optional(),
});
export type ReportResult = z.infer<typeof ReportResult>;

export function optimizeInfoOf(result: EvalResult): OptimizeInfo | null {
  const parsed = OptimizeInfo.safeParse((result as { optimize?: unknown }).optimize);
  return parsed.success ? parsed.data : null;
}

export function workloadOf(result: EvalResult): Workload | null {
  const parsed = Workload.safeParse(result.workload);
  return parsed.success ? parsed.data : null;
}
