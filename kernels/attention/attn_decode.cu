// Attention for few query rows against many keys (decode: S_q of 1-16 per head, S_k unbounded), with grouped
// K/V heads (GQA: query head h reads K/V head h / kv_group). Split-key ("flash-decoding"): the keys of each
// K/V head are cut into splits, one CTA per (batch, K/V head, 16-row query tile, split) computes its split's
// softmax partial (row max m, row sum l, unnormalised O in fp32), and attn_decode_combine merges the splits.
//
// Why this shape of kernel: with 16 query rows the work per key is 2 x 16 FLOP per head-dim element, far below
// what the tensor cores need to stay busy; the kernel is a stream of K and V from HBM, so what it needs is bytes
// in flight on every SM (enough CTAs: the splits) and each K/V byte read once per group of query heads (the
// query tile holds the rows of all heads of a group: rows r = head-in-group * S_q + query).
//
// Per CTA: 8 warps (a memory-bound kernel wants many warps per SM: 2 CTAs of 8 where the stages fit); the query tile [16 rows x Dqk] stays in shared memory; keys stream in stages of BN keys (K
// rows and V rows, cp.async, zero-filled past the split and past the head dims) through a ring of n_stages.
// Per stage: S = Q K^T with the head dim split over the warps (warp w takes 64-wide panels w, w + 8, ...), the
// partial S summed through shared memory; every warp then holds the whole S block and runs the same online
// softmax (identical statistics in every warp, no exchange); O += P V with the output columns split over the
// warps (warp w owns 16-wide column pairs w, w + 8, ...).
#include "attn_common.cuh"

