// Fused attention forward for Hopper (sm_90a: wgmma + TMA) with P staged in shared memory, for key rows up to
// 1024 and large head dims. Dispatched where the register-P kernels (attn_hopper_regp.cu) do not apply: causal
// calls with 512 < S_k <= 1024, and a zero or negative scale. Exact softmax over the whole key row, no online
// rescaling of O:
//
//   phase 1  for each 256-key block kb:  S = Q K_kb^T, accumulated over Dqk in 32-wide chunks
//            (m64n256k16 per warpgroup, 128 fp32 registers/thread); row max/sum update; P_kb =
//            exp2(S - m_kb) written to shared memory as fp16/bf16 (the S x S matrix never leaves the SM).
//   phase 2  for each 256-wide output head-dim chunk dc:  O_dc = sum_kb r_kb * P_kb V_kb[:, dc],
//            streaming V in [64 keys x 256] tiles; the accumulator is rescaled by r = exp2(m_kb - m_kb+1)
//            where the key index crosses a block, and by 1/l at the end; then the chunk is stored.
//
// Roles: NWG consumer warpgroups x 64 query rows (the K/V tiles in shared memory serve all of them) and
// one producer warpgroup (registers handed to the consumers with setmaxnreg). The producer issues TMA loads (4-D tensor maps over (D, S, H, B) with the tensors'
// own strides, zero fill past every edge, swizzled = the layout wgmma reads) into a ring of slots:
// phase 1 uses 4 slots of 24 KB (Q and K chunks 32 wide, 64B swizzle), phase 2 3 slots of 32 KB (V
// tiles, 128B swizzle) over the same 96 KB. Slots complete on "full" mbarriers; each consumer warp
// releases a slot on its "empty" mbarrier once the MMAs reading it retired. Consumers keep one wgmma
// group in flight (wait_group 1) so the tensor cores are not drained between slots.
// P for NWG*64 rows x NKB_MAX*256 keys must fit in shared memory: NWG=2 handles S_k <= 512, NWG=1
// handles S_k <= 1024.
#include "attn_common.cuh"
#include "attn_wgmma.cuh"
#include "attn_epilogue.cuh"
#include <cuda.h>  // CUtensorMap

