// DLPack: export a buffer as a tensor and import a tensor as a buffer without copying, in both
// the legacy v0.8 ABI (DLManagedTensor, which every consumer accepts) and the versioned v1 ABI
// (DLManagedTensorVersioned); plus the PyCapsule destructor Python bindings hand to PyCapsule_New.
#include <dlfcn.h>

#include <cstring>
#include <functional>

#include "checked.h"
#include "guard.h"
#include "handles.h"
#include "support/dlpack_abi.h"

using namespace metile;
using capi::get;
using capi::guard;

namespace {

using namespace metile::dlpack;

DLDataType to_dl(DType d) {
  uint8_t bits = static_cast<uint8_t>(dtype_size(d) * 8);
  switch (d) {
    case DType::f32:
    case DType::f16: return {kDLFloat, bits, 1};
    case DType::bf16: return {kDLBfloat, bits, 1};
    case DType::i32:
    case DType::i64:
    case DType::i8: return {kDLInt, bits, 1};
    case DType::u32:
    case DType::u8: return {kDLUInt, bits, 1};
    case DType::boolean: return {kDLBool, 8, 1};
    case DType::f8e4m3: return {kDLFloat8_e4m3fn, 8, 1};
    case DType::f8e5m2: return {kDLFloat8_e5m2, 8, 1};
    default: break;
  }
  fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "invalid dtype");
}

size_t dl_itemsize(const DLDataType& t, const char* fn) {
  if (t.lanes != 1 || t.bits % 8 != 0 || t.bits == 0)
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": unsupported dl_tensor.dtype (code ", int(t.code),
         ", bits ", int(t.bits), ", lanes ", t.lanes, ")");
  return t.bits / 8;
}

// One exported tensor of either ABI: T is DLManagedTensor or DLManagedTensorVersioned.
template <typename T>
struct Export {
  T tensor{};
  std::shared_ptr<Buffer> buffer;  // keeps the memory alive while a consumer holds the tensor
  int64_t shape[8] = {};
  static void deleter(T* t) { delete static_cast<Export*>(t->manager_ctx); }
};

template <typename T>
T* export_buffer(metile_buffer* b, metile_dtype dtype, int32_t ndim, const int64_t* shape,
                 const char* fn) {
  auto h = get(b, fn);
  if (!is_valid_dtype(dtype))
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dtype ", int(dtype), " is not a dtype");
  if (ndim < 0 || ndim > 8)
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": ndim must be in [0, 8], got ", ndim);
  if (ndim > 0 && shape == nullptr)
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": shape is NULL but ndim is ", ndim);
  DType d = static_cast<DType>(dtype);
  // Checked: a product that wraps would describe a tensor far larger than the buffer.
  uint64_t bytes = dtype_size(d);
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": shape[", i, "] is negative (", shape[i],
           ")");
    bytes = capi::checked_mul(bytes, static_cast<uint64_t>(shape[i]), fn, "the shape's byte size");
  }
  if (bytes > h->impl->size())
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": shape needs ", bytes,
         " bytes but the buffer has ", h->impl->size());
  auto e = std::make_unique<Export<T>>();
  e->buffer = h->impl;
  for (int i = 0; i < ndim; ++i) e->shape[i] = shape[i];
  DLTensor& t = e->tensor.dl_tensor;
  // cuda buffers are (managed) device memory: consumers (torch, CuPy) take kDLCUDA, and managed
  // memory is valid device memory; kDLCUDAManaged is refused by torch.
  bool cuda = h->device->info().name == "cuda";
  t.data = cuda ? reinterpret_cast<void*>(h->impl->device_address()) : h->impl->contents();
  t.device = {cuda ? kDLCUDA : kDLCPU, cuda ? h->device->info().ordinal : 0};
  t.ndim = ndim;
  t.dtype = to_dl(d);
  t.shape = e->shape;
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  e->tensor.manager_ctx = e.get();
  e->tensor.deleter = Export<T>::deleter;
  return &e.release()->tensor;
}

// A buffer over imported memory: runs the producer's deleter when the last user lets go.
class ImportedBuffer : public Buffer {
 public:
  ImportedBuffer(std::shared_ptr<Buffer> inner, std::function<void()> release)
      : inner_(std::move(inner)), release_(std::move(release)) {
    device = inner_->device;
  }
  ~ImportedBuffer() override {
    inner_.reset();
    release_();
  }
  void* contents() override { return inner_->contents(); }
  uint64_t device_address() override { return inner_->device_address(); }
  size_t size() const override { return inner_->size(); }
  bool shares_memory() const override { return inner_->shares_memory(); }
  Buffer* underlying() override { return inner_->underlying(); }

