// Layout algebra: tuple helpers, evaluation, worked examples from the CuTe layout-algebra
// documentation (expected results re-derived by hand from the definitions, derivations in the
// comments), the cases the original module got wrong (metile-spec §18 item 25), property tests
// over random small layouts, swizzles, bank conflicts and hardware fragment layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>

#include "ir/layout.h"
#include "support/error.h"

namespace metile {
namespace METILE_UNITY_ID {

Layout L(const char* text) { return parse_layout(text); }
IntTuple T(const char* text) { return parse_int_tuple(text); }

std::vector<int64_t> table(const Layout& l) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < l.size(); ++i) out.push_back(l(i));
  return out;
}

std::vector<int64_t> sorted_table(const Layout& l) {
  std::vector<int64_t> t = table(l);
  std::sort(t.begin(), t.end());
  return t;
}

bool is_bijection_onto_prefix(const Layout& l) {
  std::vector<int64_t> t = sorted_table(l);
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool is_injective(const Layout& l) {
  std::vector<int64_t> t = sorted_table(l);
  return std::adjacent_find(t.begin(), t.end()) == t.end();
}

// Runs f, expects a METILE_ERROR_INVALID_ARGUMENT whose message contains every fragment.
void expect_error(const std::function<void()>& f, std::initializer_list<const char*> fragments) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), METILE_ERROR_INVALID_ARGUMENT);
    std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[layout] ", 0), 0u) << msg;
    for (const char* frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << msg;
    return;
  }
  ADD_FAILURE() << "expected a [layout] error";
}

// ---- random small layouts ------------------------------------------------------------------

class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  // Depth <= 2, rank 1..3, leaves 1..4, size <= max_size.
  IntTuple shape(int64_t max_size = 64) {
    for (;;) {
      IntTuple s = any_shape();
      if (s.size() <= max_size) return s;
    }
  }

  Layout any() {
    IntTuple s = shape();
    std::vector<int64_t> d;
    for (size_t i = 0; i < s.leaves().size(); ++i) d.push_back(uniform(0, 10));
    return Layout(s, like(s, d));
  }

  // Modes stacked in a random order with random gaps between them (gap 1: compact), so the layout
  // is injective and admits a complement. Cosize <= 1024.
  Layout stacked(int64_t max_gap, int64_t max_size = 64) {
    for (;;) {
      Layout l = try_stacked(max_gap, max_size);
      if (l.cosize() <= 1024) return l;
    }
  }

 private:
  IntTuple any_shape() {
    if (uniform(0, 4) == 0) return IntTuple(uniform(1, 4));
    std::vector<IntTuple> modes;
    for (int64_t i = 0, r = uniform(1, 3); i < r; ++i) {
      if (uniform(0, 2) == 0) {
        std::vector<IntTuple> sub;
        for (int64_t j = 0, k = uniform(1, 2); j < k; ++j) sub.emplace_back(uniform(1, 4));
        modes.emplace_back(std::move(sub));
      } else {
        modes.emplace_back(uniform(1, 4));
      }
    }
    return IntTuple(std::move(modes));
  }

  Layout try_stacked(int64_t max_gap, int64_t max_size) {
    IntTuple s = shape(max_size);
    std::vector<int64_t> leaves = s.leaves(), order(leaves.size()), d(leaves.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    std::shuffle(order.begin(), order.end(), rng_);
    int64_t current = 1;
    for (int64_t i : order) {
      current *= uniform(1, max_gap);
      d[i] = current;
      current *= leaves[i];
    }
    return Layout(s, like(s, d));
  }

  static IntTuple like(const IntTuple& s, const std::vector<int64_t>& flat) {
    size_t pos = 0;
    return like(s, flat, pos);
  }
  static IntTuple like(const IntTuple& s, const std::vector<int64_t>& flat, size_t& pos) {
    if (s.is_int()) return IntTuple(flat[pos++]);
    std::vector<IntTuple> out;
    for (const IntTuple& e : s.elems()) out.push_back(like(e, flat, pos));
    return IntTuple(std::move(out));
  }

  std::mt19937 rng_;
};

// ---- IntTuple ------------------------------------------------------------------------------

TEST(IntTuple, SizeRankDepth) {
  EXPECT_EQ(T("4").size(), 4);
  EXPECT_EQ(T("4").rank(), 1);
  EXPECT_EQ(T("4").depth(), 0);
  EXPECT_EQ(T("(4,8)").size(), 32);
  EXPECT_EQ(T("(4,8)").depth(), 1);
  EXPECT_EQ(T("(4,(2,3))").size(), 24);
  EXPECT_EQ(T("(4,(2,3))").rank(), 2);
  EXPECT_EQ(T("(4,(2,3))").depth(), 2);
  EXPECT_EQ(T("(4,(2,3))")[1], T("(2,3)"));
  EXPECT_EQ(T("(4,(2,3))").leaves(), (std::vector<int64_t>{4, 2, 3}));
}

TEST(IntTuple, FlattenCongruentCompatible) {
  EXPECT_EQ(flatten(T("(4,(2,3))")), T("(4,2,3)"));
  EXPECT_EQ(flatten(T("7")), T("7"));
  EXPECT_TRUE(congruent(T("(4,(2,3))"), T("(1,(4,8))")));
  EXPECT_FALSE(congruent(T("(4,(2,3))"), T("(1,4,8)")));
  EXPECT_FALSE(congruent(T("4"), T("(4)")));
  EXPECT_TRUE(compatible(T("6"), T("(2,3)")));
  EXPECT_FALSE(compatible(T("(2,3)"), T("6")));
  EXPECT_FALSE(compatible(T("5"), T("(2,3)")));
  EXPECT_TRUE(compatible(T("(6,4)"), T("((2,3),4)")));
  EXPECT_FALSE(compatible(T("(6,4)"), T("((2,3),4,1)")));
}

