// The GPU IR text parser: every function lowering makes for Apple and NVIDIA targets prints,
// parses and prints back to the same text; hand-written text covers every op of gpu_ops.def;
// bad text is refused at its line and column; passes run text in, text out.
#include <gtest/gtest.h>

#include <set>

#include "ir/gpu_parse.h"
#include "kernels/kernels.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

using gpu::GpuOpKind;

constexpr GpuOpKind kAllKinds[] = {
#define GPU_OP(E, name, traits) GpuOpKind::E,
#include "ir/gpu_ops.def"
};

std::string error_text(std::string_view text) {
  try {
    gpu::parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_PROGRAM) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "parsed:\n" << text;
  return "";
}

void collect_kinds(const gpu::Function& f, std::set<GpuOpKind>& kinds) {
  gpu::walk(f.body, [&](const gpu::Op& op) { kinds.insert(op.kind); });
}

// One function with the ops of the table (and each spelling of types, constants, strings and
// layouts); it must print back exactly as written.
const char* const kEveryOp = R"(gpu_kernel @every_op(%x: ptr<f32>, %n: i32, %counts: ptr<i32>) threads=64 simd=32 {
  #2 = tile<128> thr=64:2 reg=2:1
  #3 = tile<100> thr=(2,32):(64,2) reg=2:1 padded
  #4 = tile<128> thr=64:1 reg=2:64
  %tid: i32 thread = builtin thread_index.x
  %pid: i32 = builtin threadgroup_position.y
  %groups: i32 = builtin threadgroups_per_grid.z
  %lane: i32 thread = builtin simd_lane.x
  %warp: i32 thread = builtin simdgroup_index.x
  %c: i32 = const value=2
  %c1: i32 = const value=-9223372036854775808
  %h: f32 = const value=0.5
  %big: f32 = const value=1e+20
  %ninf: f32 = const value=-inf
  %q: f32 = const value=nan
  %a: ptr<f32, threadgroup> = alloc shape="128" stages=1 layout="linear" offset=0
  %b: ptr<f32, threadgroup> = alloc shape="256" stages=1 layout="linear" offset=512
  %idx: i32 x2 #2 = coord #2 %tid
  %ok: bool x2 #3 = valid #3 %tid
  %xs: ptr<f32> x2 #2 = splat %x
  %ptrs: ptr<f32> x2 #2 = ptr_offset %xs, %idx
  %m: bool x2 #2 = lt %idx, %n
  %vals: f32 x2 #2 = load %ptrs, %m, %h
  %vv: f32 x2 #2 = vload %ptrs width=2
  %fi: f32 x2 #2 = cast %idx
  %sel: f32 x2 #2 = select %m, %vals, %fi
  store %ptrs, %sel, %m
  vstore %ptrs, %vv width=2
  %cs: ptr<i32> x2 #2 = splat %counts
  %cp: ptr<i32> x2 #2 = ptr_offset %cs, %idx
  %old: i32 x2 #2 = atomic_cas %cp, %idx, %idx, %m
  %old1: f32 x2 #2 = atomic_add %ptrs, %vals
  %r: f32 thread = reg_reduce.sum %vals
  %swapped: f32 x2 #2 = reg_gather %vals from="1,0"
  %moved: f32 x2 #4 = convert_layout %vals, %a, %tid
  %sr: f32 thread = simd_reduce.max %r
  %sg: f32 = simd_reduce.sum %sr lanes=4
  %sx: f32 thread = shuffle_xor %sr, %c
  %sh: f32 thread = shuffle %sx, %c
  %sm: i32, %sn: i32 = swizzle %pid, %pid, %groups, %groups pattern="grouped" block=8
  %tt: i32 thread = opaque %tid
  barrier
  %acc: f32 x2 #2 = mma %a, %b, %fi, %tid atom="simdgroup_matrix" m=8 n=16 k=8 lda=8 ldb=16 warps_m=1 warps_n=2 tf32=0
  %z: f32 thread = splat %h
  for %k: i32 = %c to %n step %c iter(%s: f32 thread = %z, %t: f32 x2 #2 = %acc) -> (%total, %tiles) {
    %s1: f32 thread = add %s, %sh
    for %j: i32 = %c to %k step %c {
      barrier
      yield
    }
    yield %s1, %t
  }
  %pos: bool = gt %n, %c
  %w: i32 = if %pos {
    barrier
    yield %n
  } else {
    yield %c
  }
  %wl: i32 = while iter(%wa: i32 = %w) {
    %go: bool = lt %wa, %n
    yield %go, %wa
  } do (%wb: i32) {
    %wn: i32 = add %wb, %c
    yield %wn
  }
  print %m, %pid, %sm, %sn, %idx, %wl, %tiles head="x[\"i\"] = \\" label="v" rank=1
}
)";

