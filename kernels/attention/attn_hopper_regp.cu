// Fused attention forward for Hopper (sm_90a: wgmma + TMA) with P held in registers, for S_k <= 512 (with the
// keys split over two CTAs, S_k <= 1024) and large head dims (the seed shape: S=512, D=1024). Exact softmax
// over the whole key row:
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
// saturated. Here all shared memory is the load ring. The price is registers (P 128 + O 64 per thread in
// phase 2) and O in 128-wide chunks instead of 256.
//
// The ring is 27 granules of 8 KB. Every load item takes consecutive granules (a phase-1 item 3: Q chunk
// 8 KB + K chunk 16 KB, 64B swizzle; a V tile 2: [64 keys x 128], 128B swizzle), wrapping to granule 0
// when the next item does not fit; each granule has a "full" and an "empty" mbarrier. An item waits only
// for the granules it covers, so a V tile follows the phase-1 item whose bytes it reuses as soon as that
// item is consumed (no phase-wide handover between the two layouts).
//
// One CTA per 128-row query tile, in launch order: tiles of one head run side by side and share K/V in
// L2. (With one CTA per SM walking tiles i, i+132, ... the CTAs drift apart, the tiles of a head stop
// running together, and K/V come from HBM again: NOTES.md.)
//
// Split keys (KSPLIT = 2, for 512 < S_k <= 1024, where P of a whole row no longer fits in registers): the
// two CTAs of a cluster take the same 128 query rows and one half of the keys each, so each holds P of at
// most 512 keys. Each CTA's O chunk is then a partial sum under its own row max: the pair swaps softmax
// statistics once (m, l per row, into the peer's shared memory) and every 128-wide output chunk is finished
// by one CTA of the pair, which receives the other's partial (64 KB of fp32, written with st.async straight
// into a ring item of the owner) and adds it to its own. Each CTA first computes a chunk it sends, then one
// it owns, so the partial it needs was sent a whole chunk earlier.
//
// Roles as in attn_hopper.cu: two consumer warpgroups x 64 query rows, one producer warpgroup whose single
// issuing thread runs the TMA loads ("full" barriers complete on bytes; each consumer warp arrives on the
// "empty" barriers of an item's granules once the MMAs reading it retired), registers moved to the
// consumers by setmaxnreg.
#include "attn_common.cuh"
#include "attn_wgmma.cuh"
#include "attn_epilogue.cuh"
#include <cuda.h>  // CUtensorMap

