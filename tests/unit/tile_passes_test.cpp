// The Tile IR pass registry and pipeline (src/passes/tile), and the activity pass's rewrites
// (docs/semantics.md "Masked-off lanes are inactive"): what it inserts, what it leaves alone, and a
// differential run with the pass switched off. Per-rule results on every device are in
// bindings/python/tests/test_activity.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "kernels/dsl.h"
#include "passes/tile/tile_pass.h"
#include "passes/tile/tile_pipeline.h"
#include "support/error.h"
#include "text_count.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;

// out[0] = max(load(X[0, 64), mask = lane < N)).
Program masked_max() {
  KernelBuilder k("masked_max");
  V x = k.ptr("X"), out = k.ptr("Out"), n = k.scalar("N");
  V offs = k.arange(0, 64);
  k.store(out, k.max(k.load(x + offs, offs < n)));
  return k.finish();
}

float run_masked_max(const std::vector<std::string>& disabled, std::vector<float> x, int n) {
  auto dev = open_device("interp");
  CompileOptions o;
  o.disabled_passes = disabled;
  o.no_cache = true;
  auto ck = compile_kernel(dev, std::make_shared<Program>(masked_max()), o);
  std::vector<float> out(1, 123.0f);
  auto bx = dev->wrap(x.data(), x.size() * sizeof(float));
  auto bo = dev->wrap(out.data(), sizeof(float));
  LaunchArg ax, ao, an;
  ax.buffer = bx.get();
  ao.buffer = bo.get();
  an.bits = static_cast<uint32_t>(n);
  ck->kernel->launch(Grid{}, {ax, ao, an});
  return out[0];
}

TEST(TilePasses, RegistryNamesEveryPassAndRejectsUnknownOnes) {
  ASSERT_FALSE(tile_passes().empty());
  ASSERT_EQ(tile_passes().size(), 13u);
  EXPECT_EQ(tile_passes()[0].name, "activity");
  EXPECT_EQ(tile_passes()[1].name, "carried_offsets");
  EXPECT_EQ(tile_passes()[2].name, "pointer_tiles");
  EXPECT_EQ(tile_passes()[3].name, "fuse_reductions");
  EXPECT_EQ(tile_passes()[4].name, "bounds");
  EXPECT_EQ(tile_passes()[5].name, "split_k");
  EXPECT_EQ(tile_passes()[6].name, "keep_rows");
  EXPECT_EQ(tile_passes()[7].name, "hoist");
  EXPECT_EQ(tile_passes()[8].name, "defer_reductions");
  EXPECT_EQ(tile_passes()[9].name, "whole_tiles");
  EXPECT_EQ(tile_passes()[10].name, "dot_precision");
  EXPECT_EQ(tile_passes()[11].name, "fp8_dots");
  EXPECT_EQ(tile_passes()[12].name, "loop_steps");
  Program p = masked_max();
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  try {
    run_tile_pass("no-such-pass", p, ctx);
    FAIL() << "an unknown pass ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find(
                  "known: activity, carried_offsets, pointer_tiles, fuse_reductions, bounds, split_k, keep_rows, hoist, defer_reductions, whole_tiles, dot_precision, fp8_dots, loop_steps"),
              std::string::npos)
        << e.what();
  }
  o.disabled_passes = {"activty"};
  EXPECT_THROW(run_tile_pipeline(p, o, false), Error);
}

TEST(TilePasses, ActivitySelectsTheIdentityBeforeAReduction) {
  Program p = masked_max();
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  run_tile_pass("activity", p, ctx);
  const std::string text = print(p, false);
  EXPECT_EQ(count(text, "select"), 1) << text;
  EXPECT_NE(text.find("-inf"), std::string::npos) << text;
  // A program without masked loads is left as it was.
  KernelBuilder k("plain");
  V x = k.ptr("X"), out = k.ptr("Out");
  V offs = k.arange(0, 64);
  k.store(out + offs, k.load(x + offs) * 2.0);
  Program plain = k.finish();
  const std::string before = print(plain, false);
  run_tile_pass("activity", plain, ctx);
  EXPECT_EQ(print(plain, false), before);
}