// The warp-role ops (specialize_warps.cpp), which need a function of whole warpgroups and end
// its top level: a function of their own.
const char* const kWarpRoles = R"(gpu_kernel @roles(%n: i32) threads=256 simd=32 {
  %tid: i32 thread = builtin thread_index.x
  barrier
  warp_specialize producers=128 {
    setmaxnreg count=40 inc=0
    yield
  } consumers {
    setmaxnreg count=232 inc=1
    barrier id=1 threads=256
    yield
  }
}
)";

// Every function of the GPU lowering tests' kernels (the shared suite plus GEMM variants: f32
// with tf32 on and off, f16, bf16, epilogues, bias broadcasts, swizzles, ragged bounds), lowered
// for Apple (simdgroup_matrix; Metal 4 tensor_ops) and NVIDIA (sm_80, sm_90), before and after
// the passes.
TEST(GpuParse, PrintParsePrintIsIdenticalForEveryLoweredKernel) {
  std::vector<std::pair<std::string, Program>> programs;
  for (Program& p : kernels::all_programs()) programs.emplace_back(p.name, std::move(p));
  for (DType d : {DType::f32, DType::f16, DType::bf16})
    for (kernels::Epilogue e : {kernels::Epilogue::none, kernels::Epilogue::gelu}) {
      kernels::GemmConfig g;
      g.dtype = d;
      g.epilogue = e;
      g.bias = e == kernels::Epilogue::gelu;
      programs.emplace_back(cat("gemm ", dtype_name(d)), kernels::gemm(g));
      g.bounds = true;
      g.swizzle = "grouped";
      g.block_m = 64;
      programs.emplace_back(cat("ragged gemm ", dtype_name(d)), kernels::gemm(g));
    }
  struct Target {
    GpuTarget target;
    const char* device;
  };
  const Target targets[] = {{apple_gpu_target(), "metal-sim"},
                            {apple_gpu_target(kAppleTensorOpsFamily, true), "metal"},
                            {nvidia_gpu_target("sm_80"), "cuda"},
                            {nvidia_gpu_target("sm_90"), "cuda"}};
  std::set<GpuOpKind> kinds;
  int functions = 0, mma = 0, fragments = 0;
  for (const Target& t : targets)
    for (int tf32 : {1, 0})
      for (const auto& [name, program] : programs) {
        CompileOptions o;
        o.allow_tf32 = tf32;
        GpuPipelineResult r;
        try {
          r = run_gpu_pipeline(program, t.target, o, t.device);
        } catch (const Error& e) {
          // Kernels a target cannot run (the error names them); everything else must lower.
          EXPECT_EQ(e.status(), METILE_ERROR_UNSUPPORTED) << name << " on " << t.target.name << ": " << e.what();
          continue;
        }
        for (const std::string* text : {&r.gpu_ir, &r.gpu_ir_opt}) {
          gpu::Function f = gpu::parse(*text);
          ASSERT_EQ(gpu::print(f), *text) << name << " on " << t.target.name << t.target.family;
          collect_kinds(f, kinds);
          ++functions;
          if (text->find(" mma ") != std::string::npos) ++mma;
        }
        if (r.gpu_ir.find(" mma ") != std::string::npos && r.gpu_ir.find("padded") == std::string::npos)
          ++fragments;
      }
  EXPECT_GT(functions, 200);
  EXPECT_GT(mma, 20);  // GEMMs with fragment-layout accumulators, on each target
  EXPECT_GT(fragments, 0);
  // Every op of the table is read back, from a lowering or from the hand-written function.
  collect_kinds(gpu::parse(kEveryOp), kinds);
  collect_kinds(gpu::parse(kWarpRoles), kinds);
  EXPECT_EQ(gpu::print(gpu::parse(kWarpRoles)), kWarpRoles);
  for (GpuOpKind k : kAllKinds)
    EXPECT_TRUE(kinds.count(k)) << "no " << gpu::gpu_op_name(k) << " was parsed: add it to kEveryOp";
}

TEST(GpuParse, HandWrittenFunctionWithEveryOpRoundTrips) {
  gpu::Function f = gpu::parse(kEveryOp);
  EXPECT_EQ(gpu::print(f), kEveryOp);
  EXPECT_EQ(f.threads, 64);
  EXPECT_EQ(f.params.size(), 3u);
  EXPECT_EQ(f.params[1].name, "n");
  EXPECT_TRUE(f.layout(3).padded);
  EXPECT_EQ(gpu::threadgroup_bytes(f), (128u + 256u) * 4);
  const gpu::Op& print_op = f.body.ops.back();
  EXPECT_EQ(print_op.attr_str("head"), "x[\"i\"] = \\");
}

