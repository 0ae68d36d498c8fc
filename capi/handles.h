/** \file handles.h
 * The objects behind the opaque handles of metile.h, and their validation.
 *
 * A handle is not the object's address: it encodes a slot of a process-wide table and the slot's
 * generation (handles.cpp), so NULL, foreign, released and *reused* handles are all reported as
 * METILE_ERROR_INVALID_ARGUMENT and never dereferenced. A released slot gets a new generation, so
 * a stale handle stays invalid even when a new object takes its slot. Each API call holds a
 * reference (Ref) to the object for as long as it uses it, so a release on another thread frees
 * the object only after that call is done.
 */
#pragma once

#include <memory>

#include "frontend/builder.h"
#include "driver/compile.h"
#include "runtime/device.h"

namespace metile::capi {

enum class HandleKind { device, buffer, builder, program, kernel, launch, event };

/** A reference to a handle's object for the duration of one API call. */
template <typename T>
using Ref = std::shared_ptr<T>;

/** The object behind `h`; throws INVALID_ARGUMENT unless `h` is a live handle of `kind`. `fn`
 * names the API call. */
std::shared_ptr<void> lookup_handle(const void* h, HandleKind kind, const char* fn);
/** Makes `object` reachable through a new handle with one user reference. */
void* publish_handle(std::shared_ptr<void> object, HandleKind kind);
/** Adds a user reference (throws like lookup_handle). */
void retain_handle(const void* h, HandleKind kind, const char* fn);
/** Drops a user reference; at zero the handle dies and its object is returned so the caller
 * destroys it outside the table's lock (throws like lookup_handle). */
std::shared_ptr<void> release_handle(const void* h, HandleKind kind, const char* fn);

}  // namespace metile::capi

struct metile_device {
  static constexpr auto kKind = metile::capi::HandleKind::device;
  std::shared_ptr<metile::Device> impl;
};

struct metile_buffer {
  static constexpr auto kKind = metile::capi::HandleKind::buffer;
  std::shared_ptr<metile::Buffer> impl;
  std::shared_ptr<metile::Device> device;
};

struct metile_builder {
  static constexpr auto kKind = metile::capi::HandleKind::builder;
  std::unique_ptr<metile::Builder> impl;
};

struct metile_program {
  static constexpr auto kKind = metile::capi::HandleKind::program;
  std::shared_ptr<const metile::Program> impl;
};

struct metile_kernel {
  static constexpr auto kKind = metile::capi::HandleKind::kernel;
  std::shared_ptr<metile::CompiledKernel> impl;
  std::shared_ptr<metile::Device> device;
};

struct metile_launch {
  static constexpr auto kKind = metile::capi::HandleKind::launch;
  std::unique_ptr<metile::PreparedLaunch> impl;
  std::shared_ptr<metile::CompiledKernel> kernel;
};

struct metile_event {
  static constexpr auto kKind = metile::capi::HandleKind::event;
  std::unique_ptr<metile::Event> impl;
  std::shared_ptr<metile::Device> device;
};

namespace metile::capi {

/** Validates `h` and returns a reference to its object; keep the Ref while using the object. */
template <typename T>
Ref<T> get(const T* h, const char* fn) {
  return std::static_pointer_cast<T>(lookup_handle(h, T::kKind, fn));
}

/** A new object, not yet reachable from the API: fill it, then publish() it. */
template <typename T>
Ref<T> make_handle() {
  return std::make_shared<T>();
}

/** The new handle of a filled object. */
template <typename T>
T* publish(Ref<T> object) {
  return static_cast<T*>(publish_handle(std::move(object), T::kKind));
}

template <typename T>
void retain(T* h, const char* fn) {
  retain_handle(h, T::kKind, fn);
}

/** Drops a reference; the object is freed once no user reference and no running call holds it.
 * NULL is a no-op. */
template <typename T>
void release(T* h, const char* fn) {
  if (h == nullptr) return;
  release_handle(h, T::kKind, fn);  // the returned object dies here, outside the table's lock
}

}  // namespace metile::capi
