/** \file cpu_kernel.h
 * A compiled cpu kernel: the shared object loaded from memory, its entry point called through
 * libffi with the kernel's native C signature (one ffi_cif prepared at load), and launches that
 * spread program-instance ranges over the thread pool.
 */
#pragma once

#include <ffi.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace metile::cpu {

/** A shared object loaded from bytes (memfd, or a temporary file where memfd is unavailable). */
class SharedObject {
 public:
  SharedObject(const std::vector<uint8_t>& bytes, const std::string& label);
  ~SharedObject();
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;
  /** The symbol's address; throws METILE_ERROR_DEVICE when it is missing. */
  void* symbol(const char* name) const;

 private:
  void* handle_ = nullptr;
  int fd_ = -1;  // kept open while loaded, so the /proc/self/fd name stays unique
  std::string label_;
};

class CpuKernel : public Kernel, public std::enable_shared_from_this<CpuKernel> {
 public:
  CpuKernel(std::shared_ptr<const Program> program, const Artifact& artifact);

  std::unique_ptr<PreparedLaunch> prepare(const Grid& grid, std::vector<LaunchArg> args) override;
  void launch(const Grid& grid, std::vector<LaunchArg> args) override;

  /** Runs every program instance of `grid`. `argv` has one slot per parameter plus one that
   * this call fills with the instance range. */
  void execute(const Grid& grid, void** argv) const;
  /** Writes argument `i` into its ffi slot. */
  void fill_slot(size_t i, const LaunchArg& arg, uint64_t* slot) const;
  size_t num_params() const { return program_->params.size(); }

 private:
  std::shared_ptr<const Program> program_;
  SharedObject object_;
  void (*entry_)() = nullptr;
  uint64_t stack_bytes_ = 0;
  std::vector<ffi_type*> types_;
  ffi_cif cif_{};
  // Measured cost of one program instance on one thread, for running small grids inline.
  mutable std::atomic<double> ns_per_instance_{0};
};

}  // namespace metile::cpu
