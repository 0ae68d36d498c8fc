// The cpu device end to end: compile, load, launch (one-shot, prepared, concurrent), errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "frontend/builder.h"
#include "runtime/compile.h"
#include "runtime/device.h"
#include "support/error.h"

namespace metile {
namespace {

Program vector_add(int block) {
  Builder b("vadd");
  ValueId x = b.param("x", Type::ptr(DType::f32));
  ValueId y = b.param("y", Type::ptr(DType::f32));
  ValueId out = b.param("out", Type::ptr(DType::f32));
  ValueId n = b.param("n", Type::scalar(DType::i32));
  ValueId pid = b.grid(OpKind::PROGRAM_ID, 0);
  ValueId offs = b.binary(OpKind::ADD, b.binary(OpKind::MUL, pid, b.const_int(DType::i32, block)),
                          b.arange(kNoValue, block));
  ValueId mask = b.binary(OpKind::LT, offs, n);
  ValueId xv = b.load(b.binary(OpKind::ADD, x, offs), mask, kNoValue);
  ValueId yv = b.load(b.binary(OpKind::ADD, y, offs), mask, kNoValue);
  b.store(b.binary(OpKind::ADD, out, offs), b.binary(OpKind::ADD, xv, yv), mask);
  return b.finish();
}

struct Env {
  std::shared_ptr<Device> dev = open_device("cpu");
  std::shared_ptr<CompiledKernel> compile(Program p) {
    return compile_kernel(dev, std::make_shared<const Program>(std::move(p)), CompileOptions{});
  }
};

LaunchArg buf(const std::shared_ptr<Buffer>& b) { return {b.get(), 0, 0}; }
LaunchArg i32(int32_t v) { return {nullptr, 0, static_cast<uint32_t>(v)}; }

TEST(CpuDevice, VectorAddRaggedLength) {
  Env env;
  auto k = env.compile(vector_add(256));
  EXPECT_EQ(k->artifact.kind, "so");
  EXPECT_FALSE(k->artifact.bytes.empty());
  ASSERT_TRUE(k->artifact.sources.count("cpp"));
  const int n = 1000;
  auto x = env.dev->alloc(n * 4), y = env.dev->alloc(n * 4), out = env.dev->alloc(1024 * 4);
  auto* xp = static_cast<float*>(x->contents());
  auto* yp = static_cast<float*>(y->contents());
  auto* op = static_cast<float*>(out->contents());
  for (int i = 0; i < n; ++i) {
    xp[i] = 0.5f * i;
    yp[i] = 1000.0f - i;
  }
  for (int i = 0; i < 1024; ++i) op[i] = -7.0f;
  Grid g;
  g.dims = {4, 1, 1};
  k->kernel->launch(g, {buf(x), buf(y), buf(out), i32(n)});
  for (int i = 0; i < n; ++i) ASSERT_EQ(op[i], xp[i] + yp[i]) << i;
  for (int i = n; i < 1024; ++i) ASSERT_EQ(op[i], -7.0f) << "masked-off lane " << i << " was written";
}

}  // namespace
}  // namespace metile
