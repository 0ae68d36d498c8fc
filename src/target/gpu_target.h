/** \file gpu_target.h
 * What lowering, the passes and the emitters need to know about a GPU family: simd width,
 * thread and threadgroup-memory limits, vector access widths, matrix units. Everything
 * target-specific in the GPU pipeline reads it from here, so a new target (CUDA after Metal) is
 * one more description plus its dialect file.
 */
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ops.h"
#include "ir/dot_precision.h"
#include "ir/types.h"
#include "target/matrix_atom.h"

namespace metile {

struct GpuTarget {
  /** What a dot without input_precision (and no compile default) means here: f32 accuracy by
   * the fastest means the target has (docs/semantics.md, "dot precision"). */
  DotPrecision dot_default = DotPrecision::ieee;
  std::string name;     // "apple", "nvidia": the vendor (devices add their own identity)
  /** Apple: the GPU family (MTLGPUFamilyApple<N>: 7 = M1, 8 = M2, 9 = M3/M4, 10 = M5); 0 elsewhere. */
  int family = 0;
  std::string dialect;  // "msl", "cuda": the emitter that writes its source
  int simd_width = 32;
  int max_threads = 1024;
  uint64_t threadgroup_memory_bytes = 32768;
  /**
   * The dialect places threadgroup arrays at byte offsets into one block (cuda's dynamic shared
   * memory), so arrays that are never live together may share bytes (allocate-threadgroup-memory).
   * Metal binds each array as an argument of its own: no sharing.
   */
  bool threadgroup_arrays_alias = false;
  /**
   * Threadgroup memory a kernel with cancel_points takes beside its arrays for the check (MSL:
   * the word through which thread 0 hands the stop word's value to the group, 16 bytes as Metal
   * rounds threadgroup memory); allocate-threadgroup-memory keeps it out of the arrays' limit.
   */
  uint64_t cancel_threadgroup_bytes = 0;
  /**
   * Every program also checks the stop word once, before its first write (insert-cancel-points):
   * a huge grid of programs without loops, or with loops shorter than a check's period, then
   * ends soon after a stop instead of running every program. Where the check is a read the
   * program issued at its start (cuda: an L2 read of a copy of the word in GPU memory) it costs
   * ~nothing; Metal's costs two barriers and a read of host memory, so its kernels check in
   * loops only.
   */
  bool cancel_at_entry = false;
  /**
   * Elements of one tile value a thread may hold (its share, kept in registers or an unrolled
   * array). Past this the compilers take minutes and the kernel spills or fails at launch (a
   * 2^24-element tile over 1024 threads needs 16384), so lowering refuses such tiles up front.
   */
  int64_t max_elements_per_thread = 1024;
  /**
   * Elements per thread the lowering aims for when it picks the thread count of a program that
   * reduces: each reduction costs every thread a fixed run of shuffles and barriers, which
   * more elements per thread amortize (others aim for 4).
   */
  int64_t reduce_elements_per_thread = 4;
  /**
   * The dialect reduces a simdgroup in one instruction (MSL simd_sum/max/min). Where false the
   * reduction is a tree of shuffles, one step per lane bit, so lowering shortens it to the lanes
   * that hold distinct values (simd_reduce's "lanes" attribute).
   */
  bool simd_reduce_instruction = true;
  /** Widest single memory access per thread, in bytes (16: float4). */
  int vector_bytes = 16;
  /**
   * Bytes a thread's chunk of the canonical layout aims to span for the kernel's narrowest
   * tile in global memory, so that 16-bit loads are whole 16-byte accesses (8 elements a
   * chunk; never fewer than 4 elements nor more than 8). 0: chunks of 4 elements whatever the
   * dtype (MSL's vectors stop at 4 elements, so wider chunks would gain nothing there).
   */
  int chunk_bytes = 0;
  /**
   * Vector accesses need the address aligned to the vector size. When false the dialect has
   * element-aligned vector types (MSL packed_float4) and needs no run-time alignment check.
   */
  bool vector_needs_alignment = true;
  /**
   * Device -> threadgroup copies run asynchronously (cp.async), so a K loop gains from a
   * multi-stage pipeline; where false they are plain loads and stores.
   */
  bool async_copies = false;
  /** Element types the dialect has vector types for (float4, half4, ...). */
  std::vector<DType> vector_dtypes;
  /** Warp-level atoms, in preference order: dot_atom takes the first that fits. */
  std::vector<Atom> matrix_atoms;
  /**
   * Warpgroup atoms (Hopper, sm_90a): 4 consecutive warps issue one m x (n-multiple) x k
   * product with both operands in threadgroup memory (src/target/swizzled_tile.h) and the
   * accumulator in registers, each warp holding 16 rows in the `c` fragment of its atom. Tried
   * before matrix_atoms for dots that fit (src/passes/dot_choices.cpp); empty where the target
   * has none.
   */
  std::vector<Atom> warpgroup_atoms;
  /** Element types with atomics on device memory, and the atomic ops f32 has among them. */
  std::vector<DType> atomic_dtypes;
  std::vector<OpKind> atomic_f32_ops;
};

/** Apple GPUs (Metal): 32-wide simdgroups, 32 KiB threadgroup memory, simdgroup_matrix 8x8. */
const GpuTarget& apple_gpu_target();

/** The Apple family apple_gpu_target() describes (M1 class: simdgroup_matrix, no tensor_ops). */
constexpr int kAppleDefaultFamily = 7;
/** The first Apple family dot lowers to Metal 4 tensor_ops on (with Metal 4 present). */
constexpr int kAppleTensorOpsFamily = 9;
/**
 * The Apple target of one GPU family. With `metal4` and family >= kAppleTensorOpsFamily, dot
 * prefers the "tensor_ops" atoms (MetalPerformancePrimitives mpp::tensor_ops::matmul2d on
 * cooperative tensors; f32, f16 and bf16 operands, f32 accumulator), keeping simdgroup_matrix
 * for the dots whose accumulator array would not fit threadgroup memory.
 */
GpuTarget apple_gpu_target(int family, bool metal4);
/**
 * "apple1" ... "apple10" -> 1 ... 10; -1 for any other text. The spelling used by the metal
 * device's DeviceInfo::architecture and by METILE_METAL_SIM_FAMILY.
 */
int apple_family_from_name(const std::string& name);
/** NVIDIA GPUs (CUDA): 32-wide warps, 48 KiB static shared memory, mma.sync atoms. */
const GpuTarget& nvidia_gpu_target();
/**
 * The NVIDIA target of one architecture ("sm_90"): the shared memory a block may opt into
 * (the CUDA device raises each kernel's dynamic limit to what it uses): 227 KiB on sm_90,
 * 163 KiB on sm_80/sm_87, 99 KiB on sm_86/sm_89, 48 KiB otherwise.
 */
GpuTarget nvidia_gpu_target(const std::string& arch);

}  // namespace metile
