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
// half of the L2 write sectors. (The shared-memory-P kernel's epilogue; the register-P kernel's is
// store_o_chunk_staged below: ptxas turns the lane-dependent register picks here into selects and branches.)
template <typename T, int NQ>
__device__ __forceinline__ void store_o_chunk(float* acc, float il0, float il1, T* row0, int64_t row_stride,
                                              bool ok0, bool ok1, int cols_left, int t) {
  // Column blocks outermost, so each block's accumulator registers die as soon as it is stored.
#pragma unroll
  for (int q = 0; q < NQ; ++q) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float il = half ? il1 : il0;
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

// The same store through a per-warp staging area of shared memory (kStageBytesPerWarp): the accumulator goes
// in with stmatrix (the mma accumulator layout is stmatrix's fragment layout: no shuffles) and comes back as
// 16-byte rows, 32 columns at a time. store_o_chunk's quad transpose selects each register by a lane-dependent
// index, which ptxas turns into ~1100 instructions of selects and branches per 128-wide chunk (about half the
// epilogue's time: NOTES.md). Thread (g, t) writes rows g and g + 8
// of its warp's 16 both ways, so the row pointers and guards are the same.
// Stage layout: [16 rows][4 x 16 bytes], the 16-byte unit of row r at unit u ^ ((r >> 1) & 3), so that the 8
// rows of each stmatrix matrix and of each ld.shared.v4 fall in distinct banks.
constexpr int kStageBytesPerWarp = 16 * 64;

__device__ __forceinline__ uint32_t stage_offset(int row, int unit) { return row * 64 + ((unit ^ ((row >> 1) & 3)) << 4); }

__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
// One 16-byte store instruction (NVVM has split a uint4 assignment into four 4-byte stores).
__device__ __forceinline__ void st_global_v4(void* ptr, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// With a `partial` (shared-memory address, split keys): stores acc * il + partial instead, the partial laid
// out as 16-byte vectors, vector j of consumer thread `tid` (elements 4j..4j+3) at partial + (j * 256) * 16.
// Read block by block, so that no more than 16 of its registers are live at once (all 64 at once spill P).
template <typename T, int NQ, bool kPartial = false>
__device__ __forceinline__ void store_o_chunk_staged(float* acc, float il0, float il1, T* row0, int64_t row_stride,
                                                     bool ok0, bool ok1, int cols_left, uint32_t stage, int lane,
                                                     uint32_t partial = 0) {
  const int g = lane / 4, t = lane % 4;
  // stmatrix: lane L gives row L % 8 of matrix L / 8; matrices (rows 0-7 | 8-15) x (column units u, u + 1).
  const int st_row = (lane & 7) + 8 * ((lane >> 3) & 1), st_unit = lane >> 4;
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
    const float s0 = kPartial ? 1.f : il0, s1 = kPartial ? 1.f : il1;
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {  // column units 2 pair, 2 pair + 1 of this 32-column block
      const float* a = acc + 16 * q + 8 * pair;
      stmatrix_x4(stage + stage_offset(st_row, 2 * pair + st_unit), Pack2<T>::from_floats(a[0] * s0, a[1] * s0),
                  Pack2<T>::from_floats(a[2] * s1, a[3] * s1), Pack2<T>::from_floats(a[4] * s0, a[5] * s0),
                  Pack2<T>::from_floats(a[6] * s1, a[7] * s1));
    }
    __syncwarp();
    const uint4 v0 = ld_shared_v4(stage + stage_offset(g, t));
    const uint4 v1 = ld_shared_v4(stage + stage_offset(g + 8, t));
    __syncwarp();  // the next block's stmatrix overwrites the stage
    const int col = q * 32 + t * 8;
    if (col < cols_left) {
      if (ok0) st_global_v4(row0 + col, v0);
      if (ok1) st_global_v4(row0 + 8 * row_stride + col, v1);
    }
  }
}

}  // namespace kforge_attn
