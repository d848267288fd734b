"""disguised_run: the candidate once more where no evaluator is to be seen.

Every other check runs the candidate inside the worker, where the evaluator's presence is plain: ``kforge_worker`` in
``sys.modules``, ``KFORGE_*`` keys in the environment, audit hooks, the harness's frames on the stack. A candidate that
is right only while it sees them (red team round 17, adv_harness_presence_wrong: the ReLU left out unless a loaded
module's name or an environment key starts like the evaluator's) passes every check and is wrong in every deployment.

So the candidate is run once more as a user's script would run it: a fresh interpreter started on a plain ``main.py``
(disguised_main.py, which imports nothing of kforge's) in a scratch folder of a neutral name, with the environment
the worker has less kforge's own keys and its package path, the compiler caches in the scratch folder and the built
extensions reached through a link there. It builds ModelNew from the same seed with the reference's weights, calls it
once on inputs the worker drew, and saves the outputs; the worker compares them with its reference on the same
inputs. Inputs and outputs cross as raw bytes in files of their own (a pickled, checksummed copy of a 6 GB input took
seconds each way); the outputs' shapes and dtypes as JSON, so nothing the candidate's process wrote is unpickled. An answer the trials' rule rejects there is a candidate that behaves differently when it is not watched:
cheating. A run that cannot finish there (a crash, the time limit) is said, not charged: an environment difference
may be the cause. What stays visible to a candidate is that some process started it — the parent's command line,
the links' targets — which no plain script can hide.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

import torch

from .. import compiler_cache
from . import budget
from .disguised_main import raw_size, read_raw, write_raw
from .context import clone_inputs, compare, has_dropout, preserved_state, run, tensors, VerifyContext
from .judge import judged_compare
from .result import CheckResult, failed, passed, warned

NAME = "disguised_run"
LIMIT_S = 300.0
_MAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "disguised_main.py")
_KFORGE_PYTHON = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class Disguise:
    """What a plain script needs to build the pair's ModelNew the way the worker built it."""

    problem_path: str
    candidate_path: str
    candidate_source: str
    build_seed: int
    init_inputs: list[Any]
    dtype: torch.dtype | None
    allow_tf32: bool


def prepare() -> None:
    """Before the harness's snapshot: pickling a tensor the first time caches ``__slotnames__`` on torch's classes,
    which the snapshot would otherwise see appear when this check saves the inputs."""
    import io

    torch.save([torch.zeros(1), torch.nn.Parameter(torch.zeros(1)), torch.Size([1])], io.BytesIO())


def plain_environment(scratch: str) -> dict[str, str]:
    """The worker's environment less what kforge put there: keys that name it (its own, and npm's for a CLI started by
    npm or npx: npm_package_bin_kforge), npm's run-script keys, its package on PYTHONPATH, its private compiler folders
    (fresh ones in the scratch folder), its extension folder (a link in the scratch folder to it)."""
    env = {k: v for k, v in os.environ.items()
           if "kforge" not in k.lower() and not k.lower().startswith("npm_") and k != "INIT_CWD"}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
             if p and os.path.realpath(p) != os.path.realpath(_KFORGE_PYTHON)]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    caches = os.path.join(scratch, "cache")
    os.makedirs(os.path.join(caches, "torch_kernels"))
    env.update(compiler_cache.environment(caches))
    built = os.environ.get("TORCH_EXTENSIONS_DIR")
    if built:
        link = os.path.join(scratch, "torch_extensions")
        os.symlink(built, link)
        env["TORCH_EXTENSIONS_DIR"] = link
    return env


def _raw_input(folder: str, k: int, x: Any) -> Any:
    """A contiguous tensor input as its raw bytes in a file of its own (read back by disguised_main.read_raw); any
    other input as it is, pickled in data.pt (its strides kept)."""
    if not isinstance(x, torch.Tensor) or not x.is_contiguous() or x.is_sparse or x.is_quantized:
        return x.detach().cpu() if isinstance(x, torch.Tensor) else x
    return {"raw": write_raw(folder, f"in_{k}.bin", x)}


