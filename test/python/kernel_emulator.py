"""A CPU stand-in for an emitted file's CUDA extension: every region's fast path runs on the CPU, so the whole
generated path — the Python that builds a region's operands, shapes, masks and views, and the functors' math —
is checked against the reference without a GPU.

The generated functors (`struct Kf..._rN`) are compiled for the host (kf_pointwise.cuh through the op-math
test's shim) and called per element; what the kernel templates do around them is done here by their contracts
(the header comments of kf_elementwise / kf_reduce / kf_normalize(_cl) / kf_pool): broadcast operands,
accumulate over the masked dims, statistics then apply, pooling windows. The templates' own indexing,
vectorisation and accumulation order are the GPU tests' to check, not this.

    ext = EmulatedExtension(module)     # parses module._KF_CUDA_SOURCE, compiles its functors
    enable_cpu_fast_paths(module, ext)  # _kf_ext / _kf_ready / _kf_conv_anchor take CPU tensors
"""

from __future__ import annotations

import ctypes
import hashlib
import inspect
import math
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch
import torch.nn.functional as F

CUDA_DIR = Path(__file__).resolve().parents[2] / "src" / "optimize" / "codegen" / "cuda"

HOST_SHIM = r"""
#define __device__
#define __forceinline__ inline
#include <math.h>
#include <stdint.h>
#include <string.h>
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float a) { return expf(a); }
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
#include "kf_pointwise.cuh"
inline float kf_exp_shifted(float d) { return expf(d); }
struct KfStats { float a; float b; float count; };
struct KfScalars { float v[16]; };
template <int K> struct KfSums { float v[K]; };
struct KfAccResult { float value; float m2; int64_t index; float count; float part[4]; };
struct KfStatResult { float value; float m2; float count; };
"""

DTYPES = {"float": torch.float32, "__half": torch.float16, "__nv_bfloat16": torch.bfloat16,
          "int64_t": torch.int64, "int32_t": torch.int32, "int16_t": torch.int16, "int8_t": torch.int8,
          "uint8_t": torch.uint8, "bool": torch.bool}

_LAUNCH = re.compile(r"cudaError_t (\w+)_launch\([^)]*\) \{\n(?:.*\n)*?\s+return (kf_launch_\w+)<(.*?)>\(", re.M)
_STRUCT = re.compile(r"^struct (Kf\w+_r\d+) \{\n.*?^\};", re.M | re.S)  # the generated functors only
_XSIZE = re.compile(r"const float \(&x\)\[(\d+)\]")


