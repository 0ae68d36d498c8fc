// CUDA C++ from the GPU IR, compiled by NVRTC for sm_90 without a GPU (as CI does): every case of
// the shared kernel suite compiles to a cubin, and every GEMM case also for sm_80 with its dot on
// mma.sync (TF32 for f32 when allowed). On a machine with a GPU the same cases run through the
// parameterized device suite (interp_kernels_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "frontend/builder.h"
#include "kernels/kernels.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_device.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

bool have_nvrtc() {
  std::string why;
  return cuda::load_nvrtc(&why) != nullptr;
}

class CudaCodegen : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaCodegen, CompilesForSm90) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  kernels::Case c = kernels::make_case(GetParam());
  const bool gemm = GetParam().rfind("gemm", 0) == 0;
  for (const char* arch : {"sm_90", "sm_80"}) {
    if (!gemm && std::string(arch) == "sm_80") continue;
    CompileOptions options;
    options.allow_tf32 = c.allow_tf32;
    options.dot_precision = c.dot_precision;
    Artifact a = cuda_build_program(c.program, options, arch);
    EXPECT_EQ(a.kind, ArtifactKind::cubin);
    ASSERT_GT(a.bytes.size(), 4u);
    EXPECT_EQ(std::memcmp(a.bytes.data(), "\x7f" "ELF", 4), 0);
    const std::string& src = a.sources.at(Stage::cuda);
    EXPECT_NE(src.find("extern \"C\" __global__ void __launch_bounds__("), std::string::npos);
    EXPECT_NE(src.find(" " + c.program.name + "("), std::string::npos) << "named after the program";
    EXPECT_GE(a.threads_per_group, 32);
    // f16/bf16 and (allowed) TF32 dots run on mma.sync; exact f32 and 1-row tiles on FMAs.
    bool matrix = gemm && GetParam().find("_m1") == std::string::npos &&
                  GetParam().find("_n1") == std::string::npos &&
                  (c.allow_tf32 == 1 || c.dot_precision != 0 || GetParam().find("f16") != std::string::npos);
    // 3xTF32 splits its operands in mma.sync's registers; wgmma would need the residuals staged.
    const bool x3 = c.dot_precision == METILE_DOT_PRECISION_TF32X3;
    EXPECT_EQ(src.find("mt_mma_tf32x3(&") != std::string::npos, matrix && x3) << GetParam() << " " << arch;
    // The *_wg GEMMs (64-row tiles and more) on sm_90: the warpgroup atom, wgmma (sm_90a).
    const bool warpgroup =
        matrix && !x3 && std::string(arch) == "sm_90" && GetParam().find("_wg") != std::string::npos;
    const bool warp_mma = src.find("mt_mma_") != std::string::npos && src.find("(&acc") != std::string::npos;
    const bool wgmma = src.find("wgmma.mma_async.sync") != std::string::npos;
    EXPECT_EQ(warp_mma, matrix && !warpgroup) << GetParam() << " " << arch;
    EXPECT_EQ(wgmma, warpgroup) << GetParam() << " " << arch;
  }
}

