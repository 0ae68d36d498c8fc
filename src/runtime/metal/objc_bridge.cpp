#include "runtime/metal/objc_bridge.h"

#include <dlfcn.h>
#include <ffi.h>

#include <array>
#include <mutex>

#include "support/env.h"
#include "support/error.h"

namespace metile::metal {

namespace {

constexpr const char* kSystemObjc = "/usr/lib/libobjc.A.dylib";
constexpr const char* kSystemMetal = "/System/Library/Frameworks/Metal.framework/Metal";
constexpr const char* kSystemFoundation =
    "/System/Library/Frameworks/Foundation.framework/Foundation";
constexpr size_t kMaxArgs = 6;  // receiver and selector not counted

struct SelectorRow {
  const char* name;
  ObjcType ret;
  std::array<ObjcType, kMaxArgs> args;
  size_t count;
};

template <class... T>
constexpr SelectorRow row(const char* name, ObjcType ret, T... args) {
  return {name, ret, {args...}, sizeof...(T)};
}

constexpr ObjcType ID = ObjcType::ID, PTR = ObjcType::PTR, UINT = ObjcType::UINT,
                   SINT = ObjcType::SINT, BOOL = ObjcType::BOOL, SIZE = ObjcType::SIZE,
                   VOID = ObjcType::VOID;

constexpr SelectorRow kSelectors[] = {
#define METAL_SELECTOR(n, sel, ...) row(sel, __VA_ARGS__),
#include "runtime/metal/metal_selectors.def"
#undef METAL_SELECTOR
};
static_assert(std::size(kSelectors) == static_cast<size_t>(Sel::count_));

ffi_type* mtl_size_ffi_type() {
  static ffi_type* elements[] = {&ffi_type_uint64, &ffi_type_uint64, &ffi_type_uint64, nullptr};
  static ffi_type t = {0, 0, FFI_TYPE_STRUCT, elements};
  return &t;
}

ffi_type* ffi_type_for(ObjcType t) {
  switch (t) {
    case ObjcType::ID:
    case ObjcType::PTR: return &ffi_type_pointer;
    case ObjcType::UINT: return &ffi_type_uint64;
    case ObjcType::SINT: return &ffi_type_sint64;
#if defined(__aarch64__)
    case ObjcType::BOOL: return &ffi_type_uint8;  // bool
#else
    case ObjcType::BOOL: return &ffi_type_sint8;  // signed char
#endif
    case ObjcType::SIZE: return mtl_size_ffi_type();
    case ObjcType::VOID: return &ffi_type_void;
  }
  return &ffi_type_void;
}

bool same(ObjcType a, ObjcType b) {
  auto pointer = [](ObjcType t) { return t == ObjcType::ID || t == ObjcType::PTR; };
  return a == b || (pointer(a) && pointer(b));
}

}  // namespace

struct ObjcRuntime::Impl {
  struct Entry {
    ffi_cif cif;
    std::array<ffi_type*, kMaxArgs + 2> types;
    void* fn = nullptr;  // objc_msgSend or, for struct returns on x86-64, objc_msgSend_stret
    void* sel = nullptr;
  };
  void* objc = nullptr;
  void* metal = nullptr;
  std::array<Entry, static_cast<size_t>(Sel::count_)> entries;
  void* (*get_class)(const char*) = nullptr;
  void* (*pool_push)() = nullptr;
  void (*pool_pop)(void*) = nullptr;
  void* (*create_device)() = nullptr;
};

const ObjcRuntime* ObjcRuntime::get(std::string* why) {
  static std::once_flag once;
  static ObjcRuntime* runtime = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    auto rt = new ObjcRuntime();  // lives for the process: devices and buffers outlive statics
    rt->impl_ = new Impl();
    Impl& im = *rt->impl_;
    std::string framework_env = env_string("METILE_METAL_FRAMEWORK");
    rt->objc_path = env_string("METILE_OBJC_LIBRARY", kSystemObjc);
    rt->framework_path = framework_env.empty() ? kSystemMetal : framework_env;
    auto open = [&](const std::string& path, const char* what) -> void* {
      void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h == nullptr && failure.empty()) {
        const char* e = dlerror();
        failure = cat("cannot open ", what, " (", e ? e : path, ")",
                      framework_env.empty()
                          ? "; Metal is macOS-only (METILE_METAL_FRAMEWORK and "
                            "METILE_OBJC_LIBRARY name a stand-in)"
                          : "");
      }
      return h;
    };
    im.objc = open(rt->objc_path, "the Objective-C runtime");
    if (im.objc && framework_env.empty()) open(kSystemFoundation, "Foundation.framework");
    if (failure.empty()) im.metal = open(rt->framework_path, "Metal.framework");
    if (!failure.empty()) return;
    auto sym = [&](void* lib, const char* name) -> void* {
      void* p = dlsym(lib, name);
      if (p == nullptr && failure.empty()) failure = cat("missing symbol ", name);
      return p;
    };
    void* msg_send = sym(im.objc, "objc_msgSend");
    void* (*sel_register)(const char*) =
        reinterpret_cast<void* (*)(const char*)>(sym(im.objc, "sel_registerName"));
    im.get_class = reinterpret_cast<void* (*)(const char*)>(sym(im.objc, "objc_getClass"));
    im.pool_push = reinterpret_cast<void* (*)()>(sym(im.objc, "objc_autoreleasePoolPush"));
    im.pool_pop = reinterpret_cast<void (*)(void*)>(sym(im.objc, "objc_autoreleasePoolPop"));
    im.create_device =
        reinterpret_cast<void* (*)()>(sym(im.metal, "MTLCreateSystemDefaultDevice"));
#if defined(__x86_64__)
    void* msg_send_stret = sym(im.objc, "objc_msgSend_stret");
#else
    void* msg_send_stret = msg_send;  // arm64: x8 carries the result address; no _stret
#endif
    if (!failure.empty()) return;
    for (size_t i = 0; i < im.entries.size(); ++i) {
      const SelectorRow& r = kSelectors[i];
      Impl::Entry& e = im.entries[i];
      e.types[0] = &ffi_type_pointer;  // id self
      e.types[1] = &ffi_type_pointer;  // SEL _cmd
      for (size_t a = 0; a < r.count; ++a) e.types[a + 2] = ffi_type_for(r.args[a]);
      if (ffi_prep_cif(&e.cif, FFI_DEFAULT_ABI, static_cast<unsigned>(r.count + 2),
                       ffi_type_for(r.ret), e.types.data()) != FFI_OK) {
        failure = cat("ffi_prep_cif failed for the selector ", r.name);
        return;
      }
      e.fn = r.ret == ObjcType::SIZE ? msg_send_stret : msg_send;
      e.sel = sel_register(r.name);
    }
    runtime = rt;
  });
  if (runtime == nullptr && why != nullptr) *why = failure;
  return runtime;
}

