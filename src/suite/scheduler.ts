// Keeps a set of slots (one per GPU, or one per Ray task stream) busy with a queue of tasks. One task runs on
// one slot at a time, so a candidate's reference and its own timing always share one GPU. A CPU `prepare`
// stage (extension builds) runs ahead of the slots in a bounded pool, so compiles overlap GPU work.

/** Thrown by `run` when the slot failed, not the task (the GPU is gone, the worker could not start): the
 * task is requeued for another slot instead of being charged. */
export class SlotError extends Error {}

export interface Slot {
  /** Shown in progress lines: "gpu0", "gpu1", "local". */
  id: string;
  /** Environment of every worker run on this slot (CUDA_VISIBLE_DEVICES pins one GPU). */
  env: Record<string, string>;
}

/** A task's run started ahead of its turn on a slot (a worker that imports torch and sets up the device
 * while the slot's current task runs), handed to `run` when the turn comes. */
export interface Ahead {
  /** Ends it without running the task (the turn went elsewhere: another slot took it, or this one failed). */
  cancel(): void;
}

/** What `run` gets besides the task: its own ahead start, and the slot's next tasks' (running beside it,
 * the first to run first). */
export interface Turn<A extends Ahead> {
  ahead?: A;
  next: A[];
}

export interface ScheduleOptions<T, R, A extends Ahead = Ahead> {
  slots: Slot[];
  run: (task: T, slot: Slot, turn: Turn<A>) => Promise<R>;
  /** When given, each slot keeps its next tasks started ahead while the current one runs. */
  startAhead?: (task: T, slot: Slot) => A;
  /** How many tasks each slot keeps started ahead (default 1): more when one start-up outlasts a task. */
  aheadDepth?: number;
  /** Work that needs no slot and must finish before the task runs (compiles); its failure is not the
   * task's: the run still happens and reports its own verdict. */
  prepare?: (task: T) => Promise<void>;
  /** How many prepares at once (CPU cores spent on compiles while the slots run). */
  prepareConcurrency?: number;
  /** Slots a task may try before it is charged with giveUp (default 2). */
  maxAttempts?: number;
  /** SlotErrors in a row after which a slot is retired (default 2). */
  slotFailureLimit?: number;
  /** The result charged to a task no slot could run. */
  giveUp: (task: T, why: string) => R;
  onStart?: (task: T, slot: Slot) => void;
  /** Called once per task as soon as its result exists (journal writes, progress). */
  onResult?: (task: T, result: R, slot: Slot | null) => void;
  onSlotRetired?: (slot: Slot, why: string) => void;
}

interface Entry<T> {
  task: T;
  index: number;
  failedOn: Set<string>;
  errors: string[];
  prepared: Promise<void>;
}

