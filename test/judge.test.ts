// The judge's record (src/worker/judge.ts): the clean reference process's own comparisons, read by the CLI on a
// socket the worker closed before the candidate was imported, and reconciled with the worker's result. Stand-in
// workers (shell scripts) write the records a real reference process writes, through the worker's fd 3.
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import type { EvalTask } from "../src/suite/eval-suite.ts";
import { outcomeResult } from "../src/suite/ray.ts";
import { judgeDisagrees, reconcileJudge, summarizeJudge } from "../src/worker/judge.ts";
import type { EvalRequest, EvalResult } from "../src/worker/protocol.ts";
import { failedResult } from "../src/worker/results.ts";
import { runWorker } from "../src/worker/run.ts";
import { stubRequest } from "./helpers/stub-request.ts";

const dir = mkdtempSync(join(tmpdir(), "kforge-judge-"));

const request: EvalRequest = stubRequest(dir, 2, 2);

function correct(trials = 2): EvalResult {
  const result = { ...failedResult(request, "correct", ""), reason: null };
  result.trials = Array.from({ length: trials }, (_, i) => ({
    seed: i,
    passed: true,
    outputs: [],
    message: null,
  }));
  return result;
}

type Event = Record<string, unknown>;
const END: Event = {
  event: "end",
  mode: "process",
  trialsGiven: 2,
  trialsJudged: 2,
  trialsFailed: 0,
  calls: 0,
  commits: 0,
  sampled: 0,
  wrong: 0,
  failures: [],
};
const GOOD: Event[] = [
  { event: "hello", pid: 7 },
  { event: "start", mode: "process" },
  { event: "trial", trial: 0, passed: true },
  { event: "trial", trial: 1, passed: true },
  END,
];
const lines = (nonce: string, events: Event[]) =>
  events.map((e, seq) => JSON.stringify({ type: "judge", nonce, seq, ...e }));

test("a whole record that agrees leaves the worker's verdict; no line at all means no judge ran", () => {
  assert.equal(reconcileJudge(correct(), lines("n", GOOD), "n", 2).verdict, "correct");
  const none = reconcileJudge(correct(), [], "n", 2);
  assert.equal(none.verdict, "correct");
  assert.equal(none.judge?.channel, "missing");
  // ...unless the result itself says a clean reference process ran: then it should have reported.
  const claimed = correct();
  claimed.checks.push({
    name: "reference_isolation",
    outcome: "pass",
    failVerdict: "cheating",
    evidence: "pid 9",
  });
  assert.equal(reconcileJudge(claimed, [], "n", 2).verdict, "runtime_error");
});

test("the judge's failed trial or wrong sample against the worker's correct is cheating", () => {
  const failedTrial = [...GOOD.slice(0, 3), { event: "trial", trial: 1, passed: false, message: "off" }, END];
  const result = reconcileJudge(correct(), lines("n", failedTrial), "n", 2);
  assert.equal(result.verdict, "cheating");
  assert.match(result.reason ?? "", /^judge_record: .*trial 1 failed: off/);
  assert.ok(result.checks.some((c) => c.name === "judge_record" && c.outcome === "fail"));
  const wrongSample = [...GOOD.slice(0, 4), { event: "sample", pair: 3, ok: false, message: "zeros" }, END];
  assert.equal(reconcileJudge(correct(), lines("n", wrongSample), "n", 2).verdict, "cheating");
});

test("forged, duplicated or short records: cheating, or a run that cannot be judged", () => {
  const other = [...lines("n", GOOD.slice(0, 4)), ...lines("x", GOOD).slice(4)];
  assert.equal(summarizeJudge(other, "n").channel, "forged");
  assert.equal(reconcileJudge(correct(), other, "n", 2).verdict, "cheating");
  const repeated = [...lines("n", GOOD), lines("n", GOOD)[2] ?? ""];
  assert.equal(reconcileJudge(correct(), repeated, "n", 2).verdict, "cheating");
  // A forged line makes even a failed run cheating: only the candidate could have written it.
  const incorrect = { ...correct(), verdict: "incorrect" as const };
  assert.equal(reconcileJudge(incorrect, [...lines("n", GOOD), "{}"], "n", 2).verdict, "cheating");
  const short = reconcileJudge(correct(), lines("n", GOOD.slice(0, 4)), "n", 2);
  assert.equal(short.verdict, "runtime_error");
  assert.match(short.reason ?? "", /cannot be judged/);
});