TEST(IntTuple, CompactStrides) {
  EXPECT_EQ(compact_col_major(T("(4,(2,3))")), T("(1,(4,8))"));
  EXPECT_EQ(compact_row_major(T("(4,(2,3))")), T("(6,(3,1))"));
  EXPECT_EQ(compact_row_major(T("(2,3)")), T("(3,1)"));
  EXPECT_EQ(compact_col_major(T("(2,3)"), 5), T("(5,10)"));
  EXPECT_EQ(compact_col_major(T("8")), T("1"));
}

TEST(IntTuple, ShapeDiv) {
  EXPECT_EQ(shape_div(T("(4,6)"), T("8")), T("(1,3)"));  // 4 | 8 leaves 2, 6 / 2 = 3
  EXPECT_EQ(shape_div(T("(4,6)"), T("2")), T("(2,6)"));
  EXPECT_EQ(shape_div(T("12"), T("4")), T("3"));
  EXPECT_EQ(shape_div(T("4"), T("12")), T("1"));
  EXPECT_EQ(shape_div(T("(4,6)"), T("(2,3)")), T("(2,2)"));
  expect_error([] { shape_div(T("6"), T("4")); }, {"shape_div", "6", "4"});
  expect_error([] { shape_div(T("(4,6)"), T("(2,3,1)")); }, {"shape_div", "ranks"});
}

TEST(IntTuple, Coordinates) {
  IntTuple s = T("(4,8)");
  EXPECT_EQ(idx2crd(1, s), T("(1,0)"));
  EXPECT_EQ(idx2crd(4, s), T("(0,1)"));
  EXPECT_EQ(idx2crd(5, s), T("(1,1)"));
  EXPECT_EQ(idx2crd(31, s), T("(3,7)"));
  EXPECT_EQ(crd2idx(T("(3,7)"), s), 31);
  EXPECT_EQ(idx2crd(13, T("(4,(2,3))")), T("(1,(1,1))"));  // 13 = 1 + 4*3, 3 = 1 + 2*1
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(crd2idx(idx2crd(i, T("(4,(2,3))")), T("(4,(2,3))")), i);
  // Natural, flat (an integer per top-level mode) and integer coordinates agree.
  IntTuple hs = T("(4,(2,3))"), hd = T("(1,(4,8))");
  EXPECT_EQ(crd2idx(T("(1,(0,2))"), hs, hd), 1 + 2 * 8);
  EXPECT_EQ(crd2idx(T("(1,4)"), hs, hd), 1 + 2 * 8);  // 4 in (2,3) is (0,2)
  EXPECT_EQ(crd2idx(T("17"), hs, hd), 17);             // compact strides: identity
  // Past the size, the last mode absorbs the excess.
  EXPECT_EQ(idx2crd(40, s), T("(0,10)"));
  expect_error([] { crd2idx(T("(4,0)"), T("(4,8)")); }, {"crd2idx", "(4,0)", "(4,8)"});
  expect_error([] { crd2idx(T("(1,2,3)"), T("(4,8)")); }, {"does not match shape"});
  expect_error([] { idx2crd(-1, T("(4,8)")); }, {"idx2crd", "negative"});
}

TEST(IntTuple, PrintAndParse) {
  EXPECT_EQ(T("(4,(2,3))").str(), "(4,(2,3))");
  EXPECT_EQ(T(" ( 4 , ( 2,3 ) ) "), T("(4,(2,3))"));
  EXPECT_EQ(tup(4, tup(2, 3)), T("(4,(2,3))"));
  EXPECT_EQ(T("(4)").str(), "(4)");
  for (const char* bad : {"", "(4,", "(4,)", "()", "4x", "(-1)", "99999999999999999999", "(4 8)"})
    expect_error([bad] { parse_int_tuple(bad); }, {"parse"});
  expect_error([] { IntTuple(std::vector<IntTuple>{}); }, {"empty tuple"});
  expect_error([] { (void)T("(1,2)").value(); }, {"is a tuple"});
  expect_error([] { (void)T("(1,2)")[2]; }, {"index 2"});
}

// ---- Layout basics -------------------------------------------------------------------------

