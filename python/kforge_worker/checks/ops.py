"""Operator families: which PyTorch calls are "the very operator being replaced" for a problem.

A problem's reference forward names its heavy operators (attention, GEMM, convolution). A candidate that
calls the same family on the problem's real inputs has not replaced it. Families are spelled twice: as
Python-level dotted names (for the static scan) and as ATen op names (for the runtime dispatch record).
"""

from __future__ import annotations

# Python-level callables, canonical dotted names after import aliases are resolved.
PY_FAMILIES: dict[str, frozenset[str]] = {
    "attention": frozenset(
        {
            "torch.nn.functional.scaled_dot_product_attention",
            "torch._C._nn.scaled_dot_product_attention",
            "torch.nn.functional.multi_head_attention_forward",
            "torch.nn.MultiheadAttention",
            "torch.nn.modules.activation.MultiheadAttention",
            "torch.nn.attention.flex_attention.flex_attention",
        }
    ),
    "gemm": frozenset(
        {
            "torch.matmul",
            "torch.mm",
            "torch.bmm",
            "torch.addmm",
            "torch.addbmm",
            "torch.baddbmm",
            "torch.einsum",
            "torch.tensordot",
            "torch.inner",
            "torch.mv",
            "torch.addmv",
            "torch.chain_matmul",
            "torch.linalg.matmul",
            "torch.linalg.multi_dot",
            "torch.linalg.vecdot",
            "torch.nn.functional.linear",
            "torch.nn.functional.bilinear",
            "torch._C._nn.linear",
            "torch.nn.Linear",
            "torch.nn.Bilinear",
            "torch.nn.LazyLinear",
            "torch.nn.modules.linear.Linear",
        }
    ),
    "conv": frozenset(
        {
            *(f"torch.nn.functional.conv{d}d" for d in (1, 2, 3)),
            *(f"torch.nn.functional.conv_transpose{d}d" for d in (1, 2, 3)),
            *(f"torch.conv{d}d" for d in (1, 2, 3)),
            *(f"torch.nn.Conv{d}d" for d in (1, 2, 3)),
            *(f"torch.nn.ConvTranspose{d}d" for d in (1, 2, 3)),
            "torch.convolution",
        }
    ),
}

# Tensor methods that dispatch to a family (x.matmul(w), q.bmm(k)).
METHOD_FAMILIES: dict[str, frozenset[str]] = {
    "gemm": frozenset({"matmul", "mm", "bmm", "addmm", "addmm_", "baddbmm", "baddbmm_", "mv", "__matmul__"}),
    "attention": frozenset(),
    "conv": frozenset(),
}

# `torch.ops.aten.<name>` spellings and the runtime dispatch record use these.
ATEN_FAMILIES: dict[str, frozenset[str]] = {
    "attention": frozenset(
        {
            "scaled_dot_product_attention",
            "_scaled_dot_product_attention_math",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_fused_attention_overrideable",
            "_flash_attention_forward",
            "_efficient_attention_forward",
            "_fused_sdp_choice",
            "_native_multi_head_attention",
        }
    ),
    "gemm": frozenset(
        {
            "mm",
            "addmm",
            "bmm",
            "baddbmm",
            "addbmm",
            "matmul",
            "linear",
            "addmv",
            "mv",
            "dot",
            "vdot",
            "einsum",
            "tensordot",
            "_addmm_activation",
            "_scaled_mm",
            "_int_mm",
            "bilinear",
        }
    ),
    "conv": frozenset(
        {
            "convolution",
            "_convolution",
            "conv1d",
            "conv2d",
            "conv3d",
            "conv_transpose1d",
            "conv_transpose2d",
            "conv_transpose3d",
            "cudnn_convolution",
            "cudnn_convolution_transpose",
            "mkldnn_convolution",
            "_slow_conv2d_forward",
            "slow_conv3d_forward",
            "_nnpack_spatial_convolution",
        }
    ),
}

# Which families count as "the very operator" when the reference uses a given family. An attention problem
# bans the attention operator itself; GEMMs inside a hand-written attention are slow but honest work, so
# they are reported (warn) rather than condemned.
CONDEMNING: dict[str, frozenset[str]] = {
    "attention": frozenset({"attention"}),
    "gemm": frozenset({"gemm"}),
    "conv": frozenset({"conv"}),
}


def aten_family(op_name: str) -> str | None:
    """'aten::mm' / 'aten.mm.default' / 'mm' -> 'gemm'."""
    name = op_name.replace("aten::", "").replace("aten.", "")
    base = name.split(".")[0]
    for family, names in ATEN_FAMILIES.items():
        if base in names:
            return family
    return None


# Higher-order operators in the dispatch record (instrument.OpRecorder names them `higher_order::<name>`): flex_attention
# is the attention operator itself, whatever ATen ops its dense kernel runs inside (matmul, softmax).
HOP_FAMILIES: dict[str, str] = {
    "higher_order::flex_attention": "attention",
    "higher_order::flex_attention_backward": "attention",
}


def op_family(op_name: str) -> str | None:
    """A name of the dispatch record ('aten::mm', 'higher_order::flex_attention') -> its family, if any."""
    if op_name.startswith("aten::"):
        return aten_family(op_name)
    return HOP_FAMILIES.get(op_name)


def py_family(dotted: str) -> str | None:
    for family, names in PY_FAMILIES.items():
        if dotted in names:
            return family
    if dotted.startswith("torch.ops.aten."):
        return aten_family(dotted[len("torch.ops.aten.") :])
    return None


def method_family(method: str) -> str | None:
    for family, names in METHOD_FAMILIES.items():
        if method in names:
            return family
    return None