def _split_args(text: str) -> list[str]:
    """Template arguments at the top level (KfAccSums<3> stays one)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += {"<": 1, ">": -1}.get(ch, 0)
        cur += ch
    return [*out, cur.strip()] if cur.strip() else out


class _Functors:
    """The source's functors compiled for the host, each behind a C wrapper taking flat arrays."""

    def __init__(self, source: str, roles: dict[str, str]) -> None:
        self.structs = {m.group(1): m.group(0) for m in _STRUCT.finditer(source)}
        self.xsize = {name: int(m.group(1)) if (m := _XSIZE.search(text)) else 1 for name, text in self.structs.items()}
        self.sums = {name: int(m.group(1)) for name, text in self.structs.items()
                     if (m := re.search(r"KfSums<(\d+)> operator", text))}
        wrappers = [self._wrapper(name, role) for name, role in roles.items()]
        code = HOST_SHIM + "\n".join(self.structs.values()) + "\n" + "\n".join(wrappers)
        # the headers the code includes are part of what is built: a changed helper must not load a stale library
        headers = "".join(p.read_text(encoding="utf8") for p in sorted(CUDA_DIR.glob("*.cuh")))
        digest = hashlib.sha256((code + headers).encode()).hexdigest()[:16]
        build = Path(tempfile.gettempdir()) / "kforge_emulator"
        build.mkdir(exist_ok=True)
        lib = build / f"functors_{digest}.so"
        if not lib.exists():
            src = build / f"functors_{digest}.cpp"
            src.write_text(code, encoding="utf8")
            compiler = shutil.which("g++") or shutil.which("c++")
            if compiler is None:
                raise RuntimeError("no host C++ compiler")
            run = subprocess.run([compiler, "-std=c++17", "-O1", "-fno-fast-math", "-shared", "-fPIC",
                                  f"-I{CUDA_DIR}", str(src), "-o", str(lib)], capture_output=True, text=True)
            if run.returncode != 0:
                raise RuntimeError(f"host build of the functors failed:\n{run.stderr[-3000:]}")
        self.lib = ctypes.CDLL(str(lib))

    def _wrapper(self, name: str, role: str) -> str:
        k = self.xsize.get(name, 1)
        load = f"float x[{k}]; for (int j = 0; j < {k}; ++j) x[j] = xs[e * {k} + j];"
        head = f'extern "C" void call_{name}('
        if role == "pointwise":
            return (head + "const float* xs, long n, const float* scv, float* out) {"
                    f" KfScalars sc; memcpy(sc.v, scv, sizeof sc.v); {name} f;"
                    f" for (long e = 0; e < n; ++e) {{ {load} out[e] = f(x, sc); }} }}")
        if role == "pro":
            parts = self.sums.get(name, 0)
            store = (f"const auto v = f(x, sc); for (int p = 0; p < {parts}; ++p) out[e * {parts} + p] = v.v[p];"
                     if parts else "out[e] = f(x, sc);")
            return (head + "const float* xs, long n, const float* scv, float* out) {"
                    f" KfScalars sc; memcpy(sc.v, scv, sizeof sc.v); {name} f;"
                    f" for (long e = 0; e < n; ++e) {{ {load} {store} }} }}")
        if role == "epi":  # a reduction's epilogue: r per output
            return (head + "const float* value, const float* m2, const float* count, const float* part, long n,"
                    " const float* scv, float* out) {"
                    f" KfScalars sc; memcpy(sc.v, scv, sizeof sc.v); {name} f;"
                    " for (long e = 0; e < n; ++e) { KfAccResult r{}; r.value = value[e]; r.m2 = m2[e];"
                    " r.count = count[e]; for (int p = 0; p < 4; ++p) r.part[p] = part[e * 4 + p];"
                    " out[e] = f(r, sc); } }")
        if role == "apply":
            return (head + "const float* v, const float* st, const float* xs, long n, const float* scv, float* out) {"
                    f" KfScalars sc; memcpy(sc.v, scv, sizeof sc.v); {name} f;"
                    f" for (long e = 0; e < n; ++e) {{ {load} KfStats s{{st[e * 3], st[e * 3 + 1], st[e * 3 + 2]}};"
                    " out[e] = f(v[e], s, x, sc); } }")
        if role == "pool_epi":
            return (head + "const float* pooled, const float* xs, long n, const float* scv, float* out) {"
                    f" KfScalars sc; memcpy(sc.v, scv, sizeof sc.v); {name} f;"
                    f" for (long e = 0; e < n; ++e) {{ {load} out[e] = f(pooled[e], x, sc); }} }}")
        raise AssertionError(role)

    def _fn(self, name: str) -> Callable[..., None]:
        fn = getattr(self.lib, f"call_{name}")
        fn.restype = None
        return fn

    @staticmethod
    def _ptr(t: torch.Tensor) -> ctypes.c_void_p:
        return ctypes.c_void_p(t.data_ptr())

    def per_element(self, name: str, xs: torch.Tensor, sc: torch.Tensor, parts: int = 0) -> torch.Tensor:
        """xs [n, slots] -> out [n] (or [n, parts] for a KfSums prologue)."""
        n = xs.shape[0]
        out = torch.empty((n, parts) if parts else (n,), dtype=torch.float32)
        self._fn(name)(self._ptr(xs), ctypes.c_long(n), self._ptr(sc), self._ptr(out))
        return out

    def epi(self, name: str, value, m2, count, part, sc) -> torch.Tensor:
        n = value.shape[0]
        out = torch.empty(n, dtype=torch.float32)
        self._fn(name)(*(self._ptr(t) for t in (value, m2, count, part)), ctypes.c_long(n), self._ptr(sc),
                       self._ptr(out))
        return out

    def apply(self, name: str, v, stats, xs, sc) -> torch.Tensor:
        n = v.shape[0]
        out = torch.empty(n, dtype=torch.float32)
        self._fn(name)(self._ptr(v), self._ptr(stats), self._ptr(xs), ctypes.c_long(n), self._ptr(sc), self._ptr(out))
        return out

    def pool_epi(self, name: str, pooled, xs, sc) -> torch.Tensor:
        n = pooled.shape[0]
        out = torch.empty(n, dtype=torch.float32)
        self._fn(name)(self._ptr(pooled), self._ptr(xs), ctypes.c_long(n), self._ptr(sc), self._ptr(out))
        return out


