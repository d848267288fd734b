// Fused attention forward for float32 inputs on Hopper's 16-bit tensor cores (sm_90a wgmma), for key rows up to
// 512 and large head dims, as accurate as PyTorch's own fp32 SDPA (bench/attention/NOTES.md, "fp32 on 16-bit tensor
// cores"). Every fp32 operand x is split into hi = fp16(x) and lo = fp16((x - hi) * 2^11): x = hi + lo * 2^-11 to
// 22 bits, lo scaled so that it stays a normal fp16 for the values that matter. A product of two operands is
// hi*hi + (hi*lo + lo*hi) * 2^-11 (lo*lo is below fp32's resolution): three MMAs, the cross terms in their own
// accumulator, so that their 2^11 scale never meets the hi*hi sum's.
//
//   phase 1  for each 128-key block kb:  S = Q K_kb^T over Dqk in 32-wide chunks (m64n128k16, two accumulators);
//            row max/sum; P_kb = exp2(S - m_kb), split into hi/lo panels in shared memory.
//   phase 2  for each 128-wide output chunk dc:  O_dc = sum_kt P_kt V_kt[:, dc] over 64-key V tiles. The tensor
//            cores' fp32 accumulation truncates, and P.V sums hundreds of same-signed terms: the hi*hi sum is
//            taken per V tile (a fresh MMA chain) and added into an fp32 register sum ("promotion", as FP8 GEMMs
//            do), so the truncation never compounds over the whole row. The cross terms are 2^-11 smaller and
//            keep one chain. Rescaled by r = exp2(m_kb - m_kb+1) where a key block ends, by 1/l at the end.
//
// Roles: one consumer warpgroup (64 query rows: the MMAs and the softmax) and one loader warpgroup, which reads
// the fp32 tiles from global memory into registers (two items in flight per thread), splits them and stores the
// hi/lo halves in the swizzled layouts wgmma reads, into a ring of 3 slots (full/empty mbarriers). The split
// happens once per tile load, on the loader's time, not the consumer's.
//
// Inputs fp16 cannot hold (|x| > 65504, inf, NaN): the loader flags its tile, and attn_f32_fixup recomputes the
// flagged tiles' rows in plain fp32 arithmetic after the kernel, on the same stream (no host round trip).
#include "attn_common.cuh"
#include "attn_wgmma.cuh"

