// DLPack through the C API as a foreign library meets it: this file declares the DLPack 1.0
// structs itself (as a producer or consumer with its own dlpack.h would), so it also pins the
// layout metile reads and writes. Stream ordering on the host devices is checked here; on cuda
// tests/gpu/test_torch_roundtrip.py checks it against torch.
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "capi_util.h"

namespace METILE_UNITY_ID {

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

// FP8 buffers carry DLPack 1.1's codes (kDLFloat8_e4m3fn = 10, kDLFloat8_e5m2 = 12, 8 bits), and
// a versioned tensor of them says 1.1; an FP8 tensor imports like any other (its bytes).
TEST(DLPackVersioned, Fp8BuffersCarryTheFloat8Codes) {
  metile_device* d = open("interp");
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, d, 16), METILE_OK);
  int64_t shape[1] = {16};
  void* out = nullptr;
  ASSERT_EQ(metile_buffer_to_dlpack_versioned(b, METILE_DTYPE_F8E4M3, 1, shape, &out), METILE_OK)
      << last_error();
  auto* v = static_cast<DLManagedTensorVersioned*>(out);
  EXPECT_EQ(v->version.minor, 1u);
  EXPECT_EQ(v->dl_tensor.dtype.code, 10);
  EXPECT_EQ(v->dl_tensor.dtype.bits, 8);
  metile_buffer* again = nullptr;
  ASSERT_EQ(metile_buffer_from_dlpack_versioned(&again, d, v), METILE_OK) << last_error();
  size_t size = 0;
  metile_buffer_size(again, &size);
  EXPECT_EQ(size, 16u);
  metile_buffer_release(again);  // runs the export's deleter
  ASSERT_EQ(metile_buffer_to_dlpack(b, METILE_DTYPE_F8E5M2, 1, shape, &out), METILE_OK);
  auto* legacy = static_cast<DLManagedTensor*>(out);
  EXPECT_EQ(legacy->dl_tensor.dtype.code, 12);
  EXPECT_EQ(legacy->dl_tensor.dtype.bits, 8);
  legacy->deleter(legacy);
  metile_buffer_release(b);
  metile_device_release(d);
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

// Every device with host-addressable buffers; cpu and metal-sim need their compilers.
std::vector<metile_device*> host_devices() {
  std::vector<metile_device*> out;
  for (const char* name : {"interp", "cpu", "metal-sim"}) {
    metile_device* d = nullptr;
    if (metile_device_open(&d, name) == METILE_OK) out.push_back(d);
  }
  return out;
}

TEST(DLPackExport, RefusesShapesWhoseByteSizeWraps) {
  for (metile_device* d : host_devices()) {
    metile_buffer* b = nullptr;
    ASSERT_EQ(metile_buffer_alloc(&b, d, 64), METILE_OK);
    int64_t wraps_bytes[1] = {int64_t{1} << 62};                     // * 4 bytes = 2^64
    int64_t wraps_count[2] = {16, (int64_t{1} << 60) + 1};           // 16 * that wraps to 16
    int64_t wraps_late[3] = {int64_t{1} << 32, int64_t{1} << 32, 0};  // 0 last: still refused
    void* out = nullptr;
    for (auto* call : {&metile_buffer_to_dlpack, &metile_buffer_to_dlpack_versioned}) {
      EXPECT_TRUE(fails_with(call(b, METILE_DTYPE_F32, 1, wraps_bytes, &out),
                             METILE_ERROR_INVALID_ARGUMENT, "overflows 64 bits"));
      EXPECT_TRUE(fails_with(call(b, METILE_DTYPE_F32, 2, wraps_count, &out),
                             METILE_ERROR_INVALID_ARGUMENT, "overflows 64 bits"));
      EXPECT_TRUE(fails_with(call(b, METILE_DTYPE_U8, 3, wraps_late, &out),
                             METILE_ERROR_INVALID_ARGUMENT, "overflows 64 bits"));
      int64_t too_big[2] = {4, 5};  // 80 bytes of a 64-byte buffer
      EXPECT_TRUE(fails_with(call(b, METILE_DTYPE_F32, 2, too_big, &out),
                             METILE_ERROR_INVALID_ARGUMENT, "80 bytes"));
      int64_t neg[2] = {4, -1};
      EXPECT_TRUE(fails_with(call(b, METILE_DTYPE_F32, 2, neg, &out),
                             METILE_ERROR_INVALID_ARGUMENT, "shape[1] is negative"));
      EXPECT_TRUE(fails_with(call(b, METILE_DTYPE_F32, 9, too_big, &out),
                             METILE_ERROR_INVALID_ARGUMENT, "ndim"));
      EXPECT_TRUE(fails_with(call(b, static_cast<metile_dtype>(99), 1, too_big, &out),
                             METILE_ERROR_INVALID_ARGUMENT, "dtype 99"));
      int64_t fits[2] = {4, 4};  // exactly 64 bytes
      ASSERT_EQ(call(b, METILE_DTYPE_F32, 2, fits, &out), METILE_OK) << last_error();
      auto* t = static_cast<DLManagedTensor*>(out);
      if (call == &metile_buffer_to_dlpack_versioned) {
        auto* v = static_cast<DLManagedTensorVersioned*>(out);
        v->deleter(v);
      } else {
        t->deleter(t);
      }
    }
    metile_buffer_release(b);
    metile_device_release(d);
  }
}

int legacy_deleted = 0;
void count_legacy(DLManagedTensor*) { ++legacy_deleted; }