void ObjcRuntime::check(Sel s, ObjcType ret, const ObjcType* args, size_t count) const {
  const SelectorRow& r = kSelectors[static_cast<size_t>(s)];
  bool ok = same(ret, r.ret) && count == r.count;
  for (size_t i = 0; ok && i < count; ++i) ok = same(args[i], r.args[i]);
  if (!ok)
    fail(METILE_ERROR_INTERNAL, "metal", "the message ", r.name,
         " is sent with a prototype that differs from metal_selectors.def");
}

void ObjcRuntime::call(Sel s, void* ret, void** argv) const {
  Impl::Entry& e = impl_->entries[static_cast<size_t>(s)];
  argv[1] = &e.sel;
  ffi_call(&e.cif, reinterpret_cast<void (*)()>(e.fn), ret, argv);
}

id ObjcRuntime::get_class(const char* name) const {
  id c = impl_->get_class(name);
  if (c == nullptr) fail(METILE_ERROR_DEVICE, "metal", "the Objective-C class ", name, " is missing");
  return c;
}

void* ObjcRuntime::autorelease_pool_push() const { return impl_->pool_push(); }
void ObjcRuntime::autorelease_pool_pop(void* pool) const { impl_->pool_pop(pool); }
id ObjcRuntime::create_system_default_device() const { return impl_->create_device(); }

id ObjcRuntime::make_string(const std::string& s) const {
  constexpr NSUInteger kUTF8 = 4;  // NSUTF8StringEncoding
  id str = send<id>(Sel::alloc, get_class("NSString"));
  str = send<id>(Sel::initWithBytes, str, static_cast<const void*>(s.data()),
                 static_cast<NSUInteger>(s.size()), kUTF8);
  if (str == nullptr) fail(METILE_ERROR_OUT_OF_MEMORY, "metal", "cannot make an NSString");
  return str;
}

std::string ObjcRuntime::text(id ns_string) const {
  if (ns_string == nullptr) return {};
  const char* p = send<const char*>(Sel::UTF8String, ns_string);
  return p ? p : "";
}

std::string ObjcRuntime::describe(id ns_error) const {
  if (ns_error == nullptr) return {};
  return text(send<id>(Sel::localizedDescription, ns_error));
}

void ObjcRuntime::release(id object) const {
  if (object != nullptr) send(Sel::release, object);
}

}  // namespace metile::metal
