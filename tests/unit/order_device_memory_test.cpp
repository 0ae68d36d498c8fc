// order-device-memory: a store and a later access of the same buffer that another thread may
// make get a barrier ordering device memory between them (text in, text out).
#include <gtest/gtest.h>

#include <string>

#include "codegen/cuda/cuda.h"
#include "ir/gpu_parse.h"
#include "runtime/cuda/cuda_api.h"
#include "passes/pass.h"
#include "target/gpu_target.h"

namespace metile {
namespace METILE_UNITY_ID {

std::string run(const std::string& body, const std::string& layouts = "") {
  const std::string text =
      "gpu_kernel @k(%x: ptr<f32>, %o: ptr<f32>, %n: i32) threads=32 simd=32 {\n"
      "  #2 = tile<64> thr=32:2 reg=2:1\n  #3 = tile<64> thr=32:1 reg=2:32\n" +
      layouts + "  %tid: i32 thread = builtin thread_index.x\n" + body + "}\n";
  const std::string out = run_gpu_passes_on_text(text, {"order-device-memory"}, apple_gpu_target());
  const size_t from = out.find("thread_index.x\n") + 15;
  return out.substr(from, out.size() - from - 2);  // without the closing "}\n"
}

TEST(OrderDeviceMemory, OneThreadsOwnElementsNeedNoBarrier) {
  const std::string in_place = R"(  %i: i32 x2 #2 = coord #2 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %v: f32 x2 #2 = load %p
  store %p, %v
  %w: f32 x2 #2 = load %p
  store %p, %w
)";
  EXPECT_EQ(run(in_place), in_place);
  const std::string two_buffers = R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %o, %j
  %jf: f32 x2 #3 = cast %j
  %v: f32 x2 #2 = load %p
  store %q, %jf
  %w: f32 x2 #3 = load %q
)";
  // o written through #3 and read back through the same pointers: each thread its own elements.
  EXPECT_EQ(run(two_buffers), two_buffers);
}

TEST(OrderDeviceMemory, AnotherThreadsElementsGetADeviceBarrier) {
  // x read through #2 and written through #3: element e is read by one thread, written by another.
  EXPECT_EQ(run(R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %jf: f32 x2 #3 = cast %j
  %v: f32 x2 #2 = load %p
  store %q, %jf
  %w: f32 x2 #2 = load %p
)"),
            R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %jf: f32 x2 #3 = cast %j
  %v: f32 x2 #2 = load %p
  barrier memory=1
  store %q, %jf
  barrier memory=1
  %w: f32 x2 #2 = load %p
)");
  // A barrier already there (threadgroup memory only) gains the device order instead.
  EXPECT_EQ(run(R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %f: f32 x2 #2 = cast %i
  store %p, %f
  barrier
  %w: f32 x2 #3 = load %q
)"),
            R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %f: f32 x2 #2 = cast %i
  store %p, %f
  barrier memory=1
  %w: f32 x2 #3 = load %q
)");
}

TEST(OrderDeviceMemory, AtomicsAmongThemselvesNeedNoOrder) {
  const std::string atomics = R"(  %i: i32 x2 #2 = coord #2 %tid
  %j: i32 x2 #3 = coord #3 %tid
  %p: ptr<f32> x2 #2 = ptr_offset %x, %i
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %if: f32 x2 #2 = cast %i
  %jf: f32 x2 #3 = cast %j
  %a: f32 x2 #2 = atomic_add %p, %if
  %b: f32 x2 #3 = atomic_add %q, %jf
)";
  EXPECT_EQ(run(atomics), atomics);
}

TEST(OrderDeviceMemory, AUniformStoreIsThreadZerosAndOrderedBeforeEveryThreadsLoad) {
  const std::string stores = R"(  %z: i32 = const value=0
  %one: f32 = const value=1.0
  %q: ptr<f32> = ptr_offset %x, %z
  %leader: bool thread = eq %tid, %z
  store %q, %one, %leader
  store %q, %one, %leader
)";
  EXPECT_EQ(run(stores), stores);  // one thread writes both
  EXPECT_EQ(run(stores + "  %r: f32 = load %q\n"),
            stores + "  barrier memory=1\n  %r: f32 = load %q\n");
}

// A row loop: iteration iv touches iv .. iv + 63 through the same pointer value.
std::string row_loop(int step, const std::string& ahead) {
  return "  %c0: i32 = const value=0\n  %s: i32 = const value=" + std::to_string(step) +
         "\n  %t: i32 x2 #2 = coord #2 %tid\n  for %iv: i32 = %c0 to %n step %s {\n"
         "    %off: i32 x2 #2 = add %iv, %t\n    %p: ptr<f32> x2 #2 = ptr_offset %x, %off\n"
         "    %v: f32 x2 #2 = load %p\n" +
         ahead + "    store %p, %v\n    yield\n  }\n";
}

