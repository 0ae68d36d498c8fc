/** \file objc_bridge.h
 * The Objective-C runtime and Metal.framework reached without Objective-C: both opened with
 * dlopen, and every message sent through libffi with the selector's exact C signature, so the
 * code compiles (and, against a stand-in runtime, runs) on Linux too.
 *
 * ABI facts this relies on (both 64-bit Apple targets are LP64, little-endian):
 * - A message is a call of objc_msgSend(id self, SEL op, args...) with the method's own
 *   prototype. It must never be called as a C variadic function: on arm64 Apple passes variadic
 *   arguments on the stack, named ones in registers. libffi with a non-variadic cif per
 *   signature (metal_selectors.def) gets this right on both.
 * - MTLSize (3 x NSUInteger, 24 bytes) as an argument: x86-64 System V passes a struct over 16
 *   bytes in memory (copied onto the stack); arm64 AAPCS passes it by reference to a caller-made
 *   copy. libffi does both from the struct ffi_type.
 * - MTLSize as a return value: on x86-64 it comes back through a hidden pointer in %rdi, so
 *   self/op move to %rsi/%rdx and the message goes through objc_msgSend_stret; on arm64 the
 *   result pointer travels in x8, objc_msgSend_stret does not exist and objc_msgSend is used.
 *   Returns of void, scalars and pointers never need _stret.
 * - BOOL is `signed char` on x86-64 macOS and C `bool` on arm64 (OBJC_BOOL_IS_BOOL): one byte
 *   either way; NSUInteger is unsigned long, NSInteger long.
 *
 * Paths: $METILE_OBJC_LIBRARY (default /usr/lib/libobjc.A.dylib) and $METILE_METAL_FRAMEWORK
 * (default /System/Library/Frameworks/Metal.framework/Metal). With the defaults Foundation is
 * opened as well (NSString, NSError, NSURL); a Metal framework named by the variable must
 * provide those classes itself, as the test stand-in (tests/metal_standin) does.
 */
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

namespace metile::metal {

using id = void*;
using NSUInteger = unsigned long;
using NSInteger = long;
#if defined(__aarch64__)
using ObjcBool = bool;
#else
using ObjcBool = signed char;
#endif

struct MTLSize {
  NSUInteger width, height, depth;
};

enum class Sel : uint16_t {
#define METAL_SELECTOR(n, ...) n,
#include "runtime/metal/metal_selectors.def"
#undef METAL_SELECTOR
  count_
};

/** Argument and return kinds of metal_selectors.def. */
enum class ObjcType : uint8_t { ID, PTR, UINT, SINT, BOOL, SIZE, VOID };

template <class T>
constexpr ObjcType objc_type_of() {
  if constexpr (std::is_void_v<T>) return ObjcType::VOID;
  else if constexpr (std::is_same_v<T, MTLSize>) return ObjcType::SIZE;
  else if constexpr (std::is_same_v<T, ObjcBool>) return ObjcType::BOOL;
  else if constexpr (std::is_pointer_v<T>) return ObjcType::PTR;  // ID is a pointer too
  else if constexpr (std::is_same_v<T, NSUInteger>) return ObjcType::UINT;
  else if constexpr (std::is_same_v<T, NSInteger>) return ObjcType::SINT;
  else static_assert(!sizeof(T), "no Objective-C type for this C++ type");
}

class ObjcRuntime {
 public:
  /** Opens the runtime and the framework once per process; nullptr and `why` when it cannot. */
  static const ObjcRuntime* get(std::string* why);

  /** Sends `s` to `self` with the table's prototype; the C++ types must match it. */
  template <class R = void, class... A>
  R send(Sel s, id self, A... args) const {
    constexpr ObjcType types[] = {objc_type_of<A>()..., ObjcType::VOID};
    check(s, objc_type_of<R>(), types, sizeof...(A));
    void* argv[] = {&self, nullptr, &args...};
    if constexpr (std::is_void_v<R>) {
      call(s, nullptr, argv);
    } else {
      alignas(16) unsigned char out[sizeof(R) < 8 ? 8 : sizeof(R)];  // libffi widens small returns
      call(s, out, argv);
      R r;
      __builtin_memcpy(&r, out, sizeof(R));  // little-endian: the low bytes come first
      return r;
    }
  }

  id get_class(const char* name) const;
  void* autorelease_pool_push() const;
  void autorelease_pool_pop(void* pool) const;
  /** MTLCreateSystemDefaultDevice(): +1 reference or nil. */
  id create_system_default_device() const;

  /** A new NSString (+1) holding `s` as UTF-8. */
  id make_string(const std::string& s) const;
  /** The UTF-8 text of an NSString (nil gives ""). */
  std::string text(id ns_string) const;
  /** localizedDescription of an NSError (nil gives ""). */
  std::string describe(id ns_error) const;
  void release(id object) const;

  std::string objc_path, framework_path;

 private:
  ObjcRuntime() = default;
  void check(Sel s, ObjcType ret, const ObjcType* args, size_t count) const;
  void call(Sel s, void* ret, void** argv) const;
  struct Impl;
  Impl* impl_ = nullptr;
};

/** Scope of one autorelease pool (objc_autoreleasePoolPush / Pop). */
class AutoreleasePool {
 public:
  explicit AutoreleasePool(const ObjcRuntime& rt) : rt_(rt), pool_(rt.autorelease_pool_push()) {}
  ~AutoreleasePool() { rt_.autorelease_pool_pop(pool_); }
  AutoreleasePool(const AutoreleasePool&) = delete;
  AutoreleasePool& operator=(const AutoreleasePool&) = delete;

 private:
  const ObjcRuntime& rt_;
  void* pool_;
};

}  // namespace metile::metal
