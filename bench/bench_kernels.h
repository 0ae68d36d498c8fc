/** \file bench_kernels.h
 * The kernels the cpu benchmarks run, written the way a user of the builder (or of the Python
 * frontend) would write them, with block sizes chosen for a CPU.
 */
#pragma once

#include <cstddef>

#include "ir/tile_ir.h"

namespace metile::bench {

/** out[i] = x[i] + y[i], `block` elements per program, masked tail. */
Program vector_add(int block);
/** Row softmax, one program per row, the whole row (`cols` <= block) in one tile. */
Program softmax(int block);
/** Row layernorm with weight and bias, one program per row. */
Program layernorm(int block);
/** C = A @ B (f32, row-major), tile_load + dot over K, block_m x block_n per program. */
Program gemm(int block_m, int block_n, int block_k);
/** A kernel that does nothing (launch overhead). */
Program empty();

/** The plain C++ reference loop (compiled with -O3 -march=native, one thread). */
void plain_vector_add(const float* x, const float* y, float* out, size_t n);

}  // namespace metile::bench
