"""Entry point: ``python -m kforge_worker [--probe] [--request FILE]``.

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
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = _parse_args(argv)
    channel = open_private_channel()
    if args.probe:
        from .probe import probe

        channel.send(probe())
        return 0

    from .request import RequestError, parse_request

    try:
        text = open(args.request, encoding="utf-8").read() if args.request else sys.stdin.read()
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
    try:
        result = evaluate(request, channel)
    except BaseException as exc:  # noqa: BLE001 — the result line must go out whatever happened
        result = initial_result(request)
        result["reason"] = f"kforge_worker internal error: {type(exc).__name__}: {exc}"
    finally:
        if not channel.result_sent:
            final = result if result is not None else initial_result(request)
            _warn_if_off_schema(final)
            channel.result(final)
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
