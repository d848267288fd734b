// The suite scheduler on its own: placement, one task per slot at a time, slot failures requeued and
// charged to the right task, prepares overlapping runs within their bound.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type Slot, SlotError, schedule } from "../src/suite/scheduler.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const slots = (n: number): Slot[] => Array.from({ length: n }, (_, i) => ({ id: `gpu${i}`, env: {} }));
const giveUp = (task: number, why: string) => `gave up ${task}: ${why}`;

test("every task runs exactly once, results come back in task order, every slot is used", async () => {
  const ranOn = new Map<number, string[]>();
  const busy = new Set<string>();
  const results = await schedule([0, 1, 2, 3, 4, 5, 6, 7, 8], {
    slots: slots(3),
    run: async (task, slot) => {
      assert.ok(!busy.has(slot.id), `${slot.id} was given a second task while busy`);
      busy.add(slot.id);
      ranOn.set(task, [...(ranOn.get(task) ?? []), slot.id]);
      await sleep(5 + (task % 3) * 7);
      busy.delete(slot.id);
      return `r${task}`;
    },
    giveUp,
  });
  assert.deepEqual(results, ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8"]);
  for (const [task, where] of ranOn) assert.equal(where.length, 1, `task ${task} ran on ${where}`);
  assert.equal(new Set([...ranOn.values()].flat()).size, 3);
});

test("a slot failure requeues the task on another slot; the slot is retired after repeated failures", async () => {
  const charged: [number, string, string | null][] = [];
  const retired: string[] = [];
  const results = await schedule([0, 1, 2, 3, 4, 5], {
    slots: slots(2),
    run: async (task, slot) => {
      await sleep(5);
      if (slot.id === "gpu1") throw new SlotError("GPU lost");
      return `ok ${task} on ${slot.id}`;
    },
    giveUp,
    onResult: (task, result, slot) => charged.push([task, result, slot?.id ?? null]),
    onSlotRetired: (slot) => retired.push(slot.id),
  });
  assert.deepEqual(retired, ["gpu1"]);
  assert.deepEqual(
    results,
    [0, 1, 2, 3, 4, 5].map((t) => `ok ${t} on gpu0`),
  );
  assert.equal(charged.length, 6, "one result per task, none charged twice");
  assert.ok(charged.every(([, , slot]) => slot === "gpu0"));
});

test("a task every slot fails with is charged through giveUp with each slot's reason; the others run", async () => {
  const results = await schedule([0, 1, 2], {
    slots: slots(2),
    slotFailureLimit: 5,
    run: async (task, slot) => {
      if (task === 1) throw new SlotError(`no memory on ${slot.id}`);
      return `ok ${task}`;
    },
    giveUp,
  });
  assert.equal(results[0], "ok 0");
  assert.equal(results[2], "ok 2");
  assert.match(results[1] ?? "", /^gave up 1: /);
  assert.match(results[1] ?? "", /gpu0: no memory on gpu0/);
  assert.match(results[1] ?? "", /gpu1: no memory on gpu1/);
});

test("a bug in run is charged to that task only, never requeued", async () => {
  let attempts = 0;
  const results = await schedule([0, 1, 2], {
    slots: slots(2),
    run: async (task) => {
      if (task === 0) {
        attempts += 1;
        throw new Error("parse failure");
      }
      return `ok ${task}`;
    },
    giveUp,
  });
  assert.equal(attempts, 1);
  assert.deepEqual(results, ["gave up 0: parse failure", "ok 1", "ok 2"]);
});

test("when the last slot is retired, the tasks still queued are charged, not lost", async () => {
  const results = await schedule([0, 1, 2, 3], {
    slots: slots(1),
    run: async () => {
      throw new SlotError("driver gone");
    },
    giveUp,
  });
  assert.equal(results.length, 4);
  for (const r of results) assert.match(r, /^gave up \d: /);
});

test("prepares run ahead of the slots, within their bound, and each run waits for its own prepare", async () => {
  const events: string[] = [];
  let preparing = 0;
  let maxPreparing = 0;
  const prepared = new Set<number>();
  await schedule([0, 1, 2, 3, 4, 5], {
    slots: slots(1),
    prepareConcurrency: 2,
    prepare: async (task) => {
      preparing += 1;
      maxPreparing = Math.max(maxPreparing, preparing);
      events.push(`prepare ${task}`);
      await sleep(task === 0 ? 5 : 20);
      prepared.add(task);
      preparing -= 1;
      if (task === 3) throw new Error("build failed"); // the run still happens
    },
    run: async (task) => {
      assert.ok(prepared.has(task), `task ${task} ran before its prepare finished`);
      events.push(`run ${task}`);
      await sleep(30);
      events.push(`end ${task}`);
      return task;
    },
    giveUp: () => -1,
  });
  assert.equal(maxPreparing, 2);
  // Compile of the next candidates overlaps the current one's GPU work.
  assert.ok(events.indexOf("prepare 2") < events.indexOf("end 0"), events.join(", "));
  assert.ok(events.includes("run 3"));
});

/** A stand-in for a worker started ahead: records what happened to it. */
class FakeAhead {
  cancelled = false;
  constructor(
    readonly task: number,
    readonly slot: string,
  ) {}
  cancel() {
    this.cancelled = true;
  }
}

/** startAhead that keeps each handle it makes in `started`. */
const recordAhead =
  (started: FakeAhead[]) =>
  (task: number, slot: Slot): FakeAhead => {
    const ahead = new FakeAhead(task, slot.id);
    started.push(ahead);
    return ahead;
  };

test("each slot starts its next task ahead; that task's turn gets the same handle, and every task runs once", async () => {
  const started: FakeAhead[] = [];
  const runs: { task: number; slot: string; ahead: FakeAhead | undefined; next: FakeAhead[] }[] = [];
  const results = await schedule<number, number, FakeAhead>([0, 1, 2, 3, 4, 5, 6], {
    slots: slots(2),
    startAhead: recordAhead(started),
    run: async (task, slot, turn) => {
      runs.push({ task, slot: slot.id, ahead: turn.ahead, next: turn.next });
      await sleep(10 + (task % 2) * 5);
      return task;
    },
    giveUp: () => -1,
  });
  assert.deepEqual(results, [0, 1, 2, 3, 4, 5, 6]);
  assert.deepEqual(runs.map((r) => r.task).sort(), [0, 1, 2, 3, 4, 5, 6]);
  for (const run of runs) {
    // A task started ahead runs on the slot that started it, with its own handle.
    if (run.ahead) assert.deepEqual([run.ahead.task, run.ahead.slot], [run.task, run.slot]);
    for (const next of run.next) assert.equal(next.slot, run.slot);
    assert.ok(run.next.length <= 1, "one task started ahead per slot by default");
  }
  // The first task of each slot starts cold; after that the slots' next tasks were started ahead.
  assert.ok(runs.filter((r) => r.ahead).length >= 4, JSON.stringify(runs.map((r) => [r.task, !!r.ahead])));
  // Nothing started ahead was thrown away: no slot idled while another held work.
  assert.ok(started.every((a) => !a.cancelled));
});

test("with aheadDepth 2 a slot keeps its next two tasks started ahead, run in the order they were started", async () => {
  const started: FakeAhead[] = [];
  const runs: { task: number; ahead: FakeAhead | undefined; next: number[] }[] = [];
  const results = await schedule<number, number, FakeAhead>([0, 1, 2, 3, 4, 5], {
    slots: slots(1),
    aheadDepth: 2,
    startAhead: recordAhead(started),
    run: async (task, _slot, turn) => {
      runs.push({ task, ahead: turn.ahead, next: turn.next.map((a) => a.task) });
      await sleep(5);
      return task;
    },
    giveUp: () => -1,
  });
  assert.deepEqual(results, [0, 1, 2, 3, 4, 5]);
  assert.deepEqual(
    runs.map((r) => [r.task, r.next]),
    [
      [0, [1, 2]],
      [1, [2, 3]],
      [2, [3, 4]],
      [3, [4, 5]],
      [4, [5]],
      [5, []],
    ],
  );
  assert.ok(runs.slice(1).every((r) => r.ahead?.task === r.task && !r.ahead.cancelled));
  assert.equal(started.length, 5);
});

test("an idle slot takes another slot's task started ahead (cancelled there) rather than wait behind it", async () => {
  const started: FakeAhead[] = [];
  const ranOn = new Map<number, string>();
  await schedule<number, number, FakeAhead>([0, 1, 2], {
    slots: slots(2),
    startAhead: recordAhead(started),
    run: async (task, slot, turn) => {
      ranOn.set(task, slot.id);
      if (turn.ahead) assert.ok(!turn.ahead.cancelled);
      await sleep(task === 0 ? 120 : 10); // gpu0's first task is long; gpu1 runs dry
      return task;
    },
    giveUp: () => -1,
  });
  assert.equal(ranOn.size, 3);
  const reservedBehindTheLongTask = started.find((a) => a.slot === "gpu0");
  assert.ok(reservedBehindTheLongTask, "gpu0 started its next task ahead");
  assert.ok(reservedBehindTheLongTask.cancelled, "gpu1 took it over instead of idling");
  assert.equal(ranOn.get(reservedBehindTheLongTask.task), "gpu1");
});

test("a slot that fails gives its task started ahead back: it is cancelled and runs on another slot", async () => {
  const started: FakeAhead[] = [];
  const ranOn = new Map<number, string>();
  const results = await schedule<number, string, FakeAhead>([0, 1, 2, 3], {
    slots: slots(2),
    slotFailureLimit: 1,
    startAhead: recordAhead(started),
    run: async (task, slot) => {
      await sleep(5);
      if (slot.id === "gpu1") throw new SlotError("GPU lost");
      ranOn.set(task, slot.id);
      return `ok ${task}`;
    },
    giveUp,
  });
  assert.deepEqual(results, ["ok 0", "ok 1", "ok 2", "ok 3"]);
  assert.ok([...ranOn.values()].every((s) => s === "gpu0"));
  const onLostGpu = started.filter((a) => a.slot === "gpu1");
  assert.ok(onLostGpu.length > 0 && onLostGpu.every((a) => a.cancelled));
});
