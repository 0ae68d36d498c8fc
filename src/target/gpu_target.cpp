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
    g.matrix_atoms = {Atom::simdgroup_8x8x8_f32, Atom::simdgroup_8x8x8_f16};
    return g;
  }();
  return t;
}

GpuTarget apple_gpu_target(int family, bool metal4) {
  GpuTarget t = apple_gpu_target();
  t.family = family;
  if (metal4 && family >= kAppleTensorOpsFamily) {
    // Before simdgroup_matrix, which stays for the dots whose accumulator array would not fit.
    t.matrix_atoms.insert(t.matrix_atoms.begin(), {Atom::tensor_ops_8x8x8_f32, Atom::tensor_ops_8x8x8_f16,
                                                   Atom::tensor_ops_8x8x8_bf16});
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
    g.matrix_atoms = {Atom::mma_m16n8k8_tf32, Atom::mma_m16n8k16_f16, Atom::mma_m16n8k16_bf16};
    return g;
  }();
  return t;
}

GpuTarget nvidia_gpu_target(const std::string& arch) {
  GpuTarget t = nvidia_gpu_target();
  if (arch == "sm_90" || arch == "sm_90a") {
    t.threadgroup_memory_bytes = 227 * 1024;
    t.warpgroup_atoms = {Atom::wgmma_m64n8k16_f16, Atom::wgmma_m64n8k16_bf16, Atom::wgmma_m64n8k8_tf32,
                         Atom::wgmma_m64n8k32_e4m3, Atom::wgmma_m64n8k32_e5m2};  // compiled for sm_90a
  }
  if (arch == "sm_80" || arch == "sm_87") t.threadgroup_memory_bytes = 163 * 1024;
  if (arch == "sm_86" || arch == "sm_89") t.threadgroup_memory_bytes = 99 * 1024;
  return t;
}

}  // namespace metile
