/** \file metal_sim_abi.h
 * The binary interface between the metal-sim runtime (src/runtime/metal_sim) and kernels compiled
 * against metal_shim.h. Both sides include this file: the runtime from the source tree, the kernel
 * compile from the embedded copy. Plain C layout, so the two sides may be built by different
 * compilers (the library by gcc, the kernel by clang).
 *
 * A kernel library exports `metal_sim_abi_version` (== METAL_SIM_ABI_VERSION) and
 * `metal_sim_entry`, which the runtime starts once per simulated thread, each on its own fiber.
 */
#ifndef METILE_METAL_SIM_ABI_H
#define METILE_METAL_SIM_ABI_H

#include <stddef.h>
#include <stdint.h>

#define METAL_SIM_ABI_VERSION 2
/** Lanes per simdgroup (Apple GPUs: 32). */
#define METAL_SIM_SIMD_WIDTH 32
/** Bytes each lane may publish per simd collective (a 4-wide vector of 64-bit values). */
#define METAL_SIM_SLOT_BYTES 32

#ifdef __cplusplus
extern "C" {
#endif

/** The attribute a builtin kernel parameter carries; the trampoline passes it by this code. */
enum metal_sim_builtin {
  METAL_SIM_THREAD_POSITION_IN_GRID = 0,
  METAL_SIM_THREAD_POSITION_IN_THREADGROUP,
  METAL_SIM_THREAD_INDEX_IN_THREADGROUP,
  METAL_SIM_THREADGROUP_POSITION_IN_GRID,
  METAL_SIM_THREADS_PER_THREADGROUP,
  METAL_SIM_THREADGROUPS_PER_GRID,
  METAL_SIM_THREADS_PER_GRID,
  METAL_SIM_THREAD_INDEX_IN_SIMDGROUP,
  METAL_SIM_SIMDGROUP_INDEX_IN_THREADGROUP,
  METAL_SIM_THREADS_PER_SIMDGROUP,
  METAL_SIM_SIMDGROUPS_PER_THREADGROUP,
  METAL_SIM_BUILTIN_COUNT
};

struct metal_sim_thread;

/** Services the runtime offers to kernel code. The two sync calls may switch fibers. */
typedef struct metal_sim_ops {
  /** threadgroup_barrier: returns once every thread of the group reached the same barrier. */
  void (*threadgroup_barrier)(struct metal_sim_thread* t, uint32_t line, uint32_t column);
  /**
   * Simdgroup rendezvous: returns once every live lane of the caller's simdgroup arrived at the
   * same collective; `what` names it in diagnostics (a string literal of the kernel library).
   * On return, simd_active holds the lanes that took part.
   */
  void (*simd_sync)(struct metal_sim_thread* t, uint32_t line, uint32_t column, const char* what);
  /**
   * Storage of kernel-scope threadgroup variable number `id` (the same for every thread of the
   * group), allocated from the group's threadgroup memory on first use.
   */
  void* (*threadgroup_variable)(struct metal_sim_thread* t, uint32_t id, uint64_t size,
                                uint64_t align, const char* name);
  /**
   * The launch's host stop (its time limit, metile_cancel_launches): returns while the launch may
   * go on, else ends the thread's group there (it does not return). Called every few thousand
   * loop iterations.
   */
  void (*check_time)(struct metal_sim_thread* t);
} metal_sim_ops;

/** One simulated thread, as kernel code sees it. Written by the runtime, read by the shim. */
typedef struct metal_sim_thread {
  const metal_sim_ops* ops;
  void* owner;  // the runtime's record of this thread
  /** Builtin values, indexed by metal_sim_builtin; scalar builtins use component 0. */
  uint32_t builtin[METAL_SIM_BUILTIN_COUNT][3];
  /** This simdgroup's exchange area: slots[parity][lane], written before simd_sync. */
  unsigned char (*simd_slots)[METAL_SIM_SIMD_WIDTH][METAL_SIM_SLOT_BYTES];
  /** Lanes that took part in the last completed simd collective (bit i = lane i). */
  uint32_t simd_active;
  /** Which half of simd_slots the next collective uses; the shim flips it per collective. */
  uint32_t simd_parity;
  /** Loop iterations since the last check_time; counted by the shim. */
  uint32_t loop_ticks;
} metal_sim_thread;

/**
 * The kernel library's entry point: runs the kernel for one thread. args: one per signature
 * argument (device pointer, pointer to the scalar's bytes, threadgroup pointer; builtins: unused).
 */
typedef void (*metal_sim_entry_fn)(metal_sim_thread* t, void* const* args);

#ifdef __cplusplus
}
#endif

#endif  // METILE_METAL_SIM_ABI_H
