"""The math of every rule-table entry, checked on the CPU: each pointwise op's generated fp32 expression and each
reduction's prologue / epilogue (ops/pointwise.ts, ops/reduce.ts), compiled for the host with kf_pointwise.cuh
and compared with PyTorch in float64 on random inputs, special values included.

The GPU tests check the kernels' indexing, vectorisation and accumulators; this checks that the formula a rule
writes is PyTorch's, for every op, so a new entry without a case here fails `test_every_rule_has_a_case`.
Reductions are accumulated exactly here (float64 sums, two-pass variance): a wrong prologue or epilogue shows,
accumulation order does not.
"""

from __future__ import annotations

import ctypes
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
CUDA_DIR = ROOT / "src" / "optimize" / "codegen" / "cuda"


def node(name: str) -> dict:
    return {"t": "node", "id": name}


def const(value) -> dict:
    if isinstance(value, torch.dtype):
        return {"t": "const", "pytype": "dtype", "value": str(value).removeprefix("torch.")}
    if value is None:
        return {"t": "const", "pytype": "none", "value": None}
    if isinstance(value, bool):
        return {"t": "const", "pytype": "bool", "value": value}
    if isinstance(value, str):
        return {"t": "const", "pytype": "str", "value": value}
    if isinstance(value, float) and math.isinf(value):  # as capture writes them: JSON has no infinity
        return {"t": "const", "pytype": "float", "value": None, "special": "inf" if value > 0 else "-inf"}
    return {"t": "const", "pytype": "int" if isinstance(value, int) else "float", "value": value}


