"""A call normalised to its op's functional signature: canonical keyword names, defaults filled in.

Works on the raw call (fx values: Nodes, Python scalars, ParamRefs) so the per-op fix-ups can read
constants: dim as a list of ints or None for reductions, conv/pool configuration as lists of n ints,
max_pool's stride defaulting to its kernel, var/std's legacy `unbiased` as `correction`, torch.norm's
`p` as vector_norm's `ord`, softmax's implicit dim resolved from the input's rank, the losses' legacy
`size_average`/`reduce` (and ATen's integer enum) as `reduction`. Module calls take
what the call does not pass from the module (weights as parameter paths, eps, momentum, stride, ...).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch
import torch.nn as nn

from .encode import as_list
from .ops import OpSpec
from .signatures import SIGNATURES, Bound, bind


@dataclass(frozen=True)
class ParamRef:
    """A parameter or buffer by state_dict path (encoded as {t:"param"})."""

    path: str


@dataclass
class Facts:
    """What normalisation may ask about a value of the graph."""

    is_tensor: Callable[[Any], bool]
    rank: Callable[[Any], "int | None"]
    dtype: Callable[[Any], "torch.dtype | None"] = lambda _value: None
    #: A graph value's ints at the captured shapes (`x.shape[-1:]`, `x.size(1)`), None when it is not sizes.
    sizes: Callable[[Any], Any] = lambda _value: None


_MISSING = object()


def refine(spec: OpSpec, args: list[Any], kwargs: dict[str, Any], facts: Facts) -> OpSpec:
    """torch.max/min: whole-tensor (max), along a dim (max_dim, a (values, indices) tuple) or against a
    tensor (maximum); norms by their order."""
    if spec.op in ("max", "min"):
        second = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("dim", _MISSING))
        if "other" in kwargs or (second is not _MISSING and facts.is_tensor(second)):
            return OpSpec("maximum" if spec.op == "max" else "minimum")
        if second is not _MISSING:
            name = f"{spec.op}_dim"
            return OpSpec(name, name)
    return spec


def _dims(value: Any) -> Any:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, tuple):
        return list(value)
    return value


def _set(bound: Bound, name: str, value: Any) -> None:
    explicit = bound.get(name, (None, False))[1]
    bound[name] = (value, explicit)


def _value(bound: Bound, name: str) -> Any:
    return bound[name][0] if name in bound else None


def _reduction(bound: Bound, _facts: Facts, _op: str) -> None:
    _set(bound, "dim", _dims(_value(bound, "dim")))


def _variance(bound: Bound, _facts: Facts, _op: str) -> None:
    dim, unbiased, correction = _value(bound, "dim"), _value(bound, "unbiased"), _value(bound, "correction")
    if isinstance(dim, bool):  # torch.var(x, False): the legacy (input, unbiased) overload
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    _set(bound, "dim", _dims(dim))
    bound["correction"] = (correction, "correction" in bound and bound["correction"][1])


#: ATen's Reduction enum (torch.nn._reduction.get_enum): the losses' `reduction` as an int in exported graphs.
_REDUCTION_BY_ENUM = {0: "none", 1: "mean", 2: "sum"}


def legacy_reduction(size_average: Any, reduce: Any) -> str:
    """torch.nn._reduction.legacy_get_string: None counts as True; reduce=False wins over size_average."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def _loss_reduction(bound: Bound) -> bool:
    """`reduction` as one of "none" / "mean" / "sum" (or the op's own, like kl_div's "batchmean"): either
    legacy keyword given overrides it, as in every torch.nn.functional loss. False when that cannot be known
    (a legacy keyword that is not a constant)."""
    size_average = bound.pop("size_average", (None, False))[0]
    reduce = bound.pop("reduce", (None, False))[0]
    if size_average is not None or reduce is not None:
        if not all(v is None or isinstance(v, (bool, int)) for v in (size_average, reduce)):
            return False
        bound["reduction"] = (legacy_reduction(size_average, reduce), True)
        return True
    reduction, explicit = bound["reduction"]
    if isinstance(reduction, int) and not isinstance(reduction, bool):
        if reduction not in _REDUCTION_BY_ENUM:
            return False
        bound["reduction"] = (_REDUCTION_BY_ENUM[reduction], explicit)
    return True


def _softmax(bound: Bound, facts: Facts, _op: str) -> None:
    if _value(bound, "dim") is None:
        rank = facts.rank(_value(bound, "input"))
        if rank is not None:  # nn.functional._get_softmax_dim, the legacy implicit choice
            _set(bound, "dim", 0 if rank in (0, 1, 3) else 1)


def _cast(bound: Bound, _facts: Facts, _op: str) -> None:
    """Tensor.to(dtype) given positionally binds to `*args`: a lone dtype there is the `dtype` argument."""
    args = _value(bound, "args")
    if "dtype" not in bound and isinstance(args, (list, tuple)) and len(args) == 1 and isinstance(args[0], torch.dtype):
        explicit = bound.pop("args")[1]
        bound["dtype"] = (args[0], explicit)


