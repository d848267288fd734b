// The judge's record: the clean reference process (which never imports candidate code) compares the candidate's
// outputs itself and writes its records on a socket only it holds (python/kforge_worker/judge.py). The worker's
// result comes from the candidate's process, where everything is reachable from candidate code; where the two
// disagree, the judge's record decides. python/kforge_worker/judge.py's `reconcile` is the same rule for the
// corpus runner and the Python tests.
import type { Check, EvalResult, JudgeRecord, Verdict } from "./protocol.ts";

/** The judge's record from the lines read on its channel. */
export function summarizeJudge(lines: string[], nonce: string): JudgeRecord {
  const record: JudgeRecord = {
    channel: "ok",
    problems: [],
    mode: null,
    why: null,
    pid: null,
    tolerance: null,
    trials: [],
    sampled: 0,
    samples: [],
    end: null,
  };
  let next = 0;
  const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);
  const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
  for (const raw of lines) {
    if (raw.trim() === "") continue;
    let message: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(raw);
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
        throw new Error("not an object");
      message = parsed as Record<string, unknown>;
    } catch {
      record.problems.push(`not JSON: ${raw.slice(0, 120)}`);
      continue;
    }
    if (message.type !== "judge") {
      record.problems.push(`not a judge record: ${raw.slice(0, 120)}`);
      continue;
    }
    if (message.nonce !== nonce) {
      record.problems.push(`a record without this run's nonce: ${raw.slice(0, 120)}`);
      continue;
    }
    const seq = num(message.seq);
    if (seq !== next)
      record.problems.push(`record ${String(message.seq)} where ${next} was next (duplicated or lost)`);
    next = seq !== null ? seq + 1 : next + 1;
    switch (message.event) {
      case "hello":
        record.pid = num(message.pid);
        break;
      case "start":
      case "declined":
        record.mode =
          message.event === "declined" ? "in_worker" : message.mode === "in_worker" ? "in_worker" : "process";
        record.why = str(message.why);
        break;
      case "tolerance": {
        const atol = num(message.atol);
        const rtol = num(message.rtol);
        record.tolerance = atol !== null && rtol !== null ? { atol, rtol } : null;
        break;
      }
      case "trial":
        record.trials.push({
          trial: num(message.trial),
          seed: num(message.seed),
          passed: typeof message.passed === "boolean" ? message.passed : null,
          message: str(message.message),
        });
        break;
      case "sample":
        record.sampled += 1;
        if (message.ok !== true)
          record.samples.push({ pair: num(message.pair), ok: false, message: str(message.message) });
        break;
      case "end":
        if (record.end !== null) record.problems.push("two end records");
        record.end = {
          trialsGiven: num(message.trialsGiven),
          trialsJudged: num(message.trialsJudged),
          trialsFailed: num(message.trialsFailed),
          calls: num(message.calls),
          commits: num(message.commits),
          sampled: num(message.sampled),
          wrong: num(message.wrong),
          failures: Array.isArray(message.failures) ? message.failures.map(String) : null,
          refTimed: num(message.refTimed),
          refMedianMs: num(message.refMedianMs),
          candTimed: num(message.candTimed),
          candMedianMs: num(message.candMedianMs),
          speedup: num(message.speedup),
        };
        record.mode = message.mode === "in_worker" ? "in_worker" : "process";
        record.why = str(message.why);
        break;
      default:
        break; // failure records are repeated in the end record
    }
  }
  if (!lines.some((l) => l.trim() !== "")) record.channel = "missing";
  else if (record.problems.length > 0 || record.pid === null) {
    record.channel = "forged";
    if (record.problems.length === 0) record.problems.push("records without the judge's first one");
  } else if (record.end === null) record.channel = "truncated";
  return record;
}

