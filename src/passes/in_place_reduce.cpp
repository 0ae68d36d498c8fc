// Values that stay where the tile had them: the layout an axis reduction leaves its result in
// (each output where the threads holding its row or column already are, replicated over the
// lanes that combined it) and the register map that broadcasts such a value back over the tile
// without moving it between threads. The analysis enumerates the (thread, register) pairs of the
// layouts once at compile time; anything it cannot prove falls back to an exchange through
// threadgroup memory (lower_reduce.cpp).
#include "passes/in_place_reduce.h"

#include <algorithm>
#include <map>

namespace metile {

namespace {

bool power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// The CuTe layout (2,2,...,2):(s_0,s_1,...) over [0, n) equal to fn, or nothing when fn is not
// linear in the bits of its argument (or n is not a power of two).
std::optional<metile::Layout> bit_linear(int64_t n, const std::function<int64_t(int64_t)>& fn) {
  if (!power_of_two(n) || fn(0) != 0) return std::nullopt;
  std::vector<IntTuple> shape, stride;
  for (int64_t bit = 1; bit < n; bit <<= 1) {
    int64_t s = fn(bit);
    if (s < 0) return std::nullopt;
    shape.emplace_back(int64_t{2});
    stride.emplace_back(s);
  }
  if (shape.empty()) return metile::Layout(1, 0);
  metile::Layout l = make_layout(IntTuple(shape), IntTuple(stride));
  for (int64_t i = 0; i < n; ++i)
    if (l(i) != fn(i)) return std::nullopt;
  return l;
}

}  // namespace

std::optional<InPlaceReduce> plan_in_place_reduce(const gpu::Layout& in, int64_t threads,
                                                  int64_t width, const Shape& s, int axis,
                                                  int64_t outputs) {
  const int64_t regs = in.regs(), cols = s.dims[1];
  if (!in.is_tile() || in.padded || !power_of_two(threads) || !power_of_two(regs) ||
      !power_of_two(width) || in.thr.size() != threads || threads * regs > (int64_t{1} << 20))
    return std::nullopt;
  // out[t * regs + r]: the output element register r of thread t contributes to. Each element
  // must have one holder: folding a replicated layout would count copies twice.
  std::vector<int64_t> out(static_cast<size_t>(threads * regs));
  std::vector<bool> seen_element(static_cast<size_t>(in.numel), false);
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t r = 0; r < regs; ++r) {
      int64_t e = in.element(t, r);
      if (e >= in.numel || seen_element[e]) return std::nullopt;
      seen_element[e] = true;
      out[t * regs + r] = axis == 1 ? e / cols : e % cols;
    }
  auto at = [&](int64_t t, int64_t r) { return out[t * regs + r]; };
  // Registers that feed the same output in every thread fold together; the result's registers
  // are the groups in the order of thread 0's outputs.
  std::map<std::vector<int64_t>, int64_t> seen;
  std::vector<int64_t> group_of(regs);
  std::vector<std::pair<int64_t, int64_t>> order;  // (thread 0's output, first register)
  for (int64_t r = 0; r < regs; ++r) {
    std::vector<int64_t> key(threads);
    for (int64_t t = 0; t < threads; ++t) key[t] = at(t, r);
    auto [it, fresh] = seen.emplace(std::move(key), static_cast<int64_t>(order.size()));
    if (fresh) order.emplace_back(at(0, r), r);
    group_of[r] = it->second;
  }
  const int64_t groups = static_cast<int64_t>(order.size());
  std::vector<int64_t> ids(groups), rank(groups), first_reg(groups);
  for (int64_t g = 0; g < groups; ++g) ids[g] = g;
  std::sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return order[a] < order[b]; });
  for (int64_t i = 0; i < groups; ++i) {
    rank[ids[i]] = i;
    first_reg[i] = order[ids[i]].second;
  }
  auto held = [&](int64_t t, int64_t g) { return at(t, first_reg[g]); };  // g: result register
  // Thread-index bits whose flip keeps every output: lane bits combine by shuffles, simdgroup
  // bits are separate partials.
  InPlaceReduce plan;
  for (int bit = 0; (int64_t{1} << bit) < threads; ++bit) {
    bool same = true;
    for (int64_t t = 0; t < threads && same; ++t)
      for (int64_t g = 0; g < groups && same; ++g) same = held(t, g) == held(t ^ (int64_t{1} << bit), g);
    if (!same) continue;
    if ((int64_t{1} << bit) < width) plan.lane_masks.push_back(int64_t{1} << bit);
    else plan.sg_bits.push_back(bit);
  }
  // Each output must be held by exactly one orbit of threads under those flips, once per thread.
  const int64_t copies = int64_t{1} << (plan.lane_masks.size() + plan.sg_bits.size());
  std::vector<int64_t> holders(outputs, 0);
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      int64_t o = held(t, g);
      if (o < 0 || o >= outputs) return std::nullopt;
      for (int64_t g2 = 0; g2 < g; ++g2)
        if (held(t, g2) == o) return std::nullopt;
      ++holders[o];
    }
  for (int64_t n : holders)
    if (n != copies) return std::nullopt;
  // The result's layout: output held(t, g) = thr(t) + reg(g), with stride 0 on the flipped bits.
  auto thr = bit_linear(threads, [&](int64_t t) { return held(t, 0) - held(0, 0); });
  auto reg = bit_linear(groups, [&](int64_t g) { return held(0, g); });
  if (!thr || !reg) return std::nullopt;
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t g = 0; g < groups; ++g)
      if ((*thr)(t) + (*reg)(g) != held(t, g)) return std::nullopt;
  for (int64_t r = 0; r < regs; ++r) plan.fold.push_back(rank[group_of[r]]);
  plan.part = gpu::tile_layout(outputs, *thr, *reg);
  return plan;
}

std::optional<std::vector<int64_t>> gather_map(const gpu::Layout& from, const gpu::Layout& to,
                                         int64_t threads,
                                         const std::function<int64_t(int64_t)>& source) {
  if (!from.is_tile() || !to.is_tile() || from.thr.size() != threads || to.thr.size() != threads ||
      threads * (from.regs() + to.regs()) > (int64_t{1} << 20))
    return std::nullopt;
  // For thread t, which of its registers holds each source element (-1: none).
  std::vector<int64_t> where(static_cast<size_t>(from.numel), -1);
  std::vector<int64_t> map(static_cast<size_t>(to.regs()), -1);
  for (int64_t t = 0; t < threads; ++t) {
    std::fill(where.begin(), where.end(), -1);
    for (int64_t g = 0; g < from.regs(); ++g) {
      int64_t e = from.element(t, g);
      if (e < from.numel && where[e] < 0) where[e] = g;
    }
    for (int64_t r = 0; r < to.regs(); ++r) {
      int64_t e = to.element(t, r);
      if (e >= to.numel) continue;  // padding: any register serves
      int64_t src = source(e);
      if (src < 0 || src >= from.numel || where[src] < 0) return std::nullopt;
      // The same register in every thread: one map for the whole threadgroup.
      if (map[r] < 0) map[r] = where[src];
      else if (from.element(t, map[r]) != src) return std::nullopt;
    }
  }
  for (int64_t& g : map) g = std::max<int64_t>(g, 0);
  return map;
}

}  // namespace metile
