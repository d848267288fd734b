// Host side of the kforge attention recipe: input validation, kernel choice, launches.
// Includes the kernels so that the emitter inlines every local file exactly once into one source.
// Narrow ATen headers instead of torch/extension.h (pybind11 + the whole C++ API): this file builds in
// a fraction of the time. c10's stream/guard headers rather than ATen/cuda/CUDAContext.h, which pulls in
// cuSOLVER headers that the CPU CI machine (nvcc + the nvidia-* header wheels) does not have.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <cuda.h>  // CUtensorMap types only: the driver is reached through the runtime (no -lcuda)

#include "attn_common.cuh"
#include "attn_wgmma.cuh"
#include "attn_hopper.cu"
#include "attn_hopper_regp.cu"
#include "attn_decode.cu"
#include "attn_chunked.cu"
#include "attn_hopper_f32.cu"

namespace kforge_attn {

// The kernel a call runs. Chosen by the caller: the recipe's dispatch decision is made in Python (runtime.py,
// _kf_attn_kernel_path); this file only checks that the chosen kernel can take the inputs.
// Wide = 2 consumer warpgroups x 64 rows (S_k <= 512), Long = 1 consumer warpgroup (S_k <= 1024), both with P in
// shared memory; WideRegPMc = 2 consumer warpgroups with P in registers, clusters of two CTAs multicasting K/V
// tiles; WideRegPSplit = the same with the two CTAs of a cluster taking one half of the keys each.
// Decode = few query rows per head against any number of keys, the keys split over CTAs (attn_decode.cu).
// F32Split = float32 inputs split into fp16 hi/lo pairs on the tensor cores, S_k <= 512 (attn_hopper_f32.cu).
// Longer key rows run in chunks on Wide, Long or WideRegPSplit (forward_chunked). 1 (the mma.sync kernel that
// held any key row, slower than PyTorch) and 4-7 are withdrawn (bench/attention/NOTES.md) and stay unused, so
// that a path means the same kernel in older generated files, which benchmarks build side by side with this one.
enum Path : int64_t {
  kHopperWide = 2,
  kHopperLong = 3,
  kHopperWideRegPMc = 8,
  kHopperWideRegPSplit = 9,
  kDecode = 10,
  kF32Split = 12
};

constexpr int kMaxHeadDim = 1024;

// Numbers go into error messages as text made here: on the device host (torch 2.11 wheel, g++ 13) a TORCH_CHECK
// message with an int or float argument segfaults in the ostream insertion instead of raising (in a .cu and a
// .cpp alike), while string arguments are fine.
template <typename N>
static std::string txt(N x) { return std::to_string(x); }
static std::string txt(c10::IntArrayRef xs) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + std::to_string(xs[i]);
  return s + "]";
}

// A (batch, heads, seq, head_dim) operand as the launches need it: pointer, sizes, strides. Views of it are
// arithmetic: a long key row's chunks take dozens of them per call, and at::Tensor views (through the dispatcher
// and autograd's view tracking) cost microseconds each, host time that showed in the call's timings.
struct View4 {
  char* ptr;
  int64_t size[4], stride[4], elem;
  at::ScalarType dtype;
  int device;

  static View4 of(const at::Tensor& t) {
    View4 v{static_cast<char*>(t.data_ptr()), {}, {}, (int64_t)t.element_size(), t.scalar_type(), (int)t.get_device()};
    for (int d = 0; d < 4; ++d) v.size[d] = t.size(d), v.stride[d] = t.stride(d);
    return v;
  }
  View4 narrow(int dim, int64_t start, int64_t len) const {
    View4 v = *this;
    v.ptr += start * stride[dim] * elem;
    v.size[dim] = len;
    return v;
  }
  // Stride of a dimension that is only ever indexed at 0 does not matter; counted as 0 so that batch or heads of
  // size 1 with arbitrary strides still pass the alignment check.
  int64_t used_stride(int d) const { return size[d] > 1 ? stride[d] : 0; }
};

