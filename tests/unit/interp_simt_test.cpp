// The SIMT view on the interp device (the identities of docs/semantics.md), simdgroup_role masking and
// tile_swizzle, run as kernels.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/swizzle.h"
#include "kernels/dsl.h"
#include "kernels/launch.h"

namespace metile {
namespace METILE_UNITY_ID {

using kernels::KernelBuilder;
using kernels::Launch;
using kernels::V;

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Out[0..T) = thread_id, [T..2T) = simd_lane_id, then shuffle_xor(x, m) per mask, then
// simd_broadcast(x, l) per lane, with x = 1000 + 3 * thread_id.
TEST(InterpSimt, ThreadAndLaneIdentities) {
  for (int t : {64, 40, 96}) {
    const std::vector<int> masks{1, 5, 16, 31}, lanes{0, 3, 31};
    KernelBuilder k("simt");
    k.raw().set_num_threads(t);
    V out = k.ptr("Out", DType::i32);
    V tid = k.thread_id();
    V x = tid * 3 + 1000;
    int slot = 0;
    auto put = [&](V v) { k.store(out + (tid + t * slot++), v); };
    put(tid);
    put(k.wrap(k.raw().simt(OpKind::SIMD_LANE_ID)));
    put(tid == k.arange(0, t));  // thread_id() == arange(0, T), stored as 0/1 through a cast
    for (int m : masks) {
      if (t % 32 != 0 && m >= 8) continue;  // would reach past T (tested below)
      put(k.shuffle_xor(x, k.i32(m)));
    }
    for (int l : lanes) {
      if (t % 32 != 0 && l >= t % 32) continue;
      put(k.wrap(k.raw().simd(OpKind::SIMD_BROADCAST, x.id, k.i32(l).id)));
    }
    put(k.wrap(k.raw().broadcast(k.shuffle_xor(k.i32(7), k.i32(3)).id,
                                 Shape::of(t))));  // scalar: unchanged
    std::vector<int32_t> r(static_cast<size_t>(t) * slot, -1);
    Launch l(k.finish());
    l.buffer(r);
    ASSERT_EQ(l.run(), METILE_OK) << l.error();
    int s = 0;
    auto row = [&](int i) { return r[static_cast<size_t>(s) * t + i]; };
    for (int i = 0; i < t; ++i) EXPECT_EQ(row(i), i);
    ++s;
    for (int i = 0; i < t; ++i) EXPECT_EQ(row(i), i % 32);
    ++s;
    for (int i = 0; i < t; ++i) EXPECT_EQ(row(i), 1);
    ++s;
    for (int m : masks) {
      if (t % 32 != 0 && m >= 8) continue;
      for (int i = 0; i < t; ++i)
        EXPECT_EQ(row(i), 1000 + 3 * (i ^ m)) << "t " << t << " mask " << m << " i " << i;
      ++s;
    }
    for (int ln : lanes) {
      if (t % 32 != 0 && ln >= t % 32) continue;
      for (int i = 0; i < t; ++i)
        EXPECT_EQ(row(i), 1000 + 3 * ((i & ~31) + ln)) << "lane " << ln << " i " << i;
      ++s;
    }
    for (int i = 0; i < t; ++i) EXPECT_EQ(row(i), 7);
  }
}

metile_status run_simd(int threads, OpKind op, int lane, std::string* error) {
  KernelBuilder k("simd_bad");
  k.raw().set_num_threads(threads);
  V out = k.ptr("Out", DType::i32);
  V tid = k.thread_id();
  V lane_v = k.i32(lane);
  k.raw().set_loc("simd.py", 9);
  V v = k.wrap(k.raw().simd(op, tid.id, lane_v.id));
  k.store(out + tid, v);
  std::vector<int32_t> r(threads);
  Launch l(k.finish());
  l.buffer(r);
  metile_status s = l.run();
  *error = l.error();
  return s;
}

TEST(InterpSimt, LanesPastTheThreadCountAreDeviceErrors) {
  std::string e;
  EXPECT_EQ(run_simd(40, OpKind::SIMD_SHUFFLE_XOR, 16, &e), METILE_ERROR_DEVICE);
  EXPECT_TRUE(has(e, "simd.py:9: simd_shuffle_xor:") && has(e, "thread 32 reads lane 16") &&
              has(e, "past the thread count 40"))
      << e;
  EXPECT_EQ(run_simd(40, OpKind::SIMD_BROADCAST, 10, &e), METILE_ERROR_DEVICE);
  EXPECT_TRUE(has(e, "simd_broadcast:") && has(e, "thread 32 reads lane 10")) << e;
  EXPECT_EQ(run_simd(64, OpKind::SIMD_SHUFFLE_XOR, 32, &e), METILE_ERROR_DEVICE);
  EXPECT_TRUE(has(e, "mask 32 is outside [0, 32)")) << e;
  EXPECT_EQ(run_simd(64, OpKind::SIMD_BROADCAST, -1, &e), METILE_ERROR_DEVICE);
  EXPECT_TRUE(has(e, "lane -1 is outside [0, 32)")) << e;
}

struct RoleSpec {
  int role, num_roles, first_sg, num_sgs;
};

// Runs one role region per spec over T threads: region r stores r + 1 to Out[tid] (a T-element
// store) and adds 1 to Count[r] (a scalar store: once if the role has a thread).
std::vector<int32_t> run_roles(int t, const std::vector<RoleSpec>& roles,
                               std::vector<int32_t>* counts, metile_status want = METILE_OK,
                               std::string* error = nullptr) {
  KernelBuilder k("roles");
  k.raw().set_num_threads(t);
  V out = k.ptr("Out", DType::i32), count = k.ptr("Count", DType::i32);
  V tid = k.thread_id();
  for (size_t r = 0; r < roles.size(); ++r) {
    k.raw().set_loc("roles.py", static_cast<int>(10 + r));
    k.raw().role_begin(roles[r].role, roles[r].num_roles, roles[r].first_sg, roles[r].num_sgs);
    k.store(out + tid,
            k.wrap(k.raw().broadcast(k.i32(static_cast<int64_t>(r) + 1).id, Shape::of(t))));
    k.store(count + static_cast<int>(r), k.load(count + static_cast<int>(r)) + 1);
    k.raw().role_end();
  }
  std::vector<int32_t> r(t, 0);
  counts->assign(roles.size(), 0);
  Launch l(k.finish());
  l.buffer(r).buffer(*counts);
  EXPECT_EQ(l.run(), want) << l.error();
  if (error) *error = l.error();
  return r;
}

TEST(InterpSimt, RolesWriteOnlyTheirThreads) {
  std::vector<int32_t> counts;
  // T = 128: four simdgroups split evenly between two roles.
  std::vector<int32_t> r = run_roles(128, {{0, 2, 0, 0}, {1, 2, 0, 0}}, &counts);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(r[i], i < 64 ? 1 : 2) << i;
  EXPECT_EQ(counts, (std::vector<int32_t>{1, 1}));
  // T = 80: S = 3; role 0 of 2 gets simdgroup 0, role 1 gets simdgroups 1 and 2 (threads 32..79).
  r = run_roles(80, {{1, 2, 0, 0}}, &counts);
  for (int i = 0; i < 80; ++i) EXPECT_EQ(r[i], i >= 32 ? 1 : 0) << i;
  // Explicit simdgroups [1, 3) of 4.
  r = run_roles(128, {{0, 1, 1, 2}}, &counts);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(r[i], i >= 32 && i < 96 ? 1 : 0) << i;
  // T = 32: role 0 of 2 has no simdgroup, so none of its side effects happen.
  r = run_roles(32, {{0, 2, 0, 0}, {1, 2, 0, 0}}, &counts);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(r[i], 2) << i;
  EXPECT_EQ(counts, (std::vector<int32_t>{0, 1}));
}

TEST(InterpSimt, NestedRolesIntersect) {
  KernelBuilder k("nested_roles");
  k.raw().set_num_threads(128);
  V out = k.ptr("Out", DType::i32);
  V tid = k.thread_id();
  k.raw().role_begin(1, 2, 0, 0);  // threads 64..127
  k.raw().role_begin(0, 1, 1, 2);  // threads 32..95
  k.store(out + tid, tid);
  k.raw().role_end();
  k.raw().role_end();
  std::vector<int32_t> r(128, -1);
  Launch l(k.finish());
  l.buffer(r);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  for (int i = 0; i < 128; ++i) EXPECT_EQ(r[i], i >= 64 && i < 96 ? i : -1) << i;
}

TEST(InterpSimt, RolePastTheThreadgroupIsADeviceError) {
  std::vector<int32_t> counts;
  std::string e;
  run_roles(128, {{0, 1, 3, 2}}, &counts, METILE_ERROR_DEVICE, &e);
  EXPECT_TRUE(has(
      e, "roles.py:10: simdgroup_role: simdgroups [3, 5) are past the 4 simdgroups of 128 threads"))
      << e;
}

// simdgroup_role belongs to the SIMT view (docs/semantics.md): a kernel whose only SIMT op is a role
// still takes its thread count from the unique arange size, and the role covers its threads.
TEST(InterpSimt, RolesAloneTakeTheThreadCountFromArange) {
  KernelBuilder k("plain_roles");
  V out = k.ptr("Out", DType::i32);
  V offs = k.arange(0, 64);
  k.raw().role_begin(1, 2, 0, 0);
  k.store(out + offs, offs + 1);
  k.raw().role_end();
  std::vector<int32_t> r(64);
  Launch l(k.finish());
  l.buffer(r);
  ASSERT_EQ(l.run(), METILE_OK) << l.error();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(r[i], i < 32 ? 0 : i + 1) << i;
}

// Every program stores its swizzled ids at its launch slot; the results must be a permutation
// of the grid and match src/ir/swizzle.h.
TEST(InterpSimt, TileSwizzleIsABijectionOnTheGrid) {
  for (const std::string pattern : {"diagonal", "grouped", "morton"})
    for (int block : {1, 2, 3, 4})
      for (auto [gm, gn] :
           std::vector<std::pair<int, int>>{{1, 1}, {3, 5}, {4, 4}, {7, 3}, {8, 8}, {5, 12}}) {
        KernelBuilder k("swizzle");
        V out = k.ptr("Out", DType::i32);
        V pm = k.program_id(0), pn = k.program_id(1);
        auto [m, n] = k.tile_swizzle(pm, pn, pattern, block);
        V slot = (pm * gn + pn) * 2;
        k.store(out + slot, m);
        k.store(out + (slot + 1), n);
        std::vector<int32_t> r(static_cast<size_t>(gm) * gn * 2, -1);
        Launch l(k.finish());
        l.buffer(r);
        ASSERT_EQ(l.run({static_cast<uint32_t>(gm), static_cast<uint32_t>(gn), 1}), METILE_OK)
            << l.error();
        std::set<std::pair<int, int>> seen;
        for (int i = 0; i < gm; ++i)
          for (int j = 0; j < gn; ++j) {
            const int32_t sm = r[(i * gn + j) * 2], sn = r[(i * gn + j) * 2 + 1];
            const int code = pattern == "grouped"  ? METILE_SWIZZLE_GROUPED
                             : pattern == "morton" ? METILE_SWIZZLE_MORTON
                                                   : METILE_SWIZZLE_DIAGONAL;
            auto want = metile_swizzle<int64_t>(code, i, j, gm, gn, block);
            EXPECT_EQ(sm, want.m);
            EXPECT_EQ(sn, want.n);
            EXPECT_TRUE(sm >= 0 && sm < gm && sn >= 0 && sn < gn);
            seen.insert({sm, sn});
          }
        EXPECT_EQ(seen.size(), static_cast<size_t>(gm * gn))
            << pattern << " block " << block << " grid " << gm << "x" << gn;
      }
}

TEST(InterpSimt, TileSwizzleOfIdsOutsideTheGridIsADeviceError) {
  KernelBuilder k("swizzle_bad");
  V out = k.ptr("Out", DType::i32);
  V pm = k.program_id(0) + 1, pn = k.program_id(1);
  k.raw().set_loc("swz.py", 3);
  auto [m, n] = k.raw().tile_swizzle(pm.id, pn.id, "morton", 2);
  k.store(out, k.wrap(m) + k.wrap(n));
  std::vector<int32_t> r(1);
  Launch l(k.finish());
  l.buffer(r);
  EXPECT_EQ(l.run({2, 2, 1}), METILE_ERROR_DEVICE);
  EXPECT_TRUE(has(
      l.error(),
      "swz.py:3: tile_swizzle: program ids (2, 0) are outside the 2 x 2 grid in program (1,0,0)"))
      << l.error();
}

}  // namespace
}  // namespace metile