namespace kforge_attn {

constexpr int kF32Rows = 64;          // query rows per CTA: one consumer warpgroup
constexpr int kF32KeyBlock = 128;     // keys per QK^T block: two m64n128 accumulators (hi*hi, cross)
constexpr int kF32QkChunk = 32;       // head-dim columns per phase-1 item (fp16 rows of 64 bytes, 64B swizzle)
constexpr int kF32KeyTile = 64;       // keys per P.V item (one P panel)
constexpr int kF32DvChunk = 128;      // output columns per P.V pass: one m64n128 accumulator
constexpr int kF32MaxKeys = 512;
constexpr int kF32Blocks = kF32MaxKeys / kF32KeyBlock;
constexpr int kF32Stages = 3;
constexpr float kF32LoScale = 2048.f; // lo = (x - hi) * 2^11
constexpr float kF32LoUnscale = 1.f / 2048.f;
constexpr float kF32Fp16Max = 65504.f;

constexpr int kF32Panel = 64 * 128;                       // [64 rows x 64] fp16, 128B swizzle
constexpr int kF32PHalf = kF32MaxKeys / 64 * kF32Panel;   // hi (or lo) panels of P for the whole key row
constexpr int kF32QHalf = kF32Rows * kF32QkChunk * 2;     // Q chunk, one half
constexpr int kF32KHalf = kF32KeyBlock * kF32QkChunk * 2; // K chunk, one half
constexpr int kF32VHalf = kF32KeyTile * kF32DvChunk * 2;  // V tile, one half (two [64 x 64] panels)
constexpr int kF32Slot = 2 * kF32VHalf;
static_assert(2 * (kF32QHalf + kF32KHalf) <= kF32Slot, "a phase-1 item fits a slot");
constexpr int kF32StatsBytes = kF32Rows * kF32Blocks * 4;  // (kF32Blocks - 1) block ratios + 1/l per row
constexpr int kF32SmemBytes = 1024 + 2 * kF32PHalf + kF32Stages * kF32Slot + kF32StatsBytes + 2 * kF32Stages * 8;
static_assert(kF32SmemBytes <= 232448, "shared memory budget of one H100 SM exceeded");

// Float4s per loader thread: a V tile [64 keys x 128 cols] is 2048 of them (16 a thread); a phase-1 item is Q [64 x 32]
// (4 a thread) and K [128 x 32] (8). A loader moves an item in two parts of at most 8 (phase 1: Q + 4 of K, then 4 of
// K). Two loader warpgroups take alternate items: splitting costs ~20 instructions a float4, more than one warp per
// scheduler issues in the MMAs' time.
constexpr int kF32PartVecs = 8;
constexpr int kF32PartsAhead = 2;  // parts in flight per loader thread while it stores one
constexpr int kF32Loaders = 2;
constexpr int kF32Threads = 128 * (1 + kF32Loaders);
// setmaxnreg moves registers within the CTA's launch allocation (65536 / 384 threads, rounded down to 8: 168 each);
// asking for more than it holds blocks the consumer's setmaxnreg.inc forever.
constexpr int kF32ConsumerRegs = 216, kF32LoaderRegs = 144;
static_assert(128 * (kF32ConsumerRegs + kF32Loaders * kF32LoaderRegs) <= 65536 / kF32Threads / 8 * 8 * kF32Threads,
              "register reallocation beyond the CTA's allocation");
constexpr int kF32QVecs = kF32Rows * kF32QkChunk / 4 / 128;
constexpr int kF32KVecs = kF32KeyBlock * kF32QkChunk / 4 / 128;
constexpr int kF32VVecs = kF32KeyTile * kF32DvChunk / 4 / 128;
static_assert(kF32QVecs == 4 && kF32KVecs == 8 && kF32VVecs == 16, "the loader's parts assume these");

struct F32Shape {
  int m0, h, hk, b, k_end, n_kb, n_c, n_kt, n_dc, n1, n_items;
};

__device__ __forceinline__ F32Shape f32_shape(const AttnParams& p) {
  F32Shape s;
  s.m0 = blockIdx.x * kF32Rows;
  s.h = blockIdx.y, s.b = blockIdx.z, s.hk = s.h / p.kv_group;
  s.k_end = p.causal ? min(p.Sk, s.m0 + kF32Rows) : p.Sk;  // causal: no key past the tile's last row is visible
  s.n_kb = (s.k_end + kF32KeyBlock - 1) / kF32KeyBlock;
  s.n_c = (p.Dqk + kF32QkChunk - 1) / kF32QkChunk;
  s.n_kt = (s.k_end + kF32KeyTile - 1) / kF32KeyTile;
  s.n_dc = (p.Dv + kF32DvChunk - 1) / kF32DvChunk;
  s.n1 = s.n_kb * s.n_c;
  s.n_items = s.n1 + s.n_dc * s.n_kt;
  return s;
}

// ---------------- loader ----------------
// Byte offset of 16-bit element (row, col) in rows of 32 elements (64 bytes), 64B swizzle: the 16-byte chunk index
// XOR-ed with bits 7-8 of the address, i.e. (row / 2) % 4. Tiles start on 1024-byte boundaries.
__device__ __forceinline__ int f32_sw64(int row, int col) {
  return row * 64 + (((col >> 3) ^ ((row >> 1) & 3)) << 4) + (col & 7) * 2;
}
// The same in 128-byte rows of 64 elements (128B swizzle), panels of 64 rows.
__device__ __forceinline__ int f32_sw128(int row, int col) {
  return row * 128 + (((col >> 3) ^ (row & 7)) << 4) + (col & 7) * 2;
}

// x -> (hi, lo) as two packed fp16 pairs each; amax tracks the largest magnitude (fp16 cannot hold above 65504).
__device__ __forceinline__ void f32_split4(float4 x, uint2& hi, uint2& lo, float& amax) {
  amax = fmaxf(amax, fmaxf(fmaxf(fabsf(x.x), fabsf(x.y)), fmaxf(fabsf(x.z), fabsf(x.w))));
  const __half2 h01 = __floats2half2_rn(x.x, x.y), h23 = __floats2half2_rn(x.z, x.w);
  const float2 f01 = __half22float2(h01), f23 = __half22float2(h23);
  const __half2 l01 = __floats2half2_rn((x.x - f01.x) * kF32LoScale, (x.y - f01.y) * kF32LoScale);
  const __half2 l23 = __floats2half2_rn((x.z - f23.x) * kF32LoScale, (x.w - f23.y) * kF32LoScale);
  hi = make_uint2(*reinterpret_cast<const uint32_t*>(&h01), *reinterpret_cast<const uint32_t*>(&h23));
  lo = make_uint2(*reinterpret_cast<const uint32_t*>(&l01), *reinterpret_cast<const uint32_t*>(&l23));
}

__device__ __forceinline__ float4 f32_ld(const float* src, bool ok) {
  return ok ? __ldg(reinterpret_cast<const float4*>(src)) : make_float4(0.f, 0.f, 0.f, 0.f);
}

// One loader thread's view of the items. Phase-1 item (kb, c): Q rows of the tile and K rows of key block kb, head-dim
// columns [32c, 32c + 32); the thread's vectors are rows r1 + 16 j at column c1 (8 threads a 128-byte row). Phase-2
// item (dc, kt): V rows of tile kt, columns of chunk dc; rows r2 + 4 j at column c2 (32 threads a row).
struct F32Loader {
  const AttnParams& p;
  const F32Shape& s;
  int r1, c1, r2, c2;