# Input domains: name -> generator of n float64 values (special values included where the op defines them).
def _domain(kind: str, n: int, g: np.random.Generator) -> np.ndarray:
    if kind == "any":
        x = g.normal(0, 3, n)
        x[:6] = [0.0, -0.0, 25.0, -25.0, 1e-8, -1e-8]
        return x
    if kind == "pos":
        return np.abs(g.normal(0, 3, n)) + 1e-3
    if kind == "gt-1":
        return np.abs(g.normal(0, 3, n)) - 0.999
    if kind == "unit":  # (0, 1): probabilities
        return g.uniform(1e-4, 1 - 1e-4, n)
    if kind == "near1":  # products of many stay in range
        return g.uniform(0.5, 1.5, n) * np.where(g.uniform(0, 1, n) < 0.5, -1.0, 1.0)
    if kind == "class":  # a class index per row of [ROWS, LENGTH], repeated along it; row 0's is 3
        classes = g.integers(0, LENGTH, n // LENGTH)
        classes[0] = 3
        return np.repeat(classes, LENGTH).astype(np.float64)
    if kind == "sign":  # labels of the margin losses
        return np.where(g.uniform(0, 1, n) < 0.5, -1.0, 1.0)
    if kind == "mask":
        return (g.uniform(0, 1, n) < 0.5).astype(np.float64)
    if kind == "small-int":  # ties for comparisons, exact halves for rounding
        return np.round(g.normal(0, 3, n) * 2) / 2
    if kind == "casts":  # half precision's subnormals, normals, overflow and rounding ties; inf and NaN
        x = g.normal(0, 1, n) * 10.0 ** g.uniform(-9, 6, n)
        x[:10] = [1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8, 1 + 3 * 2**-8, 65519.0, 65520.0, 2**-25, 3 * 2**-25, np.inf,
                  np.nan]
        x[10:14] = [1e-39, -3.3e-40, 3.3e38, -1e-45]  # float32 subnormals (bfloat16's), bfloat16's overflow
        return x
    if kind == "nonfinite":  # ordinary values beside NaN and both infinities
        x = g.normal(0, 3, n)
        x[:6] = [np.nan, np.inf, -np.inf, np.nan, 0.5, -0.0]
        return x
    if kind == "tail":  # log_ndtr's left tail (erfcx), down to where exp(-x^2/2) underflows float32
        return -np.abs(g.normal(0, 8, n)) - 1.0
    if kind == "hundreds":  # round(decimals=-1): values with a tens digit, halves (x5) included
        x = g.normal(0, 300, n)
        x[:4] = [25.0, -35.0, 45.0, 0.0]
        return x
    if kind == "infs":  # logaddexp's equal-infinity case beside finite values
        return g.choice([np.inf, -np.inf, 0.5, -3.0], n)
    if kind == "pm1":  # (-1, 1): asin, acos, atanh
        return g.uniform(-0.999, 0.999, n)
    if kind == "ge1":  # acosh
        return 1.0 + np.abs(g.normal(0, 3, n))
    if kind == "tenths":  # divisors whose fp32 quotients of small ints round onto an integer (1 / 0.1f is 10.f)
        return g.choice([0.1, 0.2, 0.3, 0.7, -0.1, -0.3], n)
    raise ValueError(kind)


# (op, const params, operand domains (in operand order), torch reference on float64 tensors)
POINTWISE_CASES = [
    ("identity", {}, ["any"], lambda x: x),
    ("relu", {}, ["any"], torch.relu),
    ("relu6", {}, ["any"], F.relu6),
    ("sigmoid", {}, ["any"], torch.sigmoid),
    ("tanh", {}, ["any"], torch.tanh),
    ("silu", {}, ["any"], F.silu),
    ("mish", {}, ["any"], F.mish),
    ("hardswish", {}, ["any"], F.hardswish),
    ("hardsigmoid", {}, ["any"], F.hardsigmoid),
    ("logsigmoid", {}, ["any"], F.logsigmoid),
    ("softsign", {}, ["any"], F.softsign),
    ("tanhshrink", {}, ["any"], F.tanhshrink),
    ("selu", {}, ["any"], F.selu),
    ("gelu", {"approximate": "none"}, ["any"], lambda x: F.gelu(x)),
    ("gelu", {"approximate": "tanh"}, ["any"], lambda x: F.gelu(x, approximate="tanh")),
    ("leaky_relu", {"negative_slope": 0.2}, ["any"], lambda x: F.leaky_relu(x, 0.2)),
    ("leaky_relu", {}, ["any"], F.leaky_relu),  # the defaults the rules assume
    ("elu", {}, ["any"], F.elu),
    ("softplus", {}, ["any"], F.softplus),
    ("hardtanh", {}, ["any"], F.hardtanh),
    ("elu", {"alpha": 1.3}, ["any"], lambda x: F.elu(x, 1.3)),
    ("celu", {"alpha": 0.7}, ["any"], lambda x: F.celu(x, 0.7)),
    ("softplus", {"beta": 2.0, "threshold": 10.0}, ["any"], lambda x: F.softplus(x, 2.0, 10.0)),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}, ["any"], lambda x: F.hardtanh(x, -0.5, 2.0)),
    ("threshold", {"threshold": 0.1, "value": -3.0}, ["any"], lambda x: F.threshold(x, 0.1, -3.0)),
    ("clamp", {"min": -0.5, "max": 0.7}, ["any"], lambda x: torch.clamp(x, -0.5, 0.7)),
    ("clamp", {"min": None, "max": 0.7}, ["any"], lambda x: torch.clamp(x, max=0.7)),
    ("softshrink", {"lambd": 0.5}, ["small-int"], lambda x: F.softshrink(x, 0.5)),
    ("softshrink", {"lambd": 0.3}, ["any"], lambda x: F.softshrink(x, 0.3)),
    ("hardshrink", {"lambd": 0.5}, ["small-int"], lambda x: F.hardshrink(x, 0.5)),
    ("neg", {}, ["any"], torch.neg),
    ("abs", {}, ["any"], torch.abs),
    ("exp", {}, ["any"], torch.exp),
    ("exp2", {}, ["any"], torch.exp2),
    ("expm1", {}, ["any"], torch.expm1),
    ("log", {}, ["pos"], torch.log),
    ("log2", {}, ["pos"], torch.log2),
    ("log10", {}, ["pos"], torch.log10),
    ("log1p", {}, ["gt-1"], torch.log1p),
    ("sqrt", {}, ["pos"], torch.sqrt),
    ("rsqrt", {}, ["pos"], torch.rsqrt),
    ("reciprocal", {}, ["pos"], torch.reciprocal),
    ("square", {}, ["any"], torch.square),
    ("sin", {}, ["any"], torch.sin),
    ("cos", {}, ["any"], torch.cos),
    ("erf", {}, ["any"], torch.erf),
    ("erfc", {}, ["any"], torch.erfc),
    ("asin", {}, ["pm1"], torch.asin),
    ("acos", {}, ["pm1"], torch.acos),
    ("atan", {}, ["any"], torch.atan),
    ("sinh", {}, ["any"], torch.sinh),
    ("cosh", {}, ["any"], torch.cosh),
    ("asinh", {}, ["any"], torch.asinh),
    ("acosh", {}, ["ge1"], torch.acosh),
    ("atanh", {}, ["pm1"], torch.atanh),
    ("frac", {}, ["any"], torch.frac),
    ("frac", {}, ["small-int"], torch.frac),
    ("rrelu", {"lower": 0.1, "upper": 0.3, "training": False}, ["any"],
     lambda x: F.rrelu(x, 0.1, 0.3, training=False)),
    ("nan_to_num", {"nan": 0.0, "posinf": None, "neginf": None}, ["casts"],
     lambda x: torch.nan_to_num(x.float()).double()),
    ("nan_to_num", {"nan": -1.0, "posinf": 7.0, "neginf": -7.0}, ["casts"],
     lambda x: torch.nan_to_num(x, nan=-1.0, posinf=7.0, neginf=-7.0)),
    ("atan2", {}, ["any", "any"], torch.atan2),
    ("hypot", {}, ["any", "any"], torch.hypot),
    ("copysign", {}, ["any", "any"], torch.copysign),
    ("fmax", {}, ["casts", "any"], torch.fmax),
    ("fmin", {}, ["casts", "any"], torch.fmin),
    ("sgn", {}, ["small-int"], torch.sgn),
    ("sign", {}, ["casts"], torch.sign),  # NaN -> 0
    # NaN and the infinities through the activations (PyTorch's comparisons decide which branch NaN takes)
    ("threshold", {"threshold": 0.5, "value": -2.0}, ["nonfinite"], lambda x: F.threshold(x, 0.5, -2.0)),
    ("hardswish", {}, ["nonfinite"], F.hardswish),
    ("hardsigmoid", {}, ["nonfinite"], F.hardsigmoid),
    ("hardtanh", {"min_val": -1.0, "max_val": 1.0}, ["nonfinite"], F.hardtanh),
    ("relu", {}, ["nonfinite"], F.relu),
    ("leaky_relu", {"negative_slope": 0.1}, ["nonfinite"], lambda x: F.leaky_relu(x, 0.1)),
    ("softshrink", {"lambd": 0.5}, ["nonfinite"], lambda x: F.softshrink(x, 0.5)),
    ("hardshrink", {"lambd": 0.5}, ["nonfinite"], lambda x: F.hardshrink(x, 0.5)),
    ("clamp", {"min": -1.0, "max": 1.0}, ["nonfinite"], lambda x: torch.clamp(x, -1.0, 1.0)),
    ("heaviside", {"values": 0.5}, ["nonfinite"], lambda x: torch.heaviside(x, torch.tensor(0.5, dtype=torch.float64))),
    ("sinc", {}, ["any"], torch.sinc),
    ("sinc", {}, ["small-int"], torch.sinc),
    ("entr", {}, ["any"], torch.special.entr),
    ("entr", {}, ["unit"], torch.special.entr),
    ("ndtr", {}, ["any"], torch.special.ndtr),
    ("log_ndtr", {}, ["any"], torch.special.log_ndtr),
    ("log_ndtr", {}, ["tail"], torch.special.log_ndtr),
    ("logit", {"eps": None}, ["unit"], torch.logit),
    ("logit", {"eps": 0.01}, ["any"], lambda x: torch.logit(x, 0.01)),
    ("logit", {"eps": 0.01}, ["unit"], lambda x: torch.logit(x, 0.01)),
    ("round", {"decimals": 2}, ["any"], lambda x: torch.round(x.float(), decimals=2).double()),
    ("round", {"decimals": -1}, ["hundreds"], lambda x: torch.round(x.float(), decimals=-1).double()),
    ("logaddexp2", {}, ["any", "any"], torch.logaddexp2),
    ("logaddexp2", {}, ["infs", "infs"], torch.logaddexp2),
    ("xlogy", {}, ["any", "pos"], torch.xlogy),
    ("xlogy", {}, ["small-int", "any"], torch.xlogy),
    ("xlog1py", {}, ["small-int", "gt-1"], torch.special.xlog1py),
    ("heaviside", {}, ["small-int", "any"], torch.heaviside),
    ("floor", {}, ["small-int"], torch.floor),
    ("ceil", {}, ["small-int"], torch.ceil),
    ("round", {}, ["small-int"], torch.round),
    ("trunc", {}, ["small-int"], torch.trunc),
    ("sign", {}, ["small-int"], torch.sign),
    ("add", {"alpha": 2}, ["any", "any"], lambda a, b: torch.add(a, b, alpha=2)),
    ("sub", {"alpha": 1}, ["any", "any"], lambda a, b: a - b),
    ("mul", {}, ["any", "any"], torch.mul),
    ("div", {"rounding_mode": None}, ["any", "pos"], torch.div),
    ("div", {"rounding_mode": "floor"}, ["any", "pos"], lambda a, b: torch.div(a, b, rounding_mode="floor")),
    ("div", {"rounding_mode": "floor"}, ["small-int", "tenths"], lambda a, b: torch.div(a, b, rounding_mode="floor")),
    ("div", {"rounding_mode": "trunc"}, ["any", "pos"], lambda a, b: torch.div(a, b, rounding_mode="trunc")),
    ("remainder", {}, ["any", "any"], torch.remainder),
    ("remainder", {}, ["small-int", "tenths"], torch.remainder),
    ("fmod", {}, ["any", "any"], torch.fmod),
    ("logaddexp", {}, ["any", "any"], torch.logaddexp),
    # losses with reduction='none': their per-element terms, elementwise
    ("mse_loss", {"reduction": "none"}, ["any", "any"], lambda a, b: F.mse_loss(a, b, reduction="none")),
    ("l1_loss", {"reduction": "none"}, ["any", "any"], lambda a, b: F.l1_loss(a, b, reduction="none")),
    ("smooth_l1_loss", {"reduction": "none", "beta": 0.5}, ["any", "any"],
     lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.5)),
    ("huber_loss", {"reduction": "none", "delta": 2.0}, ["any", "any"],
     lambda a, b: F.huber_loss(a, b, reduction="none", delta=2.0)),
    ("kl_div", {"reduction": "none", "log_target": False}, ["any", "unit"],
     lambda x, t: F.kl_div(x, t, reduction="none")),
    ("binary_cross_entropy", {"reduction": "none"}, ["unit", "unit"],
     lambda p, t: F.binary_cross_entropy(p, t, reduction="none")),
    ("binary_cross_entropy_with_logits", {"reduction": "none"}, ["any", "unit"],
     lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="none")),
    ("soft_margin_loss", {"reduction": "none"}, ["any", "sign"], lambda x, t: F.soft_margin_loss(x, t, reduction="none")),
    ("binary_cross_entropy_with_logits", {"reduction": "none", "_operands": ["input", "target", "pos_weight"]},
     ["any", "unit", "pos"], lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="none")),
    ("poisson_nll_loss", {"reduction": "none", "log_input": True, "full": False, "eps": 1e-8}, ["any", "pos"],
     lambda x, t: F.poisson_nll_loss(x, t, reduction="none")),
    ("poisson_nll_loss", {"reduction": "none", "log_input": True, "full": True, "eps": 1e-8}, ["any", "pos"],
     lambda x, t: F.poisson_nll_loss(x, t, full=True, reduction="none")),
    ("hinge_embedding_loss", {"reduction": "none", "margin": 0.7}, ["any", "sign"],
     lambda x, t: F.hinge_embedding_loss(x, t, margin=0.7, reduction="none")),
    ("margin_ranking_loss", {"reduction": "none", "margin": 0.3}, ["any", "any", "sign"],
     lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=0.3, reduction="none")),
    ("lerp", {}, ["any", "any", "unit"], torch.lerp),
    ("lerp", {}, ["any", "any", "any"], torch.lerp),
    ("addcmul", {"value": 0.5}, ["any", "any", "any"], lambda a, b, c: torch.addcmul(a, b, c, value=0.5)),
    ("addcdiv", {"value": -2}, ["any", "any", "pos"], lambda a, b, c: torch.addcdiv(a, b, c, value=-2)),
    ("pow", {"exponent": 2}, ["any"], lambda x: torch.pow(x, 2)),
    ("pow", {"exponent": 0.5}, ["pos"], lambda x: torch.pow(x, 0.5)),
    ("pow", {"exponent": 1.7}, ["pos"], lambda x: torch.pow(x, 1.7)),
    ("pow", {}, ["pos", "any"], torch.pow),
    ("maximum", {}, ["small-int", "small-int"], torch.maximum),
    ("minimum", {}, ["small-int", "small-int"], torch.minimum),
    ("where", {}, ["mask", "any", "any"], lambda c, a, b: torch.where(c != 0, a, b)),
    ("masked_fill", {"value": -7.5}, ["any", "mask"], lambda a, m: a.masked_fill(m != 0, -7.5)),
    ("logical_not", {}, ["mask"], lambda m: (m == 0).double()),
    ("bitwise_not", {}, ["mask"], lambda m: (m == 0).double()),
    ("bitwise_and", {}, ["mask", "mask"], lambda a, b: ((a != 0) & (b != 0)).double()),
    ("bitwise_or", {}, ["mask", "mask"], lambda a, b: ((a != 0) | (b != 0)).double()),
    ("bitwise_xor", {}, ["mask", "mask"], lambda a, b: ((a != 0) ^ (b != 0)).double()),
    ("logical_and", {}, ["small-int", "small-int"], lambda a, b: torch.logical_and(a, b).double()),
    ("logical_or", {}, ["small-int", "small-int"], lambda a, b: torch.logical_or(a, b).double()),
    ("logical_xor", {}, ["small-int", "small-int"], lambda a, b: torch.logical_xor(a, b).double()),
    ("isnan", {}, ["casts"], lambda x: torch.isnan(x.float()).double()),
    ("isinf", {}, ["casts"], lambda x: torch.isinf(x.float()).double()),
    ("isfinite", {}, ["casts"], lambda x: torch.isfinite(x.float()).double()),
    ("gt", {}, ["small-int", "small-int"], lambda a, b: (a > b).double()),
    ("lt", {}, ["small-int", "small-int"], lambda a, b: (a < b).double()),
    ("ge", {}, ["small-int", "small-int"], lambda a, b: (a >= b).double()),
    ("le", {}, ["small-int", "small-int"], lambda a, b: (a <= b).double()),
    ("eq", {}, ["small-int", "small-int"], lambda a, b: (a == b).double()),
    ("ne", {}, ["small-int", "small-int"], lambda a, b: (a != b).double()),
    ("dropout", {"p": 0.3, "training": False}, ["any"], lambda x: x),
    # eval-mode normalisations from running statistics: per element here (the channel views are the codegen's)
    ("batch_norm", {"training": False, "eps": 1e-5}, ["any", "any", "pos", "any", "any"],
     lambda x, m, v, w, b: (x - m) / torch.sqrt(v + 1e-5) * w + b),
    ("batch_norm", {"training": False, "eps": 1e-3, "_operands": ["input", "running_mean", "running_var"]},
     ["any", "any", "pos"], lambda x, m, v: (x - m) / torch.sqrt(v + 1e-3)),
    ("instance_norm", {"use_input_stats": False, "eps": 1e-5}, ["any", "any", "pos", "any", "any"],
     lambda x, m, v, w, b: (x - m) / torch.sqrt(v + 1e-5) * w + b),
    ("zeros_like", {}, ["any"], torch.zeros_like),
    ("ones_like", {}, ["any"], torch.ones_like),
    ("full_like", {"fill_value": -2.5}, ["any"], lambda x: torch.full_like(x, -2.5)),
    ("to", {"dtype": torch.float32}, ["casts"], lambda x: x),
    ("to", {"dtype": torch.float16}, ["casts"], lambda x: x.to(torch.float16).double()),
    ("to", {"dtype": torch.bfloat16}, ["casts"], lambda x: x.to(torch.bfloat16).double()),
]

