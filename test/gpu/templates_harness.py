"""A torch extension that instantiates the codegen templates (kf_elementwise.cuh, kf_reduce.cuh) with sample
functors, the way generated code does: `.cu` units without torch headers, one `.cpp` unit using kf_host.h.

The sources are generated here (no torch import needed), so the CPU nvcc check
(test/python/test_codegen_templates_nvcc.py) compiles exactly what the GPU test (test_codegen_templates.py)
and the bandwidth benchmark (bench/optimize/templates_bw.py) run. One `.cu` unit per dtype: ninja builds
them in parallel.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CUDA_DIR = REPO / "src" / "optimize" / "codegen" / "cuda"

# dtype suffix -> C++ element type
DTYPES = {"f32": "float", "f16": "__half", "bf16": "__nv_bfloat16"}

FUNCTORS = r"""
#pragma once
#include <math.h>
// Elementwise samples (operand order matters in each, so a swapped input shows).
struct PwReluAffine {  // relu(x) * s0 + s1
  static constexpr int kIn = 1;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars& sc) const {
    return (x[0] > 0.f ? x[0] : 0.f) * sc.v[0] + sc.v[1];
  }
};
struct PwAxpy {  // x0 * s0 - x1
  static constexpr int kIn = 2;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars& sc) const {
    return x[0] * sc.v[0] - x[1];
  }
};
struct PwFma3 {  // x0 * x1 + x2
  static constexpr int kIn = 3;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars& sc) const {
    return x[0] * x[1] + x[2];
  }
};
struct PwWeighted8 {  // sum_k (k + 1) x_k
  static constexpr int kIn = 8;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars& sc) const {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kIn; ++k) s += float(k + 1) * x[k];
    return s;
  }
};
// Reduction prologues and epilogues.
struct ProId {
  static constexpr int kIn = 1;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars& sc) const { return x[0]; }
};
struct ProSqDiff {  // (x0 - x1)^2
  static constexpr int kIn = 2;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars& sc) const {
    const float d = x[0] - x[1];
    return d * d;
  }
};
struct ProCosine {  // dot product and both squared norms in one pass
  static constexpr int kIn = 2;
  __device__ __forceinline__ KfSums<3> operator()(const float (&x)[kIn], const KfScalars& sc) const {
    return KfSums<3>{{x[0] * x[1], x[0] * x[0], x[1] * x[1]}};
  }
};
struct EpiCosine {  // torch's cosine_similarity, eps = 1e-8
  __device__ __forceinline__ float operator()(const KfAccResult& r, const KfScalars& sc) const {
    return r.part[0] / fmaxf(sqrtf(r.part[1]), 1e-8f) / fmaxf(sqrtf(r.part[2]), 1e-8f);
  }
};
struct ProCrossEntropy {  // (logit, class-index target as float)
  static constexpr int kIn = 2;
  __device__ __forceinline__ KfSums<2> operator()(const float (&x)[kIn], const KfScalars& sc) const {
    return KfSums<2>{{x[0], x[1]}};
  }
};
struct EpiCrossEntropy {  // -log_softmax at the target; 0 where it is -100 (ignore_index), NaN where it is no class
  __device__ __forceinline__ float operator()(const KfAccResult& r, const KfScalars& sc) const {
    return r.part[3] == -100.f ? 0.f : (r.part[2] == 1.f ? (r.m2 - r.part[0]) + r.value : NAN);
  }
};
struct EpiCrossEntropySmoothed {  // label smoothing 0.1: 0.9 of the above plus 0.1 of the row's mean of -log p
  __device__ __forceinline__ float operator()(const KfAccResult& r, const KfScalars& sc) const {
    const float nll = (r.m2 - r.part[0]) + r.value;
    const float smooth = (r.m2 - r.part[1] / r.count) + r.value;
    return r.part[3] == -100.f ? 0.f : (r.part[2] == 1.f ? 0.9f * nll + 0.1f * smooth : NAN);
  }
};
struct EpiValue {
  __device__ __forceinline__ float operator()(const KfAccResult& r, const KfScalars& sc) const { return r.value; }
};
struct EpiMean {
  __device__ __forceinline__ float operator()(const KfAccResult& r, const KfScalars& sc) const { return r.value / r.count; }
};
struct EpiVar {  // unbiased
  __device__ __forceinline__ float operator()(const KfAccResult& r, const KfScalars& sc) const { return r.m2 / (r.count - 1.f); }
};
"""

# name -> (functor, kIn)
ELEMENTWISE = {"relu_affine": ("PwReluAffine", 1), "axpy": ("PwAxpy", 2), "fma3": ("PwFma3", 3), "weighted8": ("PwWeighted8", 8)}

# name -> (prologue, kIn, accumulator, epilogue, int64 output)
REDUCTIONS = {
    "sum": ("ProId", 1, "KfAccSum", "EpiValue", False),
    "mean": ("ProId", 1, "KfAccSum", "EpiMean", False),
    "prod": ("ProId", 1, "KfAccProd", "EpiValue", False),
    "amax": ("ProId", 1, "KfAccMax", "EpiValue", False),
    "amin": ("ProId", 1, "KfAccMin", "EpiValue", False),
    "argmax": ("ProId", 1, "KfAccArgMax", "EpiValue", True),
    "argmin": ("ProId", 1, "KfAccArgMin", "EpiValue", True),
    "logsumexp": ("ProId", 1, "KfAccLogSumExp", "EpiValue", False),
    "var": ("ProId", 1, "KfAccWelford", "EpiVar", False),
    "wmean": ("ProId", 1, "KfAccWelford", "EpiValue", False),
    "sqdiff_sum": ("ProSqDiff", 2, "KfAccSum", "EpiValue", False),
    "cosine": ("ProCosine", 2, "KfAccSums<3>", "EpiCosine", False),
}

EW_SIG = "const KfShape& shape, void* out, const KfTensorRef* in, const KfScalars& sc, cudaStream_t stream"
RED_SIG = (
    "const KfShape& shape, uint32_t mask, void* out, const KfTensorRef* in, const KfScalars& sc, void* ws, "
    "size_t ws_bytes, cudaStream_t stream"
)


def _entries() -> list[tuple[str, str, str]]:
    """(unit, kind, symbol) of every entry point; kind is 'ew', 'red' or 'ws'."""
    out: list[tuple[str, str, str]] = []
    for dt in DTYPES:
        out += [(dt, "ew", f"kfh_ew_{name}_{dt}") for name in ELEMENTWISE]
        for name in REDUCTIONS:
            out += [(dt, "red", f"kfh_red_{name}_{dt}"), (dt, "ws", f"kfh_ws_{name}_{dt}")]
    out += [("mixed", "ew", "kfh_ew_axpy_mixed"), ("mixed", "red", "kfh_red_sum_mixed"), ("mixed", "ws", "kfh_ws_sum_mixed")]
    for name in ("cross_entropy", "cross_entropy_smoothed"):
        out += [("mixed", "red", f"kfh_red_{name}_mixed"), ("mixed", "ws", f"kfh_ws_{name}_mixed")]
    return out


def cuda_units() -> dict[str, str]:
    """File name -> source of each .cu unit (no torch headers)."""
    head = '#include "kf_elementwise.cuh"\n#include "kf_reduce.cuh"\n#include "kf_harness_functors.cuh"\n\n'
    units: dict[str, str] = {}
    for dt, ctype in DTYPES.items():
        lines = [head]
        for name, (functor, k) in ELEMENTWISE.items():
            types = ", ".join([ctype] * (k + 1))
            lines.append(f"cudaError_t kfh_ew_{name}_{dt}({EW_SIG}) {{\n  return kf_launch_elementwise<{functor}, {types}>(shape, out, in, sc, stream);\n}}\n")
        for name, (pro, k, acc, epi, idx_out) in REDUCTIONS.items():
            tout = "int64_t" if idx_out else ctype
            tin = ", ".join([ctype] * k)
            lines.append(
                f"cudaError_t kfh_red_{name}_{dt}({RED_SIG}) {{\n  return kf_launch_reduce<{pro}, {acc}, {epi}, {tout}, {tin}>"
                f"(shape, mask, out, in, sc, ws, ws_bytes, stream);\n}}\n"
                f"size_t kfh_ws_{name}_{dt}(const KfShape& shape, uint32_t mask) {{ return kf_reduce_workspace_bytes<{acc}>(shape, mask); }}\n"
            )
        units[f"kfh_{dt}.cu"] = "\n".join(lines)
    units["kfh_mixed.cu"] = (
        head
        + f"cudaError_t kfh_ew_axpy_mixed({EW_SIG}) {{\n  return kf_launch_elementwise<PwAxpy, float, __half, float>(shape, out, in, sc, stream);\n}}\n"
        + f"cudaError_t kfh_red_sum_mixed({RED_SIG}) {{\n  return kf_launch_reduce<ProId, KfAccSum, EpiValue, float, __half>(shape, mask, out, in, sc, ws, ws_bytes, stream);\n}}\n"
        + "size_t kfh_ws_sum_mixed(const KfShape& shape, uint32_t mask) { return kf_reduce_workspace_bytes<KfAccSum>(shape, mask); }\n"
        # float logits and an int64 class-index target broadcast along the reduced class dim
        + "".join(
            f"cudaError_t kfh_red_{name}_mixed({RED_SIG}) {{\n  return kf_launch_reduce<ProCrossEntropy, {acc}, {epi}, "
            "float, float, int64_t>(shape, mask, out, in, sc, ws, ws_bytes, stream);\n}\n"
            f"size_t kfh_ws_{name}_mixed(const KfShape& shape, uint32_t mask) {{\n"
            f"  return kf_reduce_workspace_bytes<{acc}>(shape, mask);\n}}\n"
            for name, acc, epi in (("cross_entropy", "KfAccCrossEntropy", "EpiCrossEntropy"),
                                   ("cross_entropy_smoothed", "KfAccCrossEntropySmoothed", "EpiCrossEntropySmoothed"))
        )
    )
    return units


HOST = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <map>
#include "kf_host.h"

using EwFn = cudaError_t (*)(const KfShape&, void*, const KfTensorRef*, const KfScalars&, cudaStream_t);
using RedFn = cudaError_t (*)(const KfShape&, uint32_t, void*, const KfTensorRef*, const KfScalars&, void*, size_t, cudaStream_t);
using WsFn = size_t (*)(const KfShape&, uint32_t);
@DECLS@

static std::string dtype_suffix(const std::vector<at::Tensor>& ins) {
  TORCH_CHECK(!ins.empty(), "harness: no inputs");
  const auto t = ins[0].scalar_type();
  for (const auto& x : ins) {
    TORCH_CHECK(x.is_cuda(), "harness: inputs must be CUDA tensors");
    if (x.scalar_type() != t) return "mixed";
  }
  if (t == at::kFloat) return "f32";
  if (t == at::kHalf) return "f16";
  if (t == at::kBFloat16) return "bf16";
  TORCH_CHECK(false, "harness: unsupported dtype");
  return "";
}

static KfScalars scalars(const std::vector<double>& sc) {
  TORCH_CHECK(sc.size() <= KF_MAX_SCALARS, "harness: too many scalars");
  KfScalars s{};
  for (size_t i = 0; i < sc.size(); ++i) s.v[i] = static_cast<float>(sc[i]);
  return s;
}

// out = F(ins...) over the broadcast shape; mixed inputs (half, float) use the mixed unit (float output).
at::Tensor ew(const std::string& op, std::vector<at::Tensor> ins, std::vector<double> sc) {
  const std::string key = "kfh_ew_" + op + "_" + dtype_suffix(ins);
  const auto it = ew_table().find(key);
  TORCH_CHECK(it != ew_table().end(), "harness: no entry " + key);
  const c10::cuda::CUDAGuard guard(ins[0].device());
  const KfShape shape = kf_broadcast_shape(ins);
  const auto out_dtype = dtype_suffix(ins) == "mixed" ? at::kFloat : ins[0].scalar_type();
  at::Tensor out = at::empty(at::IntArrayRef(shape.size, shape.ndim), ins[0].options().dtype(out_dtype));
  std::vector<KfTensorRef> refs;
  for (const auto& t : ins) refs.push_back(kf_ref(t, shape));
  kf_check_cuda(it->second(shape, out.data_ptr(), refs.data(), scalars(sc), at::cuda::getCurrentCUDAStream()), key.c_str());
  return out;
}

// Reduction of the broadcast inputs over `mask` (bit d = dim d). ws_mode: 0 none, 1 as sized by
// kf_reduce_workspace_bytes. The output holds the kept dims in order. to_float: the mixed unit's float output
// of a half input (its sum only), which the inputs' dtypes alone would never choose.
at::Tensor reduce(const std::string& op, std::vector<at::Tensor> ins, int64_t mask, int64_t ws_mode, bool to_float) {
  const std::string suffix = to_float ? "mixed" : dtype_suffix(ins);
  const std::string key = "kfh_red_" + op + "_" + suffix;
  const auto it = red_table().find(key);
  TORCH_CHECK(it != red_table().end(), "harness: no entry " + key);
  const c10::cuda::CUDAGuard guard(ins[0].device());
  const KfShape shape = kf_broadcast_shape(ins);
  std::vector<int64_t> kept;
  for (int d = 0; d < shape.ndim; ++d)
    if (!((mask >> d) & 1)) kept.push_back(shape.size[d]);
  const bool index_out = op == "argmax" || op == "argmin";
  const auto out_dtype = index_out ? at::kLong : (suffix == "mixed" ? at::kFloat : ins[0].scalar_type());
  at::Tensor out = at::empty(kept, ins[0].options().dtype(out_dtype));
  std::vector<KfTensorRef> refs;
  for (const auto& t : ins) refs.push_back(kf_ref(t, shape));
  const size_t bytes = ws_mode == 0 ? 0 : ws_table().at("kfh_ws_" + op + "_" + suffix)(shape, static_cast<uint32_t>(mask));
  at::Tensor ws = kf_workspace(bytes, ins[0]);
  kf_check_cuda(it->second(shape, static_cast<uint32_t>(mask), out.data_ptr(), refs.data(), KfScalars{},
                           bytes ? ws.data_ptr() : nullptr, bytes, at::cuda::getCurrentCUDAStream()),
                key.c_str());
  return out;
}

int64_t workspace_bytes(const std::string& op, const std::string& suffix, std::vector<int64_t> sizes, int64_t mask) {
  return static_cast<int64_t>(ws_table().at("kfh_ws_" + op + "_" + suffix)(kf_shape_of(sizes), static_cast<uint32_t>(mask)));
}

std::vector<int64_t> broadcast_shape(std::vector<at::Tensor> ins) {
  const KfShape s = kf_broadcast_shape(ins);
  return std::vector<int64_t>(s.size, s.size + s.ndim);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("ew", &ew);
  m.def("reduce", &reduce, pybind11::arg("op"), pybind11::arg("ins"), pybind11::arg("mask"), pybind11::arg("ws_mode"),
        pybind11::arg("to_float") = false);
  m.def("workspace_bytes", &workspace_bytes);
  m.def("broadcast_shape", &broadcast_shape);
}
"""