// float32 operands only for the fp32 kernel (f32), float16/bfloat16 for every other.
static void check_operand(const at::Tensor& t, const char* name, bool f32) {
  TORCH_CHECK(t.is_cuda(), "kforge attention: ", name, " must be a CUDA tensor, got ", t.device());
  TORCH_CHECK(t.dim() == 4, "kforge attention: ", name, " must be 4-D (batch, heads, seq, head_dim), got ", txt(t.dim()),
              "-D");
  if (f32) {
    TORCH_CHECK(t.scalar_type() == at::kFloat, "kforge attention: ", name,
                " must be float32 for kernel path 12, got ", t.scalar_type());
  } else {
    TORCH_CHECK(t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16, "kforge attention: ", name,
                " must be float16 or bfloat16 (float32: kernel path 12), got ", t.scalar_type());
  }
  TORCH_CHECK(t.size(3) % 8 == 0 && t.size(3) >= 8 && t.size(3) <= kMaxHeadDim, "kforge attention: ", name,
              " head dim must be a multiple of 8 in [8, 1024], got ", txt(t.size(3)));
  TORCH_CHECK(t.size(3) == 1 || t.stride(3) == 1, "kforge attention: ", name,
              " must have a contiguous head dim (stride 1), got stride ", txt(t.stride(3)));
  TORCH_CHECK(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, "kforge attention: ", name,
              " data pointer must be 16-byte aligned");
  const View4 view = View4::of(t);
  for (int d = 0; d < 3; ++d) {
    TORCH_CHECK(view.used_stride(d) % 8 == 0, "kforge attention: ", name, " stride of dim ", txt(d),
                " must be a multiple of 8 elements (16-byte rows), got ", txt(t.stride(d)));
  }
}

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static EncodeTiledFn encode_tiled() {
  static const EncodeTiledFn fn = [] {
    void* ptr = nullptr;
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult found{};
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &found));
    TORCH_CHECK(found == cudaDriverEntryPointSuccess, "kforge attention: driver has no cuTensorMapEncodeTiled");
#else
    C10_CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &ptr, cudaEnableDefault));
#endif
    TORCH_CHECK(ptr != nullptr, "kforge attention: driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<EncodeTiledFn>(ptr);
  }();
  return fn;
}

// 4-D tensor map over (head_dim, seq, heads, batch) of a (B, H, S, D) view with its own strides; boxes
// are [box_rows x box_cols] elements (rows of 64 or 128 bytes, swizzled to match), zero-filled out of bounds.
static CUtensorMap encode_tensor_map(const View4& t, int box_cols, int box_rows, const char* name);

// Encoding a map is a driver call of several microseconds, three per forward, and host time before the
// launch shows in the ModelNew's timings (NOTES.md: the host time of a call). A map is a pure function of
// the tensor's device, pointer, dtype, sizes and strides and of the box, so a few recent ones are kept per
// host thread (no locking) and reused when all of that matches.
struct TensorMapKey {
  int64_t device, ptr, dtype, sizes[4], strides[4], box_cols, box_rows;
  bool operator==(const TensorMapKey& o) const { return std::memcmp(this, &o, sizeof(*this)) == 0; }
};

static CUtensorMap make_tensor_map(const View4& t, int box_cols, int box_rows, const char* name) {
  TensorMapKey key{};
  key.device = t.device;
  key.ptr = reinterpret_cast<int64_t>(t.ptr);
  key.dtype = static_cast<int64_t>(t.dtype);
  for (int d = 0; d < 4; ++d) key.sizes[d] = t.size[d], key.strides[d] = t.stride[d];
  key.box_cols = box_cols, key.box_rows = box_rows;
  // Three maps a kernel launch; 64 slots keep every kernel's maps for a few shapes at once (a long causal row
  // in key chunks launches up to two kernels a chunk), so that a benchmark that alternates the kernels (and
  // shapes) does not re-encode the maps on every call.
  constexpr int kSlots = 64;
  thread_local TensorMapKey keys[kSlots];
  thread_local CUtensorMap maps[kSlots];
  thread_local int filled = 0, next = 0;
  for (int i = 0; i < filled; ++i) {
    if (keys[i] == key) return maps[i];
  }
  const CUtensorMap map = encode_tensor_map(t, box_cols, box_rows, name);
  keys[next] = key, maps[next] = map;
  next = (next + 1) % kSlots;
  filled = std::min(filled + 1, kSlots);
  return map;
}