TEST(Layout, EvaluationAndQueries) {
  Layout a = L("8:1");
  EXPECT_EQ(a.rank(), 1);
  EXPECT_EQ(a.depth(), 0);
  EXPECT_EQ(a.cosize(), 8);
  EXPECT_EQ(a.mode(0), a);

  Layout cm = make_layout(T("(4,8)"));
  EXPECT_EQ(cm, L("(4,8):(1,4)"));
  EXPECT_EQ(cm(3, 7), 31);
  EXPECT_EQ(table(cm), table(L("32:1")));

  Layout rm = make_layout_row_major(T("(4,8)"));
  EXPECT_EQ(rm, L("(4,8):(8,1)"));
  EXPECT_EQ(rm(1, 0), 8);
  EXPECT_EQ(rm(1), 8);  // index 1 is coordinate (1,0)
  EXPECT_EQ(table(make_layout_row_major(T("(2,3)"))), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));

  EXPECT_EQ(table(L("4:2")), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(L("4:2").cosize(), 7);
  EXPECT_EQ(L("(4,8):(0,1)")(3, 5), 5);  // broadcast along mode 0
  EXPECT_EQ(L("(4,8):(1,5)").cosize(), 3 + 35 + 1);

  Layout h = L("(4,(2,3)):(1,(4,8))");
  EXPECT_EQ(h.depth(), 2);
  EXPECT_EQ(h.rank(), 2);
  EXPECT_EQ(h.mode(1), L("(2,3):(4,8)"));
  EXPECT_EQ(h(tup(1, tup(1, 2))), 1 + 4 + 16);
  EXPECT_EQ(h(1, 5), 1 + 4 + 16);  // 5 in (2,3) is (1,2)
  EXPECT_EQ(h(21), 21);

  // CuTe extends the last mode past the size: 9 is (1,2) in (4,2).
  EXPECT_EQ(L("(4,2):(1,10)")(9), 21);

  EXPECT_EQ(make_layout({L("4:1"), L("(2,3):(4,8)")}), h);
  EXPECT_EQ(L("(4,2):(2,1)").str(), "(4,2):(2,1)");
  EXPECT_NE(L("(4,2):(2,1)"), L("(4,2):(1,4)"));
  EXPECT_EQ(Layout(), L("1:0"));
  EXPECT_EQ(flatten(h), L("(4,2,3):(1,4,8)"));
}

TEST(Layout, InvalidInput) {
  expect_error([] { Layout(tup(4, 0), tup(1, 4)); }, {"make_layout", "non-positive", "(4,0)"});
  expect_error([] { Layout(tup(4, 8), tup(1, -4)); }, {"make_layout", "negative", "(1,-4)"});
  expect_error([] { L("(4,8):(1,(4,2))"); }, {"not congruent", "(4,8)", "(1,(4,2))"});
  expect_error([] { make_layout(T("(4,0)")); }, {"non-positive"});
  expect_error([] { make_layout(std::vector<Layout>{}); }, {"no modes"});
  expect_error([] { L("(4,8):(1,4)").mode(2); }, {"mode", "index 2"});
  expect_error([] { L("(4,8):(1,4)")(4, 0); }, {"outside shape"});
  expect_error([] { L("(4,8):(1,4)")(-1); }, {"negative index"});
  expect_error([] { L("(4,8):(1,4)")(tup(1, 2, 3)); }, {"does not match shape"});
  expect_error([] { L("(4,8):(1,4"); }, {"parse", "expected ')'"});
  expect_error([] { Layout(tup(1 << 30, 1 << 30, 1 << 30), tup(1, 1, 1)); }, {"overflows"});
}

// ---- coalesce and filter -------------------------------------------------------------------

TEST(Coalesce, Examples) {
  // Size-1 modes vanish; 2:1 then 6:2 merges because 2 == 2*1.
  EXPECT_EQ(coalesce(L("(2,(1,6)):(1,(6,2))")), L("12:1"));
  EXPECT_EQ(coalesce(L("(2,(1,6)):(1,(6,2))"), T("(1,1)")), L("(2,6):(1,2)"));
  EXPECT_EQ(coalesce(L("(2,4):(1,2)")), L("8:1"));
  EXPECT_EQ(coalesce(L("8:1")), L("8:1"));
  EXPECT_EQ(coalesce(L("(1,1):(3,5)")), L("1:0"));
  EXPECT_EQ(coalesce(L("(4,1,8):(1,7,4)")), L("32:1"));
  EXPECT_EQ(coalesce(L("(2,2):(0,0)")), L("4:0"));
  EXPECT_EQ(coalesce(L("(4,8):(1,5)")).size(), 32);
  expect_error([] { coalesce(L("(2,3):(1,2)"), T("(1,1,1)")); }, {"coalesce", "profile"});
}

TEST(Coalesce, RowMajorKeepsTheFunction) {
  // The original sorted modes by stride and turned (4,8):(8,1) into 32:1 (§18 item 25).
  Layout rm = L("(4,8):(8,1)");
  EXPECT_EQ(coalesce(rm), rm);
  EXPECT_EQ(table(coalesce(rm)), table(rm));
  EXPECT_EQ(coalesce(L("((2,2),8):((8,16),1)")), L("(4,8):(8,1)"));
}

TEST(Coalesce, PreservesTheFunctionOnRandomLayouts) {
  Gen g(1);
  for (int n = 0; n < 2000; ++n) {
    Layout l = g.any();
    Layout c = coalesce(l);
    ASSERT_EQ(c.size(), l.size()) << l;
    EXPECT_LE(c.depth(), 1) << l;
    EXPECT_EQ(table(c), table(l)) << l << " -> " << c;
    EXPECT_EQ(coalesce(c), c) << l;
    std::vector<detail::Mode> m = detail::flat_modes(c);
    for (size_t i = 0; i < m.size(); ++i) {
      if (c != Layout()) {
        EXPECT_GT(m[i].shape, 1) << c;
      }
      if (i > 0) {
        EXPECT_NE(m[i].stride, m[i - 1].shape * m[i - 1].stride) << c;
      }
    }
    if (!l.shape().is_int()) {
      std::vector<IntTuple> profile(l.rank(), IntTuple(1));
      Layout bm = coalesce(l, IntTuple(profile));
      EXPECT_EQ(bm.rank(), l.rank()) << l;
      EXPECT_EQ(table(bm), table(l)) << l;
    }
  }
}

