// DLPack export/import through the C API on the interp device.
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <cstring>
#include <string>
#include <vector>

#include "support/dlpack_abi.h"

namespace METILE_UNITY_ID {

using namespace metile::dlpack;

metile_device* interp() {
  metile_device* d = nullptr;
  EXPECT_EQ(metile_device_open(&d, "interp"), METILE_OK) << metile_last_error();
  return d;
}

TEST(DLPack, ExportDescribesTheBufferAndKeepsItAlive) {
  metile_device* d = interp();
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, d, 6 * 4), METILE_OK);
  void* mem = nullptr;
  metile_buffer_contents(b, &mem);
  static_cast<float*>(mem)[5] = 42.0f;
  int64_t shape[2] = {2, 3};
  void* out = nullptr;
  ASSERT_EQ(metile_buffer_to_dlpack(b, METILE_DTYPE_F32, 2, shape, &out), METILE_OK) << metile_last_error();
  metile_buffer_release(b);  // the tensor keeps the memory alive
  auto* t = static_cast<DLManagedTensor*>(out);
  EXPECT_EQ(t->dl_tensor.device.device_type, 1);  // kDLCPU
  EXPECT_EQ(t->dl_tensor.ndim, 2);
  EXPECT_EQ(t->dl_tensor.shape[0], 2);
  EXPECT_EQ(t->dl_tensor.shape[1], 3);
  EXPECT_EQ(t->dl_tensor.dtype.code, 2);  // kDLFloat
  EXPECT_EQ(t->dl_tensor.dtype.bits, 32);
  EXPECT_EQ(t->dl_tensor.strides, nullptr);
  EXPECT_EQ(static_cast<float*>(t->dl_tensor.data)[5], 42.0f);
  t->deleter(t);
  metile_device_release(d);
}

TEST(DLPack, ExportRejectsBadInput) {
  metile_device* d = interp();
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, d, 16), METILE_OK);
  int64_t too_big[1] = {5};
  void* out = nullptr;
  EXPECT_EQ(metile_buffer_to_dlpack(b, METILE_DTYPE_F32, 1, too_big, &out), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(metile_last_error()).find("bytes"), std::string::npos) << metile_last_error();
  EXPECT_EQ(metile_buffer_to_dlpack(b, METILE_DTYPE_INVALID, 1, too_big, &out), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(metile_buffer_to_dlpack(b, METILE_DTYPE_F32, 9, too_big, &out), METILE_ERROR_INVALID_ARGUMENT);
  metile_buffer_release(b);
  metile_device_release(d);
}

int deleted = 0;
void count_delete(DLManagedTensor*) { ++deleted; }

TEST(DLPack, ImportUsesTheMemoryInPlaceAndRunsTheDeleter) {
  metile_device* d = interp();
  std::vector<int32_t> host = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLManagedTensor t{};
  t.dl_tensor.data = host.data();
  t.dl_tensor.device = {1, 0};
  t.dl_tensor.ndim = 1;
  t.dl_tensor.dtype = {0, 32, 1};
  t.dl_tensor.shape = shape;
  t.deleter = count_delete;
  deleted = 0;
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_from_dlpack(&b, d, &t), METILE_OK) << metile_last_error();
  EXPECT_EQ(metile_buffer_shares_memory(b), 1);
  void* mem = nullptr;
  metile_buffer_contents(b, &mem);
  EXPECT_EQ(mem, host.data());
  size_t size = 0;
  metile_buffer_size(b, &size);
  EXPECT_EQ(size, 16u);
  EXPECT_EQ(deleted, 0);
  metile_buffer_release(b);
  EXPECT_EQ(deleted, 1);
  metile_device_release(d);
}

// A strided view is imported in place as the bytes its elements span; negative strides and spans
// past 64 bits are refused by name.
TEST(DLPack, ImportsStridedViewsAsTheirSpan) {
  metile_device* d = interp();
  std::vector<float> host(16);
  int64_t shape[2] = {2, 3}, strides[2] = {8, 2};  // every other row's every other element
  DLManagedTensor t{};
  t.dl_tensor.data = host.data();
  t.dl_tensor.byte_offset = 4;
  t.dl_tensor.device = {1, 0};
  t.dl_tensor.ndim = 2;
  t.dl_tensor.dtype = {2, 32, 1};
  t.dl_tensor.shape = shape;
  t.dl_tensor.strides = strides;
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_from_dlpack(&b, d, &t), METILE_OK) << metile_last_error();
  size_t size = 0;
  void* mem = nullptr;
  metile_buffer_size(b, &size);
  metile_buffer_contents(b, &mem);
  EXPECT_EQ(size, (8 + 2 * 2 + 1) * sizeof(float));  // elements 0 .. 12 of the view's base
  EXPECT_EQ(mem, host.data() + 1);
  metile_buffer_release(b);
  strides[0] = 1;  // a transposed view: dimensions in any order
  strides[1] = 2;
  ASSERT_EQ(metile_buffer_from_dlpack(&b, d, &t), METILE_OK) << metile_last_error();
  metile_buffer_size(b, &size);
  EXPECT_EQ(size, (1 + 4 + 1) * sizeof(float));
  metile_buffer_release(b);
  strides[1] = -2;
  EXPECT_EQ(metile_buffer_from_dlpack(&b, d, &t), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(metile_last_error()).find("dl_tensor.strides[1] is negative"), std::string::npos)
      << metile_last_error();
  strides[1] = int64_t{1} << 62;
  EXPECT_EQ(metile_buffer_from_dlpack(&b, d, &t), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(metile_last_error()).find("dl_tensor.strides"), std::string::npos)
      << metile_last_error();
  t.dl_tensor.strides = nullptr;
  t.dl_tensor.device = {8, 0};  // kDLMetal memory is not host-addressable here
  EXPECT_EQ(metile_buffer_from_dlpack(&b, d, &t), METILE_ERROR_UNSUPPORTED);
  metile_device_release(d);
}

}  // namespace
