// One switch for what not to run: CompileOptions::disabled_passes (and METILE_GPU_OFF, which adds
// to it) names Tile IR passes, GPU IR passes and the pieces inside lowering alike.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/kernels.h"
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/tile/tile_pipeline.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

std::string refusal(const std::vector<std::string>& names) {
  try {
    check_pass_names(names);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
    return e.what();
  }
  return "";
}

TEST(DisabledPasses, EveryKindOfNameIsAcceptedAndOthersAreRefused) {
  EXPECT_EQ(refusal({"split_k", "whole_tiles", "cse", "order-device-memory", "tma", "pipeline",
                     "one_align", "last_first", "double_buffer", "fp8_promote", "release-stages",
                     "specialize-warps"}), "");
  // An earlier name is accepted and names the pass or piece (kPassAliases).
  EXPECT_EQ(refusal({"wgmma_kmajor_b", "wgmma_register_a", "warpgroup_kmajor_b", "preload",
                     "serpentine", "ldmatrix"}), "");
  CompileOptions earlier;
  earlier.disabled_passes = {"wgmma_register_a", "preload"};
  EXPECT_TRUE(earlier.disables("warpgroup_register_a"));
  EXPECT_FALSE(earlier.disables("warpgroup_kmajor_b"));
  EXPECT_TRUE(earlier.disables("preload-fragments"));
  EXPECT_FALSE(earlier.disables("serpentine-mma"));
  earlier.disabled_passes = {"ldmatrix"};
  EXPECT_TRUE(earlier.disables("ldmatrix-fragments"));
  std::string why = refusal({"cse", "bogus"});
  EXPECT_NE(why.find("unknown pass \"bogus\" to disable"), std::string::npos) << why;
  EXPECT_NE(why.find("Tile IR passes: activity, "), std::string::npos) << why;
  EXPECT_NE(why.find("GPU IR passes: hoist-invariant-staging, issue-copies-early, ldmatrix-fragments, serpentine-mma, preload-fragments, "
                     "release-stages, specialize-warps, fold-constants, cse, dce, "
                     "vectorize-access, insert-cancel-points, order-device-memory, elide-barriers;"),
            std::string::npos) << why;
  EXPECT_NE(why.find("pieces: async_copy, aligned_body, "), std::string::npos) << why;
  why = refusal({"lower-convert-layout"});
  EXPECT_NE(why.find("cannot be disabled"), std::string::npos) << why;
  why = refusal({"copy-rows-async"});
  EXPECT_NE(why.find("cannot be disabled"), std::string::npos) << why;
  EXPECT_NE(why.find("threadgroup_rows"), std::string::npos) << why;
  CompileOptions o;
  o.disabled_passes = {"activty"};
  EXPECT_THROW(run_tile_pipeline(kernels::softmax(256), o, false), Error);
}

TEST(DisabledPasses, GpuIrPassesAreSkippedByName) {
  Program p = kernels::softmax(256);
  CompileOptions o;
  const std::string all = run_gpu_pipeline(p, apple_gpu_target(), o, "metal-sim").gpu_ir_opt;
  o.disabled_passes = {"fold-constants", "cse", "dce", "vectorize-access", "elide-barriers"};
  GpuPipelineResult none = run_gpu_pipeline(p, apple_gpu_target(), o, "metal-sim");
  EXPECT_NE(none.gpu_ir_opt, all);
  // What the skipped passes would have done is what opt_level 0 leaves out.
  CompileOptions o0;
  o0.opt_level = 0;
  EXPECT_EQ(none.gpu_ir_opt, run_gpu_pipeline(p, apple_gpu_target(), o0, "metal-sim").gpu_ir_opt);
}

TEST(DisabledPasses, CancelPointsAreSkippedByName) {
  // cuda's K loop gets a cancel_point at its back-edge unless the list names the pass.
  Program p = kernels::gemm(kernels::gemm_config(DType::f16, 64, 64, 32));
  const GpuTarget t = nvidia_gpu_target("sm_80");
  EXPECT_NE(run_gpu_pipeline(p, t, CompileOptions{}, "cuda").gpu_ir_opt.find("cancel_point"),
            std::string::npos);
  CompileOptions off;
  off.disabled_passes = {"insert-cancel-points"};
  EXPECT_EQ(run_gpu_pipeline(p, t, off, "cuda").gpu_ir_opt.find("cancel_point"), std::string::npos);
}

TEST(DisabledPasses, LoweringPiecesAreSwitchedByTheSameList) {
  // "pipeline" is num_stages = 1, the way METILE_GPU_OFF=pipeline always was.
  Program p = kernels::gemm(kernels::gemm_config(DType::f16, 64, 64, 32));
  const GpuTarget t = nvidia_gpu_target("sm_80");
  CompileOptions off;
  off.disabled_passes = {"pipeline"};
  CompileOptions one;
  one.num_stages = 1;
  const std::string piece = run_gpu_pipeline(p, t, off, "cuda").gpu_ir;
  EXPECT_EQ(piece, run_gpu_pipeline(p, t, one, "cuda").gpu_ir);
  EXPECT_NE(piece, run_gpu_pipeline(p, t, CompileOptions{}, "cuda").gpu_ir);
  // The cache key tells the two lists apart.
  EXPECT_NE(off.key(), CompileOptions{}.key());
}

}  // namespace METILE_UNITY_ID
}  // namespace metile