/** [verdict, evidence] when the judge's record contradicts the worker's result; null when it does not. */
export function judgeDisagrees(
  record: JudgeRecord,
  result: EvalResult,
  warmupIters: number,
): [Verdict, string] | null {
  if (record.channel === "forged") {
    return ["cheating", `the judge's channel holds lines the judge did not write: ${record.problems[0]}`];
  }
  if (result.verdict !== "correct") return null;
  // Missing: not even the line the reference process writes as it starts, before the worker imports torch, let
  // alone the candidate: no judge ran (no reference process, or a worker of another kind). The worker's verdict
  // stands — unless the result itself says a clean reference process ran.
  if (record.channel === "missing") {
    const isolated =
      result.timing?.inputs?.reference === "process" ||
      result.checks.some((c) => c.name === "reference_isolation" && c.outcome === "pass");
    return isolated
      ? [
          "runtime_error",
          "the result says the reference ran in a clean process, but that process never reported: the run cannot be judged",
        ]
      : null;
  }
  if (record.channel === "truncated") {
    return [
      "runtime_error",
      "the clean process's judgement ended before the run did (no end record): the run cannot be judged",
    ];
  }
  const end = record.end;
  const failed = record.trials.find((t) => t.passed !== true);
  if (failed) {
    return [
      "cheating",
      `the worker says correct, but in the clean process trial ${failed.trial} failed: ${failed.message}`,
    ];
  }
  const wrong = record.samples[0];
  if (wrong || (end?.wrong ?? 0) > 0) {
    const what = wrong ? `pair ${wrong.pair}: ${wrong.message}` : `${end?.wrong} wrong`;
    return [
      "cheating",
      `the worker says correct, but the clean process compared the candidate's timed outputs and found them wrong (${what})`,
    ];
  }
  if (end?.failures && end.failures.length > 0) {
    return [
      "cheating",
      `the worker says correct, but the clean process's judgement failed: ${end.failures[0]}`,
    ];
  }
  if (record.mode === "process") {
    const trials = result.trials.length;
    if (end?.trialsJudged !== trials || end?.trialsGiven !== trials) {
      return [
        "cheating",
        `the worker reports ${trials} passed trials, the clean process gave ${end?.trialsGiven} and judged ${end?.trialsJudged}`,
      ];
    }
    const timing = result.timing;
    if (timing) {
      if (timing.inputs?.reference !== "process") {
        return [
          "cheating",
          "the worker timed the reference beside the candidate though the clean process held it (its timed outputs never reached the judge)",
        ];
      }
      // The reference's times are measured in the clean process but reach the result through the worker.
      const median = end.refMedianMs ?? null;
      if (end.refTimed !== timing.ref.n || !same(median, timing.ref.medianMs)) {
        return [
          "cheating",
          `the reference's times in the result (${timing.ref.n} calls, median ${timing.ref.medianMs} ms) are not the ones the clean process measured (${end.refTimed} calls, median ${median} ms)`,
        ];
      }
      // So are the candidate's, measured in the worker: the judge was handed each pair's time right after the call
      // and recomputes the median and the speedup (a list edited later, or statistics patched in the worker, no
      // longer match).
      if (
        end.candTimed !== timing.cand.n ||
        !same(end.candMedianMs ?? null, timing.cand.medianMs) ||
        !same(end.speedup ?? null, timing.speedup)
      ) {
        return [
          "cheating",
          `the candidate's times in the result (${timing.cand.n} calls, median ${timing.cand.medianMs} ms, speedup ${timing.speedup}) are not the ones handed to the clean process after each pair (${end.candTimed} calls, median ${end.candMedianMs} ms, speedup ${end.speedup})`,
        ];
      }
      const pairs = timing.ref.n + warmupIters;
      if (end.calls !== pairs || end.commits !== pairs) {
        return [
          "cheating",
          `the worker reports ${pairs} pairs of calls (warm-up included); the clean process ran ${end.calls} and was handed ${end.commits} of the candidate's outputs`,
        ];
      }
    }
  }
  return null;
}

/** Equal up to float formatting; a value the judge does not have never matches. */
function same(judged: number | null, reported: number): boolean {
  return judged !== null && Math.abs(judged - reported) <= 1e-9 * Math.max(Math.abs(judged), 1e-12);
}

/** The result with the judge's record in it and, where they disagree, the judge's verdict (a failed judge_record check). */
export function reconcileJudge(
  result: EvalResult,
  lines: string[],
  nonce: string,
  warmupIters: number,
): EvalResult {
  const record = summarizeJudge(lines, nonce);
  result.judge = record;
  const disagreement = judgeDisagrees(record, result, warmupIters);
  if (disagreement) {
    const [verdict, evidence] = disagreement;
    const check: Check = { name: "judge_record", outcome: "fail", failVerdict: verdict, evidence };
    result.checks.push(check);
    if (result.verdict === "correct" || verdict === "cheating") {
      result.verdict = verdict;
      result.reason = `judge_record: ${evidence}`;
    }
  }
  return result;
}
