/** \file launch.h
 * Runs one program through the C API on caller vectors: each buffer argument wraps the vector's
 * memory (zero-copy where the device shares memory; otherwise the results are copied back after
 * the launch), so a test reads its outputs straight from its own vectors.
 */
#pragma once

#include <metile/metile.h>

#include <array>
#include <string>
#include <vector>

#include "ir/tile_ir.h"

namespace metile::kernels {

class Launch {
 public:
  /** Compiles `program` for `device`; a failure is reported by run(). */
  explicit Launch(const Program& program, const std::string& device = "interp");
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  template <typename T>
  Launch& buffer(std::vector<T>& v, uint64_t byte_offset = 0) {
    return wrap(v.data(), v.size() * sizeof(T), byte_offset);
  }
  Launch& wrap(void* host, size_t bytes, uint64_t byte_offset = 0);
  Launch& scalar(metile_arg_kind kind, int64_t i, double f = 0);
  Launch& i32(int64_t v) { return scalar(METILE_ARG_I32, v); }
  Launch& f32(double v) { return scalar(METILE_ARG_F32, 0, v); }
  /** Adds a raw argument (for tests of bad arguments). */
  Launch& arg(const metile_arg& a);

  /** Launches and synchronizes; returns the first failing status (compile, launch, sync). */
  metile_status run(std::array<uint32_t, 3> grid = {1, 1, 1});
  /** metile_last_error() of the failing call; "" after success. */
  const std::string& error() const { return error_; }
  metile_kernel* kernel() const { return kernel_; }
  metile_buffer* buffer_handle(size_t i) const { return buffers_.at(i); }

 private:
  metile_status check(metile_status s);

  metile_device* device_ = nullptr;
  metile_program* program_ = nullptr;
  metile_kernel* kernel_ = nullptr;
  metile_status compile_status_ = METILE_OK;
  std::vector<metile_arg> args_;
  std::vector<metile_buffer*> buffers_;
  std::vector<std::pair<void*, size_t>> hosts_;  // by buffer: the vector's memory
  std::string error_;
};

}  // namespace metile::kernels