// Element-wise ops and atomics print their Tile IR op name; none may shadow a GPU IR op name.
TEST(GpuParse, TileIrOpNamesDoNotShadowGpuOps) {
  for (GpuOpKind k : kAllKinds) {
    std::optional<OpKind> t = parse_op_name(gpu::gpu_op_name(k));
    if (!t) continue;
    EXPECT_FALSE(is_elementwise(*t) || *t == OpKind::SELECT || *t == OpKind::PTR_OFFSET ||
                 has_trait(*t, kAtomic))
        << gpu::gpu_op_name(k);
  }
}

TEST(GpuParse, CommentsAndBlankLinesAreIgnored) {
  gpu::Function f = gpu::parse(
      "// a hand-written test\n\n"
      "gpu_kernel @k(%o: ptr<i32>) threads=32 simd=32 {  // header\n"
      "\n"
      "  %c: i32 = const value=7   // seven\n"
      "  store %o, %c\n"
      "}\n\n");
  EXPECT_EQ(gpu::print(f),
            "gpu_kernel @k(%o: ptr<i32>) threads=32 simd=32 {\n  %c: i32 = const value=7\n"
            "  store %o, %c\n}\n");
}

TEST(GpuParse, ARegisterLimitRoundTrips) {
  const std::string text = "gpu_kernel @k(%o: ptr<i32>) threads=32 simd=32 maxnreg=96 {\n  %c: i32 = const value=7\n"
                           "  store %o, %c\n}\n";
  gpu::Function f = gpu::parse(text);
  EXPECT_EQ(f.max_registers, 96);
  EXPECT_EQ(gpu::print(f), text);
}

std::string header(const std::string& body) {
  return "gpu_kernel @k(%o: ptr<f32>, %n: i32) threads=32 simd=32 {\n"
         "  #2 = tile<64> thr=32:2 reg=2:1\n" +
         body + "}\n";
}

