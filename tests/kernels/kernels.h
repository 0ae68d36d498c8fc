/** \file kernels.h
 * The shared kernel suite: the kernels of the seed (spec §13) built with metile::Builder, each
 * case with input generators and a float64 reference, and a harness that runs a case on a named
 * device through the C API. Every device test, the text round-trip tests and the parser fuzz
 * corpus draw from here, so a new kernel added once is checked everywhere.
 */
#pragma once

#include <metile/metile.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tile_ir.h"

namespace metile::kernels {

// ---- Kernels (spec §13). Sizes are compile-time constants (constexprs of the seed). ----

Program vector_add(int block);
/** One program per row; three tile_range passes: running max, sum of exp, store. */
Program softmax(int block);
/** Two passes: Σx and Σx², then (x - mean) * inv_std * W + B. */
Program layernorm(int block);
Program rmsnorm(int block);

enum class Epilogue { none, relu, gelu };

struct GemmConfig {
  int block_m = 32, block_n = 32, block_k = 32;
  bool bounds = false;  // ragged M, N, K through tile_load/tile_store bounds
  Epilogue epilogue = Epilogue::none;
  std::string swizzle;  // "" or a tile_swizzle pattern
  int swizzle_block = 2;
  DType dtype = DType::f32;  // of A and B; C and the accumulator are f32
  DType b_dtype = DType::invalid;  // of B where it differs from A's (FP8's e4m3 x e5m2)
  bool bias = false;         // C += bias[col]: a row broadcast in the epilogue (parameter Bias)
  // One program walks tiles pid, pid + num_programs, .. (persistent_range; row-major tile
  // order) instead of one program per tile: a loop over tiles around the K loop.
  bool persistent = false;
  bool trans_b = false;      // B given N x K (row-major): C = A @ B^T, dot(a, trans(tile_load(B)))
};
/** A plain GEMM's config: `dtype` inputs, BLOCK_M x BLOCK_N x BLOCK_K tiles, ragged with `bounds`. */
inline GemmConfig gemm_config(DType dtype, int bm, int bn, int bk, bool bounds = false) {
  GemmConfig g;
  g.block_m = bm;
  g.block_n = bn;
  g.block_k = bk;
  g.dtype = dtype;
  g.bounds = bounds;
  return g;
}
/** C = A @ B (row-major, f32 C) with tile_load / dot / tile_store and an optional epilogue. */
Program gemm(const GemmConfig& config);

/** x * sigmoid(1.702 x), written x / (1 + exp(0 - 1.702 x)) as in the seed. */
Program gelu(int block);
/** x / (1 + exp(0 - x)). */
Program silu(int block);
/** gelu(gate) * up. */
Program geglu(int block);

/**
 * The seed's batched radix-2 FFT of length n (a power of two, 2..1024) in one threadgroup of n
 * threads (batch = grid): bit-reversed scatter into shared memory, twiddles in shared memory,
 * the first min(5, log2 n) stages through simd_shuffle_xor, the rest through shared memory with
 * barriers.
 */
Program fft(int n);

/** Hist[X[i]] += 1 for i < N, one atomic per element, every program contending. */
Program histogram(int block);
/** Out[0] += sum of the program's block of X: one f32 atomic per program (a scalar pointer). */
Program atomic_sum(int block);

/** One program of every kernel above (for round-trip tests and the fuzz corpus). */
std::vector<Program> all_programs();

// ---- Cases ----

/** A host array; values are kept as double and converted to `dtype` at the device. */
struct Array {
  DType dtype = DType::f32;
  std::vector<double> values;
};

struct Arg {
  enum class Kind { buffer, i32 };
  Kind kind = Kind::buffer;
  Array data;           // buffer: initial contents
  bool output = false;  // buffer: read back after the launch
  int64_t i = 0;        // i32 scalar
};

struct Case {
  std::string name;  // "softmax/64x300"
  Program program;
  std::vector<Arg> args;
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::vector<std::vector<double>> expected;  // float64 reference, one per output argument
  double rtol = 1e-5, atol = 1e-5;            // |got - want| <= atol + rtol * |want|
  int allow_tf32 = 0;  // compile option: 1 lets f32 dot round its inputs to TF32
  int dot_precision = 0;  // compile option (metile_dot_precision); with allow_tf32 -1
};

/** Every case of the suite, ragged sizes included ("kernel/shape"). */
std::vector<std::string> case_names();
/** Builds the case: program, deterministic inputs and reference. Throws for an unknown name. */
Case make_case(const std::string& name);

// ---- Harness ----

/** `values` as `dtype` elements in memory (f16/bf16 rounded to nearest even, integers wrapped). */
std::vector<uint8_t> encode(DType dtype, const std::vector<double>& values);
/** One `dtype` element in memory as a double. */
double decode(DType dtype, const uint8_t* element);

struct RunResult {
  metile_status status = METILE_OK;
  std::string message;                       // metile_last_error() when status != OK
  std::vector<std::vector<double>> outputs;  // one per output argument
};

/**
 * Runs the case on the named device through the C API (parse of the printed program, compile
 * with exact f32 dot, buffers, launch, synchronize, read back).
 */
RunResult run_case(const std::string& device, const Case& c);

/**
 * Compares `got` with `want` elementwise with the case's tolerances; returns "" when they agree,
 * else a description of the first mismatches.
 */
std::string compare(const std::vector<std::vector<double>>& got,
                    const std::vector<std::vector<double>>& want, double rtol, double atol);

}  // namespace metile::kernels
