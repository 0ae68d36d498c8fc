/** \file sim_kernel.h
 * metal-sim's compile and launch API: MSL text + its signature -> a shared object (build_msl),
 * bytes -> a loaded kernel (load_msl), and launches of threadgroups over the worker pool. The two
 * compile halves stay apart so the compile cache can keep the bytes.
 */
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/host/shared_object.h"
#include "codegen/metal/msl_signature.h"

namespace metile::metal_sim {

/** Host pool workers that run threadgroups (beside the launching threads). Each thread that runs
 *  them maps fiber stacks for a whole threadgroup (two mappings per thread with its guard page);
 *  31 keep that far below the kernel's default limit of 65530 mappings. */
inline constexpr int kMaxPoolWorkers = 31;

/** A launch argument: `pointer` for buffers, `bits` (the value, zero-extended) for scalars. */
struct SimArg {
  void* pointer = nullptr;
  uint64_t bits = 0;
  static SimArg buffer(void* p) { return {p, 0}; }
  static SimArg scalar(uint64_t bits) { return {nullptr, bits}; }
};

/** The C++ translation unit metal-sim compiles for `msl`: prepared MSL, then the trampoline. */
std::string translation_unit(std::string_view msl, const MslSignature& signature);

/** Compiles to a shared object. Throws METILE_ERROR_COMPILE (with clang's log, or when one
 *  thread's frames need more than kMaxThreadStackBytes) or METILE_ERROR_INVALID_ARGUMENT (a
 *  malformed signature). `stack_bytes`, if given, receives the stack a thread needs (see
 *  MslSignature::stack_bytes). */
std::vector<uint8_t> build_msl(std::string_view msl, const MslSignature& signature,
                               uint64_t* stack_bytes = nullptr);

/** Checks that `msl` (no trampoline, no signature) compiles under the shim with -Werror. */
void check_msl(std::string_view msl, std::string_view file_name);


class SimKernel {
 public:
  const MslSignature& signature() const { return signature_; }

  /**
   * Runs `groups` threadgroups of `threads` threads each and returns when all finished. `args`
   * holds one SimArg per buffer and scalar argument of the signature, in order. Throws
   * METILE_ERROR_INVALID_ARGUMENT for a bad launch and METILE_ERROR_DEVICE when a threadgroup
   * failed (a barrier not reached by every thread, threadgroup memory over the limit, ...) or
   * was stopped. `host_stops`: the launch's time limit and metile_cancel_launches stop it from
   * the host (LaunchPlan::stop); without, only the kernel's own stop word can, as on a GPU.
   */
  void launch(std::array<uint32_t, 3> groups, std::array<uint32_t, 3> threads,
              const std::vector<SimArg>& args, bool host_stops = true) const;

 private:
  friend SimKernel load_msl(const std::vector<uint8_t>& bytes, MslSignature signature);
  std::shared_ptr<host::SharedObject> library_;
  void* entry_ = nullptr;
  MslSignature signature_;
};

/** dlopens a build_msl() result. Throws METILE_ERROR_DEVICE when it cannot be loaded. */
SimKernel load_msl(const std::vector<uint8_t>& bytes, MslSignature signature);

/** build_msl + load_msl. */
SimKernel compile_msl(std::string_view msl, const MslSignature& signature);

/** Maximum threads per threadgroup (Apple GPUs). */
inline constexpr uint32_t kMaxThreadsPerGroup = 1024;

}  // namespace metile::metal_sim