# Operand keys per op, in the rule's operand order (the rest of the fn are the const params above).
OPERAND_KEYS = {
    "where": ["condition", "input", "other"],
    "masked_fill": ["input", "mask"],
    "pow": ["input", "exponent"],
    "lerp": ["input", "end", "weight"],
    "addcmul": ["input", "tensor1", "tensor2"],
    "addcdiv": ["input", "tensor1", "tensor2"],
    "clamp": ["input"],
    "heaviside": ["input", "values"],
    **{norm: ["input", "running_mean", "running_var", "weight", "bias"] for norm in ("batch_norm", "instance_norm")},
    **{loss: ["input", "target"] for loss in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
                                              "binary_cross_entropy", "binary_cross_entropy_with_logits",
                                              "soft_margin_loss", "hinge_embedding_loss", "poisson_nll_loss")},
    "margin_ranking_loss": ["input1", "input2", "target"],
}
TWO = ["input", "other"]

ROWS, LENGTH = 6, 37
# (op, const params, operand domains, reduced dims ("all" or dim 1 of [ROWS, LENGTH]), torch reference)
REDUCE_CASES = [
    ("sum", {"dim": [1]}, ["any"], lambda x: x.sum(1)),
    ("mean", {"dim": [1]}, ["any"], lambda x: x.mean(1)),
    ("prod", {"dim": 1}, ["near1"], lambda x: x.prod(1)),
    ("nansum", {"dim": [1]}, ["nonfinite"], lambda x: torch.nansum(x, 1)),
    ("amax", {"dim": [1]}, ["any"], lambda x: x.amax(1)),
    ("amin", {"dim": [1]}, ["any"], lambda x: x.amin(1)),
    ("max", {}, ["any"], lambda x: x.max()),
    ("min", {}, ["any"], lambda x: x.min()),
    ("max_dim", {"dim": 1}, ["any"], lambda x: x.max(1)[0]),
    ("min_dim", {"dim": 1}, ["any"], lambda x: x.min(1)[0]),
    ("aminmax", {"dim": 1}, ["any"], lambda x: torch.aminmax(x, dim=1)[0]),
    ("poisson_nll_loss", {"reduction": "mean", "log_input": True, "full": False, "eps": 1e-8}, ["any", "pos"],
     F.poisson_nll_loss),
    ("poisson_nll_loss", {"reduction": "sum", "log_input": False, "full": False, "eps": 1e-3}, ["pos", "pos"],
     lambda x, t: F.poisson_nll_loss(x, t, log_input=False, eps=1e-3, reduction="sum")),
    ("poisson_nll_loss", {"reduction": "mean", "log_input": False, "full": True, "eps": 1e-8}, ["pos", "pos"],
     lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True)),
    ("argmax", {"dim": 1}, ["any"], None),  # an index: the accumulator's, checked on the GPU
    ("argmin", {"dim": 1}, ["any"], None),
    ("logsumexp", {"dim": [1]}, ["any"], lambda x: torch.logsumexp(x, 1)),
    ("var", {"dim": [1], "correction": 1}, ["any"], lambda x: x.var(1)),
    ("var", {"dim": [1], "correction": 0}, ["any"], lambda x: x.var(1, correction=0)),
    ("std", {"dim": [1], "correction": 1}, ["any"], lambda x: x.std(1)),
    ("vector_norm", {"ord": 2, "dim": [1]}, ["any"], lambda x: torch.linalg.vector_norm(x, 2, 1)),
    ("vector_norm", {"ord": 1, "dim": [1]}, ["any"], lambda x: torch.linalg.vector_norm(x, 1, 1)),
    ("vector_norm", {"ord": 3, "dim": [1]}, ["any"], lambda x: torch.linalg.vector_norm(x, 3, 1)),
    ("vector_norm", {"ord": math.inf, "dim": [1]}, ["any"], lambda x: torch.linalg.vector_norm(x, math.inf, 1)),
    ("vector_norm", {"ord": -math.inf, "dim": [1]}, ["any"], lambda x: torch.linalg.vector_norm(x, -math.inf, 1)),
    ("vector_norm", {"ord": 0, "dim": [1]}, ["small-int"], lambda x: torch.linalg.vector_norm(x, 0, 1)),
    ("pairwise_distance", {"p": math.inf, "eps": 1e-6}, ["any", "any"],
     lambda a, b: F.pairwise_distance(a, b, math.inf, 1e-6)),
    ("mse_loss", {"reduction": "mean"}, ["any", "any"], F.mse_loss),
    ("mse_loss", {"reduction": "sum"}, ["any", "any"], lambda a, b: F.mse_loss(a, b, reduction="sum")),
    ("l1_loss", {"reduction": "mean"}, ["any", "any"], F.l1_loss),
    ("smooth_l1_loss", {"reduction": "mean", "beta": 0.5}, ["any", "any"],
     lambda a, b: F.smooth_l1_loss(a, b, beta=0.5)),
    ("huber_loss", {"reduction": "sum", "delta": 2.0}, ["any", "any"],
     lambda a, b: F.huber_loss(a, b, reduction="sum", delta=2.0)),
    ("kl_div", {"reduction": "batchmean", "log_target": False}, ["any", "unit"],
     lambda x, t: F.kl_div(x, t, reduction="batchmean")),
    ("kl_div", {"reduction": "mean", "log_target": True}, ["any", "any"],
     lambda x, t: F.kl_div(x, t, reduction="mean", log_target=True)),
    ("binary_cross_entropy", {"reduction": "mean"}, ["unit", "unit"], F.binary_cross_entropy),
    ("binary_cross_entropy_with_logits", {"reduction": "sum"}, ["any", "unit"],
     lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="sum")),
    ("binary_cross_entropy_with_logits", {"reduction": "mean", "_operands": ["input", "target", "pos_weight"]},
     ["any", "unit", "pos"], lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw)),
    ("binary_cross_entropy_with_logits",
     {"reduction": "sum", "_operands": ["input", "target", "weight", "pos_weight"]}, ["any", "unit", "pos", "pos"],
     lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw, reduction="sum")),
    ("binary_cross_entropy", {"reduction": "mean", "_operands": ["input", "target", "weight"]},
     ["unit", "unit", "pos"], lambda p, t, w: F.binary_cross_entropy(p, t, weight=w)),
    ("soft_margin_loss", {"reduction": "mean"}, ["any", "sign"], F.soft_margin_loss),
    ("multilabel_soft_margin_loss", {"reduction": "mean"}, ["any", "unit"], F.multilabel_soft_margin_loss),
    ("multilabel_soft_margin_loss", {"reduction": "mean", "_operands": ["input", "target", "weight"]},
     ["any", "unit", "pos"], lambda x, t, w: F.multilabel_soft_margin_loss(x, t, weight=w)),
    ("hinge_embedding_loss", {"reduction": "mean", "margin": 0.7}, ["any", "sign"],
     lambda x, t: F.hinge_embedding_loss(x, t, margin=0.7)),
    ("cosine_similarity", {"dim": 1, "eps": 1e-8}, ["any", "any"], lambda a, b: F.cosine_similarity(a, b, 1)),
    ("pairwise_distance", {"p": 2.0, "eps": 1e-6}, ["any", "any"], lambda a, b: F.pairwise_distance(a, b, 2.0, 1e-6)),
    ("pairwise_distance", {"p": 1.0, "eps": 1e-3}, ["any", "any"], lambda a, b: F.pairwise_distance(a, b, 1.0, 1e-3)),
    ("pairwise_distance", {"p": 3.0, "eps": 1e-6}, ["any", "any"], lambda a, b: F.pairwise_distance(a, b, 3.0, 1e-6)),
    ("margin_ranking_loss", {"reduction": "mean", "margin": 0.3}, ["any", "any", "sign"],
     lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=0.3)),
    # per row over the class dim (the last of [ROWS, LENGTH]); "class": one class index a row, row 0's ignored.
    # The mean / sum over the rows runs after the kernel (the emulator's and the GPU's tests).
    ("cross_entropy", {"reduction": "none", "ignore_index": 3}, ["any", "class"],
     lambda x, t: F.cross_entropy(x, t[:, 0].long(), ignore_index=3, reduction="none")),
    ("cross_entropy", {"reduction": "none", "label_smoothing": 0.2}, ["any", "class"],
     lambda x, t: F.cross_entropy(x, t[:, 0].long(), label_smoothing=0.2, reduction="none")),
]
REDUCE_OPERAND_KEYS = {
    "cosine_similarity": ["x1", "x2"],
    "pairwise_distance": ["x1", "x2"],
    "margin_ranking_loss": ["input1", "input2", "target"],
}
# Reductions over the last dim without a `dim` argument (the others without one reduce every element).
LAST_DIM_REDUCTIONS = {"pairwise_distance", "cross_entropy"}