// The dynamic shared-memory limit is a per-kernel, per-device attribute: raised once, not on every launch.
template <auto kKernel>
static void allow_smem(int bytes, int device) {
  static std::atomic<uint64_t> done{0};  // one bit per device, one variable per kernel
  const uint64_t bit = device < 64 ? (uint64_t(1) << device) : 0;
  if (bit && (done.load(std::memory_order_relaxed) & bit)) return;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.fetch_or(bit, std::memory_order_relaxed);
}

static CUtensorMap encode_tensor_map(const View4& t, int box_cols, int box_rows, const char* name) {
  const int64_t es = t.elem;
  cuuint64_t dims[4] = {(cuuint64_t)t.size[3], (cuuint64_t)t.size[2], (cuuint64_t)t.size[1], (cuuint64_t)t.size[0]};
  // A size-1 dimension is only read at coordinate 0; give it the packed stride so the map stays valid
  // whatever stride the view reports for it.
  int64_t st[3];
  int64_t packed = t.size[3] * es;
  for (int i = 0; i < 3; ++i) {
    const int d = 2 - i;  // seq, heads, batch
    st[i] = t.size[d] > 1 ? t.stride[d] * es : ((packed + 15) / 16) * 16;
    packed = st[i] * t.size[d];
  }
  cuuint64_t strides[3] = {(cuuint64_t)st[0], (cuuint64_t)st[1], (cuuint64_t)st[2]};
  cuuint32_t box[4] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows, 1, 1};
  const CUtensorMapSwizzle swizzle = box_cols * es == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  cuuint32_t elem[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = encode_tiled()(&map, t.dtype == at::kHalf ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                    4, t.ptr, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "kforge attention: cuTensorMapEncodeTiled failed for ", name, " (error ", txt((int)r),
              "; sizes ", txt(c10::IntArrayRef(t.size, 4)), ", strides ", txt(c10::IntArrayRef(t.stride, 4)), ")");
  return map;
}

// What the host does for a TMA-fed wgmma kernel: its tensor maps (Q/K boxes of [rows x qk_chunk], V boxes
// of [rows x 64]; with multicast each CTA loads a part of every K/V box), its shared-memory limit raised once,
// and a grid of whole clusters (multicast: extra tiles store nothing; split keys: ctas_per_tile CTAs a tile).
struct WgmmaLaunch {
  int max_keys, tile_rows, q_rows, qk_chunk, k_rows, v_rows, cluster, ctas_per_tile, threads, smem_bytes;
};

