// Fused attention forward for Hopper (sm_90a: wgmma + TMA) with P held in registers, for S_k <= 512 and
// large head dims (the seed shape: S=512, D=1024). Exact softmax over the whole key row:
//
//   phase 1  for each 256-key block kb (at most two): S = Q K_kb^T accumulated over Dqk in 32-wide chunks
//            (m64n256k16 per warpgroup, 128 fp32 registers/thread); row max/sum; P_kb = exp2(S - m_kb)
//            packed to 16-bit pairs in exactly the register layout wgmma reads as its A operand
//            (64 registers per block: 128 for the whole row).
//   phase 2  for each 128-wide output chunk dc:  O_dc = r * P_0 V_0[:, dc] + P_1 V_1[:, dc]
//            (m64n128k16, A = P from registers, B = [64 keys x 128] V tiles from shared memory), r =
//            exp2(m_0 - m_1) applied to the accumulator when the key index crosses into block 1; scaled
//            by 1/l and stored.
//
// Why a second wgmma kernel: attn_hopper.cu keeps P in shared memory (128 KB at 128 rows x 512 keys),
// which leaves 96-144 KB for loads in flight, and ncu showed that kernel waiting on data with no unit
// saturated. Here all shared memory is the load ring: 9 phase-1 slots of 24 KB (Q chunk 8 KB + K chunk
// 16 KB, 64B swizzle) and, over the same bytes, 12 V tiles of 16 KB (128B swizzle). The price is
// registers (P 128 + O 64 per thread in phase 2) and O in 128-wide chunks instead of 256.
//
// Roles as in attn_hopper.cu: two consumer warpgroups x 64 query rows, one producer warpgroup whose single
// issuing thread runs the TMA loads ("full" mbarriers complete on bytes; each consumer warp releases a slot
// on its "empty" mbarrier once the MMAs reading it retired), registers moved to the consumers by setmaxnreg.
#include "attn_common.cuh"
#include "attn_wgmma.cuh"
#include "attn_epilogue.cuh"
#include <cuda.h>  // CUtensorMap
#include <limits.h>

