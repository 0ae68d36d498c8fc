// The interp device through the C API: registration, properties, buffers, compile and launch.
#include <gtest/gtest.h>
#include <metile/metile.h>

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/builder.h"
#include "runtime/device.h"

namespace metile {
namespace METILE_UNITY_ID {

metile_device* open_interp() {
  metile_device* d = nullptr;
  EXPECT_EQ(metile_device_open(&d, "interp"), METILE_OK) << metile_last_error();
  return d;
}

metile_program* to_handle(const Program& p) {
  metile_program* h = nullptr;
  EXPECT_EQ(metile_program_parse(&h, print(p).c_str()), METILE_OK) << metile_last_error();
  return h;
}

Program vector_add(int block) {
  Builder b("vector_add");
  b.set_loc("vector_add.py", 4);
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId y = b.param("Y", Type::ptr(DType::f32));
  ValueId out = b.param("Out", Type::ptr(DType::f32));
  ValueId n = b.param("N", Type::scalar(DType::i32));
  b.set_loc("vector_add.py", 5);
  ValueId offs =
      b.binary(OpKind::ADD,
               b.binary(OpKind::MUL, b.grid(OpKind::PROGRAM_ID, 0), b.const_int(DType::i32, block)),
               b.arange(kNoValue, block));
  ValueId mask = b.binary(OpKind::LT, offs, n);
  b.set_loc("vector_add.py", 6);
  ValueId xv = b.load(b.binary(OpKind::ADD, x, offs), mask, kNoValue);
  ValueId yv = b.load(b.binary(OpKind::ADD, y, offs), mask, kNoValue);
  b.set_loc("vector_add.py", 7);
  b.store(b.binary(OpKind::ADD, out, offs), b.binary(OpKind::ADD, xv, yv), mask);
  return b.finish();
}

TEST(InterpDevice, IsRegisteredAndAlwaysAvailable) {
  bool found = false;
  for (const DeviceEntry& e : device_registry())
    if (std::string(e.name) == "interp") {
      found = true;
      EXPECT_EQ(e.probe(), "");
    }
  EXPECT_TRUE(found);
  char* names = nullptr;
  ASSERT_EQ(metile_devices_available(&names), METILE_OK);
  EXPECT_NE(std::string(names).find("interp"), std::string::npos) << names;
  metile_free(names);
}

TEST(InterpDevice, Info) {
  metile_device* d = open_interp();
  metile_device_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(metile_device_get_info(d, &info), METILE_OK) << metile_last_error();
  EXPECT_STREQ(info.name, "interp");
  EXPECT_EQ(info.simd_width, 1);
  EXPECT_EQ(info.max_threads_per_group, 1024);
  EXPECT_EQ(info.threadgroup_memory_bytes, 65536u);
  EXPECT_EQ(info.unified_memory, 1);
  EXPECT_EQ(info.asynchronous, 0);
  metile_device_release(d);
}

TEST(InterpDevice, BuffersArePageAlignedZeroedAndWrapIsZeroCopy) {
  metile_device* d = open_interp();
  metile_buffer* b = nullptr;
  ASSERT_EQ(metile_buffer_alloc(&b, d, 1000), METILE_OK);
  void* p = nullptr;
  ASSERT_EQ(metile_buffer_contents(b, &p), METILE_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  const auto* bytes = static_cast<const uint8_t*>(p);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(bytes[i], 0) << i;
  size_t size = 0;
  ASSERT_EQ(metile_buffer_size(b, &size), METILE_OK);
  EXPECT_EQ(size, 1000u);
  EXPECT_EQ(metile_buffer_shares_memory(b), 0);
  metile_buffer_release(b);

  std::vector<float> host(7, 1.5f);
  metile_buffer* w = nullptr;
  ASSERT_EQ(metile_buffer_wrap(&w, d, host.data(), host.size() * 4), METILE_OK);
  ASSERT_EQ(metile_buffer_contents(w, &p), METILE_OK);
  EXPECT_EQ(p, host.data());
  EXPECT_EQ(metile_buffer_shares_memory(w), 1);
  metile_buffer_release(w);
  metile_device_release(d);
}

TEST(InterpDevice, VectorAddRaggedThroughTheCApi) {
  const int n = 1000, block = 256;
  std::vector<float> x(n), y(n), out(n + 24, -7.0f);  // the tail past N must stay untouched
  for (int i = 0; i < n; ++i) {
    x[i] = 0.25f * static_cast<float>(i);
    y[i] = 1.0f - static_cast<float>(i % 17);
  }
  metile_device* d = open_interp();
  metile_program* prog = to_handle(vector_add(block));
  metile_kernel* k = nullptr;
  ASSERT_EQ(metile_kernel_compile(&k, d, prog, nullptr), METILE_OK) << metile_last_error();
  char* ir = nullptr;
  ASSERT_EQ(metile_kernel_source(k, "tile_ir", &ir), METILE_OK);
  EXPECT_NE(std::string(ir).find("kernel @vector_add"), std::string::npos);
  metile_free(ir);
  metile_kernel_info kinfo{};
  kinfo.struct_size = sizeof kinfo;
  ASSERT_EQ(metile_kernel_get_info(k, &kinfo), METILE_OK);
  EXPECT_EQ(kinfo.threadgroup_memory_bytes, 0u);

  metile_buffer *bx = nullptr, *by = nullptr, *bo = nullptr;
  ASSERT_EQ(metile_buffer_wrap(&bx, d, x.data(), n * 4), METILE_OK);
  ASSERT_EQ(metile_buffer_wrap(&by, d, y.data(), n * 4), METILE_OK);
  ASSERT_EQ(metile_buffer_wrap(&bo, d, out.data(), out.size() * 4), METILE_OK);
  metile_arg args[4] = {};
  args[0].kind = args[1].kind = args[2].kind = METILE_ARG_BUFFER;
  args[0].buffer = bx;
  args[1].buffer = by;
  args[2].buffer = bo;
  args[3].kind = METILE_ARG_I32;
  args[3].i = n;
  const uint32_t grid[3] = {(n + block - 1) / block, 1, 1};
  ASSERT_EQ(metile_kernel_launch(k, grid, args, 4), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_device_synchronize(d), METILE_OK);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + y[i]) << i;
  for (size_t i = n; i < out.size(); ++i) ASSERT_EQ(out[i], -7.0f) << i;

  // A prepared launch runs the same work again, here with a byte offset on the output.
  std::fill(out.begin(), out.end(), 0.0f);
  args[2].offset = 16;
  metile_launch* l = nullptr;
  ASSERT_EQ(metile_launch_create(&l, k, grid, args, 4), METILE_OK) << metile_last_error();
  ASSERT_EQ(metile_launch_run(l), METILE_OK) << metile_last_error();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i + 4], x[i] + y[i]) << i;
  metile_launch_release(l);

  for (metile_buffer* b : {bx, by, bo}) metile_buffer_release(b);
  metile_kernel_release(k);
  metile_program_release(prog);
  metile_device_release(d);
}

}  // namespace
}  // namespace metile
