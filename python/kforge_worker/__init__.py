"""kforge's GPU-side worker: evaluates one candidate ModelNew against a KernelBench-format problem.

Run as ``python -m kforge_worker`` (one EvalRequest JSON on stdin, WorkerMessages on stdout) or
``python -m kforge_worker --probe``. The JSON contract lives in src/worker/protocol.ts.
"""

PROTOCOL_VERSION = 1
