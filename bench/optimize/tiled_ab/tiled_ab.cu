// Diagnostic build, never shipped: the transposing epilogue of a channels-last conv (y[n][c][p] = f(x[n][p][c],
// b[c]), NHWC in, NCHW out) through the shipped tiled path of kf_elementwise.cuh against candidate designs.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I src/optimize/codegen/cuda \
//        bench/optimize/tiled_ab/tiled_ab.cu -o tiled_ab && ./tiled_ab
// Prints one JSON line per (case, variant): median ms of 20 (L2 flushed before each), GB/s moved, max error.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>
#include "kf_elementwise.cuh"

#define CHECK(x)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

// KernelBench 2's chain: (x + b) clamped to [0, 1], scaled, clamped, divided.
__host__ __device__ __forceinline__ float chain(float x, float b, float s) {
  float v = fminf(fmaxf(x + b, 0.f), 1.f) * s;
  v = fminf(fmaxf(v, 0.f), 1.f);
  return v / s;
}

struct ChainF {
  static constexpr int kIn = 2;
  __device__ float operator()(const float (&x)[2], const KfScalars& sc) const { return chain(x[0], x[1], sc.v[0]); }
};

// ---- variant "simple": one 64x64 tile per block, no persistence (the shipped kernel without its prefetch)
__global__ void __launch_bounds__(256) simple_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                                     float* __restrict__ y, int C, int P, float s) {
  __shared__ float tile[64][65];
  const int n = blockIdx.z, p0 = blockIdx.x * 64, c0 = blockIdx.y * 64;
  const int c = (threadIdx.x % 16) * 4, r0 = threadIdx.x / 16;
  const float* xn = x + int64_t(n) * P * C;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int p = p0 + r0 + 16 * i;
    if (p < P && c0 + c < C) {
      const float4 v = *reinterpret_cast<const float4*>(xn + int64_t(p) * C + c0 + c);
      tile[c + 0][r0 + 16 * i] = v.x;
      tile[c + 1][r0 + 16 * i] = v.y;
      tile[c + 2][r0 + 16 * i] = v.z;
      tile[c + 3][r0 + 16 * i] = v.w;
    }
  }
  __syncthreads();
  float* yn = y + int64_t(n) * C * P;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int ch = c0 + r0 + 16 * i;
    if (ch >= C || p0 + c >= P) continue;
    const float bb = b[ch];
    float4 o;
    o.x = chain(tile[r0 + 16 * i][c + 0], bb, s);
    o.y = chain(tile[r0 + 16 * i][c + 1], bb, s);
    o.z = chain(tile[r0 + 16 * i][c + 2], bb, s);
    o.w = chain(tile[r0 + 16 * i][c + 3], bb, s);
    *reinterpret_cast<float4*>(yn + int64_t(ch) * P + p0 + c) = o;
  }
}

// ---- variant "ring": cp.async ring of kStages tiles of T0 (positions) x T1 (channels), stored as loaded
// ([position][channel], 16-byte chunks XOR-swizzled by row / 4), each thread a 4x4 block: four 16-byte shared
// loads, a register transpose, four 16-byte global stores. Persistent blocks.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

template <int T1>
__device__ __forceinline__ int swz(int row, int q) {
  constexpr int Q = T1 / 4;
  constexpr int M = (Q - 1) & 7;
  return row * Q + (q ^ ((row >> 2) & M));
}

