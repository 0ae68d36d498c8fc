// DLPack through the C API as a foreign library meets it: this file declares the DLPack 1.0
// structs itself (as a producer or consumer with its own dlpack.h would), so it also pins the
// layout metile reads and writes. Stream ordering on the host devices is checked here; on cuda
// tests/gpu/test_torch_roundtrip.py checks it against torch.
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <cstdint>
#include <string>
#include <vector>

#include "capi_util.h"

namespace {

using metile_capi_test::fails_with;
using metile_capi_test::last_error;

struct DLDevice { int32_t device_type, device_id; };
struct DLDataType { uint8_t code, bits; uint16_t lanes; };
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion { uint32_t major, minor; };
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};


metile_device* open(const char* name) {
  metile_device* d = nullptr;
  EXPECT_EQ(metile_device_open(&d, name), METILE_OK) << last_error();
  return d;
}

int versioned_deleted = 0;
void count_versioned(DLManagedTensorVersioned*) { ++versioned_deleted; }

// A producer's tensor over `host`.
DLManagedTensorVersioned producer(std::vector<float>& host, int64_t* shape) {
  DLManagedTensorVersioned t{};
  t.version = {1, 0};
  t.dl_tensor.data = host.data();
  t.dl_tensor.device = {1, 0};  // kDLCPU
  t.dl_tensor.ndim = 1;
  t.dl_tensor.dtype = {2, 32, 1};
  t.dl_tensor.shape = shape;
  t.deleter = count_versioned;
  return t;
}

TEST(DLPackVersioned, ExportDescribesTheBufferAndKeepsItAlive) {
  for (const char* dev : {"interp", "cpu"}) {
    metile_device* d = nullptr;
    if (metile_device_open(&d, dev) != METILE_OK) continue;  // cpu needs a host compiler
    metile_buffer* b = nullptr;
    ASSERT_EQ(metile_buffer_alloc(&b, d, 6 * 4), METILE_OK);
    void* mem = nullptr;
    metile_buffer_contents(b, &mem);
    static_cast<float*>(mem)[5] = 7.0f;
    int64_t shape[2] = {3, 2};
    void* out = nullptr;
    ASSERT_EQ(metile_buffer_to_dlpack_versioned(b, METILE_DTYPE_F32, 2, shape, &out), METILE_OK)
        << last_error();
    metile_buffer_release(b);
    auto* t = static_cast<DLManagedTensorVersioned*>(out);
    EXPECT_EQ(t->version.major, 1u);
    EXPECT_EQ(t->version.minor, 0u);
    EXPECT_EQ(t->flags, 0u);
    EXPECT_EQ(t->dl_tensor.device.device_type, 1);  // kDLCPU on host devices
    EXPECT_EQ(t->dl_tensor.ndim, 2);
    EXPECT_EQ(t->dl_tensor.shape[0], 3);
    EXPECT_EQ(t->dl_tensor.shape[1], 2);
    EXPECT_EQ(static_cast<float*>(t->dl_tensor.data)[5], 7.0f);  // still alive
    t->deleter(t);
    int64_t bad[1] = {-1};
    ASSERT_EQ(metile_buffer_alloc(&b, d, 4), METILE_OK);
    EXPECT_TRUE(fails_with(metile_buffer_to_dlpack_versioned(b, METILE_DTYPE_F32, 1, bad, &out),
                           METILE_ERROR_INVALID_ARGUMENT, "negative"));
    EXPECT_TRUE(fails_with(metile_buffer_to_dlpack_versioned(b, METILE_DTYPE_F32, 1, nullptr, &out),
                           METILE_ERROR_INVALID_ARGUMENT, "shape"));
    EXPECT_TRUE(fails_with(metile_buffer_to_dlpack_versioned(b, METILE_DTYPE_F32, 0, nullptr, nullptr),
                           METILE_ERROR_INVALID_ARGUMENT, "out"));
    metile_buffer_release(b);
    metile_device_release(d);
  }
}