TEST(Filter, DropsBroadcastModes) {
  EXPECT_EQ(filter(L("(4,(2,3)):(0,(1,0))")), L("2:1"));
  EXPECT_EQ(filter(L("(4,8):(0,0)")), L("1:0"));
  EXPECT_EQ(filter(L("(2,4,3):(1,0,2)")), L("6:1"));
  Gen g(2);
  for (int n = 0; n < 500; ++n) {
    Layout l = g.any();
    Layout f = filter(l);
    std::vector<int64_t> tl = table(l), tf = table(f);
    EXPECT_EQ(std::set<int64_t>(tl.begin(), tl.end()), std::set<int64_t>(tf.begin(), tf.end()))
        << l;
    int64_t expect = 1;
    for (const detail::Mode& m : detail::flat_modes(l))
      if (m.stride != 0) expect *= m.shape;
    EXPECT_EQ(f.size(), expect) << l;
  }
}

// ---- composition ---------------------------------------------------------------------------

TEST(Composition, DocumentationExamples) {
  // A = (6,2):(8,2), B = (4,3):(3,1). Mode 4:3: stride 3 divides mode 6 of A -> 2:24, the other 2
  // elements come from A's last mode 2:2, so (2,2):(24,2). Mode 3:1 fits in 6:8 -> 3:8.
  EXPECT_EQ(composition(L("(6,2):(8,2)"), L("(4,3):(3,1)")), L("((2,2),3):((24,2),8)"));
  // A = 20:2 is a single mode: each mode of B keeps its shape with stride scaled by 2.
  EXPECT_EQ(composition(L("20:2"), L("(5,4):(4,1)")), L("(5,4):(8,2)"));
  // A = (10,2):(16,4): 5:1 fits in 10:16 -> 5:16; 4:5 divides 10 into 2:80, rest 2 from 2:4.
  EXPECT_EQ(composition(L("(10,2):(16,4)"), L("(5,4):(1,5)")), L("(5,(2,2)):(16,(80,4))"));
  // By-mode: (12,(4,8)):(59,(13,1)) with tiler <3:4, 8:2>: 12:59 o 3:4 = 3:236; (4,8):(13,1)
  // o 8:2 = (2,4):(26,1).
  EXPECT_EQ(composition(L("(12,(4,8)):(59,(13,1))"), {L("3:4"), L("8:2")}),
            L("(3,(2,4)):(236,(26,1))"));
}

TEST(Composition, SpecCases) {
  Layout a = L("(4,8):(1,4)");
  EXPECT_EQ(table(composition(a, L("32:1"))), table(a));
  Layout c = composition(a, L("16:2"));
  EXPECT_EQ(c, L("16:2"));
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(c(i), a(2 * i));
  EXPECT_EQ(composition(a, L("(4,4):(1,8)")).size(), 16);
}

TEST(Composition, RowMajorLeftOperand) {
  // Unreliable in the original because its coalesce sorted A's strides.
  Layout rm = L("(4,8):(8,1)");
  EXPECT_EQ(composition(rm, L("8:4")), L("8:1"));  // 4i is (0,i)
  EXPECT_EQ(composition(rm, L("4:1")), L("4:8"));
  Layout b = L("(2,(2,2)):(1,(2,8))");
  Layout r = composition(rm, b);
  for (int64_t i = 0; i < b.size(); ++i) EXPECT_EQ(r(i), rm(b(i))) << r;
}

TEST(Composition, UndefinedCasesThrow) {
  // 6 elements do not split over A's mode 4:1 then 8:5.
  expect_error([] { composition(L("(4,8):(1,5)"), L("6:1")); },
               {"composition", "(4,8):(1,5) o 6:1", "shape divisibility"});
  // Stride 3 neither divides nor is divided by mode 2:1.
  expect_error([] { composition(L("(2,5):(1,7)"), L("2:3")); },
               {"composition", "(2,5):(1,7) o 2:3", "stride divisibility"});
  // Stride 4 lands inside mode 6:1 (offsets 0, 4), but the next step, 8, crosses into 4:10.
  expect_error([] { composition(L("(6,4):(1,10)"), L("4:4")); }, {"does not divide"});
  EXPECT_EQ(composition(L("(6,4):(1,10)"), L("2:4")), L("2:4"));
  EXPECT_EQ(composition(L("(6,2):(1,10)"), L("4:1")), L("4:1"));  // part of one mode
  // Each mode of B is fine alone, but (1,1) is offset 2 = (0,1) in A: a carry between A's modes
  // that the by-mode result (2,2):(1,1) would miss (it gives 2, A gives 10).
  expect_error([] { composition(L("(2,2):(1,10)"), L("(2,2):(1,1)")); },
               {"(2,2):(1,10) o (2,2):(1,1)", "overlap in A"});
  EXPECT_EQ(composition(L("8:3"), L("(2,2):(1,1)")), L("(2,2):(3,3)"));  // A is linear
  expect_error([] { composition(L("4:1"), {L("2:1"), L("2:1")}); }, {"composition", "tiler"});
}

TEST(Composition, IsFunctionCompositionOnRandomLayouts) {
  Gen g(3);
  int defined = 0;
  for (int n = 0; n < 4000; ++n) {
    Layout a = g.any();
    Layout b = g.any();
    Layout r;
    try {
      r = composition(a, b);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not a layout"), std::string::npos) << e.what();
      continue;
    }
    ++defined;
    ASSERT_EQ(r.size(), b.size()) << a << " o " << b;
    EXPECT_TRUE(compatible(b.shape(), r.shape())) << a << " o " << b << " = " << r;
    for (int64_t i = 0; i < b.size(); ++i) {
      ASSERT_EQ(r(i), a(b(i))) << a << " o " << b << " = " << r << " at " << i;
      ASSERT_EQ(r(idx2crd(i, b.shape())), a(b(i))) << a << " o " << b << " = " << r;
    }
  }
  EXPECT_GT(defined, 2000);
}

