// The cpu device end to end: compile, load, launch (one-shot, prepared, concurrent), errors.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "frontend/builder.h"
#include "runtime/backends.h"
#include "driver/compile.h"
#include "runtime/device.h"
#include "support/error.h"
#include "scoped_env.h"

namespace metile {
namespace METILE_UNITY_ID {

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
  EXPECT_EQ(k->artifact.kind, ArtifactKind::shared_object);
  EXPECT_FALSE(k->artifact.bytes.empty());
  ASSERT_TRUE(k->artifact.sources.count(Stage::cpp));
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

using test::ScopedEnv;

TEST(CpuDevice, BrokenCompilerGivesCompileErrorWithLogAndCommand) {
  Env env;
  ScopedEnv cxx("METILE_CXX", "/bin/false");
  try {
    env.compile(vector_add(64));
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_COMPILE);
    std::string m = e.what();
    EXPECT_NE(m.find("compiling kernel vadd failed (exit status 1)"), std::string::npos) << m;
    EXPECT_NE(m.find("command: /bin/false -O3 -march=native"), std::string::npos) << m;
  }
}

TEST(CpuDevice, CompilerDiagnosticsReachTheMessage) {
  Env env;
  // A "compiler" that prints a diagnostic and fails, like a real one would.
  std::string script = ::testing::TempDir() + "/metile_fake_cxx.sh";
  {
    FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("#!/bin/sh\necho 'kernel.cpp:1:1: error: something is wrong' >&2\nexit 2\n", f);
    std::fclose(f);
  }
  ::chmod(script.c_str(), 0755);
  ScopedEnv cxx("METILE_CXX", script.c_str());
  try {
    env.compile(vector_add(64));
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_COMPILE);
    EXPECT_NE(std::string(e.what()).find("error: something is wrong"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("exit status 2"), std::string::npos) << e.what();
  }
}

TEST(CpuDevice, MissingCompilerIsReportedByTheProbeAndBuild) {
  Env env;
  ScopedEnv cxx("METILE_CXX", "/nonexistent/bin/c++");
  std::string why = probe_cpu_device();
  EXPECT_NE(why.find("METILE_CXX=\"/nonexistent/bin/c++\" does not name an executable"),
            std::string::npos) << why;
  try {
    env.compile(vector_add(64));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_DEVICE_UNAVAILABLE);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/bin/c++"), std::string::npos) << e.what();
  }
  ScopedEnv path("PATH", "/nonexistent");
  ::unsetenv("METILE_CXX");
  EXPECT_NE(probe_cpu_device().find("no C++ compiler found"), std::string::npos) << probe_cpu_device();
}

TEST(CpuDevice, CacheIdentityNamesTargetCompilerAndFlags) {
  Env env;
  std::string id = env.dev->cache_identity();
  EXPECT_EQ(id.rfind("cpu;", 0), 0u) << id;
  EXPECT_NE(id.find("-march=native"), std::string::npos) << id;
  EXPECT_NE(id.find("-ffp-contract=off"), std::string::npos) << id;
  EXPECT_EQ(id.find(";native;"), std::string::npos) << "-march=native was not resolved: " << id;
  EXPECT_FALSE(env.dev->info().asynchronous);
}

TEST(CpuDevice, PreparedLaunchPicksUpNewArgumentsAndGrid) {
  Env env;
  auto k = env.compile(vector_add(64));
  auto x = env.dev->alloc(256 * 4), y = env.dev->alloc(256 * 4), o = env.dev->alloc(256 * 4);
  auto* xp = static_cast<float*>(x->contents());
  auto* yp = static_cast<float*>(y->contents());
  auto* op = static_cast<float*>(o->contents());
  for (int i = 0; i < 256; ++i) xp[i] = yp[i] = static_cast<float>(i);
  Grid g;
  g.dims = {1, 1, 1};
  auto launch = k->kernel->prepare(g, {buf(x), buf(y), buf(o), i32(256)});
  launch->run();
  EXPECT_EQ(op[63], 126.0f);
  EXPECT_EQ(op[64], 0.0f);
  launch->grid.dims = {4, 1, 1};
  launch->args[1] = buf(x);
  launch->args[3] = i32(200);
  launch->update();
  launch->run();
  EXPECT_EQ(op[199], 398.0f);
  EXPECT_EQ(op[200], 0.0f);
}

TEST(CpuDevice, EightThreadsLaunchAtOnce) {
  Env env;
  auto k = env.compile(vector_add(128));
  constexpr int kThreads = 8, kRounds = 60, kN = 5000;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto x = env.dev->alloc(kN * 4), y = env.dev->alloc(kN * 4), o = env.dev->alloc(kN * 4);
      auto* xp = static_cast<float*>(x->contents());
      auto* yp = static_cast<float*>(y->contents());
      auto* op = static_cast<float*>(o->contents());
      Grid g;
      g.dims = {(kN + 127) / 128, 1, 1};
      auto prepared = k->kernel->prepare(g, {buf(x), buf(y), buf(o), i32(kN)});
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kN; ++i) {
          xp[i] = static_cast<float>(t * 1000 + r);
          yp[i] = static_cast<float>(i);
        }
        if (r % 2) prepared->run();
        else k->kernel->launch(g, {buf(x), buf(y), buf(o), i32(kN)});
        for (int i = 0; i < kN; ++i)
          if (op[i] != xp[i] + yp[i]) {
            failures.fetch_add(1);
            break;
          }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(CpuDevice, LargeGridsSpreadOverThreadsAndMatch) {
  Env env;
  auto k = env.compile(vector_add(16));
  const int n = 16 * 4099;
  auto x = env.dev->alloc(n * 4), y = env.dev->alloc(n * 4), o = env.dev->alloc(n * 4);
  auto* xp = static_cast<float*>(x->contents());
  auto* yp = static_cast<float*>(y->contents());
  auto* op = static_cast<float*>(o->contents());
  for (int i = 0; i < n; ++i) {
    xp[i] = static_cast<float>(i);
    yp[i] = 1.0f;
  }
  Grid g;
  g.dims = {4099, 1, 1};
  for (int round = 0; round < 3; ++round) {  // the first launch measures, later ones may run inline
    std::memset(op, 0, n * 4);
    k->kernel->launch(g, {buf(x), buf(y), buf(o), i32(n)});
    for (int i = 0; i < n; ++i) ASSERT_EQ(op[i], i + 1.0f) << i;
  }
}

TEST(CpuDevice, WrappedHostMemoryIsUsedInPlace) {
  Env env;
  std::vector<float> host(64, 1.0f);
  auto b = env.dev->wrap(host.data(), host.size() * 4);
  EXPECT_TRUE(b->shares_memory());
  EXPECT_EQ(b->contents(), host.data());
  auto a = env.dev->alloc(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->contents()) % 4096, 0u);
  EXPECT_EQ(static_cast<uint8_t*>(a->contents())[99], 0);
}

}  // namespace
}  // namespace metile
