/** \file handles.h
 * The objects behind the opaque handles of metile.h, and their validation. Every live handle is
 * recorded in a process-wide table with its kind, so NULL, released or foreign pointers are
 * reported as METILE_ERROR_INVALID_ARGUMENT instead of being dereferenced.
 */
#pragma once

#include <atomic>
#include <memory>

#include "frontend/builder.h"
#include "driver/compile.h"
#include "runtime/device.h"

namespace metile::capi {

enum class HandleKind { device, buffer, builder, program, kernel, launch };

/** Registers `h` as a live handle of `kind` with one reference. */
void register_handle(const void* h, HandleKind kind);
/** Throws INVALID_ARGUMENT unless `h` is a live handle of `kind`; `fn` names the API call. */
void check_handle(const void* h, HandleKind kind, const char* fn);
/** Removes `h` from the table (throws like check_handle when it is not live). */
void unregister_handle(const void* h, HandleKind kind, const char* fn);

}  // namespace metile::capi

struct metile_device {
  static constexpr auto kKind = metile::capi::HandleKind::device;
  std::atomic<int> refs{1};
  std::shared_ptr<metile::Device> impl;
};

struct metile_buffer {
  static constexpr auto kKind = metile::capi::HandleKind::buffer;
  std::atomic<int> refs{1};
  std::shared_ptr<metile::Buffer> impl;
  std::shared_ptr<metile::Device> device;
};

struct metile_builder {
  static constexpr auto kKind = metile::capi::HandleKind::builder;
  std::atomic<int> refs{1};
  std::unique_ptr<metile::Builder> impl;
};

struct metile_program {
  static constexpr auto kKind = metile::capi::HandleKind::program;
  std::atomic<int> refs{1};
  std::shared_ptr<const metile::Program> impl;
};

struct metile_kernel {
  static constexpr auto kKind = metile::capi::HandleKind::kernel;
  std::atomic<int> refs{1};
  std::shared_ptr<metile::CompiledKernel> impl;
  std::shared_ptr<metile::Device> device;
};

struct metile_launch {
  static constexpr auto kKind = metile::capi::HandleKind::launch;
  std::atomic<int> refs{1};
  std::unique_ptr<metile::PreparedLaunch> impl;
  std::shared_ptr<metile::CompiledKernel> kernel;
};

namespace metile::capi {

/** Validates and returns the handle (non-const access for const handles is never written). */
template <typename T>
T* get(const T* h, const char* fn) {
  check_handle(h, T::kKind, fn);
  return const_cast<T*>(h);
}

/** Wraps a new object in a handle and registers it. */
template <typename T>
T* make_handle() {
  T* h = new T();
  register_handle(h, T::kKind);
  return h;
}

template <typename T>
void retain(T* h, const char* fn) {
  get(h, fn)->refs.fetch_add(1, std::memory_order_relaxed);
}

/** Drops a reference; frees at zero. NULL is a no-op. */
template <typename T>
void release(T* h, const char* fn) {
  if (h == nullptr) return;
  get(h, fn);
  if (h->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  unregister_handle(h, T::kKind, fn);
  delete h;
}

}  // namespace metile::capi