TEST(Composition, WithShape) {
  EXPECT_EQ(with_shape(L("32:1"), T("(4,8)")), L("(4,8):(1,4)"));
  Layout rm = L("(4,8):(8,1)");
  Layout r = with_shape(rm, T("(2,16)"));
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(r(i), rm(i));
  expect_error([] { with_shape(L("32:1"), T("(4,4)")); }, {"with_shape", "size 16", "size 32"});
}

// ---- complement ----------------------------------------------------------------------------

TEST(Complement, DocumentationExamples) {
  EXPECT_EQ(complement(L("4:1"), 24), L("6:4"));
  EXPECT_EQ(complement(L("6:4"), 24), L("4:1"));
  EXPECT_EQ(complement(L("(4,6):(1,4)"), 24), L("1:0"));
  // 4:2 leaves the gap 2:1 below it and 3 copies above its span 8.
  EXPECT_EQ(complement(L("4:2"), 24), L("(2,3):(1,8)"));
  // (2,4):(1,6): gap 3:2 between 2:1 (span 2) and 4:6 (span 24).
  EXPECT_EQ(complement(L("(2,4):(1,6)"), 24), L("3:2"));
  // (2,2):(1,6): gap 3:2 up to 6, then 2 copies of span 12.
  EXPECT_EQ(complement(L("(2,2):(1,6)"), 24), L("(3,2):(2,12)"));
  EXPECT_EQ(complement(L("4:1"), 8), L("2:4"));
  EXPECT_EQ(complement(L("4:2"), 8), L("2:1"));
  EXPECT_EQ(complement(L("4:2")), L("2:1"));  // cotarget cosize 7 rounds up to one copy
  EXPECT_EQ(complement(L("(4,8):(0,1)"), 16), L("2:8"));  // broadcast modes are ignored
}

TEST(Complement, InvalidInput) {
  expect_error([] { complement(L("(2,2):(1,1)"), 8); },
               {"complement", "(2,2):(1,1)", "starts inside [0, 2)"});
  expect_error([] { complement(L("(2,3):(3,2)"), 12); }, {"complement", "starts inside"});
  expect_error([] { complement(L("(2,2):(1,3)"), 12); }, {"complement", "not a multiple of 2"});
  expect_error([] { complement(L("4:1"), 0); }, {"complement", "cotarget 0"});
}

TEST(Complement, DisjointAndCompleteOnRandomLayouts) {
  Gen g(4);
  for (int n = 0; n < 1500; ++n) {
    Layout a = g.stacked(3);
    int64_t m = g.uniform(1, 2 * a.cosize());
    Layout c = complement(a, m);
    std::vector<detail::Mode> cm = detail::flat_modes(c);
    for (size_t i = 1; i < cm.size(); ++i) EXPECT_LT(cm[i - 1].stride, cm[i].stride) << c;
    std::vector<int64_t> ta = table(a), tc = table(c);
    std::set<int64_t> common;
    std::set<int64_t> sa(ta.begin(), ta.end());
    for (int64_t x : tc)
      if (sa.count(x)) common.insert(x);
    EXPECT_EQ(common, std::set<int64_t>{0}) << a << " / " << c;
    Layout both = make_layout({a, c});
    EXPECT_TRUE(is_bijection_onto_prefix(both)) << a << " , " << c;
    int64_t span = 1;
    for (const detail::Mode& md : detail::flat_modes(a))
      if (md.shape > 1) span = std::max(span, md.shape * md.stride);
    EXPECT_EQ(both.size(), span * std::max<int64_t>(1, (m + span - 1) / span)) << a << " " << m;
  }
}

// ---- divide and product --------------------------------------------------------------------

TEST(Divide, DocumentationExamples) {
  EXPECT_EQ(logical_divide(L("16:1"), L("4:1")), L("(4,4):(1,4)"));
  // complement(4:2, 24) = (2,3):(1,8); A o 4:2 = (2,2):(4,1) (2 of mode 4:2, then mode 2:1);
  // A o (2,3):(1,8) = (2,3):(2,8).
  EXPECT_EQ(logical_divide(L("(4,2,3):(2,1,8)"), L("4:2")), L("((2,2),(2,3)):((4,1),(2,8))"));
  EXPECT_EQ(logical_divide(make_layout(T("(48,48)")), L("12:1")), L("(12,192):(1,12)"));
  // By mode: 9:59 / 3:3 with complement 3:1; (4,8):(13,1) / (2,4):(1,8) with complement 4:2.
  Layout a = L("(9,(4,8)):(59,(13,1))");
  std::vector<Layout> tiler{L("3:3"), L("(2,4):(1,8)")};
  EXPECT_EQ(logical_divide(a, tiler), L("((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"));
  EXPECT_EQ(zipped_divide(a, tiler), L("((3,(2,4)),(3,(2,2))):((177,(13,2)),(59,(26,1)))"));
  EXPECT_EQ(tiled_divide(a, tiler), L("((3,(2,4)),3,(2,2)):((177,(13,2)),59,(26,1))"));
  // A 32x32 row-major tile in 8x8 tiles: the untiled modes stay in the rest.
  Layout t3 = L("(32,32,2):(32,1,1024)");
  EXPECT_EQ(zipped_divide(t3, {L("8:1"), L("8:1")}),
            L("((8,8),(4,4,2)):((32,1),(256,8,1024))"));
  // A tiler that does not divide: the rest mode rounds up and A extends (cover 8 of 6).
  EXPECT_EQ(logical_divide(L("6:1"), L("4:1")), L("(4,2):(1,4)"));
  expect_error([] { zipped_divide(L("(4,4):(1,4)"), {L("2:1"), L("2:1"), L("2:1")}); },
               {"zipped_divide", "3 modes"});
}

