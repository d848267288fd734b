// Reading a faulthandler dump back: the main thread's innermost frames, and whether the candidate's code was on its stack.
import assert from "node:assert/strict";
import { test } from "node:test";
import { whereItWas } from "../src/worker/stack-dump.ts";

const dump = (candidateFrame: boolean) => [
  "Thread 0x00007f0000000002 (most recent call first):",
  '  File "/usr/lib/python3.12/threading.py", line 359 in wait',
  '  File "/usr/lib/python3.12/threading.py", line 1030 in _bootstrap',
  "",
  "Current thread 0x00007f0000000001 (most recent call first):",
  '  File "/opt/kf/python/kforge_worker/checks/output_checks.py", line 312 in check_tolerance',
  '  File "/opt/kf/python/kforge_worker/checks/verifier.py", line 231 in _run_groups',
  ...(candidateFrame ? ['  File "/work/answers/model_new.py", line 20 in forward'] : []),
  '  File "/opt/kf/python/kforge_worker/pipeline.py", line 1018 in verify',
  '  File "/opt/kf/python/kforge_worker/__main__.py", line 189 in <module>',
];

test("a timeout in kforge's own checks is named as such, with the main thread's innermost frames", () => {
  assert.equal(
    whereItWas(dump(false), "/work/answers/model_new.py"),
    "it was in kforge's or a library's code, not the candidate's: kforge_worker/checks/output_checks.py:312 in " +
      "check_tolerance <- kforge_worker/checks/verifier.py:231 in _run_groups <- kforge_worker/pipeline.py:1018 in verify",
  );
});

test("a timeout with the candidate's code on the main thread's stack is the candidate's", () => {
  assert.match(
    whereItWas(dump(true), "/work/answers/model_new.py") ?? "",
    /^it was in the candidate's code: /,
  );
});

test("no dump, no claim", () => {
  assert.equal(whereItWas(["Traceback (most recent call last):", "oops"], "/x.py"), null);
});
