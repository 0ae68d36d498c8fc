#include "target/gpu_target.h"

namespace metile {

const GpuTarget& apple_gpu_target() {
  static const GpuTarget t = [] {
    GpuTarget g;
    g.name = "apple";
    g.family = kAppleDefaultFamily;
    g.dialect = "msl";
    g.simd_width = 32;
    g.max_threads = 1024;
    g.threadgroup_memory_bytes = 32768;
    g.cancel_threadgroup_bytes = 16;  // msl.cpp, cancel_prologue
    g.vector_bytes = 16;
    g.vector_needs_alignment = false;  // packed_floatN / packed_halfN
    g.vector_dtypes = {DType::f32, DType::f16, DType::i32, DType::u32, DType::i8, DType::u8};
    // MSL: atomic_int and atomic_uint have every op; atomic_float only fetch_add (Metal 3).
    g.atomic_dtypes = {DType::i32, DType::u32, DType::f32};
    g.atomic_f32_ops = {OpKind::ATOMIC_ADD};
    g.matrix_atoms = {
        // bf16 operands are widened to f32 (exact) and use the f32 matrices.
        {"simdgroup_matrix", 8, 8, 8, DType::f32, DType::f32, false, simdgroup_8x8_fragment()},
        {"simdgroup_matrix", 8, 8, 8, DType::f16, DType::f32, false, simdgroup_8x8_fragment()},
    };
    return g;
  }();
  return t;
}

GpuTarget apple_gpu_target(int family, bool metal4) {
  GpuTarget t = apple_gpu_target();
  t.family = family;
  if (metal4 && family >= kAppleTensorOpsFamily) {
    // matmul2d takes float, half and bfloat operands with a float destination (the type table
    // of MetalPerformancePrimitives' MPPTensorOpsMatMul2d.h). The register layout is ours (the
    // 8x8 fragment): the cooperative tensor's own is implementation-defined, so registers meet
    // it in threadgroup memory. First in the list: dot_atom takes the first that fits.
    std::vector<MatrixAtom> atoms;
    for (DType ab : {DType::f32, DType::f16, DType::bf16}) {
      MatrixAtom a{"tensor_ops", 8, 8, 8, ab, DType::f32, false, simdgroup_8x8_fragment()};
      a.acc_through_threadgroup = true;
      a.relaxed = ab == DType::f32;  // TF32 on M5-class parts: only where a dot allows "tf32"
      atoms.push_back(a);
    }
    atoms.insert(atoms.end(), t.matrix_atoms.begin(), t.matrix_atoms.end());
    t.matrix_atoms = std::move(atoms);
  }
  return t;
}

int apple_family_from_name(const std::string& name) {
  for (int f = 1; f <= 10; ++f)
    if (name == "apple" + std::to_string(f)) return f;
  return -1;
}

const GpuTarget& nvidia_gpu_target() {
  static const GpuTarget t = [] {
    GpuTarget g;
    g.name = "nvidia";
    g.dialect = "cuda";
    g.simd_width = 32;
    g.max_threads = 1024;
    g.threadgroup_memory_bytes = 48 * 1024;
    g.threadgroup_arrays_alias = true;
    g.vector_bytes = 16;
    g.vector_needs_alignment = true;
    g.chunk_bytes = 16;
    g.async_copies = true;  // cp.async (sm_80+, the matrix atoms' floor too)
    g.cancel_at_entry = true;  // cuda.cpp, mt_cancel_leave
    // H100, seed softmax 16384x1024: 1.67 TB/s with 256 threads (4 each), 2.17 with 128
    // (bench/results/cuda_rows_h100.md, run 4); at 4096 columns 256 threads of 16 stay best.
    g.reduce_elements_per_thread = 8;
    g.simd_reduce_instruction = false;  // __reduce_*_sync is integer-only: floats shuffle
    // atomicAdd/Max/Min/Exch/CAS on 32- and 64-bit integers; f32 max/min/cas loop on atomicCAS.
    g.atomic_dtypes = {DType::i32, DType::u32, DType::i64, DType::f32};
    g.atomic_f32_ops = {OpKind::ATOMIC_ADD, OpKind::ATOMIC_MAX, OpKind::ATOMIC_MIN,
                        OpKind::ATOMIC_XCHG, OpKind::ATOMIC_CAS};
    g.vector_dtypes = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u32, DType::i64,
                       DType::i8, DType::u8};
    g.dot_default = DotPrecision::tf32x3;  // 3xTF32 on tensor cores: near f32, far faster than FMAs
    g.matrix_atoms = {
        {"mma.sync", 16, 8, 8, DType::f32, DType::f32, true, mma_m16n8_f32_c(), false, true},  // tf32
        {"mma.sync", 16, 8, 16, DType::f16, DType::f32, false, mma_m16n8_f32_c()},
        {"mma.sync", 16, 8, 16, DType::bf16, DType::f32, false, mma_m16n8_f32_c()},
    };
    return g;
  }();
  return t;
}

GpuTarget nvidia_gpu_target(const std::string& arch) {
  GpuTarget t = nvidia_gpu_target();
  if (arch == "sm_90" || arch == "sm_90a") {
    t.threadgroup_memory_bytes = 227 * 1024;
    // wgmma.mma_async m64nNk16 (N a multiple of 8 up to 256), compiled for sm_90a.
    t.warpgroup_atoms = {
        {"wgmma", 64, 8, 16, DType::f16, DType::f32, false, mma_m16n8_f32_c()},
        {"wgmma", 64, 8, 16, DType::bf16, DType::f32, false, mma_m16n8_f32_c()},
        // tf32: m64nNk8, both operands K-major (B from an N x K tile: dot_choices.cpp).
        {"wgmma", 64, 8, 8, DType::f32, DType::f32, true, mma_m16n8_f32_c()},
        // FP8: m64nNk32, both operands K-major, A's format names the atom and B's may be the
        // other one (dot_choices.cpp).
        {"wgmma", 64, 8, 32, DType::f8e4m3, DType::f32, false, mma_m16n8_f32_c()},
        {"wgmma", 64, 8, 32, DType::f8e5m2, DType::f32, false, mma_m16n8_f32_c()},
    };
  }
  if (arch == "sm_80" || arch == "sm_87") t.threadgroup_memory_bytes = 163 * 1024;
  if (arch == "sm_86" || arch == "sm_89") t.threadgroup_memory_bytes = 99 * 1024;
  return t;
}

}  // namespace metile
