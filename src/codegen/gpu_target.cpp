#include "codegen/gpu_target.h"

namespace metile {

const GpuTarget& apple_gpu_target() {
  static const GpuTarget t = [] {
    GpuTarget g;
    g.name = "apple";
    g.dialect = "msl";
    g.simd_width = 32;
    g.max_threads = 1024;
    g.threadgroup_memory_bytes = 32768;
    g.vector_bytes = 16;
    g.vector_needs_alignment = false;  // packed_floatN / packed_halfN
    g.vector_dtypes = {DType::f32, DType::f16, DType::i32, DType::u32, DType::i8, DType::u8};
    g.matrix_atoms = {
        {"simdgroup_matrix", 8, 8, 8, DType::f32, DType::f32, false},
        {"simdgroup_matrix", 8, 8, 8, DType::f16, DType::f32, false},
        {"simdgroup_matrix", 8, 8, 8, DType::bf16, DType::f32, false},
    };
    return g;
  }();
  return t;
}

const GpuTarget& nvidia_gpu_target() {
  static const GpuTarget t = [] {
    GpuTarget g;
    g.name = "nvidia";
    g.dialect = "cuda";
    g.simd_width = 32;
    g.max_threads = 1024;
    g.threadgroup_memory_bytes = 48 * 1024;
    g.vector_bytes = 16;
    g.vector_needs_alignment = true;
    g.vector_dtypes = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u32, DType::i64,
                       DType::i8, DType::u8};
    g.matrix_atoms = {
        {"mma.sync", 16, 8, 8, DType::f32, DType::f32, true},  // tf32
        {"mma.sync", 16, 8, 16, DType::f16, DType::f32, false},
        {"mma.sync", 16, 8, 16, DType::bf16, DType::f32, false},
    };
    return g;
  }();
  return t;
}

}  // namespace metile