def _rows_last(x: torch.Tensor) -> torch.Tensor:
    return x.reshape(-1, x.shape[-1])


def _expand_channels(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return w.view(1, -1, *([1] * (x.dim() - 2))).expand_as(x)


# (op, const params, input shape, param shapes by key, rows view of a full-size tensor, its inverse, reference).
# The statistics of each row of the view are exact here; params are expanded to the input's shape first.
NORM_CASES = [
    ("softmax", {"dim": 1}, (ROWS, LENGTH), {}, _rows_last, None, lambda x: F.softmax(x, 1)),
    ("log_softmax", {"dim": 1}, (ROWS, LENGTH), {}, _rows_last, None, lambda x: F.log_softmax(x, 1)),
    ("softmin", {"dim": 1}, (ROWS, LENGTH), {}, _rows_last, None, lambda x: F.softmin(x, 1)),
    ("normalize", {"p": 2.0, "dim": 1, "eps": 1e-12}, (ROWS, LENGTH), {}, _rows_last, None,
     lambda x: F.normalize(x, 2.0, 1)),
    ("layer_norm", {"eps": 1e-5}, (ROWS, LENGTH), {"weight": (LENGTH,), "bias": (LENGTH,)}, _rows_last, None,
     lambda x, w, b: F.layer_norm(x, (LENGTH,), w, b, 1e-5)),
    ("rms_norm", {"eps": 1e-6}, (ROWS, LENGTH), {"weight": (LENGTH,)}, _rows_last, None,
     lambda x, w: F.rms_norm(x, (LENGTH,), w, 1e-6)),
    ("instance_norm", {"eps": 1e-5}, (2, 3, LENGTH), {"weight": (3,), "bias": (3,)}, _rows_last, None,
     lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-5)),
    ("group_norm", {"eps": 1e-5, "num_groups": 3}, (2, 6, 5), {"weight": (6,), "bias": (6,)},
     lambda x: x.reshape(6, 10), None, lambda x, w, b: F.group_norm(x, 3, w, b, 1e-5)),
    ("batch_norm", {"eps": 1e-5, "training": True}, (LENGTH, 4), {"weight": (4,), "bias": (4,)},
     lambda x: x.t().contiguous(), lambda r: r.t(),
     lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-5)),
    # a reduction broadcast back over its rows (plan/reduce-broadcast.ts): the reduction's own prologue and epilogue
    ("reduce_broadcast_sum", {"reduction": "mean", "dims": [1]}, (ROWS, LENGTH), {}, _rows_last, None,
     lambda x: x.mean(1, keepdim=True).expand_as(x)),
    ("reduce_broadcast_sum", {"reduction": "sum", "dims": [1]}, (ROWS, LENGTH), {}, _rows_last, None,
     lambda x: x.sum(1, keepdim=True).expand_as(x)),
    ("reduce_broadcast_sum", {"reduction": "vector_norm", "ord": 2.0, "dims": [1]}, (ROWS, LENGTH), {}, _rows_last,
     None, lambda x: torch.linalg.vector_norm(x, 2, 1, keepdim=True).expand_as(x)),
    ("reduce_broadcast_sum", {"reduction": "vector_norm", "ord": 3.5, "dims": [1]}, (ROWS, LENGTH), {}, _rows_last,
     None, lambda x: torch.linalg.vector_norm(x, 3.5, 1, keepdim=True).expand_as(x)),
    ("reduce_broadcast_max", {"reduction": "amax", "dims": [1]}, (ROWS, LENGTH), {}, _rows_last, None,
     lambda x: x.amax(1, keepdim=True).expand_as(x)),
    ("reduce_broadcast_min", {"reduction": "amin", "dims": [1]}, (ROWS, LENGTH), {}, _rows_last, None,
     lambda x: x.amin(1, keepdim=True).expand_as(x)),
    ("reduce_broadcast_welford", {"reduction": "var", "correction": 1, "dims": [1]}, (ROWS, LENGTH), {}, _rows_last,
     None, lambda x: x.var(1, keepdim=True).expand_as(x)),
    ("reduce_broadcast_welford", {"reduction": "std", "correction": 0, "dims": [1]}, (ROWS, LENGTH), {}, _rows_last,
     None, lambda x: x.std(1, correction=0, keepdim=True).expand_as(x)),
]