  __device__ __forceinline__ F32Loader(const AttnParams& p_, const F32Shape& s_, int lt)
      : p(p_), s(s_), r1(lt / 8), c1((lt % 8) * 4), r2(lt / 32), c2((lt % 32) * 4) {}

  // Part `part` of item i into r (phase 1: part 0 = Q's 4 vectors + K's first 4, part 1 = K's last 4).
  __device__ __forceinline__ void load(int i, int part, float4 (&r)[kF32PartVecs]) const {
    if (i >= s.n_items) return;
    if (i < s.n1) {
      const int kb = i / s.n_c, c = i - kb * s.n_c, col = c * kF32QkChunk + c1;
      const bool col_ok = col < p.Dqk;
      const int krow = kb * kF32KeyBlock + r1 + 64 * part;
      const float* k = static_cast<const float*>(p.k) + s.b * p.k_sb + s.hk * p.k_sh + (int64_t)krow * p.k_ss + col;
      const int64_t kstep = 16 * p.k_ss;
      if (part == 0) {
        const int qrow = s.m0 + r1;
        const float* q = static_cast<const float*>(p.q) + s.b * p.q_sb + s.h * p.q_sh + (int64_t)qrow * p.q_ss + col;
#pragma unroll
        for (int j = 0; j < 4; ++j) r[j] = f32_ld(q + j * 16 * p.q_ss, col_ok && qrow + 16 * j < p.Sq);
#pragma unroll
        for (int j = 0; j < 4; ++j) r[4 + j] = f32_ld(k + j * kstep, col_ok && krow + 16 * j < s.k_end);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) r[j] = f32_ld(k + j * kstep, col_ok && krow + 16 * j < s.k_end);
      }
    } else {
      const int j2 = i - s.n1, dc = j2 / s.n_kt, kt = j2 - dc * s.n_kt, col = dc * kF32DvChunk + c2;
      const int vrow = kt * kF32KeyTile + r2 + 32 * part;
      const float* v = static_cast<const float*>(p.v) + s.b * p.v_sb + s.hk * p.v_sh + (int64_t)vrow * p.v_ss + col;
      const bool col_ok = col < p.Dv;
#pragma unroll
      for (int j = 0; j < 8; ++j) r[j] = f32_ld(v + j * 4 * p.v_ss, col_ok && vrow + 4 * j < s.k_end);
    }
  }

