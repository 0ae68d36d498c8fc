// The ceiling of metile's CUDA dot path on this GPU: how many TFLOP/s the warp-level matrix
// instruction (mma.sync m16n8k16 f16/bf16 -> f32, m16n8k8 tf32 -> f32) delivers with no memory
// traffic at all (operands stay in registers, many warps, several independent accumulator
// chains per warp), next to cuBLAS's GEMM (which on Hopper runs the warpgroup instruction,
// wgmma) in the same process. If the register-only mma.sync rate is under some fraction of
// cuBLAS, no mma.sync GEMM can reach that fraction.
//
//   nvcc -O3 -gencode arch=compute_90,code=sm_90 bench/mma_sync_peak.cu -lcublas -o mma_sync_peak
//   ./mma_sync_peak [--quick]
//
// Method: each configuration (instruction, warps per block, blocks per SM, independent chains)
// runs 2 warm-up launches and 7 timed ones (CUDA events around each launch), the median counts;
// FLOPs = 2*M*N*K per instruction per warp. The SM clock is read from clock64() over the
// kernel and the event time (clocks are not locked). cuBLAS: cublasGemmEx on random data
// (never zeros), A and B f16/bf16 with f32 C and f32 compute (what metile's GEMM computes),
// f16 also with f16 C (torch.matmul's), and f32 with CUBLAS_COMPUTE_32F_FAST_TF32; median of
// 15 timed calls after 3 warm-ups. Every CUDA and cuBLAS call's status is checked.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,            \
                   cudaGetErrorString(e_));                                     \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
#define CB(x)                                                                          \
  do {                                                                                 \
    cublasStatus_t s_ = (x);                                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d %s: cublas status %d\n", __FILE__, __LINE__, #x,     \
                   static_cast<int>(s_));                                              \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

enum Op { kF16 = 0, kBF16 = 1, kTF32 = 2 };
static const char* kOpName[] = {"f16 m16n8k16", "bf16 m16n8k16", "tf32 m16n8k8"};
static const double kFlopsPerMma[] = {2.0 * 16 * 8 * 16, 2.0 * 16 * 8 * 16, 2.0 * 16 * 8 * 8};

template <int OP>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if (OP == kF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if (OP == kBF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

__device__ __forceinline__ uint32_t hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

// An operand register of random, finite, moderate values (|x| in [0.5, 1)): two 16-bit halves
// for f16/bf16, one f32 (read as tf32) for tf32. Zeros would run faster than real data.
template <int OP>
__device__ __forceinline__ uint32_t operand(uint32_t seed) {
  uint32_t h = hash(seed);
  if (OP == kF16) return (0x3800u | (h & 0x83ffu)) | ((0x3800u | ((h >> 16) & 0x83ffu)) << 16);
  if (OP == kBF16) return (0x3f00u | (h & 0x807fu)) | ((0x3f00u | ((h >> 16) & 0x807fu)) << 16);
  return 0x3f000000u | (h & 0x807fe000u);
}

// CHAINS independent accumulators per warp so the instruction's latency is hidden inside
// one warp as well as across warps. cycles[blockIdx] = clock64() span of the block's warp 0.
template <int OP, int CHAINS>
__global__ void peak(float* out, long long* cycles, int iters) {
  uint32_t a[4], b[2];
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < 4; ++i) a[i] = operand<OP>(t * 8 + i);
  for (int i = 0; i < 2; ++i) b[i] = operand<OP>(t * 8 + 4 + i);
  float acc[CHAINS][4];
  for (int c = 0; c < CHAINS; ++c)
    for (int j = 0; j < 4; ++j) acc[c][j] = 0.f;
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) mma<OP>(acc[c], a, b);
  }
  const long long t1 = clock64();
  float s = 0.f;
  for (int c = 0; c < CHAINS; ++c)
    for (int j = 0; j < 4; ++j) s += acc[c][j];
  out[t] = s;  // every result is written, so no chain is dead code
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

struct PeakRow {
  int op, warps, blocks_per_sm, chains;
  double tflops, sm_mhz, flops_per_sm_clk;
};

template <int OP, int CHAINS>
PeakRow run_peak(int sms, int warps, int blocks_per_sm, int iters) {
  const int blocks = sms * blocks_per_sm, threads = warps * 32;
  float* out;
  long long* cyc;
  CK(cudaMalloc(&out, sizeof(float) * blocks * threads));
  CK(cudaMalloc(&cyc, sizeof(long long) * blocks));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  std::vector<long long> c(blocks);
  double mhz_at_median = 0;
  std::vector<std::pair<float, double>> runs;
  for (int r = 0; r < 9; ++r) {
    CK(cudaEventRecord(e0));
    peak<OP, CHAINS><<<blocks, threads>>>(out, cyc, iters);
    CK(cudaGetLastError());
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (r < 2) continue;
    CK(cudaMemcpy(c.data(), cyc, sizeof(long long) * blocks, cudaMemcpyDeviceToHost));
    long long mx = *std::max_element(c.begin(), c.end());
    runs.push_back({t, mx / (t * 1e3)});  // cycles of the longest block over the launch's time
  }
  std::sort(runs.begin(), runs.end());
  const auto med = runs[runs.size() / 2];
  mhz_at_median = med.second;
  const double flops = kFlopsPerMma[OP] * CHAINS * double(iters) * blocks * warps;
  PeakRow row{OP, warps, blocks_per_sm, CHAINS, flops / (med.first * 1e-3) / 1e12, mhz_at_median,
              flops / (med.first * 1e-3) / sms / (mhz_at_median * 1e6)};
  CK(cudaFree(out));
  CK(cudaFree(cyc));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return row;
}

template <int OP>
void sweep(int sms, bool quick, std::vector<PeakRow>* rows) {
  // Warps per SM 4..32 in blocks of 4 or 8 warps; 2, 4 or 8 independent chains per warp.
  const int iters = quick ? 2048 : 8192;
  for (int warps : {4, 8})
    for (int bps : {1, 2, 4}) {
      if (quick && bps == 1) continue;
      rows->push_back(run_peak<OP, 2>(sms, warps, bps, iters));
      rows->push_back(run_peak<OP, 4>(sms, warps, bps, iters));
      rows->push_back(run_peak<OP, 8>(sms, warps, bps, iters));
    }
}

__global__ void fill(uint16_t* p16, float* p32, size_t n, uint32_t seed, int kind) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t h = hash(uint32_t(i) * 2654435761u ^ seed);
    const float v = (h >> 8) * (2.0f / 16777216.0f) - 1.0f;  // uniform [-1, 1)
    if (kind == 0) p16[i] = __half_as_ushort(__float2half(v));
    else if (kind == 1) p16[i] = __bfloat16_as_ushort(__float2bfloat16(v));
    else p32[i] = v;
  }
}