namespace kforge_attn {

constexpr int kDecRows = 16;  // query rows per CTA: one m16 tile
constexpr int kDecWarps = 8;
constexpr int kDecThreads = 32 * kDecWarps;
// 16-wide output column pairs per warp: MAX_PAIRS = 4 takes Dv <= 512 in 128 registers, so that two CTAs share an
// SM; 8 takes Dv <= 1024 (and, with its stages, one CTA an SM anyway).
__host__ __device__ constexpr int dec_max_pairs(int dv) { return dv <= 16 * 4 * kDecWarps ? 4 : 8; }

// Where a CTA's work lies, and the scratch the combine kernel reads.
struct DecodeParams {
  int row_tiles;      // ceil(kv_group * Sq / 16)
  int n_splits;       // splits of the key range per (batch, K/V head, row tile)
  int keys_per_split; // a multiple of BN
  int n_stages;       // ring depth (2-4), chosen by the host (attention.cu's decode_config)
  float* part_o;      // [B * H * Sq][n_splits][Dv] unnormalised O of each split (n_splits > 1)
  float2* part_ml;    // [B * H * Sq][n_splits] (row max in log2 units, row sum) of each split
};

__host__ __device__ inline int dec_panels(int d) { return (d + 63) / 64; }
template <int BN>
__host__ __device__ inline int dec_stage_bytes(int dqk, int dv) {
  return (dec_panels(dqk) + dec_panels(dv)) * BN * 128;
}
template <int BN>
__host__ __device__ inline int dec_smem_bytes(int dqk, int dv, int n_stages) {
  return dec_panels(dqk) * kDecRows * 128 + n_stages * dec_stage_bytes<BN>(dqk, dv) +
         kDecWarps * kDecRows * BN * (int)sizeof(float);
}

template <int N>
__device__ __forceinline__ void cp_async_wait_upto(int n) {
  // cp.async.wait_group takes an immediate: the ring depth is a run-time value, so branch to the constant.
  if (n >= N) cp_async_wait<N>();
  else if constexpr (N > 0) cp_async_wait_upto<N - 1>(n);
}

template <typename T, int BN, int MAX_PAIRS>
__global__ void __launch_bounds__(kDecThreads, MAX_PAIRS <= 4 ? 2 : 1)
    attn_decode_kernel(const __grid_constant__ AttnParams p, const __grid_constant__ DecodeParams d) {
  static_assert(BN % 16 == 0 && BN <= 32, "a stage is whole 16-key steps of P V (and 64 keys spill)");
  constexpr int NT = BN / 8;  // n8 tiles of S per stage
  extern __shared__ __align__(128) unsigned char smem[];
  const int q_panels = dec_panels(p.Dqk), v_panels = dec_panels(p.Dv);
  const int stage_bytes = dec_stage_bytes<BN>(p.Dqk, p.Dv);
  unsigned char* sQ = smem;
  unsigned char* sRing = sQ + q_panels * kDecRows * 128;
  float* sS = reinterpret_cast<float*>(sRing + d.n_stages * stage_bytes);  // [warp][row][key] partial S

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int split = blockIdx.x % d.n_splits, row_tile = blockIdx.x / d.n_splits;
  const int hkv = blockIdx.y, b = blockIdx.z;
  const int group_rows = p.kv_group * p.Sq;
  const int key0 = split * d.keys_per_split;
  const int key_end = min(p.Sk, key0 + d.keys_per_split);

  // Row r of the tile is query qi of head hkv * kv_group + gi (gr = gi * Sq + qi); rows past the group are padding.
  auto row_head = [&](int r) { return hkv * p.kv_group + (row_tile * kDecRows + r) / p.Sq; };
  auto row_query = [&](int r) { return (row_tile * kDecRows + r) % p.Sq; };
  auto row_valid = [&](int r) { return row_tile * kDecRows + r < group_rows; };

  const T* k = static_cast<const T*>(p.k) + b * p.k_sb + hkv * p.k_sh;
  const T* v = static_cast<const T*>(p.v) + b * p.v_sb + hkv * p.v_sh;

  // Copies: thread tid always moves 16-byte chunk tid % 8 of a 128-byte panel row (no divisions per copy).
  const int chunk = tid % 8;
  for (int i = tid / 8; i < kDecRows * q_panels; i += kDecThreads / 8) {
    const int c = i / kDecRows, r = i % kDecRows;
    const bool ok = row_valid(r) && c * 64 + chunk * 8 < p.Dqk;
    const T* src = ok ? static_cast<const T*>(p.q) + b * p.q_sb + row_head(r) * p.q_sh +
                            (int64_t)row_query(r) * p.q_ss + c * 64 + chunk * 8
                      : static_cast<const T*>(p.q);
    cp_async_16(smem_u32(sQ + c * kDecRows * 128 + swz128(r, chunk)), src, ok);
  }
  cp_async_commit();

  const int n_blocks = key_end > key0 ? (key_end - key0 + BN - 1) / BN : 0;
  auto load_stage = [&](int blk) {
    unsigned char* sK = sRing + (blk % d.n_stages) * stage_bytes;
    unsigned char* sV = sK + q_panels * BN * 128;
    const int n0 = key0 + blk * BN;
    for (int i = tid / 8; i < BN * q_panels; i += kDecThreads / 8) {
      const int c = i / BN, r = i % BN;
      const bool ok = n0 + r < key_end && c * 64 + chunk * 8 < p.Dqk;
      const T* src = ok ? k + (int64_t)(n0 + r) * p.k_ss + c * 64 + chunk * 8 : k;
      cp_async_16(smem_u32(sK + c * BN * 128 + swz128(r, chunk)), src, ok);
    }
    for (int i = tid / 8; i < BN * v_panels; i += kDecThreads / 8) {
      const int c = i / BN, r = i % BN;
      const bool ok = n0 + r < key_end && c * 64 + chunk * 8 < p.Dv;
      const T* src = ok ? v + (int64_t)(n0 + r) * p.v_ss + c * 64 + chunk * 8 : v;
      cp_async_16(smem_u32(sV + c * BN * 128 + swz128(r, chunk)), src, ok);
    }
  };
  // The ring's first n_stages - 1 stages (empty commit groups past the last block keep the group count uniform).
  for (int s = 0; s < d.n_stages - 1; ++s) {
    if (s < n_blocks) load_stage(s);
    cp_async_commit();
  }

  // This warp's output column pairs: w, w + 8, ... (interleaved, so narrow head dims still use every warp).
  const int n_pairs = (p.Dv + 15) / 16;
  float acc_o[MAX_PAIRS][2][4];
#pragma unroll
  for (int i = 0; i < MAX_PAIRS; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) acc_o[i][j][0] = acc_o[i][j][1] = acc_o[i][j][2] = acc_o[i][j][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};  // this thread's partial row sums (its keys of each stage); quad-reduced at the end
  const int q_row[2] = {row_query(g), row_query(g + 8)};

  for (int blk = 0; blk < n_blocks; ++blk) {
    cp_async_wait_upto<2>(d.n_stages - 2);  // this block's stage (and the query tile) have landed
    __syncthreads();  // ... for every thread, and every warp is done with the stage the next load overwrites
    if (blk + d.n_stages - 1 < n_blocks) load_stage(blk + d.n_stages - 1);
    cp_async_commit();
    const unsigned char* sK = sRing + (blk % d.n_stages) * stage_bytes;
    const unsigned char* sV = sK + q_panels * BN * 128;

    // Partial S over this warp's head-dim panels.
    float s[NT][4];
#pragma unroll
    for (int i = 0; i < NT; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
    for (int c = warp; c < q_panels; c += kDecWarps) {
      const unsigned char* qc = sQ + c * kDecRows * 128;
      const unsigned char* kc = sK + c * BN * 128;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        uint32_t a[4];
        ldmatrix_x4(smem_u32(qc + swz128(lane % 16, kk * 2 + lane / 16)), a[0], a[1], a[2], a[3]);
#pragma unroll
        for (int pr = 0; pr < NT / 2; ++pr) {
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4(smem_u32(kc + swz128(pr * 16 + (lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2)), b0, b1,
                      b2, b3);
          Mma16816<T>::run(s[2 * pr], a, b0, b1);
          Mma16816<T>::run(s[2 * pr + 1], a, b2, b3);
        }
      }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        *reinterpret_cast<float2*>(sS + (warp * kDecRows + g + 8 * r) * BN + nt * 8 + 2 * t) =
            make_float2(s[nt][2 * r], s[nt][2 * r + 1]);
      }
    }
    __syncthreads();
    // The whole S block in every warp (summed in a fixed order: every warp gets the same bits), base 2, masked.
    const int n0 = key0 + blk * BN;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float2 sum = make_float2(0.f, 0.f);
#pragma unroll
        for (int w = 0; w < kDecWarps; ++w) {
          const float2 part = *reinterpret_cast<const float2*>(sS + (w * kDecRows + g + 8 * r) * BN + nt * 8 + 2 * t);
          sum.x += part.x;
          sum.y += part.y;
        }
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = n0 + nt * 8 + 2 * t + e;
          float x = __fmul_rn(e ? sum.y : sum.x, p.scale_log2);  // rounded: the max and exp2(x - m) see one value
          if (key >= key_end || (p.causal && key > q_row[r])) x = -INFINITY;
          s[nt][2 * r + e] = x;
          mx[r] = fmaxf(mx[r], x);
        }
      }
    }
    float alpha[2], m_use[2];
    online_softmax_step(mx, m_run, l_run, alpha, m_use);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pe = exp2f(s[nt][e] - m_use[e >> 1]);
        s[nt][e] = pe;
        l_run[e >> 1] += pe;
      }
    }
