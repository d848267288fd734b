"""What the model holds: parameters and buffers by state_dict path, submodules with their
hyper-parameters, and scalar attributes (with which of them a traced constant may stand for)."""

from __future__ import annotations

import inspect
import math
import re
from typing import Any

import torch
import torch.nn as nn

from .encode import encode_plain, meta_of_tensor

# Constructor hyper-parameters worth reporting, as module attribute names.
_HYPER = """eps momentum affine track_running_stats normalized_shape elementwise_affine num_features num_groups
num_channels in_features out_features in_channels out_channels kernel_size stride padding dilation groups
output_padding padding_mode ceil_mode count_include_pad divisor_override return_indices output_size
approximate dim negative_slope min_val max_val alpha beta threshold value lambd lower upper p inplace
start_dim end_dim unflattened_size reduction ignore_index label_smoothing log_target delta margin swap
embed_dim num_heads dropout batch_first kdim vdim add_bias_kv add_zero_attn hidden_size input_size num_layers
bidirectional proj_size nonlinearity bias_flag upscale_factor downscale_factor scale_factor mode align_corners
size k num_embeddings embedding_dim padding_idx max_norm norm_type scale_grad_by_freq sparse""".split()
_INTERNAL = {"training", "dump_patches", "call_super_init"}
_TORCH_NN = "torch.nn."


def params_info(model: nn.Module) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, p in model.named_parameters(remove_duplicate=False):
        out[path] = {"kind": "parameter", "meta": meta_of_tensor(p), "requiresGrad": bool(p.requires_grad)}
    for path, b in model.named_buffers(remove_duplicate=False):
        out[path] = {"kind": "buffer", "meta": meta_of_tensor(b), "requiresGrad": bool(b.requires_grad)}
    return out


def _hyper_value(module: nn.Module, name: str) -> Any:
    if name in module._parameters or name in module._buffers:
        return None
    value = getattr(module, name, None)
    if isinstance(value, (bool, int, float, str, type(None), tuple, list)) and not isinstance(value, torch.Tensor):
        return value
    return None


def modules_info(model: nn.Module) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        if not path:
            continue
        attrs = vars(module)
        hyper = {name: encode_plain(_hyper_value(module, name)) for name in _HYPER if name in attrs}
        if "bias" in module._parameters or "bias" in attrs:
            hyper["bias"] = encode_plain(module._parameters.get("bias") is not None or attrs.get("bias") is True)
        out[path] = {"type": f"{type(module).__module__}.{type(module).__qualname__}", "training": module.training, "hyper": hyper}
        parametrizations = getattr(module, "parametrizations", None)
        if isinstance(parametrizations, nn.ModuleDict):
            out[path]["parametrized"] = {name: [type(p).__name__ for p in plist] for name, plist in parametrizations.items()}
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) and (not isinstance(value, float) or math.isfinite(value))


def scalar_attrs(model: nn.Module) -> dict[str, int | float | bool]:
    out: dict[str, int | float | bool] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        for name, value in vars(module).items():
            if name.startswith("_") or name in _INTERNAL or not _is_number(value):
                continue
            out[f"{path}.{name}" if path else name] = value
    return out


def _forward_text(module: nn.Module, root_source: str | None) -> str | None:
    if root_source is not None:
        return root_source
    try:
        return inspect.getsource(type(module))
    except (OSError, TypeError):
        return None


class AttrMatcher:
    """Which model attribute a traced scalar constant stands for: exactly one int/float attribute of a
    module written by the problem (not torch.nn's own) with that value and Python type, read as
    ``self.<name>`` in that module's code. Ambiguous or absent → None (the number stays baked in)."""

    def __init__(self, model: nn.Module, model_code: str) -> None:
        self._by_value: dict[tuple[type, Any], list[str]] = {}
        for path, module in model.named_modules(remove_duplicate=False):
            if type(module).__module__.startswith(_TORCH_NN) and path:
                continue
            code = _forward_text(module, model_code if not path else None)
            for name, value in vars(module).items():
                if name.startswith("_") or name in _INTERNAL or isinstance(value, bool) or not _is_number(value):
                    continue
                if code is not None and not re.search(rf"\bself\.{re.escape(name)}\b", code):
                    continue
                key = (type(value), value)
                self._by_value.setdefault(key, []).append(f"{path}.{name}" if path else name)

    def match(self, value: Any, scope: set[str] | None = None) -> str | None:
        """`scope`: the modules whose forward made the call (the root's path is ""): only their attributes can be
        what the call read (a literal `1` in the root's forward is not a submodule's `stride`). None: any."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        paths = self._by_value.get((type(value), value), [])
        if scope is not None:
            paths = [p for p in paths if p.rpartition(".")[0] in scope]
        return paths[0] if len(paths) == 1 else None
