"""kf_normalize.cuh and kf_pool.cuh on the GPU against float64 references, over every geometry and dtype.

The harness (harness/norm_pool_harness.cu + norm_pool_binding.cpp) instantiates the templates with the
functors the codegen emits for softmax (with a fused x * s + bias prologue), log_softmax, the affine norms
(layer / group / instance / batch: x, gamma, beta) and rms norm; pooling with and without an epilogue input.
Shapes cover each kernel path of the launcher: held rows (group, warp and block per row; 16-byte vectors, with
single-element edges on odd or misaligned rows), split rows (few long rows, BatchNorm's [N, C, HW], layouts that
do not merge), fused and split columns, odd sizes, broadcast and strided inputs, -inf / NaN / large inputs;
pooling with padding, dilation, ceil_mode, count_include_pad, divisor_override, adaptive windows, 1-3-D.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

sys.path.insert(0, str(Path(__file__).resolve().parent / "harness"))
import norm_pool_ext as H  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (rtol, atol) against float64 on the same (rounded) inputs: fp32 math, output rounding of the dtype.
TOL = {torch.float32: (1e-4, 5e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}
EPS = 1e-5
NO_STATS = torch.empty(0)


@pytest.fixture(scope="module")
def ext():
    return H.load()


def _name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def _close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    rtol, atol = TOL[dtype]
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    got = out.double()
    bad = ~torch.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    if bad.any():
        idx = bad.nonzero()[0].tolist()
        pytest.fail(
            f"{what}: {int(bad.sum())} of {bad.numel()} elements off, max abs err "
            f"{float((got - ref).abs().nan_to_num(0).max()):.3g}; first at {idx}: got {float(got[tuple(idx)])}, "
            f"want {float(ref[tuple(idx)])}"
        )


# ---------------------------------------------------------------------------------------------- normalize


def _reference(op: int, ins: list[torch.Tensor], shape: list[int], dims: tuple[int, ...], sc: list[float]):
    """(output, stats [K, 3]) in float64; stats per kept index in kept-dims order."""
    xs = [t.double().expand(shape) for t in ins]
    count = 1
    for d in dims:
        count *= shape[d]
    op = {H.OP_LOG_SOFTMAX_LONG: H.OP_LOG_SOFTMAX, H.OP_AFFINE_LONG: H.OP_AFFINE}.get(op, op)
    if op in (H.OP_SOFTMAX, H.OP_LOG_SOFTMAX, H.OP_SOFTMAX_CL):
        v = xs[0] * sc[0] + xs[1] if op != H.OP_LOG_SOFTMAX else xs[0]
        a = v.amax(dim=dims, keepdim=True) if dims else v
        ex = torch.exp(v - a)
        b = ex.sum(dim=dims, keepdim=True) if dims else ex
        y = v - a - torch.log(b) if op == H.OP_LOG_SOFTMAX else ex / b
    elif op in (H.OP_AFFINE, H.OP_AFFINE_F32_PARAMS, H.OP_AFFINE_CL):
        v = xs[0]
        a = v.mean(dim=dims, keepdim=True) if dims else v
        b = ((v - a) ** 2).sum(dim=dims, keepdim=True) if dims else torch.zeros_like(v)
        y = (v - a) / torch.sqrt(b / count + sc[0]) * xs[1] + xs[2]
    else:
        v = xs[0]
        a = (v * v).mean(dim=dims, keepdim=True) if dims else v * v
        b = torch.zeros_like(a)
        y = v / torch.sqrt(a + sc[0]) * xs[1]
    kept = [n for d, n in enumerate(shape) if d not in dims]
    k = 1
    for n in kept:
        k *= n
    stats = torch.stack([a.reshape(k), b.reshape(k), torch.full((k,), float(count), dtype=torch.float64, device=a.device)], 1)
    return y, stats


def _run(ext, op, ins, shape, dims, sc, with_stats=False, ws_short=0):
    mask = sum(1 << d for d in dims)
    kept = 1
    for d, n in enumerate(shape):
        if d not in dims:
            kept *= n
    stats = torch.full((kept, 3), float("nan"), device="cuda") if with_stats else NO_STATS
    out = ext.norm(op, ins, list(shape), mask, sc, stats, ws_short)
    return out, stats


def _inputs(op, shape, dims, dtype, gen, x=None):
    """x (or the given view) and the op's parameters, broadcast the way each op's module does."""
    if x is None:
        x = (torch.randn(shape, generator=gen, device="cuda") * 2 + 0.5).to(dtype)
    kept_shape = [1 if d not in dims else n for d, n in enumerate(shape)]  # parameters vary along reduced dims
    pdtype = torch.float32 if op == H.OP_AFFINE_F32_PARAMS else dtype
    if op in (H.OP_SOFTMAX, H.OP_SOFTMAX_CL):
        return [x, torch.randn(kept_shape, generator=gen, device="cuda").to(dtype)], [0.7]
    if op == H.OP_LOG_SOFTMAX:
        return [x], [0.0]
    gamma = (torch.rand(kept_shape, generator=gen, device="cuda") + 0.5).to(pdtype)
    if op == H.OP_RMS:
        return [x, gamma], [EPS]
    beta = torch.randn(kept_shape, generator=gen, device="cuda").to(pdtype)
    return [x, gamma, beta], [EPS]


def _check(ext, op, ins, shape, dims, sc, dtype, what, with_stats=True):
    out, stats = _run(ext, op, ins, shape, dims, sc, with_stats)
    ref, ref_stats = _reference(op, ins, list(shape), dims, sc)
    _close(out, ref, dtype, what)
    if with_stats:
        # Statistics are fp32 whatever the dtype: compare them at fp32-ish precision (scaled by magnitude).
        torch.testing.assert_close(stats.double(), ref_stats, rtol=2e-4, atol=2e-4, equal_nan=True, msg=lambda m: f"{what} stats: {m}")
    return out


ALL_OPS = [H.OP_SOFTMAX, H.OP_LOG_SOFTMAX, H.OP_AFFINE, H.OP_RMS]
OP_NAMES = {H.OP_SOFTMAX: "softmax", H.OP_LOG_SOFTMAX: "log_softmax", H.OP_AFFINE: "affine", H.OP_RMS: "rms",
            H.OP_AFFINE_F32_PARAMS: "affine_f32params", H.OP_AFFINE_CL: "affine (cl launcher)",
            H.OP_SOFTMAX_CL: "softmax (cl launcher)"}

# Rows (last dim reduced): every held-row size class, the block-per-row limit, split rows (few long rows).
ROW_SHAPES = [(1, 1), (7, 1), (3, 5), (1000, 3), (33, 100), (17, 128), (5, 129), (9, 700), (4, 1000), (260, 768),
              (3, 1025), (2, 3000), (300, 4097), (65, 8192), (140, 8193), (3, 20000), (200, 30000), (2, 100003),
              (2, 2_000_003),
              # short rows several to a warp (groups of 2..32 lanes), vector-aligned lengths included
              (4096, 8), (999, 16), (333, 64), (257, 40), (64, 248)]


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
@pytest.mark.parametrize("op", ALL_OPS, ids=lambda o: OP_NAMES[o])
def test_rows(ext, op, dtype):
    gen = torch.Generator(device="cuda").manual_seed(1)
    for shape in ROW_SHAPES:
        dims = (len(shape) - 1,)
        ins, sc = _inputs(op, list(shape), dims, dtype, gen)
        _check(ext, op, ins, shape, dims, sc, dtype, f"{OP_NAMES[op]} {shape}")


# Held rows in 16-byte vectors whose rows are not whole aligned vectors (odd lengths; rows_vec_kernel with
# edges): the elements before a row's first 16-byte boundary and after its last whole vector are held singly.
# Taken when every operand that moves along the row is co-aligned with the (contiguous) output; otherwise
# (per-column parameters on such rows, views starting off the output's alignment) the scalar kernels answer.
# 257 is the shortest vectorised row (R >= 256), 16383 the longest (16K held values).
MISALIGNED_LENGTHS = {torch.float32: [257, 1001, 4095, 12345, 16383], torch.float16: [257, 1001, 4097, 16383],
                      torch.bfloat16: [257, 1001, 4097, 16383]}


def _align(dtype: torch.dtype) -> int:
    """Elements of dtype per 16 bytes: the vector width of a single-dtype launch."""
    return 16 // torch.empty(0, dtype=dtype).element_size()


def _misaligned_rows(dtype, k, r, gen):
    """(op, inputs, scalars, label) on a random x [k, r], the other inputs co-aligned (x's shape) or broadcast."""
    shape = [k, r]
    x = (torch.randn(shape, generator=gen, device="cuda") * 2 + 0.5).to(dtype)
    full = torch.randn(shape, generator=gen, device="cuda").to(dtype)
    per_row = torch.randn(k, 1, generator=gen, device="cuda").to(dtype)
    one = torch.ones(1, 1, device="cuda", dtype=dtype)
    zero = torch.zeros(1, 1, device="cuda", dtype=dtype)
    f32 = dict(device="cuda", dtype=torch.float32)
    return [
        (H.OP_LOG_SOFTMAX, [x], [0.0], "log_softmax"),
        (H.OP_SOFTMAX, [x, full], [0.7], "softmax, bias of x's shape"),
        (H.OP_SOFTMAX, [x, per_row], [0.7], "softmax, per-row bias (row stride 0)"),
        (H.OP_AFFINE, [x, one, zero], [EPS], "layer norm without affine (broadcast gamma 1, beta 0)"),
        (H.OP_AFFINE_F32_PARAMS, [x, torch.full((1, 1), 1.5, **f32), torch.full((1, 1), -0.25, **f32)], [EPS],
         "layer norm, scalar fp32 gamma and beta"),
        (H.OP_RMS, [x, one * 1.25], [EPS], "rms norm, scalar gamma"),
    ]


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_rows_misaligned_vectors(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(11)
    for r in MISALIGNED_LENGTHS[dtype]:
        # Consecutive rows of an odd length start at every offset mod 16 bytes; 37 rows leave the last block of
        # the warp-per-row layout (4 rows per block) partly empty.
        k = 37 if r <= 1024 else 9
        for op, ins, sc, what in _misaligned_rows(dtype, k, r, gen):
            _check(ext, op, ins, (k, r), (1,), sc, dtype, f"{what} {(k, r)}")
    # Two kept dims that do not merge (a bias broadcast over the middle one): the row start is decomposed.
    shape = (3, 5, 1001)
    x = torch.randn(shape, generator=gen, device="cuda").to(dtype)
    bias = torch.randn(3, 1, 1, generator=gen, device="cuda").to(dtype)
    _check(ext, H.OP_SOFTMAX, [x, bias], shape, (2,), [0.7], dtype, f"softmax {shape}, per-batch bias")


# Rows past the held-row kernels' 16K (32 values per thread): a region whose captured rows are 16K-32K long asks for
# the long form (kLongRows: 64 values per thread in whole aligned vectors up to 32K, 48 with single edge elements up
# to 24K, one 512-thread block per row), taken when the rows fill the GPU; other lengths take the earlier kernels.
LONG_ROWS = [(140, 16385), (150, 20000), (140, 24576), (133, 24577), (140, 32000), (140, 32768), (9, 30000)]


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_long_held_rows(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(5)
    for k, r in LONG_ROWS:
        x = (torch.randn((k, r), generator=gen, device="cuda") * 2 + 0.5).to(dtype)
        gamma = (torch.rand((1, r), generator=gen, device="cuda") + 0.5).to(dtype)
        beta = torch.randn((1, r), generator=gen, device="cuda").to(dtype)
        for long_op, op, ins, sc in [(H.OP_LOG_SOFTMAX_LONG, H.OP_LOG_SOFTMAX, [x], [0.0]),
                                     (H.OP_AFFINE_LONG, H.OP_AFFINE, [x, gamma, beta], [EPS])]:
            out, stats = _run(ext, long_op, ins, (k, r), (1,), sc, with_stats=True)
            ref, ref_stats = _reference(op, ins, [k, r], (1,), sc)
            _close(out, ref, dtype, f"{OP_NAMES[op]} long rows {(k, r)}")
            torch.testing.assert_close(stats.double(), ref_stats, rtol=2e-4, atol=2e-4, equal_nan=True)
        # a row starting off 16 bytes: the view's rows are co-aligned with the output only when r keeps them so
        view = torch.randn((k, r + 1), generator=gen, device="cuda").to(dtype)[:, 1:]
        _check(ext, H.OP_LOG_SOFTMAX_LONG, [view], (k, r), (1,), [0.0], dtype, f"log_softmax long view {(k, r)}")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_rows_misaligned_views(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(12)
    a = _align(dtype)
    for r in (1001, 4095 if dtype == torch.float32 else 4097):
        k = 9
        big = (torch.randn(k, r + 2 * a, generator=gen, device="cuda") * 2).to(dtype)
        full = torch.randn(k, r, generator=gen, device="cuda").to(dtype)
        one = torch.ones(1, 1, device="cuda", dtype=dtype)
        zero = torch.zeros(1, 1, device="cuda", dtype=dtype)
        views = [
            (big[:, a:a + r], "16 bytes in, row stride r + 32 bytes (co-aligned: vectors with edges)"),
            (big[:, 1:1 + r], "one element in (not co-aligned with the output: scalar kernels)"),
            (big[:, :r], "row stride r + 32 bytes (co-aligned)"),
            (big[:, :r].contiguous()[:, :r - 2], "rows 2 short of their stride (not co-aligned)"),
        ]
        for x, what in views:
            shape = list(x.shape)
            for op, ins, sc in [(H.OP_LOG_SOFTMAX, [x], [0.0]),
                                (H.OP_SOFTMAX, [x, full[:, :shape[1]]], [0.7]),
                                (H.OP_AFFINE, [x, one, zero], [EPS])]:
                _check(ext, op, ins, tuple(shape), (1,), sc, dtype, f"{OP_NAMES[op]} {tuple(shape)} view {what}")
    # A row length that is whole vectors but rows that start one element in: never co-aligned with the
    # contiguous output, the scalar kernels answer.
    x = torch.randn(5, 1025, generator=gen, device="cuda").to(dtype)[:, 1:]
    one = torch.ones(1, 1, device="cuda", dtype=dtype)
    zero = torch.zeros(1, 1, device="cuda", dtype=dtype)
    for op, ins, sc in [(H.OP_LOG_SOFTMAX, [x], [0.0]), (H.OP_AFFINE, [x, one, zero], [EPS])]:
        _check(ext, op, ins, (5, 1024), (1,), sc, dtype, f"{OP_NAMES[op]} (5, 1024) view x[:, 1:]")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_rows_misaligned_per_column_parameters(ext, dtype):
    # gamma / beta / bias per column (kept strides 0) on rows of an odd length are not co-aligned with the output
    # rows: these launches keep the scalar held-row kernels and must match as before.
    gen = torch.Generator(device="cuda").manual_seed(13)
    for shape in [(37, 1001), (9, 4097), (9, 12345)]:
        for op in ALL_OPS + [H.OP_AFFINE_F32_PARAMS]:
            ins, sc = _inputs(op, list(shape), (1,), dtype, gen)
            _check(ext, op, ins, shape, (1,), sc, dtype, f"{OP_NAMES[op]} {shape}, per-column parameters")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_rows_misaligned_extremes(ext, dtype):
    # -inf masks, a fully masked row, NaN and +inf on edge elements (held singly, outside the vectors): torch's
    # answer and NaN pattern. With an odd length and a contiguous output, row k's first element is an edge
    # unless k * r is a multiple of 16 bytes, its last unless (k + 1) * r is: rows 3 (first) and 6 (last) here.
    gen = torch.Generator(device="cuda").manual_seed(14)
    for r in (1001, 4095 if dtype == torch.float32 else 4097):
        shape = (8, r)
        x = torch.randn(shape, generator=gen, device="cuda")
        x[torch.rand(shape, generator=gen, device="cuda") < 0.3] = float("-inf")
        x[0] = float("-inf")
        x[1] = x[1].clamp(-3, 3) * 1e4
        x = torch.where(torch.isinf(x), x, x.clamp(-3e4, 3e4)).to(dtype)
        zero_bias = torch.zeros(1, 1, device="cuda", dtype=dtype)
        for op, ins, sc in [(H.OP_SOFTMAX, [x, zero_bias], [1.0]), (H.OP_LOG_SOFTMAX, [x], [0.0])]:
            out, _ = _run(ext, op, ins, shape, (1,), sc)
            ref = (torch.softmax if op == H.OP_SOFTMAX else torch.log_softmax)(x.double(), dim=1)
            _close(out, ref, dtype, f"{OP_NAMES[op]} extremes {shape}")
            assert torch.isnan(out[0]).all(), "a fully masked row is NaN, as torch"
        for bad in (float("nan"), float("inf")):
            y = x.clone()
            y[3, 0] = bad
            y[6, r - 1] = bad
            out, _ = _run(ext, H.OP_LOG_SOFTMAX, [y], list(shape), (1,), [0.0])
            ref = torch.log_softmax(y.double(), dim=1)
            assert torch.equal(torch.isnan(out), torch.isnan(ref)), f"{shape} with {bad}: NaN pattern differs from torch"
            assert torch.isnan(out[3]).all() and torch.isnan(out[6]).all()


# (shape, reduced dims): several reduced dims, all / none reduced, columns (fused and split), BatchNorm style.
GEOMETRIES = [
    ((6, 7, 9), (1, 2)),            # two reduced dims that merge into one row
    ((3, 50, 70), (0, 1, 2)),       # everything: one row
    ((5, 6), ()),                   # nothing reduced: stats of each element
    ((4, 5, 6, 7), (0, 3)),         # reduced outer and inner with a kept middle: split rows, decomposed
    ((2, 5, 7), (1,)),              # columns, tiny
    ((4, 64, 32, 32), (1,)),        # softmax over channels: fused columns
    ((16, 33, 7, 9), (1,)),         # odd inner extent
    ((3, 1000, 5), (1,)),           # few columns, long reduction: split columns
    ((5, 300, 1000), (1,)),         # split columns, many column blocks
    ((200000, 3), (0,)),            # reduce dim 0 keeping 3: split columns
    ((8, 64, 128, 160), (1,)),      # many columns, a multiple of 8: fused vector columns
    ((2, 3000, 512), (1,)),         # few vector columns, long reduction: split vector columns
    ((2, 3, 1), (1,)),              # trailing unit dim: really a row
    ((8, 16, 1000), (0, 2)),        # BatchNorm [N, C, HW]
    ((64, 16, 3136), (0, 2)),       # BatchNorm, N*HW = 200K per channel
    ((3, 5, 7), (0, 2)),
    ((1, 4, 1), (0, 2)),            # one element per channel
    ((2, 8, 3, 5, 7), (0, 2, 3, 4)),  # BatchNorm3d
]


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
@pytest.mark.parametrize("op", ALL_OPS, ids=lambda o: OP_NAMES[o])
def test_geometries(ext, op, dtype):
    gen = torch.Generator(device="cuda").manual_seed(2)
    for shape, dims in GEOMETRIES:
        ins, sc = _inputs(op, list(shape), dims, dtype, gen)
        _check(ext, op, ins, shape, dims, sc, dtype, f"{OP_NAMES[op]} {shape} over {dims}")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_strided_inputs(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(3)
    base = (torch.randn(8, 20, 30, generator=gen, device="cuda") * 3).to(dtype)
    cases = [
        (base.transpose(1, 2), (2,)),          # row stride 30 along the reduced dim
        (base.transpose(1, 2), (1, 2)),        # two reduced dims that cannot merge: two-level held rows
        (base.transpose(0, 2), (0,)),          # reduced dim outermost and strided: columns
        (base[:, ::3, 1::2], (2,)),            # sliced rows
        (base.permute(2, 0, 1), (0, 2)),       # BatchNorm-like over a permuted view
    ]
    for op in ALL_OPS + [H.OP_AFFINE_F32_PARAMS]:
        for x, dims in cases:
            shape = list(x.shape)
            ins, sc = _inputs(op, shape, dims, dtype, gen, x=x)
            _check(ext, op, ins, tuple(shape), dims, sc, dtype, f"{OP_NAMES[op]} strided {tuple(x.stride())} over {dims}")


# A channels-last conv output normalised into NCHW (kf_normalize_cl.cuh): BatchNorm, InstanceNorm, LayerNorm over
# [C, H, W], softmax over channels; 4-D and 5-D, sizes off every tile and vector multiple; then inputs the
# launcher must hand to the plain one (kept dims out of order, tiles too small, contiguous input).
CL_CASES = [
    ((8, 64, 40, 40), (0, 2, 3)),
    ((3, 37, 19, 23), (0, 2, 3)),
    ((4, 96, 33, 17), (2, 3)),
    ((2, 24, 18, 18), (1, 2, 3)),
    ((2, 48, 6, 10, 12), (0, 2, 3, 4)),
    ((5, 20, 21, 22), (1,)),
    ((4, 32, 16, 20), (3,)),
    ((2, 8, 3, 3), (0, 2, 3)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_channels_last_input(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(11)
    for shape, dims in CL_CASES:
        fmt = torch.channels_last_3d if len(shape) == 5 else torch.channels_last
        x = (torch.randn(shape, generator=gen, device="cuda") * 2 + 0.5).to(dtype).contiguous(memory_format=fmt)
        op = H.OP_SOFTMAX_CL if dims == (1,) else H.OP_AFFINE_CL
        ins, sc = _inputs(op, list(shape), dims, dtype, gen, x=x)
        if op == H.OP_AFFINE_CL and 1 not in dims:  # per-channel parameters, as BatchNorm's and InstanceNorm's
            view = [1, shape[1]] + [1] * (len(shape) - 2)
            gamma = (torch.rand(shape[1], generator=gen, device="cuda") + 0.5).to(dtype).view(view)
            ins = [x, gamma, torch.randn(shape[1], generator=gen, device="cuda").to(dtype).view(view)]
        _check(ext, op, ins, shape, dims, sc, dtype, f"{OP_NAMES[op]} channels-last {shape} over {dims}")
    # Group norm's [N, G, C/G, HW] view of a channels-last tensor: statistics spread over a group's channels
    # (C/G under 16), or not (C/G of 32).
    for n, c, g, h, w in [(4, 96, 8, 33, 31), (2, 64, 2, 16, 16), (3, 30, 5, 7, 9)]:
        x = (torch.randn(n, c, h, w, generator=gen, device="cuda") * 2 + 0.5).to(dtype)
        xv = x.contiguous(memory_format=torch.channels_last).reshape(n, g, c // g, h * w)
        assert xv.stride()[2] == 1, "a view, not a copy"
        gamma = (torch.rand(c, generator=gen, device="cuda") + 0.5).to(dtype).view(1, g, c // g, 1)
        beta = torch.randn(c, generator=gen, device="cuda").to(dtype).view(1, g, c // g, 1)
        _check(ext, H.OP_AFFINE_CL, [xv, gamma, beta], (n, g, c // g, h * w), (2, 3), [EPS], dtype,
               f"group norm (cl launcher) {(n, c, h, w)} in {g} groups")
    x = torch.randn(6, 32, 20, 20, generator=gen, device="cuda").to(dtype)  # contiguous: the plain launcher
    ins, sc = _inputs(H.OP_AFFINE_CL, list(x.shape), (0, 2, 3), dtype, gen, x=x)
    _check(ext, H.OP_AFFINE_CL, ins, tuple(x.shape), (0, 2, 3), sc, dtype, "affine (cl launcher) contiguous")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_group_norm_behind_a_prologue_of_eight_inputs(ext, dtype):
    """norm(sigmoid((x + b0 + b1) * s)) * gamma + beta + r * e over group norm's [N, G, C/G, HW] view: eight inputs,
    eleven in the channels-last apply with the statistics (its limit). The plain launcher on a contiguous x (the
    strided apply, two elements per thread at this width) and the channels-last one on a channels-last x."""
    gen = torch.Generator(device="cuda").manual_seed(15)
    for n, c, g, h, w in [(4, 32, 8, 33, 31), (2, 64, 16, 16, 16), (3, 30, 5, 7, 9)]:
        shape = (n, g, c // g, h * w)
        chan = lambda: (torch.randn(c, generator=gen, device="cuda") * 0.5).to(dtype).view(1, g, c // g, 1)  # noqa: E731
        params = [chan() for _ in range(5)]  # b0, b1, s, gamma, beta
        resid = torch.randn(n, c, h, w, generator=gen, device="cuda").to(dtype).reshape(shape)
        ins_tail = [*params, resid, chan()]
        x = (torch.randn(n, c, h, w, generator=gen, device="cuda") * 2 + 0.5).to(dtype)
        for op, xv in [(H.OP_WIDE, x.reshape(shape)),
                       (H.OP_WIDE_CL, x.contiguous(memory_format=torch.channels_last).reshape(shape))]:
            ins = [xv, *ins_tail]
            out, _ = _run(ext, op, ins, shape, (2, 3), [EPS])
            d = [t.double().expand(shape) for t in ins]
            v = torch.sigmoid((d[0] + d[1] + d[2]) * d[3])
            mean = v.mean(dim=(2, 3), keepdim=True)
            var = ((v - mean) ** 2).mean(dim=(2, 3), keepdim=True)
            ref = (v - mean) / torch.sqrt(var + EPS) * d[4] + d[5] + d[6] * d[7]
            _close(out, ref, dtype, f"eight-input group norm, {'channels-last' if op == H.OP_WIDE_CL else 'plain'} "
                                    f"launcher, {(n, c, h, w)} in {g} groups")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_statistics_only(ext, dtype):
    """kf_launch_normalize_stats: the statistics of kf_launch_normalize, in either memory order, output unwritten."""
    gen = torch.Generator(device="cuda").manual_seed(12)
    cases = [((8, 64, 40, 40), (0, 2, 3), True), ((4, 96, 33, 17), (2, 3), True), ((6, 32, 20, 20), (0, 2, 3), False),
             ((300, 1000), (1,), False), ((3, 37, 19, 23), (1, 2, 3), True)]
    for shape, dims, channels_last in cases:
        x = (torch.randn(shape, generator=gen, device="cuda") * 2 + 0.5).to(dtype)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        ins, sc = _inputs(H.OP_AFFINE, list(shape), dims, dtype, gen, x=x)
        _, stats = _run(ext, H.OP_AFFINE_STATS, ins, shape, dims, sc, with_stats=True)
        _, ref_stats = _reference(H.OP_AFFINE, ins, list(shape), dims, sc)
        torch.testing.assert_close(stats.double(), ref_stats, rtol=2e-4, atol=2e-4,
                                   msg=lambda m: f"stats {shape} over {dims}: {m}")
    # group norm's [N, G, C/G, HW] view of a channels-last tensor (a group's 4 channels read as columns)
    x = torch.randn(4, 128, 24, 24, generator=gen, device="cuda").to(dtype).contiguous(memory_format=torch.channels_last)
    xv = x.reshape(4, 32, 4, 576)
    ins, sc = _inputs(H.OP_AFFINE, [4, 32, 4, 576], (2, 3), dtype, gen, x=xv)
    _, stats = _run(ext, H.OP_AFFINE_STATS, ins, (4, 32, 4, 576), (2, 3), sc, with_stats=True)
    _, ref_stats = _reference(H.OP_AFFINE, ins, [4, 32, 4, 576], (2, 3), sc)
    torch.testing.assert_close(stats.double(), ref_stats, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_layer_group_instance_batch_norm_match_torch(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(4)
    rtol, atol = TOL[dtype]
    # layer_norm over the last two dims with elementwise affine
    x = torch.randn(3, 7, 64, generator=gen, device="cuda").to(dtype)
    w = torch.rand(7, 64, generator=gen, device="cuda").to(dtype) + 0.5
    b = torch.randn(7, 64, generator=gen, device="cuda").to(dtype)
    out, _ = _run(ext, H.OP_AFFINE, [x, w, b], [3, 7, 64], (1, 2), [EPS])
    torch.testing.assert_close(out.double(), F.layer_norm(x.double(), (7, 64), w.double(), b.double(), EPS), rtol=rtol, atol=atol)
    # group_norm: [N, C, H, W] seen as [N, G, C/G, H*W], gamma/beta per channel
    n, c, g, hw = 4, 32, 8, 99
    x = torch.randn(n, c, 9, 11, generator=gen, device="cuda").to(dtype)
    w = torch.rand(c, generator=gen, device="cuda").to(dtype) + 0.5
    b = torch.randn(c, generator=gen, device="cuda").to(dtype)
    shape = [n, g, c // g, hw]
    out, _ = _run(ext, H.OP_AFFINE, [x.view(shape), w.view(1, g, c // g, 1), b.view(1, g, c // g, 1)], shape, (2, 3), [EPS])
    ref = F.group_norm(x.double(), g, w.double(), b.double(), EPS)
    torch.testing.assert_close(out.view_as(x).double(), ref, rtol=rtol, atol=atol)
    # instance_norm: [N, C, HW] over HW, affine per channel
    out, _ = _run(ext, H.OP_AFFINE, [x.view(n, c, hw), w.view(1, c, 1), b.view(1, c, 1)], [n, c, hw], (2,), [EPS])
    ref = F.instance_norm(x.double(), weight=w.double(), bias=b.double(), eps=EPS)
    torch.testing.assert_close(out.view_as(x).double(), ref, rtol=rtol, atol=atol)
    # batch_norm in training: batch statistics, stats_out gives torch's batch mean and (biased) variance
    for n, c, h, ww in [(32, 16, 28, 28), (5, 3, 7, 9), (256, 64, 1, 1)]:
        x = torch.randn(n, c, h, ww, generator=gen, device="cuda").to(dtype) * 2 + 1
        w = torch.rand(c, generator=gen, device="cuda").to(dtype) + 0.5
        b = torch.randn(c, generator=gen, device="cuda").to(dtype)
        shape = [n, c, h * ww]
        out, stats = _run(ext, H.OP_AFFINE, [x.view(shape), w.view(1, c, 1), b.view(1, c, 1)], shape, (0, 2), [EPS], with_stats=True)
        rm, rv = torch.zeros(c, dtype=torch.float64, device="cuda"), torch.ones(c, dtype=torch.float64, device="cuda")
        ref = F.batch_norm(x.double(), rm, rv, w.double(), b.double(), training=True, momentum=0.1, eps=EPS)
        torch.testing.assert_close(out.view_as(x).double(), ref, rtol=rtol, atol=atol)
        var, mean = torch.var_mean(x.double(), dim=(0, 2, 3), unbiased=False)
        count = n * h * ww
        torch.testing.assert_close(stats[:, 0].double(), mean, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close((stats[:, 1] / stats[:, 2]).double(), var, rtol=1e-4, atol=1e-5)
        assert torch.all(stats[:, 2] == count)
        # What the module's running_mean/var update needs: unbiased var = M2 / (count - 1).
        if count > 1:
            torch.testing.assert_close((stats[:, 1].double() / (count - 1)), x.double().var(dim=(0, 2, 3)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_long_rows_behind_per_channel_operands(ext, dtype):
    """Rows of a thousand vectors or more along H*W (the row-wise streaming kernels: offsets and per-channel
    operands read once per row): group norm behind eight inputs (vectorised in fp32), group / instance norm with
    a per-channel affine, batch norm's batch statistics (their M2 too); few kept indices, so the statistics are
    split across blocks whose ranges start inside a row."""
    gen = torch.Generator(device="cuda").manual_seed(16)
    rtol, atol = TOL[dtype]
    n, c, g, h, w = 2, 32, 8, 64, 72
    shape = (n, g, c // g, h * w)
    chan = lambda: (torch.randn(c, generator=gen, device="cuda") * 0.5).to(dtype).view(1, g, c // g, 1)  # noqa: E731
    ins = [(torch.randn(n, c, h, w, generator=gen, device="cuda") * 2 + 0.5).to(dtype).reshape(shape),
           *[chan() for _ in range(5)], torch.randn(shape, generator=gen, device="cuda").to(dtype), chan()]
    out, _ = _run(ext, H.OP_WIDE, ins, shape, (2, 3), [EPS])
    d = [t.double().expand(shape) for t in ins]
    v = torch.sigmoid((d[0] + d[1] + d[2]) * d[3])
    mean, var = v.mean(dim=(2, 3), keepdim=True), v.var(dim=(2, 3), keepdim=True, unbiased=False)
    _close(out, (v - mean) / torch.sqrt(var + EPS) * d[4] + d[5] + d[6] * d[7], dtype, "eight-input group norm, H*W 4608")
    for n, c, g, h, w in [(3, 16, 4, 48, 50), (1, 4, 2, 128, 256)]:
        x = (torch.randn(n, c, h, w, generator=gen, device="cuda") * 3 - 1).to(dtype)
        wt = (torch.rand(c, generator=gen, device="cuda") + 0.5).to(dtype)
        b = torch.randn(c, generator=gen, device="cuda").to(dtype)
        gshape = [n, g, c // g, h * w]
        out, _ = _run(ext, H.OP_AFFINE, [x.view(gshape), wt.view(1, g, c // g, 1), b.view(1, g, c // g, 1)], gshape,
                      (2, 3), [EPS])
        torch.testing.assert_close(out.view_as(x).double(), F.group_norm(x.double(), g, wt.double(), b.double(), EPS),
                                   rtol=rtol, atol=atol, msg=lambda m: f"group norm {(n, c, h, w)}: {m}")
        ishape = [n, c, h * w]
        out, _ = _run(ext, H.OP_AFFINE, [x.view(ishape), wt.view(1, c, 1), b.view(1, c, 1)], ishape, (2,), [EPS])
        ref = F.instance_norm(x.double(), weight=wt.double(), bias=b.double(), eps=EPS)
        torch.testing.assert_close(out.view_as(x).double(), ref, rtol=rtol, atol=atol,
                                   msg=lambda m: f"instance norm {(n, c, h, w)}: {m}")
        out, stats = _run(ext, H.OP_AFFINE, [x.view(ishape), wt.view(1, c, 1), b.view(1, c, 1)], ishape, (0, 2), [EPS],
                          with_stats=True)
        rm, rv = torch.zeros(c, dtype=torch.float64, device="cuda"), torch.ones(c, dtype=torch.float64, device="cuda")
        ref = F.batch_norm(x.double(), rm, rv, wt.double(), b.double(), training=True, momentum=0.1, eps=EPS)
        torch.testing.assert_close(out.view_as(x).double(), ref, rtol=rtol, atol=atol,
                                   msg=lambda m: f"batch norm {(n, c, h, w)}: {m}")
        var, mean = torch.var_mean(x.double(), dim=(0, 2, 3), unbiased=False)
        torch.testing.assert_close(stats[:, 0].double(), mean, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close((stats[:, 1] / stats[:, 2]).double(), var, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_softmax_extremes(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(5)
    big = 1e4
    for shape, dims in [((64, 100), (1,)), ((8, 3000), (1,)), ((2, 100003), (1,)), ((4, 50, 33), (1,)), ((3, 1000, 5), (1,))]:
        x = torch.randn(shape, generator=gen, device="cuda")
        # masked entries (attention style), one fully masked line, huge magnitudes in another
        x[torch.rand(shape, generator=gen, device="cuda") < 0.3] = float("-inf")
        line = [slice(None)] * len(shape)
        for d in range(len(shape)):
            if d not in dims:
                line[d] = 0
        x[tuple(line)] = float("-inf")
        line2 = list(line)
        for d in range(len(shape)):
            if d not in dims:
                line2[d] = 1
        x[tuple(line2)] = torch.randn(x[tuple(line2)].shape, generator=gen, device="cuda") * big
        # no +inf from fp16 overflow; the -inf masks stay (a clamp would lift them: no line fully masked)
        # |x| <= 3e4: log_softmax's x - max stays inside fp16's range (torch's own fp16 output overflows too)
        x = torch.where(torch.isinf(x), x, x.clamp(-3e4, 3e4)).to(dtype)
        zero_bias = torch.zeros([1] * len(shape), device="cuda", dtype=dtype)
        for op, ins, sc in [(H.OP_SOFTMAX, [x, zero_bias], [1.0]), (H.OP_LOG_SOFTMAX, [x], [0.0])]:
            out, _ = _run(ext, op, ins, shape, dims, sc)
            fn = torch.softmax if op == H.OP_SOFTMAX else torch.log_softmax
            ref = fn(x.double(), dim=dims[0])
            _close(out, ref, dtype, f"{OP_NAMES[op]} extremes {shape}")
            assert torch.isnan(out[tuple(line)]).all(), "a fully masked line is NaN, as torch"
    # NaN and +inf poison their row only, as in torch (held rows, split rows, columns)
    for shape, dims in [((16, 700), (1,)), ((16, 100003), (1,)), ((3, 16, 9), (1,))]:
        x = torch.randn(shape, device="cuda").to(dtype)
        line = (3, 5) if len(shape) == 2 else (0, 5, 3)
        poisoned = (3, slice(None)) if len(shape) == 2 else (0, slice(None), 3)
        for bad in (float("nan"), float("inf")):
            x[line] = bad
            out, _ = _run(ext, H.OP_LOG_SOFTMAX, [x], list(shape), dims, [0.0])
            ref = torch.log_softmax(x.double(), dim=dims[0])
            assert torch.equal(torch.isnan(out), torch.isnan(ref)), f"{shape} with {bad}: NaN pattern differs from torch"
            assert torch.isnan(out[poisoned]).all()


def test_deterministic_and_workspace_checked(ext):
    gen = torch.Generator(device="cuda").manual_seed(6)
    for shape, dims in [((64, 16, 3136), (0, 2)), ((2, 2_000_003), (1,)), ((3, 1000, 5), (1,))]:
        ins, sc = _inputs(H.OP_AFFINE, list(shape), dims, torch.float32, gen)
        a, sa = _run(ext, H.OP_AFFINE, ins, shape, dims, sc, with_stats=True)
        b, sb = _run(ext, H.OP_AFFINE, ins, shape, dims, sc, with_stats=True)
        assert torch.equal(a, b) and torch.equal(sa, sb), f"{shape}: two runs differ"
        mask = sum(1 << d for d in dims)
        assert ext.norm_workspace(H.OP_AFFINE, list(shape), mask) > 0
        with pytest.raises(RuntimeError, match="kf_launch_normalize"):
            _run(ext, H.OP_AFFINE, ins, shape, dims, sc, ws_short=12)
    # Fused columns (reduction too short to split) need no workspace; an empty shape is a no-op.
    assert ext.norm_workspace(H.OP_SOFTMAX, [4, 64, 1024], 2) == 0
    # Short rows that cannot be held (a non-mergeable layout) take the split path: the workspace covers it.
    x = torch.randn(3, 5, 7, device="cuda")
    ins, sc = _inputs(H.OP_AFFINE, [3, 5, 7], (0, 2), torch.float32, gen, x=x)
    out, _ = _run(ext, H.OP_AFFINE, ins, (3, 5, 7), (0, 2), sc)
    assert torch.isfinite(out).all()
    out, _ = _run(ext, H.OP_LOG_SOFTMAX, [torch.empty(0, 7, device="cuda")], [0, 7], (1,), [0.0])
    assert out.shape == (0, 7)
    with pytest.raises(RuntimeError, match="kf_launch_normalize"):
        ext.norm(H.OP_LOG_SOFTMAX, [torch.randn(3, 4, device="cuda")], [3, 4], 1 << 2, [0.0], NO_STATS, 0)


# ---------------------------------------------------------------------------------------------- pooling


def _pool_ref(kind, x64, nd, kernel, stride, pad, dil, ceil, cip, div, adaptive, out_size=None):
    if adaptive:
        fn = [F.adaptive_max_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool3d] if kind == H.POOL_MAX else \
            [F.adaptive_avg_pool1d, F.adaptive_avg_pool2d, F.adaptive_avg_pool3d]
        return fn[nd - 1](x64, out_size)
    if kind == H.POOL_MAX:
        fn = [F.max_pool1d, F.max_pool2d, F.max_pool3d][nd - 1]
        return fn(x64, kernel, stride, pad, dil, ceil_mode=ceil)
    if nd == 1:
        assert div is None, "avg_pool1d has no divisor_override"
        return F.avg_pool1d(x64, kernel, stride, pad, ceil_mode=ceil, count_include_pad=cip)
    fn = F.avg_pool2d if nd == 2 else F.avg_pool3d
    return fn(x64, kernel, stride, pad, ceil_mode=ceil, count_include_pad=cip, divisor_override=div)


# (kind, input shape, kernel, stride, pad, dilation, ceil_mode, count_include_pad, divisor_override)
POOL_CASES = [
    (H.POOL_MAX, (2, 3, 17, 19), [3, 3], [2, 2], [1, 1], [1, 1], False, True, None),
    (H.POOL_MAX, (2, 3, 17, 19), [3, 3], [2, 2], [1, 1], [1, 1], True, True, None),
    (H.POOL_MAX, (2, 3, 16, 16), [2, 2], [2, 2], [0, 0], [1, 1], False, True, None),
    (H.POOL_MAX, (2, 3, 17, 19), [3, 2], [2, 1], [1, 0], [2, 1], True, True, None),
    (H.POOL_MAX, (3, 4, 50), [4], [3], [2], [1], True, True, None),
    (H.POOL_MAX, (3, 4, 50), [3], [1], [1], [3], False, True, None),
    (H.POOL_MAX, (2, 3, 9, 10, 11), [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], True, True, None),
    (H.POOL_MAX, (2, 3, 9, 10, 11), [2, 3, 2], [2, 1, 2], [0, 1, 1], [2, 1, 1], False, True, None),
    (H.POOL_MAX, (8, 64, 112, 112), [3, 3], [2, 2], [1, 1], [1, 1], False, True, None),
    (H.POOL_AVG, (2, 3, 17, 19), [3, 3], [2, 2], [1, 1], [1, 1], False, True, None),
    (H.POOL_AVG, (2, 3, 17, 19), [3, 3], [2, 2], [1, 1], [1, 1], True, True, None),
    (H.POOL_AVG, (2, 3, 17, 19), [3, 3], [2, 2], [1, 1], [1, 1], True, False, None),
    (H.POOL_AVG, (2, 3, 17, 19), [3, 2], [2, 3], [1, 1], [1, 1], True, False, 5),
    (H.POOL_AVG, (2, 3, 16, 16), [2, 2], [2, 2], [0, 0], [1, 1], False, True, None),
    (H.POOL_AVG, (3, 4, 50), [4], [3], [2], [1], True, False, None),
    (H.POOL_AVG, (3, 4, 50), [4], [3], [2], [1], True, True, None),
    (H.POOL_AVG, (2, 3, 9, 10, 11), [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], True, False, None),
    (H.POOL_AVG, (2, 3, 9, 10, 11), [3, 2, 3], [2, 2, 1], [1, 1, 0], [1, 1, 1], True, True, 7),
    (H.POOL_AVG, (8, 64, 56, 56), [2, 2], [2, 2], [0, 0], [1, 1], False, True, None),
    (H.POOL_AVG, (2, 5, 13, 21), [3, 3], [1, 1], [1, 1], [1, 1], False, True, None),
    (H.POOL_AVG, (2, 5, 13, 21), [3, 3], [1, 1], [1, 1], [1, 1], False, False, None),
    (H.POOL_MAX, (2, 5, 13, 6), [3, 3], [1, 1], [1, 1], [1, 1], False, True, None),
    (H.POOL_MAX, (2, 3, 7, 5), [3, 3], [2, 2], [1, 1], [1, 1], True, True, None),
    (H.POOL_AVG, (2, 3, 7, 5), [3, 3], [2, 2], [1, 1], [1, 1], True, False, None),
    (H.POOL_AVG, (2, 3, 7, 5), [3, 3], [2, 2], [1, 1], [1, 1], True, True, None),
]


def _pool_case(gen, dtype, kind, shape, k, s, p, d, ceil, cip, div):
    """A random input of one POOL_CASES row, its float64 reference, the output size and a label."""
    nd = len(shape) - 2
    x = torch.randn(shape, generator=gen, device="cuda").to(dtype)
    ref = _pool_ref(kind, x.double(), nd, k, s, p, d, ceil, cip, div, False)
    what = f"{'max' if kind == H.POOL_MAX else 'avg'}_pool{nd}d {shape} k{k} s{s} p{p} d{d} ceil={ceil} cip={cip} div={div}"
    return x, ref, list(ref.shape[2:]), what


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_pooling(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(7)
    for kind, shape, k, s, p, d, ceil, cip, div in POOL_CASES:
        nd = len(shape) - 2
        x, ref, out_size, what = _pool_case(gen, dtype, kind, shape, k, s, p, d, ceil, cip, div)
        out = ext.pool(kind, x, [], out_size, k, s, p, d, cip, div or 0, False, 1.0)
        if kind == H.POOL_MAX:
            assert torch.equal(out, ref.to(dtype)), f"{what}: max pooling must be exact"
        else:
            _close(out, ref, dtype, what)
        # epilogue: pooled * 0.5 + per-channel bias, and + a strided residual of the output's shape
        bias = torch.randn([shape[1]] + [1] * nd, generator=gen, device="cuda").to(dtype)
        out = ext.pool(kind, x, [bias], out_size, k, s, p, d, cip, div or 0, False, 0.5)
        _close(out, ref * 0.5 + bias.double(), dtype, what + " + bias epilogue")
        resid = torch.randn(list(reversed(ref.shape)), generator=gen, device="cuda").to(dtype).permute(*reversed(range(ref.dim())))
        out = ext.pool(kind, x, [resid], out_size, k, s, p, d, cip, div or 0, False, 0.5)
        _close(out, ref * 0.5 + resid.double(), dtype, what + " + strided residual epilogue")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_pooling_with_a_prologue(ext, dtype):
    """Every tap goes through the prologue (tanh(tap + per-channel x)) before it is pooled, padding taps never:
    torch pools the prologue's output, padded with -inf (max) or left out / counted as 0 (avg). The generic and
    the fixed-window kernels alike."""
    gen = torch.Generator(device="cuda").manual_seed(11)
    for kind, shape, k, s, p, d, ceil, cip, div in POOL_CASES:
        nd = len(shape) - 2
        x = torch.randn(shape, generator=gen, device="cuda").to(dtype)
        bias = torch.randn([shape[1]] + [1] * nd, generator=gen, device="cuda").to(dtype)
        ref = _pool_ref(kind, torch.tanh(x.double() + bias.double()), nd, k, s, p, d, ceil, cip, div, False)
        expected = ref * 0.5 + bias.double()
        what = f"prologue {'max' if kind == H.POOL_MAX else 'avg'}_pool{nd}d {shape} k{k} s{s} p{p} d{d} ceil={ceil}"
        out = ext.pool_prologue([], kind, x, [bias], list(ref.shape[2:]), k, s, p, d, cip, div or 0, False, 0.5)
        _close(out, expected, dtype, what)
        window = _window(k, s)
        if window in H.FIXED_WINDOWS:
            out = ext.pool_prologue(list(window), kind, x, [bias], list(ref.shape[2:]), k, s, p, d, cip, div or 0,
                                    False, 0.5)
            _close(out, expected, dtype, f"fixed {window} {what}")


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_channels_last_pooling_writes_the_references_layout(ext, dtype):
    """kf_launch_pool_cl reads a channels-last input (a channels-last conv's output) and writes the contiguous
    layout: every 2-D / 3-D case of POOL_CASES, adaptive windows, channels past one tile of 32 and W outputs past
    one, with the epilogue, with a prologue, and a NaN tap — by the kernel for any window and, where the harness
    instantiates one for the case's window, by the unrolled one; a launcher unrolled for another window takes
    the first."""
    gen = torch.Generator(device="cuda").manual_seed(13)
    wide = [(H.POOL_MAX, (2, 45, 9, 70), [2, 2], [2, 2], [0, 0], [1, 1], False, True, None),
            (H.POOL_AVG, (1, 33, 5, 66), [3, 3], [1, 1], [1, 1], [1, 1], True, False, None),
            (H.POOL_MAX, (1, 70, 4, 5, 6), [2, 2, 2], [1, 2, 2], [1, 0, 1], [1, 1, 1], True, True, None),
            (H.POOL_AVG, (2, 40, 18, 35), [2, 2], [2, 2], [0, 0], [1, 1], True, True, None),
            (H.POOL_AVG, (2, 40, 21, 38), [4, 4], [4, 4], [1, 2], [1, 1], True, False, None),
            (H.POOL_MAX, (2, 40, 21, 38), [4, 4], [3, 4], [2, 1], [1, 1], True, True, None),
            (H.POOL_AVG, (1, 36, 7, 9, 11), [2, 2, 2], [2, 2, 2], [1, 0, 1], [1, 1, 1], True, True, 3)]
    unrolled = set()
    for kind, shape, k, s, p, d, ceil, cip, div in [c for c in POOL_CASES if len(c[1]) >= 4] + wide:
        nd = len(shape) - 2
        layout = torch.channels_last if nd == 2 else torch.channels_last_3d
        x = torch.randn(shape, generator=gen, device="cuda").to(dtype).contiguous(memory_format=layout)
        ref = _pool_ref(kind, x.double(), nd, k, s, p, d, ceil, cip, div, False)
        own = tuple([1] * (3 - nd) + list(k))
        windows = [[-1], [-1, *own]] if own in H.CL_WINDOWS else [[-1], [-1, *H.CL_WINDOWS[0]]]
        unrolled.update(w for w in [own] if w in H.CL_WINDOWS)
        for window in windows:
            what = (f"channels-last {'max' if kind == H.POOL_MAX else 'avg'}_pool{nd}d {shape} k{k} s{s} p{p} d{d} "
                    f"ceil={ceil} launcher window {window[1:] or 'any'}")
            out = ext.pool_fixed(window, kind, x, [], list(ref.shape[2:]), k, s, p, d, cip, div or 0, False, 1.0)
            assert out.is_contiguous(), what
            if kind == H.POOL_MAX:
                assert torch.equal(out, ref.to(dtype)), f"{what}: max pooling must be exact"
            else:
                _close(out, ref, dtype, what)
            bias = torch.randn([shape[1]] + [1] * nd, generator=gen, device="cuda").to(dtype)
            out = ext.pool_fixed(window, kind, x, [bias], list(ref.shape[2:]), k, s, p, d, cip, div or 0, False, 0.5)
            _close(out, ref * 0.5 + bias.double(), dtype, what + " + bias epilogue")
            resid = torch.randn(list(reversed(ref.shape)), generator=gen, device="cuda").to(dtype)
            resid = resid.permute(*reversed(range(ref.dim())))
            out = ext.pool_fixed(window, kind, x, [resid], list(ref.shape[2:]), k, s, p, d, cip, div or 0, False, 0.5)
            _close(out, ref * 0.5 + resid.double(), dtype, what + " + strided residual epilogue")
            pro = _pool_ref(kind, torch.tanh(x.double() + bias.double()), nd, k, s, p, d, ceil, cip, div, False)
            out = ext.pool_prologue(window, kind, x, [bias], list(ref.shape[2:]), k, s, p, d, cip, div or 0, False,
                                    0.5)
            _close(out, pro * 0.5 + bias.double(), dtype, what + " with a prologue")
    assert unrolled == set(H.CL_WINDOWS), f"unrolled windows without a case: {set(H.CL_WINDOWS) - unrolled}"
    for kind in (H.POOL_AVG, H.POOL_MAX):
        for shape, osz in [((2, 40, 17, 19), [5, 7]), ((2, 3, 9, 10, 11), [4, 3, 5])]:
            layout = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
            x = torch.randn(shape, generator=gen, device="cuda").to(dtype).contiguous(memory_format=layout)
            nd = len(shape) - 2
            ref = _pool_ref(kind, x.double(), nd, None, None, None, None, False, True, None, True, osz)
            out = ext.pool_fixed([-1], kind, x, [], osz, [1] * nd, [1] * nd, [0] * nd, [1] * nd, True, 0, True, 1.0)
            _close(out, ref, dtype, f"channels-last adaptive {shape} -> {osz}")
    # The unrolled windows take 4 channels per vector load where C is a multiple of 4 (40 above) and the input
    # is aligned to 4 elements; one element past that, the scalar kernel gives the same answer.
    flat = torch.randn(2 * 9 * 10 * 40 + 1, generator=gen, device="cuda").to(dtype)
    x = flat[1:].view(2, 9, 10, 40).permute(0, 3, 1, 2)
    assert x.is_contiguous(memory_format=torch.channels_last) and x.data_ptr() % 8 != 0
    bias = torch.randn(40, 1, 1, generator=gen, device="cuda").to(dtype)
    for kind in (H.POOL_AVG, H.POOL_MAX):
        ref = _pool_ref(kind, x.double(), 2, [2, 2], [2, 2], [0, 0], [1, 1], False, True, None, False)
        for window in ([-1], [-1, 1, 2, 2]):
            out = ext.pool_fixed(window, kind, x, [bias], [4, 5], [2, 2], [2, 2], [0, 0], [1, 1], True, 0, False, 0.5)
            _close(out, ref * 0.5 + bias.double(), dtype, f"misaligned channels-last input, window {window}")
    x = torch.randn(2, 40, 8, 8, device="cuda").contiguous(memory_format=torch.channels_last)
    x[1, 37, 2, 3] = float("nan")
    for window in ([-1], [-1, 1, 2, 2]):
        out = ext.pool_fixed(window, H.POOL_MAX, x, [], [4, 4], [2, 2], [2, 2], [0, 0], [1, 1], True, 0, False, 1.0)
        torch.testing.assert_close(out, F.max_pool2d(x, 2, 2), equal_nan=True)


def _window(k, s):
    """(KD, KH, KW, SH) of a pool's kernel and stride, leading dims of 1-D and 2-D pools as 1."""
    return tuple([1] * (3 - len(k)) + list(k) + [s[-2] if len(s) >= 2 else 1])


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_fixed_window_pooling_equals_the_generic_kernel(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(9)
    tried = set()
    for kind, shape, k, s, p, d, ceil, cip, div in POOL_CASES:
        window = _window(k, s)
        if window not in H.FIXED_WINDOWS:
            continue
        tried.add(window)
        x, ref, out_size, what = _pool_case(gen, dtype, kind, shape, k, s, p, d, ceil, cip, div)
        what = f"fixed {window} {what}"
        generic = ext.pool(kind, x, [], out_size, k, s, p, d, cip, div or 0, False, 1.0)
        fixed = ext.pool_fixed(list(window), kind, x, [], out_size, k, s, p, d, cip, div or 0, False, 1.0)
        if kind == H.POOL_MAX:
            assert torch.equal(fixed, ref.to(dtype)), f"{what}: max pooling must be exact"
        else:
            _close(fixed, ref, dtype, what)
            torch.testing.assert_close(fixed.double(), generic.double(), atol=1e-6 if dtype == torch.float32 else 1e-2,
                                       rtol=1e-5 if dtype == torch.float32 else 1e-2, msg=what)
        resid = torch.randn(list(reversed(ref.shape)), generator=gen, device="cuda").to(dtype).permute(*reversed(range(ref.dim())))
        out = ext.pool_fixed(list(window), kind, x, [resid], out_size, k, s, p, d, cip, div or 0, False, 0.5)
        _close(out, ref * 0.5 + resid.double(), dtype, what + " + strided residual epilogue")
    assert tried == set(H.FIXED_WINDOWS), f"windows without a case: {set(H.FIXED_WINDOWS) - tried}"


def test_fixed_window_launcher_takes_the_generic_kernel_for_another_window(ext):
    x = torch.randn(2, 3, 11, 13, device="cuda")
    x[1, 2, 3, 4] = float("nan")
    # Instantiated for 3x3, H stride 2; called with 2x2 (generic kernel), a W dilation (fixed kernel, runtime
    # dilation), adaptive windows (generic): torch's answer every time.
    ref = F.max_pool2d(x, 2, 2)
    out = ext.pool_fixed([1, 3, 3, 2], H.POOL_MAX, x, [], list(ref.shape[2:]), [2, 2], [2, 2], [0, 0], [1, 1], True, 0,
                         False, 1.0)
    torch.testing.assert_close(out, ref, equal_nan=True)
    ref = F.max_pool2d(x, 3, 2, 1, dilation=(1, 2))
    out = ext.pool_fixed([1, 3, 3, 2], H.POOL_MAX, x, [], list(ref.shape[2:]), [3, 3], [2, 2], [1, 1], [1, 2], True, 0,
                         False, 1.0)
    torch.testing.assert_close(out, ref, equal_nan=True)
    out = ext.pool_fixed([1, 3, 3, 2], H.POOL_AVG, x, [], [4, 4], [1, 1], [1, 1], [0, 0], [1, 1], True, 0, True, 1.0)
    torch.testing.assert_close(out, F.adaptive_avg_pool2d(x, 4), equal_nan=True)
    with pytest.raises(RuntimeError, match="kf_launch_pool"):  # bad params are rejected on either path
        ext.pool_fixed([1, 3, 3, 2], H.POOL_MAX, x, [], [4, 4], [3, 3], [0, 2], [0, 0], [1, 1], True, 0, False, 1.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=_name)
def test_adaptive_pooling(ext, dtype):
    gen = torch.Generator(device="cuda").manual_seed(8)
    cases = [((2, 3, 17, 19), [5, 7]), ((2, 3, 17, 19), [4, 4]), ((2, 3, 17, 19), [1, 1]), ((2, 3, 17, 19), [17, 19]),
             ((2, 3, 10, 12), [20, 30]), ((2, 3, 50), [7]), ((2, 3, 9, 10, 11), [4, 3, 5]), ((16, 256, 7, 7), [1, 1])]
    for kind in (H.POOL_AVG, H.POOL_MAX):
        for shape, osz in cases:
            nd = len(shape) - 2
            x = torch.randn(shape, generator=gen, device="cuda").to(dtype)
            ref = _pool_ref(kind, x.double(), nd, None, None, None, None, False, True, None, True, osz)
            out = ext.pool(kind, x, [], osz, [1] * nd, [1] * nd, [0] * nd, [1] * nd, True, 0, True, 1.0)
            _close(out, ref, dtype, f"adaptive {'max' if kind == H.POOL_MAX else 'avg'} {shape} -> {osz}")


def test_max_pool_nan_and_bad_params(ext):
    x = torch.randn(2, 3, 8, 8, device="cuda")
    x[0, 1, 2, 3] = float("nan")
    ref = F.max_pool2d(x, 2, 2)
    out = ext.pool(H.POOL_MAX, x, [], [4, 4], [2, 2], [2, 2], [0, 0], [1, 1], True, 0, False, 1.0)
    assert torch.equal(torch.isnan(out), torch.isnan(ref)) and torch.isnan(out[0, 1, 1, 1])
    torch.testing.assert_close(out, ref, equal_nan=True)
    with pytest.raises(RuntimeError, match="kf_launch_pool"):  # avg pooling has no dilation
        ext.pool(H.POOL_AVG, x, [], [3, 3], [2, 2], [2, 2], [0, 0], [2, 2], True, 0, False, 1.0)
    with pytest.raises(RuntimeError, match="kf_launch_pool"):  # zero stride
        ext.pool(H.POOL_MAX, x, [], [4, 4], [2, 2], [0, 2], [0, 0], [1, 1], True, 0, False, 1.0)