template <auto kKernel>
static void launch_wgmma(const AttnParams& p, const View4& q, const View4& k, const View4& v, const WgmmaLaunch& w,
                         cudaStream_t stream) {
  TORCH_CHECK(p.Sk <= w.max_keys, "kforge attention: this wgmma kernel holds at most ", txt(w.max_keys),
              " keys per row, got S_k=", txt(p.Sk));
  const CUtensorMap tm_q = make_tensor_map(q, w.qk_chunk, w.q_rows, "query");
  const CUtensorMap tm_k = make_tensor_map(k, w.qk_chunk, w.k_rows, "key");
  const CUtensorMap tm_v = make_tensor_map(v, 64, w.v_rows, "value");
  allow_smem<kKernel>(w.smem_bytes, q.device);
  const int tiles = (p.Sq + w.tile_rows - 1) / w.tile_rows;
  const dim3 grid((tiles + w.cluster - 1) / w.cluster * w.cluster * w.ctas_per_tile, p.H, p.B);
  kKernel<<<grid, w.threads, w.smem_bytes, stream>>>(p, tm_q, tm_k, tm_v);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int NWG, int NKB_MAX>
static void launch_hopper(const AttnParams& p, const View4& q, const View4& k, const View4& v, cudaStream_t stream) {
  using L = HopperLayout<NWG, NKB_MAX>;
  launch_wgmma<attn_hopper_kernel<T, NWG, NKB_MAX>>(
      p, q, k, v,
      {L::kMaxKeys, L::kRows, L::kRows, kHopQkChunk, kHopKeyBlock, kHopKeyTile, 1, 1, L::kThreads, L::kSmemBytes},
      stream);
}

template <typename T, int CLUSTER, int KSPLIT>
static void launch_hopper_regp(const AttnParams& p, const View4& q, const View4& k, const View4& v,
                               cudaStream_t stream) {
  // Its softmax takes the row max of the unscaled S and masks with -inf before scaling (attn_hopper_regp.cu).
  TORCH_CHECK(p.scale_log2 > 0.f, "kforge attention: the register-P kernels need a positive scale, got ",
              txt(p.scale_log2 / kLog2e));
  launch_wgmma<attn_hopper_regp_kernel<T, CLUSTER, KSPLIT>>(
      p, q, k, v,
      {KSPLIT * kRpMaxKeys, kRpRows, kRpRows, kRpQkChunk, kRpKeyBlock / CLUSTER, kRpKeyTile / CLUSTER, CLUSTER, KSPLIT,
       kRpThreads, kRpSmemBytes},
      stream);
}

static int sm_count(int device) {
  static std::atomic<int> counts[64];  // 0 = not asked yet
  if (device < 0 || device >= 64) device = 0;
  int n = counts[device].load(std::memory_order_relaxed);
  if (n == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    counts[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

// How the decode kernel cuts the work. The kernel streams K and V, so what counts is warps and bytes in flight per
// SM: first as many CTAs per SM as fit (two when the output columns fit 128 registers and the shared memory
// allows: measured faster than one CTA with a deeper ring), then the most ring bytes per SM, then the longer key
// stage. Keys split over enough CTAs for a few waves, in splits of at least 256 keys, so each split's partial O
// (fp32, written and read back once) stays small beside the K/V bytes it summarises.
constexpr int kDecSmemMax = 227 * 1024;     // sm_90's opt-in limit per block
constexpr int kSmemPerSm = 228 * 1024;      // what the blocks of one SM share
constexpr int kSmemReservedPerBlock = 1024;  // the driver's own per block

struct DecodeConfig {
  int bn = 0, stages = 0, ctas_per_sm = 0;
};

static DecodeConfig decode_config(const AttnParams& p) {
  const int max_ctas = dec_max_pairs(p.Dv) == 4 ? 2 : 1;  // the kernel's __launch_bounds__
  DecodeConfig best;
  int64_t best_ring = -1;
  for (const int bn : {32, 16}) {
    for (int st = 4; st >= 2; --st) {
      const int smem = bn == 32 ? dec_smem_bytes<32>(p.Dqk, p.Dv, st) : dec_smem_bytes<16>(p.Dqk, p.Dv, st);
      if (smem > kDecSmemMax) continue;
      const int ctas = std::min(max_ctas, kSmemPerSm / (smem + kSmemReservedPerBlock));
      const int64_t ring = (int64_t)ctas * st * (bn == 32 ? dec_stage_bytes<32>(p.Dqk, p.Dv)
                                                          : dec_stage_bytes<16>(p.Dqk, p.Dv));
      if (ctas > best.ctas_per_sm || (ctas == best.ctas_per_sm && ring > best_ring)) {
        best = {bn, st, ctas};
        best_ring = ring;
      }
    }
  }
  TORCH_CHECK(best.bn > 0, "kforge attention: head dims too large for the decode kernel");
  return best;
}

template <typename T, int BN, int MAX_PAIRS>
static void launch_decode_bn(AttnParams p, DecodeParams d, int ctas_per_sm, int device, cudaStream_t stream) {
  const int smem = dec_smem_bytes<BN>(p.Dqk, p.Dv, d.n_stages);
  // The limit is raised once per kernel and device (allow_smem), while this kernel's need varies with the head
  // dims: raise it to the most any call may take.
  allow_smem<attn_decode_kernel<T, BN, MAX_PAIRS>>(kDecSmemMax, device);
  const int64_t units = (int64_t)p.B * (p.H / p.kv_group) * d.row_tiles;
  const int64_t want = 4LL * sm_count(device) * ctas_per_sm;  // CTAs: a few waves, so the last one is a small part
  const int max_splits = std::max(1, (p.Sk + 255) / 256);
  const int splits = (int)std::min<int64_t>(max_splits, std::max<int64_t>(1, (want + units - 1) / units));
  d.keys_per_split = ((p.Sk + splits - 1) / splits + BN - 1) / BN * BN;
  d.n_splits = (p.Sk + d.keys_per_split - 1) / d.keys_per_split;  // no empty split
  TORCH_CHECK(units * d.n_splits <= 0x7fffffffLL, "kforge attention: decode grid too large");
  at::Tensor part_o, part_ml;
  const int64_t rows = (int64_t)p.B * p.H * p.Sq;
  if (d.n_splits > 1) {
    TORCH_CHECK(rows <= 0x7fffffffLL, "kforge attention: too many output rows for the decode combine");
    // Scratch for the splits' partials, from PyTorch's caching allocator (no device-wide allocation per call).
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device);
    part_o = at::empty({rows * d.n_splits * p.Dv}, opts);
    part_ml = at::empty({rows * d.n_splits * 2}, opts);
    d.part_o = part_o.data_ptr<float>();
    d.part_ml = reinterpret_cast<float2*>(part_ml.data_ptr<float>());
  }
  const dim3 grid((unsigned)(d.row_tiles * d.n_splits), p.H / p.kv_group, p.B);
  attn_decode_kernel<T, BN, MAX_PAIRS><<<grid, kDecThreads, smem, stream>>>(p, d);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (d.n_splits > 1) {
    attn_decode_combine<T><<<(unsigned)rows, kDecThreads, d.n_splits * sizeof(float), stream>>>(p, d);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

template <typename T>
static void launch_decode(const AttnParams& p, int device, cudaStream_t stream) {
  const DecodeConfig c = decode_config(p);
  DecodeParams d{};
  d.row_tiles = (p.kv_group * p.Sq + kDecRows - 1) / kDecRows;
  d.n_stages = c.stages;
  const bool narrow = dec_max_pairs(p.Dv) == 4;
  if (c.bn == 32) {
    return narrow ? launch_decode_bn<T, 32, 4>(p, d, c.ctas_per_sm, device, stream)
                  : launch_decode_bn<T, 32, 8>(p, d, c.ctas_per_sm, device, stream);
  }
  return narrow ? launch_decode_bn<T, 16, 4>(p, d, c.ctas_per_sm, device, stream)
                : launch_decode_bn<T, 16, 8>(p, d, c.ctas_per_sm, device, stream);
}

template <typename T>
static void launch(const AttnParams& p, int64_t path, const View4& q, const View4& k, const View4& v,
                   cudaStream_t stream) {
  switch (path) {
    case kHopperWide: return launch_hopper<T, 2, 2>(p, q, k, v, stream);
    case kHopperLong: return launch_hopper<T, 1, 4>(p, q, k, v, stream);
    case kHopperWideRegPMc: return launch_hopper_regp<T, 2, 1>(p, q, k, v, stream);
    case kHopperWideRegPSplit: return launch_hopper_regp<T, 1, 2>(p, q, k, v, stream);
    case kDecode: return launch_decode<T>(p, q.device, stream);
    default: TORCH_CHECK(false, "kforge attention: unknown kernel path ", txt(path));
  }
}

static bool is_path(int64_t path) {
  return path == kHopperWide || path == kHopperLong || path == kHopperWideRegPMc || path == kHopperWideRegPSplit ||
         path == kDecode || path == kF32Split;
}

// The fp32 kernel, then the fix-up of the tiles it flagged (inputs fp16 cannot hold): both on the stream, the flags
// in a zeroed scratch from PyTorch's caching allocator.
static void launch_f32(const AttnParams& p, double scale, int device, cudaStream_t stream) {
  TORCH_CHECK(p.Sk <= kF32MaxKeys, "kforge attention: the fp32 kernel holds at most ", txt(kF32MaxKeys),
              " keys per row, got S_k=", txt(p.Sk));
  const int tiles = (p.Sq + kF32Rows - 1) / kF32Rows;
  const at::Tensor bad = at::zeros({(int64_t)tiles * p.H * p.B}, at::TensorOptions().dtype(at::kInt).device(at::kCUDA, device));
  allow_smem<attn_hopper_f32_kernel>(kF32SmemBytes, device);
  const dim3 grid(tiles, p.H, p.B);
  attn_hopper_f32_kernel<<<grid, kF32Threads, kF32SmemBytes, stream>>>(p, bad.data_ptr<int>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  attn_f32_fixup<<<grid, kF32FixThreads, 0, stream>>>(p, bad.data_ptr<int>(), (float)scale);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

static void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool f32 = false) {
  check_operand(q, "query", f32);
  check_operand(k, "key", f32);
  check_operand(v, "value", f32);
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), "kforge attention: query, key and value must be on one device");
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "kforge attention: query, key and value must share one dtype");
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0), "kforge attention: batch sizes of query (",
              txt(q.size(0)), "), key (", txt(k.size(0)), ") and value (", txt(v.size(0)), ") must match");
  TORCH_CHECK(v.size(1) == k.size(1) && k.size(1) > 0 && q.size(1) % k.size(1) == 0, "kforge attention: key/value heads (",
              txt(k.size(1)), ", ", txt(v.size(1)), ") must be equal and divide the query heads (", txt(q.size(1)), ")");
  TORCH_CHECK(k.size(3) == q.size(3), "kforge attention: key head dim ", txt(k.size(3)), " != query head dim ", txt(q.size(3)));
  TORCH_CHECK(v.size(2) == k.size(2), "kforge attention: value length ", txt(v.size(2)), " != key length ", txt(k.size(2)));
  TORCH_CHECK(k.size(2) > 0, "kforge attention: key length must be positive");
  TORCH_CHECK(q.size(0) <= 65535 && q.size(1) <= 65535, "kforge attention: batch and heads must be <= 65535");
  TORCH_CHECK(q.size(2) < (int64_t(1) << 30) && k.size(2) < (int64_t(1) << 30), "kforge attention: sequence too long");
}

// The kernels' view of one call: q/k/v as given (views welcome: strides are read, not assumed), output into `out`.
static AttnParams make_params(const View4& q, const View4& k, const View4& v, const View4& out, bool is_causal,
                              double scale) {
  AttnParams p{};
  p.q = q.ptr;
  p.k = k.ptr;
  p.v = v.ptr;
  p.o = out.ptr;
  p.q_sb = q.used_stride(0), p.q_sh = q.used_stride(1), p.q_ss = q.used_stride(2);
  p.k_sb = k.used_stride(0), p.k_sh = k.used_stride(1), p.k_ss = k.used_stride(2);
  p.v_sb = v.used_stride(0), p.v_sh = v.used_stride(1), p.v_ss = v.used_stride(2);
  p.o_sb = out.stride[0], p.o_sh = out.stride[1], p.o_ss = out.stride[2];
  p.B = (int)q.size[0], p.H = (int)q.size[1], p.Sq = (int)q.size[2], p.Sk = (int)k.size[2];
  p.Dqk = (int)q.size[3], p.Dv = (int)v.size[3];
  p.scale_log2 = (float)(scale * (double)kLog2e);
  p.causal = is_causal ? 1 : 0;
  p.kv_group = (int)(q.size[1] / k.size[1]);
  return p;
}

template <typename T>
static void launch_path(const View4& q, const View4& k, const View4& v, const View4& out, bool is_causal, double scale,
                        int64_t path, cudaStream_t stream) {
  launch<T>(make_params(q, k, v, out, is_causal, scale), path, q, k, v, stream);
}

// out = softmax(q k^T * scale [+ causal mask]) v for q (B,H,Sq,Dqk), k (B,H,Sk,Dqk), v (B,H,Sk,Dv).
at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale,
                   int64_t path) {
  TORCH_CHECK(is_path(path), "kforge attention: unknown kernel path ", txt(path),
              " (2, 3 P in shared memory; 8, 9 P in registers; 10 decode; 12 float32: the caller chooses, see runtime.py)");
  check_inputs(q, k, v, path == kF32Split);

  const c10::cuda::CUDAGuard guard(q.device());
  auto out = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
  if (out.numel() == 0) return out;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(q.get_device()).stream();
  const View4 qv = View4::of(q), kv = View4::of(k), vv = View4::of(v), ov = View4::of(out);
  if (path == kF32Split) {
    launch_f32(make_params(qv, kv, vv, ov, is_causal, scale), scale, q.get_device(), stream);
    return out;
  }
  if (q.scalar_type() == at::kHalf) launch_path<__half>(qv, kv, vv, ov, is_causal, scale, path, stream);
  else launch_path<__nv_bfloat16>(qv, kv, vv, ov, is_causal, scale, path, stream);
  return out;
}