def _scalars(sc: list[float]) -> torch.Tensor:
    out = torch.zeros(16, dtype=torch.float32)
    out[: len(sc)] = torch.tensor([float(v) for v in sc], dtype=torch.float32)
    return out


def _operands(ins: list[torch.Tensor], shape: list[int], slots: int) -> torch.Tensor:
    """The inputs at every element of `shape` (kf_ref: right-aligned, size-1 dims broadcast), as fp32 slots
    [numel, slots] (kf_to_float: a mask reads 1 / 0)."""
    n = math.prod(shape)
    xs = torch.zeros((n, max(slots, 1)), dtype=torch.float32)
    for k, t in enumerate(ins[:slots]):
        if t.dim() > len(shape):
            raise AssertionError(f"operand {k} of shape {list(t.shape)} has more dims than {shape}")
        xs[:, k] = t.to(torch.float32).expand(shape).reshape(n)
    return xs


def _expands(t: torch.Tensor, shape: list[int]) -> bool:
    if t.dim() > len(shape):
        return False
    return all(a in (1, b) for a, b in zip(reversed(t.shape), reversed(shape)))


def _running_covers(mean: torch.Tensor, var: torch.Tensor, batches: torch.Tensor, cumulative: bool,
                    channels: int) -> bool:
    """kf_running_stats_covers (kf_region_host.h), the device test aside: an int64 counter, or none (an empty
    tensor) where the momentum is a number."""
    counter = batches.dtype == torch.int64 and batches.numel() == 1
    return (mean.dtype in (torch.float32, torch.float16, torch.bfloat16) and var.dtype == mean.dtype
            and (counter or (batches.numel() == 0 and not cumulative)) and mean.is_contiguous()
            and var.is_contiguous() and channels > 0 and mean.numel() == channels and var.numel() == channels)