namespace kforge_attn {

constexpr int kRpRows = 128;          // query rows per CTA: 2 consumer warpgroups x 64
constexpr int kRpKeyBlock = 256;      // keys per QK^T block: one m64n256 accumulator
constexpr int kRpMaxBlocks = 2;       // P of two blocks = 128 registers per thread
constexpr int kRpMaxKeys = kRpMaxBlocks * kRpKeyBlock;
constexpr int kRpQkChunk = 32;        // head-dim columns per phase-1 stage (64-byte rows, 64B swizzle)
constexpr int kRpDvChunk = 128;       // output columns per P.V pass: one m64n128 accumulator
constexpr int kRpKeyTile = 64;        // keys per V tile
constexpr int kRpGranule = 8192;
constexpr int kRpGranules = 27;  // 216 KB
constexpr int kRpQBytes = kRpRows * kRpQkChunk * 2;                     // 1 granule
constexpr int kRpStage1 = kRpQBytes + kRpKeyBlock * kRpQkChunk * 2;     // 3 granules
constexpr int kRpVPanel = kRpKeyTile * 128;                            // [64 keys x 64 cols], 128B swizzle
constexpr int kRpVTile = (kRpDvChunk / 64) * kRpVPanel;                // 2 granules
constexpr int kRpItem1 = kRpStage1 / kRpGranule;
constexpr int kRpItem2 = kRpVTile / kRpGranule;
constexpr int kRpPartialBytes = 256 * (kRpDvChunk / 2) * 4;   // split keys: a partial O chunk, fp32, all consumers
constexpr int kRpItemPartial = kRpPartialBytes / kRpGranule;   // 8 granules
static_assert(kRpItem1 * kRpGranule == kRpStage1 && kRpItem2 * kRpGranule == kRpVTile, "items are whole granules");
static_assert(kRpGranules <= 32, "per-granule phase bits live in one 32-bit word");
constexpr int kRpRingBytes = kRpGranules * kRpGranule;
constexpr int kRpConsumerThreads = 256;
constexpr int kRpThreads = kRpConsumerThreads + 128;
constexpr int kRpProducerRegs = 24;
constexpr int kRpConsumerRegs = 240;  // 2*128*240 + 128*24 <= 65536; at 232 phase 2 spills
constexpr int kRpAlignSlack = 1024;   // swizzle atoms start on 1024-byte boundaries
constexpr int kRpStatsBytes = kRpRows * 8;  // split keys: the peer's (m, l) per query row
constexpr int kRpConsumerWarps = kRpConsumerThreads / 32;
constexpr int kRpStageBytes = kRpConsumerWarps * kStageBytesPerWarp;  // O epilogue, store_o_chunk_staged
constexpr int kRpSmemBytes = kRpAlignSlack + kRpRingBytes + kRpStatsBytes + kRpStageBytes + (2 * kRpGranules + 4) * 8;
// V tiles warpgroup 0 issues in its first output chunk before warpgroup 1 starts (multicast kernel; the split
// kernel starts both at once): see accumulate_chunk.
constexpr int kPhase2Lag = 4;
constexpr int kLagBarrier = 3;  // named barrier id (0: __syncthreads)

// Where the next item goes; producer and consumers walk the same item sequence, so they agree. `bits`
// holds, per granule, the parity of the barrier phase this side waits for next.
struct GranuleRing {
  int pos;
  uint32_t bits;
  __device__ __forceinline__ int place(int granules) {
    if (pos + granules > kRpGranules) pos = 0;
    const int at = pos;
    pos += granules;
    return at;
  }
  __device__ __forceinline__ uint32_t take_parity(int granule) {
    const uint32_t parity = (bits >> granule) & 1u;
    bits ^= 1u << granule;
    return parity;
  }
};

// The tile a CTA works on: query rows m0.., head h, batch b, its keys [key0, key_end) and its load counts.
// The CTAs of a cluster fill each other's slots (multicast) or each other's exchange items (split keys), so
// they walk one item sequence: with multicast the causal key range is that of the cluster's last query tile,
// with split keys both halves are walked at the length of the first (the extra keys are masked anyway).
template <int CLUSTER, int KSPLIT>
struct RpTile {
  int m0, h, hkv, b, n_kb, n_kt, key0, key_end;  // hkv: the K/V head of query head h
  __device__ __forceinline__ explicit RpTile(const AttnParams& p) {
    h = blockIdx.y;
    hkv = h / p.kv_group;
    b = blockIdx.z;
    int keys;
    if (KSPLIT == 1) {
      m0 = blockIdx.x * kRpRows;
      const int m_cluster_end = (blockIdx.x / CLUSTER * CLUSTER + CLUSTER) * kRpRows;
      key0 = 0;
      key_end = p.causal ? min(p.Sk, m_cluster_end) : p.Sk;
      keys = key_end;
    } else {
      // Causal: the pair splits the keys its rows see (up to its last row), so both halves hold work.
      m0 = blockIdx.x / KSPLIT * kRpRows;
      const int visible = p.causal ? min(p.Sk, m0 + kRpRows) : p.Sk;
      // Whole V tiles per half, so no tile straddles the two CTAs' ranges.
      keys = ((visible + 1) / 2 + kRpKeyTile - 1) / kRpKeyTile * kRpKeyTile;
      key0 = (blockIdx.x % KSPLIT) * keys;
      key_end = min(visible, key0 + keys);
    }
    n_kb = (keys + kRpKeyBlock - 1) / kRpKeyBlock;
    n_kt = (keys + kRpKeyTile - 1) / kRpKeyTile;
  }
};

// Shared-memory objects beyond the load ring.
struct RpBarriers {
  uint64_t* full;        // per granule: its bytes landed
  uint64_t* empty;       // per granule: every consumer warp (of every CTA it was multicast to) is done with it
  uint64_t* done;        // multicast: the peer's consumer warps are finished
  uint64_t* stats_full;  // split keys: the peer's (m, l) rows landed in `stats`
  uint64_t* peer_ready;  // split keys: the peer's producer has claimed the item our next partial goes to
  uint64_t* partial_read;  // split keys: every consumer warp has added the last partial it received
  float2* stats;         // split keys: (m, l) of the peer per query row of the tile
};

// Which output chunk a split-key CTA computes at step `half` (0: one it sends, 1: one it owns) of pair
// `pair`: chunk c is finished by CTA c % 2.
__device__ __forceinline__ int split_chunk(int pair, int half, uint32_t rank) {
  return 2 * pair + (half == 0 ? 1 - (int)rank : (int)rank);
}

template <typename T, int CLUSTER, int KSPLIT>
__device__ __forceinline__ void consume_tile(const AttnParams& p, const RpTile<CLUSTER, KSPLIT>& tile,
                                             unsigned char* ring, const RpBarriers& bar, GranuleRing& st, int n_c,
                                             int n_dc);

// CLUSTER = 2: the two CTAs of a cluster (adjacent query tiles of one head) each load half of every K chunk
// and V tile and multicast it to both, so each CTA reads 40% fewer bytes through L2; an item's granules are
// reused only after the consumer warps of both CTAs released them.
// KSPLIT = 2: the two CTAs of a cluster split the keys of one query tile (header comment).
template <typename T, int CLUSTER, int KSPLIT>
__global__ void __cluster_dims__(CLUSTER * KSPLIT, 1, 1) __launch_bounds__(kRpThreads, 1)
    attn_hopper_regp_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ CUtensorMap tm_q,
                            const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v) {
  static_assert(kRpSmemBytes <= 232448, "shared memory budget of one H100 SM exceeded");
  static_assert((CLUSTER == 2 && KSPLIT == 1) || (CLUSTER == 1 && KSPLIT == 2),
                "written for K/V multicast over 2 CTAs or keys split over 2 CTAs, not both");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  RpBarriers bar;
  bar.stats = reinterpret_cast<float2*>(ring + kRpRingBytes);
  // (then the O epilogue's stage, kRpStageBytes: see consume_tile's `stage`)
  bar.full = reinterpret_cast<uint64_t*>(ring + kRpRingBytes + kRpStatsBytes + kRpStageBytes);
  bar.empty = bar.full + kRpGranules;
  bar.done = bar.empty + kRpGranules;
  bar.stats_full = bar.done + 1;
  bar.peer_ready = bar.stats_full + 1;
  bar.partial_read = bar.peer_ready + 1;

  const int tid = threadIdx.x;
  const int n_c = (p.Dqk + kRpQkChunk - 1) / kRpQkChunk;
  const int n_dc = (p.Dv + kRpDvChunk - 1) / kRpDvChunk;
  const RpTile<CLUSTER, KSPLIT> tile(p);
  const uint32_t rank = cluster_ctarank();
  constexpr uint16_t kAllCtas = (1u << CLUSTER) - 1;
  constexpr int kKRows = kRpKeyBlock / CLUSTER, kVRows = kRpKeyTile / CLUSTER;  // rows this CTA loads

  if (tid == 0) {
    for (int q = 0; q < kRpGranules; ++q) mbar_init(&bar.full[q], 1), mbar_init(&bar.empty[q], CLUSTER * kRpConsumerWarps);
    mbar_init(bar.done, CLUSTER > 1 ? (CLUSTER - 1) * kRpConsumerWarps : 1);
    mbar_init(bar.stats_full, 1);
    mbar_init(bar.peer_ready, 1);
    mbar_init(bar.partial_read, kRpConsumerWarps);
    // The peer's statistics complete this phase with their bytes alone.
    if (KSPLIT > 1) mbar_arrive_expect_tx(bar.stats_full, kRpStatsBytes);
    fence_mbar_init();
  }
  cluster_sync();  // peers write into this CTA and arrive on its barriers only once they exist

  if (tid >= kRpConsumerThreads) {
    // ---------------- producer warpgroup: one thread issues every load ----------------
    setmaxnreg_dec<kRpProducerRegs>();
    if (tid == kRpConsumerThreads) {
      // A fresh barrier counts as having completed the phase before its first: the first wait on every
      // "empty" barrier (parity 1) passes.
      GranuleRing st{0, ~0u};
      auto claim = [&](int granules) {
        const int at = st.place(granules);
        for (int q = at; q < at + granules; ++q) mbar_wait(&bar.empty[q], st.take_parity(q));
        mbar_arrive_expect_tx(&bar.full[at], granules * kRpGranule);
        return at;
      };
      auto load_v_chunk = [&](int dc) {  // the V tiles of output columns dc, this CTA's keys
        for (int kt = 0; kt < tile.n_kt; ++kt) {
          const int at = claim(kRpItem2);
#pragma unroll
          for (int pp = 0; pp < kRpDvChunk / 64; ++pp) {
            unsigned char* panel = ring + at * kRpGranule + pp * kRpVPanel;
            const int key = tile.key0 + kt * kRpKeyTile;
            if (CLUSTER == 1) {
              tma_load_4d(panel, &tm_v, &bar.full[at], dc * kRpDvChunk + pp * 64, key, tile.hkv, tile.b);
            } else {
              tma_load_4d_multicast(panel + rank * kVRows * 128, &tm_v, &bar.full[at], dc * kRpDvChunk + pp * 64,
                                    key + rank * kVRows, tile.hkv, tile.b, kAllCtas);
            }
          }
        }
      };
      for (int i = 0; i < tile.n_kb * n_c; ++i) {  // Q chunk c + K block kb chunk c
        const int at = claim(kRpItem1);
        // Odd key blocks walk the head dim backwards: the Q chunks loaded last are re-read first, while
        // they are still in L2.
        const int kb = i / n_c, c = (kb & 1) ? n_c - 1 - i % n_c : i % n_c;
        unsigned char* slot = ring + at * kRpGranule;
        const int key = tile.key0 + kb * kRpKeyBlock;
        tma_load_4d(slot, &tm_q, &bar.full[at], c * kRpQkChunk, tile.m0, tile.h, tile.b);
        if (CLUSTER == 1) {
          tma_load_4d(slot + kRpQBytes, &tm_k, &bar.full[at], c * kRpQkChunk, key, tile.hkv, tile.b);
        } else {
          tma_load_4d_multicast(slot + kRpQBytes + rank * kKRows * kRpQkChunk * 2, &tm_k, &bar.full[at],
                                c * kRpQkChunk, key + rank * kKRows, tile.hkv, tile.b, kAllCtas);
        }
      }
      if (KSPLIT == 1) {
        for (int dc = 0; dc < n_dc; ++dc) load_v_chunk(dc);
      } else {
        for (int pair = 0; 2 * pair < n_dc; ++pair) {
          for (int half = 0; half < 2; ++half) {
            const int dc = split_chunk(pair, half, rank);
            if (dc >= n_dc) continue;
            // The chunk this CTA finishes: first claim the item the peer's partial lands in, then tell the
            // peer; its bytes complete the item's barrier like a load's. Claimed before this chunk's V tiles
            // (after them, the claim could wait for granules those tiles hold, whose consumers come after the
            // send the peer is waiting for: a deadlock). Not before the previous partial
            // was read: that read needed every peer thread's stores, each made after it saw the previous
            // "ready", so no peer thread can miss a phase of `peer_ready`.
            if (half == 1) {
              claim(kRpItemPartial);
              if (pair > 0) mbar_wait(bar.partial_read, (pair - 1) & 1);
              mbar_arrive_cluster(bar.peer_ready, rank ^ 1u);
            }
            load_v_chunk(dc);
          }
        }
      }
    }
  } else {
    setmaxnreg_inc<kRpConsumerRegs>();
    GranuleRing st{0, 0u};
    consume_tile<T, CLUSTER, KSPLIT>(p, tile, ring, bar, st, n_c, n_dc);
    // No CTA may leave while its peer's consumers can still arrive on its barriers: each consumer warp says
    // so on the peer's `done` barrier once its last arrive there is made, and waits for the peer's word.
    // (Not a cluster barrier: one in the producer's branch spills registers in both roles, and a producer
    // that arrives early and exits hangs the cluster.) The producer's loads into the peer complete on
    // barriers the peer's consumers wait for before they get here. Split keys need no handshake: every
    // write into a CTA and every arrive on its barriers is one that CTA waits for before it finishes.
    if (CLUSTER > 1) {
      if (tid % 32 == 0) {
        for (uint32_t r = 1; r < CLUSTER; ++r) mbar_arrive_cluster(bar.done, (cluster_ctarank() + r) % CLUSTER);
      }
      mbar_wait(bar.done, 0);
    }
  }
}

