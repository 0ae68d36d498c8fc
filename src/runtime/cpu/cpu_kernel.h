/** \file cpu_kernel.h
 * A compiled cpu kernel: the shared object loaded from memory, its entry point called through
 * libffi with the kernel's native C signature (one ffi_cif prepared at load), and launches that
 * spread program-instance ranges over the thread pool.
 */
#pragma once

#include <cstdint>
#include <ffi.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/host/shared_object.h"

namespace metile::cpu {

/** True when the buffers a launch passes total at least METILE_CPU_STREAM_MIN_BYTES (default:
 * the last-level cache's size): what it stores would leave the cache before anyone reads it, so
 * kernels write consecutive unmasked tiles with non-temporal stores (cpu_cpp's streamed stores). */
bool streams_past_cache(const std::vector<LaunchArg>& args);

class CpuKernel : public Kernel, public std::enable_shared_from_this<CpuKernel> {
 public:
  CpuKernel(std::shared_ptr<const Program> program, const Artifact& artifact);

  std::unique_ptr<PreparedLaunch> prepare(const Grid& grid, std::vector<LaunchArg> args) override;
  void launch(const Grid& grid, std::vector<LaunchArg> args) override;

  /** Runs every program instance of `grid`. `argv` has one slot per parameter plus one that
   * this call fills with the instance range. `stream`: stores may bypass the cache (see
   * streams_past_cache). */
  void execute(const Grid& grid, void** argv, bool stream) const;
  /** Writes argument `i` into its ffi slot. */
  void fill_slot(size_t i, const LaunchArg& arg, uint64_t* slot) const;
  size_t num_params() const { return program_->params.size(); }

 private:
  std::shared_ptr<const Program> program_;
  host::SharedObject object_;
  void (*entry_)() = nullptr;
  uint64_t stack_bytes_ = 0;
  std::vector<ffi_type*> types_;
  ffi_cif cif_{};
  // Measured cost of one program instance on one thread, for running small grids inline.
  mutable std::atomic<double> ns_per_instance_{0};
};

}  // namespace metile::cpu