// Imports `t` through both ABIs; a refusal must have the status and name `field`, and leave the
// tensor to its producer.
void expect_import_refused(metile_device* d, const DLTensor& t, const char* field) {
  DLManagedTensor legacy{t, nullptr, count_legacy};
  DLManagedTensorVersioned versioned{};
  versioned.version = {1, 0};
  versioned.dl_tensor = t;
  versioned.deleter = count_versioned;
  legacy_deleted = versioned_deleted = 0;
  metile_buffer* b = nullptr;
  EXPECT_TRUE(fails_with(metile_buffer_from_dlpack(&b, d, &legacy), METILE_ERROR_INVALID_ARGUMENT,
                         field));
  EXPECT_TRUE(fails_with(metile_buffer_from_dlpack_versioned(&b, d, &versioned),
                         METILE_ERROR_INVALID_ARGUMENT, field));
  EXPECT_EQ(legacy_deleted + versioned_deleted, 0);
}

TEST(DLPackImport, RefusesMalformedTensorsNamingTheField) {
  std::vector<float> host(16);
  for (metile_device* d : host_devices()) {
    int64_t shape16[1] = {16};
    DLTensor good{host.data(), {1, 0}, 1, {2, 32, 1}, shape16, nullptr, 0};

    DLTensor t = good;
    t.shape = nullptr;
    expect_import_refused(d, t, "dl_tensor.shape is NULL");
    t = good;
    t.ndim = 33;
    expect_import_refused(d, t, "dl_tensor.ndim");
    t = good;
    t.ndim = -1;
    expect_import_refused(d, t, "dl_tensor.ndim");
    t = good;
    t.data = nullptr;
    expect_import_refused(d, t, "dl_tensor.data is NULL");
    t = good;
    t.byte_offset = uint64_t{1} << 63;
    expect_import_refused(d, t, "dl_tensor.byte_offset");
    t = good;
    t.data = reinterpret_cast<void*>(UINTPTR_MAX - 8);
    t.byte_offset = 16;
    expect_import_refused(d, t, "dl_tensor.byte_offset");
    t = good;
    t.data = reinterpret_cast<void*>(UINTPTR_MAX - 32);  // 64 bytes from here wrap around
    expect_import_refused(d, t, "address space");
    int64_t wraps[2] = {int64_t{1} << 62, 4};
    t = good;
    t.ndim = 2;
    t.shape = wraps;
    t.dtype = {1, 8, 1};  // u8: 2^62 * 4 elements of one byte wrap to 0
    expect_import_refused(d, t, "overflows 64 bits");
    int64_t huge[1] = {int64_t{1} << 62};  // 2^64 bytes of f32
    t = good;
    t.shape = huge;
    expect_import_refused(d, t, "overflows 64 bits");
    int64_t half[2] = {int64_t{1} << 61, 5};  // 5 * 2^61 bytes: no wrap, but past PTRDIFF_MAX
    t = good;
    t.ndim = 2;
    t.shape = half;
    t.dtype = {1, 8, 1};
    expect_import_refused(d, t, "more than one object");
    int64_t neg[2] = {4, -4};
    t = good;
    t.ndim = 2;
    t.shape = neg;
    expect_import_refused(d, t, "dl_tensor.shape[1] is negative");
    t = good;
    t.dtype = {2, 32, 4};
    expect_import_refused(d, t, "dl_tensor.dtype");
    t = good;
    t.dtype = {2, 12, 1};
    expect_import_refused(d, t, "dl_tensor.dtype");
    int64_t strides[1] = {-2};  // a view that runs backwards has no first-byte base
    t = good;
    t.strides = strides;
    expect_import_refused(d, t, "dl_tensor.strides[0] is negative");
    strides[0] = INT64_MAX;  // a span past 64 bits
    expect_import_refused(d, t, "dl_tensor.strides");
    metile_device_release(d);
  }
}

TEST(DLPackImport, AnEmptyTensorMayHaveNullDataAndGetsItsOwnByte) {
  for (metile_device* d : host_devices()) {
    int64_t shape[2] = {0, 1ll << 40};  // no elements, whatever the other dimension
    int64_t strides[2] = {7, 9};        // meaningless for an empty tensor
    DLManagedTensor t{{nullptr, {1, 0}, 2, {2, 32, 1}, shape, strides, 0}, nullptr, count_legacy};
    legacy_deleted = 0;
    metile_buffer* b = nullptr;
    ASSERT_EQ(metile_buffer_from_dlpack(&b, d, &t), METILE_OK) << last_error();
    size_t size = 0;
    ASSERT_EQ(metile_buffer_size(b, &size), METILE_OK);
    EXPECT_EQ(size, 1u);
    void* mem = nullptr;
    ASSERT_EQ(metile_buffer_contents(b, &mem), METILE_OK);
    EXPECT_NE(mem, nullptr);
    metile_buffer_release(b);
    EXPECT_EQ(legacy_deleted, 1);
    metile_device_release(d);
  }
}

TEST(BufferWrap, RefusesRangesPastTheAddressSpace) {
  for (metile_device* d : host_devices()) {
    float host[4] = {};
    metile_buffer* b = nullptr;
    EXPECT_TRUE(fails_with(metile_buffer_wrap(&b, d, host, SIZE_MAX), METILE_ERROR_INVALID_ARGUMENT,
                           "address space"));
    EXPECT_TRUE(fails_with(metile_buffer_wrap(&b, d, host, size_t{PTRDIFF_MAX} + 1),
                           METILE_ERROR_INVALID_ARGUMENT, "address space"));
    EXPECT_TRUE(fails_with(metile_buffer_wrap(&b, d, reinterpret_cast<void*>(UINTPTR_MAX - 15), 32),
                           METILE_ERROR_INVALID_ARGUMENT, "address space"));
    ASSERT_EQ(metile_buffer_wrap(&b, d, host, sizeof host), METILE_OK) << last_error();
    metile_buffer_release(b);
    metile_device_release(d);
  }
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