namespace kforge_attn {

constexpr int kRpRows = 128;          // query rows per CTA: 2 consumer warpgroups x 64
constexpr int kRpKeyBlock = 256;      // keys per QK^T block: one m64n256 accumulator
constexpr int kRpMaxBlocks = 2;       // P of two blocks = 128 registers per thread
constexpr int kRpMaxKeys = kRpMaxBlocks * kRpKeyBlock;
constexpr int kRpQkChunk = 32;        // head-dim columns per phase-1 stage (64-byte rows, 64B swizzle)
constexpr int kRpDvChunk = 128;       // output columns per P.V pass: one m64n128 accumulator
constexpr int kRpKeyTile = 64;        // keys per V tile
constexpr int kRpQBytes = kRpRows * kRpQkChunk * 2;
constexpr int kRpStage1 = kRpQBytes + kRpKeyBlock * kRpQkChunk * 2;  // 24 KB
constexpr int kRpVPanel = kRpKeyTile * 128;                         // [64 keys x 64 cols], 128B swizzle
constexpr int kRpVTile = (kRpDvChunk / 64) * kRpVPanel;             // 16 KB
// The ring is cut in groups of 48 KB = 2 phase-1 slots = 3 V tiles, so a V tile waits only for the two
// phase-1 slots under it; one more phase-1 slot sits past the groups.
constexpr int kRpGroups = 4;
constexpr int kRpGroupBytes = 2 * kRpStage1;
static_assert(kRpGroupBytes == 3 * kRpVTile, "a ring group holds 2 phase-1 slots and 3 V tiles");
constexpr int kRpStages1 = 2 * kRpGroups + 1;
constexpr int kRpStages2 = 3 * kRpGroups;
constexpr int kRpRingBytes = kRpStages1 * kRpStage1;  // 216 KB
constexpr int kRpConsumerThreads = 256;
constexpr int kRpThreads = kRpConsumerThreads + 128;
constexpr int kRpProducerRegs = 24;
constexpr int kRpConsumerRegs = 240;  // 2*128*240 + 128*24 <= 65536; at 232 phase 2 spills
constexpr int kRpAlignSlack = 1024;   // swizzle atoms start on 1024-byte boundaries
constexpr int kRpSmemBytes = kRpAlignSlack + kRpRingBytes + 2 * (kRpStages1 + kRpStages2) * 8;
constexpr int kRpEmptyArrivals = kRpConsumerThreads / 32;  // every consumer warp releases every slot

// Phase-1 item i uses slot i % kRpStages1; the last item that uses slot s (-1: none).
__device__ __forceinline__ int rp_last_item(int s, int n1) {
  return s < n1 ? s + (n1 - 1 - s) / kRpStages1 * kRpStages1 : -1;
}

// The V ring starts at the group whose phase-1 slots are released first, so phase 2's first loads are
// issued while the last phase-1 MMAs still run.
__device__ __forceinline__ int rp_first_group(int n1) {
  int best = 0, best_last = INT_MAX;
  for (int g = 0; g < kRpGroups; ++g) {
    const int last = max(rp_last_item(2 * g, n1), rp_last_item(2 * g + 1, n1));
    if (last < best_last) best_last = last, best = g;
  }
  return best;
}

__device__ __forceinline__ unsigned char* rp_v_slot(unsigned char* ring, int v, int g0) {
  return ring + ((v / 3 + g0) % kRpGroups) * kRpGroupBytes + (v % 3) * kRpVTile;
}

template <typename T>
__device__ __forceinline__ void consume_regp(const AttnParams& p, unsigned char* ring, uint64_t* full1,
                                             uint64_t* empty1, uint64_t* full2, uint64_t* empty2, int m0, int h,
                                             int b, int n_kb, int n_kt, int n_c, int n_dc);

template <typename T>
__global__ void __launch_bounds__(kRpThreads, 1)
    attn_hopper_regp_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ CUtensorMap tm_q,
                            const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v) {
  static_assert(kRpSmemBytes <= 232448, "shared memory budget of one H100 SM exceeded");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint64_t* full1 = reinterpret_cast<uint64_t*>(ring + kRpRingBytes);
  uint64_t* empty1 = full1 + kRpStages1;
  uint64_t* full2 = empty1 + kRpStages1;
  uint64_t* empty2 = full2 + kRpStages2;

  const int tid = threadIdx.x;
  const int m0 = blockIdx.x * kRpRows;
  const int h = blockIdx.y, b = blockIdx.z;
  const int k_end = p.causal ? min(p.Sk, m0 + kRpRows) : p.Sk;
  const int n_kb = (k_end + kRpKeyBlock - 1) / kRpKeyBlock;
  const int n_kt = (k_end + kRpKeyTile - 1) / kRpKeyTile;
  const int n_c = (p.Dqk + kRpQkChunk - 1) / kRpQkChunk;
  const int n_dc = (p.Dv + kRpDvChunk - 1) / kRpDvChunk;

  if (tid == 0) {
    for (int s = 0; s < kRpStages1; ++s) mbar_init(&full1[s], 1), mbar_init(&empty1[s], kRpEmptyArrivals);
    for (int s = 0; s < kRpStages2; ++s) mbar_init(&full2[s], 1), mbar_init(&empty2[s], kRpEmptyArrivals);
    fence_mbar_init();
  }
  __syncthreads();

  if (tid >= kRpConsumerThreads) {
    // ---------------- producer warpgroup: one thread issues every load ----------------
    setmaxnreg_dec<kRpProducerRegs>();
    if (tid != kRpConsumerThreads) return;
    const int n1 = n_kb * n_c, n2 = n_dc * n_kt;
    for (int i = 0; i < n1; ++i) {  // Q chunk c + K block kb chunk c
      const int s = i % kRpStages1, use = i / kRpStages1;
      if (use > 0) mbar_wait(&empty1[s], (use - 1) & 1);
      unsigned char* slot = ring + s * kRpStage1;
      // Odd key blocks walk the head dim backwards: the Q chunks loaded last are re-read first, while
      // they are still in L2.
      const int kb = i / n_c, c = (kb & 1) ? n_c - 1 - i % n_c : i % n_c;
      mbar_arrive_expect_tx(&full1[s], kRpStage1);
      tma_load_4d(slot, &tm_q, &full1[s], c * kRpQkChunk, m0, h, b);
      tma_load_4d(slot + kRpQBytes, &tm_k, &full1[s], c * kRpQkChunk, kb * kRpKeyBlock, h, b);
    }
    const int g0 = rp_first_group(n1);
    for (int j = 0; j < n2; ++j) {  // V tile kt for output columns dc
      const int v = j % kRpStages2, use = j / kRpStages2;
      if (use > 0) {
        mbar_wait(&empty2[v], (use - 1) & 1);
      } else if (v % 3 == 0) {
        // First V tile in this group: the two phase-1 slots under it must have had their last use consumed.
        const int grp = (v / 3 + g0) % kRpGroups;
        for (int s = 2 * grp; s < 2 * grp + 2; ++s) {
          const int last = rp_last_item(s, n1);
          if (last >= 0) mbar_wait(&empty1[s], (last / kRpStages1) & 1);
        }
      }
      unsigned char* slot = rp_v_slot(ring, v, g0);
      const int dc = j / n_kt, kt = j % n_kt;
      mbar_arrive_expect_tx(&full2[v], kRpVTile);
#pragma unroll
      for (int pp = 0; pp < kRpDvChunk / 64; ++pp) {
        tma_load_4d(slot + pp * kRpVPanel, &tm_v, &full2[v], dc * kRpDvChunk + pp * 64, kt * kRpKeyTile, h, b);
      }
    }
    return;
  }
  setmaxnreg_inc<kRpConsumerRegs>();
  consume_regp<T>(p, ring, full1, empty1, full2, empty2, m0, h, b, n_kb, n_kt, n_c, n_dc);
}