def _trailing_shape(bound: Bound, facts: Facts) -> None:
    """normalized_shape read from a tensor (`F.layer_norm(x, x.shape[-1:])`) as its ints at the captured shapes:
    only their count tells the kernel anything (the call fails unless they are the input's trailing sizes), and
    that count is the same at every shape of the captured rank."""
    shape = _value(bound, "normalized_shape")
    if isinstance(shape, (list, tuple)):
        sizes = [v if isinstance(v, int) else facts.sizes(v) for v in shape]
    else:
        sizes = facts.sizes(shape)
        sizes = [sizes] if isinstance(sizes, int) else sizes
    if isinstance(sizes, (list, tuple)) and sizes and all(isinstance(v, int) for v in sizes):
        _set(bound, "normalized_shape", list(sizes))


def _layer_norm(bound: Bound, facts: Facts, _op: str) -> None:
    _trailing_shape(bound, facts)


def _rms_norm(bound: Bound, facts: Facts, _op: str) -> None:
    """eps None is the input dtype's machine epsilon (F.rms_norm's default, nn.RMSNorm's too)."""
    _trailing_shape(bound, facts)
    dtype = facts.dtype(_value(bound, "input"))
    if _value(bound, "eps") is None and dtype is not None and dtype.is_floating_point:
        bound["eps"] = (torch.finfo(dtype).eps, False)


def _spatial(n: int, names: tuple[str, ...]) -> Callable[[Bound, Facts, str], None]:
    def fix(bound: Bound, _facts: Facts, op: str) -> None:
        for name in names:
            if name in bound:
                _set(bound, name, as_list(_value(bound, name), n))
        if op.startswith("max_pool") and _value(bound, "stride") in (None, []):
            _set(bound, "stride", _value(bound, "kernel_size"))

    return fix


_FIXES: dict[str, Callable[[Bound, Facts, str], None]] = {
    **{op: _reduction for op in ("sum", "nansum", "mean", "prod", "amax", "amin", "logsumexp", "vector_norm")},
    "var": _variance,
    "std": _variance,
    "softmax": _softmax,
    "log_softmax": _softmax,
    "softmin": _softmax,
    "to": _cast,
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
}
for _n in (1, 2, 3):
    _FIXES[f"conv{_n}d"] = _spatial(_n, ("stride", "padding", "dilation"))
    _FIXES[f"conv_transpose{_n}d"] = _spatial(_n, ("stride", "padding", "output_padding", "dilation"))
    _FIXES[f"max_pool{_n}d"] = _spatial(_n, ("kernel_size", "stride", "padding", "dilation"))
    _FIXES[f"avg_pool{_n}d"] = _spatial(_n, ("kernel_size", "stride", "padding"))
    _FIXES[f"adaptive_avg_pool{_n}d"] = _spatial(_n, ("output_size",))
    _FIXES[f"adaptive_max_pool{_n}d"] = _spatial(_n, ("output_size",))


def _norm_to_vector_norm(spec: OpSpec, bound: Bound, facts: Facts) -> tuple[OpSpec, Bound]:
    """torch.norm / Tensor.norm / linalg.norm → vector_norm {input, ord, dim, keepdim, dtype} (Frobenius
    is ord 2 over the dims), or matrix_norm for the nuclear and matrix orders."""
    if spec.sig == "norm":
        order, order_explicit = bound.pop("p")
    else:
        order, order_explicit = bound.pop("ord")
    dim = _value(bound, "dim")
    as_matrix = order == "nuc" or (
        spec.sig == "linalg_norm"
        and order not in (None, "fro")
        and (
            (isinstance(dim, (list, tuple)) and len(dim) == 2)
            or (dim is None and facts.rank(_value(bound, "input")) == 2)
        )
    )
    if as_matrix:
        rank = facts.rank(_value(bound, "input"))
        if dim is None and rank is not None:  # both norms take a matrix norm without dims over every dim
            bound["dim"] = (list(range(rank)), False)
        out = Bound(input=bound["input"], ord=(order, order_explicit), dim=bound["dim"], keepdim=bound["keepdim"])
        out["dtype"] = bound.get("dtype", (None, False))
        return OpSpec("matrix_norm", "matrix_norm"), out
    if order in (None, "fro"):
        order, order_explicit = 2, False
    out = Bound(input=bound["input"], ord=(order, order_explicit), dim=bound["dim"], keepdim=bound["keepdim"])
    out["dtype"] = bound.get("dtype", (None, False))
    return OpSpec("vector_norm", "vector_norm"), out


def finish(spec: OpSpec, bound: Bound | None, facts: Facts) -> tuple[OpSpec, Bound | None]:
    """Presets merged, per-op fix-ups applied."""
    if bound is None:
        return spec, None
    for name, value in spec.presets.items():
        if name not in bound or not bound[name][1]:
            bound[name] = (value, False)
    if spec.op == "vector_norm" and spec.sig in ("norm", "linalg_norm"):
        spec, bound = _norm_to_vector_norm(spec, bound, facts)
    if spec.op == "matrix_norm" and _value(bound, "ord") == "fro":
        # ATen computes the Frobenius matrix norm as linalg_vector_norm(A, 2, dim, keepdim, dtype)
        bound["ord"] = (2, False)
        spec = OpSpec("vector_norm", "vector_norm")
    if "reduction" in bound and not _loss_reduction(bound):
        return spec, None
    fix = _FIXES.get(spec.op)
    if fix is not None:
        fix(bound, facts, spec.op)
    bound.pop("unbiased", None)
    return spec, bound