TEST(TilePasses, ActivityMasksStoresOfInactiveValuesAndLoopYields) {
  KernelBuilder k("keep");
  V x = k.ptr("X"), out = k.ptr("Out"), n = k.scalar("N");
  auto m = k.tile_range(k.i32(0), n, k.i32(32), {k.full(Shape::of(32), -1e38)},
                        [&](V i, const std::vector<V>& c) -> std::vector<V> {
                          V cols = i + k.arange(0, 32);
                          return {k.maximum(c[0], k.load(x + cols, cols < n))};
                        });
  V offs = k.arange(0, 32);
  k.store(out + offs, k.load(x + offs, offs < n) + 1.0);
  k.store(out + 32, k.max(m[0]));
  Program p = k.finish();
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  run_tile_pass("activity", p, ctx);
  const std::string text = print(p, false);
  // The yield keeps the previous m where the load was masked off; the unmasked store gets a mask.
  EXPECT_EQ(count(text, "select"), 1) << text;
  EXPECT_EQ(count(text, "store"), 2) << text;
  size_t first_store = text.find("store");
  EXPECT_EQ(std::count(text.begin() + static_cast<std::ptrdiff_t>(first_store),
                       text.begin() + static_cast<std::ptrdiff_t>(text.find('\n', first_store)),
                       ','),
            2)
      << "the first store should carry a mask:\n" << text;
}

TEST(TilePasses, SwitchingActivityOffGivesThePreSemanticsResult) {
  std::vector<float> x(64, -3.0f);
  for (int i = 0; i < 64; ++i) x[i] = -1.0f - static_cast<float>(i);
  EXPECT_EQ(run_masked_max({}, x, 10), -1.0f);
  EXPECT_EQ(run_masked_max({}, x, 0), -INFINITY);
  // Without the pass masked lanes read 0 and enter the max: the bug the pass fixes.
  EXPECT_EQ(run_masked_max({"activity"}, x, 10), 0.0f);
}

TEST(TilePasses, PerThreadLoopsNeedTheActivityPass) {
  KernelBuilder k("per_thread");
  V out = k.ptr("Out"), n = k.scalar("N");
  V tid = k.thread_id();
  auto r = k.tile_range(tid, n, k.i32(64), {k.zeros(Shape::of(64))},
                        [&](V i, const std::vector<V>& c) -> std::vector<V> {
                          return {c[0] + k.cast(i, DType::f32)};
                        });
  k.store(out + tid, r[0]);
  Program p = k.finish();
  ASSERT_EQ(p.num_threads, 64);
  CompileOptions o;
  auto lowered = run_tile_pipeline(p, o, false).program;
  walk(lowered->body, [&](const Op& op) {
    if (op.kind == OpKind::FOR) {
      EXPECT_TRUE(lowered->type(op.operands[0]).is_scalar());
    }
  });
  o.disabled_passes = {"activity"};
  try {
    run_tile_pipeline(p, o, false);
    FAIL() << "a per-thread loop reached a backend";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("per-thread"), std::string::npos) << e.what();
  }
}

Program run_bounds(Program p, bool device_checks, bool unchecked, TileHiddenArgs& hidden) {
  CompileOptions o;
  o.unchecked = unchecked;
  TilePassContext ctx{o, device_checks, hidden};
  run_tile_pass("bounds", p, ctx);
  return p;
}

TEST(TilePasses, BoundsPassesOneExtentPerPointerAndGuardsEveryAccess) {
  TileHiddenArgs hidden;
  Program p = run_bounds(masked_max(), false, false, hidden);
  ASSERT_EQ(p.params.size(), 5u);
  EXPECT_EQ(p.params[3].name, "X_extent");
  EXPECT_EQ(p.params[4].name, "Out_extent");
  EXPECT_EQ(hidden.extent_of, (std::vector<size_t>{0, 1}));
  EXPECT_FALSE(hidden.error_flag);
  const std::string text = print(p, false);
  EXPECT_EQ(count(text, " lt "), 3) << text;  // the user's mask, then one guard per access
  // The interp device checks accesses itself; `unchecked` drops the guards: extents only.
  for (bool interp : {true, false}) {
    TileHiddenArgs h;
    Program q = run_bounds(masked_max(), interp, !interp, h);
    EXPECT_EQ(q.params.size(), 5u);
    EXPECT_EQ(count(print(q, false), " lt "), 1) << print(q, false);
  }
}