def _pointwise_json(op: str, params: dict, n_operands: int) -> dict:
    # "_operands": the case's operand keys where it leaves optional ones out (a loss's weight)
    keys = params.get("_operands") or OPERAND_KEYS.get(op, ["input"] if n_operands == 1 else TWO)[:n_operands]
    fn = {key: node(f"x{i}") for i, key in enumerate(keys)}
    fn.update({k: const(v) for k, v in params.items() if k != "_operands"})
    return {"op": op, "kind": "pointwise", "fn": fn}


def _reduce_json(op: str, params: dict, n_operands: int) -> dict:
    keys = params.get("_operands") or REDUCE_OPERAND_KEYS.get(op, ["input", "target"][:n_operands])
    fn = {key: node(f"x{i}") for i, key in enumerate(keys)}
    for k, v in params.items():
        if k == "_operands":
            continue
        fn[k] = ({"t": "list", "kind": "list", "items": [const(d) for d in v]} if isinstance(v, list) else const(v))
    return {"op": op, "kind": "reduce", "fn": fn, "sizes": {keys[0]: [ROWS, LENGTH]}}


def _norm_json(op: str, params: dict, param_shapes: dict) -> dict:
    fn = {"input": node("x0")}
    fn.update({key: node(f"p{i}") for i, key in enumerate(param_shapes)})
    fn.update({k: ({"t": "list", "kind": "list", "items": [const(d) for d in v]} if isinstance(v, list) else const(v))
               for k, v in params.items()})
    return {"op": op, "kind": "normalize", "fn": fn}