// Every loop checks the host's stop word at its back-edge (every thread, without a branch), and a
// program whose first write comes before any loop checks it once there; they act on the word's
// copy in GPU memory as read last (an L2 read when the program starts and every 1024 turns) and
// leave when it is set (an exit, not a trap: the context stays usable, after answering in the
// host word). The word and its copy are the kernel's last parameters; a kernel
// with wgmma dots takes neither (ptxas would wait for their results at each check, an exit as a
// trap: its C7517/C7518). sm_90a: the architecture-specific target compiles both.
TEST(CudaCodegenSource, ProgramsAndLoopsCheckTheStopWord) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  auto build = [](bool wg) {
    for (const std::string& n : kernels::case_names())
      if (n.rfind("gemm_f16", 0) == 0 && (n.find("_wg") != std::string::npos) == wg) {
        kernels::Case c = kernels::make_case(n);
        return cuda_build_program(c.program, {}, "sm_90a");
      }
    ADD_FAILURE() << "no f16 GEMM case" << (wg ? " with wgmma" : "");
    return Artifact{};
  };
  Artifact a = build(false);
  const std::string& src = a.sources.at(Stage::cuda);
  EXPECT_NE(src.find("unsigned int mt_stop_seen = mt_stop_read(mt_stop);"), std::string::npos) << src;
  EXPECT_NE(src.find("mt_cancel_check(mt_cancel, mt_stop, mt_stop_seen, ++mt_polls & 1023u);"), std::string::npos) << src;
  EXPECT_NE(src.find("unsigned int* mt_cancel,\n    const unsigned int* mt_stop)"), std::string::npos) << "the last parameters:\n" << src;
  EXPECT_NE(src.find("@stop exit;"), std::string::npos) << src;
  EXPECT_NE(src.find("ld.relaxed.gpu.global.u32"), std::string::npos) << src;
  EXPECT_EQ(src.find("trap;"), std::string::npos) << src;
  const std::string& ir = a.sources.at(Stage::gpu_ir_opt);
  EXPECT_NE(ir.find("cancel_point every=1024"), std::string::npos) << ir;
  EXPECT_NE(ir.find("cancel_point every=0"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("cancel_point every=0"), ir.rfind("cancel_point every=0")) << "once:\n" << ir;
  Artifact wg = build(true);
  EXPECT_NE(wg.sources.at(Stage::cuda).find("wgmma.mma_async"), std::string::npos);
  EXPECT_EQ(wg.sources.at(Stage::cuda).find("mt_cancel"), std::string::npos);
  // A kernel without loops checks once, after its loads and before its store.
  const std::string plain = cuda_build_program(kernels::vector_add(256), {}, "sm_90a").sources.at(Stage::cuda);
  const size_t leave = plain.find("mt_cancel_leave(mt_cancel, mt_stop_seen);");
  ASSERT_NE(leave, std::string::npos) << plain;
  EXPECT_EQ(plain.rfind("mt_cancel_leave(mt_cancel"), leave) << "once:\n" << plain;
  EXPECT_LT(plain.find("(Y + offs[0])"), leave) << plain;
  EXPECT_GT(plain.find("(Out + offs[0])"), leave) << plain;
  EXPECT_EQ(plain.find("mt_cancel_check(mt_cancel"), std::string::npos) << plain;
}

// One case per kernel and shape family keeps NVRTC time down; the full list runs on the GPU.
std::vector<std::string> cases() {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& n : kernels::case_names()) {
    std::string kernel = n.substr(0, n.find('/'));
    if (seen.insert(kernel).second || n.find("ragged") != std::string::npos ||
        kernel.rfind("gemm", 0) == 0)
      out.push_back(n);
  }
  return out;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s;
  for (char ch : info.param) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Suite, CudaCodegen, ::testing::ValuesIn(cases()), test_name);

TEST(CudaCodegenSource, VectorAddIsCoalescedAndVectorized) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  Artifact a = cuda_build_program(kernels::vector_add(1024), CompileOptions{}, "sm_90");
  const std::string& src = a.sources.at(Stage::cuda);
  EXPECT_NE(src.find("mt_vec<float, 4>"), std::string::npos) << src;
  EXPECT_NE(src.find("blockIdx.x"), std::string::npos) << src;
  EXPECT_NE(src.find("const float* __restrict__ X"), std::string::npos) << src;
}

TEST(CudaCodegenSource, MaxnregNamesTheRegisterLimitInPlaceOfTheLaunchBound) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  CompileOptions o;
  o.max_registers = 64;
  Artifact a = cuda_build_program(kernels::softmax(1000), o, "sm_90");  // NVRTC takes it
  const std::string& src = a.sources.at(Stage::cuda);
  EXPECT_NE(src.find("__global__ void __maxnreg__(64) "), std::string::npos) << src;
  EXPECT_EQ(src.find("__launch_bounds__"), std::string::npos) << src;  // nvcc refuses both
  EXPECT_NE(a.sources.at(Stage::gpu_ir).find(" maxnreg=64 {"), std::string::npos);
  EXPECT_NE(o.key(), CompileOptions{}.key());  // its own cache entry
}