TEST(OrderDeviceMemory, LoopIterationsThatMoveApartNeedNoBarrier) {
  EXPECT_EQ(run(row_loop(64, "")), row_loop(64, ""));
  EXPECT_EQ(run(row_loop(-64, "")), row_loop(-64, ""));
  // Step 32 over 64-element tiles: the next iteration reads what another thread just stored.
  const std::string overlapping = run(row_loop(32, ""));
  EXPECT_NE(
      overlapping.find("    barrier memory=1\n    %v: f32 x2 #2 = load %p\n    store %p, %v\n"),
      std::string::npos)
      << overlapping;
}

TEST(OrderDeviceMemory, AnAddressWhoseSpanOverflowsIsNotProvenApart) {
  const std::string out = run(R"(  %c0: i32 = const value=0
  %s: i32 = const value=64
  %big: i64 = const value=4611686018427387904
  %t: i32 x2 #2 = coord #2 %tid
  for %iv: i32 = %c0 to %n step %s {
    %w: i64 = cast %iv
    %a: i64 = mul %w, %big
    %b: i64 = mul %a, %big
    %t64: i64 x2 #2 = cast %t
    %off: i64 x2 #2 = add %b, %t64
    %p: ptr<f32> x2 #2 = ptr_offset %x, %off
    %v: f32 x2 #2 = load %p
    store %p, %v
    yield
  }
)");
  EXPECT_NE(out.find("    barrier memory=1\n    %v: f32 x2 #2 = load %p"), std::string::npos) << out;
}

// whole_tiles' split of a row loop (peel_partial_tiles.cpp) as lowered: iv runs start .. split,
// then split .. n, with split = start + (n / step) * factor; both halves store x[iv .. iv + 63]
// unless the fields say otherwise.
struct Peeled {
  int step = 64;
  int factor = 64;
  std::string start = "%c0";
  std::string tail_step = "%s";
  std::string tail_ptr =
      "    %off1: i32 x2 #2 = add %iv1, %t\n    %q: ptr<f32> x2 #2 = ptr_offset %x, %off1\n";
  std::string tail_access = "    %w: f32 x2 #2 = load %q\n    store %q, %w\n";

  std::string text() const {
    return "  %c0: i32 = const value=0\n  %c1: i32 = const value=1\n"
           "  %h: i32 = const value=32\n  %s: i32 = const value=" + std::to_string(step) +
           "\n  %s64: i64 = const value=" + std::to_string(step) +
           "\n  %f64: i64 = const value=" + std::to_string(factor) +
           "\n  %t: i32 x2 #2 = coord #2 %tid\n  %t3: i32 x2 #3 = coord #3 %tid\n"
           "  %n64: i64 = cast %n\n  %whole: i64 = div %n64, %s64\n"
           "  %k: i64 = mul %whole, %f64\n  %st64: i64 = cast " + start +
           "\n  %ks: i64 = add %st64, %k\n  %split: i32 = cast %ks\n"
           "  for %iv: i32 = " + start + " to %split step %s {\n"
           "    %off: i32 x2 #2 = add %iv, %t\n    %p: ptr<f32> x2 #2 = ptr_offset %x, %off\n"
           "    %v: f32 x2 #2 = load %p\n    store %p, %v\n    yield\n  }\n"
           "  for %iv1: i32 = %split to %n step " + tail_step + " {\n" + tail_ptr + tail_access +
           "    yield\n  }\n";
  }
};

bool ordered_between_the_loops(const std::string& out) {
  return out.find("  }\n  barrier memory=1\n  for %iv1") != std::string::npos;
}

TEST(OrderDeviceMemory, TheHalvesOfAPeeledRowLoopNeedNoBarrier) {
  const Peeled from_a_runtime_start{.start = "%n"}, split_by_twice_the_step{.step = 128, .factor = 256};
  for (const Peeled& p : {Peeled{}, from_a_runtime_start, split_by_twice_the_step})
    EXPECT_EQ(run(p.text()), p.text());
  // last_first, folded as the metal-sim row kernels have it: the partial tile first, then the
  // whole tiles from the last, iv = split - 64 - u.
  const std::string last_first = R"(  %c0: i32 = const value=0
  %s: i32 = const value=64
  %s64: i64 = const value=64
  %t: i32 x2 #2 = coord #2 %tid
  %n64: i64 = cast %n
  %whole: i64 = div %n64, %s64
  %k: i64 = mul %whole, %s64
  %split: i32 = cast %k
  %last: i64 = sub %k, %s64
  for %iv: i32 = %split to %n step %s {
    %off: i32 x2 #2 = add %iv, %t
    %p: ptr<f32> x2 #2 = ptr_offset %x, %off
    %v: f32 x2 #2 = load %p
    store %p, %v
    yield
  }
  for %u: i32 = %c0 to %split step %s {
    %u64: i64 = cast %u
    %back: i64 = sub %last, %u64
    %iv1: i32 = cast %back
    %off1: i32 x2 #2 = add %iv1, %t
    %q: ptr<f32> x2 #2 = ptr_offset %x, %off1
    %w: f32 x2 #2 = load %q
    store %q, %w
    yield
  }
)";
  EXPECT_EQ(run(last_first), last_first);
  // The loop, then the same store at split: the code after it.
  std::string after = Peeled{}.text();
  after.replace(after.find("  for %iv1"), std::string::npos,
                "  %off1: i32 x2 #2 = add %split, %t\n  %q: ptr<f32> x2 #2 = ptr_offset %x, %off1\n"
                "  %w: f32 x2 #2 = load %q\n  store %q, %w\n");
  EXPECT_EQ(run(after), after);
}