constexpr int64_t kMaxChunkKeys = 1024;  // the most keys any wgmma kernel holds (HopperLayout<1, 4>, split register-P)
// Scratch of one chunked call is bounded: batches, K/V head groups and blocks of query rows beyond it run one
// after another.
constexpr int64_t kChunkScratchBytes = int64_t(1) << 30;

// Where chunk c of a group writes: its output rows (a (B, H, S, Dv) view of `part_o`, which holds the chunks one
// after another along the batch) and its rows' log2-sum-exp2 (B x H x S floats from `lse`).
struct ChunkScratch {
  View4 part_o;
  float* lse;
  int64_t batch;
  View4 out(int64_t c) const { return part_o.narrow(0, c * batch, batch); }
  float* lse_of(int64_t c) const { return lse + c * batch * part_o.size[1] * part_o.size[2]; }
};

// One kernel call over query rows [r0, r1) of `q` and the key chunk (k, v), into chunk c's scratch rows [r0, r1).
template <typename T>
static void launch_chunk_part(const View4& q, const View4& k, const View4& v, const ChunkScratch& scratch, int64_t c,
                              int64_t r0, int64_t r1, bool is_causal, double scale, int64_t path, cudaStream_t stream) {
  if (r1 <= r0) return;
  const View4 qv = q.narrow(2, r0, r1 - r0);
  AttnParams p = make_params(qv, k, v, scratch.out(c).narrow(2, r0, r1 - r0), is_causal, scale);
  p.lse = scratch.lse_of(c) + r0;
  p.lse_sh = (int)q.size[2], p.lse_sb = (int)(q.size[1] * q.size[2]);  // < 2^31: the scratch is bounded
  launch<T>(p, path, qv, k, v, stream);
}