template <int T1, int kStages>
__global__ void __launch_bounds__(256) ring_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                                   float* __restrict__ y, int C, int P, float s, int tilesP,
                                                   int tilesC, int tiles) {
  constexpr int T0 = 4096 / T1, Q = T1 / 4;
  extern __shared__ float4 ring[];  // kStages x (T0 * Q) chunks
  auto issue = [&](int t, int stage) {
    if (t < tiles) {
      const int tp = t % tilesP, rest = t / tilesP, tc = rest % tilesC, n = rest / tilesC;
      const int p0 = tp * T0, c0 = tc * T1;
      const float* src = x + (int64_t(n) * P) * C + c0;
#pragma unroll
      for (int i = 0; i < T0 * Q / 256; ++i) {
        const int idx = threadIdx.x + 256 * i, row = idx / Q, q = idx % Q;
        float4* dst = ring + stage * T0 * Q + swz<T1>(row, q);
        if (p0 + row < P && c0 + 4 * q < C) cp_async16(dst, src + int64_t(p0 + row) * C + 4 * q);
      }
    }
    cp_async_commit();
  };
  int t = blockIdx.x;
#pragma unroll
  for (int k = 0; k < kStages - 1; ++k) issue(t + k * gridDim.x, k);
  const int k0 = threadIdx.x % (T0 / 4), g = threadIdx.x / (T0 / 4);
  for (int it = 0; t < tiles; ++it, t += gridDim.x) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    issue(t + (kStages - 1) * gridDim.x, (it + kStages - 1) % kStages);
    const int stage = it % kStages;
    const int tp = t % tilesP, rest = t / tilesP, tc = rest % tilesC, n = rest / tilesC;
    const int p = tp * T0 + 4 * k0, c = tc * T1 + 4 * g;
    if (p >= P || c >= C) continue;
    float v[4][4];
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const float4 r = ring[stage * T0 * Q + swz<T1>(4 * k0 + jj, g)];
      v[jj][0] = r.x, v[jj][1] = r.y, v[jj][2] = r.z, v[jj][3] = r.w;
    }
    float* yn = y + int64_t(n) * C * P;
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float bb = b[c + m];
      float4 o;
      o.x = chain(v[0][m], bb, s);
      o.y = chain(v[1][m], bb, s);
      o.z = chain(v[2][m], bb, s);
      o.w = chain(v[3][m], bb, s);
      *reinterpret_cast<float4*>(yn + int64_t(c + m) * P + p) = o;
    }
  }
  cp_async_wait<0>();
}

// ---- variant "simpleT<T1>": one T0 x T1 tile per block (T0 = 4096 / T1 positions, T1 channels), transposed
// scalar stores into [channel][position] shared memory, 16-byte runs both ways.
template <int T1>
__global__ void __launch_bounds__(256) simple_t_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                                       float* __restrict__ y, int C, int P, float s) {
  constexpr int T0 = 4096 / T1, Q = T1 / 4, R = T0 / 4;
  __shared__ float tile[T1][T0 + 1];
  const int n = blockIdx.z, p0 = blockIdx.x * T0, c0 = blockIdx.y * T1;
  const float* xn = x + int64_t(n) * P * C;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int idx = threadIdx.x + 256 * i, row = idx / Q, q = idx % Q;
    if (p0 + row < P && c0 + 4 * q < C) {
      const float4 v = *reinterpret_cast<const float4*>(xn + int64_t(p0 + row) * C + c0 + 4 * q);
      tile[4 * q + 0][row] = v.x;
      tile[4 * q + 1][row] = v.y;
      tile[4 * q + 2][row] = v.z;
      tile[4 * q + 3][row] = v.w;
    }
  }
  __syncthreads();
  float* yn = y + int64_t(n) * C * P;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int idx = threadIdx.x + 256 * i, ch = idx / R, run = idx % R;
    if (c0 + ch >= C || p0 + 4 * run >= P) continue;
    const float bb = b[c0 + ch];
    float4 o;
    o.x = chain(tile[ch][4 * run + 0], bb, s);
    o.y = chain(tile[ch][4 * run + 1], bb, s);
    o.z = chain(tile[ch][4 * run + 2], bb, s);
    o.w = chain(tile[ch][4 * run + 3], bb, s);
    *reinterpret_cast<float4*>(yn + int64_t(c0 + ch) * P + p0 + 4 * run) = o;
  }
}