// Each bad text is refused with the line and column of the problem and what was expected.
TEST(GpuParse, BadTextIsRefusedAtItsLineAndColumn) {
  struct Case {
    std::string text;
    const char* error;
  };
  const Case cases[] = {
      {"", "line 1:1: expected 'gpu_kernel', found the end of the text"},
      {"kernel @k() threads=1 simd=1 {\n}\n", "line 1:1: expected 'gpu_kernel', found 'kernel @k() threads=1 si'"},
      {"gpu_kernel @k( threads=32 simd=32 {\n}\n", "line 1:16: expected a value name (%name), found 'threads=32"},
      {"gpu_kernel @k() threads=0 simd=32 {\n}\n", "line 1:25: threads 0 is outside [1, 4096]"},
      {"gpu_kernel @k() threads=99999999999999999999 simd=32 {\n}\n", "does not fit 64 bits"},
      {"gpu_kernel @k() threads=32 simd=32 maxnreg=8 {\n}\n", "line 1:44: maxnreg 8 is outside [16, 255]"},
      {"gpu_kernel @k() threads=32 simd=32 {\n", "line 2:1: expected an op or '}', found the end of the text"},
      {"gpu_kernel @k() threads=32 simd=32 {\n}\n}\n", "line 3:1: expected the end of the text after the function's '}'"},
      {"gpu_kernel @k(%p: f33) threads=32 simd=32 {\n}\n", "line 1:19: unknown element type 'f33'"},
      {"gpu_kernel @k(%p: ptr<f32, shared>) threads=32 simd=32 {\n}\n", "line 1:28: expected 'threadgroup', found 'shared>)"},
      {header("  %c: i32 = constant value=1\n"), "line 3:13: unknown op 'constant'"},
      {header("  %c: i32 = tile_load %n\n"), "line 3:13: 'tile_load' is a Tile IR op with no GPU IR form"},
      {header("  %c: i32 = add %n, %d\n"), "line 3:21: %d is not defined before this use"},
      {header("  %c: i32 = add %n, %n\n  %c: i32 = add %n, %n\n"), "line 4:3: %c is defined twice"},
      {header("  %c: i32 = const value=1 value=2\n"), "line 3:27: attribute value is given twice"},
      {header("  %c: i32 = const value=1x\n"), "line 3:25: bad number '1x'"},
      {header("  %c: i32 = const value=\"open\n"), "line 3:25: unterminated string"},
      {header("  %c: i32 = const value=\"a\\tb\"\n"), "unknown escape '\\t' in a string"},
      {header("  %c: i32 x4 #2 = splat %n\n"), "line 3:12: layout #2 has 2 registers, not 4"},
      {header("  %c: i32 x2 #7 = splat %n\n"), "line 3:14: layout #7 is not declared (declared: #2 to #2)"},
      {header("  %t: i32 thread = builtin thread_index.w\n"), "line 3:41: unknown axis 'w' (x, y or z)"},
      {header("  %t: i32 thread = builtin warp_index.x\n"), "line 3:28: unknown builtin 'warp_index'"},
      {header("  %t: i32 thread = builtin simd_lane.x %n\n"), "line 3:20: a builtin takes no operands or attributes"},
      {header("  %p: ptr<f32, threadgroup> = alloc shape=\"64\" stages=1 layout=\"linear\"\n  %h: f32 = const value=1.0\n  %t: f32 x2 #2 = splat %h\n"
              "  %a: f32 x2 #2 = mma %p, %p, %t, %n m=4611686018427387904 n=4 warps_m=1 warps_n=1\n"),
       "line 6:3: the function does not verify: [gpu-verify] @k: mma: the accumulator does not hold m x n elements"},
      {header("  %p: ptr<f32, threadgroup> = alloc shape=\"64\" stages=1 layout=\"linear\"\n  %h: f32 = const value=1.0\n  %t: f32 x2 #2 = splat %h\n"
              "  %a: f32 x2 #2 = mma %p, %p, %t, %n m=8 n=8 warps_m=4611686018427387904 warps_n=4\n"),
       "line 6:3: the function does not verify: [gpu-verify] @k: mma: warps_m x warps_n warps do not make up"},
      {header("  %t: f32 thread = simd_reduce.prod %n\n"), "line 3:32: unknown reduction 'prod' (sum, max or min)"},
      {header("  %h: f32 = const value=1.0\n  %t: f32 = simd_reduce.sum %h lanes=3\n"),
       "simd_reduce: lanes must be a power of two below the simd width"},
      {header("  %h: f32 = const value=1.0\n  %t: f32 = simd_reduce.sum %h lanes=32\n"),
       "simd_reduce: lanes must be a power of two below the simd width"},
      {header("  %t: i32 thread = builtin thread_index.x\n  %i: i32 x2 #2 = coord #3 %t\n"), "line 4:25: layout #3 is not declared"},
      {header("  %c: i32 = const value=1\n  for %i: i32 = %c to %n step %c {\n    %d: i32 = add %i, %c\n    yield\n  }\n  store %o, %d\n"),
       "line 8:13: %d is not visible here (it is defined in a loop body or an if or while block)"},
      {header("  %c: i32 = const value=1\n  for %i: i32 = %c to %n step %c {\n    yield %c\n  }\n"),
       "line 5:5: yield passes 1 values; the loop carries 0"},
      {header("  %c: i32 = const value=1\n  for %i: i32 = %c to %n step %c iter(%s: i32 = %c) -> (%r, %r2) {\n    yield %s\n  }\n"),
       "line 4:3: the loop carries 1 values but names 2 results"},
      {header("  %c: i32 = const value=1\n  %x: i32 = for %c\n"), "line 4:13: a loop starts its line"},
      {header("  %c: i32 = const value=1\n  barrier %n\n"),  // parses, but the verifier refuses the barrier
       "line 4:3: the function does not verify: [gpu-verify] @k: barrier: takes 0 operands, got 1"},
      {header("  %p: ptr<f32, threadgroup> = alloc\n"), "line 3:3: the function does not verify"},
      {"gpu_kernel @k() threads=32 simd=32 {\n  #3 = tile<64> thr=32:2 reg=2:1\n}\n",
       "line 2:3: expected layout #2 next"},
      {"gpu_kernel @k() threads=32 simd=32 {\n  #2 = tile<64> thr=16:2 reg=2:1\n}\n",
       "line 2:3: layout #2 covers 16 threads; the function has 32"},
      {"gpu_kernel @k() threads=32 simd=32 {\n  #2 = tile<64> thr=32:2 reg=2:1 padded\n}\n",
       "layout #2 is marked padded but every pair holds an element"},
      {"gpu_kernel @k() threads=32 simd=32 {\n  #2 = tile<60> thr=32:2 reg=2:1\n}\n",
       "layout #2 has pairs past its elements but is not marked padded"},
      {"gpu_kernel @k() threads=32 simd=32 {\n  #2 = tile<64> thr=32:2 reg=2:1\n  #3 = tile<64> thr=(32,1):(2,0) reg=2:1\n}\n",
       "line 3:3: layout #3 is the same as #2"},
      {"gpu_kernel @k() threads=32 simd=32 {\n  #2 = tile<64> thr=32:2:1 reg=2:1\n}\n",
       "line 2:21: bad layout thr=32:2:1: [layout] parse: unexpected trailing text"},
      {"gpu_kernel @k() threads=32 simd=32 {\n  #2 = tile<64> thr=((((((((((((((((((32)))))))))))))))))):2 reg=2:1\n}\n",
       "tuples nest deeper than 16 levels"},
      {"gpu_kernel @k() threads=32 simd=32 {\n  #2 = tile<64> thr=(32,2):(2,4611686018427387904) reg=2:1\n}\n",
       "reaches offsets past 2^40"},
      {"gpu_kernel @k() threads=1024 simd=32 {\n  #2 = tile<64> thr=1024:0 reg=4096:1\n}\n",
       "has 4096 registers of 1024 threads, more than 2097152 pairs"},
  };
  for (const Case& c : cases) {
    std::string what = error_text(c.text);
    EXPECT_NE(what.find("[gpu-parse] "), std::string::npos) << what;
    EXPECT_NE(what.find(c.error), std::string::npos) << "want: " << c.error << "\ngot:  " << what;
  }
}