 private:
  std::shared_ptr<Buffer> inner_;
  std::function<void()> release_;
};

// Everything a producer describes is checked before any of it is used: the tensor is foreign
// input, and a launch over a buffer that lies about its memory reads and writes out of bounds.
metile_buffer* import_tensor(metile_device* dev, const DLTensor& t, std::function<void()> release,
                             const char* fn) {
  auto device = get(dev, fn)->impl;
  if (t.ndim < 0 || t.ndim > 32)
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dl_tensor.ndim must be in [0, 32], got ",
         t.ndim);
  if (t.ndim > 0 && t.shape == nullptr)
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dl_tensor.shape is NULL but ndim is ",
         t.ndim);
  size_t item = dl_itemsize(t.dtype, fn);
  uint64_t bytes = item;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dl_tensor.shape[", i, "] is negative (",
           t.shape[i], ")");
    bytes = capi::checked_mul(bytes, static_cast<uint64_t>(t.shape[i]), fn,
                              "the byte size of dl_tensor.shape");
  }
  if (bytes > static_cast<uint64_t>(PTRDIFF_MAX))
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dl_tensor.shape describes ", bytes,
         " bytes, more than one object can span");
  if (t.strides != nullptr && bytes > 0) {
    // A strided view maps onto the bytes from its first element to the end of its last; kernels
    // index it with the strides their caller passes. Its lowest byte must be the first element's,
    // so negative strides are refused.
    uint64_t last = 0;  // the last element's offset in elements
    for (int i = 0; i < t.ndim; ++i) {
      if (t.shape[i] == 1) continue;
      if (t.strides[i] < 0)
        fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dl_tensor.strides[", i, "] is negative (",
             t.strides[i], "); only views with non-negative strides are imported in place");
      last = capi::checked_add(
          last, capi::checked_mul(static_cast<uint64_t>(t.shape[i] - 1),
                                  static_cast<uint64_t>(t.strides[i]), fn, "dl_tensor.strides"),
          fn, "dl_tensor.strides");
    }
    bytes = capi::checked_mul(capi::checked_add(last, 1, fn, "dl_tensor.strides"), item, fn,
                              "the byte span of dl_tensor.strides");
    if (bytes > static_cast<uint64_t>(PTRDIFF_MAX))
      fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dl_tensor.strides span ", bytes,
           " bytes, more than one object can span");
  }
  int32_t type = t.device.device_type;
  bool cuda = device->info().name == "cuda";
  bool device_memory = cuda && (type == kDLCUDA || type == kDLCUDAManaged);
  if (!device_memory && type != kDLCPU && type != kDLCUDAHost && type != kDLCUDAManaged)
    fail(METILE_ERROR_UNSUPPORTED, "dlpack", "cannot import memory of DLPack device type ",
         type, " on the ", device->info().name, " device");
  // Another GPU's memory: kernels here would fault on it (managed memory migrates, so it may).
  if (type == kDLCUDA && cuda && t.device.device_id != device->info().ordinal)
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": the tensor is on cuda:", t.device.device_id,
         ", the device is ", device->info().label(), " (move it, or use that device)");
  std::shared_ptr<Buffer> inner;
  if (bytes == 0) {
    // An empty tensor owns no bytes (its data may be NULL or point at nothing); buffers are never
    // empty, so it gets one private byte rather than a byte of the producer's memory.
    inner = device->alloc(1);
  } else {
    if (t.data == nullptr)
      fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dl_tensor.data is NULL for a tensor of ",
           bytes, " bytes");
    uintptr_t start;
    if (t.byte_offset > static_cast<uint64_t>(PTRDIFF_MAX) ||
        __builtin_add_overflow(reinterpret_cast<uintptr_t>(t.data), t.byte_offset, &start))
      fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", fn, ": dl_tensor.data + dl_tensor.byte_offset (",
           t.byte_offset, ") runs past the end of the address space");
    capi::check_address_range(start, bytes, fn, "the tensor's memory (dl_tensor.shape and dtype)");
    if (device_memory)
      inner = device->wrap_device_memory(start, bytes, type == kDLCUDAManaged);
    else
      inner = device->wrap(reinterpret_cast<void*>(start), bytes);
    if (!inner->shares_memory())
      fail(METILE_ERROR_UNSUPPORTED, "dlpack", "the ", device->info().name,
           " device cannot use this memory in place; copy it into a metile buffer instead");
  }
  auto buf = std::make_shared<ImportedBuffer>(std::move(inner), std::move(release));
  auto h = capi::make_handle<metile_buffer>();
  h->impl = std::move(buf);
  h->device = std::move(device);
  return capi::publish(std::move(h));
}