// ---- variant "regT<T1>": one tile per block, stored as loaded ([position][channel], 16-byte chunks swizzled),
// each thread a 4x4 block (four 16-byte shared loads, a register transpose, four 16-byte global stores).
template <int T1>
__global__ void __launch_bounds__(256) reg_t_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                                    float* __restrict__ y, int C, int P, float s) {
  constexpr int T0 = 4096 / T1, Q = T1 / 4;
  __shared__ float4 tile[T0 * Q];
  const int n = blockIdx.z, p0 = blockIdx.x * T0, c0 = blockIdx.y * T1;
  const float* xn = x + int64_t(n) * P * C;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int idx = threadIdx.x + 256 * i, row = idx / Q, q = idx % Q;
    if (p0 + row < P && c0 + 4 * q < C)
      tile[swz<T1>(row, q)] = *reinterpret_cast<const float4*>(xn + int64_t(p0 + row) * C + c0 + 4 * q);
  }
  __syncthreads();
  const int k0 = threadIdx.x % (T0 / 4), g = threadIdx.x / (T0 / 4);
  const int p = p0 + 4 * k0, c = c0 + 4 * g;
  if (p >= P || c >= C) return;
  float v[4][4];
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    const float4 r = tile[swz<T1>(4 * k0 + jj, g)];
    v[jj][0] = r.x, v[jj][1] = r.y, v[jj][2] = r.z, v[jj][3] = r.w;
  }
  float* yn = y + int64_t(n) * C * P;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const float bb = b[c + m];
    float4 o;
    o.x = chain(v[0][m], bb, s);
    o.y = chain(v[1][m], bb, s);
    o.z = chain(v[2][m], bb, s);
    o.w = chain(v[3][m], bb, s);
    *reinterpret_cast<float4*>(yn + int64_t(c + m) * P + p) = o;
  }
}

// ---- harness
static float* flush_buf = nullptr;
static void flush_l2() {
  const size_t bytes = size_t(256) << 20;
  if (!flush_buf) CHECK(cudaMalloc(&flush_buf, bytes));
  CHECK(cudaMemsetAsync(flush_buf, 0, bytes));
}

using Variants = std::vector<std::pair<std::string, std::function<void()>>>;

// Every variant timed in turn, round after round (the same conditions for all: clocks, heat, L2 flushed before
// each launch), after one warm-up launch each: the 15 times of each, in milliseconds.
static std::vector<std::vector<float>> time_rounds(const Variants& variants) {
  cudaEvent_t a, z;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&z));
  for (auto& v : variants) v.second();
  std::vector<std::vector<float>> ms(variants.size());
  for (int round = 0; round < 15; ++round)
    for (size_t i = 0; i < variants.size(); ++i) {
      flush_l2();
      CHECK(cudaEventRecord(a));
      variants[i].second();
      CHECK(cudaEventRecord(z));
      CHECK(cudaEventSynchronize(z));
      float m = 0;
      CHECK(cudaEventElapsedTime(&m, a, z));
      ms[i].push_back(m);
    }
  CHECK(cudaEventDestroy(a));
  CHECK(cudaEventDestroy(z));
  return ms;
}