#pragma unroll
    for (int i = 0; i < MAX_PAIRS; ++i) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        acc_o[i][j][0] *= alpha[0];
        acc_o[i][j][1] *= alpha[0];
        acc_o[i][j][2] *= alpha[1];
        acc_o[i][j][3] *= alpha[1];
      }
    }
    // O += P V over this warp's column pairs: two adjacent n8 tiles of S are the A fragment of m16n8k16.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[4];
      a[0] = Pack2<T>::from_floats(s[2 * kk][0], s[2 * kk][1]);
      a[1] = Pack2<T>::from_floats(s[2 * kk][2], s[2 * kk][3]);
      a[2] = Pack2<T>::from_floats(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = Pack2<T>::from_floats(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
      for (int i = 0; i < MAX_PAIRS; ++i) {
        const int pr = warp + i * kDecWarps;
        if (pr >= n_pairs) break;
        const int col = pr * 16 + (lane / 16) * 8;
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(smem_u32(sV + (col / 64) * BN * 128 + swz128(key, (col % 64) / 8)), b0, b1, b2, b3);
        Mma16816<T>::run(acc_o[i][0], a, b0, b1);
        Mma16816<T>::run(acc_o[i][1], a, b2, b3);
      }
    }
  }
  cp_async_wait<0>();  // no copy may outlive the CTA (the trailing groups are empty, but commit counts must drain)

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
  }
  // This thread's output columns (two per 8-wide tile of each of its pairs): store(col, i, j) for each in range.
  auto for_each_column = [&](auto&& store) {
#pragma unroll
    for (int i = 0; i < MAX_PAIRS; ++i) {
      const int pr = warp + i * kDecWarps;
      if (pr >= n_pairs) break;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = pr * 16 + j * 8 + 2 * t;
        if (col < p.Dv) store(col, i, j);
      }
    }
  };
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    if (!row_valid(row)) continue;
    if (d.n_splits == 1) {
      const float inv_l = l_run[r] > 0.f ? 1.f / l_run[r] : 0.f;
      T* o = static_cast<T*>(p.o) + b * p.o_sb + row_head(row) * p.o_sh + (int64_t)row_query(row) * p.o_ss;
      for_each_column([&](int col, int i, int j) {
        *reinterpret_cast<uint32_t*>(o + col) =
            Pack2<T>::from_floats(acc_o[i][j][2 * r] * inv_l, acc_o[i][j][2 * r + 1] * inv_l);
      });
    } else {
      const int64_t out_row = ((int64_t)b * p.H + row_head(row)) * p.Sq + row_query(row);  // scratch row
      float* po = d.part_o + (out_row * d.n_splits + split) * p.Dv;
      for_each_column([&](int col, int i, int j) {
        *reinterpret_cast<float2*>(po + col) = make_float2(acc_o[i][j][2 * r], acc_o[i][j][2 * r + 1]);
      });
      if (warp == 0 && t == 0) d.part_ml[out_row * d.n_splits + split] = make_float2(m_run[r], l_run[r]);
    }
  }
}

