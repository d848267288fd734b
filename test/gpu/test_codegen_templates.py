"""The codegen templates on a GPU against float64 torch: kf_elementwise.cuh over broadcast and strided layouts,
kf_reduce.cuh for every accumulator over every reduction geometry, in fp32, fp16 and bf16.

Run on a GPU host from the repository root: python -m pytest test/gpu -q
The harness (templates_harness.py) compiles once into .cache/kf_templates_harness (ninja, one unit per dtype).
"""

from __future__ import annotations

import math
import sys
import zlib
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import templates_harness  # noqa: E402

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# Relative rounding of one output value in each dtype (plus fp32 arithmetic slack).
OUT_RTOL = {torch.float32: 2e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


@pytest.fixture(scope="module")
def kf():
    return templates_harness.build()


def _gen(seed: int = 0) -> torch.Generator:
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


def randn(shape, dtype, seed=0, scale=1.0):
    return (torch.randn(shape, device="cuda", generator=_gen(seed), dtype=torch.float32) * scale).to(dtype)


def assert_close(ours: torch.Tensor, ref: torch.Tensor, atol, rtol: float, what: str) -> None:
    """|ours - ref| <= atol + rtol |ref| elementwise (atol may be a tensor); NaN and inf must match exactly."""
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} != {tuple(ref.shape)}"
    o, r = ours.double(), ref.double()
    assert torch.equal(torch.isnan(o), torch.isnan(r)), f"{what}: NaN positions differ"
    inf = torch.isinf(r) | torch.isinf(o)
    assert torch.equal(o[inf], r[inf]), f"{what}: inf values differ"
    fin = ~(torch.isnan(r) | inf)
    err = (o - r).abs()
    # Below the smallest normal the output's spacing is fixed: half of it is the rounding of a subnormal.
    info = torch.finfo(ours.dtype) if ours.is_floating_point() else None
    subnormal_half_step = info.smallest_normal * info.eps / 2 if info else 0.0
    bound = atol + rtol * r.abs() + subnormal_half_step
    bad = fin & (err > bound)
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {o.numel()} off; first at flat {i}: ours {o.flatten()[i].item()} "
            f"ref {r.flatten()[i].item()} bound {bound.flatten()[i].item() if torch.is_tensor(bound) else bound}"
        )


# ---------------------------------------------------------------------------------------------- elementwise