TEST(OrderDeviceMemory, PeeledHalvesNotProvenApartKeepTheirBarrier) {
  // split a multiple of 32 after start: x[split ..] may be in another thread's part of the first
  // half's last tile.
  EXPECT_TRUE(ordered_between_the_loops(run(Peeled{.factor = 32}.text())));
  EXPECT_TRUE(ordered_between_the_loops(run(Peeled{.tail_step = "%h"}.text())));  // steps differ
  // Both step by 32 over 64-element tiles: the span reaches the next tile.
  EXPECT_TRUE(ordered_between_the_loops(run(Peeled{.step = 32, .factor = 32}.text())));
  // A step that is no power of two: a split that wrapped around need not be a multiple of it.
  EXPECT_TRUE(ordered_between_the_loops(run(Peeled{.step = 96, .factor = 96}.text())));
  // Another pointer into x, one element further.
  EXPECT_TRUE(ordered_between_the_loops(run(
      Peeled{.tail_ptr = "    %off1: i32 x2 #2 = add %iv1, %t\n"
                         "    %q1: ptr<f32> x2 #2 = ptr_offset %x, %off1\n"
                         "    %q: ptr<f32> x2 #2 = ptr_offset %q1, %c1\n"}
          .text())));
  // Another layout: element e of a tile is another thread's in #3.
  EXPECT_TRUE(ordered_between_the_loops(run(
      Peeled{.tail_ptr = "    %off1: i32 x2 #3 = add %iv1, %t3\n"
                         "    %q: ptr<f32> x2 #3 = ptr_offset %x, %off1\n",
             .tail_access = "    %w: f32 x2 #3 = load %q\n    store %q, %w\n"}
          .text())));
  // Only a load, of another thread's elements.
  EXPECT_TRUE(ordered_between_the_loops(run(
      Peeled{.tail_ptr = "    %off1: i32 x2 #3 = add %iv1, %t3\n"
                         "    %q: ptr<f32> x2 #3 = ptr_offset %x, %off1\n",
             .tail_access = "    %w: f32 x2 #3 = load %q\n"}
          .text())));
}

TEST(OrderDeviceMemory, PeeledHalvesWhoseSpanOverflowsKeepTheirBarrier) {
  const std::string out = run(R"(  %c0: i32 = const value=0
  %s: i32 = const value=64
  %s64: i64 = const value=64
  %big: i64 = const value=4611686018427387904
  %t: i32 x2 #2 = coord #2 %tid
  %t64: i64 x2 #2 = cast %t
  %n64: i64 = cast %n
  %whole: i64 = div %n64, %s64
  %k: i64 = mul %whole, %s64
  %split: i32 = cast %k
  for %iv: i32 = %c0 to %split step %s {
    %w: i64 = cast %iv
    %a: i64 = mul %w, %big
    %b: i64 = mul %a, %big
    %off: i64 x2 #2 = add %b, %t64
    %p: ptr<f32> x2 #2 = ptr_offset %x, %off
    %v: f32 x2 #2 = load %p
    store %p, %v
    yield
  }
  for %iv1: i32 = %split to %n step %s {
    %w1: i64 = cast %iv1
    %a1: i64 = mul %w1, %big
    %b1: i64 = mul %a1, %big
    %off1: i64 x2 #2 = add %b1, %t64
    %q: ptr<f32> x2 #2 = ptr_offset %x, %off1
    %v1: f32 x2 #2 = load %q
    store %q, %v1
    yield
  }
)");
  EXPECT_TRUE(ordered_between_the_loops(out)) << out;
}