namespace kforge_attn {

constexpr int kHopKeyBlock = 256;    // keys per QK^T block: one m64n256 accumulator
constexpr int kHopQkChunk = 32;      // head-dim columns per phase-1 stage (64-byte rows, 64B swizzle)
constexpr int kHopKeyTile = 64;      // keys per P.V stage (32-key tiles, 6 of 16 KB: phase 2 measured 14% slower)
constexpr int kHopDvChunk = 256;     // output columns per P.V pass: one m64n256 accumulator
constexpr int kHopPanel = 64 * 128;  // [64 rows x 64] 16-bit elements, 128B swizzle (P)
constexpr int kHopVPanel = kHopKeyTile * 128;  // [64 keys x 64 cols] of a V tile, 128B swizzle
constexpr int kHopRingStages1 = 4;   // phase-1 slots in the ring
constexpr int kHopStages2 = 3;

template <int NWG, int NKB_MAX>
struct HopperLayout {
  static constexpr int kConsumerThreads = NWG * 128;
  // + one producer warpgroup (one thread issues the loads). A whole warpgroup, so setmaxnreg can move its
  // registers to the consumers: a 9-warp block is capped at 168 registers per thread (3 warps on one SM
  // sub-partition's 16K-register file).
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = NWG == 2 ? 232 : 240;  // 2*128*232 + 128*40 <= 65536
  static constexpr int kRows = NWG * 64;
  static constexpr int kPanelsPerWg = NKB_MAX * kHopKeyBlock / 64;
  static constexpr int kPBytes = NWG * kPanelsPerWg * kHopPanel;
  static constexpr int kQChunk = kRows * kHopQkChunk * 2;
  static constexpr int kKChunk = kHopKeyBlock * kHopQkChunk * 2;
  static constexpr int kStage1 = kQChunk + kKChunk;
  static constexpr int kVTile = kHopKeyTile * kHopDvChunk * 2;  // 4 panels of [64 keys x 64 cols]
  static constexpr int kRing = (kHopRingStages1 * kStage1 > kHopStages2 * kVTile) ? kHopRingStages1 * kStage1
                                                                                  : kHopStages2 * kVTile;
  // Phase 1 also borrows each warpgroup's P area of the last key block (written only once phase 1 is
  // over): one more slot per warpgroup, so more bytes are in flight while Q K^T streams.
  static constexpr int kLastBlockP = (NKB_MAX - 1) * 4 * kHopPanel;  // offset inside a warpgroup's P
  static constexpr int kStages1 = kHopRingStages1 + NWG;
  static constexpr int kStatsBytes = kRows * NKB_MAX * 4;  // (NKB_MAX-1) block ratios + 1/l per row
  static constexpr int kBarrierBytes = 2 * (kStages1 + kHopStages2) * 8;
  static_assert(4 * kHopPanel >= kStage1, "a borrowed P block must hold one phase-1 slot");
  static constexpr int kAlignSlack = 1024;  // swizzle atoms must start on 1024-byte boundaries
  static constexpr int kSmemBytes = kAlignSlack + kPBytes + kRing + kStatsBytes + kBarrierBytes;
  static constexpr int kMaxKeys = NKB_MAX * kHopKeyBlock;
};

// Phase-1 slot s: the ring's first kHopRingStages1 slots, then one in each warpgroup's last-block P area.
template <int NWG, int NKB_MAX>
__device__ __forceinline__ unsigned char* stage1_slot(unsigned char* sP, unsigned char* sRing, int s) {
  using L = HopperLayout<NWG, NKB_MAX>;
  return s < kHopRingStages1 ? sRing + s * L::kStage1
                             : sP + (s - kHopRingStages1) * L::kPanelsPerWg * kHopPanel + L::kLastBlockP;
}

template <typename T, int NWG, int NKB_MAX>
__device__ __forceinline__ void consume(const AttnParams& p, unsigned char* sP, unsigned char* sRing, float* sRatio,
                                        float* sInvL, uint64_t* full1, uint64_t* empty1, uint64_t* full2,
                                        uint64_t* empty2, int m0, int h, int b, int k_end, int n_kb, int n_kt, int n_c,
                                        int n_dc);

template <typename T, int NWG, int NKB_MAX>
__global__ void __launch_bounds__(NWG * 128 + 128, 1)
    attn_hopper_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ CUtensorMap tm_q,
                       const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v) {
  using L = HopperLayout<NWG, NKB_MAX>;
  static_assert(L::kSmemBytes <= 232448, "shared memory budget of one H100 SM exceeded");
  constexpr int kEmptyArrivals = NWG * 4;  // every consumer warp releases every slot
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* sP = smem;
  unsigned char* sRing = sP + L::kPBytes;
  float* sRatio = reinterpret_cast<float*>(sRing + L::kRing);  // [NKB_MAX-1][kRows]
  float* sInvL = sRatio + (NKB_MAX - 1) * L::kRows;            // [kRows]
  uint64_t* full1 = reinterpret_cast<uint64_t*>(sInvL + L::kRows);
  uint64_t* empty1 = full1 + L::kStages1;
  uint64_t* full2 = empty1 + L::kStages1;
  uint64_t* empty2 = full2 + kHopStages2;

  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * L::kRows;
  const int h = blockIdx.y, b = blockIdx.z;
  const int m_end = (blockIdx.x + 1) * L::kRows;  // causal: no key past the tile's last row is visible
  const int k_end = p.causal ? min(p.Sk, m_end) : p.Sk;
  const int n_kb = (k_end + kHopKeyBlock - 1) / kHopKeyBlock;
  const int n_kt = (k_end + kHopKeyTile - 1) / kHopKeyTile;
  const int n_c = (p.Dqk + kHopQkChunk - 1) / kHopQkChunk;
  const int n_dc = (p.Dv + kHopDvChunk - 1) / kHopDvChunk;
  const int n1 = n_kb * n_c;  // phase-1 items
  const int n2 = n_dc * n_kt; // phase-2 items

  if (tid == 0) {
    for (int s = 0; s < L::kStages1; ++s) mbar_init(&full1[s], 1), mbar_init(&empty1[s], kEmptyArrivals);
    for (int s = 0; s < kHopStages2; ++s) mbar_init(&full2[s], 1), mbar_init(&empty2[s], kEmptyArrivals);
    fence_mbar_init();
  }
  __syncthreads();  // the barriers exist before anyone waits on them

  if (tid >= L::kConsumerThreads) {
    // ---------------- producer warpgroup: one thread issues every load ----------------
    setmaxnreg_dec<L::kProducerRegs>();
    if (tid == L::kConsumerThreads) {
      for (int i = 0; i < n1; ++i) {  // Q chunk c + K block kb chunk c
        const int s = i % L::kStages1, use = i / L::kStages1;
        if (use > 0) mbar_wait(&empty1[s], (use - 1) & 1);
        unsigned char* slot = stage1_slot<NWG, NKB_MAX>(sP, sRing, s);
        // Odd key blocks walk the head dim backwards: the Q chunks loaded last are re-read first, while
        // they are still in L2 (a second read of Q from HBM is the largest excess traffic at S_k = 512).
        const int kb = i / n_c, c = (kb & 1) ? n_c - 1 - i % n_c : i % n_c;
        mbar_arrive_expect_tx(&full1[s], L::kStage1);  // Q chunk + K chunk
        tma_load_4d(slot, &tm_q, &full1[s], c * kHopQkChunk, m0, h, b);
        tma_load_4d(slot + L::kQChunk, &tm_k, &full1[s], c * kHopQkChunk, kb * kHopKeyBlock, h / p.kv_group, b);
      }
      // Phase-2 tiles reuse the ring's bytes: wait until the last use of every phase-1 ring slot is consumed.
      for (int s = 0; s < kHopRingStages1 && s < n1; ++s) mbar_wait(&empty1[s], ((n1 - 1 - s) / L::kStages1) & 1);
      for (int j = 0; j < n2; ++j) {  // V tile kt for output columns dc
        const int s = j % kHopStages2, use = j / kHopStages2;
        if (use > 0) mbar_wait(&empty2[s], (use - 1) & 1);
        unsigned char* slot = sRing + s * L::kVTile;
        const int dc = j / n_kt, kt = j % n_kt;
        mbar_arrive_expect_tx(&full2[s], L::kVTile);
#pragma unroll
        for (int pp = 0; pp < kHopDvChunk / 64; ++pp) {
          tma_load_4d(slot + pp * kHopVPanel, &tm_v, &full2[s], dc * kHopDvChunk + pp * 64, kt * kHopKeyTile,
                      h / p.kv_group, b);
        }
      }
    }
  } else {
    setmaxnreg_inc<L::kConsumerRegs>();
    consume<T, NWG, NKB_MAX>(p, sP, sRing, sRatio, sInvL, full1, empty1, full2, empty2, m0, h, b, k_end, n_kb,
                             n_kt, n_c, n_dc);
  }
  // Reconverges the producer warp's lanes (they diverged above). Nothing after it needs that any more (it
  // preceded a cluster barrier), but without it ptxas schedules the whole kernel differently: kept so that the
  // machine code stays that of the measured build.
  __syncwarp();
}