def host_unit() -> str:
    decls = []
    tables = {"ew": [], "red": [], "ws": []}
    for _, kind, sym in _entries():
        sig = {"ew": "cudaError_t {}(const KfShape&, void*, const KfTensorRef*, const KfScalars&, cudaStream_t);",
               "red": "cudaError_t {}(const KfShape&, uint32_t, void*, const KfTensorRef*, const KfScalars&, void*, size_t, cudaStream_t);",
               "ws": "size_t {}(const KfShape&, uint32_t);"}[kind]
        decls.append(sig.format(sym))
        tables[kind].append(f'{{"{sym}", &{sym}}}')
    for kind, typ in (("ew", "EwFn"), ("red", "RedFn"), ("ws", "WsFn")):
        decls.append(
            f"static const std::map<std::string, {typ}>& {kind}_table() {{\n"
            f"  static const std::map<std::string, {typ}> t = {{{', '.join(tables[kind])}}};\n  return t;\n}}"
        )
    return HOST.replace("@DECLS@", "\n".join(decls))


def write_sources(directory: Path) -> list[Path]:
    """Writes the harness sources; returns the translation units (.cpp first). Unchanged files keep their
    timestamps, so ninja rebuilds nothing the second time."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {"kf_harness_functors.cuh": FUNCTORS, "kfh_host.cpp": host_unit(), **cuda_units()}
    for name, text in files.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf8") != text:
            path.write_text(text, encoding="utf8")
    return [directory / "kfh_host.cpp"] + [directory / n for n in cuda_units()]


def build(verbose: bool = False):
    """Compiles (or reuses) the extension and returns the module. Needs a CUDA torch and nvcc."""
    from torch.utils.cpp_extension import load

    build_dir = Path(os.environ.get("KF_HARNESS_BUILD", REPO / ".cache" / "kf_templates_harness"))
    sources = write_sources(build_dir / "src")
    flags = [f"-I{CUDA_DIR}", f"-I{build_dir / 'src'}"]
    return load(
        name="kf_templates_harness",
        sources=[str(s) for s in sources],
        extra_include_paths=[str(CUDA_DIR), str(build_dir / "src")],
        extra_cflags=["-O2", "-std=c++17"],
        extra_cuda_cflags=["-O3", "-std=c++17", *flags],
        build_directory=str(build_dir),
        verbose=verbose,
    )
