// The hoist pass (src/passes/tile/hoist_loop_invariants.cpp): what leaves a loop, what stays,
// and that GPU results are the same with and without it (metal-sim against interp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "driver/compile.h"
#include "kernels/dsl.h"
#include "passes/tile/tile_pass.h"
#include "runtime/backends.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::V;

// Out[r] = sum over column blocks of X[r, cols] * q[cols] / D (decode attention's shape): q's
// broadcast to the block and the 1/D tile do not change inside the loop; the load does.
Program row_dot() {
  KernelBuilder k("row_dot");
  V x = k.ptr("X"), q = k.ptr("Q"), out = k.ptr("Out"), n = k.scalar("N"), d = k.scalar("D");
  V qv = k.load(q + k.arange(0, 32));
  auto acc = k.tile_range(k.i32(0), n, k.i32(8), {k.zeros(Shape::of(8))},
                          [&](V i, const std::vector<V>& c) -> std::vector<V> {
                            V rows = i + k.arange(0, 8);
                            V tile = k.tile_load(x, i, k.i32(0), k.i32(32), Shape::of(8, 32));
                            V qb = k.wrap(k.raw().broadcast(k.raw().reshape(qv.id, Shape::of(1, 32)),
                                                            Shape::of(8, 32)));
                            V scale = k.wrap(k.raw().binary(OpKind::DIV, k.f32(1.0).id,
                                                            k.cast(d, DType::f32).id));
                            V per_row = k.wrap(k.raw().binary(OpKind::MUL, k.sum(tile * qb, 1).id, scale.id));
                            // An integer division by a runtime scalar may fault: it stays.
                            V step = k.wrap(k.raw().binary(OpKind::DIV, k.i32(64).id, d.id));
                            return {c[0] + per_row + k.cast(step - step, DType::f32) + k.cast(rows - rows, DType::f32)};
                          });
  k.store(out + k.arange(0, 8), acc[0]);
  return k.finish();
}

std::string body_of_loop(const std::string& text) {
  size_t at = text.find("for ");
  return at == std::string::npos ? "" : text.substr(at);
}

TEST(HoistLoopInvariants, BroadcastsAndFloatMathLeaveTheLoopFaultingOpsStay) {
  Program p = row_dot();
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  const std::string before = print(p, false);
  EXPECT_NE(body_of_loop(before).find("broadcast"), std::string::npos) << before;
  run_tile_pass("hoist", p, ctx);
  const std::string text = print(p, false), loop = body_of_loop(text);
  EXPECT_EQ(loop.find("broadcast"), std::string::npos) << text;
  EXPECT_EQ(loop.find("reshape"), std::string::npos) << text;
  EXPECT_NE(loop.find("tile_load"), std::string::npos) << text;    // memory stays
  EXPECT_NE(loop.find("reduce_sum"), std::string::npos) << text;   // depends on the load
  // 1.0 / float(D) moved; 64 / D (integer: D may be 0 in a loop that never runs) stayed.
  std::vector<std::string> divs;
  for (size_t at = loop.find("= div "); at != std::string::npos; at = loop.find("= div ", at + 1))
    divs.push_back(loop.substr(at, loop.find('\n', at) - at));
  ASSERT_EQ(divs.size(), 1u) << text;
  EXPECT_NE(divs[0].find("%D : i32"), std::string::npos) << text;
  EXPECT_NE(text.substr(0, text.find("for ")).find(" : f32\n"), std::string::npos) << text;
}

TEST(HoistLoopInvariants, NestedLoopsLetAnOpLeaveTheWholeNest) {
  KernelBuilder k("nest");
  V out = k.ptr("Out"), n = k.scalar("N"), s = k.scalar("S", DType::f32);
  auto r = k.tile_range(k.i32(0), n, k.i32(1), {k.zeros(Shape::of(16))},
                        [&](V, const std::vector<V>& c) -> std::vector<V> {
                          return k.tile_range(k.i32(0), n, k.i32(1), {c[0]},
                                              [&](V, const std::vector<V>& c2) -> std::vector<V> {
                                                return {c2[0] + k.exp(k.full(Shape::of(16), 1.0) * s)};
                                              });
                        });
  k.store(out + k.arange(0, 16), r[0]);
  Program p = k.finish();
  CompileOptions o;
  TileHiddenArgs hidden;
  TilePassContext ctx{o, false, hidden};
  run_tile_pass("hoist", p, ctx);
  const std::string text = print(p, false);
  EXPECT_EQ(body_of_loop(text).find("exp"), std::string::npos) << text;
  EXPECT_LT(text.find("exp"), text.find("for ")) << text;
}

std::vector<float> run(const std::string& device, const std::vector<std::string>& disabled, int n) {
  auto dev = open_device(device);
  CompileOptions o;
  o.disabled_passes = disabled;
  o.no_cache = true;
  auto ck = compile_kernel(dev, std::make_shared<Program>(row_dot()), o);
  std::vector<float> x(static_cast<size_t>(std::max(n, 1)) * 32), q(32), out(8, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 5) * 0.5f;
  auto bx = dev->wrap(x.data(), x.size() * sizeof(float));
  auto bq = dev->wrap(q.data(), q.size() * sizeof(float));
  auto bo = dev->wrap(out.data(), out.size() * sizeof(float));
  LaunchArg ax, aq, ao, an, ad;
  ax.buffer = bx.get();
  aq.buffer = bq.get();
  ao.buffer = bo.get();
  an.bits = static_cast<uint32_t>(n);
  ad.bits = 4;
  ck->kernel->launch(Grid{}, {ax, aq, ao, an, ad});
  dev->synchronize();
  return out;
}

TEST(HoistLoopInvariants, MetalSimAgreesWithInterpWithAndWithoutThePass) {
  if (std::string why = probe_metal_sim_device(); !why.empty()) GTEST_SKIP() << why;
  for (int n : {0, 8, 24}) {
    std::vector<float> want = run("interp", {}, n);
    EXPECT_EQ(run("metal-sim", {}, n), want) << n;
    EXPECT_EQ(run("metal-sim", {"hoist"}, n), want) << n;
  }
}

}  // namespace
}  // namespace metile