// Consumer warpgroups: everything but the loads.
template <typename T>
__device__ __forceinline__ void consume_regp(const AttnParams& p, unsigned char* ring, uint64_t* full1,
                                             uint64_t* empty1, uint64_t* full2, uint64_t* empty2, int m0, int h,
                                             int b, int n_kb, int n_kt, int n_c, int n_dc) {
  const int tid = threadIdx.x;
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int row_glob = m0 + wg * 64 + warp * 16 + g;  // and row_glob + 8
  T* o = static_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh;
  auto release = [&](uint64_t* empty, int slot) {
    if (lane == 0) mbar_arrive(&empty[slot]);
  };

  float acc[128];                 // phase 1: S (m64n256); phase 2: O (m64n128, the first 64)
  uint32_t pr[kRpMaxBlocks][64];  // P_kb as wgmma A fragments: [4 kk + {0,1,2,3}] for key step kk
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  float ratio[2] = {1.f, 1.f};  // exp2(m_0 - m_1) per row

  // ---------------- phase 1: S_kb = Q K_kb^T over Dqk chunks; softmax statistics; P_kb -> registers -------
#pragma unroll
  for (int kb = 0; kb < kRpMaxBlocks; ++kb) {
    if (kb >= n_kb) break;
#pragma unroll
    for (int e = 0; e < 128; ++e) acc[e] = 0.f;
    int pending = -1;  // slot whose MMA group may still be in flight
    for (int c = 0; c < n_c; ++c) {
      const int i = kb * n_c + c;
      const int s = i % kRpStages1;
      mbar_wait(&full1[s], (i / kRpStages1) & 1);
      const unsigned char* slot = ring + s * kRpStage1;
      const uint32_t a_base = smem_u32(slot + wg * 64 * kRpQkChunk * 2);
      const uint32_t b_base = smem_u32(slot + kRpQBytes);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kRpQkChunk / 16; ++kk) {
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
    const int key0 = kb * kRpKeyBlock + 2 * t;
    const bool need_mask = (kb + 1) * kRpKeyBlock > p.Sk || (p.causal && (kb + 1) * kRpKeyBlock - 1 > m0);
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int jn = 0; jn < 32; ++jn) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = acc[4 * jn + e] * p.scale_log2;
        if (need_mask) {
          const int key = key0 + jn * 8 + (e & 1);
          if (key >= p.Sk || (p.causal && key > row_glob + (e >> 1) * 8)) x = -INFINITY;
        }
        acc[4 * jn + e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    }
    float m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m_run[r], mx[r]);
      m_use[r] = (m_new == -INFINITY) ? 0.f : m_new;  // no visible key yet: keep exp2 at 0, not NaN
      const float alpha = exp2f(m_run[r] - m_use[r]);
      if (kb > 0) ratio[r] = alpha;
      m_run[r] = m_new;
      l_run[r] *= alpha;
    }
    // Accumulator element 4 jn + e is (row g + 8 (e >> 1), key 8 jn + 2t + (e & 1)); the A fragment of key
    // step kk is {row g keys 2t.., row g+8 keys 2t.., row g keys 2t+8.., row g+8 keys 2t+8..}: element
    // pairs (4 jn, 4 jn + 1) and (4 jn + 2, 4 jn + 3) become registers 2 jn and 2 jn + 1.
