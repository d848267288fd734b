"""Canonical op names: one table from module classes, callables and method names to the names rules match.

`nn.ReLU()`, `F.relu`, `torch.relu`, `torch._C._nn.relu` and `x.relu()` all become "relu". An entry may
bind the call through another signature and preset arguments (`F.relu6` is hardtanh with min_val 0 and
max_val 6; `operator.floordiv` is div with rounding_mode "floor"). Anything not in the tables is
"unknown": capture never fails on an op it does not know, the op just stays a PyTorch call.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn


@dataclass(frozen=True)
class OpSpec:
    op: str
    #: Which signature (signatures.SIGNATURES key) binds the call; defaults to `op`.
    sig: str = ""
    #: Arguments fixed by the callable itself, merged into fn.
    presets: dict[str, Any] = field(default_factory=dict)
    #: Swap input and other (reflected dunders: x.__rsub__(2) is 2 - x).
    reflected: bool = False
    #: The call writes its first argument (operator.iadd, x.add_()).
    inplace: bool = False

    @property
    def signature(self) -> str:
        return self.sig or self.op


# Ops whose canonical name is also their name in torch / torch.nn.functional / torch.special /
# torch.linalg / torch._C._nn and as a Tensor method.
_SAME_NAME = """
relu sigmoid tanh exp exp2 expm1 log log2 log10 log1p abs sqrt rsqrt reciprocal erf erfc erfinv sin cos tan
asin acos atan sinh cosh asinh acosh atanh neg square sign floor ceil round trunc frac silu mish gelu selu
celu elu hardswish hardsigmoid hardtanh leaky_relu softplus softsign logsigmoid tanhshrink hardshrink
softshrink threshold prelu rrelu glu logit nan_to_num hypot copysign sgn sinc entr ndtr log_ndtr
add sub mul div remainder fmod logaddexp logaddexp2 xlogy xlog1py heaviside pow atan2 minimum maximum fmin fmax where clamp lerp addcmul addcdiv
eq ne lt le gt ge logical_not logical_and logical_or logical_xor bitwise_not isnan isinf isfinite
sum mean amax amin aminmax argmax argmin logsumexp var std prod cumsum cumprod cummax cummin nansum all any
softmax log_softmax softmin normalize
layer_norm group_norm batch_norm instance_norm rms_norm local_response_norm
conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d linear bilinear
matmul bmm mm addmm baddbmm einsum outer dot mv
max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d
adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d lp_pool1d lp_pool2d
dropout alpha_dropout dropout1d dropout2d dropout3d feature_alpha_dropout
scaled_dot_product_attention embedding one_hot pad interpolate pixel_shuffle pixel_unshuffle unfold fold
mse_loss l1_loss smooth_l1_loss huber_loss cross_entropy nll_loss kl_div binary_cross_entropy
binary_cross_entropy_with_logits cosine_similarity pairwise_distance triplet_margin_loss hinge_embedding_loss
margin_ranking_loss cosine_embedding_loss soft_margin_loss multi_margin_loss poisson_nll_loss cdist
multilabel_margin_loss multilabel_soft_margin_loss gaussian_nll_loss
cat concat stack broadcast_tensors split chunk flatten unflatten unsqueeze squeeze reshape view permute transpose t contiguous
expand expand_as view_as reshape_as repeat repeat_interleave narrow select index_select gather scatter
masked_fill tril triu flip roll diag diagonal clone detach size numel dim
zeros_like ones_like empty_like full_like rand_like randn_like randint_like zeros ones empty full arange
linspace rand randn randint randperm bernoulli multinomial normal poisson tensor as_tensor
sort topk argsort kthvalue median mode cross
""".split()

# NumPy-style names of the comparisons (torch.greater, x.less_equal(y)), functions and methods both.
_COMPARISON_ALIASES = {"greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne"}

# Callables whose canonical name differs from their own name, or that need presets: dotted name → spec.
_RENAMED: dict[str, OpSpec] = {
    "torch.clip": OpSpec("clamp"),
    "torch.clamp_min": OpSpec("clamp", "clamp_min", {"max": None}),
    "torch.clamp_max": OpSpec("clamp", "clamp_max", {"min": None}),
    "torch.nn.functional.relu6": OpSpec("hardtanh", "relu6", {"min_val": 0.0, "max_val": 6.0}),
    "torch._C._nn.relu6": OpSpec("hardtanh", "relu6", {"min_val": 0.0, "max_val": 6.0}),
    "torch.rsub": OpSpec("sub", reflected=True),
    "torch.true_divide": OpSpec("div"),
    "torch.divide": OpSpec("div"),
    "torch.multiply": OpSpec("mul"),
    "torch.subtract": OpSpec("sub"),
    "torch.negative": OpSpec("neg"),
    "torch.absolute": OpSpec("abs"),
    "torch.arctan2": OpSpec("atan2"),
    **{f"torch.arc{name[1:]}": OpSpec(name) for name in ("asin", "acos", "atan", "asinh", "acosh", "atanh")},
    **{f"torch.{alias}": OpSpec(op) for alias, op in _COMPARISON_ALIASES.items()},
    "torch.fix": OpSpec("trunc"),
    "torch.swapaxes": OpSpec("transpose"),
    "torch.swapdims": OpSpec("transpose"),
    "torch.floor_divide": OpSpec("div", "div", {"rounding_mode": "floor"}),
    "torch.special.expit": OpSpec("sigmoid"),
    "torch.nn.functional.silu": OpSpec("silu"),
    "torch.norm": OpSpec("vector_norm", "norm"),
    "torch.linalg.norm": OpSpec("vector_norm", "linalg_norm"),
    "torch.linalg.vector_norm": OpSpec("vector_norm"),
    "torch.linalg.matrix_norm": OpSpec("matrix_norm"),
    "torch.max": OpSpec("max"),
    "torch.min": OpSpec("min"),
    "torch.nn.functional.max_pool1d_with_indices": OpSpec("max_pool1d", "max_pool1d", {"return_indices": True}),
    "torch.nn.functional.max_pool2d_with_indices": OpSpec("max_pool2d", "max_pool2d", {"return_indices": True}),
    "torch.nn.functional.max_pool3d_with_indices": OpSpec("max_pool3d", "max_pool3d", {"return_indices": True}),
    "torch.nn.functional.multi_head_attention_forward": OpSpec("multi_head_attention_forward"),
    "torch.square": OpSpec("square"),
    "torch.flatten": OpSpec("flatten"),
    "torch.nn.functional.softmin": OpSpec("softmin"),
    **{f"torch.fft.{name}": OpSpec(name) for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")},
    "operator.add": OpSpec("add"),
    "operator.sub": OpSpec("sub"),
    "operator.mul": OpSpec("mul"),
    "operator.truediv": OpSpec("div"),
    "operator.floordiv": OpSpec("div", "div", {"rounding_mode": "floor"}),
    "operator.mod": OpSpec("remainder"),
    "operator.neg": OpSpec("neg"),
    "operator.pos": OpSpec("positive"),
    "operator.abs": OpSpec("abs"),
    "operator.pow": OpSpec("pow"),
    "operator.matmul": OpSpec("matmul"),
    "operator.getitem": OpSpec("getitem"),
    "operator.setitem": OpSpec("setitem", inplace=True),
    "operator.invert": OpSpec("bitwise_not"),
    "operator.and_": OpSpec("bitwise_and"),
    "operator.or_": OpSpec("bitwise_or"),
    "operator.xor": OpSpec("bitwise_xor"),
    "operator.eq": OpSpec("eq"),
    "operator.ne": OpSpec("ne"),
    "operator.lt": OpSpec("lt"),
    "operator.le": OpSpec("le"),
    "operator.gt": OpSpec("gt"),
    "operator.ge": OpSpec("ge"),
    "operator.iadd": OpSpec("add", inplace=True),
    "operator.isub": OpSpec("sub", inplace=True),
    "operator.imul": OpSpec("mul", inplace=True),
    "operator.itruediv": OpSpec("div", inplace=True),
    "operator.ifloordiv": OpSpec("div", "div", {"rounding_mode": "floor"}, inplace=True),
    "operator.ipow": OpSpec("pow", inplace=True),
    "operator.imatmul": OpSpec("matmul", inplace=True),
    "builtins.getattr": OpSpec("getattr"),
}

# Tensor methods whose canonical name differs from the method name.
_METHODS: dict[str, OpSpec] = {
    "__add__": OpSpec("add"),
    "__radd__": OpSpec("add", reflected=True),
    "__iadd__": OpSpec("add", inplace=True),
    "__sub__": OpSpec("sub"),
    "__rsub__": OpSpec("sub", reflected=True),
    "__isub__": OpSpec("sub", inplace=True),
    "__mul__": OpSpec("mul"),
    "__rmul__": OpSpec("mul", reflected=True),
    "__imul__": OpSpec("mul", inplace=True),
    "__truediv__": OpSpec("div"),
    "__div__": OpSpec("div"),
    "__rtruediv__": OpSpec("div", reflected=True),
    "__itruediv__": OpSpec("div", inplace=True),
    "__floordiv__": OpSpec("div", "div", {"rounding_mode": "floor"}),
    "floor_divide": OpSpec("div", "div", {"rounding_mode": "floor"}),
    "__pow__": OpSpec("pow"),
    "__rpow__": OpSpec("pow", reflected=True),
    "__matmul__": OpSpec("matmul"),
    "__rmatmul__": OpSpec("matmul", reflected=True),
    "__neg__": OpSpec("neg"),
    "__abs__": OpSpec("abs"),
    "__getitem__": OpSpec("getitem"),
    "__setitem__": OpSpec("setitem", inplace=True),
    "clip": OpSpec("clamp"),
    "where": OpSpec("where", "where_method"),
    "clamp_min": OpSpec("clamp", "clamp_min", {"max": None}),
    "clamp_max": OpSpec("clamp", "clamp_max", {"min": None}),
    "norm": OpSpec("vector_norm", "norm"),
    "max": OpSpec("max"),
    "min": OpSpec("min"),
    "true_divide": OpSpec("div"),
    "divide": OpSpec("div"),
    "multiply": OpSpec("mul"),
    "subtract": OpSpec("sub"),
    "negative": OpSpec("neg"),
    "absolute": OpSpec("abs"),
    **{f"arc{name[1:]}": OpSpec(name) for name in ("asin", "acos", "atan", "asinh", "acosh", "atanh")},
    **{alias: OpSpec(op) for alias, op in _COMPARISON_ALIASES.items()},
    "fix": OpSpec("trunc"),
    # NumPy's names of transpose: a view like it, which the permute rules and the aliasing of writes know
    "swapaxes": OpSpec("transpose"),
    "swapdims": OpSpec("transpose"),
    # x.type(dtype) is x.to(dtype); x.type() (a type name) and x.type("torch.HalfTensor") bind no dtype the
    # cast rule reads, and stay PyTorch's calls.
    "type": OpSpec("to", "type"),
    "float": OpSpec("to", "float", {"dtype": torch.float32}),
    "half": OpSpec("to", "half", {"dtype": torch.float16}),
    "bfloat16": OpSpec("to", "bfloat16", {"dtype": torch.bfloat16}),
    "double": OpSpec("to", "double", {"dtype": torch.float64}),
    "long": OpSpec("to", "long", {"dtype": torch.int64}),
    "int": OpSpec("to", "int", {"dtype": torch.int32}),
    "bool": OpSpec("to", "bool", {"dtype": torch.bool}),
    "to": OpSpec("to"),
    "type_as": OpSpec("type_as"),
    "new_zeros": OpSpec("new_zeros"),
    "new_ones": OpSpec("new_ones"),
    "new_empty": OpSpec("new_empty"),
    "new_full": OpSpec("new_full"),
    "new_tensor": OpSpec("new_tensor"),
    "uniform_": OpSpec("uniform_", inplace=True),
    "normal_": OpSpec("normal_", inplace=True),
    "bernoulli_": OpSpec("bernoulli_", inplace=True),
    "exponential_": OpSpec("exponential_", inplace=True),
    "random_": OpSpec("random_", inplace=True),
    "fill_": OpSpec("fill_", inplace=True),
    "zero_": OpSpec("zero_", inplace=True),
    "copy_": OpSpec("copy_", inplace=True),
}

# Module classes (looked up along the MRO, so subclasses of nn.Conv2d are conv2d) → spec.
_MODULES: dict[str, OpSpec] = {
    "ReLU": OpSpec("relu"),
    "ReLU6": OpSpec("hardtanh"),
    "Hardtanh": OpSpec("hardtanh"),
    "LeakyReLU": OpSpec("leaky_relu"),
    "PReLU": OpSpec("prelu"),
    "RReLU": OpSpec("rrelu"),
    "GELU": OpSpec("gelu"),
    "SiLU": OpSpec("silu"),
    "Mish": OpSpec("mish"),
    "ELU": OpSpec("elu"),
    "SELU": OpSpec("selu"),
    "CELU": OpSpec("celu"),
    "GLU": OpSpec("glu"),
    "Softplus": OpSpec("softplus"),
    "Sigmoid": OpSpec("sigmoid"),
    "Tanh": OpSpec("tanh"),
    "Hardswish": OpSpec("hardswish"),
    "Hardsigmoid": OpSpec("hardsigmoid"),
    "Hardshrink": OpSpec("hardshrink"),
    "Softshrink": OpSpec("softshrink"),
    "Softsign": OpSpec("softsign"),
    "Tanhshrink": OpSpec("tanhshrink"),
    "LogSigmoid": OpSpec("logsigmoid"),
    "Threshold": OpSpec("threshold"),
    "Softmax": OpSpec("softmax"),
    "Softmax2d": OpSpec("softmax", "softmax", {"dim": -3}),
    "LogSoftmax": OpSpec("log_softmax"),
    "Softmin": OpSpec("softmin"),
    "Linear": OpSpec("linear"),
    "Bilinear": OpSpec("bilinear"),
    "Identity": OpSpec("identity"),
    "Flatten": OpSpec("flatten"),
    "Unflatten": OpSpec("unflatten"),
    "Conv1d": OpSpec("conv1d"),
    "Conv2d": OpSpec("conv2d"),
    "Conv3d": OpSpec("conv3d"),
    "ConvTranspose1d": OpSpec("conv_transpose1d"),
    "ConvTranspose2d": OpSpec("conv_transpose2d"),
    "ConvTranspose3d": OpSpec("conv_transpose3d"),
    "BatchNorm1d": OpSpec("batch_norm"),
    "BatchNorm2d": OpSpec("batch_norm"),
    "BatchNorm3d": OpSpec("batch_norm"),
    "SyncBatchNorm": OpSpec("batch_norm"),
    "InstanceNorm1d": OpSpec("instance_norm"),
    "InstanceNorm2d": OpSpec("instance_norm"),
    "InstanceNorm3d": OpSpec("instance_norm"),
    "LayerNorm": OpSpec("layer_norm"),
    "RMSNorm": OpSpec("rms_norm"),
    "GroupNorm": OpSpec("group_norm"),
    "LocalResponseNorm": OpSpec("local_response_norm"),
    "Dropout": OpSpec("dropout"),
    "Dropout1d": OpSpec("dropout"),
    "Dropout2d": OpSpec("dropout"),
    "Dropout3d": OpSpec("dropout"),
    "AlphaDropout": OpSpec("dropout"),
    "FeatureAlphaDropout": OpSpec("dropout"),
    "MaxPool1d": OpSpec("max_pool1d"),
    "MaxPool2d": OpSpec("max_pool2d"),
    "MaxPool3d": OpSpec("max_pool3d"),
    "AvgPool1d": OpSpec("avg_pool1d"),
    "AvgPool2d": OpSpec("avg_pool2d"),
    "AvgPool3d": OpSpec("avg_pool3d"),
    "AdaptiveAvgPool1d": OpSpec("adaptive_avg_pool1d"),
    "AdaptiveAvgPool2d": OpSpec("adaptive_avg_pool2d"),
    "AdaptiveAvgPool3d": OpSpec("adaptive_avg_pool3d"),
    "AdaptiveMaxPool1d": OpSpec("adaptive_max_pool1d"),
    "AdaptiveMaxPool2d": OpSpec("adaptive_max_pool2d"),
    "AdaptiveMaxPool3d": OpSpec("adaptive_max_pool3d"),
    "LPPool1d": OpSpec("lp_pool1d"),
    "LPPool2d": OpSpec("lp_pool2d"),
    "LPPool3d": OpSpec("lp_pool3d"),
    "Upsample": OpSpec("interpolate"),
    "PixelShuffle": OpSpec("pixel_shuffle"),
    "PixelUnshuffle": OpSpec("pixel_unshuffle"),
    "Embedding": OpSpec("embedding"),
    "MultiheadAttention": OpSpec("multi_head_attention"),
    "LSTM": OpSpec("lstm"),
    "GRU": OpSpec("gru"),
    "RNN": OpSpec("rnn"),
    "LSTMCell": OpSpec("lstm_cell"),
    "GRUCell": OpSpec("gru_cell"),
    "RNNCell": OpSpec("rnn_cell"),
    "CosineSimilarity": OpSpec("cosine_similarity"),
    "PairwiseDistance": OpSpec("pairwise_distance"),
    "MSELoss": OpSpec("mse_loss"),
    "L1Loss": OpSpec("l1_loss"),
    "SmoothL1Loss": OpSpec("smooth_l1_loss"),
    "HuberLoss": OpSpec("huber_loss"),
    "CrossEntropyLoss": OpSpec("cross_entropy"),
    "NLLLoss": OpSpec("nll_loss"),
    "KLDivLoss": OpSpec("kl_div"),
    "BCELoss": OpSpec("binary_cross_entropy"),
    "BCEWithLogitsLoss": OpSpec("binary_cross_entropy_with_logits"),
    "TripletMarginLoss": OpSpec("triplet_margin_loss"),
    "HingeEmbeddingLoss": OpSpec("hinge_embedding_loss"),
    "MarginRankingLoss": OpSpec("margin_ranking_loss"),
    "CosineEmbeddingLoss": OpSpec("cosine_embedding_loss"),
    "SoftMarginLoss": OpSpec("soft_margin_loss"),
    "MultiMarginLoss": OpSpec("multi_margin_loss"),
    "PoissonNLLLoss": OpSpec("poisson_nll_loss"),
    "GaussianNLLLoss": OpSpec("gaussian_nll_loss"),
    "MultiLabelMarginLoss": OpSpec("multilabel_margin_loss"),
    "MultiLabelSoftMarginLoss": OpSpec("multilabel_soft_margin_loss"),
}

# Modules fx must never trace into: recurrent layers (their Python forward is slow to trace and export,
# and they are one library call anyway).
LEAF_MODULE_TYPES: tuple[type, ...] = tuple(
    getattr(nn, n) for n in ("LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell", "MultiheadAttention") if hasattr(nn, n)
)

# The nn.Transformer* layers, which fx keeps whole (torch.nn modules are its leaves). In eval mode that is
# what they must stay: their forward then takes a fused fast path whenever autograd records nothing
# (torch._transformer_encoder_layer_fwd; with a padding mask, a nested tensor whose padded positions come back
# as zeros), which traced ops would not reproduce. In training mode they take no such path, and export traces
# them through (their layer norms, activations and residual adds fuse; the graph's training guard sends eval
# calls to the reference's forward): there fx gives way to export.
TRANSFORMER_MODULE_TYPES: tuple[type, ...] = tuple(
    getattr(nn, n)
    for n in ("TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder", "TransformerDecoder", "Transformer")
    if hasattr(nn, n)
)

# Ops whose trailing-underscore callables are not their in-place forms (other signatures, or no tensor write).
_NOT_INPLACE_FORMS = frozenset({"dropout", "alpha_dropout", "feature_alpha_dropout", "detach"})
_NAMESPACES = ("torch", "torch.nn.functional", "torch._C._nn", "torch.special", "torch.linalg", "torch._C._linalg")


def resolve_dotted(dotted: str) -> Any:
    """The object a dotted name denotes (importing nothing new), or None."""
    import builtins
    import sys

    head, _, rest = dotted.partition(".")
    roots = {"torch": torch, "operator": operator, "builtins": builtins}
    obj: Any = roots.get(head) or sys.modules.get(head)
    for part in rest.split(".") if rest else []:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _function_table() -> dict[int, tuple[Any, OpSpec]]:
    table: dict[int, tuple[Any, OpSpec]] = {}

    def put(obj: Any, spec: OpSpec) -> None:
        if obj is not None and callable(obj) and id(obj) not in table:
            table[id(obj)] = (obj, spec)  # keep obj alive so its id stays unique

    for dotted, spec in _RENAMED.items():
        put(resolve_dotted(dotted), spec)
    for name in _SAME_NAME:
        for ns in _NAMESPACES:
            put(resolve_dotted(f"{ns}.{name}"), OpSpec(name))
    # The in-place functional forms (torch.relu_(x), F.leaky_relu_(x, 0.2), torch.clamp_min_(x, 0)) write their
    # first argument as the method forms (x.relu_()) do: the same op, marked in place. Dropout's in-place
    # callables bind other signatures (torch.dropout_(input, p, train)) and stay unknown.
    for dotted, spec in [*((f"torch.{n}", OpSpec(n)) for n in _SAME_NAME), *_RENAMED.items()]:
        if spec.op in _NOT_INPLACE_FORMS:
            continue
        for ns in _NAMESPACES if dotted.startswith("torch.") and dotted.count(".") == 1 else ("",):
            base = f"{ns}.{dotted.split('.', 1)[1]}" if ns else dotted
            put(resolve_dotted(f"{base}_"), OpSpec(spec.op, spec.sig, spec.presets, spec.reflected, inplace=True))
    return table


def _module_table() -> dict[type, OpSpec]:
    return {getattr(nn, name): spec for name, spec in _MODULES.items() if hasattr(nn, name)}


_FUNCTIONS = _function_table()
_MODULE_TYPES = _module_table()
_SAME_NAME_SET = frozenset(_SAME_NAME)
UNKNOWN = OpSpec("unknown")


def function_spec(target: Any) -> OpSpec:
    entry = _FUNCTIONS.get(id(target))
    return entry[1] if entry is not None and entry[0] is target else UNKNOWN


def method_spec(name: str) -> OpSpec:
    if name in _METHODS:
        return _METHODS[name]
    if name in _SAME_NAME_SET:
        return OpSpec(name)
    if name.endswith("_") and not name.endswith("__"):
        base = method_spec(name[:-1])
        if base is not UNKNOWN:
            return OpSpec(base.op, base.sig, base.presets, base.reflected, inplace=True)
    return UNKNOWN


# A module's call runs its hooks around its forward (the legacy nn.utils.weight_norm / spectral_norm recompute
# `weight` in a forward pre-hook): a region that takes the op in its place would skip them, reading a stale
# weight or leaving a hook's output change undone, so a hooked module's call stays its own (an op no rule
# takes, named so that the report can say why).
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")
HOOKED_MODULE = OpSpec("hooked_module")


def module_spec(module: nn.Module) -> OpSpec:
    if any(getattr(module, name, None) for name in _HOOK_DICTS):
        return HOOKED_MODULE
    for cls in type(module).__mro__:
        if cls in _MODULE_TYPES:
            return _MODULE_TYPES[cls]
    return UNKNOWN


# ATen names that differ from their torch-level callable.
_ATEN: dict[str, OpSpec] = {
    "linalg_vector_norm": OpSpec("vector_norm"),
    "rsub": OpSpec("sub", reflected=True),
    "_softmax": OpSpec("softmax"),
    "_log_softmax": OpSpec("log_softmax"),
    "max_pool2d_with_indices": OpSpec("max_pool2d", "max_pool2d", {"return_indices": True}),
    "max_pool3d_with_indices": OpSpec("max_pool3d", "max_pool3d", {"return_indices": True}),
    "_to_copy": OpSpec("to"),
    "slice": OpSpec("slice"),
    **{f"special_{name}": OpSpec(name) for name in ("xlogy", "xlog1py", "entr", "ndtr", "log_ndtr", "sinc", "logit")},
    "alias": OpSpec("identity"),
    **{f"fft_{name}": OpSpec(name) for name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")},
}


def aten_spec(name: str) -> OpSpec:
    """An aten op's base name ("relu", "add_", "conv2d") through the same table as torch.<name>."""
    if name in _ATEN:
        return _ATEN[name]
    inplace = name.endswith("_") and not name.endswith("__")
    base = name[:-1] if inplace else name
    spec = function_spec(resolve_dotted(f"torch.{base}"))
    if spec is UNKNOWN and base in _SAME_NAME_SET:
        spec = OpSpec(base)
    if spec is UNKNOWN:
        # unknown, but still a write (aten.copy_ of a slice: export's `y[:, :k] = v`)
        return OpSpec("unknown", inplace=True) if inplace else UNKNOWN
    return OpSpec(spec.op, spec.sig, spec.presets, inplace=inplace or spec.inplace)