TEST(CudaCodegenSource, TestedChunksLoadInOneBranch) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  // A row of 1000 floats over 256 threads: each thread's chunks are tested (bounds, alignment).
  // One test covers them all, and under it every chunk's vector load comes before the first
  // element is read from one: all the thread's loads are in flight before the first wait.
  Artifact a = cuda_build_program(kernels::softmax(1000), CompileOptions{}, "sm_90");
  const std::string& src = a.sources.at(Stage::cuda);
  const size_t whole = src.find("_whole = ");
  ASSERT_NE(whole, std::string::npos) << src;
  const size_t branch = src.find("if (", whole), fallback = src.find("} else {", branch);
  ASSERT_NE(fallback, std::string::npos) << src;
  const std::string fast = src.substr(branch, fallback - branch);
  EXPECT_EQ(fast.find("if ("), 0u) << fast;                     // no test inside but its own
  EXPECT_EQ(fast.find("if (", 1), std::string::npos) << fast;
  EXPECT_NE(fast.find("*(const mt_vec<float, 4>*)"), std::string::npos) << fast;
  // The chunk-by-chunk form stays for the tiles where the test fails.
  EXPECT_NE(src.find("(reinterpret_cast<ullong>(", fallback), std::string::npos) << src;
}

TEST(CudaCodegenSource, ExpIsTheHardwareEx2OfAScaledArgument) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  // Every exp of the softmax goes through the prelude's mt_exp (ex2.approx of x * log2(e));
  // no accurate expf range reduction is left in the kernel body.
  Artifact a = cuda_build_program(kernels::softmax(1024), CompileOptions{}, "sm_90");
  const std::string& src = a.sources.at(Stage::cuda);
  const size_t body = src.find("extern \"C\" __global__");
  ASSERT_NE(body, std::string::npos) << src;
  EXPECT_NE(src.find("ex2.approx.f32"), std::string::npos) << src;
  EXPECT_NE(src.find("mt_exp(", body), std::string::npos) << src;
  EXPECT_EQ(src.find("expf(", body), std::string::npos) << src;
}

TEST(CudaCodegenSource, BlockReductionFoldsOnlyTheWarpsPartials) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  // 4 warps: each lane reads partial lane % 4 and two shuffle steps fold them (not five).
  CompileOptions o;
  o.num_threads = 128;
  Artifact a = cuda_build_program(kernels::softmax(1024), o, "sm_90");
  const std::string& src = a.sources.at(Stage::cuda);
  EXPECT_NE(src.find("scratch_f32[t3]"), std::string::npos) << src;  // t3 = lane & 3
  EXPECT_NE(src.find("scratch2_f32[t3]"), std::string::npos) << src;  // the sum's array
  EXPECT_NE(src.find("for (int m = 2; m > 0; m >>= 1)"), std::string::npos) << src;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(CudaCodegenSource, IndependentBlockReductionsShareOneExchange) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  // Layernorm's sum and sum of squares: both warps' partials are published before one barrier
  // and read after it (one barrier in all, not four: the exchange's trailing barrier, which
  // would free the array for a later exchange, goes with elide-barriers since none follows).
  CompileOptions o;
  o.num_threads = 128;
  Artifact a = cuda_build_program(kernels::layernorm(1024), o, "sm_90");
  const std::string& src = a.sources.at(Stage::cuda);
  EXPECT_EQ(count(src, "__syncthreads();"), 1u) << src;
  EXPECT_NE(src.find("scratch_f32[sg + 4] = "), std::string::npos) << src;
}

