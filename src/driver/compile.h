/** \file compile.h
 * Compiling a program for a device, through the compile cache (src/cache): the one place that
 * computes cache keys and decides between a memory hit, a disk hit and a fresh build. The driver
 * sits above both the devices (src/runtime) and the cache, which know nothing of each other's
 * callers; the C API calls it.
 */
#pragma once

#include <memory>
#include <string>

#include "runtime/device.h"

namespace metile {

class Cache;

struct CompiledKernel {
  std::shared_ptr<const Program> program;
  CompileOptions options;
  std::shared_ptr<Kernel> kernel;
  /** The device the kernel was loaded on (autotuning synchronizes it around timed runs). */
  std::shared_ptr<Device> device;
  Artifact artifact;      // stage sources and launch metadata
  std::string cache_key;  // 64 hex digits
  bool from_cache = false;
  double seconds = 0;  // compile or load time
};

/**
 * Compiles (or finds in the cache) `program` for `device`: a kernel already loaded on this device
 * instance is reused; else a valid disk entry is loaded (devices with a cache_identity() only);
 * else the device builds it and the result is remembered in memory and published on disk.
 * CompileOptions::no_cache skips both levels. Thread-safe.
 */
std::shared_ptr<CompiledKernel> compile_kernel(Cache& cache, const std::shared_ptr<Device>& device,
                                               std::shared_ptr<const Program> program,
                                               const CompileOptions& options);
/** The same through the process-wide cache (global_cache()). */
std::shared_ptr<CompiledKernel> compile_kernel(const std::shared_ptr<Device>& device,
                                               std::shared_ptr<const Program> program,
                                               const CompileOptions& options);

}  // namespace metile