TEST(Divide, TilesAndRestsOnRandomLayouts) {
  Gen g(5);
  int defined = 0;
  for (int n = 0; n < 2000; ++n) {
    Layout a = g.any();
    Layout b = g.stacked(2);
    Layout rest;
    Layout d;
    try {
      rest = complement(b, a.size());
      d = logical_divide(a, b);
    } catch (const Error&) {
      continue;
    }
    ++defined;
    ASSERT_EQ(d.rank(), 2);
    ASSERT_EQ(d.size(), b.size() * rest.size());
    for (int64_t t = 0; t < b.size(); ++t)
      for (int64_t r = 0; r < rest.size(); ++r)
        ASSERT_EQ(d(tup(t, r)), a(b(t) + rest(r))) << a << " / " << b << " = " << d;
    // A compact tiler whose size divides A's walks A's domain exactly once.
    if (b.cosize() == b.size() && a.size() % b.size() == 0) {
      EXPECT_EQ(sorted_table(d), sorted_table(a)) << a << " / " << b;
    }
  }
  EXPECT_GT(defined, 1000);
}

TEST(Product, DocumentationExamples) {
  // The original returned (4,3):(1,1): its complement used cotarget cosize(A) (§18 item 25).
  EXPECT_EQ(logical_product(L("4:1"), L("3:1")), L("(4,3):(1,4)"));
  // complement((2,2):(4,1), 24) = (2,3):(2,8); composed with 6:1 it stays (2,3):(2,8).
  EXPECT_EQ(logical_product(L("(2,2):(4,1)"), L("6:1")), L("((2,2),(2,3)):((4,1),(2,8))"));
  // complement((2,2):(4,1), 32) = (2,4):(2,8); o (4,2):(2,1): 4:2 skips mode 2:2 -> 4:8, 2:1 -> 2:2.
  EXPECT_EQ(logical_product(L("(2,2):(4,1)"), L("(4,2):(2,1)")),
            L("((2,2),(4,2)):((4,1),(8,2))"));
  // complement((2,5):(5,1), 120) = 12:10; o (3,4):(1,3) = (3,4):(10,30); zipped by mode.
  EXPECT_EQ(blocked_product(L("(2,5):(5,1)"), L("(3,4):(1,3)")),
            L("((2,3),(5,4)):((5,10),(1,30))"));
  EXPECT_EQ(raked_product(L("(2,5):(5,1)"), L("(3,4):(1,3)")),
            L("((3,2),(4,5)):((10,5),(30,1))"));
  EXPECT_EQ(blocked_product(L("4:1"), L("3:1")), L("(4,3):(1,4)"));
  EXPECT_EQ(raked_product(L("4:1"), L("3:1")), L("(3,4):(4,1)"));
  // Rank padding: a 2x2 block over a 3-element row.
  EXPECT_EQ(blocked_product(L("(2,2):(1,2)"), L("3:1")), L("((2,3),(2,1)):((1,4),(2,0))"));
}

TEST(Product, CopiesOfAOnRandomLayouts) {
  Gen g(6);
  int defined = 0;
  for (int n = 0; n < 800; ++n) {
    Layout a = g.stacked(2, 16);
    Layout b = g.stacked(2, 16);
    Layout p;
    try {
      p = logical_product(a, b);
    } catch (const Error& e) {
      // B's strides must divide through complement(A): e.g. 3:2 over (4,2):(1,24).
      EXPECT_NE(std::string(e.what()).find("is not a layout"), std::string::npos) << e.what();
      continue;
    }
    ++defined;
    ASSERT_EQ(p.size(), a.size() * b.size());
    EXPECT_EQ(p.mode(0), a);
    Layout c = complement(a, a.size() * b.cosize());
    for (int64_t i = 0; i < a.size(); ++i)
      for (int64_t j = 0; j < b.size(); ++j) ASSERT_EQ(p(tup(i, j)), a(i) + c(b(j))) << p;
    EXPECT_TRUE(is_injective(p)) << a << " x " << b << " = " << p;
    if (a.cosize() == a.size() && b.cosize() == b.size()) {
      EXPECT_TRUE(is_bijection_onto_prefix(p)) << a << " x " << b << " = " << p;
    }
    // Blocked and raked products rearrange the same offsets.
    EXPECT_EQ(sorted_table(blocked_product(a, b)), sorted_table(p)) << a << " x " << b;
    EXPECT_EQ(sorted_table(raked_product(a, b)), sorted_table(p)) << a << " x " << b;
  }
  EXPECT_GT(defined, 500);
}

// ---- inverses ------------------------------------------------------------------------------

