// Run-time if and while on the GPU devices: lowering to the GPU IR's if / while (text in, text
// out: the printed function parses back to the same text), the GPU IR verifier's rules for them,
// the passes that walk their blocks (cse, dce, order-device-memory, insert-cancel-points), and
// CUDA C++ from them compiled by NVRTC for sm_90a (cuda kernels cannot run without a GPU; the
// Python tests run them on a GPU: bindings/python/tests/test_control_flow.py and the layer-norm
// backward of test_triton_tutorials.py; the suite kernel locked_sum runs in KernelSuite).
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/dsl.h"
#include "ir/gpu_parse.h"
#include "passes/lower.h"
#include "passes/pass.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::vector<ValueId> ids(const std::vector<V>& vs) {
  std::vector<ValueId> out;
  for (const V& v : vs) out.push_back(v.id);
  return out;
}
std::vector<V> wrap_all(KernelBuilder& k, const std::vector<ValueId>& vs) {
  std::vector<V> out;
  for (ValueId v : vs) out.push_back(k.wrap(v));
  return out;
}

// Run-time `if cond:` on a bool scalar; each branch returns its yields (the results).
template <typename Then, typename Else>
std::vector<V> if_else(KernelBuilder& k, V cond, Then&& then, Else&& otherwise) {
  k.raw().if_begin(cond.id);
  k.raw().if_else(ids(then()));
  return wrap_all(k, k.raw().if_end(ids(otherwise())));
}

// Run-time `while`: cond(carried) -> {condition, passed...}, body(passed) -> next carried.
template <typename Cond, typename Body>
std::vector<V> while_loop(KernelBuilder& k, const std::vector<V>& inits, Cond&& cond, Body&& body) {
  std::vector<V> c = cond(wrap_all(k, k.raw().while_begin(ids(inits))));
  std::vector<V> passed = wrap_all(k, k.raw().while_do(c.at(0).id, ids(std::vector<V>(c.begin() + 1, c.end()))));
  return wrap_all(k, k.raw().while_end(ids(body(passed))));
}

// Triton's layer-norm backward idiom: a spin lock taken with atomic_cas in a while, a
// first-writer flag read under it with an if yielding a tile.
Program locked_rows(int64_t block) {
  KernelBuilder k("locked_rows");
  V x = k.ptr("X"), acc = k.ptr("Acc"), lock = k.ptr("Lock", DType::i32);
  V count = k.ptr("Count", DType::i32);
  V offs = k.arange(0, block);
  V xs = k.load(x + (k.program_id(0) * block + offs));
  while_loop(k,
      {}, [&](const std::vector<V>&) -> std::vector<V> { return {k.atomic_cas(lock, k.i32(0), k.i32(1), V{}) == 1}; },
      [&](const std::vector<V>&) { return std::vector<V>{}; });
  std::vector<V> part = if_else(k,
      k.load(count) == 0,
      [&] {
        k.atomic(OpKind::ATOMIC_XCHG, count, k.i32(1));
        return std::vector<V>{xs};
      },
      [&] { return std::vector<V>{xs + k.load(acc + offs)}; });
  k.store(acc + offs, part[0]);
  k.atomic(OpKind::ATOMIC_XCHG, lock, k.i32(0));
  return k.finish();
}

// A while carrying a tile and a counter, an if inside it with a reduction (an exchange through
// threadgroup memory with barriers) in one branch.
Program carried_while(int64_t block) {
  KernelBuilder k("carried_while");
  V x = k.ptr("X"), out = k.ptr("Out"), trips = k.ptr("Trips", DType::i32);
  V offs = k.arange(0, block);
  V n = k.load(trips);
  std::vector<V> r = while_loop(k,
      {k.load(x + offs), k.i32(0)},
      [&](const std::vector<V>& c) { return std::vector<V>{c[1] < n, c[0], c[1]}; },
      [&](const std::vector<V>& p) {
        std::vector<V> t = if_else(k,
            p[1] % 2 == 0, [&] { return std::vector<V>{p[0] - k.max(p[0])}; },
            [&] { return std::vector<V>{p[0] * 0.5}; });
        return std::vector<V>{t[0], p[1] + 1};
      });
  k.store(out + offs, r[0]);
  return k.finish();
}

gpu::Function lower(const Program& p) { return lower_to_gpu(p, apple_gpu_target(), {0, "metal-sim"}); }

TEST(GpuControlFlow, LoweringWritesIfAndWhileWhoseTextParsesBack) {
  for (const Program& p : {locked_rows(128), carried_while(256)}) {
    gpu::Function f = lower(p);
    const std::string text = gpu::print(f);
    EXPECT_TRUE(has(text, "} else {\n")) << text;
    EXPECT_TRUE(has(text, "} do (")) << text;
    EXPECT_EQ(gpu::print(gpu::parse(text)), text);
  }
  const std::string text = gpu::print(lower(carried_while(256)));
  // The carried tile keeps one layout through the loop; the condition is uniform.
  EXPECT_TRUE(has(text, " = while iter(%carried: f32 x")) << text;
  EXPECT_TRUE(has(text, "= if %")) << text;
  EXPECT_TRUE(has(text, "barrier")) << text;  // the reduction's exchange, inside the if
}

TEST(GpuControlFlow, TheSpinLockIsOneAtomicPerProgramBroadcastToEveryThread) {
  const std::string text = gpu::print(lower(locked_rows(128)));
  // thread 0 makes the cas; its old value goes through threadgroup memory to every thread,
  // whose uniform comparison is the while's condition.
  const size_t w = text.find("while {");
  ASSERT_NE(w, std::string::npos) << text;
  const std::string before = text.substr(w, text.find("} do (", w) - w);
  EXPECT_TRUE(has(before, "= atomic_cas %")) << before;
  EXPECT_TRUE(has(before, "%leader")) << before;
  EXPECT_TRUE(has(before, "barrier")) << before;
  EXPECT_TRUE(has(before, "yield %")) << before;
}