// One CTA per output row (batch, head, query): O = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s.
template <typename T>
__global__ void __launch_bounds__(kDecThreads) attn_decode_combine(const __grid_constant__ AttnParams p,
                                                                   const __grid_constant__ DecodeParams d) {
  extern __shared__ float sWeight[];  // [n_splits]
  const int64_t row = blockIdx.x;  // (b * H + h) * Sq + qi
  const int qi = (int)(row % p.Sq), h = (int)((row / p.Sq) % p.H), b = (int)(row / ((int64_t)p.Sq * p.H));
  const float2* ml = d.part_ml + row * d.n_splits;
  float m = -INFINITY;
  for (int s = 0; s < d.n_splits; ++s) m = fmaxf(m, ml[s].x);
  const float m_use = m == -INFINITY ? 0.f : m;
  float l = 0.f;
  for (int s = 0; s < d.n_splits; ++s) l += exp2f(ml[s].x - m_use) * ml[s].y;
  const float inv_l = l > 0.f ? 1.f / l : 0.f;
  for (int s = threadIdx.x; s < d.n_splits; s += blockDim.x) sWeight[s] = exp2f(ml[s].x - m_use) * inv_l;
  __syncthreads();
  const float* po = d.part_o + row * d.n_splits * p.Dv;
  T* o = static_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh + (int64_t)qi * p.o_ss;
  for (int col = 2 * threadIdx.x; col < p.Dv; col += 2 * blockDim.x) {
    float2 acc = make_float2(0.f, 0.f);
    for (int s = 0; s < d.n_splits; ++s) {
      const float2 part = *reinterpret_cast<const float2*>(po + (int64_t)s * p.Dv + col);
      acc.x += sWeight[s] * part.x;
      acc.y += sWeight[s] * part.y;
    }
    *reinterpret_cast<uint32_t*>(o + col) = Pack2<T>::from_floats(acc.x, acc.y);
  }
}

}  // namespace kforge_attn