test("counts the judge did not see: trials, timed pairs, a reference timed beside the candidate", () => {
  assert.ok(judgeDisagrees(summarizeJudge(lines("n", GOOD), "n"), correct(3), 2));
  const timed = (where: "process" | "in_process", n: number): EvalResult => {
    const result = correct();
    const stats = {
      n,
      medianMs: 1,
      meanMs: 1,
      minMs: 1,
      maxMs: 1,
      p25Ms: 1,
      p75Ms: 1,
      stdMs: 0,
      samplesMs: [],
    };
    result.timing = {
      ref: stats,
      cand: { ...stats },
      speedup: 1,
      speedupCi: [1, 1],
      l2FlushBytes: 0,
      method: "",
      smClockMhz: { start: null, end: null },
      inputs: { sets: 2, refreshed: 0, generation: "host", reference: where, sampled: 0, wrong: 0 },
    };
    return result;
  };
  const five = lines("n", [
    ...GOOD.slice(0, 4),
    {
      ...END,
      calls: 5,
      commits: 5,
      refTimed: 3,
      refMedianMs: 1,
      candTimed: 3,
      candMedianMs: 1,
      speedup: 1,
    },
  ]);
  assert.equal(reconcileJudge(timed("process", 3), five, "n", 2).verdict, "correct");
  // So do the candidate's: its list shrunk in the worker after each pair was handed over (or the statistics patched
  // there) no longer matches what the judge recomputed from the times it was handed.
  const shrunk = timed("process", 3);
  if (shrunk.timing) {
    shrunk.timing.cand.medianMs = 0.05;
    shrunk.timing.speedup = 20;
  }
  assert.match(reconcileJudge(shrunk, five, "n", 2).reason ?? "", /candidate's times in the result/);
  const speedOnly = timed("process", 3);
  if (speedOnly.timing) speedOnly.timing.speedup = 20;
  assert.equal(reconcileJudge(speedOnly, five, "n", 2).verdict, "cheating");
  // The reference's times reach the result through the worker: slowed there, they no longer match the judge's.
  const slowed = timed("process", 3);
  if (slowed.timing) slowed.timing.ref.medianMs = 2;
  assert.match(reconcileJudge(slowed, five, "n", 2).reason ?? "", /reference's times in the result/);
  assert.equal(reconcileJudge(timed("process", 9), five, "n", 2).verdict, "cheating");
  assert.equal(reconcileJudge(timed("in_process", 3), five, "n", 2).verdict, "cheating");
  // The judge kept the reference in the worker itself (active dropout): no trials of its own are expected.
  const dropout = lines("n", [
    { event: "hello", pid: 7 },
    { event: "start", mode: "in_worker", why: "dropout" },
    { ...END, mode: "in_worker", trialsGiven: 0, trialsJudged: 0 },
  ]);
  assert.equal(reconcileJudge(timed("in_process", 3), dropout, "n", 2).verdict, "correct");
});

/** A stand-in worker: reads the request, then runs `body` (fd 3 is the judge's socket). */
function fakeWorker(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\nread -r request\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

const resultLine = (trials: number) => JSON.stringify({ type: "result", result: correct(trials) });

/** Shell that reads the nonce from fd 3 and writes the events as the judge would (nonce'd, numbered). */
function judgeScript(events: Event[]): string {
  const echo = events.map(
    (e, seq) =>
      `printf '%s\\n' "{\\"type\\":\\"judge\\",\\"nonce\\":\\"$nonce\\",\\"seq\\":${seq},${JSON.stringify(e).slice(1, -1).replaceAll('"', '\\"')}}" >&3`,
  );
  return ["read -r nonce <&3", ...echo, "exec 3>&-"].join("\n");
}

test("through runWorker: the worker gets fd 3 and judgeFd, the nonce arrives there, the record decides", async () => {
  const failedTrial = [...GOOD.slice(0, 3), { event: "trial", trial: 1, passed: false, message: "off" }, END];
  const python = fakeWorker("judged.sh", `${judgeScript(failedTrial)}\necho '${resultLine(2)}'`);
  const result = await runWorker(request, { python, timeoutMs: 10_000 });
  assert.equal(result.verdict, "cheating", result.reason ?? "");
  assert.equal(result.judge?.channel, "ok");
  assert.equal(result.judge?.pid, 7);
  const agrees = fakeWorker("agrees.sh", `${judgeScript(GOOD)}\necho '${resultLine(2)}'`);
  assert.equal((await runWorker(request, { python: agrees, timeoutMs: 10_000 })).verdict, "correct");
  // A line on the channel without the nonce the CLI wrote into it: forged.
  const forger = fakeWorker(
    "forger.sh",
    `echo '{"type":"judge","nonce":"guess","seq":0,"event":"hello","pid":1}' >&3\necho '${resultLine(2)}'`,
  );
  assert.equal((await runWorker(request, { python: forger, timeoutMs: 10_000 })).verdict, "cheating");
});

test("the worker's request names the judge's descriptor; --reference-process off gives none", async () => {
  const echoRequest = join(dir, "request.json");
  const python = fakeWorker("request.sh", `printf '%s' "$request" > ${echoRequest}\necho '${resultLine(2)}'`);
  await runWorker(request, { python, timeoutMs: 10_000 });
  const { readFileSync } = await import("node:fs");
  assert.equal(JSON.parse(readFileSync(echoRequest, "utf8")).options.judgeFd, 3);
  const off = { ...request, options: { ...request.options, referenceProcess: false } };
  const result = await runWorker(off, { python, timeoutMs: 10_000 });
  assert.equal(JSON.parse(readFileSync(echoRequest, "utf8")).options.judgeFd, undefined);
  assert.equal(result.judge, undefined);
});

test("a Ray outcome carries the judge's lines as the task read them; they decide the same way", () => {
  const task = { request } as unknown as EvalTask;
  const base = {
    type: "outcome" as const,
    id: "1",
    node: "n",
    stdout: [JSON.stringify({ type: "result", result: correct(2) })],
    stderrTail: [],
    timedOut: false,
    leftovers: false,
    signal: null,
    exitCode: 0,
    seconds: 1,
    rayError: null,
  };
  const failedTrial = [...GOOD.slice(0, 3), { event: "trial", trial: 1, passed: false, message: "off" }, END];
  const judged = outcomeResult(
    task,
    { ...base, judge: { nonce: "r", lines: lines("r", failedTrial) } },
    1000,
  );
  assert.equal(judged.verdict, "cheating");
  assert.equal(outcomeResult(task, base, 1000).verdict, "correct"); // an older driver: no judge channel
});
