// Layout algebra after CuTe: coalesce, composition, complement, divides, products, inverses.
// Everything works on flattened mode lists; results are checked to be exact functions (no
// sorting that keeps only the image, no tabulated fallbacks).
#include <algorithm>
#include <numeric>

#include "ir/layout.h"
#include "support/error.h"

namespace metile {

using detail::checked_mul;
using detail::flat_modes;
using detail::layout_of_modes;
using detail::Mode;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::vector<Layout> modes_of(const Layout& l) {
  std::vector<Layout> out;
  for (int i = 0; i < l.rank(); ++i) out.push_back(l.mode(i));
  return out;
}

// The modes of an injective layout sorted by stride, with stride-0 and size-1 modes dropped.
// Each stride must be a multiple of the extent reached by the smaller modes; this is what makes
// the gaps between them expressible as layout modes (complement) and inverses exact.
std::vector<Mode> sorted_disjoint_modes(const Layout& a, const char* op) {
  std::vector<Mode> modes;
  for (const Mode& m : flat_modes(a))
    if (m.shape > 1 && m.stride > 0) modes.push_back(m);
  std::stable_sort(modes.begin(), modes.end(),
                   [](const Mode& x, const Mode& y) { return x.stride < y.stride; });
  int64_t current = 1;
  for (const Mode& m : modes) {
    if (m.stride < current)
      fail(METILE_ERROR_INVALID_ARGUMENT, "layout", op, ": ", a,
           " is not a disjoint stack of modes: mode ", m.shape, ":", m.stride,
           " starts inside [0, ", current, ") spanned by its smaller modes");
    if (m.stride % current != 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "layout", op, ": ", a,
           " is not a disjoint stack of modes: stride ", m.stride, " is not a multiple of ",
           current, ", the span of its smaller modes");
    current = checked_mul(m.stride, m.shape, op);
  }
  return modes;
}

// A o B, leaf by leaf. A is coalesced into a mixed radix whose last mode is unbounded (A extends
// past its size). A leaf s:d of B first divides d out of A's shape, dropping the modes it steps
// over, then takes s elements from what is left, whole modes first. Splitting B into leaves is only
// exact if A is additive over B's mode sums, i.e. adding the leaves' A-coordinates never carries
// from one mode of A into the next; `reach` sums the largest coordinate each leaf uses per mode.
class Composer {
 public:
  Composer(const Layout& a, const Layout& b) : a_(a), b_(b) {
    for (const Mode& x : flat_modes(coalesce(a)))
      if (x.shape > 1) radix_.push_back(x);
    // A's own evaluation extends its last leaf; when that leaf has size 1 coalesce dropped it, so
    // it is put back as the unbounded mode.
    Mode last_leaf = flat_modes(a).back();
    if (radix_.empty() || last_leaf.shape == 1) radix_.push_back({1, last_leaf.stride});
    reach_.assign(radix_.size(), 0);
  }

  Layout run() {
    Layout r = compose(b_);
    for (size_t i = 0; i + 1 < radix_.size(); ++i)
      if (reach_[i] >= radix_[i].shape)
        fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "composition: ", a_, " o ", b_,
             " is not a layout: the modes of B overlap in A (their coordinates in mode ",
             radix_[i].shape, ":", radix_[i].stride, " of A add up to ", reach_[i],
             "), so A is not additive over them");
    return r;
  }

 private:
  struct Piece {
    int64_t shape, stride;
    size_t source;  // index into radix_
    int64_t step;   // coordinate step in that mode of A
  };

  Layout compose(const Layout& b) {
    if (b.shape().is_int()) return leaf(b.shape().value(), b.stride().value());
    std::vector<Layout> out;
    for (int i = 0; i < b.rank(); ++i) out.push_back(compose(b.mode(i)));
    return make_layout(out);
  }

