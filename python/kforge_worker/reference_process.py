"""The reference in its own clean process: it never imports candidate code.

The worker (the candidate's process) starts this process **before** the candidate is imported and asks it,
over a pipe, for everything the verdict and the speedup rest on:

- the correctness trials' inputs, the reference's outputs and the float64 evaluation (``trial``);
- the reference's side of the timing: its own rotating input sets rewritten with fresh ``get_inputs()``
  values before every pair (``advance``; the same values are handed to the candidate's side), one call
  timed by its own clock per request (``call``), and the last output when a pair is sampled (``last``).

So nothing the candidate does inside its process — a replaced ``Model.forward``, a global module hook, a
backend switch, a patched timer, a slowed reference — reaches the reference's outputs or its times.

Transport. Requests are JSON lines on the child's stdin; replies JSON lines on a private dup of its stdout
(the problem's own prints go to stderr), stamped with the run's nonce (``Channel``). Tensors never travel
in the JSON: the reference process writes them into shared memory and sends a description —
files in a private directory (``/dev/shm`` when it exists) mapped by both processes on CPU, CUDA IPC
handles on a GPU (the tensor's own allocation, or a named staging buffer reused across the timing pairs).
Data flows from the reference to the worker, with one exception: the candidate's outputs handed to the judge
(judge.py), which this process copies — never maps, never unpickles — after checking their size, shape and dtype.
Nothing is unpickled. The other way round, the worker reads a trial's outputs
and float64 evaluation after the candidate's call, from files the candidate's process can find and write (or
replace under the same name): each such file's digest travels in the reply, and the trial fails as cheating when
a file no longer holds it after the call (`Importer.seal`/`broken`).

``ReferenceProcess`` is the worker's handle on it; ``serve`` is the child's loop
(``python -m kforge_worker.reference_process``).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import errno
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .pipeline import input_generation, placed, resolve_input_device, seeded_build, seeded_inputs

if TYPE_CHECKING:  # imported where used: this module loads before torch in the worker (spawn_reference)
    from .checks.float64 import Float64Eval, LockstepFloat64

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_SEAL = "KFORGE_IMPORT_SEAL_NS"  # import_seal.ENV (that module is the child's first import, not the worker's)
# The child's command: the import seal first, then this module as __main__ (as `python -m` would run it).
_BOOT = ("import kforge_worker.import_seal as s; s.install(); import runpy; "
         "runpy.run_module('kforge_worker.reference_process', run_name='__main__', alter_sys=True)")


class ReferenceProcessError(RuntimeError):
    """The reference process failed as a harness (it died, or answered off protocol)."""


class Untransportable(Exception):
    """An input the shared-memory transport cannot hand over (neither a tensor nor a JSON value): the run goes
    on with the reference in the worker. Decided in the reference process, from the problem's own inputs."""


class ProblemFailure(Exception):
    """The problem's own code failed in the reference process: charged to the problem."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.what = what
        self.reason = reason


# ------------------------------------------------------------------------------------ shared tensors
def _digest(flat: Any) -> str:
    """BLAKE2b of a flat CPU tensor's bytes (a second preimage is out of reach: no key needed)."""
    import hashlib

    import torch

    return hashlib.blake2b(flat.reshape(-1).view(torch.uint8).numpy().data).hexdigest()


def _dtype(name: str) -> Any:
    import torch

    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ReferenceProcessError(f"unknown dtype {name!r}")
    return value


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


class Exporter:
    """The reference process's side: puts tensors where the worker can map them.

    ``put(name, t, staging=True)`` copies ``t`` into a buffer kept under ``name`` (reused while the size
    fits: the timing's staging sets get one handle for the whole loop); ``staging=False`` shares the tensor's
    own memory on CUDA (no copy of a large output) until ``drop``. On CPU everything is copied into a file
    of the private directory, mapped shared."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.buffers: dict[str, Any] = {}  # name -> the mapped/device buffer (flat, its dtype)
        self.held: dict[str, Any] = {}  # name -> tensor shared as is (CUDA), until drop

    def put(self, name: str, t: Any, staging: bool = True) -> dict[str, Any]:
        import torch

        t = t.detach()
        dense = t if dense_layout(t) else t.contiguous()  # a transposed input keeps its strides, as clone() does
        desc: dict[str, Any] = {"name": name, "dtype": _dtype_name(dense.dtype), "shape": list(dense.shape),
                                "stride": list(dense.stride()), "numel": dense.numel(), "device": str(dense.device)}
        if dense.numel() == 0:
            desc["kind"] = "empty"
            return desc
        # The dense span of memory the tensor covers: numel elements from its storage offset.
        flat = dense.as_strided((dense.numel(),), (1,), dense.storage_offset())
        if dense.device.type == "cuda":
            if staging:
                buf = self.buffers.get(name)
                if buf is None or buf.numel() < flat.numel() or buf.dtype != flat.dtype or buf.device != flat.device:
                    buf = torch.empty(flat.numel(), dtype=flat.dtype, device=flat.device)
                    self.buffers[name] = buf
                buf[: flat.numel()].copy_(flat)
                source = buf
            else:
                source = flat.contiguous()
                self.held[name] = source
            torch.cuda.synchronize(source.device)
            desc.update(kind="cuda_ipc", ipc=_share_cuda(source))
            return desc
        path = os.path.join(self.directory, f"{name}.{desc['dtype']}")
        buf = self.buffers.get(name)
        if buf is None or buf.numel() != flat.numel() or buf.dtype != flat.dtype:
            nbytes = flat.numel() * flat.element_size()
            with open(path, "wb") as f:
                try:  # reserve the pages now: a full tmpfs is then an error here, not a SIGBUS on a later write
                    os.posix_fallocate(f.fileno(), 0, nbytes)
                except OSError as exc:
                    if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                        raise
                    f.truncate(nbytes)
            buf = torch.from_file(path, shared=True, size=flat.numel(), dtype=flat.dtype)
            self.buffers[name] = buf
        buf.copy_(flat)
        desc.update(kind="file", path=path)
        if not staging:  # outputs the worker reads later, after candidate code ran: their digest travels with them
            desc["digest"] = _digest(buf)
        return desc

    def drop(self, prefix: str = "") -> None:
        for name in [n for n in self.held if n.startswith(prefix)]:
            del self.held[name]


def dense_layout(t: Any) -> bool:
    """Whether t covers a gap-free, non-overlapping span of memory (any dimension order)."""
    expected = 1
    for stride, size in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _unb64(value: str | None) -> bytes | None:
    return None if value is None else base64.b64decode(value)


def _share_cuda(t: Any) -> dict[str, Any]:
    """A CUDA IPC handle on t's storage, as JSON (what torch.multiprocessing pickles, without pickle)."""
    (device, handle, size_bytes, offset_bytes, ref_handle, ref_offset, event_handle,
     event_sync) = t.untyped_storage()._share_cuda_()
    return {"device": int(device), "handle": _b64(handle), "sizeBytes": int(size_bytes),
            "offsetBytes": int(offset_bytes), "refCounterHandle": _b64(ref_handle), "refCounterOffset": int(ref_offset),
            "eventHandle": _b64(event_handle), "eventSyncRequired": bool(event_sync),
            "storageOffset": int(t.storage_offset())}