// Every key chunk of one block of query rows (of some batches and heads), then their merge into `out`. The block's
// first row is row `row0` of the whole call (a multiple of chunk_keys), which the causal mask is relative to.
template <typename T>
static void run_chunks(const View4& q, const View4& k, const View4& v, const View4& out, const at::Tensor& like,
                       int64_t row0, bool is_causal, double scale, int64_t chunk_keys, int64_t full_path,
                       int64_t diag_path, cudaStream_t stream) {
  const int64_t b = q.size[0], h = q.size[1], sq = q.size[2], sk = k.size[2], dv = v.size[3], row_end = row0 + sq;
  const int64_t n_chunks = (sk + chunk_keys - 1) / chunk_keys;
  const at::Tensor part_o = at::empty({n_chunks * b, h, sq, dv}, like.options());
  const auto fopts = like.options().dtype(at::kFloat);
  // Causal: a chunk holds no key of the rows before it, which its calls never write: they must read as -inf.
  const at::Tensor lse = is_causal ? at::full({n_chunks * b * h * sq}, -INFINITY, fopts)
                                   : at::empty({n_chunks * b * h * sq}, fopts);
  const ChunkScratch scratch{View4::of(part_o), lse.data_ptr<float>(), b};
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t c0 = c * chunk_keys, c1 = std::min(sk, c0 + chunk_keys);
    if (is_causal && c0 >= row_end) break;  // top-left aligned: no row of the block sees these keys (nor later ones)
    const View4 kc = k.narrow(2, c0, c1 - c0), vc = v.narrow(2, c0, c1 - c0);
    if (!is_causal) {
      launch_chunk_part<T>(q, kc, vc, scratch, c, 0, sq, false, scale, full_path, stream);
      continue;
    }
    // Rows [c0, c1) see the chunk up to their own key: in the chunk's coordinates the ordinary causal mask (a block
    // starts on a chunk boundary, so it holds all of these rows or none). Later rows see all of it.
    if (c0 >= row0) {
      launch_chunk_part<T>(q, kc, vc, scratch, c, c0 - row0, std::min(c1, row_end) - row0, true, scale, diag_path,
                           stream);
    }
    launch_chunk_part<T>(q, kc, vc, scratch, c, std::max(c1, row0) - row0, sq, false, scale, full_path, stream);
  }
  const int64_t rows = b * h * sq;
  const int64_t blocks = (rows + kMergeWarps - 1) / kMergeWarps;
  TORCH_CHECK(blocks <= 0x7fffffffLL, "kforge attention: too many output rows for the chunk merge");
  const MergeOut<T> o{reinterpret_cast<T*>(out.ptr), out.stride[0], out.stride[1], out.stride[2], h, sq};
  attn_merge_chunks<T><<<(unsigned)blocks, kMergeWarps * 32, 0, stream>>>(
      static_cast<const T*>(part_o.data_ptr()), lse.data_ptr<float>(), o, rows, (int)dv, (int)n_chunks);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The same result for key rows longer than one kernel holds: keys in chunks of at most chunk_keys, each chunk run
