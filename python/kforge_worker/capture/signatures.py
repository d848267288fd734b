"""Functional signatures of canonical ops, as data: how a call's arguments bind to canonical names.

Each entry is written like a Python def (``"softmax(input, dim=None, _stacklevel=3, dtype=None)"``) and
parsed once with ast. Binding fills defaults, maps keyword aliases (axis→dim, self→input) and collects
varargs (``x.view(2, 3)`` and ``x.view((2, 3))`` both give size [2, 3]). Parameters that only steer the
call (``_stacklevel``, ``out``, ``inplace``) are dropped from fn; the node's own flags carry what matters
of them. The losses' legacy ``size_average``/``reduce`` are folded into ``reduction`` (normalize.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

_UNARY = """relu sigmoid tanh exp exp2 expm1 log log2 log10 log1p abs sqrt rsqrt reciprocal erf erfc erfinv sin cos
tan asin acos atan sinh cosh asinh acosh atanh neg square sign sgn sinc entr ndtr log_ndtr floor ceil trunc frac
silu mish selu
hardswish hardsigmoid softsign logsigmoid tanhshrink identity positive bitwise_not logical_not isnan isinf
isfinite contiguous clone detach t numel dim""".split()

_SOURCES = [
    *(f"{name}(input, inplace=False)" for name in _UNARY),
    "gelu(input, approximate='none')",
    "leaky_relu(input, negative_slope=0.01, inplace=False)",
    "hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False)",
    "relu6(input, inplace=False)",
    "elu(input, alpha=1.0, inplace=False)",
    "celu(input, alpha=1.0, inplace=False)",
    "softplus(input, beta=1.0, threshold=20.0)",
    "threshold(input, threshold, value, inplace=False)",
    "hardshrink(input, lambd=0.5)",
    "softshrink(input, lambd=0.5)",
    "prelu(input, weight)",
    "rrelu(input, lower=0.125, upper=0.3333333333333333, training=False, inplace=False)",
    "glu(input, dim=-1)",
    "logit(input, eps=None)",
    "round(input, decimals=0, inplace=False)",
    "nan_to_num(input, nan=0.0, posinf=None, neginf=None)",
    "add(input, other, alpha=1)",
    "sub(input, other, alpha=1)",
    "mul(input, other)",
    "div(input, other, rounding_mode=None)",
    "remainder(input, other)",
    "fmod(input, other)",
    "pow(input, exponent)",
    "atan2(input, other)",
    "hypot(input, other)",
    "copysign(input, other)",
    "heaviside(input, values)",
    "logaddexp2(input, other)",
    "xlogy(input, other)",
    "xlog1py(input, other)",
    "logaddexp(input, other)",
    "minimum(input, other)",
    "maximum(input, other)",
    "fmin(input, other)",
    "fmax(input, other)",
    "eq(input, other)",
    "ne(input, other)",
    "lt(input, other)",
    "le(input, other)",
    "gt(input, other)",
    "ge(input, other)",
    "logical_and(input, other)",
    "logical_or(input, other)",
    "logical_xor(input, other)",
    "bitwise_and(input, other)",
    "bitwise_or(input, other)",
    "bitwise_xor(input, other)",
    "matmul(input, other)",
    "bmm(input, mat2)",
    "mm(input, mat2)",
    "mv(input, vec)",
    "dot(input, other)",
    "outer(input, vec2)",
    "addmm(input, mat1, mat2, beta=1, alpha=1)",
    "baddbmm(input, batch1, batch2, beta=1, alpha=1)",
    "addcmul(input, tensor1, tensor2, value=1)",
    "addcdiv(input, tensor1, tensor2, value=1)",
    "lerp(input, end, weight)",
    "where(condition, input=None, other=None)",
    # Tensor.where(condition, other) is torch.where(condition, self, other): self is not the first parameter.
    "where_method(input, condition, other)",
    "clamp(input, min=None, max=None)",
    "clamp_min(input, min)",
    "clamp_max(input, max)",
    "getitem(input, index)",
    "setitem(input, index, value)",
    "getattr(input, name)",
    "sum(input, dim=None, keepdim=False, dtype=None)",
    "nansum(input, dim=None, keepdim=False, dtype=None)",
    "mean(input, dim=None, keepdim=False, dtype=None)",
    "prod(input, dim=None, keepdim=False, dtype=None)",
    "amax(input, dim=None, keepdim=False)",
    "amin(input, dim=None, keepdim=False)",
    "logsumexp(input, dim=None, keepdim=False)",
    "all(input, dim=None, keepdim=False)",
    "any(input, dim=None, keepdim=False)",
    "max(input)",
    "min(input)",
    "max_dim(input, dim, keepdim=False)",
    "min_dim(input, dim, keepdim=False)",
    "aminmax(input, *, dim=None, keepdim=False)",
    "argmax(input, dim=None, keepdim=False)",
    "argmin(input, dim=None, keepdim=False)",
    "median(input, dim=None, keepdim=False)",
    "var(input, dim=None, unbiased=None, keepdim=False, *, correction=None)",
    "std(input, dim=None, unbiased=None, keepdim=False, *, correction=None)",
    "norm(input, p='fro', dim=None, keepdim=False, dtype=None)",
    "linalg_norm(input, ord=None, dim=None, keepdim=False, *, dtype=None)",
    "vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None)",
    "matrix_norm(input, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None)",
    "normalize(input, p=2.0, dim=1, eps=1e-12)",
    "cumsum(input, dim, *, dtype=None)",
    "cumprod(input, dim, *, dtype=None)",
    "cummax(input, dim)",
    "cummin(input, dim)",
    "softmax(input, dim=None, _stacklevel=3, dtype=None)",
    "log_softmax(input, dim=None, _stacklevel=3, dtype=None)",
    "softmin(input, dim=None, _stacklevel=3, dtype=None)",
    "sort(input, dim=-1, descending=False)",
    "argsort(input, dim=-1, descending=False, stable=False)",
    "topk(input, k, dim=-1, largest=True, sorted=True)",
    "batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05)",
    "instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-05)",
    "layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05)",
    "group_norm(input, num_groups, weight=None, bias=None, eps=1e-05)",
    "rms_norm(input, normalized_shape, weight=None, eps=None)",
    "local_response_norm(input, size, alpha=0.0001, beta=0.75, k=1.0)",
    *(f"conv{n}d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1)" for n in (1, 2, 3)),
    *(
        f"conv_transpose{n}d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1)"
        for n in (1, 2, 3)
    ),
    "linear(input, weight, bias=None)",
    "bilinear(input1, input2, weight, bias=None)",
    *(
        f"max_pool{n}d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False)"
        for n in (1, 2, 3)
    ),
    *(
        f"avg_pool{n}d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)"
        for n in (1, 2, 3)
    ),
    *(f"adaptive_avg_pool{n}d(input, output_size)" for n in (1, 2, 3)),
    *(f"adaptive_max_pool{n}d(input, output_size, return_indices=False)" for n in (1, 2, 3)),
    *(f"lp_pool{n}d(input, norm_type, kernel_size, stride=None, ceil_mode=False)" for n in (1, 2, 3)),
    "dropout(input, p=0.5, training=True, inplace=False)",
    *(f"{name}(input, p=0.5, training=False, inplace=False)" for name in ("alpha_dropout", "feature_alpha_dropout")),
    *(f"dropout{n}d(input, p=0.5, training=True, inplace=False)" for n in (1, 2, 3)),
    "scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)",
    "multi_head_attention(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False)",
    "embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False)",
    "interpolate(input, size=None, scale_factor=None, mode='nearest', align_corners=None, recompute_scale_factor=None, antialias=False)",
    "pad(input, pad, mode='constant', value=None)",
    "pixel_shuffle(input, upscale_factor)",
    "pixel_unshuffle(input, downscale_factor)",
    "one_hot(input, num_classes=-1)",
    "einsum(equation, *operands)",
    "repeat_interleave(input, repeats=None, dim=None, *, output_size=None)",
    *(f"{name}(input, n=None, dim=-1, norm=None)" for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")),
    *(
        f"{name}(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None)"
        for name in ("zeros_like", "ones_like", "empty_like", "rand_like", "randn_like")
    ),
    "full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None)",
    "mse_loss(input, target, size_average=None, reduce=None, reduction='mean')",
    "l1_loss(input, target, size_average=None, reduce=None, reduction='mean')",
    "smooth_l1_loss(input, target, size_average=None, reduce=None, reduction='mean', beta=1.0)",
    "huber_loss(input, target, reduction='mean', delta=1.0)",
    "cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean', label_smoothing=0.0)",
    "nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean')",
    "kl_div(input, target, size_average=None, reduce=None, reduction='mean', log_target=False)",
    "binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction='mean')",
    "binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction='mean', pos_weight=None)",
    "cosine_similarity(x1, x2, dim=1, eps=1e-08)",
    "pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False)",
    "triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False, size_average=None, reduce=None, reduction='mean')",
    "hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction='mean')",
    "margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction='mean')",
    "cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction='mean')",
    "soft_margin_loss(input, target, size_average=None, reduce=None, reduction='mean')",
    "multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction='mean')",
    "multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction='mean')",
    "multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction='mean')",
    "poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-08, reduce=None, reduction='mean')",
    "gaussian_nll_loss(input, target, var, full=False, eps=1e-06, reduction='mean')",
    "cat(tensors, dim=0)",
    "concat(tensors, dim=0)",
    "stack(tensors, dim=0)",
    "broadcast_tensors(*tensors)",
    "split(input, split_size_or_sections, dim=0)",
    "chunk(input, chunks, dim=0)",
    "flatten(input, start_dim=0, end_dim=-1)",
    "unflatten(input, dim, sizes)",
    "unsqueeze(input, dim)",
    "squeeze(input, dim=None)",
    "reshape(input, *shape)",
    "view(input, *size)",
    "permute(input, *dims)",
    "expand(input, *size)",
    "repeat(input, *repeats)",
    "transpose(input, dim0, dim1)",
    "expand_as(input, other)",
    "view_as(input, other)",
    "reshape_as(input, other)",
    "type_as(input, other)",
    "narrow(input, dim, start, length)",
    "select(input, dim, index)",
    "index_select(input, dim, index)",
    "gather(input, dim, index)",
    "masked_fill(input, mask, value)",
    "diag(input, diagonal=0)",
    "tril(input, diagonal=0)",
    "triu(input, diagonal=0)",
    "flip(input, *dims)",
    "roll(input, shifts, dims=None)",
    "size(input, dim=None)",
    "to(input, *args, **kwargs)",
    "type(input, dtype=None, non_blocking=False)",
    *(f"{name}(input, memory_format=None)" for name in ("float", "half", "bfloat16", "double", "long", "int", "bool")),
]

#: Binding-only parameters: never reported in fn.
_DROPPED = frozenset({"_stacklevel", "out", "inplace", "size_average", "reduce", "unbiased", "pin_memory"})
#: Ops whose inplace argument is part of their meaning (kept in fn).
_KEEPS_INPLACE = frozenset({"dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d"})
_ALIASES = {
    "self": "input", "axis": "dim", "keepdims": "keepdim", "x": "input", "a": "input", "A": "input",
    "axis0": "dim0", "axis1": "dim1",  # swapaxes' names for transpose's dims
}

_MISSING = object()


@dataclass(frozen=True)
class Signature:
    name: str
    positional: tuple[str, ...]
    keyword_only: tuple[str, ...]
    defaults: dict[str, Any]
    varargs: str | None
    varkw: str | None

    def reported(self, name: str) -> bool:
        if name not in self.names and not self.varkw:
            return False
        return name not in _DROPPED or (name == "inplace" and self.name in _KEEPS_INPLACE)

    @property
    def names(self) -> tuple[str, ...]:
        extra = tuple(n for n in (self.varargs, self.varkw) if n)
        return self.positional + extra + self.keyword_only


def parse_signature(text: str) -> Signature:
    fn = ast.parse(f"def {text}: pass").body[0]
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    positional = tuple(p.arg for p in a.args)
    defaults = {p.arg: ast.literal_eval(d) for p, d in zip(a.args[len(a.args) - len(a.defaults) :], a.defaults)}
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        if d is not None:
            defaults[p.arg] = ast.literal_eval(d)
    return Signature(
        name=fn.name,
        positional=positional,
        keyword_only=tuple(p.arg for p in a.kwonlyargs),
        defaults=defaults,
        varargs=a.vararg.arg if a.vararg else None,
        varkw=a.kwarg.arg if a.kwarg else None,
    )


SIGNATURES: dict[str, Signature] = {s.name: s for s in map(parse_signature, _SOURCES)}


class Bound(dict):
    """name → (value, explicit): explicit when the call itself passed the value (not a default). `module_attrs`:
    name → (attribute path, value) for the int and float hyper-parameters a module call reads from its module."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.module_attrs: dict[str, tuple[str, float]] = {}


def bind(sig: Signature, args: tuple | list, kwargs: dict[str, Any]) -> Bound | None:
    """Binds a call to sig; None when it does not fit (too many positionals, unknown keyword)."""
    bound = Bound()
    args = list(args)
    if len(args) > len(sig.positional) and not sig.varargs:
        return None
    for name, value in zip(sig.positional, args):
        bound[name] = (value, True)
    if sig.varargs:
        rest = args[len(sig.positional) :]
        if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
            rest = list(rest[0])
        if rest or sig.varkw is None:
            bound[sig.varargs] = (list(rest), True)
    for key, value in kwargs.items():
        name = _ALIASES.get(key, key) if key not in sig.names else key
        if name in sig.names and name != sig.varkw:
            if name == sig.varargs and not isinstance(value, (list, tuple)):
                value = [value]
            bound[name] = (list(value) if name == sig.varargs else value, True)
        elif sig.varkw or key in _DROPPED:
            bound[key] = (value, True)
        elif value is not None:  # an unknown keyword left at None is a newer torch's optional extra
            return None
    for name in sig.positional + sig.keyword_only:
        if name not in bound:
            if name not in sig.defaults:
                return None
            bound[name] = (sig.defaults[name], False)
    return bound