class Importer:
    """The worker's side: maps what the reference process shared. ``get`` returns a tensor in the worker's
    own memory (a copy), so nothing the candidate does to it can reach the reference's buffers' next use;
    ``view`` returns the shared memory itself, for reading only (comparisons of large outputs)."""

    def __init__(self) -> None:
        self.files: dict[tuple[str, int, str], Any] = {}
        self.cuda: dict[tuple[str, str], Any] = {}
        self.digests: dict[str, str] = {}  # path -> the digest the reference process sent with the file

    def view(self, desc: dict[str, Any]) -> Any:
        import torch

        dtype = _dtype(desc["dtype"])
        shape, stride, numel = desc["shape"], desc["stride"], int(desc["numel"])
        if desc["kind"] == "empty":
            return torch.empty_strided(shape, stride, dtype=dtype, device=desc["device"])
        if desc["kind"] == "file":
            key = (desc["path"], numel, desc["dtype"])
            flat = self.files.get(key)
            if flat is None:
                flat = torch.from_file(desc["path"], shared=True, size=numel, dtype=dtype)
                self.files[key] = flat
            if desc.get("digest"):
                self.digests[desc["path"]] = desc["digest"]
            return flat[:numel].as_strided(shape, stride)
        if desc["kind"] == "cuda_ipc":
            ipc = desc["ipc"]
            key = (ipc["handle"], desc["name"])
            storage = self.cuda.get(key)
            if storage is None:
                torch.cuda._lazy_init()
                storage = torch.UntypedStorage._new_shared_cuda(
                    ipc["device"], _unb64(ipc["handle"]), ipc["sizeBytes"], ipc["offsetBytes"],
                    _unb64(ipc["refCounterHandle"]), ipc["refCounterOffset"], _unb64(ipc["eventHandle"]),
                    ipc["eventSyncRequired"])
                self.cuda = {k: v for k, v in self.cuda.items() if k[1] != desc["name"]}  # a new handle replaces
                self.cuda[key] = storage
            typed = torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True)
            flat = torch._utils._rebuild_tensor(typed, ipc["storageOffset"], (numel,), (1,))
            return flat.as_strided(shape, stride)
        raise ReferenceProcessError(f"unknown tensor kind {desc['kind']!r}")

    def get(self, desc: dict[str, Any]) -> Any:
        import torch

        shared = self.view(desc)
        own = torch.empty_strided(shared.shape, shared.stride(), dtype=shared.dtype, device=shared.device)
        own.copy_(shared)
        return own

    def seal(self, prefixes: tuple[str, ...]) -> dict[str, str]:
        """What every mapped file whose name starts with one of ``prefixes`` must hold: the digest the reference
        process computed from what it wrote (else the mapping's own now). The files live in a directory the
        candidate's process can find and, being the same user, write — or replace under the same name before the
        worker maps them (root writes whatever the mode): a trial's outputs and float64 evaluation are read
        *after* the candidate's call, so the pipeline seals them before that call and checks after it (`broken`).
        CUDA IPC allocations are not files and are not sealed."""
        return {path: self.digests.get(path) or _digest(flat) for (path, _numel, _dtype), flat in self.files.items()
                if os.path.basename(path).startswith(prefixes)}

    def broken(self, seal: dict[str, str]) -> list[str]:
        """The sealed files that no longer hold what the reference process wrote (their names)."""
        mapped = {path: flat for (path, _n, _d), flat in self.files.items()}
        return [os.path.basename(path) for path, digest in seal.items()
                if path not in mapped or _digest(mapped[path]) != digest]

    def forget(self, prefix: str) -> None:
        """Unmaps what the reference process is about to free or replace: CUDA allocations (its outputs of one
        call) and files. A file it unlinks and writes again under the same name is a new file; a mapping kept by
        name would go on reading the old one's last contents."""
        self.cuda = {k: v for k, v in self.cuda.items() if not k[1].startswith(prefix)}
        self.files = {k: v for k, v in self.files.items() if not os.path.basename(k[0]).startswith(prefix)}
        self.digests = {k: v for k, v in self.digests.items() if not os.path.basename(k).startswith(prefix)}


def encode_values(values: list[Any], exporter: Exporter, prefix: str, staging: bool = True) -> list[dict[str, Any]]:
    """A list of inputs or flattened outputs: tensors shared, plain values as JSON."""
    import torch

    out = []
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            out.append({"tensor": exporter.put(f"{prefix}{i}", v, staging)})
        else:
            try:
                json.dumps(v, allow_nan=False)
            except (TypeError, ValueError):
                raise Untransportable(f"input {i} is a {type(v).__name__}: only tensors and JSON values can be "
                                      "handed to the candidate's process") from None
            out.append({"value": v, "tuple": True} if isinstance(v, tuple) else {"value": v})
    return out