TEST(DLPackVersioned, ImportUsesTheMemoryInPlaceAndRunsTheDeleterOnce) {
  metile_device* d = open("interp");
  std::vector<float> host = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLManagedTensorVersioned t = producer(host, shape);
  versioned_deleted = 0;
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_from_dlpack_versioned(&b, d, &t), METILE_OK) << last_error();
  void* mem = nullptr;
  metile_buffer_contents(b, &mem);
  EXPECT_EQ(mem, host.data());
  EXPECT_EQ(metile_buffer_shares_memory(b), 1);
  metile_buffer_retain(b);
  metile_buffer_release(b);
  EXPECT_EQ(versioned_deleted, 0);
  metile_buffer_release(b);
  EXPECT_EQ(versioned_deleted, 1);
  metile_device_release(d);
}

TEST(DLPackVersioned, ImportRefusesOtherMajorVersionsAndReadOnlyTensors) {
  metile_device* d = open("interp");
  std::vector<float> host(4);
  int64_t shape[1] = {4};
  DLManagedTensorVersioned t = producer(host, shape);
  versioned_deleted = 0;
  metile_buffer* b = nullptr;
  t.version = {2, 0};
  EXPECT_TRUE(fails_with(metile_buffer_from_dlpack_versioned(&b, d, &t), METILE_ERROR_UNSUPPORTED,
                         "version 2.0"));
  t.version = {1, 3};  // a newer minor version is compatible
  t.flags = 1;         // DLPACK_FLAG_BITMASK_READ_ONLY
  EXPECT_TRUE(fails_with(metile_buffer_from_dlpack_versioned(&b, d, &t),
                         METILE_ERROR_INVALID_ARGUMENT, "read-only"));
  t.flags = 2;         // IS_COPIED: fine
  t.dl_tensor.device = {2, 0};  // kDLCUDA memory on a host device
  EXPECT_TRUE(fails_with(metile_buffer_from_dlpack_versioned(&b, d, &t), METILE_ERROR_UNSUPPORTED,
                         "device type 2"));
  EXPECT_EQ(versioned_deleted, 0);  // failures leave the tensor to its producer
  EXPECT_TRUE(fails_with(metile_buffer_from_dlpack_versioned(&b, d, nullptr),
                         METILE_ERROR_INVALID_ARGUMENT, "managed_tensor"));
  metile_device_release(d);
}

TEST(DLPackStreams, HostDevicesHaveNoStreamAndOrderTrivially) {
  for (const char* dev : {"interp", "cpu", "metal-sim"}) {
    metile_device* d = nullptr;
    if (metile_device_open(&d, dev) != METILE_OK) continue;
    uint64_t s = 99;
    ASSERT_EQ(metile_device_stream(d, &s), METILE_OK) << last_error();
    EXPECT_EQ(s, 0u) << dev;
    EXPECT_EQ(metile_device_wait_stream(d, 1), METILE_OK) << last_error();
    EXPECT_EQ(metile_device_signal_stream(d, 2), METILE_OK) << last_error();
    EXPECT_TRUE(fails_with(metile_device_stream(d, nullptr), METILE_ERROR_INVALID_ARGUMENT, "out"));
    metile_device_release(d);
  }
  EXPECT_TRUE(fails_with(metile_device_wait_stream(nullptr, 1), METILE_ERROR_INVALID_ARGUMENT,
                         "device"));
  EXPECT_TRUE(fails_with(metile_device_signal_stream(nullptr, 1), METILE_ERROR_INVALID_ARGUMENT,
                         "device"));
}

TEST(DLPackCapsule, TheDestructorDoesNothingOutsidePython) {
  // No CPython in this process: the destructor must neither crash nor touch the pointer.
  metile_dlpack_capsule_destructor(nullptr);
  int not_a_capsule = 0;
  metile_dlpack_capsule_destructor(&not_a_capsule);
  EXPECT_EQ(not_a_capsule, 0);
}

}  // namespace