def _read_outputs(folder: str, device: torch.device) -> tuple[list[torch.Tensor] | None, str]:
    """The outputs the plain run wrote: out.json's shapes and dtypes, each output's bytes in its own file. Nothing is
    unpickled: the candidate's process wrote these."""
    try:
        with open(os.path.join(folder, "out.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        if not isinstance(manifest, list):
            return None, "its outputs are not a list of tensors"
        outs = []
        for item in manifest:
            item = {"file": str(item["file"]), "shape": [int(d) for d in item["shape"]], "dtype": str(item["dtype"])}
            if (not isinstance(getattr(torch, item["dtype"], None), torch.dtype) or any(d < 0 for d in item["shape"])
                    or "/" in item["file"]):
                return None, "its outputs' description is not one of tensors"
            size, held = raw_size(item), os.path.getsize(os.path.join(folder, item["file"]))
            if held != size:
                return None, f"output {len(outs)}'s file holds {held} bytes, not the {size} its shape needs"
            outs.append(read_raw(folder, item).to(device))
        return outs, ""
    except Exception as exc:  # noqa: BLE001
        return None, f"its outputs could not be read: {type(exc).__name__}: {str(exc)[:160]}"


# The scratch folder goes to memory (/dev/shm) when what crosses it is at most this share of the host memory free:
# a 6 GB input and its output written to a disk-backed /tmp and read back took ~15 s of a 23 s check on the H200;
# in memory they are copies at memory speed, but held in RAM while the check runs.
SHM_SHARE = 0.25
_SHM = "/dev/shm"


def scratch_parent(crossing_bytes: int) -> str | None:
    """Where the scratch folder is made: /dev/shm when it and the host have room for ``crossing_bytes`` (the inputs
    and the outputs, about) within SHM_SHARE of what is free, else the default temporary folder (None)."""
    try:
        room = shutil.disk_usage(_SHM).free
    except OSError:
        return None
    free = budget.host_available()
    if free is None or crossing_bytes > SHM_SHARE * min(free, room):
        return None
    return _SHM


def run_plain(spec: Disguise, state: dict[str, Any], inputs: list[Any], device: torch.device) -> tuple[list[Any] | None, str]:
    """(the outputs, "") or (None, why there are none)."""
    crossing = 3 * budget.nbytes(inputs) + budget.nbytes(list(state.values())) + (64 << 20)
    scratch = os.path.realpath(tempfile.mkdtemp(dir=scratch_parent(crossing)))
    try:
        shutil.copyfile(_MAIN, os.path.join(scratch, "main.py"))
        solution = os.path.join(scratch, os.path.basename(spec.candidate_path))
        with open(solution, "w", encoding="utf-8") as f:
            f.write(spec.candidate_source)
        torch.save({"seed": spec.build_seed, "init_inputs": spec.init_inputs, "state": state,
                    "inputs": [_raw_input(scratch, k, x) for k, x in enumerate(inputs)],
                    "device": str(device), "dtype": str(spec.dtype).removeprefix("torch.") if spec.dtype else None,
                    "allow_tf32": spec.allow_tf32}, os.path.join(scratch, "data.pt"))
        env = plain_environment(scratch)
        log_path = os.path.join(scratch, "log.txt")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([sys.executable, "main.py", os.path.abspath(spec.problem_path), solution],
                                    cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
            try:
                code = proc.wait(LIMIT_S)
            except subprocess.TimeoutExpired:
                return None, f"it did not finish within {LIMIT_S:.0f} s"
            finally:
                _end(proc)  # whatever it started goes with it
        if code != 0:
            return None, f"it exited with code {code}: {_tail(log_path)}"
        return _read_outputs(scratch, device)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _end(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            lines = [line for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    return " | ".join(lines[-2:])[-300:] or "no output"


def check_disguised_run(ctx: VerifyContext) -> CheckResult:
    spec = ctx.disguise
    if spec is None:
        return warned(NAME, "not run: the evaluation has no candidate file to run as a plain script")
    if has_dropout(ctx.ref):
        return warned(NAME, "not run: the reference's outputs are random (active dropout), one call proves nothing")
    inputs = ctx.make_inputs(ctx.seed())
    state = {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in ctx.ref.state_dict().items()}
    outs, why = run_plain(spec, state, inputs, ctx.device)
    if outs is None:
        return warned(NAME, f"run as a plain script in a fresh process, {why} (not charged: the environment there "
                      "differs from the worker's)")
    with preserved_state(ctx.ref):
        ref_out = run(ctx.ref, clone_inputs(inputs))
    refs = tensors(ref_out)
    if len(outs) != len(refs) or any(o.shape != r.shape or o.dtype != r.dtype for o, r in zip(outs, refs)):
        shown = [(tuple(o.shape), str(o.dtype)) for o in outs[:3]]
        return failed(NAME, f"run as a plain script in a fresh process (no evaluator module loaded, kforge's "
                      f"environment keys removed) its outputs are {shown}, not the reference's: it answers "
                      "differently where it is not watched", "cheating")
    # The same call inside the worker is the control: an answer that differs only as the candidate's own answers do
    # (its precision, its rounding) is the same behaviour; one that differs and misses the reference is not.
    with preserved_state(ctx.cand):
        watched = run(ctx.cand, clone_inputs(inputs))
    same = compare(outs, watched, ctx.atol, ctx.rtol)
    c = same if same.ok else judged_compare(ctx, inputs, outs, ref_out)
    if not c.ok:
        return failed(NAME, f"run as a plain script in a fresh process (no evaluator module loaded, kforge's "
                      f"environment keys removed) it is wrong: {c.message} — right only while it is evaluated",
                      "cheating")
    return passed(NAME, f"run as a plain script in a fresh process (no evaluator module loaded, kforge's environment "
                  f"keys removed): the same answer ({c.message})", "cheating")
