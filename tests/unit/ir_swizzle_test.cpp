// src/ir/swizzle.h: every pattern is a bijection on every grid, and the orders are the ones
// documented there (column-major launch index; Triton GROUP_M; Morton inside full squares).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <set>
#include <utility>
#include <vector>

#include "ir/swizzle.h"

namespace METILE_UNITY_ID {

using Ids = std::vector<std::pair<int64_t, int64_t>>;

// The swizzled ids in launch order L = pid_n * grid_m + pid_m.
Ids order(int pattern, int64_t gm, int64_t gn, int64_t block) {
  Ids out;
  for (int64_t l = 0; l < gm * gn; ++l) {
    auto r = metile_swizzle<int64_t>(pattern, l % gm, l / gm, gm, gn, block);
    out.emplace_back(r.m, r.n);
  }
  return out;
}

TEST(Swizzle, EveryPatternIsABijectionOnEveryGrid) {
  for (int pattern : {METILE_SWIZZLE_DIAGONAL, METILE_SWIZZLE_GROUPED, METILE_SWIZZLE_MORTON,
                      METILE_SWIZZLE_HILBERT, METILE_SWIZZLE_LINEAR})
    for (int64_t block = 1; block <= 9; ++block)
      for (int64_t gm = 1; gm <= 17; ++gm)
        for (int64_t gn = 1; gn <= 17; ++gn) {
          std::set<std::pair<int64_t, int64_t>> seen;
          for (auto [m, n] : order(pattern, gm, gn, block)) {
            ASSERT_TRUE(m >= 0 && m < gm && n >= 0 && n < gn)
                << pattern << " block " << block << " grid " << gm << "x" << gn << " -> " << m
                << "," << n;
            seen.insert({m, n});
          }
          ASSERT_EQ(seen.size(), static_cast<size_t>(gm * gn))
              << pattern << " block " << block << " grid " << gm << "x" << gn;
        }
}

TEST(Swizzle, WorksInThirtyTwoBitArithmetic) {
  // Generated code uses int; the result must not depend on the integer type.
  for (int pattern : {METILE_SWIZZLE_DIAGONAL, METILE_SWIZZLE_GROUPED, METILE_SWIZZLE_MORTON,
                      METILE_SWIZZLE_HILBERT, METILE_SWIZZLE_LINEAR})
    for (int m = 0; m < 300; m += 7)
      for (int n = 0; n < 200; n += 3) {
        auto a = metile_swizzle<int>(pattern, m, n, 300, 200, 4);
        auto b = metile_swizzle<int64_t>(pattern, m, n, 300, 200, 4);
        ASSERT_EQ(a.m, b.m);
        ASSERT_EQ(a.n, b.n);
      }
}

TEST(Swizzle, DiagonalRotatesColumnsByRow) {
  auto r = metile_swizzle_diagonal<int64_t>(3, 4, 5, 6);
  EXPECT_EQ(r.m, 3);
  EXPECT_EQ(r.n, 1);  // (4 + 3) % 6
}

TEST(Swizzle, GroupedWalksDownGroupsOfRows) {
  // 5 x 3 grid, groups of 2 rows; the last group has one row.
  Ids want{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2}, {2, 0}, {3, 0},
           {2, 1}, {3, 1}, {2, 2}, {3, 2}, {4, 0}, {4, 1}, {4, 2}};
  EXPECT_EQ(order(METILE_SWIZZLE_GROUPED, 5, 3, 2), want);
}

TEST(Swizzle, MortonIsZOrderInFullSquaresAndRowMajorAtTheEdges) {
  // 4 x 4 grid in one 4 x 4 square: even bits of L give the row, odd bits the column.
  Ids z = order(METILE_SWIZZLE_MORTON, 4, 4, 4);
  Ids want_z{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {3, 0}, {2, 1}, {3, 1},
             {0, 2}, {1, 2}, {0, 3}, {1, 3}, {2, 2}, {3, 2}, {2, 3}, {3, 3}};
  EXPECT_EQ(z, want_z);
  // 3 x 3 grid, block 2: a full 2 x 2 square, then a clipped 2 x 1 square, then the last
  // one-row band in 1 x 2 and 1 x 1 pieces, each row-major.
  Ids want_edge{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2}, {2, 0}, {2, 1}, {2, 2}};
  EXPECT_EQ(order(METILE_SWIZZLE_MORTON, 3, 3, 2), want_edge);
  // Block 3 is not a power of two: squares are row-major.
  Ids want_rm{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 1}, {2, 2}};
  EXPECT_EQ(order(METILE_SWIZZLE_MORTON, 3, 3, 3), want_rm);
}

TEST(Swizzle, HilbertStepsToANeighbourInsideFullSquares) {
  // Along the launch order inside each full 8 x 8 square, every step moves to an adjacent
  // program (the curve never jumps); the edges of a 12 x 10 grid are still covered.
  Ids h = order(METILE_SWIZZLE_HILBERT, 8, 8, 8);
  for (size_t i = 1; i < h.size(); ++i)
    EXPECT_EQ(std::abs(h[i].first - h[i - 1].first) + std::abs(h[i].second - h[i - 1].second), 1)
        << "step " << i;
  EXPECT_EQ(h.front(), (std::pair<int64_t, int64_t>{0, 0}));
  Ids line = order(METILE_SWIZZLE_LINEAR, 3, 5, 2);
  for (size_t l = 0; l < line.size(); ++l)
    EXPECT_EQ(line[l], (std::pair<int64_t, int64_t>{int64_t(l % 3), int64_t(l / 3)}));
}

}  // namespace