def ew_ref(op: str, xs: list[torch.Tensor], sc: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """(float64 result, magnitude of the terms) of the harness functors."""
    x = [t.double() for t in xs]
    if op == "relu_affine":
        y = torch.relu(x[0]) * sc[0] + sc[1]
        return y, y.abs() + abs(sc[1])
    if op == "axpy":
        return x[0] * sc[0] - x[1], (x[0] * sc[0]).abs() + x[1].abs()
    if op == "fma3":
        return x[0] * x[1] + x[2], (x[0] * x[1]).abs() + x[2].abs()
    if op == "weighted8":
        terms = [(k + 1) * t for k, t in enumerate(x)]
        return sum(terms), sum(t.abs() for t in terms)
    raise ValueError(op)


def check_ew(kf, op: str, xs: list[torch.Tensor], sc: list[float] | None = None) -> None:
    sc = sc if sc is not None else [1.5, -0.25]
    ours = kf.ew(op, xs, sc)
    ref, mag = ew_ref(op, xs, sc)
    ref = ref.expand(torch.broadcast_shapes(*[t.shape for t in xs]))
    assert ours.is_contiguous()
    rtol = OUT_RTOL[ours.dtype]
    assert_close(ours, ref, 1e-6 * mag.expand_as(ref) + 1e-30, rtol, f"ew {op} {[tuple(t.shape) for t in xs]}")


CONTIGUOUS_SHAPES = [(), (1,), (7,), (4096,), (1000003,), (64, 128), (3, 5, 7), (2, 3, 4, 5, 6, 7), (0, 5)]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", CONTIGUOUS_SHAPES, ids=str)
def test_elementwise_contiguous(kf, dt, shape):
    dtype = DTYPES[dt]
    check_ew(kf, "relu_affine", [randn(shape, dtype, 1)])
    check_ew(kf, "axpy", [randn(shape, dtype, 2), randn(shape, dtype, 3)])


BROADCASTS = [
    ((8, 16, 9, 11), ()),  # scalar tensor
    ((8, 16, 32, 32), (16, 1, 1)),  # per-channel parameter
    ((8, 16, 9, 11), (16, 1, 1)),
    ((300, 257), (257,)),  # row vector
    ((300, 256), (300, 1)),  # column
    ((2, 1, 3, 1, 5, 4), (1, 4, 1, 6, 1, 4)),  # both sides broadcast, 6 dims
    ((1, 1000), (1000, 1)),  # outer product
    ((), ()),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_elementwise_broadcast(kf, dt, shapes):
    dtype = DTYPES[dt]
    a, b = randn(shapes[0], dtype, 4), randn(shapes[1], dtype, 5)
    check_ew(kf, "axpy", [a, b])
    check_ew(kf, "axpy", [b, a])


@pytest.mark.parametrize("dt", DTYPES)
def test_elementwise_strided_views(kf, dt):
    dtype = DTYPES[dt]
    base = randn((256, 384), dtype, 6)
    other = randn((384, 256), dtype, 7)
    check_ew(kf, "axpy", [base.t(), other])  # transposed against contiguous
    check_ew(kf, "axpy", [base[:, ::2], other.t()[:, 1::2]])  # every other column
    flat = randn((100003,), dtype, 8)
    check_ew(kf, "relu_affine", [flat[1:]])  # misaligned start: no vector path
    check_ew(kf, "relu_affine", [flat[8:]])  # 16-byte aligned again for fp16/bf16, vector path with a tail
    check_ew(kf, "relu_affine", [base[3:200, 5:300]])  # a window
    row = randn((384,), dtype, 9)
    check_ew(kf, "axpy", [row.expand(256, 384), base])  # an expanded (stride 0) input
    c = randn((4, 5, 6, 7), dtype, 10).permute(3, 1, 0, 2)
    check_ew(kf, "fma3", [c, c.contiguous(), randn((5, 1, 6), dtype, 11)])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "nchw", [(8, 64, 32, 32), (3, 37, 33, 17), (2, 16, 16, 1), (1, 130, 5, 7), (4, 24, 9, 50), (2, 32, 70, 3)], ids=str
)
def test_elementwise_channels_last_operands(kf, dt, nchw):
    """Channels-last operands into a contiguous (NCHW) result: the tiled path stages one of them; a second
    transposed operand sends the launch to the generic path. Tiles 16, 32 and 64 channels wide, edge tiles
    (sizes not multiples of the tile)."""
    dtype = DTYPES[dt]
    n, c, h, w = nchw
    cl = randn(nchw, dtype, 12).contiguous(memory_format=torch.channels_last)
    cl2 = randn(nchw, dtype, 13).contiguous(memory_format=torch.channels_last)
    cl3 = randn(nchw, dtype, 14).contiguous(memory_format=torch.channels_last)
    bias = randn((c, 1, 1), dtype, 15)
    check_ew(kf, "axpy", [cl, bias])  # conv output + its per-channel bias
    check_ew(kf, "fma3", [cl, randn(nchw, dtype, 16), bias])  # with a contiguous residual
    check_ew(kf, "fma3", [cl, cl2, bias])  # two transposed operands: generic path
    check_ew(kf, "fma3", [cl, cl2, cl3])
    cl5 = randn((2, c, 3, h, w), dtype, 17).contiguous(memory_format=torch.channels_last_3d)
    check_ew(kf, "axpy", [cl5, randn((c, 1, 1, 1), dtype, 18)])


@pytest.mark.parametrize("dt", DTYPES)
def test_elementwise_eight_inputs_each_broadcast_differently(kf, dt):
    dtype = DTYPES[dt]
    shape = (6, 10, 12, 16)
    shapes = [shape, (16,), (12, 1), (10, 1, 1), (), (6, 1, 12, 16), (1, 10, 1, 16), (6, 10, 12, 1)]
    xs = [randn(s, dtype, 20 + k) for k, s in enumerate(shapes)]
    xs[5] = randn((6, 12, 16, 3), dtype, 30)[..., 1].unsqueeze(1)  # strided view
    check_ew(kf, "weighted8", xs)
    check_ew(kf, "weighted8", [randn((1 << 18) + 5, dtype, 40 + k) for k in range(8)])


def test_elementwise_mixed_types(kf):
    a = randn((64, 1000), torch.float16, 50)
    b = randn((1000,), torch.float32, 51)
    out = kf.ew("axpy", [a, b], [2.0])
    assert out.dtype == torch.float32
    assert_close(out, a.double() * 2.0 - b.double(), 1e-6, 1e-6, "mixed axpy")


def test_elementwise_writes_every_element_of_a_large_tensor(kf):
    x = randn((3, 1 << 22), torch.float32, 60)
    out = kf.ew("relu_affine", [x], [1.0, 1.0])  # relu(x) + 1 >= 1 everywhere
    assert bool((out >= 1).all())
    assert_close(out, torch.relu(x.double()) + 1, 1e-6, 1e-6, "large")


# ---------------------------------------------------------------------------------------------- reductions

def mask_of(dims, ndim) -> int:
    return sum(1 << (d % ndim) for d in dims) if ndim else 0


def red_ref(op: str, xs: list[torch.Tensor], dims: list[int]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(float64 reference, per-output sum of |terms|, reduced count) with the reduced dims flattened last."""
    shape = torch.broadcast_shapes(*[t.shape for t in xs])
    x = [t.double().expand(shape) for t in xs]
    if op == "cosine":
        return torch.nn.functional.cosine_similarity(x[0], x[1], dim=dims[0]), None, shape[dims[0]]
    v = (x[0] - x[1]) ** 2 if op == "sqdiff_sum" else x[0]
    nd = len(shape)
    dims = sorted(d % nd for d in dims) if nd else []
    kept = [d for d in range(nd) if d not in dims]
    n = math.prod(shape[d] for d in dims)
    flat = v.permute(kept + dims).reshape([shape[d] for d in kept] + [n])
    mass = flat.abs().sum(-1)
    if op in ("sum", "sqdiff_sum"):
        r = flat.sum(-1)
    elif op in ("mean", "wmean"):
        r = flat.mean(-1)
    elif op == "prod":
        r = flat.prod(-1)
    elif op == "amax":
        r = flat.amax(-1)
    elif op == "amin":
        r = flat.amin(-1)
    elif op == "argmax":
        r = flat.argmax(-1)
    elif op == "argmin":
        r = flat.argmin(-1)
    elif op == "logsumexp":
        r = torch.logsumexp(flat, -1)
    elif op == "var":
        r = flat.var(-1)
    else:
        raise ValueError(op)
    return r, mass, n


def red_inputs(op: str, shape, dtype, seed: int, second_shape=None) -> list[torch.Tensor]:
    n = max(1, math.prod(shape))
    if op in ("argmax", "argmin"):  # small integers: ties everywhere, first occurrence must win
        x = torch.randint(-3, 4, shape, device="cuda", generator=_gen(seed)).to(dtype)
    elif op == "prod":  # random signs and a few 2, 0.5 and 3: exact in every dtype, no overflow at any length
        g = _gen(seed)
        x = torch.randint(0, 2, shape, device="cuda", generator=g).float() * 2 - 1
        flat = x.view(-1)
        for value in (2.0, 0.5, 3.0, 2.0, -0.5):
            flat[torch.randint(0, n, (1,), device="cuda", generator=g)] = value
        x = x.to(dtype)
    elif op == "logsumexp":
        x = randn(shape, dtype, seed, 3.0)
    else:
        x = randn(shape, dtype, seed) + 0.5
    if op in ("sqdiff_sum", "cosine"):
        return [x, randn(second_shape if second_shape is not None else shape, dtype, seed + 1)]
    return [x]


def check_reduce(kf, op: str, xs: list[torch.Tensor], dims: list[int], ws_mode: int = 1) -> torch.Tensor:
    nd = len(torch.broadcast_shapes(*[t.shape for t in xs]))
    ours = kf.reduce(op, xs, mask_of(dims, nd), ws_mode)
    ref, mass, n = red_ref(op, xs, dims)
    what = f"reduce {op} {xs[0].dtype} {[tuple(t.shape) for t in xs]} dims {dims}"
    if op in ("argmax", "argmin"):
        assert ours.dtype == torch.int64
        assert torch.equal(ours, ref), f"{what}: indices differ at {(ours != ref).nonzero()[:5].tolist()}"
        return ours
    rtol = OUT_RTOL[ours.dtype]
    if ours.dtype in (torch.float16, torch.bfloat16):
        # A result beyond the output dtype's range is inf there, as torch's own reduction returns it (2^20
        # values of randn + 0.5 sum past fp16's 65504).
        overflow = torch.isinf(ref.to(ours.dtype)) & torch.isfinite(ref)
        ref = torch.where(overflow, ref.sign() * math.inf, ref)
    if op in ("sum", "sqdiff_sum"):
        atol = 1e-5 * mass + 1e-30
    elif op in ("mean", "wmean"):
        atol = 1e-5 * mass / max(n, 1) + 1e-30
    elif op == "prod":
        atol, rtol = 1e-30, rtol + 1e-4
    elif op == "logsumexp":
        atol = 1e-5 * (1 + ref.abs())
    elif op == "cosine":  # in [-1, 1]; three fp32 sums of n terms
        atol = 1e-6 * math.sqrt(n) + 1e-6
    elif op == "var":
        atol, rtol = 1e-6, rtol + 2e-4
    else:  # amax / amin: an input value, exactly
        atol, rtol = 0.0, 0.0
    assert_close(ours, ref, atol, rtol, what)
    return ours


OPS = ["sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "logsumexp", "var", "wmean"]

# (shape, reduced dims, label)
GEOMETRIES = [
    ((10000, 17), [1], "many short rows, odd"),
    ((8192, 64), [1], "many short rows, vector"),
    ((513, 1000), [1], "medium rows"),
    ((16, 1 << 20), [1], "few long rows"),
    ((5, 300001), [1], "few long odd rows"),
    ((8, 33, 7, 9), [1], "strided dim 1, odd"),
    ((16, 64, 32, 32), [1], "strided dim 1 of NCHW, vector"),
    ((4, 3, 5, 6, 8), [2], "strided dim 2 of NCDHW"),
    ((1_000_000, 16), [0], "columns, long reduction"),
    ((64, 22, 300, 24), [1], "short kept inner dim: tiles across outer indices"),
    ((7, 5, 33, 6), [1], "short odd kept inner dim across outer indices"),
    ((6, 5, 7, 8), [0, 2], "two dims, kept innermost"),
    ((6, 5, 7, 8), [1, 3], "two dims, reduced innermost"),
    ((6, 5, 7, 8), [0, 1, 2], "three outer dims"),
    ((6, 5, 7, 8), [0, 3], "outer and inner"),
    ((1000003,), [0], "whole 1-D"),
    ((64, 1024, 16), [0, 1, 2], "whole 3-D"),
    ((32, 16, 56 * 56), [0, 2], "BatchNorm style, C=16"),
    ((8, 3, 17, 19), [0, 2, 3], "BatchNorm style 4-D, odd"),
    ((64, 16, 128 * 128), [0, 2], "BatchNorm style, large"),
    ((5, 7), [], "no reduced dim"),
    ((), [], "0-d"),
    ((1, 1, 4097), [2], "size-1 dims"),
    ((3, 1, 5), [1], "reducing a size-1 dim"),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: g[2])
def test_reduce_geometries(kf, dt, op, geometry):
    shape, dims, _ = geometry
    if op == "var" and math.prod(shape[d] for d in dims) < 2:
        pytest.skip("unbiased variance of one element is NaN/inf by definition")
    xs = red_inputs(op, shape, DTYPES[dt], seed=zlib.crc32(repr((op, shape)).encode()) % 1000)
    check_reduce(kf, op, xs, dims)


STRIDED = [
    ("transposed, reduce contiguous dim", lambda x: x.t(), [0]),
    ("transposed, reduce strided dim", lambda x: x.t(), [1]),
    ("sliced rows, misaligned", lambda x: x[:, 1:-2], [1]),
    ("every other column", lambda x: x[:, ::2], [1]),
    ("permuted 3-D", lambda x: x.reshape(30, 40, 64).permute(2, 0, 1), [0, 2]),
    ("expanded (stride 0) reduced dim", lambda x: x[:1].expand(37, 1200), [0]),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ["sum", "amax", "argmax", "var", "logsumexp"])
@pytest.mark.parametrize("case", STRIDED, ids=lambda c: c[0])
def test_reduce_strided_inputs(kf, dt, op, case):
    _, view, dims = case
    base = red_inputs(op, (64, 1200), DTYPES[dt], seed=7)[0]
    check_reduce(kf, op, [view(base)], dims)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "shapes,dims",
    [
        (((4096, 300), (4096, 1)), [1]),  # (x - row mean)^2 summed per row
        (((32, 16, 3136), (1, 16, 1)), [0, 2]),  # BatchNorm style with a per-channel second input
        (((16, 64, 32, 32), (64, 1, 1)), [1]),
        (((1000, 77), ()), [0, 1]),
    ],
    ids=str,
)
def test_reduce_two_input_prologue(kf, dt, shapes, dims):
    dtype = DTYPES[dt]
    xs = [randn(shapes[0], dtype, 70), randn(shapes[1], dtype, 71)]
    check_reduce(kf, "sqdiff_sum", xs, dims)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "shapes,dim",
    [
        (((32768, 4096), (32768, 4096)), 1),  # the loss's rows
        (((3000, 67), (3000, 67)), 1),  # short odd rows: scalar loads
        (((8, 300001), (8, 300001)), 1),  # few long rows: split across blocks, three sums per partial
        (((16, 64, 33, 17), (16, 64, 33, 17)), 1),  # dim 1 of NCHW: the column path
        (((64, 1000), (1, 1000)), 1),  # a broadcast second input
        (((5, 7, 9), (5, 7, 9)), 0),
    ],
    ids=str,
)
def test_reduce_cosine_similarity_three_sums(kf, dt, shapes, dim):
    dtype = DTYPES[dt]
    xs = red_inputs("cosine", shapes[0], dtype, 60, shapes[1])
    xs[0].view(-1, shapes[0][-1])[0].zero_()  # a zero vector: both norms clamp to eps, the result is 0
    check_reduce(kf, "cosine", xs, [dim])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize(
    "case",
    [
        "co-aligned odd rows",  # both operands (4095, 301): one boundary per row serves both
        "phases differ",  # x[:, 1:] against y[:, :-1]: no common boundary, scalar loads
        "short odd rows",  # 67 columns: a few threads per row, head and tail on their own lanes
    ],
)
def test_reduce_rows_between_vector_boundaries(kf, dt, case):
    dtype = DTYPES[dt]
    if case == "co-aligned odd rows":
        xs = [randn((4095, 301), dtype, 72), randn((4095, 301), dtype, 73)]
    elif case == "phases differ":
        xs = [randn((2000, 1001), dtype, 74)[:, 1:], randn((2000, 1001), dtype, 75)[:, :-1]]
    else:
        xs = [randn((30000, 67), dtype, 76), randn((30000, 67), dtype, 77)]
    check_reduce(kf, "sqdiff_sum", xs, [1])
    for op in ("amin", "argmax", "logsumexp"):
        check_reduce(kf, op, [xs[0]], [1])


# (logits shape, label): the class dim is 1; every row path and the column path, splits across blocks included
CE_GEOMETRIES = [
    ((10000, 17), "many short rows, odd"),
    ((8192, 64), "many short rows, vector"),
    ((513, 1000), "medium rows"),
    ((32, 32000), "vocabulary rows"),
    ((4, 300001), "few long odd rows: split across blocks"),
    ((1, 5000), "one row"),
    ((8, 21, 33, 7), "class dim 1 of NCHW, odd: column path"),
    ((4, 19, 64, 64), "class dim 1 of NCHW, vector"),
]


@pytest.mark.parametrize("smoothing", [0.0, 0.1], ids=["plain", "smoothed"])
@pytest.mark.parametrize("ws_mode", [1, 0], ids=["workspace", "no workspace"])
@pytest.mark.parametrize("geometry", CE_GEOMETRIES, ids=lambda g: g[1])
def test_reduce_cross_entropy_rows(kf, geometry, ws_mode, smoothing):
    """KfAccCrossEntropy(Smoothed) (the class index from the flat index along the reduced class dim, the target an
    int64 operand broadcast along it): -log_softmax at the target in float64 (with smoothing 0.1: 0.9 of it plus 0.1
    of the row's mean of -log_softmax), 0 where the target is -100, NaN where it is no class."""
    shape, label = geometry
    seed = zlib.crc32(repr(shape).encode()) % 1000
    x = randn(shape, torch.float32, seed, 3.0)
    n, c, rest = shape[0], shape[1], shape[2:]
    t = torch.randint(0, c, (n, *rest), device="cuda", generator=_gen(seed + 1))
    flat = t.view(-1)
    flat[::7] = -100
    flat[3::11] = c
    ours = kf.reduce("cross_entropy_smoothed" if smoothing else "cross_entropy", [x, t.unsqueeze(1)], 2, ws_mode)
    logp = torch.log_softmax(x.double(), 1)
    ref = -logp.gather(1, t.clamp(0, c - 1).unsqueeze(1)).squeeze(1)
    ref = (1 - smoothing) * ref - smoothing * logp.mean(1)
    ref = torch.where(t == -100, torch.zeros_like(ref), torch.where(t == c, torch.full_like(ref, math.nan), ref))
    lse = torch.logsumexp(x.double(), 1)
    assert_close(ours, ref, 2e-6 * (1 + lse.abs()), 2e-6, f"cross entropy {label}")


def test_reduce_mixed_types(kf):
    x = randn((300, 4001), torch.float16, 80)
    out = kf.reduce("sum", [x], 2, 1, to_float=True)
    assert out.dtype == torch.float32
    ref = x.double().sum(1)
    assert_close(out, ref, 1e-5 * x.double().abs().sum(1), 1e-6, "mixed sum")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ["sum", "amax", "amin", "argmax", "argmin", "logsumexp", "var", "prod"])
@pytest.mark.parametrize("geometry", [((300, 1000), [1]), ((16, 1 << 18), [1]), ((8, 64, 33), [1]), ((100000, 8), [0]), ((16, 8, 4096), [0, 2])], ids=str)
def test_reduce_nan_propagates(kf, dt, op, geometry):
    shape, dims = geometry
    x = red_inputs(op, shape, DTYPES[dt], seed=90)[0]
    flat = x.view(-1)
    idx = torch.randint(0, flat.numel(), (max(3, flat.numel() // 50000),), device="cuda", generator=_gen(91))
    flat[idx] = float("nan")
    check_reduce(kf, op, [x], dims)


@pytest.mark.parametrize("dt", DTYPES)
def test_reduce_infinities(kf, dt):
    dtype = DTYPES[dt]
    x = randn((6, 5000), dtype, 95)
    x[0] = float("-inf")  # all -inf: logsumexp -inf, amax -inf, argmax 0
    x[1, 17] = float("inf")
    x[2, ::3] = float("-inf")
    x[3, 4000:] = float("inf")
    x[4, 100] = float("nan")  # a NaN before a +inf in one row: NaN (torch's amax sees the NaN first)
    x[4, 3000] = float("inf")
    for op in ("logsumexp", "amax", "amin", "argmax", "argmin"):
        check_reduce(kf, op, [x], [1])


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_reduce_arg_first_occurrence_across_splits(kf, op):
    # Every element equal but a few extremes far apart: the split reduction must still pick the first one.
    x = torch.zeros((4, 1 << 21), device="cuda")
    v = 5.0 if op == "argmax" else -5.0
    for row, cols in enumerate([[3, 2_000_000], [1_999_999, 100], [1 << 20, (1 << 20) + 1], [7]]):
        x[row, cols] = v
    out = check_reduce(kf, op, [x], [1])
    assert out.tolist() == [3, 100, 1 << 20, 7]
    out_all = kf.reduce(op, [torch.zeros(1 << 22, device="cuda")], 1, 1)
    assert out_all.item() == 0


@pytest.mark.parametrize("op", ["sum", "prod", "mean", "amax"])
def test_reduce_empty(kf, op):
    x = torch.randn((4, 0), device="cuda")
    out = kf.reduce(op, [x], 2, 1)
    expected = {"sum": 0.0, "prod": 1.0, "mean": float("nan"), "amax": float("-inf")}[op]
    assert out.shape == (4,)
    assert torch.equal(torch.isnan(out), torch.full((4,), math.isnan(expected), device="cuda"))
    if not math.isnan(expected):
        assert bool((out == expected).all())
    assert kf.reduce(op, [torch.randn((0, 5), device="cuda")], 2, 1).shape == (0,)


def test_reduce_without_workspace_is_correct_and_runs_are_bitwise_equal(kf):
    x = randn((16, 1 << 20), torch.float32, 100)
    with_ws = check_reduce(kf, "sum", [x], [1], ws_mode=1)
    without = check_reduce(kf, "sum", [x], [1], ws_mode=0)
    assert torch.allclose(with_ws, without, rtol=1e-5)
    assert torch.equal(with_ws, kf.reduce("sum", [x], 2, 1)), "a split reduction must be deterministic"
    y = randn((64, 16, 4096), torch.float32, 101)
    a = kf.reduce("var", [y], 0b101, 1)
    assert torch.equal(a, kf.reduce("var", [y], 0b101, 1))


def test_workspace_bytes_depend_on_shape_and_accumulator(kf):
    assert kf.workspace_bytes("sum", "f32", [1 << 10], 1) == 0  # too short to split
    small = kf.workspace_bytes("sum", "f32", [16, 1 << 22], 2)
    assert small > 0 and small % 4 == 0
    assert kf.workspace_bytes("argmax", "f32", [16, 1 << 22], 2) == 4 * small  # 16-byte states vs 4
    assert kf.workspace_bytes("sum", "f32", [1 << 20, 64], 2) == 0  # enough rows: never split


def test_errors_are_one_line_runtime_errors(kf):
    x = torch.randn((4, 5), device="cuda")
    with pytest.raises(RuntimeError, match="invalid argument"):
        kf.reduce("sum", [x], 1 << 3, 1)  # a reduced dim the shape does not have
    with pytest.raises(RuntimeError, match="do not broadcast"):
        kf.broadcast_shape([torch.randn((4, 5), device="cuda"), torch.randn((3,), device="cuda")])
    with pytest.raises(RuntimeError, match="more than the 6"):
        kf.ew("relu_affine", [torch.randn((1,) * 7, device="cuda")], [1.0, 0.0])
    assert kf.broadcast_shape([torch.randn((4, 1, 5), device="cuda"), torch.randn((3, 1), device="cuda")]) == [4, 3, 5]
