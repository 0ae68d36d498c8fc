// DLPack (v0.8 ABI, the legacy DLManagedTensor every consumer accepts): export a buffer as a
// tensor and import a tensor as a buffer without copying.
#include <cstring>

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
    default: break;
  }
  fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "invalid dtype");
}

size_t dl_itemsize(const DLDataType& t) {
  if (t.lanes != 1 || t.bits % 8 != 0 || t.bits == 0)
    fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "unsupported DLPack dtype (code ", int(t.code),
         ", bits ", int(t.bits), ", lanes ", t.lanes, ")");
  return t.bits / 8;
}

struct Export {
  DLManagedTensor tensor{};
  std::shared_ptr<Buffer> buffer;  // keeps the memory alive while a consumer holds the tensor
  int64_t shape[8] = {};
};

void delete_export(DLManagedTensor* t) { delete static_cast<Export*>(t->manager_ctx); }

// A buffer over imported memory: runs the producer's deleter when the last user lets go.
class ImportedBuffer : public Buffer {
 public:
  ImportedBuffer(std::shared_ptr<Buffer> inner, DLManagedTensor* t)
      : inner_(std::move(inner)), tensor_(t) {
    device = inner_->device;
  }
  ~ImportedBuffer() override {
    inner_.reset();
    if (tensor_->deleter) tensor_->deleter(tensor_);
  }
  void* contents() override { return inner_->contents(); }
  uint64_t device_address() override { return inner_->device_address(); }
  size_t size() const override { return inner_->size(); }
  bool shares_memory() const override { return inner_->shares_memory(); }

 private:
  std::shared_ptr<Buffer> inner_;
  DLManagedTensor* tensor_;
};

}  // namespace

extern "C" {

METILE_API metile_status metile_buffer_to_dlpack(metile_buffer* b, metile_dtype dtype, int32_t ndim,
                                                 const int64_t* shape, void** out) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    auto h = get(b, fn);
    if (!is_valid_dtype(dtype)) fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "invalid dtype ", int(dtype));
    if (ndim < 0 || ndim > 8) fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "ndim must be in [0, 8], got ", ndim);
    if (ndim > 0) METILE_CHECK_ARG(shape);
    DType d = static_cast<DType>(dtype);
    uint64_t count = 1;
    for (int i = 0; i < ndim; ++i) {
      if (shape[i] < 0) fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "negative dimension ", shape[i]);
      count *= static_cast<uint64_t>(shape[i]);
    }
    if (count * dtype_size(d) > h->impl->size())
      fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "shape needs ", count * dtype_size(d),
           " bytes but the buffer has ", h->impl->size());
    auto e = std::make_unique<Export>();
    e->buffer = h->impl;
    for (int i = 0; i < ndim; ++i) e->shape[i] = shape[i];
    DLTensor& t = e->tensor.dl_tensor;
    bool gpu_only = h->device->info().name == "cuda";
    t.data = gpu_only ? reinterpret_cast<void*>(h->impl->device_address()) : h->impl->contents();
    t.device = {gpu_only ? kDLCUDAManaged : kDLCPU, 0};
    t.ndim = ndim;
    t.dtype = to_dl(d);
    t.shape = e->shape;
    t.strides = nullptr;  // compact row-major
    t.byte_offset = 0;
    e->tensor.manager_ctx = e.get();
    e->tensor.deleter = delete_export;
    *out = &e.release()->tensor;
  });
}

METILE_API metile_status metile_buffer_from_dlpack(metile_buffer** out, metile_device* dev,
                                                   void* managed_tensor) {
  return guard(__func__, [&](const char* fn) {
    METILE_CHECK_ARG(out);
    METILE_CHECK_ARG(managed_tensor);
    auto device = get(dev, fn)->impl;
    auto* mt = static_cast<DLManagedTensor*>(managed_tensor);
    const DLTensor& t = mt->dl_tensor;
    if (t.ndim < 0 || t.ndim > 32) fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "bad ndim ", t.ndim);
    size_t item = dl_itemsize(t.dtype);
    uint64_t count = 1;
    for (int i = 0; i < t.ndim; ++i) {
      if (t.shape[i] < 0)
        fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "dimension ", i, " is negative (", t.shape[i], ")");
      count *= static_cast<uint64_t>(t.shape[i]);
    }
    if (t.strides != nullptr) {  // only compact row-major tensors map onto one buffer
      int64_t expect = 1;
      for (int i = t.ndim - 1; i >= 0; --i) {
        if (t.shape[i] != 1 && t.strides[i] != expect)
          fail(METILE_ERROR_INVALID_ARGUMENT, "dlpack", "the tensor is not contiguous (dimension ",
               i, " has stride ", t.strides[i], ", expected ", expect, ")");
        expect *= t.shape[i];
      }
    }
    size_t bytes = std::max<uint64_t>(count * item, 1);
    char* data = static_cast<char*>(t.data) + t.byte_offset;
    std::shared_ptr<Buffer> inner;
    int32_t type = t.device.device_type;
    bool cuda = device->info().name == "cuda";
    if (cuda && (type == kDLCUDA || type == kDLCUDAManaged))
      inner = device->wrap_device_memory(reinterpret_cast<uint64_t>(data), bytes,
                                         type == kDLCUDAManaged);
    else if (type == kDLCPU || type == kDLCUDAHost || type == kDLCUDAManaged)
      inner = device->wrap(data, bytes);
    else
      fail(METILE_ERROR_UNSUPPORTED, "dlpack", "cannot import memory of DLPack device type ",
           type, " on the ", device->info().name, " device");
    if (!inner->shares_memory())
      fail(METILE_ERROR_UNSUPPORTED, "dlpack", "the ", device->info().name,
           " device cannot use this memory in place; copy it into a metile buffer instead");
    auto buf = std::make_shared<ImportedBuffer>(std::move(inner), mt);
    auto h = capi::make_handle<metile_buffer>();
    h->impl = std::move(buf);
    h->device = std::move(device);
    *out = capi::publish(h);
  });
}

}  // extern "C"