TEST(Inverse, Examples) {
  // (4,8):(8,1): the stride-1 mode 8 sits at index position 4, the stride-8 mode 4 at 1.
  EXPECT_EQ(right_inverse(L("(4,8):(8,1)")), L("(8,4):(4,1)"));
  // (2,4,2):(1,4,2) at positions (1,2,8): chain 2:1, then stride 2 (2:8), then stride 4 (4:2).
  EXPECT_EQ(right_inverse(L("(2,4,2):(1,4,2)")), L("(2,2,4):(1,8,2)"));
  EXPECT_EQ(right_inverse(L("4:2")), L("1:0"));         // never reaches offset 1
  EXPECT_EQ(right_inverse(L("(4,2):(1,8)")), L("4:1"));  // offsets 4..7 are not reached
  EXPECT_EQ(right_inverse(L("(4,8):(0,1)")), L("8:4"));  // skips the broadcast mode
  // 4:2 with complement 2:1 is (4,2):(2,1); its inverse is (2,4):(4,1).
  EXPECT_EQ(left_inverse(L("4:2")), L("(2,4):(4,1)"));
  EXPECT_EQ(left_inverse(L("(4,8):(8,1)")), L("(8,4):(4,1)"));
  expect_error([] { left_inverse(L("(4,2):(1,0)")); }, {"left_inverse", "broadcasts"});
  expect_error([] { left_inverse(L("(2,2):(1,1)")); }, {"left_inverse", "(2,2):(1,1)"});
}

TEST(Inverse, ExactOnRandomLayouts) {
  Gen g(7);
  for (int n = 0; n < 2000; ++n) {
    Layout l = g.any();
    Layout r = right_inverse(l);
    for (int64_t i = 0; i < r.size(); ++i) {
      ASSERT_LT(r(i), l.size()) << l << " " << r;
      ASSERT_EQ(l(r(i)), i) << l << " right inverse " << r;
    }
  }
  for (int n = 0; n < 1000; ++n) {
    Layout compact = g.stacked(1);
    Layout r = right_inverse(compact);
    ASSERT_EQ(r.size(), compact.size()) << compact;
    for (int64_t i = 0; i < compact.size(); ++i) ASSERT_EQ(r(compact(i)), i) << compact;

    Layout sparse = g.stacked(3);
    Layout li = left_inverse(sparse);
    for (int64_t i = 0; i < sparse.size(); ++i)
      ASSERT_EQ(li(sparse(i)), i) << sparse << " left inverse " << li;
  }
}

// ---- swizzle and banks ---------------------------------------------------------------------

TEST(Swizzle, Basics) {
  EXPECT_EQ(Swizzle(3, 0, 3)(8), 9);  // bit 3 XORed into bit 0
  EXPECT_EQ(Swizzle(3, 0, 3).mask(), 7);
  EXPECT_EQ(Swizzle(3, 2, 5).mask(), 28);
  EXPECT_EQ(Swizzle(3, 0, 3).str(), "Sw<3,0,3>");
  EXPECT_EQ(Swizzle(3, 0, 3), Swizzle(3, 0, 3));
  EXPECT_FALSE(Swizzle(3, 0, 3) == Swizzle(3, 0, 4));
  EXPECT_EQ(Swizzle()(12345), 12345);
  for (Swizzle s : {Swizzle(5, 0, 5), Swizzle(3, 2, 5), Swizzle(2, 3, 3), Swizzle(3, 0, 3)}) {
    std::set<int64_t> block;
    int64_t period = int64_t{1} << (s.base() + s.shift() + s.bits());
    for (int64_t x = 0; x < 4096; ++x) {
      EXPECT_EQ(s(s(x)), x) << s.str();
      if (x < period) block.insert(s(x));
    }
    EXPECT_EQ(static_cast<int64_t>(block.size()), period) << s.str();
    EXPECT_EQ(*block.rbegin(), period - 1) << s.str();
  }
  for (int64_t row = 0; row < 32; ++row)
    for (int64_t col = 0; col < 32; ++col)
      EXPECT_EQ(Swizzle(5, 0, 5)(32 * row + col), 32 * row + (col ^ row));
  expect_error([] { Swizzle(-1, 0, 3); }, {"swizzle", "Sw<-1,0,3>"});
  expect_error([] { Swizzle(3, -1, 3); }, {"swizzle"});
  expect_error([] { Swizzle(3, 0, 2); }, {"swizzle", "shift >= bits"});
  expect_error([] { Swizzle(40, 10, 40); }, {"swizzle", "62"});
  expect_error([] { Swizzle(3, 0, 3)(-1); }, {"swizzle", "negative"});
}

TEST(BankConflicts, TileAccessPatterns) {
  // A 32x32 f32 tile, words addressed by (row, col). The access layouts map (thread, step) to
  // the tile coordinate index row + 32*col: a column walk gives thread t row t.
  Layout column_walk = make_layout(T("(32,32)"));        // thread -> row, step -> col
  Layout row_walk = make_layout(T("(32,32)"), T("(32,1)"));  // thread -> col, step -> row
  Layout plain = make_layout_row_major(T("(32,32)"));
  Layout padded = make_layout(T("(32,32)"), T("(33,1)"));
  Swizzle sw(5, 0, 5);

  EXPECT_EQ(bank_conflict_ways(composition(plain, column_walk)), 32);  // all in one bank
  EXPECT_EQ(bank_conflict_ways(composition(plain, row_walk)), 1);
  EXPECT_EQ(bank_conflict_ways(composition(padded, column_walk)), 1);  // bank (t + c) % 32
  EXPECT_EQ(bank_conflict_ways(composition(padded, row_walk)), 1);
  EXPECT_EQ(bank_conflict_ways(composition(plain, column_walk), sw), 1);  // bank c ^ t
  EXPECT_EQ(bank_conflict_ways(composition(plain, row_walk), sw), 1);

  EXPECT_EQ(bank_conflict_ways(L("32:2")), 2);   // even banks, two words each
  EXPECT_EQ(bank_conflict_ways(L("32:0")), 1);   // one word broadcast
  EXPECT_EQ(bank_conflict_ways(L("32:1"), Swizzle(), 16), 2);
  EXPECT_EQ(bank_conflict_ways(L("(8,4):(32,1)"), Swizzle(), 32, 8), 8);  // 8-thread groups
  expect_error([] { bank_conflict_ways(L("32:1"), Swizzle(), 0); }, {"bank_conflict_ways"});
}