  // Part `part` of item i from r into its slot, split into the hi and lo halves of each tensor's tile.
  __device__ __forceinline__ void store(int i, int part, const float4 (&r)[kF32PartVecs], unsigned char* slot,
                                        float& amax) const {
    uint2 hi, lo;
    if (i < s.n1) {
      const int q_off = f32_sw64(r1, c1), k_off = 2 * kF32QHalf + q_off + part * 4096;  // K rows + 64 in part 1
      if (part == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          f32_split4(r[j], hi, lo, amax);
          *reinterpret_cast<uint2*>(slot + q_off + 1024 * j) = hi;
          *reinterpret_cast<uint2*>(slot + q_off + 1024 * j + kF32QHalf) = lo;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          f32_split4(r[4 + j], hi, lo, amax);
          *reinterpret_cast<uint2*>(slot + k_off + 1024 * j) = hi;
          *reinterpret_cast<uint2*>(slot + k_off + 1024 * j + kF32KHalf) = lo;
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          f32_split4(r[j], hi, lo, amax);
          *reinterpret_cast<uint2*>(slot + k_off + 1024 * j) = hi;
          *reinterpret_cast<uint2*>(slot + k_off + 1024 * j + kF32KHalf) = lo;
        }
      }
    } else {
      const int base = (c2 / 64) * kF32Panel;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int off = base + f32_sw128(r2 + 32 * part + 4 * j, c2 % 64);
        f32_split4(r[j], hi, lo, amax);
        *reinterpret_cast<uint2*>(slot + off) = hi;
        *reinterpret_cast<uint2*>(slot + off + kF32VHalf) = lo;
      }
    }
  }
};

// Loader warpgroup wl: items wl, wl + kF32Loaders, ...; part x of its sequence is part x % 2 of its item x / 2.
__device__ __forceinline__ void f32_load_items(const AttnParams& p, const F32Shape& s, int wl, int lt,
                                               unsigned char* ring, uint64_t* full, uint64_t* empty, int* bad_tile) {
  const F32Loader ld(p, s, lt);
  float amax = 0.f;
  auto item = [&](int x) { return wl + kF32Loaders * (x >> 1); };
  auto put = [&](int x, const float4 (&r)[kF32PartVecs]) {
    const int i = item(x), part = x & 1;
    if (i >= s.n_items) return;
    const int slot = i % kF32Stages, use = i / kF32Stages;
    if (part == 0 && use > 0) mbar_wait(&empty[slot], (use - 1) & 1);
    ld.store(i, part, r, ring + slot * kF32Slot, amax);
    if (part == 1) {
      fence_proxy_async();  // generic-proxy stores read by wgmma (the async proxy)
      mbar_arrive(&full[slot]);
    }
  };
  // While part x is split and stored, parts x + 1 .. x + kF32PartsAhead are being loaded.
  float4 r[kF32PartsAhead + 1][kF32PartVecs];
  const int n_parts = 2 * ((s.n_items - wl + kF32Loaders - 1) / kF32Loaders);
#pragma unroll
  for (int u = 0; u < kF32PartsAhead; ++u) ld.load(item(u), u & 1, r[u]);
  for (int x = 0; x < n_parts; x += kF32PartsAhead + 1) {
#pragma unroll
    for (int u = 0; u <= kF32PartsAhead; ++u) {
      const int xa = x + u + kF32PartsAhead;
      ld.load(item(xa), xa & 1, r[(u + kF32PartsAhead) % (kF32PartsAhead + 1)]);
      put(x + u, r[u]);
    }
  }
  if (amax > kF32Fp16Max) *bad_tile = 1;  // (NaN is never the max: NaN inputs give NaN rows, as in PyTorch)
}

// ---------------- consumer ----------------
// The rows this thread holds in an m64n128 accumulator: g and g + 8 of its warp; element 4 jn + e is row
// g + 8 (e >> 1), column 8 jn + 2t + (e & 1).
__device__ __forceinline__ void f32_softmax_block(float (&s_hh)[64], const float (&s_x)[64], float scale_log2,
                                                  int key0, int key_end, bool causal, int row, bool need_mask,
                                                  float (&mx)[2]) {
  mx[0] = mx[1] = -INFINITY;
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    float x = __fmul_rn(fmaf(s_x[i], kF32LoUnscale, s_hh[i]), scale_log2);
    if (need_mask) {
      const int key = key0 + (i >> 2) * 8 + (i & 1);
      if (key >= key_end || (causal && key > row + ((i >> 1) & 1) * 8)) x = -INFINITY;
    }
    s_hh[i] = x;
    mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], x);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
  }
}