def decode_values(items: list[dict[str, Any]], importer: Importer, copy_tensors: bool = True) -> list[Any]:
    return [(importer.get(x["tensor"]) if copy_tensors else importer.view(x["tensor"])) if "tensor" in x
            else tuple(x["value"]) if x.get("tuple") else copy.deepcopy(x["value"]) for x in items]


# ---------------------------------------------------------------------------------------- the child
class _Reference:
    """The child's state: the problem, Model, its float64 copy, the timing pool and clock."""

    def __init__(self, spec: dict[str, Any], directory: str, judge: Any = None) -> None:
        import torch

        from .loading import LoadError, check_problem, import_path

        self.torch = torch
        self.spec = spec
        self.device = torch.device(spec["device"])
        self.dtype = _dtype(spec["dtype"]) if spec.get("dtype") else None
        torch.backends.cuda.matmul.allow_tf32 = bool(spec["allowTf32"])
        torch.backends.cudnn.allow_tf32 = bool(spec["allowTf32"]) or torch.backends.cudnn.allow_tf32
        self.exporter = Exporter(directory)
        self.problem = self._problem_call("failed to import", lambda: import_path(spec["problemPath"], "problem"))
        try:
            check_problem(self.problem, spec["problemPath"])
        except LoadError as exc:
            raise ProblemFailure("load", str(exc)) from None
        seed = int(spec["seed"])
        self._fits()
        init = self._problem_call("get_init_inputs()", lambda: list(self.problem.get_init_inputs()))
        init = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in init]

        def construct() -> Any:
            model = seeded_build(torch, self.problem.Model, copy.deepcopy(init), seed,
                                 example=self.problem.get_inputs).to(self.device)
            return model.to(self.dtype) if self.dtype is not None else model

        self.model = self._problem_call("Model(*get_init_inputs())", construct)
        from .checks.float64 import LockstepFloat64

        # The float64 copy is made in the first trial, within the check budget (checks/float64.py).
        self.float64: LockstepFloat64 | None = None
        if spec.get("fp64", True) and not getattr(self.problem, "KFORGE_SKIP_FP64", False):
            self.float64 = LockstepFloat64(self.model, self.device, self.forward)
        self.inputs: list[Any] = []
        self.input_device: Any = False  # resolve_input_device decides it, as for the worker's EvalContext
        self.pool: Any = None
        self.clock: Any = None
        self.last: Any = None
        # The judge (judge.py): this process's own comparisons of the candidate's outputs, reported to the CLI.
        self.judge = judge
        # On CUDA what the worker maps is a copy (a staging buffer), never the outputs the judge compares with: the
        # worker's mapping of a shared allocation is writable from the candidate's process. On CPU every shared
        # tensor is a copy in a file already (and carries its digest).
        self.private = self.device.type == "cuda"
        if judge is not None:
            from .checks.context import has_dropout

            judge.start(os.getpid(), dropout=has_dropout(self.model))
            judge.tf32 = tf32_in_use(spec["problemPath"])

    def _fits(self) -> None:
        """A problem whose one copy of inputs and parameters is more than the device has free is the problem's
        error, said with the numbers, before anything of it is allocated. Its outputs are not measured here: they
        exist only in trials, which the worker asks for after its own check of the whole footprint (check_fit,
        before the candidate is imported); the forward on meta that measures them would cost this process a
        second of CPU importing dynamo and sympy, on every run."""
        from .checks.budget import does_not_fit

        why = does_not_fit(self.problem, self.device, self.dtype, forward=False)
        if why is not None:
            raise ProblemFailure("memory", why)

    def _problem_call(self, what: str, fn: Callable[[], Any]) -> Any:
        from .errors import summarize_exception

        try:
            return fn()
        except BaseException as exc:  # noqa: BLE001
            raise ProblemFailure(what, summarize_exception(exc)) from None

    def make_inputs(self, seed: int) -> list[Any]:
        """Exactly the worker's make_inputs (one seed, the same inputs)."""
        place = lambda x: placed(self.torch, x, self.device, self.dtype)  # noqa: E731
        where = resolve_input_device(self)
        return self._problem_call("get_inputs()", lambda: seeded_inputs(self.torch, self.problem, seed, place, where))

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def forward(self, model: Any, inputs: list[Any]) -> Any:
        with self.torch.no_grad():
            out = model(*inputs)
        self.sync()
        return out

    # -- requests ------------------------------------------------------------------------------
    def trial(self, req: dict[str, Any]) -> dict[str, Any]:
        """Fresh inputs from the seed; the reference, then the float64 evaluation within the check budget (as the
        worker does; ``float64`` in the reply says whether it covers the whole batch, a window of rows, or why none).
        ``probe``: the reference alone, its parameters, buffers and train/eval flags restored afterwards (a
        check that the worker's reference still agrees, which must not step BatchNorm's statistics)."""
        from .checks.context import preserved_state
        from .compare import flatten_outputs

        torch = self.torch
        self.exporter.drop()
        self._collect_shared()
        self.inputs = self.make_inputs(int(req["seed"]))
        if req.get("probe"):
            given = [x.clone() if isinstance(x, torch.Tensor) else x for x in self.inputs]
            with preserved_state(self.model):
                out = self._problem_call("Model.forward", lambda: self.forward(self.model, given))
            outs = self._problem_call("output", lambda: flatten_outputs(out, "reference output"))
            return {"inputs": encode_values(self.inputs, self.exporter, "in"),
                    "outputs": encode_values(outs, self.exporter, "out", staging=self.private), "outputs64": None}
        # The inputs first: an input that cannot be handed over declines the trial before the judge expects it.
        inputs = encode_values(self.inputs, self.exporter, "in")
        if self.float64 is not None:
            self.float64.before_reference(self.inputs)  # the first trial's copy starts from the reference's state
        given = [x.clone() if isinstance(x, torch.Tensor) else x for x in self.inputs]
        out = self._problem_call("Model.forward", lambda: self.forward(self.model, given))
        outs = self._problem_call("output", lambda: flatten_outputs(out, "reference output"))
        del given, out
        # The float64 evaluation after the reference's own call: whether the whole batch fits the check budget
        # depends on the outputs' size, and a sampled window is proven against the reference's own rows.
        view = self.float64.evaluate(self.inputs, outs) if self.float64 is not None else None
        self._release_cache(outs)
        float64 = None
        if self.float64 is not None:
            float64 = {"rows": list(view.rows) if view is not None and view.rows is not None else None,
                       "batch": view.batch if view is not None else None,
                       "note": view.note if view is not None else self.float64.note}
        if self.judge is not None:
            dtypes = [x.dtype for x in self.inputs if isinstance(x, torch.Tensor)] + [o.dtype for o in outs]
            self.judge.tolerance(self.spec, self.problem, dtypes)
            self.judge.trial_ready(int(req["seed"]), outs, view.outputs if view is not None else None,
                                   view.rows if view is not None else None)
        return {"inputs": inputs,
                "outputs": encode_values(outs, self.exporter, "out", staging=self.private),
                "outputs64": (encode_values(view.outputs, self.exporter, "o64_", staging=self.private)
                              if view is not None else None),
                "float64": float64}

    def judge_trial(self, req: dict[str, Any]) -> dict[str, Any]:
        """The candidate's outputs of the trial just given, judged here (nothing is said back: the worker judges
        its own copy; the CLI reads the judge's record)."""
        if self.judge is not None:
            self.judge.judge_trial(req.get("outputs"), self.device)
        return {}

    def commit(self, req: dict[str, Any]) -> dict[str, Any]:
        """The candidate's outputs of the pair of timed calls just run: the judge copies them, then draws whether
        to compare them with this process's last output (judge.Judge.commit)."""
        from .compare import OutputStructureError, flatten_outputs

        if self.judge is None:
            return {}
        self.sync()
        try:
            last = flatten_outputs(self.last, "reference output") if self.last is not None else None
        except OutputStructureError:
            last = None
        varied = self.pool is not None and self.pool.varied
        pair_inputs = self.pool.ref_inputs() if varied else None
        self.judge.commit(req.get("outputs"), last, self.device, req.get("candMs"), varied=varied,
                          float64=None if self.float64 is None or last is None
                          else lambda: self.float64.evaluate_once(pair_inputs, last))
        return {}

    def _release_cache(self, outs: list[Any]) -> None:
        """Hands the blocks the forward's copies and temporaries left in this process's caching allocator back to
        the device when the problem is large: the worker allocates the candidate's copies next, on the same GPU,
        and cannot use memory cached here (a 6.4 GB problem ran out of an 80 GB GPU that way)."""
        from .checks.budget import FLOOR, nbytes

        if self.device.type == "cuda" and nbytes([self.inputs, outs]) > FLOOR:
            self.torch.cuda.empty_cache()

    def release(self) -> dict[str, Any]:
        """Frees what the trials left here (their inputs, shared outputs, staging buffers and files) once the
        worker is done with them: the verification checks run in the worker next, on the same device, and on a
        large problem the two processes' leftovers together ran a 6.4 GB problem out of an 80 GB GPU."""
        import gc

        self.exporter.drop()
        self.exporter.buffers.clear()
        for name in os.listdir(self.exporter.directory):  # CPU staging files (a tmpfs holds them in host memory)
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.exporter.directory, name))
        self.inputs = None
        gc.collect()
        self._collect_shared()
        if self.device.type == "cuda":
            self.torch.cuda.empty_cache()
        return {}

    def _collect_shared(self) -> None:
        """Frees the CUDA blocks this process shared with the worker once the worker let go of them: PyTorch keeps
        a shared block (IPC) allocated after its last reference here until ipc_collect sees the worker's count drop,
        and only calls it itself when this process runs out of memory — not when the worker does."""
        if self.device.type == "cuda":
            self.torch.cuda.ipc_collect()

    def pool_init(self, req: dict[str, Any]) -> dict[str, Any]:
        from .timed_inputs import FreshInputPool
        from .timing import clock_for

        self.exporter.drop()

        def seed() -> int:
            return int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF

        self.pool = FreshInputPool(self.make_inputs, seed, sets=int(req.get("sets") or 0), mirror=False,
                                   generation=input_generation(self), vary=self._variant(req.get("vary"), seed),
                                   accepts=lambda given, rolled: accepts_rolled(self.torch, self.model, self.forward,
                                                                                given, rolled))
        if self.judge is not None:
            self.judge.timing_starts()
        self.clock = clock_for(self.device)
        return {"sets": self.pool.sets, "generation": self.pool.generation, "method": self.clock.method,
                "flushBytes": int(self.clock.flush_bytes), "repeats": self.pool.repeats, "rolled": self.pool.rolled}

    def _variant(self, spec: Any, seed: Callable[[], int]) -> Callable[[list[Any]], list[Any] | None] | None:
        """The timing's sets off the distribution, of the kind the worker's input_distribution judged (its
        reference finite there, no value-asserting op met outside its domain), drawn here: None without one."""
        if not isinstance(spec, dict):
            return None
        from .off_distribution import variant

        return lambda fresh: variant(spec, fresh, seed(), self.device)

    def advance(self) -> dict[str, Any]:
        self.last = None
        self._collect_shared()
        self.pool.advance()
        self.sync()
        return {"turn": self.pool.turn, "varied": self.pool.varied,
                "inputs": encode_values(self.pool.ref_inputs(), self.exporter, "stage")}

    def call(self, req: dict[str, Any]) -> dict[str, Any]:
        inputs = self.pool.ref_inputs()

        def run() -> Any:
            self.last = self.model(*inputs)
            return self.last  # the CPU clock reads a byte of each output page before it stops, as the worker's

        with self.torch.no_grad():
            if req.get("timed"):
                ms = self._problem_call("Model.forward during timing", lambda: self.clock.time_ms(run))
                if self.judge is not None:
                    self.judge.called(ms)
                return {"ms": ms, **outside_report()}
            self._problem_call("Model.forward during timing", run)
        if self.judge is not None:
            self.judge.called()
        return {"ms": None, **outside_report()}

    def buffers(self) -> dict[str, Any]:
        """The model's buffers as they are now (after the timing: BatchNorm's running statistics)."""
        named = [(n, b) for n, b in self.model.named_buffers() if isinstance(b, self.torch.Tensor)]
        return {"names": [n for n, _ in named],
                "buffers": encode_values([b for _, b in named], self.exporter, "buf", staging=False)}

    def last_output(self) -> dict[str, Any]:
        from .compare import flatten_outputs

        self.sync()
        outs = self._problem_call("output", lambda: flatten_outputs(self.last, "reference output"))
        return {"outputs": encode_values(outs, self.exporter, "last", staging=self.private)}