TEST(TilePasses, BoundsKeepsNoGuardOnProvablyInRangeSharedMemory) {
  KernelBuilder k("shared_copy");
  V x = k.ptr("X"), out = k.ptr("Out");
  V sh = k.shared(64);
  V offs = k.arange(0, 64);
  k.store(sh + offs, k.load(x + offs));
  k.store(out + offs, k.load(sh + (offs + 0)));
  k.store(sh + (offs + 1), k.load(x + offs));  // element 64 is past the allocation
  TileHiddenArgs hidden;
  Program p = run_bounds(k.finish(), false, false, hidden);
  // Guards: the three device-buffer accesses and the one shared store that can leave.
  EXPECT_EQ(count(print(p, false), " lt "), 4) << print(p, false);
}

TEST(TilePasses, BoundsGivesTileAccessesTheirDefaultMatrix) {
  KernelBuilder k("tiles");
  V a = k.ptr("A"), c = k.ptr("C"), n = k.scalar("N");
  V t = k.tile_load(a, k.i32(0), k.i32(0), n, Shape::of(8, 8));
  k.tile_store(c, k.i32(0), k.i32(0), n, t);
  const Program base = k.finish();
  for (bool unchecked : {false, true}) {
    TileHiddenArgs hidden;
    Program p = run_bounds(base, false, unchecked, hidden);
    walk(p.body, [&](const Op& op) {
      if (op.kind == OpKind::TILE_LOAD) {
        EXPECT_EQ(op.operands.size(), 6u);
      }
      if (op.kind == OpKind::TILE_STORE) {
        EXPECT_EQ(op.operands.size(), 7u);
      }
    });
  }
}

TEST(TilePasses, CheckBoundsAddsAnErrorFlagNamingEachSite) {
  CompileOptions o;
  o.check_bounds = true;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  Program p = masked_max();
  run_tile_pass("bounds", p, ctx);
  EXPECT_TRUE(hidden.error_flag);
  ASSERT_EQ(hidden.sites.size(), 2u);
  EXPECT_NE(hidden.sites[0].find("tile_passes_test.cpp"), std::string::npos) << hidden.sites[0];
  EXPECT_NE(hidden.sites[0].find("load"), std::string::npos) << hidden.sites[0];
  EXPECT_EQ(p.params.back().name, "bounds_error");
}

// A top-level loop whose step is a parameter: every program runs it, so the runtime checks the
// argument before the launch and the kernel needs no flag (whose read-back synchronizes each
// launch); a computed step keeps the flag. Devices: tests/capi/capi_robust_test.cpp.
TEST(TilePasses, LoopStepsChecksAParameterStepOnTheHost) {
  for (bool computed : {false, true}) {
    KernelBuilder k("steps");
    V out = k.ptr("Out"), n = k.scalar("N"), step = k.scalar("S");
    V s = computed ? step * k.i32(2) : step;
    auto r = k.tile_range(k.i32(0), n, s, {k.f32(0.0)},
                          [&](V, const std::vector<V>& c) { return std::vector<V>{c[0] + k.f32(1.0)}; });
    k.store(out, r[0]);
    Program p = k.finish();
    CompileOptions o;
    TileHiddenArgs hidden;
    TilePassContext ctx{o, false, hidden};
    run_tile_pass("loop_steps", p, ctx);
    ASSERT_EQ(hidden.sites.size(), 1u);
    EXPECT_NE(hidden.sites[0].find("step is 0"), std::string::npos) << hidden.sites[0];
    EXPECT_EQ(hidden.error_flag, computed);
    ASSERT_EQ(hidden.nonzero_params.size(), computed ? 0u : 1u);
    if (!computed) {
      EXPECT_EQ(hidden.nonzero_params[0].param, 2u);
      EXPECT_EQ(hidden.nonzero_params[0].site, 1u);
    }
  }
}

}  // namespace
}  // namespace metile