struct BlasRow {
  const char* what;
  int n;
  double tflops;
};

BlasRow run_cublas(cublasHandle_t h, const char* what, int n, cudaDataType ab, cudaDataType ct,
                   cublasComputeType_t compute) {
  const size_t e = size_t(n) * n;
  const size_t ab_bytes = ab == CUDA_R_32F ? 4 : 2, c_bytes = ct == CUDA_R_32F ? 4 : 2;
  void *A, *B, *C;
  CK(cudaMalloc(&A, e * ab_bytes));
  CK(cudaMalloc(&B, e * ab_bytes));
  CK(cudaMalloc(&C, e * c_bytes));
  const int kind = ab == CUDA_R_16F ? 0 : ab == CUDA_R_16BF ? 1 : 2;
  fill<<<1024, 256>>>(static_cast<uint16_t*>(A), static_cast<float*>(A), e, 1, kind);
  fill<<<1024, 256>>>(static_cast<uint16_t*>(B), static_cast<float*>(B), e, 2, kind);
  CK(cudaGetLastError());
  const float alpha = 1.f, beta = 0.f;
  const __half alpha_h = __float2half(1.f), beta_h = __float2half(0.f);
  const bool half_scale = compute == CUBLAS_COMPUTE_16F;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 18; ++r) {
    CK(cudaEventRecord(e0));
    CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n,
                    half_scale ? static_cast<const void*>(&alpha_h) : &alpha, A, ab, n, B, ab, n,
                    half_scale ? static_cast<const void*>(&beta_h) : &beta, C, ct, n, compute,
                    CUBLAS_GEMM_DEFAULT));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CK(cudaFree(A));
  CK(cudaFree(B));
  CK(cudaFree(C));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return {what, n, 2.0 * n * double(n) * n / (ms[ms.size() / 2] * 1e-3) / 1e12};
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  std::vector<PeakRow> rows;
  sweep<kF16>(p.multiProcessorCount, quick, &rows);
  sweep<kBF16>(p.multiProcessorCount, quick, &rows);
  sweep<kTF32>(p.multiProcessorCount, quick, &rows);
  std::printf("\nmma.sync, registers only: op, warps/block, blocks/SM, chains/warp -> TFLOP/s (SM MHz, FLOP/SM/clk)\n");
  double best[3] = {0, 0, 0};
  for (const PeakRow& r : rows) {
    std::printf("  %-14s %2d warps x %d blocks/SM, %d chains: %7.1f TFLOP/s  (%4.0f MHz, %5.0f FLOP/SM/clk)\n",
                kOpName[r.op], r.warps, r.blocks_per_sm, r.chains, r.tflops, r.sm_mhz, r.flops_per_sm_clk);
    best[r.op] = std::max(best[r.op], r.tflops);
  }
  cublasHandle_t h;
  CB(cublasCreate(&h));
  std::vector<BlasRow> blas;
  for (int n : {4096, 8192}) {
    if (quick && n == 8192) continue;
    blas.push_back(run_cublas(h, "f16 in, f32 out", n, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F));
    blas.push_back(run_cublas(h, "f16 in, f16 out", n, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F));
    blas.push_back(run_cublas(h, "bf16 in, f32 out", n, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F));
    blas.push_back(run_cublas(h, "tf32 (f32 in/out)", n, CUDA_R_32F, CUDA_R_32F,
                              CUBLAS_COMPUTE_32F_FAST_TF32));
  }
  CB(cublasDestroy(h));
  std::printf("\ncuBLAS cublasGemmEx, n^3, median of 15:\n");
  for (const BlasRow& b : blas) std::printf("  %-18s %5d^3: %7.1f TFLOP/s\n", b.what, b.n, b.tflops);
  std::printf("\nsummary: best mma.sync (registers only) vs cuBLAS at 4096^3 (the same input type, f32 out)\n");
  const double blas4096[3] = {blas[0].tflops, blas[2].tflops, blas[3].tflops};
  for (int op = 0; op < 3; ++op)
    std::printf("  %-14s peak %7.1f TFLOP/s, cuBLAS %7.1f -> ceiling %.2fx cuBLAS\n", kOpName[op], best[op],
                blas4096[op], best[op] / blas4096[op]);
  return 0;
}
