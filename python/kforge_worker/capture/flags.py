"""Which nodes depend on train/eval mode, draw random numbers, or write their inputs in place."""

from __future__ import annotations

from typing import Any

import torch.nn as nn

from .ops import OpSpec

_DROPOUTS = frozenset({"dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d"})
_MODE_DEPENDENT = _DROPOUTS | {"batch_norm", "rrelu"}
_RNG = frozenset(
    "rand randn randint rand_like randn_like randint_like randperm bernoulli multinomial normal poisson "
    "normal_ uniform_ bernoulli_ exponential_ random_ cauchy_ geometric_ log_normal_".split()
)
_STATEFUL_MODULES = tuple(
    getattr(nn, n)
    for n in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "RReLU")
    if hasattr(nn, n)
)
_NORMS_WITH_STATS = (nn.modules.batchnorm._BatchNorm, nn.modules.instancenorm._InstanceNorm)


def _const(bound: dict[str, Any] | None, name: str, default: Any = None) -> Any:
    if not bound or name not in bound:
        return default
    return bound[name][0]


def _dropout_active(bound: dict[str, Any] | None, p_name: str = "p") -> bool:
    p, training = _const(bound, p_name, 0.5), _const(bound, "training", True)
    # A non-constant p or training flag (a graph value) counts as active: we cannot prove otherwise.
    return not (isinstance(p, (int, float)) and p == 0) and training is not False


def _module_is_mode_dependent(module: nn.Module) -> bool:
    if isinstance(module, nn.modules.batchnorm._BatchNorm) or isinstance(module, _STATEFUL_MODULES):
        return True
    if isinstance(module, nn.modules.instancenorm._InstanceNorm):
        return bool(module.track_running_stats)
    # Only these keep `dropout` as a probability: elsewhere it is often a child nn.Dropout (a Transformer layer's,
    # a user's block left untraced), which counts as a module of its own above.
    return isinstance(module, (nn.MultiheadAttention, nn.RNNBase)) and float(getattr(module, "dropout", 0) or 0) > 0


def _module_draws(module: nn.Module) -> bool:
    if isinstance(module, _STATEFUL_MODULES):
        return module.training and (isinstance(module, nn.RReLU) or float(getattr(module, "p", 1) or 0) > 0)
    if isinstance(module, (nn.MultiheadAttention, nn.RNNBase)):
        return module.training and float(getattr(module, "dropout", 0) or 0) > 0
    return False


def node_flags(spec: OpSpec, bound: dict[str, Any] | None, module: nn.Module | None, method: str | None) -> dict[str, bool]:
    op = spec.op
    if module is not None:
        inner = list(module.modules())  # a leaf the problem wrote counts by what it contains
        mode = any(_module_is_mode_dependent(m) for m in inner)
        rng = any(_module_draws(m) for m in inner)
        inplace = bool(getattr(module, "inplace", False)) and isinstance(getattr(module, "inplace"), bool)
    else:
        mode = op in _MODE_DEPENDENT or (op == "instance_norm" and _const(bound, "running_mean") is not None)
        rng = op in _RNG or (method in _RNG if method else False)
        if op in _DROPOUTS:
            rng = _dropout_active(bound)
        elif op == "scaled_dot_product_attention":
            p = _const(bound, "dropout_p", 0.0)
            rng = not (isinstance(p, (int, float)) and p == 0)
        elif op == "rrelu":
            rng = _const(bound, "training", False) is not False
        # torch.sigmoid(x, out=buf) writes buf as x.sigmoid_() writes x
        inplace = spec.inplace or _const(bound, "inplace", False) is True or _const(bound, "out") is not None
        if method is not None and method.endswith("_") and not method.endswith("__"):
            inplace = True
    return {"modeDependent": bool(mode), "rng": bool(rng), "inplace": bool(inplace)}