/** Runs every task once; results come back in task order (onResult sees them in finishing order). */
export async function schedule<T, R, A extends Ahead = Ahead>(
  tasks: T[],
  options: ScheduleOptions<T, R, A>,
): Promise<R[]> {
  if (options.slots.length === 0) throw new Error("schedule: no slots to run on");
  const maxAttempts = options.maxAttempts ?? 2;
  const slotFailureLimit = options.slotFailureLimit ?? 2;
  const results = new Array<R>(tasks.length);
  const live = new Set(options.slots.map((s) => s.id));
  let inFlight = 0;

  let wake: () => void = () => {};
  let changed = new Promise<void>((r) => {
    wake = r;
  });
  const notify = () => {
    const w = wake;
    changed = new Promise<void>((r) => {
      wake = r;
    });
    w();
  };

  const settle = (entry: Entry<T>, result: R, slot: Slot | null) => {
    results[entry.index] = result;
    options.onResult?.(entry.task, result, slot);
  };

  const entries: Entry<T>[] = tasks.map((task, index) => ({
    task,
    index,
    failedOn: new Set(),
    errors: [],
    prepared: Promise.resolve(),
  }));
  startPrepares(entries, options.prepare, options.prepareConcurrency ?? 1);
  const pending = [...entries];

  /** Charges tasks that no live slot may still run (each live slot already failed them, or none is left). */
  const abandonStranded = () => {
    for (let i = pending.length - 1; i >= 0; i--) {
      const entry = pending[i] as Entry<T>;
      const runnable = [...live].some((id) => !entry.failedOn.has(id));
      if (runnable && entry.errors.length < maxAttempts) continue;
      pending.splice(i, 1);
      const why = entry.errors.length ? entry.errors.join("; ") : "no slot left to run it";
      settle(entry, options.giveUp(entry.task, why), null);
    }
  };

  // Each slot's next tasks, started ahead (options.startAhead), in the order they will run; out of `pending`
  // but counted in inFlight.
  const aheadDepth = Math.max(1, options.aheadDepth ?? 1);
  const reserved = new Map<string, { entry: Entry<T>; ahead: A }[]>();
  const takeFromPending = (slot: Slot): Entry<T> | null => {
    const at = pending.findIndex((e) => !e.failedOn.has(slot.id));
    if (at < 0) return null;
    const [entry] = pending.splice(at, 1) as [Entry<T>];
    inFlight += 1;
    return entry;
  };
  /** The slot's own first reservation, else the queue's next task, else the last of another slot's reservations
   * (it would wait behind that slot's current task while this one idles: a cold start here is sooner). */
  const take = (slot: Slot): { entry: Entry<T>; ahead?: A } | null => {
    const mine = reserved.get(slot.id)?.shift();
    if (mine) return mine;
    const entry = takeFromPending(slot);
    if (entry) return { entry };
    for (const others of reserved.values()) {
      for (let at = others.length - 1; at >= 0; at--) {
        const [other] = others.slice(at, at + 1) as [{ entry: Entry<T>; ahead: A }];
        if (other.entry.failedOn.has(slot.id)) continue;
        others.splice(at, 1);
        other.ahead.cancel();
        return { entry: other.entry };
      }
    }
    return null;
  };
  /** Tops the slot's reservations up to aheadDepth from the queue; returns them, the first to run first. */
  const reserveNext = (slot: Slot): A[] => {
    if (!options.startAhead) return [];
    const mine = reserved.get(slot.id) ?? [];
    reserved.set(slot.id, mine);
    while (mine.length < aheadDepth) {
      const entry = takeFromPending(slot);
      if (!entry) break;
      mine.push({ entry, ahead: options.startAhead(entry.task, slot) });
    }
    return mine.map((r) => r.ahead);
  };
  /** A slot that failed or stops gives its reservations back to the queue, in their order. */
  const release = (slot: Slot) => {
    const mine = reserved.get(slot.id) ?? [];
    reserved.delete(slot.id);
    for (const r of mine) r.ahead.cancel();
    pending.unshift(...mine.map((r) => r.entry));
    inFlight -= mine.length;
  };

  const slotLoop = async (slot: Slot) => {
    let failuresInARow = 0;
    while (live.has(slot.id)) {
      const turn = take(slot);
      if (turn === null) {
        // Nothing for this slot now; a task running elsewhere may still come back (its slot failed).
        if (inFlight === 0) return;
        await changed;
        continue;
      }
      const { entry } = turn;
      try {
        await entry.prepared;
        options.onStart?.(entry.task, slot);
        const next = reserveNext(slot);
        const result = await options.run(entry.task, slot, { ahead: turn.ahead, next });
        failuresInARow = 0;
        settle(entry, result, slot);
      } catch (error) {
        const why = error instanceof Error ? error.message : String(error);
        if (!(error instanceof SlotError)) {
          // A bug in `run` itself: charged to this task, never silently dropped.
          settle(entry, options.giveUp(entry.task, why), slot);
        } else {
          release(slot);
          entry.failedOn.add(slot.id);
          entry.errors.push(`${slot.id}: ${why}`);
          pending.unshift(entry);
          failuresInARow += 1;
          if (failuresInARow >= slotFailureLimit) {
            live.delete(slot.id);
            options.onSlotRetired?.(slot, why);
          }
        }
      } finally {
        inFlight -= 1;
        abandonStranded();
        notify();
      }
    }
  };

  await Promise.all(
    options.slots.map(async (slot) => {
      await slotLoop(slot);
      release(slot); // retired with a task reserved: it goes back to the others
      notify();
    }),
  );
  abandonStranded();
  return results;
}

/** Starts the prepares in task order, at most `concurrency` at once; each entry's promise never rejects. */
function startPrepares<T>(
  entries: Entry<T>[],
  prepare: ((task: T) => Promise<void>) | undefined,
  concurrency: number,
): void {
  if (!prepare || concurrency < 1) return;
  // A failed prepare only means the run compiles for itself (and reports any compile error).
  const done = runAhead(entries, concurrency, (entry) => prepare(entry.task));
  for (const [i, entry] of entries.entries()) entry.prepared = done[i] as Promise<void>;
}

/** Runs `work` over `items` in order, at most `concurrency` at once, and returns one promise per item that
 * settles when that item's work has finished; it never rejects (a failure only ends that item's work). */
export function runAhead<T>(
  items: T[],
  concurrency: number,
  work: (item: T) => Promise<unknown>,
): Promise<void>[] {
  const gates = items.map(() => {
    let open: () => void = () => {};
    const gate = new Promise<void>((r) => {
      open = r;
    });
    return { gate, open };
  });
  let next = 0;
  const runner = async () => {
    while (next < items.length) {
      const i = next++;
      try {
        await work(items[i] as T);
      } catch {
        // the item's own business: its promise settles all the same
      } finally {
        gates[i]?.open();
      }
    }
  };
  for (let k = 0; k < Math.min(Math.max(1, concurrency), items.length); k++) void runner();
  return gates.map((g) => g.gate);
}