TEST(OrderDeviceMemory, StoresAheadOfTheNextIterationAreOrdered) {
  // The GEMM that writes the block its next K step reads, in one dimension: load x[iv..], store
  // x[iv + 64 ..] through another pointer; the barrier goes before the next iteration's load
  // (i.e. before the store that follows it in the same iteration: pending is then the load).
  const std::string in = R"(  %c0: i32 = const value=0
  %s: i32 = const value=64
  %t: i32 x2 #2 = coord #2 %tid
  for %iv: i32 = %c0 to %n step %s {
    %off: i32 x2 #2 = add %iv, %t
    %p: ptr<f32> x2 #2 = ptr_offset %x, %off
    %v: f32 x2 #2 = load %p
    %q: ptr<f32> x2 #2 = ptr_offset %p, %s
    store %q, %v
    yield
  }
)";
  const std::string out = run(in);
  EXPECT_NE(out.find("    barrier memory=1\n    %v: f32 x2 #2 = load %p"), std::string::npos)
      << out;
}

TEST(OrderDeviceMemory, AConflictWithWhatCameBeforeALoopIsOrderedOnceBeforeIt) {
  const std::string before = R"(  %j: i32 x2 #3 = coord #3 %tid
  %q: ptr<f32> x2 #3 = ptr_offset %x, %j
  %jf: f32 x2 #3 = cast %j
  store %q, %jf
)";
  std::string expected = before + row_loop(64, "");
  expected.insert(expected.find("  for %iv"), "  barrier memory=1\n");
  EXPECT_EQ(run(before + row_loop(64, "")), expected);
}

// A TMA copy of a buffer the kernel stored into: the barrier also fences the async proxy.
const char* const kStoreThenTma = R"(gpu_kernel @k(%x: ptr<f16>, %o: ptr<f16>, %n: i32) threads=32 simd=32 {
  #2 = tile<64> thr=32:2 reg=2:1
  %tid: i32 thread = builtin thread_index.x
  %s: ptr<f16, threadgroup> = alloc shape="4096" stages=1 layout="linear"
  %bar: ptr<i64, threadgroup> = alloc shape="1" stages=1 layout="linear"
  %i: i32 x2 #2 = coord #2 %tid
  %p: ptr<f16> x2 #2 = ptr_offset %X, %i
  %v: f16 x2 #2 = cast %i
  store %p, %v
  %c0: i32 = const value=0
  mbar_init %bar, %tid count=1 n=1
  barrier
  tma_load %s, %bar, %c0, %c0, %tid map=0 spec="param=P rows=p2 cols=p2 ld=p2 elem=2 box=64x64 swizzle=128 clamp=0" box_rows=64 box_cols=64 blocks=1
}
)";

std::string store_then_tma(const std::string& stored, int tma_param) {
  std::string text = kStoreThenTma;
  text.replace(text.find("%X"), 2, stored);
  text.replace(text.find("param=P"), 7, "param=" + std::to_string(tma_param));
  return text;
}

TEST(OrderDeviceMemory, WritesBeforeATmaCopyOfTheBufferAreFencedForTheAsyncProxy) {
  const std::string out = run_gpu_passes_on_text(
      store_then_tma("%x", 0), {"order-device-memory", "allocate-threadgroup-memory"}, apple_gpu_target());
  EXPECT_NE(out.find("  barrier memory=1 async_proxy=1\n  tma_load"), std::string::npos) << out;
  // The TMA copy reads the other buffer: nothing to order.
  EXPECT_EQ(run_gpu_passes_on_text(store_then_tma("%x", 1), {"order-device-memory"},
                                   apple_gpu_target()),
            run_gpu_passes_on_text(store_then_tma("%x", 1), {}, apple_gpu_target()));
  // A device barrier alone (a user's, or one for a plain load) leaves the TMA copy unordered.
  std::string ordered = store_then_tma("%x", 0);
  ordered.replace(ordered.find("  barrier\n"), 10, "  barrier memory=1\n");
  const std::string fenced =
      run_gpu_passes_on_text(ordered, {"order-device-memory"}, apple_gpu_target());
  EXPECT_NE(fenced.find("  barrier memory=1 async_proxy=1\n  tma_load"), std::string::npos) << fenced;
  // CUDA: each thread fences its writes for the async proxy before the barrier.
  const std::string cuda = emit_cuda(gpu::parse(out)).source;
  EXPECT_NE(cuda.find("asm volatile(\"fence.proxy.async.global;\" ::: \"memory\");\n"
                      "  __syncthreads();"),
            std::string::npos)
      << cuda;
  std::string why, log;
  if (cuda::load_nvrtc(&why) == nullptr) GTEST_SKIP() << "NVRTC is not installed: " << why;
  const CudaKernelSource src = emit_cuda(gpu::parse(out));
  EXPECT_NO_THROW(cuda::nvrtc_compile(src.source, src.entry, "sm_90a", &log)) << log << src.source;
}

}  // namespace
}  // namespace metile