TEST(CudaCodegenSource, BoolsAreBytesAndAnyNonZeroByteLoadsAsTrue) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  // A caller's bool buffer may hold bytes other than 0 and 1: each loaded byte is compared with
  // 0 once, a stored bool is 0 or 1, a bool scalar arrives as a byte; the Python suite checks
  // the values on the GPU (test_bool_bytes.py).
  Builder b("bools");
  ValueId m = b.param("M", Type::ptr(DType::boolean));
  ValueId x = b.param("X", Type::ptr(DType::f32));
  ValueId out = b.param("Out", Type::ptr(DType::boolean));
  ValueId flag = b.param("flag", Type::scalar(DType::boolean));
  ValueId offs = b.arange(kNoValue, 1024);
  ValueId mv = b.load(b.ptr_offset(m, offs), kNoValue, kNoValue);
  ValueId xp = b.ptr_offset(x, offs);
  ValueId xv = b.load(xp, kNoValue, kNoValue);
  b.store(xp, b.select(b.binary(OpKind::BITAND, mv, flag), xv, b.const_float(DType::f32, 0)), kNoValue);
  b.store(b.ptr_offset(out, offs), b.unary(OpKind::NOT, mv), kNoValue);
  Artifact a = cuda_build_program(b.finish(), CompileOptions{}, "sm_90");
  EXPECT_EQ(a.kind, ArtifactKind::cubin);
  const std::string& src = a.sources.at(Stage::cuda);
  EXPECT_NE(src.find("const uchar* __restrict__ M"), std::string::npos) << src;
  EXPECT_NE(src.find("uchar mt_arg_flag"), std::string::npos) << src;
  EXPECT_NE(src.find("const bool flag = (mt_arg_flag != 0);"), std::string::npos) << src;
  EXPECT_NE(src.find("] != 0;"), std::string::npos) << src;
  EXPECT_NE(src.find("(uchar)("), std::string::npos) << src;
}

TEST(CudaCodegenSource, UserNamesNeverCollideWithCudaOrThePrelude) {
  if (!have_nvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  // Kernel and parameter names that are CUDA/C++ words, prelude helpers or spellings the
  // emitter invents (`mt_smem`, `h_bits` beside an f16 scalar `h`) compile under NVRTC;
  // test_generated_names.py runs the full list on the GPU.
  const std::vector<std::string> names = {
      "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "uint", "uchar", "llong",
      "ushort", "mt_vec", "mt_smem", "mt_warp_mask", "mt_exp", "tid", "lane", "sg", "decltype",
      "__global__", "__shared__", "__restrict__", "__device__", "float4", "int64_t", "NULL",
      "printf", "assert", "main", "h_bits", "b_bits", "mt_arg_h", "t", "r", "j", "x_vec", "x_ptrs"};
  for (const std::string& kernel : {std::string("decltype"), std::string("threadIdx"),
                                    std::string("mt_warp_mask"), std::string("__global__")}) {
    Builder b(kernel);
    std::vector<ValueId> ptrs, ints;
    for (size_t i = 0; i < names.size(); ++i)
      (i % 2 ? ints : ptrs).push_back(b.param(names[i], i % 2 ? Type::scalar(DType::i32) : Type::ptr(DType::f32)));
    ValueId h = b.param("h", Type::scalar(DType::f16));
    ValueId bb = b.param("b", Type::scalar(DType::boolean));
    ValueId offs = b.arange(kNoValue, 256);
    ValueId acc = b.cast(h, DType::f32);
    for (ValueId v : ints) acc = b.binary(OpKind::ADD, acc, b.cast(v, DType::f32));
    ValueId sum = b.load(b.ptr_offset(ptrs[1], offs), kNoValue, kNoValue);
    for (size_t i = 2; i < ptrs.size(); ++i)
      sum = b.binary(OpKind::ADD, sum, b.load(b.ptr_offset(ptrs[i], offs), kNoValue, kNoValue));
    sum = b.select(bb, b.binary(OpKind::ADD, sum, acc), sum);
    b.store(b.ptr_offset(ptrs[0], offs), sum, kNoValue);
    Artifact a = cuda_build_program(b.finish(), CompileOptions{}, "sm_90");
    EXPECT_EQ(a.kind, ArtifactKind::cubin) << kernel;
  }
}

}  // namespace
}  // namespace metile