// Consumer warpgroups: everything but the loads.
template <typename T, int CLUSTER, int KSPLIT>
__device__ __forceinline__ void consume_tile(const AttnParams& p, const RpTile<CLUSTER, KSPLIT>& tile,
                                             unsigned char* ring, const RpBarriers& bar, GranuleRing& st, int n_c,
                                             int n_dc) {
  const int tid = threadIdx.x;
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int m0 = tile.m0, n_kb = tile.n_kb, n_kt = tile.n_kt;
  const int row_tile = wg * 64 + warp * 16 + g;  // and row_tile + 8
  const int row_glob = m0 + row_tile;
  // This warp's O staging area, computed where used (a register holding it through phase 1 spills).
  auto stage = [&]() { return smem_u32(ring) + kRpRingBytes + kRpStatsBytes + (threadIdx.x / 32) * kStageBytesPerWarp; };
  T* o = static_cast<T*>(p.o) + tile.b * p.o_sb + tile.h * p.o_sh;
  const uint32_t peer = cluster_ctarank() ^ 1u;  // split keys: the other half
  const uint32_t rank = cluster_ctarank();
  // Waits for the next item's bytes; returns its first granule.
  auto acquire = [&](int granules) {
    const int at = st.place(granules);
    mbar_wait(&bar.full[at], st.take_parity(at));
    return at;
  };
  // This warp's reads of an item are over once the MMA group that used it retired.
  auto release = [&](int at, int granules) {
    if (lane == 0) {
      for (int q = at; q < at + granules; ++q) {
        mbar_arrive(&bar.empty[q]);
        for (uint32_t r = 1; r < CLUSTER; ++r) mbar_arrive_cluster(&bar.empty[q], (rank + r) % CLUSTER);
      }
    }
  };

  float acc[128];                 // phase 1: S (m64n256); phase 2: O (m64n128, the first 64)
  uint32_t pr[kRpMaxBlocks][64];  // P_kb as wgmma A fragments: [4 kk + {0,1,2,3}] for key step kk
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  float ratio[2] = {1.f, 1.f};  // exp2(m_0 - m_1) per row

  // ---------------- phase 1: S_kb = Q K_kb^T over Dqk chunks; softmax statistics; P_kb -> registers -------
#pragma unroll
  for (int kb = 0; kb < kRpMaxBlocks; ++kb) {
    if (kb >= n_kb) {
      // Defined on every path, though never read: left undefined, ptxas keeps registers for it through
      // QK^T and spills.
#pragma unroll
      for (int e = 0; e < 64; ++e) pr[kb][e] = 0u;
      continue;
    }
#pragma unroll
    for (int e = 0; e < 128; ++e) acc[e] = 0.f;
    int pending = -1;  // item whose MMA group may still be in flight
    for (int c = 0; c < n_c; ++c) {
      const int at = acquire(kRpItem1);
      const unsigned char* slot = ring + at * kRpGranule;
      const uint32_t a_base = smem_u32(slot + wg * 64 * kRpQkChunk * 2);
      const uint32_t b_base = smem_u32(slot + kRpQBytes);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kRpQkChunk / 16; ++kk) {
        Wgmma<T>::template m64n256k16<0>(acc, sw64_desc(a_base + kk * 32, 512), sw64_desc(b_base + kk * 32, 512));
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous chunk's group retired: its slot can be refilled
      if (pending >= 0) release(pending, kRpItem1);
      pending = at;
    }
    wgmma_wait<0>();
    reg_fence(acc);
    release(pending, kRpItem1);

    // Masking is needed only in a block that reaches past this CTA's keys or crosses the causal diagonal.
    const int key0 = tile.key0 + kb * kRpKeyBlock;
    const bool need_mask = key0 + kRpKeyBlock > tile.key_end || (p.causal && key0 + kRpKeyBlock - 1 > m0);
    // Softmax of the block on the raw S (the scale, > 0 on this path, goes into exp2's FFMA), the mask applied
    // first behind a uniform branch. With the mask merged into the per-element code under a run-time flag,
    // ptxas if-converts it: a third of the block's ~1900 softmax instructions become predicates and selects
    // for a mask not in force.
    if (need_mask) mask_block(acc, key0 + 2 * t, tile.key_end, p.causal, row_glob);
    // The split kernel scales S in place while taking the max (with the scale folded into the FFMA it spills
    // 12-16 bytes at its register limit); the multicast kernel keeps S raw.
    float mx[2];
    rowmax_unmasked<KSPLIT == 2>(acc, p.scale_log2, mx);
    float m_use[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
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
    // exp2's argument: the scaled scores less the max (KSPLIT == 2: both rounded, so <= 0) or the raw scores through
    // one FFMA against the max rounded down (exp2_arg_ffma).
    auto arg = [&](float s, float m) { return KSPLIT == 2 ? s - m : exp2_arg_ffma(s, p.scale_log2, m); };
#pragma unroll
    for (int jn = 0; jn < 32; ++jn) {
      const float p0 = fast_exp2(arg(acc[4 * jn + 0], m_use[0]));
      const float p1 = fast_exp2(arg(acc[4 * jn + 1], m_use[0]));
      const float p2 = fast_exp2(arg(acc[4 * jn + 2], m_use[1]));
      const float p3 = fast_exp2(arg(acc[4 * jn + 3], m_use[1]));
      l_run[0] += p0 + p1;
      l_run[1] += p2 + p3;
      pr[kb][2 * jn] = Pack2<T>::from_floats(p0, p1);
      pr[kb][2 * jn + 1] = Pack2<T>::from_floats(p2, p3);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  // The factor that turns this CTA's sum over its keys into its share of O: 1 / l, or with split keys
  // exp2(m_self - m) / (l_self exp2(m_self - m) + l_peer exp2(m_peer - m)), m the larger max (its rows'
  // statistics are the peer's, received once both CTAs finished phase 1).
  float o_scale[2];
  if (KSPLIT > 1) {
    if (t == 0) {
      const uint32_t remote_stats = mapa_u32(smem_u32(bar.stats), peer);
      const uint32_t remote_bar = mapa_u32(smem_u32(bar.stats_full), peer);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        st_async_v2(remote_stats + (row_tile + 8 * r) * 8, m_run[r], l_run[r], remote_bar);
      }
    }
  } else {
#pragma unroll
    for (int r = 0; r < 2; ++r) o_scale[r] = l_run[r] > 0.f ? 1.f / l_run[r] : 0.f;
  }
  // Split keys: the peer's statistics are waited for only once the first output chunk's MMAs are done, so
  // that a peer still in phase 1 does not hold up this CTA's phase 2.
  auto combine_stats = [&]() {
    mbar_wait(bar.stats_full, 0);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float2 other = bar.stats[row_tile + 8 * r];
      const float m = fmaxf(m_run[r], other.x);  // -inf only for a row with no visible key in either half
      const float a_self = m_run[r] == -INFINITY ? 0.f : exp2f(m_run[r] - m);
      const float a_other = other.x == -INFINITY ? 0.f : exp2f(other.x - m);
      const float l = a_self * l_run[r] + a_other * other.y;
      o_scale[r] = l > 0.f ? a_self / l : 0.f;
      // The tile's indices are read again (store_row_lse_here): kept live for this through phase 2, they spill.
      if (t == 0 && rank == 0 && p.lse != nullptr) {
        store_row_lse_here(p, kRpRows, (int)special_reg_ctaid_x() / KSPLIT, r, m, l);
      }
    }
  };

  // ---------------- phase 2: O_dc = sum over key tiles of P_kt V_kt[:, dc] ----------------
  constexpr int kTilesPerBlock = kRpKeyBlock / kRpKeyTile;
  // Leaves this CTA's unnormalised sum for output columns dc in acc[0..63]. In the first chunk warpgroup 1
  // starts only once warpgroup 0 has issued kPhase2Lag tiles, so that from then on one warpgroup's
  // epilogue falls under the other's MMAs.
  constexpr int kLag = KSPLIT == 1 ? kPhase2Lag : 0;
  auto accumulate_chunk = [&](bool first) {
    if (kLag > 0 && first && wg == 1) named_bar_sync(kLagBarrier, kRpConsumerThreads);
#pragma unroll
    for (int e = 0; e < 64; ++e) acc[e] = 0.f;
    int pending = -1;
    // Unrolled: P is indexed by the tile, and registers cannot be indexed at run time.
#pragma unroll
    for (int kt = 0; kt < kRpMaxKeys / kRpKeyTile; ++kt) {
      if (kt >= n_kt) break;
      if (kt == kTilesPerBlock) {
        // Entering key block 1: bring the sum so far from max m_0 to m_1 (MMAs drained first).
        wgmma_wait<0>();
        reg_fence<64>(acc);
        release(pending, kRpItem2);
        pending = -1;
#pragma unroll
        for (int e = 0; e < 64; ++e) acc[e] *= ratio[(e >> 1) & 1];
      }
      const int at = acquire(kRpItem2);
      const uint32_t b_base = smem_u32(ring + at * kRpGranule);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kRpKeyTile / 16; ++kk) {
        // A = P (registers), B = V tile (N-major: head dim contiguous), 16 keys per step.
        const uint32_t* a = &pr[kt / kTilesPerBlock][(kt % kTilesPerBlock) * 16 + kk * 4];
        Wgmma<T>::template m64n128k16_rs<1>(acc, a, sw128_desc(b_base + kk * 16 * 128, kRpVPanel, 1024));
      }
      wgmma_commit();
      if (kLag > 0 && first && wg == 0 && kt == min(kLag, n_kt) - 1) {
        named_bar_arrive(kLagBarrier, kRpConsumerThreads);
      }
      wgmma_wait<1>();
      if (pending >= 0) release(pending, kRpItem2);
      pending = at;
    }
    wgmma_wait<0>();
    reg_fence<64>(acc);
    release(pending, kRpItem2);
  };
  auto store_chunk = [&](int dc, float s0, float s1) {
    store_o_chunk_staged<T, kRpDvChunk / 32>(acc, s0, s1, o + (int64_t)row_glob * p.o_ss + dc * kRpDvChunk, p.o_ss,
                                             row_glob < p.Sq, row_glob + 8 < p.Sq, p.Dv - dc * kRpDvChunk, stage(), lane);
  };

  if (KSPLIT == 1) {
    for (int dc = 0; dc < n_dc; ++dc) {
      accumulate_chunk(dc == 0);
      store_chunk(dc, o_scale[0], o_scale[1]);
    }
    return;
  }
  // Split keys. A partial travels as 16-byte vectors, vector j of consumer thread tid at (j * 256 + tid) * 16:
  // a warp's stores and loads each cover 512 contiguous bytes (no bank conflicts).
  uint32_t ready_parity = 0;
  bool first = true;
  for (int pair = 0; 2 * pair < n_dc; ++pair) {
    const GranuleRing pair_start = st;
    const bool own_exists = split_chunk(pair, 1, peer ^ 1u) < n_dc;
#pragma unroll 1
    for (int half = 0; half < 2; ++half) {
      const int dc = split_chunk(pair, half, peer ^ 1u);
      if (dc >= n_dc) continue;
      int partial_at = 0;
      uint32_t partial_parity = 0;
      if (half == 1) {  // the partial's item comes before this chunk's V tiles (producer)
        partial_at = st.place(kRpItemPartial);
        partial_parity = st.take_parity(partial_at);
      }
      accumulate_chunk(first);
      if (first) combine_stats();
      first = false;
      if (half == 0) {
#pragma unroll
        for (int e = 0; e < 64; ++e) acc[e] *= o_scale[(e >> 1) & 1];
        // Where the peer's item for this partial is: the peer walked the same item sequence up to this pair;
        // in it, the item follows the V tiles of the chunk the peer sends (the one this CTA owns), if any.
        GranuleRing peer_st = own_exists ? st : pair_start;
        const int at = peer_st.place(kRpItemPartial);
        mbar_wait(bar.peer_ready, ready_parity);
        ready_parity ^= 1u;
        const uint32_t dst = mapa_u32(smem_u32(ring + at * kRpGranule) + tid * 16, peer);
        const uint32_t dst_bar = mapa_u32(smem_u32(&bar.full[at]), peer);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          st_async_v4(dst + j * 256 * 16, acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3], dst_bar);
        }
      } else {
        mbar_wait(&bar.full[partial_at], partial_parity);
        store_o_chunk_staged<T, kRpDvChunk / 32, true>(
            acc, o_scale[0], o_scale[1], o + (int64_t)row_glob * p.o_ss + dc * kRpDvChunk, p.o_ss, row_glob < p.Sq,
            row_glob + 8 < p.Sq, p.Dv - dc * kRpDvChunk, stage(), lane, smem_u32(ring + partial_at * kRpGranule) + tid * 16);
        __syncwarp();
        release(partial_at, kRpItemPartial);
        if (lane == 0) mbar_arrive(bar.partial_read);
      }
    }
  }
}

}  // namespace kforge_attn
