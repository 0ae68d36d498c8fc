// metal-sim's fiber stacks are sized from the frames clang reports for the kernel, so a thread
// with large private arrays runs instead of overflowing its fiber stack (which was a SIGSEGV of
// the host process), and a kernel past the per-thread limit is a compile error.
#include <vector>

#include "metal_sim_test_util.h"

namespace metile::metal_sim {
namespace METILE_UNITY_ID {

// Each thread fills and sums a private array of `n` floats (4n bytes of stack).
std::string private_array_kernel(int n) {
  std::string s = std::to_string(n);
  return "#include <metal_stdlib>\nusing namespace metal;\n"
         "kernel void big_frame(device float* out [[buffer(0)]], constant int& k [[buffer(1)]],\n"
         "                      uint tid [[thread_position_in_grid]]) {\n"
         "  float a[" + s + "];\n"
         "  for (int i = 0; i < " + s + "; ++i) a[i] = float(i % 7) + float(tid);\n"
         "  float sum = 0.0f;\n"
         "  for (int i = 0; i < " + s + "; i += k) sum += a[(i * 31) % " + s + "];\n"
         "  out[tid] = sum;\n"
         "}\n";
}

MslSignature big_frame_signature() {
  return {"big_frame",
          {MslArg::buffer("out", 0, DType::f32, false), MslArg::scalar("k", 1, DType::i32),
           MslArg::builtin_arg("tid", MslBuiltin::thread_position_in_grid)}};
}

TEST(MetalSimStack, FramesLargerThanTheDefaultStackRun) {
  METAL_SIM_REQUIRE_CLANG();
  const int n = 1 << 18;  // 1 MiB of private floats per thread, 4x the default fiber stack
  uint64_t measured = 0;
  std::vector<uint8_t> bytes = build_msl(private_array_kernel(n), big_frame_signature(), &measured);
  // clang reports the frame, not every byte of it (at -O0, 72 bytes under the array's 1 MiB);
  // the fiber stacks add a margin of 128 KiB to what it reports (group_runner.cpp).
  EXPECT_GE(measured, uint64_t{4} * n - 4096);
  MslSignature sig = big_frame_signature();
  sig.stack_bytes = measured;
  // The measured size travels with the artifact's signature text.
  EXPECT_EQ(parse_signature(print_signature(sig)).stack_bytes, measured);
  SimKernel k = load_msl(bytes, sig);
  std::vector<float> out(64, -1.0f);
  k.launch({1, 1, 1}, {64, 1, 1}, {SimArg::buffer(out.data()), SimArg::scalar(1u)});
  for (int t = 0; t < 64; ++t) {
    float want = 0;  // the kernel's own f32 accumulation, in its order
    for (int i = 0; i < n; ++i) want += float((i * 31) % n % 7) + float(t);
    EXPECT_EQ(out[t], want) << t;
  }
}

TEST(MetalSimStack, FramesOverTheLimitAreACompileError) {
  METAL_SIM_REQUIRE_CLANG();
  const int n = 1 << 25;  // 128 MiB per thread
  try {
    build_msl(private_array_kernel(n), big_frame_signature());
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_COMPILE);
    EXPECT_NE(std::string(e.what()).find("bytes of stack"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace metile::metal_sim