// Each variant timed (time_rounds), then checked once on a zeroed output.
static void run_case(int N, int P, int C) {
  const size_t count = size_t(N) * P * C;
  float *x, *b, *y;
  CHECK(cudaMalloc(&x, count * 4));
  CHECK(cudaMalloc(&y, count * 4));
  CHECK(cudaMalloc(&b, C * 4));
  std::vector<float> hx(size_t(P) * C), hb(C);
  for (auto& v : hx) v = float(rand()) / RAND_MAX * 2.f - 0.5f;
  for (auto& v : hb) v = float(rand()) / RAND_MAX - 0.5f;
  for (int n = 0; n < N; ++n) CHECK(cudaMemcpy(x + size_t(n) * P * C, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, hb.data(), C * 4, cudaMemcpyHostToDevice));
  const float s = 2.f;
  const double gb = 2.0 * count * 4 / 1e9;
  Variants variants;
  variants.emplace_back("memcpy", [&] { CHECK(cudaMemcpyAsync(y, x, count * 4, cudaMemcpyDeviceToDevice)); });
  KfShape shape{3, {N, C, P}};
  KfTensorRef in[2] = {{x, {int64_t(P) * C, 1, C}}, {b, {0, 1, 0}}};
  KfScalars sc{};
  sc.v[0] = s;
  variants.emplace_back("shipped", [&] { CHECK((kf_launch_elementwise<ChainF, float, float, float>(shape, y, in, sc, 0))); });
  variants.emplace_back("simple", [&] { simple_kernel<<<dim3((P + 63) / 64, (C + 63) / 64, N), 256>>>(x, b, y, C, P, s); });
  auto add_t = [&](auto t1, const char* name) {
    constexpr int T1 = decltype(t1)::value, T0 = 4096 / T1;
    variants.emplace_back(name, [&, T0] {
      simple_t_kernel<T1><<<dim3((P + T0 - 1) / T0, (C + T1 - 1) / T1, N), 256>>>(x, b, y, C, P, s);
    });
    variants.emplace_back(std::string("reg") + name, [&, T0] {
      reg_t_kernel<T1><<<dim3((P + T0 - 1) / T0, (C + T1 - 1) / T1, N), 256>>>(x, b, y, C, P, s);
    });
  };
  using I16 = std::integral_constant<int, 16>;
  using I32 = std::integral_constant<int, 32>;
  using I64 = std::integral_constant<int, 64>;
  add_t(I64{}, "simple64");
  if (C <= 32) add_t(I32{}, "simple32");
  if (C <= 16) add_t(I16{}, "simple16");
  auto add_ring = [&](auto t1, auto stages, const char* name) {
    constexpr int T1 = decltype(t1)::value, S = decltype(stages)::value, T0 = 4096 / T1;
    auto kernel = ring_kernel<T1, S>;
    const size_t smem = size_t(S) * 4096 * 4;
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, smem));
    const int tilesP = (P + T0 - 1) / T0, tilesC = (C + T1 - 1) / T1, tiles = tilesP * tilesC * N;
    const int grid = std::min(tiles, kf_sm_count() * per_sm);
    variants.emplace_back(name, [=] { kernel<<<grid, 256, smem>>>(x, b, y, C, P, s, tilesP, tilesC, tiles); });
  };
  add_ring(I64{}, std::integral_constant<int, 3>{}, "ring64x3");

  auto ms = time_rounds(variants);
  CHECK(cudaGetLastError());
  std::vector<float> hy(size_t(C) * P);
  for (size_t i = 0; i < variants.size(); ++i) {
    std::sort(ms[i].begin(), ms[i].end());
    const float med = ms[i][ms[i].size() / 2];
    if (variants[i].first == "memcpy") {
      printf("{\"N\": %d, \"P\": %d, \"C\": %d, \"variant\": \"memcpy\", \"ms\": %.4f, \"GBps\": %.0f}\n", N, P, C, med,
             gb / (med / 1e3));
      continue;
    }
    CHECK(cudaMemset(y, 0, count * 4));
    variants[i].second();
    CHECK(cudaMemcpy(hy.data(), y + size_t(N - 1) * P * C, hy.size() * 4, cudaMemcpyDeviceToHost));
    double err = 0;
    for (int c = 0; c < C; ++c)
      for (int p = 0; p < P; ++p) {
        float v = std::min(std::max(hx[size_t(p) * C + c] + hb[c], 0.f), 1.f) * s;
        v = std::min(std::max(v, 0.f), 1.f) / s;
        err = std::max(err, double(std::abs(v - hy[size_t(c) * P + p])));
      }
    printf("{\"N\": %d, \"P\": %d, \"C\": %d, \"variant\": \"%s\", \"ms\": %.4f, \"GBps\": %.0f, \"max_err\": %.2e}\n", N, P,
           C, variants[i].first.c_str(), med, gb / (med / 1e3), err);
  }
  fflush(stdout);
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(b));
}