def normalise_call(spec: OpSpec, args: list[Any], kwargs: dict[str, Any], facts: Facts,
                   literal: Callable[[Any], Any] | None = None) -> tuple[OpSpec, Bound | None]:
    """A call_function / call_method (self first) through its op's signature. `literal` turns an argument that is
    a constant tensor into its Python number, once the call is known (torch.min(x, tensor) is minimum)."""
    spec = refine(spec, args, kwargs, facts)
    if literal is not None:
        args, kwargs = [literal(a) for a in args], {k: literal(v) for k, v in kwargs.items()}
    sig = SIGNATURES.get(spec.signature)
    if sig is None:
        return spec, None
    bound = bind(sig, args, kwargs)
    if spec.reflected and bound is not None:
        # after binding, so a keyword `other=` (torch.rsub(x, other=y)) swaps as a positional one does
        first, second = sig.positional[:2]
        bound[first], bound[second] = bound[second], bound[first]
    return finish(spec, bound, facts)


#: Ops whose float hyper-parameter decides what is planned (a dropout of p = 0 is no op): its captured value stays.
_PLANNED_FLOATS = frozenset({"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"})


def _renames_first_input(module: nn.Module, path: str, sig: Any, call: dict[str, Any], first: str) -> bool:
    """Whether the forward's first argument is the functional's first positional under another name: a name the
    functional lacks (`forward(self, x)`), or one it gives a hyper-parameter while its input is bound by nothing
    else (PoissonNLLLoss' `forward(self, log_input, target)` beside poisson_nll_loss' bool `log_input`)."""
    if first == sig.positional[0]:
        return False
    if first not in sig.names:
        return True
    return sig.positional[0] not in call and _module_attr(module, path, sig.positional[0]) is _MISSING


def _module_attr(module: nn.Module, path: str, name: str) -> Any:
    if name in module._parameters or name in module._buffers:
        tensor = module._parameters.get(name, module._buffers.get(name))
        return None if tensor is None else ParamRef(f"{path}.{name}" if path else name)
    value = getattr(module, name, _MISSING)
    if isinstance(value, nn.Module) or callable(value):
        return _MISSING
    return value


def _module_overrides(module: nn.Module, path: str, op: str) -> dict[str, Any]:
    """What a module's forward computes before its functional call (F.batch_norm's `training`, ...)."""
    if op == "batch_norm":
        no_stats = getattr(module, "running_mean", None) is None and getattr(module, "running_var", None) is None
        use_stats = not module.training or getattr(module, "track_running_stats", True)
        out = {"training": module.training or no_stats}
        if not use_stats:
            out.update(running_mean=None, running_var=None)
        return out
    if op == "instance_norm":
        return {"use_input_stats": module.training or not getattr(module, "track_running_stats", False)}
    if op in ("dropout", "rrelu"):
        return {"training": module.training}
    return {}


def normalise_module(
    module: nn.Module, path: str, spec: OpSpec, args: list[Any], kwargs: dict[str, Any], facts: Facts
) -> tuple[OpSpec, Bound | None]:
    sig = SIGNATURES.get(spec.signature)
    if sig is None:
        return spec, None
    try:
        call = inspect.signature(module.forward).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return spec, None
    call = dict(call)
    first_forward = next(iter(call), None)
    if first_forward is not None and sig.positional and _renames_first_input(module, path, sig, call, first_forward):
        call[sig.positional[0]] = call.pop(first_forward)
    overrides = _module_overrides(module, path, spec.op)
    bound = Bound()
    for name in sig.positional + sig.keyword_only:
        if name in call:
            bound[name] = (call[name], True)
        elif name in overrides:
            bound[name] = (overrides[name], False)
        elif name in spec.presets:
            continue
        else:
            attr = _module_attr(module, path, name)
            if attr is not _MISSING:
                bound[name] = (attr, False)
                if isinstance(attr, (int, float)) and not isinstance(attr, bool) and spec.op not in _PLANNED_FLOATS:
                    # A hyper-parameter names its attribute (encode_fn): a float (LeakyReLU's slope, an eps) is read
                    # from the module at run time, an int (a dim, num_groups) guarded, so a ModelNew built with other
                    # constructor arguments computes with its own.
                    bound.module_attrs[name] = (f"{path}.{name}" if path else name, attr)
            elif name in sig.defaults:
                bound[name] = (sig.defaults[name], False)
            else:
                return spec, None
    if spec.op == "batch_norm" and "num_batches_tracked" in module._buffers:
        attr = _module_attr(module, path, "num_batches_tracked")
        bound["num_batches_tracked"] = (attr, False)
    return finish(replace(spec), bound, facts)
