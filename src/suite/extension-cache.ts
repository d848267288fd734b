// What a suite knows of the extension cache its candidates share. The cache is keyed on a candidate's code and
// shared by every candidate of the suite and every later run, so one candidate's code can rewrite another's built
// library (adv_suite_extension_poison, bench/verify/NOTES.md). The ledger holds, in this process only, what each
// build of the suite left (sha256 per file, from the prebuild's or the worker's own report) and when the suite
// started; each worker checks its candidate's folder against them before the import
// (python/kforge_worker/extension_cache.py) and builds afresh where they do not hold.
import { createHash } from "node:crypto";
import type { ExtensionCache, ExtensionLibraries } from "../worker/protocol.ts";

function key(source: string): string {
  return createHash("sha256").update(source, "utf8").digest("hex");
}

export class ExtensionLedger {
  /** Taken before any candidate's code runs (the suite's first prebuild or worker starts after it). */
  readonly since = Date.now();
  private readonly libraries = new Map<string, ExtensionLibraries>();
  private readonly prebuilds = new Map<string, Promise<void>>();

  /** For the worker of a candidate with this code; undefined without the code's text (the cache is used as found). */
  expectation(source: string | undefined): ExtensionCache | undefined {
    if (source === undefined) return undefined;
    return { since: this.since, libraries: this.libraries.get(key(source)) ?? null };
  }

  /** What a build of this code left (a prebuild's or a worker's report). The report comes from a process that ran
   * this code alone, and is filed under the code the CLI read: it speaks for no other code's folder. */
  record(source: string | undefined, libraries: ExtensionLibraries | null | undefined): void {
    if (source !== undefined && libraries) this.libraries.set(key(source), libraries);
  }

  /** One prebuild per code: a later candidate with the same text waits for the first one's (a second build of the
   * same folder meanwhile would be a change no build recorded). */
  prebuildOnce(source: string, build: () => Promise<void>): Promise<void> {
    const k = key(source);
    let running = this.prebuilds.get(k);
    if (running === undefined) {
      running = build();
      this.prebuilds.set(k, running);
    }
    return running;
  }
}