def _expressions(cases: list[dict]) -> dict:
    node_bin = shutil.which("node")
    if node_bin is None:
        pytest.skip("node is not installed")
    run = subprocess.run([node_bin, "--import", "tsx", str(ROOT / "test" / "python" / "op_math" / "expressions.ts")],
                         input=json.dumps(cases), capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


HOST_SHIM = r"""
#define __device__
#define __forceinline__ inline
#include <math.h>
#include <stdint.h>
// The device's approximate intrinsics as exact host math: this checks the formulas, not the hardware's ulps.
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float a) { return expf(a); }
#include "kf_pointwise.cuh"
inline float kf_exp_shifted(float d) { return expf(d); }
struct KfStats { float a; float b; float count; };
struct KfScalars { float v[1]; };
template <int K> struct KfSums { float v[K]; };
struct KfAccResult { float value; float m2; int64_t index; float count; float part[4]; };
struct KfStatResult { float value; float m2; float count; };
"""


def _reduce_body(i: int, case: dict) -> str:
    """Host code of one reduction case: Pro per element, an exact accumulation per row, Epi per row."""
    k, acc = case["inputs"], case["acc"]
    parts = 3 if acc == "KfAccSums<3>" else 1
    load = ", ".join(f"in[{j}][row * len + e]" for j in range(k))
    if acc.startswith("KfAccSums"):
        push = "".join(f"s[{p}] += v.v[{p}];" for p in range(parts))
        finish = "".join(f"res.part[{p}] = (float)s[{p}];" for p in range(parts)) + "res.value = res.part[0];"
    elif acc == "KfAccSum":
        push, finish = "s[0] += v;", "res.value = (float)s[0];"
    elif acc == "KfAccProd":
        push, finish = "s[0] = e == 0 ? v : s[0] * v;", "res.value = (float)s[0];"
    elif acc in ("KfAccMax", "KfAccMin", "KfAccArgMax", "KfAccArgMin"):  # arg*: the value only (see the test)
        cmp = ">" if acc.endswith("Max") else "<"
        push, finish = f"if (e == 0 || v {cmp} s[0]) s[0] = v;", "res.value = (float)s[0];"
    elif acc == "KfAccLogSumExp":
        push = "vals[e] = v; if (e == 0 || v > s[0]) s[0] = v;"
        finish = ("double t = 0; for (long q = 0; q < len; ++q) t += exp(vals[q] - s[0]);"
                  "res.value = (float)(s[0] + log(t));")
    elif acc.startswith("KfAccCrossEntropy"):  # the element's class is its index e along the row
        push = ("vals[e] = v.v[0]; if (e == 0 || v.v[0] > s[0]) s[0] = v.v[0]; s[1] += v.v[0];"
                "if ((float)e == v.v[1]) { s[2] += v.v[0]; s[3] += 1; } res_target = v.v[1];")
        finish = ("double t = 0; for (long q = 0; q < len; ++q) t += exp(vals[q] - s[0]);"
                  "res.value = (float)log(t); res.m2 = (float)s[0]; res.part[0] = (float)s[2];"
                  "res.part[1] = (float)s[1]; res.part[2] = (float)s[3]; res.part[3] = res_target;")
    elif acc == "KfAccWelford":
        push = "vals[e] = v; s[0] += v;"
        finish = ("double m = s[0] / len, m2 = 0; for (long q = 0; q < len; ++q) m2 += (vals[q] - m) * (vals[q] - m);"
                  "res.value = (float)m; res.m2 = (float)m2;")
    else:
        raise AssertionError(f"no host accumulator for {acc}")
    return f"""
extern "C" void case_{i}(const float* const* in, long rows, long len, float* out, double* vals) {{
  const KfScalars sc{{{{0.f}}}};
  (void)sc;
  for (long row = 0; row < rows; ++row) {{
    double s[4] = {{0, 0, 0, 0}};
    float res_target = 0.f;
    (void)res_target;
    for (long e = 0; e < len; ++e) {{
      const float x[{max(k, 1)}] = {{{load}}};
      const {case['value']} v = {case['pro']};
      {push}
    }}
    KfAccResult r{{}};
    r.count = (float)len;
    KfAccResult& res = r;
    {finish}
    out[row] = {case['epi']};
  }}
}}
"""


def _norm_body(i: int, case: dict) -> str:
    """Host code of one normalisation case: the statistic of each row exactly (float64), then Apply."""
    k, stat = case["inputs"], case["stat"]
    load = ", ".join(f"in[{j}][row * len + e]" for j in range(k))
    stats = {
        "KfStatMaxSumExp": "double m = vals[0]; for (long e = 1; e < len; ++e) m = vals[e] > m ? vals[e] : m;"
                           "double t = 0; for (long e = 0; e < len; ++e) t += exp(vals[e] - m);"
                           "s.a = (float)m; s.b = (float)t;",
        "KfStatWelford": "double m = 0; for (long e = 0; e < len; ++e) m += vals[e]; m /= len;"
                         "double m2 = 0; for (long e = 0; e < len; ++e) m2 += (vals[e] - m) * (vals[e] - m);"
                         "s.a = (float)m; s.b = (float)m2;",
        "KfStatMeanSquare": "double q = 0; for (long e = 0; e < len; ++e) q += vals[e] * vals[e];"
                            "s.a = (float)(q / len); s.b = 0.f;",
        "KfStatSum": "double t = 0; for (long e = 0; e < len; ++e) t += vals[e]; s.a = (float)t; s.b = 0.f;",
        "KfStatMax": "double m = vals[0]; for (long e = 1; e < len; ++e) m = vals[e] > m ? vals[e] : m;"
                     "s.a = (float)m; s.b = 0.f;",
        "KfStatMin": "double m = vals[0]; for (long e = 1; e < len; ++e) m = vals[e] < m ? vals[e] : m;"
                     "s.a = (float)m; s.b = 0.f;",
    }[stat]
    return f"""
extern "C" void case_{i}(const float* const* in, long rows, long len, float* out, double* vals) {{
  const KfScalars sc{{{{0.f}}}};
  (void)sc;
  for (long row = 0; row < rows; ++row) {{
    for (long e = 0; e < len; ++e) {{
      const float x[{k}] = {{{load}}};
      vals[e] = {case['value']};
    }}
    KfStats s{{0.f, 0.f, (float)len}};
    {{ {stats} }}
    for (long e = 0; e < len; ++e) {{
      const float x[{k}] = {{{load}}};
      const float v = {case['value']};
      out[row * len + e] = {case['apply']};
    }}
  }}
}}
"""


def _pointwise_body(i: int, case: dict) -> str:
    k = case["inputs"]
    load = ", ".join(f"in[{j}][e]" for j in range(k))
    return f"""
extern "C" void case_{i}(const float* const* in, long n, float* out) {{
  const KfScalars sc{{{{0.f}}}};
  (void)sc;
  for (long e = 0; e < n; ++e) {{
    const float x[{max(k, 1)}] = {{{load}}};
    out[e] = {case['expr']};
  }}
}}
"""


def _build(bodies: list[str], tmp: Path) -> ctypes.CDLL:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    src = tmp / "op_math.cpp"
    src.write_text(HOST_SHIM + "\n".join(bodies), encoding="utf8")
    lib = tmp / "op_math.so"
    run = subprocess.run([compiler, "-std=c++17", "-O1", "-fno-fast-math", "-shared", "-fPIC", f"-I{CUDA_DIR}",
                          str(src), "-o", str(lib)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return ctypes.CDLL(str(lib))


def _float_ptrs(arrays: list[np.ndarray]):
    ptrs = (ctypes.POINTER(ctypes.c_float) * max(len(arrays), 1))()
    for j, a in enumerate(arrays):
        ptrs[j] = a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    return ptrs


def _close(ours: np.ndarray, ref: torch.Tensor, what: str, rtol: float = 2e-5, atol: float = 1e-6) -> None:
    ref_np = ref.detach().double().numpy().reshape(ours.shape)
    ok = np.isclose(ours.astype(np.float64), ref_np, rtol=rtol, atol=atol, equal_nan=True)
    bad = np.flatnonzero(~ok)
    assert ok.all(), f"{what}: {len(bad)} of {ours.size} differ, e.g. ours {ours.flat[bad[:4]]} vs {ref_np.flat[bad[:4]]}"


@pytest.fixture(scope="module")
def op_math(tmp_path_factory):
    """Generated expressions of every case, compiled into one host library."""
    pw_json = [_pointwise_json(op, params, len(doms)) for op, params, doms, _ in POINTWISE_CASES]
    red_json = [_reduce_json(op, params, len(doms)) for op, params, doms, _ in REDUCE_CASES]
    norm_json = [_norm_json(op, params, shapes) for op, params, _, shapes, *_ in NORM_CASES]
    listing = _expressions(pw_json + red_json + norm_json)
    exprs = listing["cases"]
    pw, red = exprs[: len(pw_json)], exprs[len(pw_json): len(pw_json) + len(red_json)]
    listing["norm"] = exprs[len(pw_json) + len(red_json):]
    bodies = [_pointwise_body(i, c) for i, c in enumerate(pw) if c.get("expr")]
    bodies += [_reduce_body(1000 + i, c) for i, c in enumerate(red) if c.get("pro") and c.get("epi")]
    bodies += [_norm_body(2000 + i, c) for i, c in enumerate(listing["norm"]) if c.get("apply")]
    return _build(bodies, tmp_path_factory.mktemp("op_math")), pw, red, listing


def test_every_rule_has_a_case(op_math):
    _, pw, red, listing = op_math
    pointwise_ops, reduce_ops = listing["pointwise"], listing["reductions"]
    assert sorted(set(pointwise_ops) - {c[0] for c in POINTWISE_CASES}) == []
    assert sorted(set(reduce_ops) - {c[0] for c in REDUCE_CASES}) == []
    assert sorted(set(listing["normalizations"]) - {c[0] for c in NORM_CASES}) == []
    declined = [c["op"] for c in pw if not c.get("expr")] + [c["op"] for c in red if not (c.get("pro") and c.get("epi"))]
    declined += [c["op"] for c in listing["norm"] if not c.get("apply")]
    assert declined == [], f"rules declined their test case: {declined}"


@pytest.mark.parametrize("index", range(len(POINTWISE_CASES)),
                         ids=[f"{c[0]}{'-' + '-'.join(f'{k}={v}' for k, v in c[1].items()) if c[1] else ''}"
                              for c in POINTWISE_CASES])
def test_pointwise_expression_is_pytorchs(op_math, index):
    lib, pw, _, _ = op_math
    op, _params, domains, reference = POINTWISE_CASES[index]
    g = np.random.default_rng(index)
    n = 4096
    values = [_domain(d, n, g) for d in domains]
    # Only tensor operands reach the expression (a const exponent is a literal in it).
    operands = [np.ascontiguousarray(v, dtype=np.float32) for v in values[: pw[index]["inputs"]]]
    out = np.empty(n, dtype=np.float32)
    getattr(lib, f"case_{index}")(_float_ptrs(operands), ctypes.c_long(n), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
    ref = reference(*[torch.from_numpy(v.astype(np.float32).astype(np.float64)) for v in values])
    _close(out, ref, f"{op} {pw[index]['expr']}")


@pytest.mark.parametrize("index", range(len(REDUCE_CASES)),
                         ids=[f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items())}" for c in REDUCE_CASES])
def test_reduction_formula_is_pytorchs(op_math, index):
    lib, _, red, _ = op_math
    op, params, domains, reference = REDUCE_CASES[index]
    if reference is None:
        pytest.skip(f"{op} outputs an index: the accumulator's, checked by the GPU tests")
    g = np.random.default_rng(100 + index)
    values = [_domain(d, ROWS * LENGTH, g).reshape(ROWS, LENGTH) for d in domains]
    if op == "kl_div" and not params["log_target"]:
        values[1][0, :3] = 0.0  # xlogy(0, 0) = 0
    operands = [np.ascontiguousarray(v, dtype=np.float32) for v in values]
    whole = params.get("dim") is None and op not in LAST_DIM_REDUCTIONS
    rows, length = (1, ROWS * LENGTH) if whole else (ROWS, LENGTH)
    out = np.empty(rows, dtype=np.float32)
    vals = np.empty(rows * length, dtype=np.float64)
    getattr(lib, f"case_{1000 + index}")(_float_ptrs(operands), ctypes.c_long(rows), ctypes.c_long(length),
                                          out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                          vals.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
    ref = reference(*[torch.from_numpy(v.astype(np.float32).astype(np.float64)) for v in values])
    _close(out if ref.dim() else out[:1], ref.reshape(-1) if ref.dim() else ref.reshape(1),
           f"{op} pro {red[index]['pro']} epi {red[index]['epi']}", rtol=1e-4, atol=1e-5 * math.sqrt(length))


@pytest.mark.parametrize("index", range(len(NORM_CASES)), ids=[c[0] for c in NORM_CASES])
def test_normalization_apply_is_pytorchs(op_math, index):
    lib, _, _, listing = op_math
    op, _params, shape, param_shapes, rows_of, back, reference = NORM_CASES[index]
    case = listing["norm"][index]
    g = np.random.default_rng(200 + index)
    x = torch.from_numpy(_domain("any", math.prod(shape), g).reshape(shape).astype(np.float32))
    params = [torch.from_numpy(g.normal(1, 0.5, s).astype(np.float32)) for s in param_shapes.values()]
    full = [x] + [p.expand_as(x) if p.dim() == x.dim() or p.shape[-1:] == x.shape[-1:] else _expand_channels(p, x)
                  for p in params]
    operands = [np.ascontiguousarray(rows_of(t.contiguous()).numpy()) for t in full]
    rows, length = operands[0].shape
    out = np.empty((rows, length), dtype=np.float32)
    vals = np.empty(length, dtype=np.float64)
    getattr(lib, f"case_{2000 + index}")(_float_ptrs(operands), ctypes.c_long(rows), ctypes.c_long(length),
                                          out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                          vals.ctypes.data_as(ctypes.POINTER(ctypes.c_double)))
    ours = torch.from_numpy(out)
    ours = (back(ours) if back else ours).reshape(shape).numpy()
    ref = reference(x.double(), *[p.double() for p in params])
    _close(ours, ref, f"{op} apply {case['apply']}", rtol=1e-4, atol=1e-5)