class EmulatedExtension:
    """Stands in for `_kf_ext()`: its attributes are the emitted host functions, run on the CPU."""

    def __init__(self, module: ModuleType) -> None:
        source = module._KF_CUDA_SOURCE
        self.launches: dict[str, tuple[str, list[str]]] = {}
        roles: dict[str, str] = {}
        for m in _LAUNCH.finditer(source):
            fn, launcher, args = m.group(1), m.group(2), _split_args(m.group(3))
            self.launches[fn] = (launcher, args)
            if launcher == "kf_launch_elementwise":
                roles[args[0]] = "pointwise"
            elif launcher == "kf_launch_reduce":
                roles[args[0]], roles[args[2]] = "pro", "epi"
            elif launcher in ("kf_launch_normalize", "kf_launch_normalize_cl"):
                roles[args[0]], roles[args[2]] = "pro", "apply"
            elif launcher == "kf_launch_normalize_stats":
                roles[args[0]] = "pro"
            elif launcher in ("kf_launch_pool", "kf_launch_pool_fixed", "kf_launch_pool_cl"):
                # <..., Pro, Epi, ...>: a prologue takes (tap, operands), an epilogue's form
                first = {"kf_launch_pool_fixed": 5, "kf_launch_pool_cl": 4}.get(launcher, 1)  # after Kind, the window
                for functor in args[first:first + 2]:
                    if functor != "KfPoolNoPrologue":
                        roles[functor] = "pool_epi"
            elif launcher == "kf_launch_scan":  # its epilogue takes (scanned value, operands): a pool epilogue's form
                roles[args[0]], roles[args[2]] = "pro", "pool_epi"
            else:
                raise AssertionError(f"{fn}: unknown launcher {launcher}")
        self.functors = _Functors(source, roles)
        self.calls: dict[str, int] = {}

    def __getattr__(self, fn: str) -> Callable[..., torch.Tensor]:
        if fn.endswith("_running") and fn[: -len("_running")] in {
                f[: -len("_stats")] for f in self.launches if f.endswith("_stats")}:
            return self._running(fn)
        if fn.endswith("_bn") and fn[: -len("_bn")] in self.launches:
            return self._batch_norm(fn)
        if fn not in self.launches:
            raise AttributeError(fn)

        def run(ins, sc, iter_shape, mask, out_shape, geo, stats):
            self.calls[fn] = self.calls.get(fn, 0) + 1
            launcher, args = self.launches[fn]
            return getattr(self, f"_{launcher}")(args, list(ins), _scalars(sc), list(iter_shape), int(mask),
                                                 list(out_shape), list(geo), stats)

        return run

    def _running(self, fn: str) -> Callable[..., bool]:
        """kf_running_stats.cuh's contract: BatchNorm's running statistics from {mean, M2, count} per channel, in
        fp32, each buffer rounded once; float/half/bfloat16 buffers beside an int64 counter, else declined."""

        def run(stats, mean, var, batches, cumulative, momentum, count) -> bool:
            self.calls[fn] = self.calls.get(fn, 0) + 1
            if not _running_covers(mean, var, batches, cumulative, mean.numel()) or stats.numel() != 3 * mean.numel():
                return False
            seen = int(batches.item()) if batches.numel() else 0
            if batches.numel():
                batches.add_(1)
            factor = torch.tensor(1.0 / (seen + 1) if cumulative else momentum, dtype=torch.float32)
            st = stats.reshape(-1, 3)
            batch_var = st[:, 1] / max(float(count) - 1.0, 1.0)
            mean.copy_((factor * st[:, 0] + (1 - factor) * mean.float()).to(mean.dtype))
            var.copy_((factor * batch_var + (1 - factor) * var.float()).to(var.dtype))
            return True

        return run

    def _batch_norm(self, fn: str) -> Callable[..., torch.Tensor | None]:
        """region.ts batchNormHost: the region's kernel with its batch statistics allocated here, then the running
        statistics' update; None, with nothing run, where kf_running_stats_covers declines the buffers."""
        region, running = fn[: -len("_bn")], self._running(fn)

        def run(ins, sc, iter_shape, mask, mean, var, batches, cumulative, momentum):
            self.calls[fn] = self.calls.get(fn, 0) + 1
            kept = [size for d, size in enumerate(iter_shape) if not int(mask) >> d & 1]
            channels, count = math.prod(kept), math.prod(iter_shape) / max(math.prod(kept), 1)
            if not _running_covers(mean, var, batches, cumulative, channels):
                return None
            stats = torch.empty((channels, 3), dtype=torch.float32)
            out = getattr(self, region)(ins, sc, iter_shape, mask, iter_shape, [], stats)
            assert running(stats, mean, var, batches, cumulative, momentum, count)
            return out

        return run

    # ---- one per launcher: the template's contract around the functors ----

    def _kf_launch_elementwise(self, args, ins, sc, shape, _mask, out_shape, _geo, _stats):
        f, tout = args[0], DTYPES[args[1]]
        xs = _operands(ins, shape, len(args) - 2)
        return self.functors.per_element(f, xs, sc).reshape(out_shape).to(tout)

    def _kf_launch_scan(self, args, ins, sc, shape, mask, out_shape, _geo, _stats):
        """kf_scan.cuh's contract: the inclusive scan (sum or product) of the prologue along dim `mask & 255`,
        from the dim's end when bit 8 is set, then the epilogue with every operand's value at the element."""
        pro, op, epi, tout = args[0], args[1], args[2], DTYPES[args[3]]
        if op not in ("KfScanSum", "KfScanProd"):
            raise AssertionError(op)
        xs = _operands(ins, shape, len(args) - 4)
        values = self.functors.per_element(pro, xs, sc).reshape(shape).double()
        dim, reverse = mask & 255, bool(mask & 256)
        if reverse:
            values = values.flip(dim)
        scanned = values.cumsum(dim) if op == "KfScanSum" else values.cumprod(dim)
        if reverse:
            scanned = scanned.flip(dim)
        out = self.functors.pool_epi(epi, scanned.float().reshape(-1).contiguous(), xs, sc)
        return out.reshape(shape).to(tout)  # the iteration shape (the host function is passed no out_shape)

    def _rows(self, values: torch.Tensor, shape: list[int], mask: int) -> tuple[torch.Tensor, list[int]]:
        """values over `shape` (a trailing dim of parts allowed) as [kept, reduced, ...]."""
        red = [d for d in range(len(shape)) if mask >> d & 1]
        kept = [d for d in range(len(shape)) if not mask >> d & 1]
        extra = list(range(len(shape), values.dim()))
        v = values.permute(*kept, *red, *extra)
        k = math.prod(shape[d] for d in kept)
        r = math.prod(shape[d] for d in red)
        return v.reshape(k, r, *values.shape[len(shape):]), kept

    def _kf_launch_reduce(self, args, ins, sc, shape, mask, out_shape, _geo, _stats):
        pro, acc, epi, tout = args[0], args[1], args[2], DTYPES[args[3]]
        parts = self.functors.sums.get(pro, 0)
        xs = _operands(ins, shape, len(args) - 4)
        vals = self.functors.per_element(pro, xs, sc, parts).reshape(*shape, *([parts] if parts else []))
        rows, _ = self._rows(vals.double(), shape, mask)
        k, r = rows.shape[0], rows.shape[1]
        value = torch.zeros(k, dtype=torch.float64)
        m2 = torch.zeros(k, dtype=torch.float64)
        part = torch.zeros((k, 4), dtype=torch.float64)
        if acc == "KfAccSum":
            value = rows.sum(1)
        elif acc == "KfAccProd":
            value = rows.prod(1)
        elif acc in ("KfAccMax", "KfAccMin", "KfAccArgMax", "KfAccArgMin"):
            best = rows.amax(1) if "Max" in acc else rows.amin(1)  # NaN if any element is
            if acc.startswith("KfAccArg"):  # the first occurrence of the extreme, a NaN counting as it
                hit = (rows == best[:, None]) | rows.isnan()
                return hit.double().argmax(1).to(torch.int64).reshape(out_shape)
            value = best
        elif acc == "KfAccLogSumExp":
            value = torch.logsumexp(rows, 1)
        elif acc == "KfAccWelford":
            value = rows.mean(1)
            m2 = ((rows - value[:, None]) ** 2).sum(1)
        elif acc.startswith("KfAccSums"):
            part[:, :parts] = rows.sum(1)
            value = part[:, 0]
        elif acc.startswith("KfAccCrossEntropy"):  # rows [kept, classes, (logit, target)]: the flat index is the class
            logits, target = rows[..., 0], rows[:, 0, 1]
            hit = torch.arange(r, dtype=torch.float64)[None, :] == target[:, None]
            m2 = logits.amax(1)
            value = torch.logsumexp(logits, 1) - m2
            part[:, 0] = torch.where(hit, logits, 0.0).sum(1)  # the kernel adds the hits only
            part[:, 1] = logits.sum(1)
            part[:, 2] = hit.sum(1)
            part[:, 3] = target
        else:
            raise AssertionError(acc)
        count = torch.full((k,), float(r), dtype=torch.float32)
        out = self.functors.epi(epi, value.float().contiguous(), m2.float().contiguous(), count,
                                part.float().contiguous(), sc)
        return out.reshape(out_shape).to(tout)

    def _stats(self, stat: str, rows: torch.Tensor) -> torch.Tensor:
        """[kept, 3] {a, b, count} of kf_normalize's Stat policies over rows [kept, reduced] (float64)."""
        k, r = rows.shape
        out = torch.zeros((k, 3), dtype=torch.float64)
        if stat == "KfStatMaxSumExp":
            a = rows.amax(1)
            out[:, 0], out[:, 1] = a, torch.exp(rows - a[:, None]).sum(1)
        elif stat == "KfStatWelford":
            a = rows.mean(1)
            out[:, 0], out[:, 1] = a, ((rows - a[:, None]) ** 2).sum(1)
        elif stat == "KfStatMeanSquare":
            out[:, 0] = (rows * rows).mean(1)
        elif stat == "KfStatSum":
            out[:, 0] = rows.sum(1)
        elif stat in ("KfStatMax", "KfStatMin"):
            out[:, 0] = rows.amax(1) if stat == "KfStatMax" else rows.amin(1)  # NaN propagates, as the kernel's
        else:
            raise AssertionError(stat)
        out[:, 2] = r
        return out.float()

    def _kf_launch_normalize(self, args, ins, sc, shape, mask, out_shape, _geo, stats):
        pro, stat, apply, tout = args[0], args[1], args[2], DTYPES[args[3]]
        xs = _operands(ins, shape, len(args) - 4)
        v = self.functors.per_element(pro, xs, sc).reshape(shape)
        rows, kept = self._rows(v.double(), shape, mask)
        st = self._stats(stat, rows)
        if isinstance(stats, torch.Tensor) and stats.numel():
            stats.copy_(st.reshape(stats.shape))
        # the statistics of each element's kept index, in the iteration order
        view = [shape[d] if d in kept else 1 for d in range(len(shape))]
        per = st.reshape(*view, 3).expand(*shape, 3).reshape(-1, 3).contiguous()
        out = self.functors.apply(apply, v.reshape(-1).contiguous(), per, xs, sc)
        return out.reshape(out_shape).to(tout)

    _kf_launch_normalize_cl = _kf_launch_normalize

    def _kf_launch_normalize_stats(self, args, ins, sc, shape, mask, _out_shape, _geo, stats):
        pro, stat = args[0], args[1]
        xs = _operands(ins, shape, len(args) - 2)
        v = self.functors.per_element(pro, xs, sc).reshape(shape)
        rows, _ = self._rows(v.double(), shape, mask)
        stats.copy_(self._stats(stat, rows).reshape(stats.shape))
        return stats

    def _kf_launch_pool(self, args, ins, sc, _shape, _mask, out_shape, geo, _stats, first=1):
        pro, epi, tout = args[first], args[first + 1], DTYPES[args[first + 2]]
        kind, nd, adaptive = geo[0], geo[1], geo[2]
        kernel, stride = geo[3:3 + nd], geo[3 + nd:3 + 2 * nd]
        pad, dil = geo[3 + 2 * nd:3 + 3 * nd], geo[3 + 3 * nd:3 + 4 * nd]
        ceil_mode, include_pad, divisor = bool(geo[3 + 4 * nd]), bool(geo[4 + 4 * nd]), geo[5 + 4 * nd]
        x = ins[0].to(torch.float32)
        if pro != "KfPoolNoPrologue":
            # kf_pool.cuh loads the operands at the output element: the prologue's are constant over a window
            # (size 1 on every spatial dim), so at the input's elements they are those values; the epilogue's
            # (of the output's shape) the prologue must not read, and get 0 here.
            slots = self.functors.xsize.get(pro, 1)
            shape = list(x.shape)
            fits = [t if _expands(t, shape) else torch.zeros(()) for t in ins[1:]]
            xs = _operands(fits, shape, slots if len(ins) > 1 else 0)
            x = self.functors.pool_epi(pro, x.reshape(-1).contiguous(), xs, sc).reshape(shape)
        if adaptive:
            size = geo[6 + 4 * nd:6 + 5 * nd]
            pool = getattr(F, f"adaptive_{'max' if kind == 0 else 'avg'}_pool{nd}d")
            pooled = pool(x, size)
        elif kind == 0:
            pooled = getattr(F, f"max_pool{nd}d")(x, kernel, stride, pad, dil, ceil_mode)
        else:
            if any(d != 1 for d in dil):
                raise AssertionError(f"average pooling with dilation {dil}")
            extra = {"divisor_override": divisor or None} if nd > 1 else {}
            if nd == 1 and divisor:
                raise AssertionError("avg_pool1d has no divisor_override")
            pooled = getattr(F, f"avg_pool{nd}d")(x, kernel, stride, pad, ceil_mode, include_pad, **extra)
        if list(pooled.shape) != out_shape:
            raise AssertionError(f"pooled {list(pooled.shape)} but the method asked for {out_shape}")
        xs = _operands(ins[1:], out_shape, self.functors.xsize.get(epi, 1) if len(ins) > 1 else 0)
        out = self.functors.pool_epi(epi, pooled.reshape(-1).contiguous(), xs, sc)
        return out.reshape(out_shape).to(tout)

    def _kf_launch_pool_fixed(self, *a):
        return self._kf_launch_pool(*a, first=5)  # after Kind, the window and the H stride

    def _kf_launch_pool_cl(self, args, ins, *rest):
        # kf_pool_cl.cuh reads a channels-last input: the method hands it over in that layout.
        fmt = torch.channels_last_3d if ins[0].dim() == 5 else torch.channels_last
        if not ins[0].is_contiguous(memory_format=fmt):
            raise AssertionError(f"kf_launch_pool_cl given an input of strides {ins[0].stride()}")
        return self._kf_launch_pool(args, ins, *rest, first=4)  # after Kind, the window


def _patched(fn: Callable[..., Any], old: str, new: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    source = inspect.getsource(fn)
    if old not in source:
        raise AssertionError(f"{fn.__name__} no longer reads {old!r}: update the emulator")
    exec(compile(source.replace(old, new), f"<emulated {fn.__name__}>", "exec"), namespace)  # noqa: S102
    return namespace[fn.__name__]


def enable_cpu_fast_paths(module: ModuleType, ext: EmulatedExtension) -> None:
    """Points the emitted file's runtime at `ext` and lets its guards take CPU tensors."""
    module._kf_ext = lambda: ext
    module._kf_ready = _patched(module._kf_ready, "not first.is_cuda", "False", module.__dict__)
    module._kf_conv_anchor = _patched(module._kf_conv_anchor, "not x.is_cuda", "False", module.__dict__)
