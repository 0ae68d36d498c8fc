// MSL emission: the kernel's interface (bindings, const-ness, threadgroup arguments, builtins),
// the spelling of simd operations and vector accesses, and that the MSL of every suite kernel
// compiles under the Metal shim with -Werror.
#include <gtest/gtest.h>

#include "codegen/metal/msl.h"
#include "ir/tile_ir.h"
#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "passes/pipeline.h"
#include "runtime/backends.h"
#include "runtime/metal_sim/sim_kernel.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;
using metal_sim::MslArg;

MslKernel emit(const Program& p, int opt_level = 1) {
  CompileOptions o;
  o.opt_level = opt_level;
  return emit_msl(run_gpu_pipeline(p, apple_gpu_target(), o, "metal-sim").function);
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(MslEmit, VectorAddInterface) {
  MslKernel k = emit(kernels::vector_add(1024));
  EXPECT_EQ(k.threads_per_group, 256);
  const metal_sim::MslSignature& s = k.signature;
  EXPECT_EQ(s.kernel, "vector_add");
  ASSERT_GE(s.args.size(), 5u);
  EXPECT_EQ(s.args[0], MslArg::buffer("X", 0, DType::f32, true));
  EXPECT_EQ(s.args[1], MslArg::buffer("Y", 1, DType::f32, true));
  EXPECT_EQ(s.args[2], MslArg::buffer("Out", 2, DType::f32, false));
  EXPECT_EQ(s.args[3], MslArg::member("N", DType::i32));  // the launch's 4th argument
  EXPECT_EQ(s.args[4], MslArg::packed("mt_s", 3, "mt_scalars"));
  metal_sim::validate(s);
  EXPECT_TRUE(has(k.source, "[[kernel]] void vector_add(")) << k.source;
  EXPECT_TRUE(has(k.source, "device const float* X [[buffer(0)]]")) << k.source;
  EXPECT_TRUE(has(k.source, "device float* Out [[buffer(2)]]")) << k.source;
  EXPECT_TRUE(has(k.source, "struct mt_scalars {\n  int N;\n};")) << k.source;
  EXPECT_TRUE(has(k.source, "constant mt_scalars& mt_s [[buffer(3)]]")) << k.source;
  EXPECT_TRUE(has(k.source, "const int N = mt_s.N;")) << k.source;
  EXPECT_TRUE(has(k.source, "uint3 tgpig [[threadgroup_position_in_grid]]")) << k.source;
  EXPECT_TRUE(has(k.source, "uint tiitg [[thread_index_in_threadgroup]]")) << k.source;
  // One 16-byte access per thread when the whole chunk is in bounds, a masked tail otherwise.
  EXPECT_TRUE(has(k.source, "*(device const packed_float4*)(X + offs[0])")) << k.source;
  EXPECT_TRUE(has(k.source, "if (mask[0] && mask[1] && mask[2] && mask[3])")) << k.source;
  EXPECT_TRUE(has(k.source, "if (mask[j]) Out[offs[j]] = ")) << k.source;
}

// 2 * c for the 32 columns of a 4x32 block, broadcast down its rows: 2 * arange takes the
// columns' slice layout, whose coordinate is the single term tid % 32, spliced into the product
// with its parentheses (2 * tid % 32 would be (2 * tid) % 32).
TEST(MslEmit, ASingleTermCoordinateKeepsItsParenthesesInAnExpression) {
  const Program p = parse(R"(kernel @twice(%Out: ptr<i32>) num_threads(128) {
  %0 = const {value = 0} : i32
  %1 = arange %0 {size = 32} : tile<32xi32>
  %2 = const {value = 2} : i32
  %3 = mul %2, %1 : tile<32xi32>
  %4 = reshape %3 : tile<1x32xi32>
  %5 = broadcast %4 : tile<4x32xi32>
  %6 = arange %0 {size = 128} : tile<128xi32>
  %7 = reshape %6 : tile<4x32xi32>
  %8 = ptr_offset %Out, %7 : tile<4x32xptr<i32>>
  store %8, %5
}
)");
  MslKernel k = emit(p);
  EXPECT_TRUE(has(k.source, "2 * (tid % 32)")) << k.source;
  EXPECT_FALSE(has(k.source, "2 * tid % 32")) << k.source;
}

TEST(MslEmit, OptLevelZeroKeepsScalarAccesses) {
  MslKernel k = emit(kernels::vector_add(1024), 0);
  EXPECT_FALSE(has(k.source, "packed_float4")) << k.source;
  metal_sim::check_msl(k.source, "vector_add_O0");
}