__device__ __forceinline__ void f32_consume(const AttnParams& p, const F32Shape& s, unsigned char* sPh,
                                            unsigned char* sPl, unsigned char* ring, float* sRatio, float* sInvL,
                                            uint64_t* full, uint64_t* empty) {
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int row_in_tile = warp * 16 + g;  // and + 8
  const int row_glob = s.m0 + row_in_tile;
  auto release = [&](int slot) {
    if (lane == 0) mbar_arrive(&empty[slot]);
  };

  float a[64], b[64], c[64];  // hi*hi sum (fp32 adds), cross-term sum, one chunk's or tile's hi*hi sum
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  // After a chunk's (tile's) two MMA groups, hi*hi (c) then cross terms (b), are committed: once c retired (and with
  // it everything of the previous item, whose slot is then released), c is added into the fp32 sum a while b runs.
  auto promote = [&](int& pending, int slot) {
    wgmma_commit();
    wgmma_wait<1>();
    if (pending >= 0) release(pending);
    reg_fence<64>(c);
#pragma unroll
    for (int e = 0; e < 64; ++e) a[e] += c[e];
    pending = slot;
  };
  // After the last item: the cross terms drained, the last slot released.
  auto drain = [&](int pending) {
    wgmma_wait<0>();
    reg_fence<64>(b);
    release(pending);
  };

  // ---------------- phase 1 ----------------
  for (int kb = 0; kb < s.n_kb; ++kb) {
#pragma unroll
    for (int e = 0; e < 64; ++e) a[e] = 0.f, b[e] = 0.f;
    int pending = -1;
    for (int cc = 0; cc < s.n_c; ++cc) {
      const int i = kb * s.n_c + cc, slot = i % kF32Stages;
      mbar_wait(&full[slot], (i / kF32Stages) & 1);
      const uint32_t qh = smem_u32(ring + slot * kF32Slot), ql = qh + kF32QHalf, kh = ql + kF32QHalf,
                     kl = kh + kF32KHalf;
      wgmma_fence();
      // The chunk's hi*hi sum as a fresh chain (c), added into a while the cross terms (b) run: as in phase 2, the
      // tensor cores' truncating accumulation never spans more than one chunk of the large terms.
#pragma unroll
      for (int kk = 0; kk < kF32QkChunk / 16; ++kk) {
        wgmma_m64n128k16_ss_f16<0>(c, sw64_desc(qh + kk * 32, 512), sw64_desc(kh + kk * 32, 512), kk > 0);
      }
      wgmma_commit();
#pragma unroll
      for (int kk = 0; kk < kF32QkChunk / 16; ++kk) {
        wgmma_m64n128k16_ss_f16<0>(b, sw64_desc(qh + kk * 32, 512), sw64_desc(kl + kk * 32, 512), 1);
        wgmma_m64n128k16_ss_f16<0>(b, sw64_desc(ql + kk * 32, 512), sw64_desc(kh + kk * 32, 512), 1);
      }
      promote(pending, slot);
    }
    drain(pending);

    const int key0 = kb * kF32KeyBlock + 2 * t;
    const bool need_mask = (kb + 1) * kF32KeyBlock > s.k_end || (p.causal && (kb + 1) * kF32KeyBlock - 1 > s.m0);
    float mx[2];
    f32_softmax_block(a, b, p.scale_log2, key0, s.k_end, p.causal, row_glob, need_mask, mx);
    float m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m_run[r], mx[r]);
      m_use[r] = (m_new == -INFINITY) ? 0.f : m_new;  // no visible key yet: keep exp2 at 0, not NaN
      const float alpha = exp2f(m_run[r] - m_use[r]);
      if (kb > 0 && t == 0) sRatio[(kb - 1) * kF32Rows + row_in_tile + r * 8] = alpha;
      m_run[r] = m_new;
      l_run[r] *= alpha;
    }
    // P's two 64-key panels of this block, hi and lo (row % 8 == g for both rows of the thread).
    const int rows0 = row_in_tile * 128 + t * 4;