// ---- hardware fragments --------------------------------------------------------------------

// Checks that layout(lane, v) is element (row(lane, v), col(lane, v)) of a rows x cols matrix
// (offset row + rows*col) and that every element is owned exactly once.
void expect_fragment(const Layout& f, int64_t rows, int64_t cols, int64_t values,
                     const std::function<int64_t(int64_t, int64_t)>& row,
                     const std::function<int64_t(int64_t, int64_t)>& col) {
  ASSERT_EQ(f.mode(0).size(), 32) << f;
  ASSERT_EQ(f.mode(1).size(), values) << f;
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t v = 0; v < values; ++v) {
      int64_t off = f(tup(lane, v));
      EXPECT_EQ(off % rows, row(lane, v)) << f << " lane " << lane << " value " << v;
      EXPECT_EQ(off / rows, col(lane, v)) << f << " lane " << lane << " value " << v;
    }
  EXPECT_EQ(f.size(), rows * cols);
  EXPECT_TRUE(is_bijection_onto_prefix(f)) << f;
}

TEST(Fragments, AppleSimdgroup8x8) {
  // metile-spec §8.6, the mapping the original emitter verified on hardware.
  expect_fragment(
      simdgroup_8x8_fragment(), 8, 8, 2,
      [](int64_t l, int64_t) { return ((l & 7) >> 1) + ((l >> 4) << 2); },
      [](int64_t l, int64_t v) { return (((l & 1) << 1) | ((l & 8) >> 1)) + v; });
  // The same ownership as MLX's BaseMMAFrag::get_coord.
  expect_fragment(
      simdgroup_8x8_fragment(), 8, 8, 2,
      [](int64_t l, int64_t) { return ((l / 4) & 4) + ((l / 2) % 4); },
      [](int64_t l, int64_t v) { return ((l / 4) & 2) * 2 + (l % 2) * 2 + v; });
}

TEST(Fragments, NvidiaMmaSync) {
  // PTX ISA "Matrix Fragments for mma.m16n8k8" / "mma.m16n8k16": groupID = lane >> 2,
  // threadID_in_group = lane % 4; value v is register a_v / b_v / c_v.
  auto g = [](int64_t l) { return l >> 2; };
  auto t = [](int64_t l) { return l % 4; };
  expect_fragment(  // tf32 A 16x8: row g (+8 for a1, a3), col t (+4 for a2, a3)
      mma_m16n8k8_tf32_a(), 16, 8, 4, [&](int64_t l, int64_t v) { return g(l) + 8 * (v & 1); },
      [&](int64_t l, int64_t v) { return t(l) + 4 * (v >> 1); });
  expect_fragment(  // tf32 B 8x8 (k, n): k = t (+4 for b1), n = g
      mma_m16n8k8_tf32_b(), 8, 8, 2, [&](int64_t l, int64_t v) { return t(l) + 4 * v; },
      [&](int64_t l, int64_t) { return g(l); });
  expect_fragment(  // f16 A 16x16: row g (+8 for a2,a3,a6,a7), col 2t + (v & 1) (+8 for a4..a7)
      mma_m16n8k16_f16_a(), 16, 16, 8,
      [&](int64_t l, int64_t v) { return g(l) + 8 * ((v >> 1) & 1); },
      [&](int64_t l, int64_t v) { return 2 * t(l) + (v & 1) + 8 * (v >> 2); });
  expect_fragment(  // f16 B 16x8 (k, n): k = 2t + (v & 1) (+8 for b2, b3), n = g
      mma_m16n8k16_f16_b(), 16, 8, 4,
      [&](int64_t l, int64_t v) { return 2 * t(l) + (v & 1) + 8 * (v >> 1); },
      [&](int64_t l, int64_t) { return g(l); });
  expect_fragment(  // f32 C/D 16x8: row g (+8 for c2, c3), col 2t + (v & 1)
      mma_m16n8_f32_c(), 16, 8, 4, [&](int64_t l, int64_t v) { return g(l) + 8 * (v >> 1); },
      [&](int64_t l, int64_t v) { return 2 * t(l) + (v & 1); });
}

TEST(Layout, HeaderUsageExample) {
  Layout tile = make_layout_row_major(tup(32, 32));
  Layout tv = make_layout(tup(tup(8, 32), 4), tup(tup(128, 1), 32));
  Layout addr = composition(tile, tv);
  EXPECT_EQ(addr, L("((8,32),4):((4,32),1)"));
  for (int64_t tid = 0; tid < 256; ++tid)
    for (int64_t v = 0; v < 4; ++v) {
      int64_t row = tid / 8, col = 4 * (tid % 8) + v;
      EXPECT_EQ(addr(tup(tid, v)), 32 * row + col);
    }
  EXPECT_EQ(zipped_divide(tile, {make_layout(8), make_layout(8)}),
            L("((8,8),(4,4)):((32,1),(256,8))"));
  EXPECT_EQ(bank_conflict_ways(composition(tile, make_layout(tup(32, 32)))), 32);
}

}  // namespace
}  // namespace metile