// by the wgmma kernel the caller chose (full_path for a chunk every row sees whole, diag_path for the causal
// diagonal), merged by the rows' log-sum-exp (attn_chunked.cu). Causal masks are top-left aligned, so chunk
// [c0, c1) holds no key of rows before c0, rows [c0, c1) see it causally in its own coordinates, and later rows
// see all of it: every part is an ordinary call of an existing kernel.
at::Tensor forward_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal, double scale,
                           int64_t chunk_keys, int64_t full_path, int64_t diag_path) {
  check_inputs(q, k, v);
  // The kernels that report their rows' log-sum-exp (AttnParams::lse; the multicast register-P kernel has no
  // register to spare for it).
  auto reports_lse = [](int64_t path) {
    return path == kHopperWide || path == kHopperLong || path == kHopperWideRegPSplit;
  };
  TORCH_CHECK(reports_lse(full_path) && reports_lse(diag_path), "kforge attention: key chunks run on kernel paths 2, 3 ",
              "and 9, got ", txt(full_path), " and ", txt(diag_path));
  TORCH_CHECK(chunk_keys > 0 && chunk_keys <= kMaxChunkKeys, "kforge attention: chunk of ", txt(chunk_keys),
              " keys: the wgmma kernels hold 1 to ", txt(kMaxChunkKeys));

  const c10::cuda::CUDAGuard guard(q.device());
  auto out = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
  if (out.numel() == 0) return out;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(q.get_device()).stream();

  // Work groups within the scratch bound: whole batches, else K/V head groups (with their query heads) of one
  // batch, else blocks of query rows (whole chunks of them) of one K/V head group.
  const int64_t group = q.size(1) / k.size(1), hkv = k.size(1), b = q.size(0), sq = q.size(2);
  const int64_t n_chunks = (k.size(2) + chunk_keys - 1) / chunk_keys;
  const int64_t row_bytes = n_chunks * group * (v.size(3) * q.element_size() + 4);  // one query row of a K/V group
  const int64_t unit_bytes = row_bytes * sq;
  const int64_t units = std::max<int64_t>(1, kChunkScratchBytes / unit_bytes);
  const int64_t batches = std::max<int64_t>(1, units / hkv), heads = std::min(hkv, units);
  const int64_t block_rows =
      unit_bytes <= kChunkScratchBytes ? sq : std::max<int64_t>(1, kChunkScratchBytes / row_bytes / chunk_keys) * chunk_keys;
  const View4 qa = View4::of(q), ka = View4::of(k), va = View4::of(v), oa = View4::of(out);
  for (int64_t b0 = 0; b0 < b; b0 += batches) {
    const int64_t nb = std::min(batches, b - b0);
    for (int64_t h0 = 0; h0 < hkv; h0 += heads) {
      const int64_t nh = std::min(heads, hkv - h0);
      const View4 qg = qa.narrow(0, b0, nb).narrow(1, h0 * group, nh * group);
      const View4 kg = ka.narrow(0, b0, nb).narrow(1, h0, nh), vg = va.narrow(0, b0, nb).narrow(1, h0, nh);
      const View4 og = oa.narrow(0, b0, nb).narrow(1, h0 * group, nh * group);
      for (int64_t r0 = 0; r0 < sq; r0 += block_rows) {
        const int64_t nr = std::min(block_rows, sq - r0);
        const View4 qb = qg.narrow(2, r0, nr), ob = og.narrow(2, r0, nr);
        if (q.scalar_type() == at::kHalf) {
          run_chunks<__half>(qb, kg, vg, ob, q, r0, is_causal, scale, chunk_keys, full_path, diag_path, stream);
        } else {
          run_chunks<__nv_bfloat16>(qb, kg, vg, ob, q, r0, is_causal, scale, chunk_keys, full_path, diag_path, stream);
        }
      }
    }
  }
  return out;
}

}  // namespace kforge_attn

at::Tensor kforge_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal,
                                    double scale, int64_t path) {
  return kforge_attn::forward(q, k, v, is_causal, scale, path);
}

at::Tensor kforge_attention_forward_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal,
                                            double scale, int64_t chunk_keys, int64_t full_path, int64_t diag_path) {
  return kforge_attn::forward_chunked(q, k, v, is_causal, scale, chunk_keys, full_path, diag_path);
}