# What only something outside this process can do to it, counted here (the worker's process — the candidate's —
# is its parent, same user: it may signal this process, trace it, write its memory through /proc/<pid>/mem).
_OUTSIDE: dict[str, int] = {"continued": 0, "before_go": 0, "armed": 0}


def accepts_rolled(torch: Any, model: Any, forward: Callable[[Any, list[Any]], Any], given: list[Any],
                   rolled: list[Any]) -> bool:
    """Whether `model` answers on `rolled` (timed_inputs.FreshInputPool._roll of `given`) as well as on `given`: no
    raise, and finite wherever it is finite on `given` (its state restored: a probe, never a step of its
    statistics)."""
    from .checks.context import preserved_state
    from .compare import flatten_outputs

    try:
        with torch.no_grad(), preserved_state(model):
            a = flatten_outputs(forward(model, [x.clone() if isinstance(x, torch.Tensor) else x for x in given]))
            b = flatten_outputs(forward(model, [x.clone() if isinstance(x, torch.Tensor) else x for x in rolled]))
    except Exception:  # noqa: BLE001 — the reference refuses rolled values: they repeat
        return False
    return len(a) == len(b) and all(
        not x.is_floating_point() or x.shape != y.shape or bool((torch.isfinite(y) | ~torch.isfinite(x)).all())
        for x, y in zip(a, b))