TEST(GpuParse, DeepLoopNestsAreRefused) {
  std::string body = "  %c: i32 = const value=1\n";
  for (int i = 0; i < 70; ++i) body += "for %i" + std::to_string(i) + ": i32 = %c to %n step %c {\n";
  for (int i = 0; i < 70; ++i) body += "yield\n}\n";
  EXPECT_NE(error_text(header(body)).find("line 68:1: loops nest deeper than 64 levels"), std::string::npos);
}

// Passes, text in and text out: the IR before a pass and after it, stated in the test.
TEST(GpuParse, FoldConstantsAndDceRunOnText) {
  const char* before = R"(gpu_kernel @k(%o: ptr<i32>, %n: i32) threads=32 simd=32 {
  %c: i32 = const value=6
  %c1: i32 = const value=7
  %t: i32 = mul %c, %c1
  %u: i32 = add %n, %c1
  %z: i32 = const value=0
  %v: i32 = add %n, %z
  store %o, %t
  %p: ptr<i32> = ptr_offset %o, %c1
  store %p, %v
}
)";
  const char* after = R"(gpu_kernel @k(%o: ptr<i32>, %n: i32) threads=32 simd=32 {
  %c1: i32 = const value=7
  %t: i32 = const value=42
  store %o, %t
  %p: ptr<i32> = ptr_offset %o, %c1
  store %p, %n
}
)";
  EXPECT_EQ(run_gpu_passes_on_text(before, {"fold-constants", "dce"}, apple_gpu_target()), after);
  // Without dce the dead ops stay; the text says so.
  std::string folded = run_gpu_passes_on_text(before, {"fold-constants"}, apple_gpu_target());
  EXPECT_NE(folded.find("%u: i32 = add %n, %c1"), std::string::npos) << folded;
  EXPECT_EQ(run_gpu_passes_on_text(folded, {"dce"}, apple_gpu_target()), after);
}

TEST(GpuParse, CseMergesOnText) {
  const char* before = R"(gpu_kernel @k(%o: ptr<f32>) threads=32 simd=32 {
  #2 = tile<64> thr=32:2 reg=2:1
  %tid: i32 thread = builtin thread_index.x
  %i: i32 x2 #2 = coord #2 %tid
  %i1: i32 x2 #2 = coord #2 %tid
  %os: ptr<f32> x2 #2 = splat %o
  %p: ptr<f32> x2 #2 = ptr_offset %os, %i
  %f: f32 x2 #2 = cast %i1
  store %p, %f
}
)";
  const char* after = R"(gpu_kernel @k(%o: ptr<f32>) threads=32 simd=32 {
  #2 = tile<64> thr=32:2 reg=2:1
  %tid: i32 thread = builtin thread_index.x
  %i: i32 x2 #2 = coord #2 %tid
  %os: ptr<f32> x2 #2 = splat %o
  %p: ptr<f32> x2 #2 = ptr_offset %os, %i
  %f: f32 x2 #2 = cast %i
  store %p, %f
}
)";
  EXPECT_EQ(run_gpu_passes_on_text(before, {"cse", "dce"}, apple_gpu_target()), after);
  Error e(METILE_ERROR_INTERNAL, "");
  try {
    run_gpu_passes_on_text(before, {"no-such-pass"}, apple_gpu_target());
  } catch (const Error& x) {
    e = x;
  }
  EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace metile