// The shipped kernel with 16-bit activations against a copy of the same bytes: every operand fp16 (a model
// converted with .half()), and the bias in fp32 (mixed element sizes: the 6-block register bound).
static void run_case_half(int N, int P, int C) {
  const size_t count = size_t(N) * P * C;
  __half *x, *y, *b16;
  float* b;
  CHECK(cudaMalloc(&x, count * 2));
  CHECK(cudaMalloc(&y, count * 2));
  CHECK(cudaMalloc(&b, C * 4));
  CHECK(cudaMalloc(&b16, C * 2));
  std::vector<__half> hx(size_t(P) * C);
  std::vector<float> hb(C);
  for (auto& v : hx) v = __float2half(float(rand()) / RAND_MAX * 2.f - 0.5f);
  for (auto& v : hb) v = __half2float(__float2half(float(rand()) / RAND_MAX - 0.5f));  // exact in both
  std::vector<__half> hb16(C);
  for (int c = 0; c < C; ++c) hb16[c] = __float2half(hb[c]);
  for (int n = 0; n < N; ++n) CHECK(cudaMemcpy(x + size_t(n) * P * C, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, hb.data(), C * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b16, hb16.data(), C * 2, cudaMemcpyHostToDevice));
  const float s = 2.f;
  const double gb = 2.0 * count * 2 / 1e9;
  KfShape shape{3, {N, C, P}};
  KfTensorRef in[2] = {{x, {int64_t(P) * C, 1, C}}, {b, {0, 1, 0}}};
  KfTensorRef in16[2] = {{x, {int64_t(P) * C, 1, C}}, {b16, {0, 1, 0}}};
  KfScalars sc{};
  sc.v[0] = s;
  Variants variants;
  variants.emplace_back("memcpy", [&] { CHECK(cudaMemcpyAsync(y, x, count * 2, cudaMemcpyDeviceToDevice)); });
  variants.emplace_back("shipped_f16", [&] { CHECK((kf_launch_elementwise<ChainF, __half, __half, __half>(shape, y, in16, sc, 0))); });
  variants.emplace_back("shipped_f16_fp32_bias", [&] { CHECK((kf_launch_elementwise<ChainF, __half, __half, float>(shape, y, in, sc, 0))); });
  auto ms = time_rounds(variants);
  std::vector<__half> hy(size_t(C) * P);
  for (size_t i = 0; i < variants.size(); ++i) {
    double err = 0;
    if (variants[i].first != "memcpy") {
      CHECK(cudaMemset(y, 0, count * 2));
      variants[i].second();
      CHECK(cudaMemcpy(hy.data(), y + size_t(N - 1) * P * C, hy.size() * 2, cudaMemcpyDeviceToHost));
      for (int c = 0; c < C; ++c)
        for (int p = 0; p < P; ++p) {
          const float v = chain(__half2float(hx[size_t(p) * C + c]), hb[c], s);
          err = std::max(err, double(std::abs(v - __half2float(hy[size_t(c) * P + p]))));
        }
    }
    std::sort(ms[i].begin(), ms[i].end());
    const float med = ms[i][ms[i].size() / 2];
    printf("{\"N\": %d, \"P\": %d, \"C\": %d, \"dtype\": \"fp16\", \"variant\": \"%s\", \"ms\": %.4f, \"GBps\": %.0f, "
           "\"max_err\": %.2e}\n", N, P, C, variants[i].first.c_str(), med, gb / (med / 1e3), err);
  }
  fflush(stdout);
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(b));
  CHECK(cudaFree(b16));
}

static void print_regs() {
  cudaFuncAttributes f;
  CHECK(cudaFuncGetAttributes(&f, kf_ew_tiled_kernel<ChainF, 0, float, float, float>));
  printf("{\"kernel\": \"shipped\", \"regs\": %d}\n", f.numRegs);
  CHECK(cudaFuncGetAttributes(&f, kf_ew_tiled_kernel<ChainF, 0, __half, __half, __half>));
  printf("{\"kernel\": \"shipped_f16\", \"regs\": %d}\n", f.numRegs);
  CHECK(cudaFuncGetAttributes(&f, kf_ew_tiled_kernel<ChainF, 0, __half, __half, float>));
  printf("{\"kernel\": \"shipped_f16_fp32_bias\", \"regs\": %d}\n", f.numRegs);
  CHECK(cudaFuncGetAttributes(&f, simple_kernel));
  printf("{\"kernel\": \"simple\", \"regs\": %d}\n", f.numRegs);
  CHECK(cudaFuncGetAttributes(&f, simple_t_kernel<64>));
  printf("{\"kernel\": \"simple64\", \"regs\": %d}\n", f.numRegs);
  CHECK(cudaFuncGetAttributes(&f, reg_t_kernel<64>));
  printf("{\"kernel\": \"regsimple64\", \"regs\": %d}\n", f.numRegs);
}

int main() {
  print_regs();
  run_case(128, 65536, 64);  // KernelBench 2's conv_transpose2d output
  run_case(128, 15876, 64);  // 73's conv2d output (126 x 126)
  run_case(128, 64516, 64);  // 4's (254 x 254)
  run_case(16, 16384, 256);
  run_case(128, 65536, 16);
  run_case(64, 16384, 32);
  run_case(32, 3844, 128);   // 62 x 62, positions not a multiple of the tile
  run_case_half(128, 65536, 64);
  run_case_half(128, 65536, 16);
  run_case_half(32, 3844, 128);
  run_case_half(64, 16384, 32);
  return 0;
}