def tf32_in_use(problem_path: str) -> bool:
    """compare.tf32_in_use for the problem at problem_path: whether its reference runs a convolution is read from its
    source (static_scan.reference_info, as the worker's checks read it)."""
    from .compare import tf32_in_use as in_use

    try:
        from .checks.static_scan import reference_info

        with open(problem_path, encoding="utf-8") as f:
            conv = "conv" in reference_info(f.read())[0]
    except Exception:  # noqa: BLE001 — a source that cannot be read: a convolution assumed (the looser floor)
        conv = True
    return in_use(conv)


def _on_continue(signum: int, frame: Any) -> None:
    _OUTSIDE["continued"] += 1


def guard_from_outside(device: str) -> None:
    """In the child, before the problem is loaded. SIGSTOP cannot be caught, but the SIGCONT that ends a stop
    can: every stop/continue of this process (a frozen reference is slower when timed, and a thread that only
    sends signals burns no CPU an idle meter would see) is counted and reported with every timing call. On the
    CPU the process is also made non-dumpable: another process of the same user can then no longer attach
    with ptrace nor open /proc/<pid>/mem (its memory, the reference's weights and clock included); not on CUDA,
    where the driver's IPC is not yet known to tolerate it (needs a device run)."""
    import signal

    with contextlib.suppress(ValueError, OSError, AttributeError):
        signal.signal(signal.SIGCONT, _on_continue)
    if device == "cpu" and sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


def _tracer_pid() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def arm_outside() -> dict[str, int]:
    """From now on every stop counts. A worker started ahead of its candidate (a suite's next one) is stopped by
    the CLI while another candidate is timed on its GPU; it arms its reference when its go comes, before the
    candidate is read, so those stops (nobody's attack: no candidate existed) are not counted. Once only, and
    never after a trial: a later call cannot wipe what the candidate did."""
    if _OUTSIDE["armed"]:
        raise ReferenceProcessError("the reference's stop count is armed once, before the first trial")
    _OUTSIDE["armed"] = 1
    _OUTSIDE["before_go"] = _OUTSIDE["continued"]
    return outside_report()


def outside_report() -> dict[str, int]:
    """Stops/continues seen since the start (or since it was armed), and the pid tracing this process now (0:
    none)."""
    return {"continued": _OUTSIDE["continued"] - _OUTSIDE["before_go"], "tracer": _tracer_pid()}


def outside_change(reply: dict[str, Any]) -> str | None:
    """The worker's reading of outside_report(): None when nothing outside touched the reference process."""
    continued, tracer = int(reply.get("continued") or 0), int(reply.get("tracer") or 0)
    if continued:
        return (f"the reference process was stopped and continued {continued} time(s) (SIGSTOP/SIGCONT from "
                "outside it) while it was timed")
    if tracer:
        return f"the reference process is being traced (ptrace) by process {tracer} while it is timed"
    return None


def _shared_dir(min_free: int = 1 << 30) -> str | None:
    """/dev/shm when it is writable with room to spare (containers often give it 64 MB), else the temp dir."""
    try:
        st = os.statvfs("/dev/shm")
        if os.access("/dev/shm", os.W_OK) and st.f_bavail * st.f_frsize >= min_free:
            return "/dev/shm"
    except OSError:
        pass
    return None