  [[noreturn]] void undefined(int64_t s, int64_t d, const std::string& why) const {
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "composition: ", a_, " o ", b_,
         " is not a layout: for mode ", s, ":", d, " of B, ", why);
  }

  Layout leaf(int64_t s, int64_t d) {
    if (s == 1) return Layout();
    if (d == 0) return Layout(s, 0);
    std::vector<Piece> divided;
    bool ends_inside = false;  // B cannot leave the last piece with an affine step
    int64_t r = d;
    size_t last = radix_.size() - 1;
    for (size_t i = 0; i < last && !ends_inside; ++i) {
      const Mode& x = radix_[i];
      if (r == 1) {
        divided.push_back({x.shape, x.stride, i, 1});
      } else if (r % x.shape == 0) {
        r /= x.shape;
      } else if (x.shape % r == 0) {
        divided.push_back({x.shape / r, checked_mul(x.stride, r, "composition"), i, r});
        r = 1;
      } else if (r < x.shape) {
        divided.push_back({ceil_div(x.shape, r), checked_mul(x.stride, r, "composition"), i, r});
        ends_inside = true;
      } else {
        undefined(s, d, cat("stride divisibility fails: ", r, " and mode ", x.shape, ":",
                            x.stride, " of A do not divide each other"));
      }
    }

    std::vector<Mode> out;
    auto take = [&](const Piece& p, int64_t count) {
      out.push_back({count, p.stride});
      if (p.source < last) reach_[p.source] += (count - 1) * p.step;
    };
    int64_t rest = s;
    for (const Piece& p : divided) {
      if (rest == 1) break;
      if (rest <= p.shape) {
        take(p, rest);
        rest = 1;
      } else if (rest % p.shape == 0) {
        take(p, p.shape);
        rest /= p.shape;
      } else {
        undefined(s, d, cat("shape divisibility fails: ", rest, " elements do not split over "
                            "mode ", radix_[p.source].shape, ":", radix_[p.source].stride, " of A"));
      }
    }
    if (rest > 1) {
      if (ends_inside) undefined(s, d, cat("stride ", d, " does not divide the modes of A it crosses"));
      out.push_back({rest, checked_mul(radix_[last].stride, r, "composition")});
    }
    return coalesce(layout_of_modes(out));
  }

  const Layout& a_;
  const Layout& b_;
  std::vector<Mode> radix_;
  std::vector<int64_t> reach_;
};

// Mode i of a transformed by f(mode, tiler[i]); modes past the tiler are kept.
template <typename F>
Layout by_mode(const Layout& a, const std::vector<Layout>& tiler, const char* op, F f) {
  if (tiler.empty() || static_cast<int>(tiler.size()) > a.rank())
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", op, ": a tiler of ", tiler.size(),
         " modes does not fit ", a, " of rank ", a.rank());
  std::vector<Layout> out;
  for (int i = 0; i < a.rank(); ++i)
    out.push_back(i < static_cast<int>(tiler.size()) ? f(a.mode(i), tiler[i]) : a.mode(i));
  return make_layout(out);
}

Layout divide_gather(const Layout& a, const std::vector<Layout>& tiler, const char* op, bool zip) {
  Layout d = by_mode(a, tiler, op, [](const Layout& m, const Layout& t) {
    return logical_divide(m, t);
  });
  std::vector<Layout> tiles, rests;
  for (int i = 0; i < d.rank(); ++i) {
    if (i < static_cast<int>(tiler.size())) {
      tiles.push_back(d.mode(i).mode(0));
      rests.push_back(d.mode(i).mode(1));
    } else {
      rests.push_back(d.mode(i));
    }
  }
  if (zip) return make_layout({make_layout(tiles), make_layout(rests)});
  rests.insert(rests.begin(), make_layout(tiles));
  return make_layout(rests);
}

Layout mode_wise_product(const Layout& a, const Layout& b, bool blocked) {
  int r = std::max(a.rank(), b.rank());
  if (r == 1) {
    Layout p = logical_product(a, b);
    return blocked ? p : make_layout({p.mode(1), p.mode(0)});
  }
  auto padded = [r](const Layout& l) {
    std::vector<Layout> m = modes_of(l);
    m.resize(r, Layout());
    return make_layout(m);
  };
  Layout pa = padded(a);
  Layout c = logical_product(pa, padded(b)).mode(1);
  std::vector<Layout> out;
  for (int i = 0; i < r; ++i)
    out.push_back(blocked ? make_layout({pa.mode(i), c.mode(i)})
                          : make_layout({c.mode(i), pa.mode(i)}));
  return make_layout(out);
}

}  // namespace

Layout coalesce(const Layout& l) {
  std::vector<Mode> out;
  for (const Mode& m : flat_modes(l)) {
    if (m.shape == 1) continue;
    if (!out.empty() && m.stride == out.back().shape * out.back().stride)
      out.back().shape *= m.shape;
    else
      out.push_back(m);
  }
  return layout_of_modes(out);
}

