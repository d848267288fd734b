"""The problem's model and inputs on the meta device, so a 6 GB input or weight costs nothing.

Tensor factories (torch.rand, randn, zeros, full, tensor, ...) are redirected to one device with a
TorchFunctionMode, which also catches explicit `device="cuda"` arguments, `.cuda()` and `.to("cuda")`
(problems build their inputs on the GPU). When meta cannot serve (an `__init__` that calls `.item()`,
inputs whose values are read), the same code runs on the CPU and the result is moved to meta.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode


def _constructors() -> set[Any]:
    try:
        from torch.utils._device import _device_constructors

        return set(_device_constructors())
    except ImportError:  # torch < 2.0
        names = "empty empty_strided empty_like zeros zeros_like ones ones_like full full_like rand rand_like randn randn_like randint randint_like randperm arange linspace logspace eye tensor as_tensor scalar_tensor"
        return {getattr(torch, n) for n in names.split() if hasattr(torch, n)}


_CONSTRUCTORS = _constructors()
_IDENTITY_METHODS = {torch.Tensor.cuda, torch.Tensor.cpu, torch.Tensor.pin_memory}
# In-place random fills whose meta version runs through torch's Python references, whose first call imports
# torch._dynamo (seconds of a capture: a CNN's normal_ / kaiming_normal_ init). On meta, where a fill has no
# values to write, they only return the tensor; so do torch.nn.init's in-place initialisers, which dispatch to
# this mode themselves (and their own fill would then run with the mode off).
_META_FILLS = {getattr(torch.Tensor, n) for n in ("normal_", "exponential_", "log_normal_", "cauchy_", "geometric_")
               if hasattr(torch.Tensor, n)}


def _meta_fill_target(func: Any, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The meta tensor an in-place random fill or torch.nn.init initialiser is called on, else None."""
    if func in _META_FILLS:
        target = args[0] if args else None
    elif getattr(func, "__module__", None) == "torch.nn.init" and getattr(func, "__name__", "").endswith("_"):
        target = kwargs.get("tensor", args[0] if args else None)
    else:
        return None
    return target if isinstance(target, torch.Tensor) and target.is_meta else None


def _is_device(value: Any) -> bool:
    return isinstance(value, (torch.device, int)) and not isinstance(value, bool) or (
        isinstance(value, str) and value.split(":")[0] in ("cuda", "cpu", "meta", "mps", "xpu", "hip")
    )


class FactoriesOn(TorchFunctionMode):
    """Every tensor made or moved inside goes to one device (meta or cpu)."""

    def __init__(self, device: str) -> None:
        super().__init__()
        self.device = device

    def _foreign(self, t: torch.Tensor) -> bool:
        """A real tensor on another device (meta has no values to move)."""
        return t.device.type != self.device and not t.is_meta

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 — torch's protocol
        kwargs = dict(kwargs or {})
        if func in _CONSTRUCTORS:
            kwargs["device"] = self.device
            kwargs.pop("pin_memory", None)
        elif self.device == "meta" and (target := _meta_fill_target(func, args, kwargs)) is not None:
            return target
        elif func in _IDENTITY_METHODS:  # a move: to this device (a literal fx built on the CPU, say)
            return args[0].to(self.device) if self._foreign(args[0]) else args[0]
        elif func is torch.Tensor.to:
            moves = "device" in kwargs or any(_is_device(a) for a in args[1:])
            kwargs.pop("device", None)
            kwargs.pop("non_blocking", None)
            args = (args[0], *(a for a in args[1:] if not _is_device(a)))
            if moves and self._foreign(args[0]):
                kwargs["device"] = self.device
            if len(args) == 1 and not kwargs:
                return args[0]
        return func(*args, **kwargs)


def _to_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value if value.is_meta else value.detach().to("meta").requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        return type(value)(_to_meta(v) for v in value)
    return value


def meta_inputs(get_inputs: Callable[[], Any], log: Callable[[str], None]) -> list[Any]:
    """get_inputs() with tensors on meta; non-tensors kept as values."""
    try:
        with FactoriesOn("meta"):
            inputs = get_inputs()
    except Exception as exc:  # noqa: BLE001 — any failure on meta: the values were needed, use real ones
        log(f"get_inputs() on meta failed ({type(exc).__name__}: {exc}); building inputs on the CPU")
        with FactoriesOn("cpu"):
            inputs = get_inputs()
    return [_to_meta(v) for v in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]


def _plain_tensors_to_meta(model: nn.Module) -> None:
    """Tensor attributes that are neither parameters nor buffers (`.to()` leaves them behind)."""
    for module in model.modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and not value.is_meta and not name.startswith("_"):
                setattr(module, name, _to_meta(value))


def _is_counter(buf: Any) -> bool:
    """A lazy module's buffer has no shape to read until its first call (capture's pipeline makes that call)."""
    if isinstance(buf, torch.nn.parameter.UninitializedTensorMixin):
        return False
    return isinstance(buf, torch.Tensor) and buf.dim() == 0 and not buf.is_floating_point() and not buf.is_complex()


def _counters(model: nn.Module) -> dict[tuple[str, str], torch.Tensor]:
    return {(path, name): buf for path, module in model.named_modules() for name, buf in module._buffers.items()
            if _is_counter(buf)}


def _counters_on_cpu(model: nn.Module, values: dict[tuple[str, str], torch.Tensor]) -> None:
    """0-d integer buffers (BatchNorm's num_batches_tracked) back on the CPU: a forward may read them as Python
    numbers (BatchNorm with momentum=None divides by it), which a meta tensor cannot give, and a 0-d CPU tensor
    mixes with tensors on any device. Their values where the model was built on the CPU, else zeros (a fresh
    counter's)."""
    for path, module in model.named_modules():
        for name, buf in list(module._buffers.items()):
            if _is_counter(buf) and buf.is_meta:
                known = values.get((path, name))
                module._buffers[name] = known if known is not None else torch.zeros((), dtype=buf.dtype)


def meta_model(model_class: type, init_inputs: list[Any], log: Callable[[str], None]) -> tuple[nn.Module, str]:
    """Model(*init_inputs) on meta, and how it was built ("meta" or "cpu")."""
    counters: dict[tuple[str, str], torch.Tensor] = {}
    try:
        with FactoriesOn("meta"), torch.device("meta"):
            model = model_class(*init_inputs)
        how = "meta"
    except Exception as exc:  # noqa: BLE001 — __init__ needed real values (.item(), numpy, ...)
        log(f"Model(*get_init_inputs()) on meta failed ({type(exc).__name__}: {exc}); building on the CPU")
        with FactoriesOn("cpu"):
            model = model_class(*init_inputs)
        counters = {key: buf.clone() for key, buf in _counters(model).items()}
        model = model.to("meta")
        how = "cpu"
    _counters_on_cpu(model, counters)
    _plain_tensors_to_meta(model)
    return model, how


def stderr_log(message: str) -> None:
    print(f"kforge_worker capture: {message}", file=sys.stderr, flush=True)