def _loaded_code_rewritten() -> list[str]:
    """Code this process loaded, rewritten while the candidate could run (seal_audit.py): the judgement fails."""
    from . import import_seal
    from .seal_audit import findings

    return findings(import_seal._SEAL) if import_seal._SEAL is not None else []


def serve() -> int:
    """The child's loop: one JSON request per stdin line, one reply per request on the private channel."""
    from .channel import open_private_channel
    from .errors import summarize_exception
    from .timing import gc_paused

    channel = open_private_channel()
    first = sys.stdin.readline()
    try:
        hello = json.loads(first)
        channel.nonce = str(hello["nonce"])
        spec, first_id = hello["spec"], hello["id"]
    except (ValueError, KeyError, TypeError):
        print("kforge_worker.reference_process: bad first line", file=sys.stderr, flush=True)
        return 2
    directory = tempfile.mkdtemp(prefix="kforge-ref-", dir=_shared_dir())
    os.chmod(directory, 0o700)
    state: _Reference | None = None
    judge = None
    if isinstance(spec, dict) and isinstance(spec.get("judgeFd"), int):
        from .judge import Judge

        with contextlib.suppress(OSError):
            os.set_inheritable(spec["judgeFd"], False)  # nothing this process starts gets it
        judge = Judge(spec["judgeFd"], directory)
        if isinstance(spec.get("marksFd"), int):
            judge.clock_marks(spec["marksFd"])
        from .import_seal import report_to

        report_to(judge.fail)  # code written while the candidate could run, refused: the judgement fails
    guard_from_outside(str(spec.get("device", "cpu")) if isinstance(spec, dict) else "cpu")
    audits: list[str] = []  # copies of the worker's audit events (ReferenceProcess.audit_note), kept here
    audit_count = 0

    def reply(rid: Any, body: dict[str, Any]) -> None:
        channel.send({"type": "reference", "id": rid, **body})

    try:
        try:
            state = _Reference(spec, directory, judge)
            reply(first_id, {"ok": True, "directory": directory, "fp64": state.float64 is not None})
        except ProblemFailure as exc:
            reply(first_id, {"ok": False, "problem": True, "what": exc.what, "reason": exc.reason})
            return 0
        for line in sys.stdin:
            try:
                req = json.loads(line)
            except ValueError:
                continue
            if isinstance(req, dict) and req.get("op") == "audit" and "id" not in req:  # a forged note only adds
                audit_count += 1
                if len(audits) < 200:
                    audits.append(str(req.get("text", ""))[:500])
                continue
            try:
                op, rid = req["op"], req["id"]
            except (KeyError, TypeError):
                continue  # not a request of the worker's (a line the candidate wrote into the pipe): ignored
            if req.get("nonce") != channel.nonce:
                continue
            if op == "audits":
                reply(rid, {"ok": True, "count": audit_count, "notes": audits[:50]})
                continue
            if op == "close":
                if judge is not None:
                    judge.end(_loaded_code_rewritten)
                reply(rid, {"ok": True})
                break
            try:
                if op != "arm":
                    _OUTSIDE["armed"] = 1  # the window for arming closes with the first other request
                handlers: dict[str, Callable[[], dict[str, Any]]] = {
                    "arm": arm_outside,
                    "trial": lambda: state.trial(req),
                    "release": state.release,
                    "pool": lambda: state.pool_init(req),
                    "advance": state.advance,
                    "call": lambda: state.call(req),
                    "last": state.last_output,
                    "buffers": state.buffers,
                    "judge_trial": lambda: state.judge_trial(req),
                    "commit": lambda: state.commit(req),
                }
                if op not in handlers:
                    reply(rid, {"ok": False, "problem": False, "reason": f"unknown op {op!r}"})
                    continue
                if op == "call":
                    with gc_paused():  # as the worker's own timing loop: the same protocol on both sides
                        body = handlers[op]()
                else:
                    body = handlers[op]()
                reply(rid, {"ok": True, **body})
            except ProblemFailure as exc:
                reply(rid, {"ok": False, "problem": True, "what": exc.what, "reason": exc.reason})
            except Untransportable as exc:
                if judge is not None:
                    judge.declined(f"{exc}: the reference ran in the worker beside the candidate")
                reply(rid, {"ok": False, "problem": False, "transport": True, "reason": str(exc)})
            except BaseException as exc:  # noqa: BLE001 — a harness failure, reported, never a hang
                reply(rid, {"ok": False, "problem": False, "reason": summarize_exception(exc)})
    finally:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
    return 0


# ------------------------------------------------------------------------------------ the worker's side
def _finish_copies(values: list[Any]) -> None:
    """Waits for the worker's copies out of CUDA staging buffers (queued on its stream) to finish."""
    import torch

    devices = {v.device for v in values if isinstance(v, torch.Tensor) and v.device.type == "cuda"}
    for device in devices:
        torch.cuda.synchronize(device)