TEST(MslEmit, ReductionsUseSimdFunctionsAndThreadgroupScratch) {
  MslKernel k = emit(kernels::softmax(256));
  EXPECT_TRUE(has(k.source, "simd_max(")) << k.source;
  EXPECT_TRUE(has(k.source, "simd_sum(")) << k.source;
  EXPECT_TRUE(has(k.source, "threadgroup float* scratch_f32 [[threadgroup(0)]]")) << k.source;
  EXPECT_TRUE(has(k.source, "threadgroup_barrier(mem_flags::mem_threadgroup);")) << k.source;
  EXPECT_TRUE(has(k.source, "(-INFINITY)")) << k.source;  // the max identity, never 0
  bool found = false;
  for (const MslArg& a : k.signature.args)
    if (a.kind == MslArg::Kind::threadgroup) {
      EXPECT_EQ(a.count, 2u);  // one partial per simdgroup
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(MslEmit, SimtKernelsSpellShufflesAndSharedArrays) {
  MslKernel k = emit(kernels::fft(64));
  EXPECT_TRUE(has(k.source, "simd_shuffle_xor(")) << k.source;
  EXPECT_FALSE(has(k.source, "mem_device")) << k.source;  // no buffer is both read and written
  int shared = 0;
  for (const MslArg& a : k.signature.args)
    if (a.kind == MslArg::Kind::threadgroup) {
      EXPECT_EQ(a.count, 64u);
      ++shared;
    }
  EXPECT_EQ(shared, 4);
  EXPECT_TRUE(has(k.source, "device const int* BIT_REV")) << k.source;
  EXPECT_TRUE(has(k.source, "device float* Y_re")) << k.source;
}

TEST(MslEmit, NonNativeSimdTypesGoThroughShuffles) {
  KernelBuilder k("wide");
  V x = k.ptr("X", DType::i64), out = k.ptr("Out", DType::i64);
  V flags = k.ptr("Flags", DType::boolean);
  k.raw().set_num_threads(64);
  V tid = k.thread_id();
  V v = k.load(x + tid);
  V s = k.sum(v);
  k.store(out + k.program_id(0), s);
  V f = k.load(flags + tid);
  k.store(flags + tid, k.shuffle_xor(f, k.i32(3)));
  MslKernel m = emit(k.finish());
  EXPECT_TRUE(has(m.source, "as_type<long>(simd_shuffle_xor(as_type<uint2>(")) << m.source;
  EXPECT_TRUE(has(m.source, "bool(simd_shuffle_xor(ushort(")) << m.source;
  EXPECT_FALSE(has(m.source, "simd_sum(")) << m.source;
  metal_sim::check_msl(m.source, "wide");
}

TEST(MslEmit, ScalarParametersAndReservedNames) {
  KernelBuilder k("names");
  V exp_ = k.ptr("exp"), max_ = k.scalar("max", DType::f32), helper = k.scalar("mt_fmax", DType::f32);
  V offs = k.arange(0, 64);
  k.store(exp_ + offs, k.maximum(k.exp(k.load(exp_ + offs)) * max_, helper));
  MslKernel m = emit(k.finish());
  // Parameters named like MSL functions or prelude helpers are renamed; the signature follows.
  EXPECT_TRUE(has(m.source, "device float* exp1 [[buffer(0)]]")) << m.source;
  EXPECT_TRUE(has(m.source, "  float max1;\n  float umt_fmax;\n")) << m.source;
  EXPECT_TRUE(has(m.source, "const float umt_fmax = mt_s.umt_fmax;")) << m.source;
  EXPECT_EQ(m.signature.args[0].name, "exp1");
  KernelBuilder e("exp");  // a kernel named like an MSL function
  V eo = e.ptr("Out");
  e.store(eo + e.arange(0, 32), e.zeros(Shape::of(32)));
  EXPECT_EQ(emit(e.finish()).signature.kernel, "exp_kernel");
  metal_sim::check_msl(m.source, "names");
}

TEST(MslEmit, EverySuiteKernelCompilesUnderTheShimWithWerror) {
  if (!probe_metal_sim_device().empty()) GTEST_SKIP() << probe_metal_sim_device();
  for (const Program& p : kernels::all_programs()) {
    for (int opt : {0, 1}) {
      MslKernel k = emit(p, opt);
      metal_sim::validate(k.signature);
      EXPECT_NO_THROW(metal_sim::check_msl(k.source, p.name)) << k.source;
    }
  }
}

}  // namespace
}  // namespace metile