#pragma unroll
    for (int jn = 0; jn < 16; ++jn) {
      float pv[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) pv[e] = exp2f(a[4 * jn + e] - m_use[e >> 1]);
      l_run[0] += pv[0] + pv[1];
      l_run[1] += pv[2] + pv[3];
      const int off = (2 * kb + jn / 8) * kF32Panel + rows0 + (((jn % 8) ^ g) << 4);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const __half2 h = __floats2half2_rn(pv[2 * r], pv[2 * r + 1]);
        const float2 hf = __half22float2(h);
        const __half2 l = __floats2half2_rn((pv[2 * r] - hf.x) * kF32LoScale, (pv[2 * r + 1] - hf.y) * kF32LoScale);
        *reinterpret_cast<__half2*>(sPh + off + r * 8 * 128) = h;
        *reinterpret_cast<__half2*>(sPl + off + r * 8 * 128) = l;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t == 0) sInvL[row_in_tile + r * 8] = l > 0.f ? 1.f / l : 0.f;
  }
  fence_proxy_async();  // P's stores are read by wgmma
  warpgroup_bar(0);

  // ---------------- phase 2 ----------------
  float* o = static_cast<float*>(p.o) + s.b * p.o_sb + s.h * p.o_sh;
  const uint32_t ph0 = smem_u32(sPh), pl0 = smem_u32(sPl);
  for (int dc = 0; dc < s.n_dc; ++dc) {
#pragma unroll
    for (int e = 0; e < 64; ++e) a[e] = 0.f, b[e] = 0.f;
    int pending = -1;  // slot of the previous tile: released once its cross-term MMAs retired
    for (int kt = 0; kt < s.n_kt; ++kt) {
      const int j = s.n1 + dc * s.n_kt + kt, slot = j % kF32Stages;
      if (kt > 0 && kt % (kF32KeyBlock / kF32KeyTile) == 0) {
        // Entering key block kb: the cross terms drained, then both sums brought from max m_{kb-1} to m_kb.
        wgmma_wait<0>();
        reg_fence<64>(b);
        release(pending);
        pending = -1;
        const int kb = kt / (kF32KeyBlock / kF32KeyTile);
        const float r0 = sRatio[(kb - 1) * kF32Rows + row_in_tile];
        const float r1 = sRatio[(kb - 1) * kF32Rows + row_in_tile + 8];
#pragma unroll
        for (int e = 0; e < 64; ++e) {
          const float r = (e >> 1) & 1 ? r1 : r0;
          a[e] *= r;
          b[e] *= r;
        }
      }
      mbar_wait(&full[slot], (j / kF32Stages) & 1);
      const uint32_t vh = smem_u32(ring + slot * kF32Slot), vl = vh + kF32VHalf;
      const uint32_t ph = ph0 + kt * kF32Panel, pl = pl0 + kt * kF32Panel;
      wgmma_fence();
      // A = P (keys contiguous), B = V tile (N-major: head dim contiguous), 16 keys per step. The tile's hi*hi sum
      // first, as a fresh chain (c), then the cross terms (b), which run while c is added into a.
#pragma unroll
      for (int kk = 0; kk < kF32KeyTile / 16; ++kk) {
        wgmma_m64n128k16_ss_f16<1>(c, sw128_desc(ph + kk * 32, 16, 1024), sw128_desc(vh + kk * 16 * 128, kF32Panel, 1024),
                                   kk > 0);
      }
      wgmma_commit();
#pragma unroll
      for (int kk = 0; kk < kF32KeyTile / 16; ++kk) {
        wgmma_m64n128k16_ss_f16<1>(b, sw128_desc(ph + kk * 32, 16, 1024), sw128_desc(vl + kk * 16 * 128, kF32Panel, 1024), 1);
        wgmma_m64n128k16_ss_f16<1>(b, sw128_desc(pl + kk * 32, 16, 1024), sw128_desc(vh + kk * 16 * 128, kF32Panel, 1024), 1);
      }
      promote(pending, slot);
    }
    drain(pending);

    const float il0 = sInvL[row_in_tile], il1 = sInvL[row_in_tile + 8];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row_glob + 8 * r;
      if (row >= p.Sq) continue;
      const float il = r ? il1 : il0;
      float* orow = o + (int64_t)row * p.o_ss + dc * kF32DvChunk + 2 * t;
#pragma unroll
      for (int jn = 0; jn < 16; ++jn) {
        if (dc * kF32DvChunk + 8 * jn + 2 * t < p.Dv) {
          const int e = 4 * jn + 2 * r;
          *reinterpret_cast<float2*>(orow + 8 * jn) =
              make_float2(fmaf(b[e], kF32LoUnscale, a[e]) * il, fmaf(b[e + 1], kF32LoUnscale, a[e + 1]) * il);
        }
      }
    }
  }
}