class ReferenceProcess:
    """The worker's handle on the clean reference process (start it before importing the candidate)."""

    def __init__(self, spec: dict[str, Any], python: str = sys.executable) -> None:
        self.nonce = os.urandom(16).hex()
        env = dict(os.environ)
        env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # The judge's channel (spec["judgeFd"], the CLI's socket) goes to the child at the same number; the caller
        # closes its own copy right after (spawn_reference), before the candidate exists.
        judge_fd = spec.get("judgeFd")
        self.judging = isinstance(judge_fd, int)
        # The seal's time (import_seal.py), stamped before the candidate exists: the child refuses any module
        # written since, installed before its first import of its own (torch's submodules load while it starts).
        env[ENV_SEAL] = str(time.time_ns())
        # torch.compile in the problem (a helper compiled by inductor) loads its compiled code by path, outside the
        # import system the seal vets: this process compiles into a directory of its own, never one the candidate's
        # process was pointed at (compiler_cache.py; runtime_audit names a candidate's path into it).
        from . import clock_marks, compiler_cache

        self.compiler_dir: str | None = compiler_cache.make_directory()
        env.update(compiler_cache.environment(self.compiler_dir))
        # Marks around each of the candidate's timed calls, stamped by the kernel (clock_marks.py): the judge holds
        # the candidate's times to a clock no code in this process can reach. CPU only (a GPU call's event time is
        # not its host window).
        self.marks, child_marks = clock_marks.pair() if self.judging and spec.get("device") == "cpu" else (None, None)
        self.mark = clock_marks.sender(self.marks)  # bound now, before the candidate exists
        if child_marks is not None:
            spec = {**spec, "marksFd": child_marks.fileno()}
        try:
            self.proc = subprocess.Popen(
                [python, "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=None, env=env, text=True, bufsize=1, close_fds=True,
                pass_fds=tuple(fd for fd in (judge_fd if self.judging else None,
                                             child_marks.fileno() if child_marks is not None else None)
                               if fd is not None),
            )
        finally:
            if child_marks is not None:
                child_marks.close()
        self.importer = Importer()
        self.handover: Exporter | None = None  # the candidate's outputs, handed to the judge (judge_trial, commit)
        self.sequence = 0
        # How the child is scheduled before the candidate exists: cores and niceness of its main thread.
        from .interference import cgroup, scheduling

        self.scheduling = scheduling(self.proc.pid).get(self.proc.pid)
        self.cgroup = cgroup(self.proc.pid)
        from .memory_capacity import limits_of

        self.memory_limits = limits_of(self.proc.pid)  # lowered from outside later: memory_capacity.reference_finding
        # The spec is written now, before the candidate is imported; its reply (the problem loaded, Model
        # built) is read when the reference is first needed, so the child's start overlaps the candidate's
        # import and build instead of delaying them.
        self._info: dict[str, Any] | None = None
        self._start_failure: BaseException | None = None
        try:
            self._write({"spec": spec})
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise

    @property
    def info(self) -> dict[str, Any]:
        """The child's reply to its spec; waits for it (ProblemFailure: the problem failed to load there)."""
        if self._start_failure is not None:
            raise self._start_failure
        if self._info is None:
            try:
                self._info = self._read()
            except BaseException as exc:
                self._start_failure = exc
                raise
        return self._info

    def _write(self, request: dict[str, Any]) -> None:
        self.sequence += 1
        request = {**request, "nonce": self.nonce, "id": self.sequence}
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise ReferenceProcessError(f"the reference process ended ({type(exc).__name__}: {exc})") from None

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request, its reply: matched by the nonce and a sequence number, so a line someone else wrote
        into the child's stdin (ignored there) or its stdout cannot stand in for an answer."""
        self.info  # noqa: B018 — the spec's reply comes first
        self._write(request)
        return self._read()

    def _read(self) -> dict[str, Any]:
        """The reply to the last request written."""
        try:
            assert self.proc.stdout is not None
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    raise ReferenceProcessError(f"the reference process ended (exit status {self.proc.poll()})")
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if (isinstance(message, dict) and message.get("type") == "reference"
                        and message.get("nonce") == self.nonce and message.get("id") == self.sequence):
                    break
        except (OSError, ValueError) as exc:
            raise ReferenceProcessError(f"the reference process ended ({type(exc).__name__}: {exc})") from None
        if not message.get("ok"):
            if message.get("problem"):
                raise ProblemFailure(str(message.get("what")), str(message.get("reason")))
            if message.get("transport"):
                raise Untransportable(str(message.get("reason")))
            raise ReferenceProcessError(f"the reference process failed: {message.get('reason')}")
        return message

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        return self._send({"op": op, **fields})

    def audit_note(self, text: str) -> None:
        """A copy of one audit event, out of the candidate's process as it is recorded (integrity._AUDIT_SINK): the
        child keeps it and hands the list back on ``audits``. No id, so no reply: the requests' sequence stands."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": "audit", "text": text}) + "\n")
        self.proc.stdin.flush()

    # -- what the pipeline asks for ------------------------------------------------------------
    def trial(self, seed: int, probe: bool = False) -> tuple[list[Any], list[Any], Float64Eval | None]:
        """(inputs in the worker's own memory, reference outputs, the float64 evaluation) — the outputs are
        views on the shared memory, valid until the next request; read them, do not keep them. The float64
        evaluation is None when the run has none at all, else its outputs (None, with the reason in its note,
        when it could not be bounded) and the rows they cover. ``probe``: no float64, and the reference's state
        left as it was."""
        self.importer.forget("out")
        self.importer.forget("o64_")
        reply = self.request("trial", seed=seed, probe=probe)
        inputs = decode_values(reply["inputs"], self.importer)
        outs = decode_values(reply["outputs"], self.importer, copy_tensors=False)
        outs64 = decode_values(reply["outputs64"], self.importer, copy_tensors=False) if reply.get("outputs64") else None
        _finish_copies(inputs)  # the staging buffers are rewritten by the next request
        from .checks.float64 import Float64Eval

        about = reply.get("float64")
        if about is None:
            view = None if outs64 is None else Float64Eval(outs64, note="float64 on the whole batch")
        else:
            rows = about.get("rows")
            view = Float64Eval(outs64, (int(rows[0]), int(rows[1])) if rows else None, about.get("batch"),
                               str(about.get("note") or ""))
        return inputs, outs, view

    def _hand_over(self, outputs: list[Any]) -> list[dict[str, Any]]:
        """The candidate's flattened outputs where the judge can copy them: files of a directory of the worker's own
        (never the reference process's) on CPU, one CUDA staging buffer per output on a GPU (one IPC handle for the
        run). Contiguous: the judge reads them in row-major order whatever the candidate's strides."""
        import torch

        if self.handover is None:
            directory = tempfile.mkdtemp(prefix="kforge-cand-", dir=_shared_dir())
            os.chmod(directory, 0o700)
            self.handover = Exporter(directory)
        items: list[dict[str, Any]] = []
        for i, t in enumerate(outputs):
            try:
                if not isinstance(t, torch.Tensor):
                    raise TypeError(f"a {type(t).__name__}")
                items.append({"tensor": self.handover.put(f"cand{i}", torch.Tensor.contiguous(t.detach()),
                                                          staging=True)})
            except BaseException as exc:  # noqa: BLE001 — a meta or sparse output, a subclass that raises when read:
                # handed over as nothing (a wrong answer for the judge); the worker's own checks name what it is
                items.append({"value": None, "why": f"{type(exc).__name__}: {exc}"[:200]})
        return items

    def judge_trial(self, outputs: list[Any]) -> None:
        """The candidate's outputs of the trial the child just gave, for the judge (no answer: its record goes to
        the CLI)."""
        if self.judging:
            self.request("judge_trial", outputs=self._hand_over(outputs))

    def commit(self, outputs: list[Any], cand_ms: float | None = None) -> None:
        """The candidate's outputs of the pair of timed calls just run, and the candidate's time in it (None in a
        warm-up pair), for the judge, before anything about whether the pair is compared exists."""
        if self.judging:
            self.request("commit", outputs=self._hand_over(outputs), candMs=cand_ms)

    def buffers(self) -> dict[str, Any]:
        """The reference model's buffers in the child, copied into this process, by name."""
        self.importer.forget("buf")
        reply = self.request("buffers")
        return dict(zip(reply["names"], decode_values(reply["buffers"], self.importer), strict=True))

    def release(self) -> None:
        """The trials are over: the worker lets go of every view into the child's memory, and the child frees its
        trial leftovers (timing asks for its own input pool later)."""
        self.importer.forget("")
        self.request("release")

    def close(self) -> None:
        if self._start_failure is not None and self.proc.poll() is None:
            self.proc.kill()  # it never answered its spec: nothing to close politely
        if self.proc.poll() is None:
            try:
                self.request("close")
            except (ReferenceProcessError, ProblemFailure):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self.handover is not None:
            import shutil

            self.handover.buffers.clear()
            shutil.rmtree(self.handover.directory, ignore_errors=True)
            self.handover = None
        if self.compiler_dir is not None:
            from . import compiler_cache

            compiler_cache.remove(self.compiler_dir)
            self.compiler_dir = None
        if self.marks is not None:
            self.marks.close()
            self.marks = None


class RemoteTiming:
    """The reference's side of the timing loop, run by the reference process; the worker mirrors the
    rotating input sets for the candidate from what the reference process hands over after each advance."""

    def __init__(self, ref: ReferenceProcess, sets: int = 0, vary: dict[str, Any] | None = None) -> None:
        """vary: the kind of the sets off the distribution the reference process mixes in (off_distribution)."""
        self.ref = ref
        info = ref.request("pool", sets=sets, vary=vary)
        self.sets = int(info["sets"])
        self.generation = str(info["generation"])
        self.method = f"reference timed in its own process ({info['method']})"
        self.flush_bytes = int(info["flushBytes"])
        self.repeats = [int(j) for j in info.get("repeats") or []]
        self.rolled = bool(info.get("rolled"))
        self.cand: list[list[Any]] = [[] for _ in range(self.sets)]
        self.turn = -1
        self.refreshed = 0
        self.staged: list[dict[str, Any]] | None = None
        self.outside: str | None = None  # the first sign of the reference process stopped or traced from outside
        self.varied = False

    def advance(self) -> None:
        """The reference process rewrites its next set with fresh values (and stages them for us)."""
        reply = self.ref.request("advance")
        self.turn = int(reply["turn"])
        self.varied = bool(reply.get("varied"))  # told: the values say it anyway
        self.staged = reply["inputs"]
        self.refreshed += 1

    def take_inputs(self) -> None:
        """The staged values into the candidate's own set — called right before the candidate's call, so each
        side's inputs are written right before its own call (the reference process writes its set in
        advance()): the same cache state for both on a CPU, where no flush evens it out."""
        from .timed_inputs import refill

        if self.staged is None:
            return
        fresh = decode_values(self.staged, self.ref.importer, copy_tensors=False)
        self.cand[self.turn] = refill(self.cand[self.turn] or [None] * len(fresh), fresh)
        _finish_copies(self.cand[self.turn])  # the staging buffers are rewritten by the next advance
        self.taken = fresh  # what the candidate's set held before its call, until the next advance
        self.staged = None

    def inputs_written(self) -> str | None:
        """Whether the candidate's call wrote its set: compared with the staged values it was given (still staged
        until the next advance); None when unchanged or not decidable."""
        from .timed_inputs import written_inputs

        taken, self.taken = getattr(self, "taken", None), None
        return written_inputs(self.cand[self.turn], taken) if taken is not None else None

    def cand_inputs(self) -> list[Any]:
        return self.cand[self.turn]

    def call(self, timed: bool) -> float:
        """One reference call on the current set, timed inside the reference process when ``timed``."""
        reply = self.ref.request("call", timed=timed)
        if self.outside is None:
            self.outside = outside_change(reply)
        ms = reply["ms"]
        return float(ms) if ms is not None else 0.0

    def last_outputs(self) -> list[Any]:
        self.ref.importer.forget("last")
        return decode_values(self.ref.request("last")["outputs"], self.ref.importer, copy_tensors=False)

    def describe(self) -> str:
        from .timed_inputs import repeats_note

        return (f"fresh inputs every call: {self.sets} input sets per side rewritten in place from get_inputs() "
                f"({'on the device' if self.generation == 'device' else 'on the host'}) in the reference process "
                "and handed to the candidate's before each pair, outside the timed region"
                + repeats_note(self.repeats, self.rolled))


if __name__ == "__main__":
    code = serve()
    sys.stderr.flush()
    os._exit(code)
