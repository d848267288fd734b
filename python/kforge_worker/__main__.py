"""Entry point: ``python -m kforge_worker [--probe] [--request FILE] [--capture PROBLEM [--out FILE]]``.

Reads one EvalRequest (stdin, or --request FILE) and writes progress lines and exactly one result line
to the private channel; logs go to stderr. Exit status: 0 when a result was written, 2 when the
request itself is invalid (one line on stderr says why).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .channel import open_private_channel


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kforge_worker", description=__doc__.splitlines()[0])
    parser.add_argument("--probe", action="store_true", help="print a ProbeResult JSON line and exit")
    parser.add_argument("--request", metavar="FILE", help="read the EvalRequest from FILE instead of stdin")
    parser.add_argument("--capture", metavar="PROBLEM", help="capture PROBLEM's forward as a Graph JSON (graph.ts)")
    parser.add_argument("--out", metavar="FILE", help="with --capture: write the Graph to FILE instead of stdout")
    parser.add_argument("--capture-batch", metavar="LIST",
                        help="capture every problem path listed in LIST (one per line) into --out-dir: <i>.json "
                             "each, or <i>.err with the one-line reason (one process: torch is imported once)")
    parser.add_argument("--out-dir", metavar="DIR", help="with --capture-batch: where the graphs go")
    parser.add_argument("--bench-optimize", metavar="FILE",
                        help="time eager / torch.compile / ModelNew and each fused region (OptimizeBenchRequest in FILE)")
    parser.add_argument("--bench-optimize-serve", action="store_true",
                        help="serve --bench-optimize requests, one JSON line each on stdin, a result line each on stdout")
    parser.add_argument("--build", metavar="FILE", help="compile an emitted ModelNew's extension (with --cache-dir)")
    parser.add_argument("--cache-dir", metavar="DIR", help="with --build / --bench-optimize: kforge's cache folder")
    parser.add_argument("--source-stdin", action="store_true", help="with --build: build the code read from stdin")
    parser.add_argument("--since", metavar="MS", type=float,
                        help="with --build: when the suite started (ms since the epoch): see extension_cache.py")
    return parser.parse_args(argv)


def _capture(problem: str, out: str | None) -> int:
    """Graph JSON to --out or stdout, logs to stderr; 2 with one line on stderr for a bad problem file."""
    from .capture import ProblemError, capture_problem
    from .capture.local_sources import local_sources

    # The problem's own prints must not land in the JSON on stdout: fd 1 points at stderr meanwhile.
    sys.stdout.flush()
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        graph = capture_problem(problem)
        graph["sources"] = local_sources(problem)
    except ProblemError as exc:
        print(f"kforge_worker: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
        os.close(real_stdout)
    text = json.dumps(graph, allow_nan=False)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    return 0


def _capture_batch(list_path: str, out_dir: str) -> int:
    """Each listed problem captured in turn; a bad problem file is reported in its .err and the batch goes on.
    Graphs are written as they are made, so a batch cut short (a crash, a hang killed by the caller) leaves
    the finished ones for the caller, which captures the rest one per process."""
    from .capture import ProblemError, capture_problem
    from .capture.local_sources import forget_local_modules, local_sources

    with open(list_path, encoding="utf-8") as f:
        paths = [line.rstrip("\n") for line in f if line.strip()]
    os.makedirs(out_dir, exist_ok=True)
    sys.stdout.flush()
    os.dup2(2, 1)  # problems' prints go to stderr; results go to files only
    before_problems = set(sys.modules)
    for index, path in enumerate(paths):
        target = os.path.join(out_dir, f"{index}.json")
        forget_local_modules(before_problems)
        try:
            graph = capture_problem(path)
            graph["sources"] = local_sources(path)
        except ProblemError as exc:
            with open(os.path.join(out_dir, f"{index}.err"), "w", encoding="utf-8") as f:
                f.write(f"{exc}\n")
            continue
        with open(target + ".tmp", "w", encoding="utf-8") as f:
            f.write(json.dumps(graph, allow_nan=False) + "\n")
        os.replace(target + ".tmp", target)
    return 0


def dump_stacks_on_request() -> None:
    """SIGUSR1 writes every thread's Python stack to stderr, from the signal handler (faulthandler: also while native
    code holds the GIL). The CLI sends it before it kills a worker past its time limit and reports where the main
    thread was (src/worker/stack-dump.ts): whose code a timeout was spent in."""
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def main(argv: list[str]) -> int:
    dump_stacks_on_request()
    args = _parse_args(argv)
    if args.capture:
        return _capture(args.capture, args.out)
    if args.capture_batch:
        if not args.out_dir:
            print("kforge_worker: --capture-batch needs --out-dir", file=sys.stderr)
            return 2
        return _capture_batch(args.capture_batch, args.out_dir)
    if args.build:
        from .prebuild import main as build_main

        return build_main(args.build, args.cache_dir or os.path.expanduser("~/.cache/kforge"), args.source_stdin,
                          args.since)
    if args.bench_optimize:
        from .optimize_bench import main as bench_main

        return bench_main(args.bench_optimize)
    if args.bench_optimize_serve:
        from .optimize_bench import serve

        return serve()
    channel = open_private_channel()
    if args.probe:
        from .probe import probe

        channel.send(probe())
        return 0

    from .request import RequestError, parse_request

    try:
        # From stdin the request is its first line (a worker started ahead reads a "go" line after it later);
        # a request spread over several lines is read to the end.
        text = open(args.request, encoding="utf-8").read() if args.request else sys.stdin.readline()
        try:
            data = json.loads(text)
        except ValueError:
            if args.request:
                raise
            text += sys.stdin.read()
            data = json.loads(text)
        request = parse_request(data)
        nonce = data.get("nonce")
        if nonce is not None and not isinstance(nonce, str):
            raise RequestError("request.nonce: expected a string")
    except (OSError, ValueError, RequestError) as exc:
        print(f"kforge_worker: invalid request: {exc}", file=sys.stderr, flush=True)
        return 2
    channel.nonce = nonce
    # Keep the nonce only in the channel: the raw request is dropped before any candidate code runs.
    del data, text

    from .pipeline import evaluate, initial_result

    result = None
    keep: list = []  # the run's objects, alive until the process exits (evaluate's `keep`)
    try:
        result = evaluate(request, channel, keep=keep)
    except BaseException as exc:  # noqa: BLE001 — the result line must go out whatever happened
        result = initial_result(request)
        result["reason"] = f"kforge_worker internal error: {type(exc).__name__}: {exc}"
    finally:
        final = result if result is not None else initial_result(request)
        # Nothing between the verdict and this line may import, open a file or collect garbage: each is a
        # place where code the candidate left behind (an import finder, an audit hook, a finaliser) runs and
        # can rewrite the result. The schema diagnostic opens files, so it comes after. A result already on
        # the channel was not the worker's: its own goes out too, and the CLI calls two results cheating.
        if channel.result_sent:
            channel.send({"type": "result", "result": final})
        else:
            channel.result(final)
        _warn_if_off_schema(final)
    return 0


def _warn_if_off_schema(result: dict) -> None:
    """Logs (never blocks) a result that the CLI's zod schema would reject, naming the bad fields."""
    try:
        from .channel import json_safe
        from .schema_check import load_schema, validate

        schema = load_schema("EvalResult")
        problems = validate(json_safe(result), schema) if schema is not None else []
    except Exception as exc:  # noqa: BLE001 — a diagnostic must not cost the result
        problems = [f"schema check itself failed: {exc}"]
    if problems:
        print("kforge_worker: result does not match schemas/EvalResult.json: " + "; ".join(problems[:5]), file=sys.stderr)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # Skip interpreter teardown: a candidate's non-daemon threads, atexit hooks or a poisoned CUDA
    # context must not hang or crash the process after its result is out.
    os._exit(code)