// One CTA per 64 query rows of one (batch, head). `bad_tiles[tile]` (tile = (b * H + h) * tiles + x) is set when
// the tile met an input fp16 cannot hold; attn_f32_fixup then recomputes its rows.
__global__ void __launch_bounds__(kF32Threads, 1)
    attn_hopper_f32_kernel(const __grid_constant__ AttnParams p, int* bad_tiles) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* sPh = smem;
  unsigned char* sPl = sPh + kF32PHalf;
  unsigned char* ring = sPl + kF32PHalf;
  float* sRatio = reinterpret_cast<float*>(ring + kF32Stages * kF32Slot);  // [kF32Blocks - 1][kF32Rows]
  float* sInvL = sRatio + (kF32Blocks - 1) * kF32Rows;
  uint64_t* full = reinterpret_cast<uint64_t*>(sInvL + kF32Rows);
  uint64_t* empty = full + kF32Stages;
  const F32Shape s = f32_shape(p);

  if (threadIdx.x == 0) {
    for (int i = 0; i < kF32Stages; ++i) mbar_init(&full[i], 128), mbar_init(&empty[i], 4);
    fence_mbar_init();
  }
  __syncthreads();

  if (threadIdx.x >= 128) {
    setmaxnreg_dec<kF32LoaderRegs>();
    f32_load_items(p, s, threadIdx.x / 128 - 1, threadIdx.x % 128, ring, full, empty,
                   &bad_tiles[((int64_t)s.b * p.H + s.h) * gridDim.x + blockIdx.x]);
  } else {
    setmaxnreg_inc<kF32ConsumerRegs>();
    f32_consume(p, s, sPh, sPl, ring, sRatio, sInvL, full, empty);
  }
}

// Rows of the tiles attn_hopper_f32_kernel flagged, in fp32 arithmetic (no tensor cores): one CTA per tile, rows one
// after another; each row's scores (one warp per key, lanes over the head dim), its softmax, then O (threads over
// the output columns). Slow, and run only for inputs the split cannot represent.
constexpr int kF32FixThreads = 256;
__global__ void __launch_bounds__(kF32FixThreads)
    attn_f32_fixup(const __grid_constant__ AttnParams p, const int* bad_tiles, float scale) {
  if (bad_tiles[((int64_t)blockIdx.z * p.H + blockIdx.y) * gridDim.x + blockIdx.x] == 0) return;
  __shared__ float sc[kF32MaxKeys];
  __shared__ float red[kF32FixThreads / 32];
  const int b = blockIdx.z, h = blockIdx.y, hk = h / p.kv_group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* kbase = static_cast<const float*>(p.k) + b * p.k_sb + hk * p.k_sh;
  const float* vbase = static_cast<const float*>(p.v) + b * p.v_sb + hk * p.v_sh;
  for (int row = blockIdx.x * kF32Rows; row < min(p.Sq, (int)(blockIdx.x + 1) * kF32Rows); ++row) {
    const float* q = static_cast<const float*>(p.q) + b * p.q_sb + h * p.q_sh + (int64_t)row * p.q_ss;
    const int n_keys = p.causal ? min(p.Sk, row + 1) : p.Sk;
    for (int j = warp; j < n_keys; j += kF32FixThreads / 32) {
      const float* k = kbase + (int64_t)j * p.k_ss;
      float acc = 0.f;
      for (int d = lane; d < p.Dqk; d += 32) acc = fmaf(q[d], k[d], acc);
      for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
      if (lane == 0) sc[j] = acc * scale;
    }
    __syncthreads();
    float m = -INFINITY;
    for (int j = threadIdx.x; j < n_keys; j += kF32FixThreads) m = fmaxf(m, sc[j]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < kF32FixThreads / 32; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float l = 0.f;
    for (int j = threadIdx.x; j < n_keys; j += kF32FixThreads) {
      const float e = (m == -INFINITY) ? 0.f : expf(sc[j] - m);
      sc[j] = e;
      l += e;
    }
    for (int off = 16; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) red[warp] = l;
    __syncthreads();
    l = 0.f;
    for (int w = 0; w < kF32FixThreads / 32; ++w) l += red[w];
    float* o = static_cast<float*>(p.o) + b * p.o_sb + h * p.o_sh + (int64_t)row * p.o_ss;
    for (int d = threadIdx.x; d < p.Dv; d += kF32FixThreads) {
      float acc = 0.f;
      for (int j = 0; j < n_keys; ++j) acc = fmaf(sc[j], vbase[(int64_t)j * p.v_ss + d], acc);
      o[d] = acc / l;
    }
    __syncthreads();  // sc and red are rewritten by the next row
  }
}

}  // namespace kforge_attn