// The few CPython entry points the capsule destructor needs, found in the running process (it
// is only ever called by a Python interpreter, which exports them); libmetile does not link it.
struct PythonCapsuleApi {
  int (*is_valid)(void*, const char*) = nullptr;
  void* (*get_pointer)(void*, const char*) = nullptr;
  void (*fetch)(void**, void**, void**) = nullptr;
  void (*restore)(void*, void*, void*) = nullptr;
  bool ok() const { return is_valid && get_pointer && fetch && restore; }
};

const PythonCapsuleApi& python_capsule_api() {
  static const PythonCapsuleApi api = [] {
    PythonCapsuleApi a;
    a.is_valid = reinterpret_cast<decltype(a.is_valid)>(dlsym(RTLD_DEFAULT, "PyCapsule_IsValid"));
    a.get_pointer =
        reinterpret_cast<decltype(a.get_pointer)>(dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer"));
    a.fetch = reinterpret_cast<decltype(a.fetch)>(dlsym(RTLD_DEFAULT, "PyErr_Fetch"));
    a.restore = reinterpret_cast<decltype(a.restore)>(dlsym(RTLD_DEFAULT, "PyErr_Restore"));
    return a;
  }();
  return api;
}

}  // namespace

extern "C" {

METILE_API metile_status metile_buffer_to_dlpack(metile_buffer* b, metile_dtype dtype, int32_t ndim,
                                                 const int64_t* shape, void** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    *out = export_buffer<DLManagedTensor>(b, dtype, ndim, shape, fn);
  });
}

METILE_API metile_status metile_buffer_to_dlpack_versioned(metile_buffer* b, metile_dtype dtype,
                                                           int32_t ndim, const int64_t* shape,
                                                           void** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto* t = export_buffer<DLManagedTensorVersioned>(b, dtype, ndim, shape, fn);
    // The FP8 type codes came with DLPack 1.1; every other dtype is described by 1.0.
    const bool f8 = is_f8(static_cast<DType>(dtype));
    t->version = {kDLPackMajor, f8 ? kDLPackMinorFloat8 : kDLPackMinor};
    t->flags = 0;  // writable, not a copy
    *out = t;
  });
}

METILE_API metile_status metile_buffer_from_dlpack(metile_buffer** out, metile_device* dev,
                                                   void* managed_tensor) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    METILE_CHECK_ARG(managed_tensor);
    auto* mt = static_cast<DLManagedTensor*>(managed_tensor);
    *out = import_tensor(dev, mt->dl_tensor, [mt] {
      if (mt->deleter) mt->deleter(mt);
    }, fn);
  });
}

METILE_API metile_status metile_buffer_from_dlpack_versioned(metile_buffer** out,
                                                             metile_device* dev,
                                                             void* managed_tensor) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    METILE_CHECK_ARG(managed_tensor);
    auto* mt = static_cast<DLManagedTensorVersioned*>(managed_tensor);
    if (mt->version.major != kDLPackMajor)
      fail(METILE_ERROR_UNSUPPORTED, "dlpack", "DLPack ABI version ", mt->version.major, ".",
           mt->version.minor, " is not supported (metile reads ", kDLPackMajor, ".x)");
    if (mt->flags & kDLFlagReadOnly)
      fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack",
           "the tensor is read-only (DLPACK_FLAG_BITMASK_READ_ONLY) and kernels may write any "
           "buffer; copy it into a metile buffer instead");
    *out = import_tensor(dev, mt->dl_tensor, [mt] {
      if (mt->deleter) mt->deleter(mt);
    }, fn);
  });
}

METILE_API void metile_dlpack_capsule_destructor(void* capsule) {
  const PythonCapsuleApi& py = python_capsule_api();
  if (capsule == nullptr || !py.ok()) return;  // not inside Python: nothing safe to do
  // A consumer may have failed with an exception pending (numpy refusing bf16): keep it, and
  // keep PyCapsule_GetPointer from seeing it.
  void *type = nullptr, *value = nullptr, *traceback = nullptr;
  py.fetch(&type, &value, &traceback);
  // Renamed "used_..." capsules were consumed: their new owner runs the deleter.
  if (py.is_valid(capsule, "dltensor")) {
    auto* t = static_cast<DLManagedTensor*>(py.get_pointer(capsule, "dltensor"));
    if (t && t->deleter) t->deleter(t);
  } else if (py.is_valid(capsule, "dltensor_versioned")) {
    auto* t = static_cast<DLManagedTensorVersioned*>(py.get_pointer(capsule, "dltensor_versioned"));
    if (t && t->deleter) t->deleter(t);
  }
  py.restore(type, value, traceback);
}

}  // extern "C"
