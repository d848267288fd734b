"""What every runtime check receives: the verification context, and the helpers they share.

Every check takes a `VerifyContext` (models, an input factory keyed by secret seeds, tolerance, device,
the static scan, the instruments) and returns `CheckResult`s. Checks never leave the models changed:
parameters, buffers and train/eval mode are restored afterwards (`preserved_state`).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .. import frame_hook
from ..compare import chunk_elements
from ..interference import hook_change, hook_state
from ..tensor_classes import HandedOver, classes_of, put_back
from . import sealed
from .instrument import ExtensionRecorder
from .integrity import AuditMonitor, IntegritySnapshot, ThreadCount
from .static_scan import ScanReport

Inputs = list[Any]
# Bound before any candidate is imported: a candidate that patches torch.isclose/equal cannot fool these.
_isclose = torch.isclose
_equal = torch.equal


@dataclass
class VerifyContext:
    ref: nn.Module
    cand: nn.Module
    make_inputs: Callable[[int], Inputs]  # secret-seeded fresh inputs on the problem's device
    device: torch.device
    atol: float
    rtol: float
    scan: ScanReport
    extensions: ExtensionRecorder
    audit: AuditMonitor | None = None
    snapshot: IntegritySnapshot | None = None
    rng: random.Random = field(default_factory=lambda: random.Random())
    ref_families: frozenset[str] = frozenset()
    threads_before: ThreadCount | None = None
    # --strict: running the operator family the problem replaces is cheating (default: disclosed).
    strict: bool = False
    # Filled by the checks for later ones (tolerance tightening, ops seen).
    notes: dict[str, Any] = field(default_factory=dict)
    # rebuild(seed) -> (Model, ModelNew) built, placed and synced from that seed exactly as the pipeline builds the
    # pair it checks (None: not available): other instances, for state_instances.
    # rebuild(seed, init_inputs) with other constructor arguments (init_constants): raises ReferenceRejected when the
    # reference itself cannot be built with them.
    rebuild: Callable[..., tuple[nn.Module, nn.Module]] | None = None
    # get_init_inputs() as the pair was built from (None: not known here): what init_constants varies.
    init_inputs: list[Any] | None = None
    # How to build the candidate again in a plain process (disguised.Disguise; None: no candidate file, as in unit runs).
    disguise: Any = None

    def __post_init__(self) -> None:
        sealed.register_reference(self.ref)

    def seed(self) -> int:
        return self.rng.randrange(1, 2**31 - 1)


class ReferenceRejected(Exception):
    """The reference cannot be built with the arguments a check asked a rebuild for: the values are not valid ones
    for the problem (the check skips them), whatever the candidate does with them."""


# --------------------------------------------------------------------------------------------- helpers
def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        out: list[Any] = []
        for item in value:
            out.extend(flatten(item))
        return out
    return [value]


def clone_inputs(inputs: Inputs) -> Inputs:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


# Thread-local autograd modes a candidate call left changed inside the harness's `with torch.no_grad()` (red team
# round 11, adv_grad_left_on): the block's exit restores them, so no flag probe between checks sees the change — a
# caller's own no_grad block would run on with graphs built. Put back at once and named here; the integrity
# fingerprint (integrity._process_flags) lists them, so the group's integrity check fails.
modes_left: list[str] = []
# Inputs a candidate call re-typed, and inputs and outputs of earlier calls re-typed since (tensor_classes.py): their
# class is put back before the harness touches them again, and named here for the integrity fingerprint, like
# modes_left.
retyped: list[str] = []
_handed_over = HandedOver()

_GRAD_MODES = {"no_grad": torch.no_grad, "grad": torch.enable_grad, "inference": torch.inference_mode}


def _modes() -> tuple[bool, bool]:
    return torch.is_grad_enabled(), torch.is_inference_mode_enabled()


def run(model: nn.Module, inputs: Inputs, mode: str = "no_grad",
        bracket: tuple[Callable[[], None], Callable[[], None]] | None = None) -> Any:
    """One forward call, under `mode` ("no_grad", the harness's way; "grad": grad mode on, a plain call's;
    "inference": torch.inference_mode()). The reference's outputs are sealed across the candidate's later calls, and
    a candidate call may leave no code set to run after it (sealed.py), nor the thread's autograd modes changed.
    ``bracket``: (right before, right after) the model's call itself, nothing of the harness's between — the
    checksums and seeds read device values, which waits for whatever the caller's stream holds (check_cuda_profile
    holds it across the call)."""
    if _PAIRED_RNG["on"]:
        seed_for_inputs(inputs)
    reference = sealed.is_reference(model)
    before = None if reference else sealed.checksums()
    hooks = None if reference else hook_state(tools=False)
    handed = None if reference else classes_of(inputs)
    with _GRAD_MODES[mode]():
        modes = _modes()
        if bracket is not None:
            bracket[0]()
        try:
            out = model(*inputs)
        finally:  # a frame-evaluation hook the call left is taken before any harness frame runs (frame_hook.py)
            if frame_hook.take is not None and frame_hook.take(None) is not None:
                frame_hook.left.append("a forward call")
            changed = put_back(inputs, handed) if handed is not None else []
            if changed and len(retyped) < 4:
                retyped.append(f"a forward call changed the class of its input(s) {changed} (put back): every torch "
                               "operation the caller then made on them would have run its code")
            earlier = _handed_over.put_back() if handed is not None else 0
            if earlier and len(retyped) < 4:
                retyped.append(f"a forward call changed the class of {earlier} tensor(s) earlier calls were handed or "
                               "had returned (put back): a caller keeping its results or writing its inputs again "
                               "would have run its code")
            if bracket is not None:
                bracket[1]()
            if not reference and _modes() != modes:
                now = _modes()
                modes_left.append(f"a forward call left grad mode {modes[0]} -> {now[0]}, inference mode "
                                  f"{modes[1]} -> {now[1]} (put back)")
                torch.set_grad_enabled(modes[0])
            if before:
                sealed.compare(before, "a candidate call")
            if hooks is not None:  # code left to run after the call: where the check compares with the reference
                left = hook_change(hooks)
                sealed.note(left and f"a candidate call {left}, where the check compares it with the reference")
    if reference:
        sealed.hold(tensors(out))
    else:
        _handed_over.add(list(inputs) + tensors(out))
    return out


# Active dropout makes every forward random: reference and candidate are comparable only on the same random
# stream. While a check set runs on such a model, every forward is seeded from its inputs (and a secret salt),
# so the reference and the candidate called on copies of the same inputs draw the same masks.
_PAIRED_RNG: dict[str, Any] = {"on": False, "salt": random.Random().randrange(1, 2**31 - 1)}


def random_streams_paired() -> bool:
    """Whether forwards are seeded from their inputs now (pair_random_streams)."""
    return bool(_PAIRED_RNG["on"])


def pair_random_streams(on: bool) -> None:
    """Seed every forward from its inputs (`run`, and the pipeline's trials) while `on`."""
    _PAIRED_RNG["on"] = bool(on)


def seed_for_inputs(inputs: Inputs) -> None:
    """torch's CPU and CUDA generators seeded from the inputs' shapes, dtypes and a sample of their values (the
    same inputs give the same seed, whoever runs them), mixed with this process's salt."""
    digest = [_PAIRED_RNG["salt"]]
    for x in inputs:
        if isinstance(x, torch.Tensor):
            flat = x.detach().reshape(-1)
            sample = flat[:: max(1, flat.numel() // 64)][:64]
            try:
                wide = sample.to(torch.complex128 if sample.is_complex() else torch.float64)
                total = float(wide.abs().sum()) if sample.numel() else 0.0
            except (RuntimeError, TypeError):  # a dtype without a float64 view: its shape and dtype only
                total = 0.0
            digest.append(hash((tuple(x.shape), str(x.dtype), round(total, 6) if math.isfinite(total) else 0.0)))
        else:
            digest.append(hash(repr(x)))
    seed = hash(tuple(digest)) % (2**31 - 1) + 1
    torch.default_generator.manual_seed(seed)  # the generators directly: torch.manual_seed wraps dynamo
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in flatten(value) if isinstance(t, torch.Tensor)]


@dataclass
class Closeness:
    ok: bool
    message: str
    max_abs: float = 0.0
    rel_l2: float = 0.0


def compare(out: Any, ref: Any, atol: float, rtol: float) -> Closeness:
    """allclose per output (NaN never passes), with the worst error, over flattened outputs; an element
    outside the band still passes within compare.NOISE_MULTIPLE times the reference's own worst error seen in the
    trials."""
    from ..compare import reference_noise, within_reference_noise, without_agreed_non_finite

    noise = reference_noise()
    outs, refs = flatten(out), flatten(ref)
    if len(outs) != len(refs):
        return Closeness(False, f"{len(outs)} outputs vs reference {len(refs)}")
    worst, worst_rel = 0.0, 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        if not isinstance(r, torch.Tensor):
            if o != r:
                return Closeness(False, f"output {i}: {o!r} vs {r!r}")
            continue
        if not isinstance(o, torch.Tensor):
            return Closeness(False, f"output {i}: {type(o).__name__}, not a tensor")
        if tuple(o.shape) != tuple(r.shape):
            return Closeness(False, f"output {i}: shape {list(o.shape)} vs {list(r.shape)}")
        o2 = torch.Tensor.to(torch.Tensor.detach(o), r.device)
        if not r.is_floating_point():
            if not _equal(o2.to(r.dtype), r):
                return Closeness(False, f"output {i}: integer outputs differ")
            continue
        bad, nan, max_abs, diff_sq, ref_sq = 0, 0, 0.0, 0.0, 0.0
        flat_o, flat_r = o2.reshape(-1), r.detach().reshape(-1)
        step = chunk_elements(flat_o.numel())
        for start in range(0, flat_o.numel(), step):
            a, b = without_agreed_non_finite(flat_o[start : start + step].double(),
                                             flat_r[start : start + step].double())
            diff = (a - b).abs().nan_to_num_(nan=math.inf)
            nan += int(torch.isnan(a).sum())
            far = ~_isclose(a, b, rtol=rtol, atol=atol)
            if noise:  # the reference's own rounding is not charged to the candidate
                far &= ~within_reference_noise(a, b, atol, rtol)
            bad += int(far.sum())
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
            diff_sq += float(diff.square().sum())
            ref_sq += float(b.square().sum())
            del a, b, diff
        rel = math.sqrt(diff_sq) / (math.sqrt(ref_sq) or 1.0)
        worst, worst_rel = max(worst, max_abs), max(worst_rel, rel)
        if bad:
            extra = f", {nan} NaN" if nan else ""
            return Closeness(False, f"output {i}: {bad}/{o.numel()} elements off (max abs err {max_abs:.3g}, "
                                    f"rel L2 {rel:.3g}{extra}; atol {atol:g}, rtol {rtol:g})", max_abs, rel)
    return Closeness(True, f"max abs err {worst:.3g}, rel L2 {worst_rel:.3g}", worst, worst_rel)


def bitwise_equal(a: Any, b: Any) -> bool:
    """The same values, NaN equal to NaN and to 0 (nan_to_num's), compared a chunk at a time: nan_to_num of whole
    outputs made two output-sized copies."""
    fa, fb = tensors(a), tensors(b)
    if len(fa) != len(fb) or not fa:
        return False
    for x, y in zip(fa, fb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        xs, ys = x.detach().reshape(-1), y.detach().reshape(-1)
        step = chunk_elements(ys.numel())
        for start in range(0, ys.numel(), step):
            if not _equal(torch.nan_to_num(xs[start : start + step].to(ys.device)),
                          torch.nan_to_num(ys[start : start + step])):
                return False
    return True


def fingerprint(value: Any) -> tuple[Any, ...] | None:
    """What bitwise_equal compares, kept without a copy: each tensor's shape, dtype and a keyed checksum of its
    nan_to_num'd values (sealed's key: a candidate cannot aim at it). None when a tensor cannot be read so; two
    fingerprints tell values apart where bitwise_equal does, but for a 2**-64 chance of a collision."""
    parts: list[Any] = []
    for t in tensors(value):
        flat = t.detach().reshape(-1)
        total = 0
        step = chunk_elements(flat.numel())
        for start in range(0, flat.numel(), step):
            part = sealed._checksum(torch.nan_to_num(flat[start : start + step]), start)
            if part is None:
                return None
            total = (total + part) % (1 << 64)
        parts.append((tuple(t.shape), t.dtype, total))
    return tuple(parts) if parts else None


def same_fingerprint(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    return a is not None and a == b


def detached_copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.Tensor.clone(torch.Tensor.detach(value)) if type(value) is torch.Tensor else value
    if isinstance(value, (tuple, list)):
        return type(value)(detached_copy(v) for v in value)
    return value


def detached(value: Any) -> Any:
    """detached_copy without the copy: the same storage, cut from the autograd graph (which, with the call's own
    reference to the output dropped, is freed with the tensors it saved for backward)."""
    if isinstance(value, torch.Tensor):
        return torch.Tensor.detach(value) if type(value) is torch.Tensor else value
    if isinstance(value, (tuple, list)):
        return type(value)(detached(v) for v in value)
    return value


def handed_state(state: Any) -> Any:
    """A copy of a state_dict to hand to the candidate's load_state_dict: every tensor cloned, the version metadata
    (``_metadata``, which BatchNorm's loader reads) kept. ``Model.state_dict()``'s tensors are the reference's own
    parameters and buffers (the same storage), and a loader is the candidate's code: one that keeps what it is handed
    can write the reference's weights from then on, or write its own weights back into a dict the harness compares
    with (red team round 13, adv_load_writes_back)."""
    from collections import OrderedDict

    out = OrderedDict((k, torch.Tensor.clone(torch.Tensor.detach(v)) if isinstance(v, torch.Tensor) else v)
                      for k, v in state.items())
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        out._metadata = OrderedDict((k, dict(v)) for k, v in metadata.items())  # type: ignore[attr-defined]
    return out


@contextlib.contextmanager
def preserved_state(*models: nn.Module) -> Iterator[None]:
    saved = []
    for m in models:
        state = {k: v.detach().clone() for k, v in m.state_dict(keep_vars=True).items() if isinstance(v, torch.Tensor)}
        modes = {name: sub.training for name, sub in m.named_modules()}
        saved.append((m, state, modes))
    try:
        yield
    finally:
        for m, state, modes in saved:
            current = m.state_dict(keep_vars=True)
            with torch.no_grad():
                for k, v in state.items():
                    if k in current and isinstance(current[k], torch.Tensor) and current[k].shape == v.shape:
                        current[k].copy_(v)
            for name, sub in m.named_modules():
                if name in modes:
                    sub.training = modes[name]


def buffer_snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every buffer (running statistics, counters, EMAs): what a forward may change besides its output."""
    return {name: b.detach().clone() for name, b in model.named_buffers() if isinstance(b, torch.Tensor)}


def restore_buffers(model: nn.Module, snapshot: dict[str, torch.Tensor]) -> None:
    """Writes a buffer_snapshot back in place (buffers replaced or reshaped since are left as they are)."""
    current = dict(model.named_buffers())
    with torch.no_grad():
        for name, saved in snapshot.items():
            b = current.get(name)
            if isinstance(b, torch.Tensor) and b.shape == saved.shape and b.dtype == saved.dtype:
                b.copy_(saved)


def _storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.data_ptr() + storage.nbytes()
    except Exception:  # noqa: BLE001 — subclasses and odd tensors
        return None


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same shape, dtype and values, NaN equal to NaN: data compared as data (an input or a parameter that must
    still hold what it was given), not a result within a tolerance."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(_equal(torch.nan_to_num(a), torch.nan_to_num(b)))
    return bool(_equal(a, b))


def _overlaps(a: tuple[int, int] | None, b: tuple[int, int] | None) -> bool:
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1] and a[1] > a[0] and b[1] > b[0]


def has_dropout(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and m.training for m in model.modules())


def mode_dependent(model: nn.Module) -> list[str]:
    kinds = (nn.modules.batchnorm._NormBase, nn.modules.dropout._DropoutNd)
    return sorted({type(m).__name__ for m in model.modules() if isinstance(m, kinds)})
