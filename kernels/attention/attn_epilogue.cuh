// O epilogue shared by the wgmma attention kernels: register accumulator -> global memory.
#pragma once
#include "attn_common.cuh"

namespace kforge_attn {

// x[i] for a lane-dependent i without dynamic register indexing (which would go to local memory).
__device__ __forceinline__ uint32_t pick4(const uint32_t* x, int i) {
  return i == 0 ? x[0] : i == 1 ? x[1] : i == 2 ? x[2] : x[3];
}

// An m64n(32*NQ) accumulator (rows g and g+8 of this warp, columns jn*8 + 2t, +1) scaled by 1/l, stored
// as 16-byte vectors. A quad's 4 x 4 transpose (3 shuffle rounds) gives thread t the 8 consecutive columns
// (4q + t) * 8 .. +7 of each 32-column block q, so every store instruction writes whole 32-byte sectors
// (64 contiguous bytes per row) instead of 4 bytes per thread: a quarter of the store instructions and
// half of the L2 write sectors.
//
// With a `partial` (shared-memory address, split keys): stores acc * il + partial instead, the partial laid
// out as 16-byte vectors, vector j of consumer thread `tid` (elements 4j..4j+3) at partial + (j * 256) * 16.
// Read block by block, so that no more than 16 of its registers are live at once (all 64 at once spilled P).
template <typename T, int NQ, bool kPartial = false>
__device__ __forceinline__ void store_o_chunk(float* acc, float il0, float il1, T* row0, int64_t row_stride,
                                              bool ok0, bool ok1, int cols_left, int t, uint32_t partial = 0) {
  // Column blocks outermost, so each block's accumulator registers die as soon as it is stored.
#pragma unroll
  for (int q = 0; q < NQ; ++q) {
    if (kPartial) {
#pragma unroll
      for (int j = 4 * q; j < 4 * q + 4; ++j) {
        float4 x;
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w)
                     : "r"(partial + j * 256 * 16)
                     : "memory");
        acc[4 * j] = fmaf(acc[4 * j], il0, x.x), acc[4 * j + 1] = fmaf(acc[4 * j + 1], il0, x.y);
        acc[4 * j + 2] = fmaf(acc[4 * j + 2], il1, x.z), acc[4 * j + 3] = fmaf(acc[4 * j + 3], il1, x.w);
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float il = kPartial ? 1.f : half ? il1 : il0;
      const bool row_ok = half ? ok1 : ok0;  // the shuffles below need every lane: only the store is guarded
      T* row = row0 + (half ? 8 * row_stride : 0);
      uint32_t x[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int e = 4 * (4 * q + j) + 2 * half;
        x[j] = Pack2<T>::from_floats(acc[e] * il, acc[e + 1] * il);
      }
      // out[s] = thread s's x[t]: our own x[t] for s == t, from partner t ^ k in shuffle round k otherwise.
      uint32_t out[4];
      const uint32_t own = pick4(x, t);
#pragma unroll
      for (int s = 0; s < 4; ++s) out[s] = own;
#pragma unroll
      for (int k = 1; k < 4; ++k) {
        const int partner = t ^ k;
        const uint32_t got = __shfl_xor_sync(0xffffffffu, pick4(x, partner), k);
#pragma unroll
        for (int s = 0; s < 4; ++s) out[s] = (s == partner) ? got : out[s];
      }
      const int col = (4 * q + t) * 8;
      if (row_ok && col < cols_left) *reinterpret_cast<uint4*>(row + col) = make_uint4(out[0], out[1], out[2], out[3]);
    }
  }
}

}  // namespace kforge_attn