Layout coalesce(const Layout& l, const IntTuple& profile) {
  if (profile.is_int()) return coalesce(l);
  if (profile.rank() > l.rank())
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "coalesce: profile ", profile,
         " has more modes than ", l);
  std::vector<Layout> out;
  for (int i = 0; i < l.rank(); ++i)
    out.push_back(i < profile.rank() ? coalesce(l.mode(i), profile[i]) : l.mode(i));
  return make_layout(out);
}

Layout filter(const Layout& l) {
  std::vector<Mode> kept;
  for (const Mode& m : flat_modes(l))
    if (m.stride != 0) kept.push_back(m);
  return coalesce(layout_of_modes(kept));
}

Layout composition(const Layout& a, const Layout& b) { return Composer(a, b).run(); }

Layout composition(const Layout& a, const std::vector<Layout>& tiler) {
  return by_mode(a, tiler, "composition", [](const Layout& m, const Layout& t) {
    return composition(m, t);
  });
}

Layout with_shape(const Layout& l, const IntTuple& shape) {
  Layout target(shape);
  if (target.size() != l.size())
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "with_shape: shape ", shape, " has size ",
         target.size(), " but ", l, " has size ", l.size());
  return composition(l, target);
}

Layout complement(const Layout& a, int64_t cotarget) {
  if (cotarget < 1)
    fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "complement: cotarget ", cotarget, " of ", a,
         " is not positive");
  std::vector<Mode> out;
  int64_t current = 1;
  for (const Mode& m : sorted_disjoint_modes(a, "complement")) {
    out.push_back({m.stride / current, current});
    current = m.stride * m.shape;
  }
  out.push_back({ceil_div(cotarget, current), current});
  return coalesce(layout_of_modes(out));
}

Layout complement(const Layout& a) { return complement(a, a.cosize()); }

Layout logical_divide(const Layout& a, const Layout& tiler) {
  return composition(a, make_layout({tiler, complement(tiler, a.size())}));
}

Layout logical_divide(const Layout& a, const std::vector<Layout>& tiler) {
  return by_mode(a, tiler, "logical_divide", [](const Layout& m, const Layout& t) {
    return logical_divide(m, t);
  });
}

Layout zipped_divide(const Layout& a, const std::vector<Layout>& tiler) {
  return divide_gather(a, tiler, "zipped_divide", true);
}

Layout tiled_divide(const Layout& a, const std::vector<Layout>& tiler) {
  return divide_gather(a, tiler, "tiled_divide", false);
}

Layout logical_product(const Layout& a, const Layout& b) {
  int64_t cotarget = checked_mul(a.size(), b.cosize(), "logical_product");
  return make_layout({a, composition(complement(a, cotarget), b)});
}

Layout blocked_product(const Layout& a, const Layout& b) { return mode_wise_product(a, b, true); }

Layout raked_product(const Layout& a, const Layout& b) { return mode_wise_product(a, b, false); }

Layout right_inverse(const Layout& l) {
  std::vector<Mode> modes = flat_modes(coalesce(l));
  // Where each mode sits in L's index space: the column-major position of its coordinate.
  std::vector<int64_t> position(modes.size());
  int64_t p = 1;
  for (size_t i = 0; i < modes.size(); ++i) {
    position[i] = p;
    p *= modes[i].shape;
  }
  std::vector<size_t> order(modes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return modes[x].stride < modes[y].stride; });
  // Offsets 0..current-1 are reached exactly once by the modes taken so far; a mode extends the
  // run only if its stride is exactly current.
  std::vector<Mode> out;
  int64_t current = 1;
  for (size_t i : order) {
    if (modes[i].shape == 1 || modes[i].stride < current) continue;
    if (modes[i].stride > current) break;
    out.push_back({modes[i].shape, position[i]});
    current *= modes[i].shape;
  }
  return coalesce(layout_of_modes(out));
}

Layout left_inverse(const Layout& l) {
  for (const Mode& m : flat_modes(l))
    if (m.shape > 1 && m.stride == 0)
      fail(METILE_ERROR_INVALID_ARGUMENT, "layout", "left_inverse: ", l,
           " is not injective: mode ", m.shape, ":0 broadcasts");
  sorted_disjoint_modes(l, "left_inverse");
  // (L, complement(L)) is a bijection onto [0, n), so its right inverse is its inverse, and on
  // L's offsets that inverse returns L's own indices.
  Layout full = make_layout({l, complement(l)});
  Layout inv = right_inverse(full);
  METILE_ASSERT(inv.size() == full.size(), "left_inverse of ", l);
  return inv;
}

}  // namespace metile
