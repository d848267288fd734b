// General fused attention forward (sm_80+ mma.sync), correct for every shape the recipe accepts:
// any S_q / S_k (tile edges zero-filled and masked), Dqk and Dv any multiple of 8 up to 1024,
// arbitrary batch/head/sequence strides, causal (top-left) or not, any scale, fp16 or bf16.
//
// One CTA = 64 query rows x one DV_SLICE-wide slice of the output head dim; 4 warps, 16 rows each.
// FlashAttention-2 style: keys in blocks of 64 with an online softmax, O for the slice in registers.
// Q's whole row block stays in shared memory (up to 128 KB at D=1024); K is streamed in 64-wide head-dim
// chunks, double-buffered. With several slices (Dv > DV_SLICE) QK^T is recomputed per slice: that is the
// price of generality here; key rows up to 1024 go to the wgmma kernels instead (attn_hopper*.cu).
#include "attn_common.cuh"

namespace kforge_attn {

constexpr int kGenBM = 64;       // query rows per CTA
constexpr int kGenBN = 64;       // keys per block
constexpr int kGenThreads = 128;
constexpr int kPanelBytes = 64 * 128;  // one swizzled [64 rows x 64 elems] 16-bit panel

__host__ __device__ inline int gen_q_chunks(int dqk) { return (dqk + 63) / 64; }
template <int DV_SLICE>
__host__ __device__ inline int gen_smem_bytes(int dqk) {
  return gen_q_chunks(dqk) * kPanelBytes + 2 * kPanelBytes + (DV_SLICE / 64) * kPanelBytes;
}

template <typename T, int DV_SLICE>
__global__ void __launch_bounds__(kGenThreads) attn_general_kernel(const __grid_constant__ AttnParams p) {
  static_assert(DV_SLICE % 64 == 0, "V slice is made of 64-wide panels");
  constexpr int NT_O = DV_SLICE / 8;  // 8-wide n-tiles of the output slice
  extern __shared__ __align__(128) unsigned char smem[];
  const int nq_chunks = gen_q_chunks(p.Dqk);
  unsigned char* sQ = smem;
  unsigned char* sK = sQ + nq_chunks * kPanelBytes;
  unsigned char* sV = sK + 2 * kPanelBytes;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int n_slices = (p.Dv + DV_SLICE - 1) / DV_SLICE;
  const int m0 = blockIdx.x * kGenBM;
  const int h = blockIdx.y / n_slices, slice = blockIdx.y % n_slices;
  const int b = blockIdx.z;
  const int dv0 = slice * DV_SLICE;

  const T* q = static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh;
  const T* k = static_cast<const T*>(p.k) + b * p.k_sb + (h / p.kv_group) * p.k_sh;
  const T* v = static_cast<const T*>(p.v) + b * p.v_sb + (h / p.kv_group) * p.v_sh;
  T* o = static_cast<T*>(p.o) + b * p.o_sb + h * p.o_sh;

  // Q row block, all head-dim chunks, once.
  {
    const int per_row = nq_chunks * 8;
    for (int idx = tid; idx < kGenBM * per_row; idx += kGenThreads) {
      const int r = idx / per_row, cc = idx % per_row;
      const bool ok = (m0 + r < p.Sq) && (cc * 8 < p.Dqk);
      const T* src = ok ? q + (int64_t)(m0 + r) * p.q_ss + cc * 8 : q;
      cp_async_16(smem_u32(sQ + (cc / 8) * kPanelBytes + swz128(r, cc % 8)), src, ok);
    }
    cp_async_commit();
  }
  auto load_k_chunk = [&](int n0, int c, unsigned char* dst) {
    for (int idx = tid; idx < kGenBN * 8; idx += kGenThreads) {
      const int r = idx / 8, cc = idx % 8;
      const bool ok = (n0 + r < p.Sk) && (c * 64 + cc * 8 < p.Dqk);
      const T* src = ok ? k + (int64_t)(n0 + r) * p.k_ss + c * 64 + cc * 8 : k;
      cp_async_16(smem_u32(dst + swz128(r, cc)), src, ok);
    }
  };
  auto load_v_block = [&](int n0) {
    constexpr int per_row = DV_SLICE / 8;
    for (int idx = tid; idx < kGenBN * per_row; idx += kGenThreads) {
      const int r = idx / per_row, cc = idx % per_row;
      const bool ok = (n0 + r < p.Sk) && (dv0 + cc * 8 < p.Dv);
      const T* src = ok ? v + (int64_t)(n0 + r) * p.v_ss + dv0 + cc * 8 : v;
      cp_async_16(smem_u32(sV + (cc / 8) * kPanelBytes + swz128(r, cc % 8)), src, ok);
    }
  };

  float acc_o[NT_O][4];
#pragma unroll
  for (int i = 0; i < NT_O; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};  // per-thread partial row sums; reduced over the quad at the end
  const int row_a = m0 + warp * 16 + g;

  const int k_end = p.causal ? min(p.Sk, m0 + kGenBM) : p.Sk;
  const int n_kblocks = (k_end + kGenBN - 1) / kGenBN;
  for (int kb = 0; kb < n_kblocks; ++kb) {
    const int n0 = kb * kGenBN;
    load_v_block(n0);
    cp_async_commit();
    load_k_chunk(n0, 0, sK);
    cp_async_commit();

    float s[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
    for (int c = 0; c < nq_chunks; ++c) {
      if (c + 1 < nq_chunks) {
        load_k_chunk(n0, c + 1, sK + ((c + 1) & 1) * kPanelBytes);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const unsigned char* kc = sK + (c & 1) * kPanelBytes;
      const unsigned char* qc = sQ + c * kPanelBytes;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        uint32_t a[4];
        ldmatrix_x4(smem_u32(qc + swz128(warp * 16 + (lane % 16), kk * 2 + lane / 16)), a[0], a[1], a[2], a[3]);
#pragma unroll
        for (int pr = 0; pr < 4; ++pr) {
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4(smem_u32(kc + swz128(pr * 16 + (lane % 8) + (lane / 16) * 8, kk * 2 + (lane / 8) % 2)), b0, b1,
                      b2, b3);
          Mma16816<T>::run(s[2 * pr], a, b0, b1);
          Mma16816<T>::run(s[2 * pr + 1], a, b2, b3);
        }
      }
      __syncthreads();  // the next prefetch overwrites the buffer just read
    }

    // Online softmax over this key block, base 2.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n0 + nt * 8 + 2 * t + (e & 1);
        const int row = row_a + (e >> 1) * 8;
        float x = s[nt][e] * p.scale_log2;
        if (key >= p.Sk || (p.causal && key > row)) x = -INFINITY;
        s[nt][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    }
    float alpha[2], m_use[2];
    online_softmax_step(mx, m_run, l_run, alpha, m_use);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float pe = exp2f(s[nt][e] - m_use[e >> 1]);
        s[nt][e] = pe;
        l_run[e >> 1] += pe;
      }
    }
#pragma unroll
    for (int i = 0; i < NT_O; ++i) {
      acc_o[i][0] *= alpha[0];
      acc_o[i][1] *= alpha[0];
      acc_o[i][2] *= alpha[1];
      acc_o[i][3] *= alpha[1];
    }

    // O += P V: the S accumulator layout of two adjacent n-tiles is exactly the A fragment of m16n8k16.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t a[4];
      a[0] = Pack2<T>::from_floats(s[2 * kk][0], s[2 * kk][1]);
      a[1] = Pack2<T>::from_floats(s[2 * kk][2], s[2 * kk][3]);
      a[2] = Pack2<T>::from_floats(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      a[3] = Pack2<T>::from_floats(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
      for (int pr = 0; pr < NT_O / 2; ++pr) {
        const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int col = pr * 16 + (lane / 16) * 8;
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(smem_u32(sV + (col / 64) * kPanelBytes + swz128(key, (col % 64) / 8)), b0, b1, b2, b3);
        Mma16816<T>::run(acc_o[2 * pr], a, b0, b1);
        Mma16816<T>::run(acc_o[2 * pr + 1], a, b2, b3);
      }
    }
    __syncthreads();  // sV and sK[0] are refilled at the top of the next block
  }

  // Finish: full row sums, normalise, store the slice.
  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    inv_l[r] = l > 0.f ? 1.f / l : 0.f;
  }
#pragma unroll
  for (int nt = 0; nt < NT_O; ++nt) {
    const int col = dv0 + nt * 8 + 2 * t;
    if (col >= p.Dv) continue;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row_a + r * 8;
      if (row < p.Sq) {
        *reinterpret_cast<uint32_t*>(o + (int64_t)row * p.o_ss + col) =
            Pack2<T>::from_floats(acc_o[nt][2 * r] * inv_l[r], acc_o[nt][2 * r + 1] * inv_l[r]);
      }
    }
  }
}

}  // namespace kforge_attn