void expect_bad(const std::string& text, const std::string& part) {
  try {
    gpu::parse(text);
    ADD_FAILURE() << "parsed:\n" << text;
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), part)) << e.what() << "\nwanted: " << part;
  }
}

const std::string kHead =
    "gpu_kernel @k(%X: ptr<i32>, %n: i32) threads=32 simd=32 {\n"
    "  #2 = tile<32> thr=32:1 reg=1:0\n"
    "  %c0: i32 = const value=0\n"
    "  %p: bool = gt %n, %c0\n";

TEST(GpuControlFlow, TextFormAndVerifierRules) {
  const std::string good = kHead +
                           "  %r: i32 = if %p {\n"
                           "    yield %n\n"
                           "  } else {\n"
                           "    yield %c0\n"
                           "  }\n"
                           "  %w: i32 = while iter(%a: i32 = %c0) {\n"
                           "    %go: bool = lt %a, %r\n"
                           "    yield %go, %a\n"
                           "  } do (%b: i32) {\n"
                           "    %one: i32 = const value=1\n"
                           "    %nx: i32 = add %b, %one\n"
                           "    yield %nx\n"
                           "  }\n"
                           "  store %X, %w\n"
                           "}\n";
  EXPECT_EQ(gpu::print(gpu::parse(good)), good);
  // A condition that differs between threads.
  expect_bad(kHead +
                 "  %tid: i32 thread = builtin thread_index.x\n"
                 "  %q: bool thread = gt %tid, %c0\n"
                 "  if %q {\n    yield\n  } else {\n    yield\n  }\n}\n",
             "the condition must be a uniform bool");
  // A value of a branch used after it.
  expect_bad(kHead +
                 "  if %p {\n    %in: i32 = add %n, %n\n    yield\n  } else {\n    yield\n  }\n"
                 "  store %X, %in\n}\n",
             "%in is not visible here");
  // Yields that do not match the results.
  expect_bad(kHead + "  %r: i32 = if %p {\n    yield %n\n  } else {\n    yield\n  }\n}\n",
             "the else block yields 0 values, expected 1");
  expect_bad(kHead +
                 "  %w: i32 = while iter(%a: i32 = %c0) {\n    yield %a\n  } do (%b: i32) {\n"
                 "    yield %b\n  }\n}\n",
             "the before block yields 1 values, expected 2");
  expect_bad(kHead +
                 "  %w: i32 = while iter(%a: i32 = %c0) {\n    yield %a, %a\n  } do (%b: i32) {\n"
                 "    yield %b\n  }\n}\n",
             "the condition must be a uniform bool");
}

TEST(GpuControlFlow, PassesKeepEachBlockToItself) {
  const std::string text = kHead +
                           "  %r: i32 = if %p {\n"
                           "    %s: i32 = add %n, %n\n"
                           "    yield %s\n"
                           "  } else {\n"
                           "    %t: i32 = add %n, %n\n"
                           "    yield %t\n"
                           "  }\n"
                           "  %u: i32 = add %n, %n\n"
                           "  %dead: i32 = if %p {\n"
                           "    yield %n\n"
                           "  } else {\n"
                           "    yield %c0\n"
                           "  }\n"
                           "  %w: i32 = while iter(%a: i32 = %r) {\n"
                           "    %go: bool = lt %a, %u\n"
                           "    yield %go, %a\n"
                           "  } do (%b: i32) {\n"
                           "    store %X, %b\n"
                           "    %nx: i32 = add %b, %u\n"
                           "    yield %nx\n"
                           "  }\n"
                           "  %v: i32 = load %X\n"
                           "  store %X, %v\n"
                           "}\n";
  gpu::Function f = gpu::parse(text);
  PassContext ctx{nvidia_gpu_target()};
  for (const char* p : {"cse", "dce", "order-device-memory", "insert-cancel-points"}) run_gpu_pass(p, f, ctx);
  const std::string out = gpu::print(f);
  gpu::verify(f);
  // cse: the add in each branch stays there (neither dominates the other nor the one after).
  EXPECT_EQ(count(out, "= add %n, %n"), 3) << out;
  EXPECT_FALSE(has(out, "%dead")) << out;  // dce: an if without effects whose result is unused
  EXPECT_TRUE(has(out, "cancel_point every=1024\n    yield %nx")) << out;  // the while's back-edge
  // The while's store and the load after it: a barrier ordering device memory between them.
  EXPECT_TRUE(has(out, "  }\n  barrier memory=1\n  %v: i32 = load %X")) << out;
}

bool have_nvrtc() {
  std::string why;
  return cuda::load_nvrtc(&why) != nullptr;
}

TEST(CudaCodegenSource, IfAndWhileCompileForSm90a) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  for (const Program& p : {locked_rows(256), carried_while(512)}) {
    Artifact a = cuda_build_program(p, {}, "sm_90a");
    ASSERT_EQ(a.kind, ArtifactKind::cubin);
    ASSERT_GT(a.bytes.size(), 4u);
    EXPECT_EQ(std::memcmp(a.bytes.data(), "\x7f" "ELF", 4), 0);
    const std::string& src = a.sources.at(Stage::cuda);
    EXPECT_TRUE(has(src, "for (;;)")) << src;
    EXPECT_TRUE(has(src, ")) break;")) << src;
    EXPECT_TRUE(has(src, "else {")) << src;
    // The spin loop can be stopped by the host like any other loop.
    EXPECT_TRUE(has(src, "mt_cancel_check(")) << src;
  }
}

}  // namespace METILE_UNITY_ID
}  // namespace metile
