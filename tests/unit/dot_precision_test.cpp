// f32 dot precision (docs/semantics.md, "dot precision"): the input_precision attribute in Tile
// IR text, the "dot_precision" Tile IR pass that gives dots the compile's default, the atoms each
// mode may take on cuda and Apple targets, the C API's checks, and each mode's exact meaning on
// interp and cpu (an input whose residual TF32 drops) with metal-sim at least as accurate.
#include <gtest/gtest.h>

#include <metile/metile.h>

#include <cmath>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "ir/dot_precision.h"
#include "passes/assign_layouts.h"
#include "passes/lower.h"
#include "ir/gpu_ir.h"
#include "passes/tile/tile_pass.h"
#include "support/error.h"
#include "target/options.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

// C = A @ B for 16x16 tiles, the dot's attribute text spliced in.
std::string dot_kernel(const std::string& attr) {
  return R"(kernel @dot16(%A: ptr<f32>, %B: ptr<f32>, %C: ptr<f32>) {
  %0 = const {value = 0} : i32
  %1 = const {value = 16} : i32
  %2 = tile_load %A, %0, %0, %1 : tile<16x16xf32>
  %3 = tile_load %B, %0, %0, %1 : tile<16x16xf32>
  %4 = const {value = 0.0} : f32
  %5 = broadcast %4 : tile<16x16xf32>
  %6 = dot %2, %3, %5)" + attr + R"( : tile<16x16xf32>
  tile_store %C, %0, %0, %1, %6
}
)";
}

TEST(DotPrecision, TheAttributeRoundTripsThroughText) {
  for (const char* p : {"ieee", "tf32", "tf32x3"}) {
    const std::string text = dot_kernel(std::string(" {input_precision = \"") + p + "\"}");
    Program prog = parse(text);
    EXPECT_EQ(print(prog, false), text);
    EXPECT_EQ(print(parse(print(prog, false)), false), text);
  }
  EXPECT_EQ(print(parse(dot_kernel("")), false), dot_kernel(""));
}

TEST(DotPrecision, AnUnknownPrecisionDoesNotVerify) {
  for (const char* bad : {"fast", "TF32", ""}) {
    try {
      parse(dot_kernel(std::string(" {input_precision = \"") + bad + "\"}"));
      FAIL() << bad << " verified";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM);
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("unknown input_precision \"") + bad + "\""), std::string::npos) << msg;
      EXPECT_NE(msg.find("\"ieee\", \"tf32\", \"tf32x3\""), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(parse(dot_kernel(" {input_precision = 3}")), Error);
}

TEST(DotPrecision, ThePassGivesDotsWithoutOneTheCompileDefault) {
  Program p = parse(dot_kernel(""));
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  run_tile_pass("dot_precision", p, ctx);
  EXPECT_EQ(print(p, false), dot_kernel("")) << "no compile default: the device's";
  o.dot_precision = METILE_DOT_PRECISION_TF32;
  run_tile_pass("dot_precision", p, ctx);
  EXPECT_EQ(print(p, false), dot_kernel(" {input_precision = \"tf32\"}"));
  Program own = parse(dot_kernel(" {input_precision = \"ieee\"}"));
  run_tile_pass("dot_precision", own, ctx);
  EXPECT_EQ(print(own, false), dot_kernel(" {input_precision = \"ieee\"}")) << "a dot's own stays";
  CompileOptions alias;
  alias.allow_tf32 = 0;
  EXPECT_EQ(alias.dot_default(), DotPrecision::ieee);
  alias.allow_tf32 = 1;
  EXPECT_EQ(alias.dot_default(), DotPrecision::tf32);
  EXPECT_NE(alias.key(), CompileOptions{}.key());
  CompileOptions x3;
  x3.dot_precision = METILE_DOT_PRECISION_TF32X3;
  EXPECT_NE(x3.key(), CompileOptions{}.key()) << "the cache key tells the modes apart";
}

TEST(DotPrecision, EachModeTakesTheAtomsItAllows) {
  auto layouts = [](const std::string& attr, const GpuTarget& t) {
    return assign_layouts_on_text(dot_kernel(attr), t, LowerOptions{});
  };
  const GpuTarget& cuda = nvidia_gpu_target();
  // cuda's default is 3xTF32 on mma.sync; "ieee" has no atom (FMAs).
  EXPECT_EQ(count(layouts("", cuda), "(mma.sync 16x8x8 f32"), 1) << layouts("", cuda);
  EXPECT_EQ(count(layouts(" {input_precision = \"tf32x3\"}", cuda), "mma.sync"), 1);
  EXPECT_EQ(count(layouts(" {input_precision = \"tf32\"}", cuda), "mma.sync"), 1);
  EXPECT_EQ(count(layouts(" {input_precision = \"ieee\"}", cuda), "(fma, f32)"), 1)
      << layouts(" {input_precision = \"ieee\"}", cuda);
  // GPU IR: only the tf32x3 dot's mma says so.
  auto gpu_ir = [](const std::string& attr, const GpuTarget& t) {
    LowerOptions o;
    o.device = "cuda";
    return gpu::print(lower_to_gpu(parse(dot_kernel(attr)), t, o));
  };
  EXPECT_EQ(count(gpu_ir("", cuda), "tf32x3=1"), 1) << gpu_ir("", cuda);
  EXPECT_EQ(count(gpu_ir(" {input_precision = \"tf32\"}", cuda), "tf32x3"), 0);
  // Apple: simdgroup_matrix is exact f32, so every mode may take it; matmul2d's f32 (TF32 on
  // M5-class parts) only "tf32".
  const GpuTarget metal4 = apple_gpu_target(kAppleTensorOpsFamily, true);
  EXPECT_EQ(count(layouts("", metal4), "(simdgroup_matrix"), 1) << layouts("", metal4);
  EXPECT_EQ(count(layouts(" {input_precision = \"tf32x3\"}", metal4), "(simdgroup_matrix"), 1);
  EXPECT_EQ(count(layouts(" {input_precision = \"tf32\"}", metal4), "(tensor_ops"), 1)
      << layouts(" {input_precision = \"tf32\"}", metal4);
  EXPECT_EQ(count(layouts(" {input_precision = \"ieee\"}", apple_gpu_target()), "(simdgroup_matrix"), 1);
}