// Consumer warpgroups: everything but the loads.
template <typename T, int NWG, int NKB_MAX>
__device__ __forceinline__ void consume(const AttnParams& p, unsigned char* sP, unsigned char* sRing, float* sRatio,
                                        float* sInvL, uint64_t* full1, uint64_t* empty1, uint64_t* full2,
                                        uint64_t* empty2, int m0, int h, int b, int k_end, int n_kb, int n_kt, int n_c,
                                        int n_dc) {
  using L = HopperLayout<NWG, NKB_MAX>;
  const int tid = threadIdx.x;

  // ---------------- consumers ----------------
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  T* o = static_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh;

  float acc[128];
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  const int row_in_wg = warp * 16 + g;      // and row_in_wg + 8
  const int row_cta = wg * 64 + row_in_wg;  // row index inside the CTA's block
  const int row_glob = m0 + row_cta;
  unsigned char* sP_wg = sP + wg * L::kPanelsPerWg * kHopPanel;
  // This warp's reads of a slot are over once the MMA group that used it retired: release it then.
  auto release = [&](uint64_t* empty, int slot) {
    if (lane == 0) mbar_arrive(&empty[slot]);
  };

  // ---------------- phase 1: S_kb = Q K_kb^T over Dqk chunks; softmax statistics; P_kb -> smem ----------------
  for (int kb = 0; kb < n_kb; ++kb) {
#pragma unroll
    for (int e = 0; e < 128; ++e) acc[e] = 0.f;
    int pending = -1;  // slot whose MMA group may still be in flight
    for (int c = 0; c < n_c; ++c) {
      const int i = kb * n_c + c;
      const int s = i % L::kStages1;
      mbar_wait(&full1[s], (i / L::kStages1) & 1);
      const unsigned char* slot = stage1_slot<NWG, NKB_MAX>(sP, sRing, s);
      const uint32_t a_base = smem_u32(slot + wg * 64 * kHopQkChunk * 2);
      const uint32_t b_base = smem_u32(slot + L::kQChunk);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kHopQkChunk / 16; ++kk) {
        Wgmma<T>::template m64n256k16<0>(acc, sw64_desc(a_base + kk * 32, 512), sw64_desc(b_base + kk * 32, 512));
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous chunk's group retired: its slot can be refilled
      if (pending >= 0) release(empty1, pending);
      pending = s;
    }
    wgmma_wait<0>();
    reg_fence(acc);
    release(empty1, pending);

    // Masking is needed only in a block that reaches past S_k or crosses the causal diagonal.
    const int key0 = kb * kHopKeyBlock + 2 * t;
    const bool need_mask = (kb + 1) * kHopKeyBlock > p.Sk || (p.causal && (kb + 1) * kHopKeyBlock - 1 > m0);
    float mx[2];
    scale_mask_rowmax(acc, p.scale_log2, need_mask, key0, p.Sk, p.causal, row_glob, mx);
    float m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(m_run[r], mx[r]);
      m_use[r] = (m_new == -INFINITY) ? 0.f : m_new;  // no visible key yet: keep exp2 at 0, not NaN
      const float alpha = exp2f(m_run[r] - m_use[r]);
      if (kb > 0 && t == 0) sRatio[(kb - 1) * L::kRows + row_cta + r * 8] = alpha;
      m_run[r] = m_new;
      l_run[r] *= alpha;
    }
    if (kb == NKB_MAX - 1) {
      // This block's P goes where phase-1 slot kHopRingStages1 + wg lived: every consumer warp must have
      // released that slot's last use before it is overwritten.
      const int s = kHopRingStages1 + wg, n1 = n_kb * n_c;
      if (s < n1) mbar_wait(&empty1[s], ((n1 - 1 - s) / L::kStages1) & 1);
    }
    unsigned char* p_rows0 = sP_wg + kb * 4 * kHopPanel + row_in_wg * 128 + t * 4;
#pragma unroll
    for (int jn = 0; jn < 32; ++jn) {
      const float p0 = exp2f(acc[4 * jn + 0] - m_use[0]);
      const float p1 = exp2f(acc[4 * jn + 1] - m_use[0]);
      const float p2 = exp2f(acc[4 * jn + 2] - m_use[1]);
      const float p3 = exp2f(acc[4 * jn + 3] - m_use[1]);
      l_run[0] += p0 + p1;
      l_run[1] += p2 + p3;
      // swz128(row, jn % 8) with row % 8 == g for both row_in_wg and row_in_wg + 8.
      unsigned char* at = p_rows0 + (jn / 8) * kHopPanel + (((jn % 8) ^ g) << 4);
      *reinterpret_cast<uint32_t*>(at) = Pack2<T>::from_floats(p0, p1);
      *reinterpret_cast<uint32_t*>(at + 8 * 128) = Pack2<T>::from_floats(p2, p3);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t == 0) {
      sInvL[row_cta + r * 8] = l > 0.f ? 1.f / l : 0.f;
      store_row_lse(p, b, h, row_glob + r * 8, m_run[r], l);
    }
  }
  // A warpgroup reads only its own rows of P and of the statistics: publish its P stores to the async
  // proxy (wgmma) and everything to its own threads.
  fence_proxy_async();
  warpgroup_bar(wg);

  // ---------------- phase 2: O_dc = sum over key tiles of P_kt V_kt[:, dc] ----------------
  for (int dc = 0; dc < n_dc; ++dc) {
#pragma unroll
    for (int e = 0; e < 128; ++e) acc[e] = 0.f;
    int pending = -1;
    for (int kt = 0; kt < n_kt; ++kt) {
      const int j = dc * n_kt + kt;
      const int s = j % kHopStages2;
      if (kt > 0 && kt % (kHopKeyBlock / kHopKeyTile) == 0) {
        // Entering key block kb: bring the sum so far from max m_{kb-1} to m_kb (MMAs drained first).
        wgmma_wait<0>();
        reg_fence(acc);
        release(empty2, pending);
        pending = -1;
        const int kb = kt / (kHopKeyBlock / kHopKeyTile);
        const float r0 = sRatio[(kb - 1) * L::kRows + row_cta];
        const float r1 = sRatio[(kb - 1) * L::kRows + row_cta + 8];
#pragma unroll
        for (int jn = 0; jn < 32; ++jn) {
          acc[4 * jn + 0] *= r0;
          acc[4 * jn + 1] *= r0;
          acc[4 * jn + 2] *= r1;
          acc[4 * jn + 3] *= r1;
        }
      }
      mbar_wait(&full2[s], (j / kHopStages2) & 1);
      // P panels hold 64 keys (128-byte rows), as many as a V tile.
      static_assert(kHopKeyTile == 64, "a P panel per V tile");
      const uint32_t a_base = smem_u32(sP_wg + kt * kHopPanel);
      const uint32_t b_base = smem_u32(sRing + s * L::kVTile);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kHopKeyTile / 16; ++kk) {
        // A = P (K-major: keys contiguous); B = V tile (N-major: head dim contiguous), 16 keys per step.
        Wgmma<T>::template m64n256k16<1>(acc, sw128_desc(a_base + kk * 32, 16, 1024),
                                         sw128_desc(b_base + kk * 16 * 128, kHopVPanel, 1024));
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (pending >= 0) release(empty2, pending);
      pending = s;
    }
    wgmma_wait<0>();
    reg_fence(acc);
    release(empty2, pending);
    const float il0 = sInvL[row_cta], il1 = sInvL[row_cta + 8];
    store_o_chunk<T, kHopDvChunk / 32>(acc, il0, il1, o + (int64_t)row_glob * p.o_ss + dc * kHopDvChunk, p.o_ss, row_glob < p.Sq,
                     row_glob + 8 < p.Sq, p.Dv - dc * kHopDvChunk, t);
  }
}

}  // namespace kforge_attn