#pragma unroll
    for (int jn = 0; jn < 32; ++jn) {
      const float p0 = exp2f(acc[4 * jn + 0] - m_use[0]);
      const float p1 = exp2f(acc[4 * jn + 1] - m_use[0]);
      const float p2 = exp2f(acc[4 * jn + 2] - m_use[1]);
      const float p3 = exp2f(acc[4 * jn + 3] - m_use[1]);
      l_run[0] += p0 + p1;
      l_run[1] += p2 + p3;
      pr[kb][2 * jn] = Pack2<T>::from_floats(p0, p1);
      pr[kb][2 * jn + 1] = Pack2<T>::from_floats(p2, p3);
    }
  }
  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv_l[r] = l > 0.f ? 1.f / l : 0.f;
  }

  // ---------------- phase 2: O_dc = sum over key tiles of P_kt V_kt[:, dc] ----------------
  const int g0 = rp_first_group(n_kb * n_c);
  constexpr int kTilesPerBlock = kRpKeyBlock / kRpKeyTile;
  for (int dc = 0; dc < n_dc; ++dc) {
#pragma unroll
    for (int e = 0; e < 64; ++e) acc[e] = 0.f;
    int pending = -1;
    // Unrolled: P is indexed by the tile, and registers cannot be indexed at run time.
#pragma unroll
    for (int kt = 0; kt < kRpMaxKeys / kRpKeyTile; ++kt) {
      if (kt >= n_kt) break;
      const int j = dc * n_kt + kt;
      const int v = j % kRpStages2;
      if (kt == kTilesPerBlock) {
        // Entering key block 1: bring the sum so far from max m_0 to m_1 (MMAs drained first).
        wgmma_wait<0>();
        reg_fence<64>(acc);
        release(empty2, pending);
        pending = -1;
#pragma unroll
        for (int e = 0; e < 64; ++e) acc[e] *= ratio[(e >> 1) & 1];
      }
      mbar_wait(&full2[v], (j / kRpStages2) & 1);
      const uint32_t b_base = smem_u32(rp_v_slot(ring, v, g0));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kRpKeyTile / 16; ++kk) {
        // A = P (registers), B = V tile (N-major: head dim contiguous), 16 keys per step.
        const uint32_t* a = &pr[kt / kTilesPerBlock][(kt % kTilesPerBlock) * 16 + kk * 4];
        Wgmma<T>::template m64n128k16_rs<1>(acc, a, sw128_desc(b_base + kk * 16 * 128, kRpVPanel, 1024));
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (pending >= 0) release(empty2, pending);
      pending = v;
    }
    wgmma_wait<0>();
    reg_fence<64>(acc);
    release(empty2, pending);
    store_o_chunk<T, kRpDvChunk / 32>(acc, inv_l[0], inv_l[1], o + (int64_t)row_glob * p.o_ss + dc * kRpDvChunk,
                                      p.o_ss, row_glob < p.Sq, row_glob + 8 < p.Sq, p.Dv - dc * kRpDvChunk, t);
  }
}

}  // namespace kforge_attn
