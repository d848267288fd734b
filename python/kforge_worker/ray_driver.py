"""``python -m kforge_worker.ray_driver --address auto|local|ADDRESS --device cuda|cpu``

The CLI's bridge to a Ray cluster (``kforge eval --ray``). Reads RayTask JSON lines on stdin (until EOF),
submits each as a Ray task asking for one GPU (one CPU with ``--device cpu``) that runs ray_task.run_isolated,
and writes RayDriverMessage lines to stdout (src/suite/ray-protocol.ts): ``ready`` with the cluster's
resources, then one ``outcome`` per task in the order they finish, or one ``fatal`` line and exit status 2.
Ray is needed only here (``pip install ray``); the rest of kforge never imports it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from .channel import Channel, open_private_channel

_channel: Channel | None = None


def _emit(message: dict[str, Any]) -> None:
    assert _channel is not None
    _channel.send(message)


def _outcome(task_id: str, fields: dict[str, Any] | None, ray_error: str | None) -> dict[str, Any]:
    base = {"stdout": [], "stderrTail": [], "timedOut": False, "leftovers": False, "signal": None,
            "exitCode": None, "seconds": 0.0, "node": "?", "judge": None}
    return {"type": "outcome", "id": task_id, **base, **(fields or {}), "rayError": ray_error}


def _connect(ray: Any, address: str) -> None:
    package = os.path.dirname(os.path.abspath(__file__))
    # The worker package travels to every node with the job, so a cluster needs only Python, torch and Ray.
    runtime_env = {"py_modules": [package]}
    common = {"runtime_env": runtime_env, "log_to_driver": False, "logging_level": "ERROR"}
    if address == "local":
        ray.init(include_dashboard=False, **common)
    else:
        ray.init(address=address, **common)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m kforge_worker.ray_driver", description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="auto, local, or a Ray cluster address")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)
    tasks = [json.loads(line) for line in sys.stdin if line.strip()]
    # Ray's processes inherit fd 1 and print there: protocol lines go to a private dup, fd 1 to stderr.
    global _channel
    _channel = open_private_channel()
    try:
        import ray
    except ImportError as exc:
        _emit({"type": "fatal", "message": f"Ray is not installed in {sys.executable} ({exc}); pip install ray"})
        return 2
    try:
        _connect(ray, args.address)
    except Exception as exc:  # noqa: BLE001 — any connection failure is one line for the CLI
        _emit({"type": "fatal", "message": f"cannot connect to Ray at {args.address}: {exc}".splitlines()[0]})
        return 2
    resources = {k: float(v) for k, v in ray.cluster_resources().items()}
    _emit({"type": "ready", "resources": resources})
    if args.device == "cuda" and resources.get("GPU", 0) < 1:
        _emit({"type": "fatal", "message": "the Ray cluster has no GPU resources (use --device cpu for CPU problems)"})
        return 2

    from . import ray_task

    # One evaluation per GPU; a task killed with its node is tried once more elsewhere, a task whose own
    # code raised is not (that is a result, not a lost machine).
    demand = {"num_gpus": 1, "num_cpus": 1} if args.device == "cuda" else {"num_cpus": 1}
    remote = ray.remote(ray_task.run_isolated).options(max_retries=1, retry_exceptions=False, **demand)
    pending = {remote.remote(task): str(task["id"]) for task in tasks}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            task_id = pending.pop(ref)
            try:
                _emit(_outcome(task_id, ray.get(ref), None))
            except Exception as exc:  # noqa: BLE001 — Ray's failure of this task, charged to it alone
                _emit(_outcome(task_id, None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"))
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
