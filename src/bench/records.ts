// Bench records: the flat JSON kept under bench/ for every measured (problem, variant) pair.
import { z } from "zod";
import type { EvalResult } from "../worker/protocol.ts";

export const BenchRecord = z.object({
  device: z.string(),
  date: z.string(),
  problem: z.string(),
  variant: z.string(),
  candidate: z.string(),
  ref_ms: z.number().nullable(),
  ours_ms: z.number().nullable(),
  speedup: z.number().nullable(),
  speedup_ci95: z.tuple([z.number(), z.number()]).nullable(),
  /** True only when the candidate passed the full check (every trial and every verification check). */
  correct: z.boolean(),
  verdict: z.string(),
  reason: z.string().nullable(),
  torch: z.string().nullable(),
  cuda: z.string().nullable(),
  driver: z.string().nullable(),
  precision: z.string().nullable(),
  trials: z.number().int(),
  max_rel_l2_vs_fp64: z.object({ ours: z.number().nullable(), ref: z.number().nullable() }),
  checks_failed: z.array(z.string()),
  tool: z.string(),
});
export type BenchRecord = z.infer<typeof BenchRecord>;

function worst(values: (number | null)[]): number | null {
  const present = values.filter((v): v is number => v !== null);
  return present.length === 0 ? null : Math.max(...present);
}

export function toBenchRecord(result: EvalResult, variant: string, date = new Date()): BenchRecord {
  const outputs = result.trials.flatMap((t) => t.outputs);
  return {
    device: result.environment.gpu ?? result.environment.device,
    date: date.toISOString().slice(0, 10),
    problem: result.problem,
    variant,
    candidate: result.candidate,
    ref_ms: result.timing?.ref.medianMs ?? null,
    ours_ms: result.timing?.cand.medianMs ?? null,
    speedup: result.timing?.speedup ?? null,
    speedup_ci95: result.timing?.speedupCi ?? null,
    correct: result.verdict === "correct",
    verdict: result.verdict,
    reason: result.reason,
    torch: result.environment.torch,
    cuda: result.environment.cuda,
    driver: result.environment.driver,
    precision: result.precision,
    trials: result.trials.length,
    max_rel_l2_vs_fp64: {
      ours: worst(outputs.map((o) => o.candVsFp64.relL2)),
      ref: worst(outputs.map((o) => o.refVsFp64.relL2)),
    },
    checks_failed: result.checks.filter((c) => c.outcome === "fail").map((c) => c.name),
    tool: "kforge eval",
  };
}

/** A file name that says what was measured: <problem>__<variant>.json. */
export function recordFileName(record: BenchRecord): string {
  const safe = (s: string) => s.replace(/[^A-Za-z0-9_.-]+/g, "_");
  return `${safe(record.problem)}__${safe(record.variant)}.json`;
}