TEST(DotPrecision, TheCApiRefusesValuesOutsideTheEnum) {
  metile_builder* b = nullptr;
  ASSERT_EQ(metile_builder_create(&b, "k"), METILE_OK);
  metile_value zero = 0, a = 0, out = 0;
  ASSERT_EQ(metile_builder_const_float(b, METILE_DTYPE_F32, 0.0, &zero), METILE_OK);
  const int64_t dims[2] = {16, 16};
  ASSERT_EQ(metile_builder_broadcast(b, zero, 2, dims, &a), METILE_OK);
  EXPECT_EQ(metile_builder_dot_with_precision(b, a, a, a, static_cast<metile_dot_precision>(7), &out),
            METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(metile_last_error()).find("precision 7 is not a metile_dot_precision"),
            std::string::npos)
      << metile_last_error();
  EXPECT_EQ(metile_builder_dot_with_precision(b, a, a, a, METILE_DOT_PRECISION_TF32X3, &out), METILE_OK);
  EXPECT_EQ(metile_builder_dot_with_precision(b, a, a, a, METILE_DOT_PRECISION_DEFAULT, &out), METILE_OK);
  metile_builder_release(b);

  metile_device* dev = nullptr;
  ASSERT_EQ(metile_device_open(&dev, "interp"), METILE_OK);
  metile_program* prog = nullptr;
  ASSERT_EQ(metile_program_parse(&prog, dot_kernel("").c_str()), METILE_OK);
  metile_compile_options o;
  metile_compile_options_init(&o);
  EXPECT_EQ(o.dot_precision, METILE_DOT_PRECISION_DEFAULT);
  metile_kernel* k = nullptr;
  o.dot_precision = 4;
  EXPECT_EQ(metile_kernel_compile(&k, dev, prog, &o), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(metile_last_error()).find("dot_precision 4"), std::string::npos) << metile_last_error();
  o.dot_precision = METILE_DOT_PRECISION_IEEE;
  o.allow_tf32 = 1;
  EXPECT_EQ(metile_kernel_compile(&k, dev, prog, &o), METILE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(metile_last_error()).find("allow_tf32 1 contradicts dot_precision ieee"),
            std::string::npos)
      << metile_last_error();
  o.dot_precision = METILE_DOT_PRECISION_TF32;
  ASSERT_EQ(metile_kernel_compile(&k, dev, prog, &o), METILE_OK) << "the alias agrees";
  metile_kernel_release(k);
  metile_program_release(prog);
  metile_device_release(dev);
}

// A = 1 + 2^-12 (TF32 keeps 1, the residual 2^-12 is exact), B = 1: each of C's sums of 16 is
// 16 + 2^-8 exactly in f32, and 16 where the inputs round to TF32.
std::vector<float> run_dot(const std::string& device, const std::string& attr) {
  auto dev = open_device(device);
  CompileOptions o;
  o.no_cache = true;
  auto ck = compile_kernel(dev, std::make_shared<Program>(parse(dot_kernel(attr))), o);
  std::vector<float> a(256, 1.0f + std::ldexp(1.0f, -12)), b(256, 1.0f), c(256, -1.0f);
  auto ba = dev->wrap(a.data(), a.size() * 4), bb = dev->wrap(b.data(), b.size() * 4),
       bc = dev->wrap(c.data(), c.size() * 4);
  LaunchArg xa, xb, xc;
  xa.buffer = ba.get();
  xb.buffer = bb.get();
  xc.buffer = bc.get();
  ck->kernel->launch(Grid{}, {xa, xb, xc});
  dev->synchronize();
  return c;
}

TEST(DotPrecision, EachModeRoundsAsDocumented) {
  const float exact = 16.0f + std::ldexp(1.0f, -8);
  for (const char* device : {"interp", "cpu", "metal-sim"}) {
    for (const char* attr : {"", " {input_precision = \"ieee\"}", " {input_precision = \"tf32x3\"}"})
      for (float v : run_dot(device, attr)) ASSERT_EQ(v, exact) << device << attr;
    for (float v : run_dot(device, " {input_precision = \"tf32\"}")) {
      // interp and cpu are the oracle of the mode; metal-sim's simdgroup_matrix is exact f32.
      if (std::string(device) == "metal-sim")
        ASSERT_TRUE(v == 16.0f || v == exact) << v;
      else
        ASSERT_EQ(v, 16.0f) << device;
    }
  }
  EXPECT_EQ(round_tf32(1.0f + std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -10)) << "ties away";
  EXPECT_EQ(round_tf32(-1.0f - std::ldexp(1.0f, -11)), -1.0f - std::ldexp(1.0f, -10));
  EXPECT_TRUE(std::isinf(round_tf32(INFINITY)));
  EXPECT_TRUE(std::isnan(round_tf32(NAN)));
}

}  // namespace
}  // namespace metile
