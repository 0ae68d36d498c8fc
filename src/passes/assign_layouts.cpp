// assign_layouts: the threadgroup size, each dot's atom and warp grid, and each tile value's
// layout. Needs: verified Tile IR. Guarantees: every layout a value is given tiles its shape's
// elements over the function's threads; lowering moves elements between threads only where two
// of these layouts meet, at a reduction or a broadcast.
//
// Canonical layout. A 1-D tile of N elements, or a 2-D tile's row-major flattening, is
// blocked-cyclic: thread t owns chunks of V consecutive elements at t*V + c*threads*V, so
// consecutive threads touch consecutive memory (coalesced) and each chunk is one vector access.
// V = 4 when every thread gets a whole chunk, else smaller; on targets that ask for it
// (GpuTarget::chunk_bytes) V = 8 in programs whose narrowest tile in global memory has 16-bit
// elements, so each chunk of those is one 16-byte access (canonical_chunk). In SIMT kernels a T-element tile is
// the identity (thread i holds element i), which is how thread_id, lanes and shuffles are defined.
//
// Dots. The plan of (M x K) @ (K x N) + acc: the target's atom for the operand dtype (bf16
// without an atom of its own is widened to an exact f32 atom; a relaxed TF32 atom only under
// a dot whose precision allows it), an f32 accumulator, K a multiple of the atom's k, and a warp grid warps_m x
// warps_n (all the threadgroup's warps) that tiles M and N by whole atoms, as square as it can.
// The result takes the atom's accumulator layout tiled over that grid. Without an atom the dot
// runs as exact FMAs in the canonical layout (lower_dot.cpp).
//
// Propagation, to a fixed point: element-wise ops with an operand of the same shape in an
// assigned layout (the epilogue: bias, activation, cast), loop-carried tiles whose yielded value
// has one (the K-loop accumulator), the results of an `if` whose block yields one (attention's
// scores behind whole_tiles' branch around their mask; the walks from a dot to the reductions
// and the dot reading it pass through such an `if` too), a row or column reduction of an assigned tile (the layout
// the fragments leave it in, replicated over the lanes that combined it: an online softmax's
// statistics stay in registers), and the index math and broadcast sources feeding such ops
// (masks and offsets are made where they are used).
#include "passes/assign_layouts.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "passes/dot_choices.h"
#include "passes/in_place_reduce.h"
#include "support/error.h"

namespace metile {

namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t wanted_chunk(const Program& program, int64_t chunk_bytes);  // defined below

int64_t max_tile_numel(const Program& p) {
  int64_t n = 1;
  for (const Type& t : p.values)
    if (t.is_tile()) n = std::max(n, t.shape.numel());
  return n;
}

// warps_m x warps_n = warps tiling m x n by whole atoms, the warp tiles as square as possible.
bool warp_grid(int64_t m, int64_t n, const MatrixAtom& a, int64_t warps, int* wm, int* wn) {
  double best = -1;
  for (int64_t x = 1; x <= warps; ++x) {
    if (warps % x != 0) continue;
    int64_t y = warps / x;
    if (m % (x * a.m) != 0 || n % (y * a.n) != 0) continue;
    double skew = std::fabs(std::log2(static_cast<double>(m / x) / static_cast<double>(n / y)));
    if (best < 0 || skew < best) {
      best = skew;
      *wm = static_cast<int>(x);
      *wn = static_cast<int>(y);
    }
  }
  return best >= 0;
}

// Element-wise ops and selects (not pointer offsets): their result and operands of the same
// shape can share one layout, so assignment passes layouts through them.
bool follows_operands(OpKind k) {
  return (is_elementwise(k) || k == OpKind::SELECT) && k != OpKind::PTR_OFFSET;
}

struct Assigner {
  Assigner(const Program& program, const GpuTarget& t, const LowerOptions& o)
      : p(program), target(t), options(o) {}
  const Program& p;
  const GpuTarget& target;
  const LowerOptions& options;
  LayoutAssignment out;
  gpu::Function& f = out.function;
  std::vector<gpu::LayoutId>& assigned = out.of;
  std::vector<const Op*> producer;  // Tile IR value -> the op that defines it
  std::vector<std::vector<const Op*>> users;  // Tile IR value -> the ops that read it
  std::map<const Op*, const Op*> branch_of;  // the yield ending a block of an `if` -> the `if`

  int64_t threads();
  /** The target's chunk bytes, or 0 (chunks of 4) with METILE_GPU_OFF=wide_chunks. */
  int64_t chunk_bytes() const { return options.wide_chunks ? target.chunk_bytes : 0; }
  int64_t dot_warps() const;
  gpu::LayoutId fragment_layout(const MatrixAtom& a, int64_t m, int64_t n, int warps_m, int warps_n);
  bool give_layout(ValueId v, gpu::LayoutId l);
  bool rows_reduced(ValueId v) const;
  const Op* accumulator_source(ValueId v) const;
  bool only_broadcast(ValueId v) const;
  bool give_load_layout(ValueId v, gpu::LayoutId l);
  bool slice_layouts(const Op& o);
  /** After the fixed point: broadcasts left in the canonical layout take part in slice_layouts. */
  bool canonical_broadcasts = false;
  /** Picks the dot operands that tile_loads in the same block can copy straight to staging. */
  void direct_copies(const Block& blk);
  void run();
};

int64_t Assigner::threads() {
  const int64_t simt = p.num_threads;
  auto bad_threads = [&](metile_status st, auto&&... parts) {
    fail(st, "lower", p.name, ": ", parts..., " on ", options.device);
  };
  int64_t n = 0;
  if (simt > 0) {
    if (options.num_threads != 0 && options.num_threads != simt)
      bad_threads(METILE_ERROR_INVALID_ARGUMENT, "num_threads ", options.num_threads,
                  " differs from the kernel's SIMT thread count ", simt);
    // Whole simdgroups keep simd operations defined; threads past T hold padding.
    n = round_up(simt, target.simd_width);
  } else if (options.num_threads != 0) {
    n = options.num_threads;
    if (n % target.simd_width != 0)
      bad_threads(METILE_ERROR_INVALID_ARGUMENT, "num_threads ", n,
                  " is not a multiple of the simd width ", target.simd_width);
  } else if (options.warps_m > 0) {
    n = int64_t{options.warps_m} * options.warps_n * target.simd_width;  // the asked warp grid
  } else if (int64_t warps = dot_warps(); warps > 0) {
    n = warps * target.simd_width;  // the warp grid of the dots' matrix atoms
  } else {
    bool reduces = false;  // then the target's elements per thread (GpuTarget explains)
    walk(p.body, [&](const Op& op) { reduces = reduces || has_trait(op.kind, kReduce); });
    const int64_t per_thread = reduces ? target.reduce_elements_per_thread : wanted_chunk(p, chunk_bytes());
    n = std::clamp<int64_t>(round_up(max_tile_numel(p) / per_thread, target.simd_width),
                            target.simd_width, 256);
  }
  if (n > target.max_threads)
    bad_threads(METILE_ERROR_UNSUPPORTED, n, " threads per threadgroup exceed the limit of ",
                target.max_threads);
  return n;
}

int64_t Assigner::dot_warps() const {
  int64_t warps = 0;
  walk(p.body, [&](const Op& o) {
    if (o.kind != OpKind::DOT) return;
    const Type &a = p.type(o.operands[0]), &c = p.type(o.operands[2]);
    int64_t m = c.shape.dims[0], n = c.shape.dims[1];
    const MatrixAtom* atom =
        dot_atom(target, gpu_dot_precision(o, target, options), a.dtype, c.dtype, m, n, a.shape.dims[1]).first;
    if (atom == nullptr || m % atom->m != 0 || n % atom->n != 0) return;
    int64_t w = 1;  // up to 4 warps, a power of two, each with at least one atom
    while (w < 4 && 2 * w <= (m / atom->m) * (n / atom->n)) w *= 2;
    warps = std::max(warps, w);
  });
  return warps;
}

gpu::LayoutId Assigner::fragment_layout(const MatrixAtom& a, int64_t m, int64_t n, int warps_m,
                                        int warps_n) {
  // The atom maps (lane, value) to row + a.m * col; in the tile that is row * n + col.
  auto to_tile = [&](int64_t s) { return (s % a.m) * n + s / a.m; };
  std::vector<IntTuple> ts, td, rs, rd;
  append_atom_mode(a.c.mode(0), to_tile, ts, td);
  int64_t wtm = m / warps_m, wtn = n / warps_n;
  ts.emplace_back(int64_t{warps_m});
  td.emplace_back(wtm * n);
  ts.emplace_back(int64_t{warps_n});
  td.emplace_back(wtn);
  append_atom_mode(a.c.mode(1), to_tile, rs, rd);
  rs.emplace_back(wtm / a.m);
  rd.emplace_back(a.m * n);
  rs.emplace_back(wtn / a.n);
  rd.emplace_back(int64_t{a.n});
  return f.add_layout(gpu::tile_layout(m * n, make_layout(IntTuple(ts), IntTuple(td)),
                                       make_layout(IntTuple(rs), IntTuple(rd))));
}

bool Assigner::give_layout(ValueId v, gpu::LayoutId l) {
  if (assigned[v] != gpu::kUniform || !p.type(v).is_tile() || p.type(v).is_ptr) return false;
  assigned[v] = l;
  return true;
}

// Whether tile value v, through element-wise ops, reaches a reduction along its rows.
bool Assigner::rows_reduced(ValueId v) const {
  std::vector<ValueId> todo{v};
  std::vector<bool> seen(p.values.size(), false);
  while (!todo.empty()) {
    ValueId x = todo.back();
    todo.pop_back();
    if (seen[x]) continue;
    seen[x] = true;
    for (const Op* u : users[x]) {
      if (has_trait(u->kind, kReduce) && u->attr_int("axis") == 1) return true;
      if (follows_operands(u->kind) && p.type(u->result()).shape == p.type(v).shape)
        todo.push_back(u->result());
      if (auto b = branch_of.find(u); b != branch_of.end())  // yielded: the `if`'s result
        for (size_t i = 0; i < u->operands.size(); ++i)
          if (u->operands[i] == x) todo.push_back(b->second->results[i]);
    }
  }
  return false;
}

// The one dot whose result tile v is an element-wise function of, through element-wise ops of
// v's shape (attention's P of its scores), else nullptr: v then lies in that dot's accumulator
// layout, which a warpgroup dot may read A from in registers (dot_choices.cpp).
const Op* Assigner::accumulator_source(ValueId v) const {
  const Op* dot = nullptr;
  std::vector<ValueId> todo{v};
  std::vector<bool> seen(p.values.size(), false);
  while (!todo.empty()) {
    ValueId x = todo.back();
    todo.pop_back();
    if (seen[x] || p.type(x).shape != p.type(v).shape) continue;
    seen[x] = true;
    const Op* d = producer[x];
    if (d == nullptr) continue;
    if (d->kind == OpKind::DOT) {
      if (dot != nullptr && dot != d) return nullptr;
      dot = d;
    } else if (follows_operands(d->kind)) {
      for (ValueId y : d->operands) todo.push_back(y);
    } else if (d->kind == OpKind::IF) {  // what either block yields (whole_tiles' guarded masks)
      for (size_t i = 0; i < d->results.size(); ++i)
        if (d->results[i] == x)
          for (const Block& r : d->regions) todo.push_back(r.ops.back().operands[i]);
    }
  }
  return dot;
}

// Whether every use of tile v ends, through element-wise ops and reshapes, in a broadcast that
// adds elements: then v need only exist where the broadcast's threads read it.
bool Assigner::only_broadcast(ValueId v) const {
  if (users[v].empty()) return false;
  for (const Op* u : users[v]) {
    if (u->kind == OpKind::BROADCAST && p.type(u->result()).shape.numel() > p.type(v).shape.numel()) continue;
    // A transpose nothing reads is not lowered (lower_scan.cpp): one that a later trans()
    // cancelled in the builder (dot_scaled's decode of bytes transposed from an N x K load).
    if (u->kind == OpKind::TRANS && users[u->result()].empty()) continue;
    const bool passes = u->kind == OpKind::RESHAPE ||
                        (follows_operands(u->kind) && p.type(u->result()).shape == p.type(v).shape);
    if (!passes || !only_broadcast(u->result())) return false;
  }
  return true;
}

// A pointer load's layout is its pointers' (lowering loads where the addresses are): its address
// chain (tiles of pointers read by nothing else) and the tile offsets, mask and fill in it that
// are index math take the layout too.
bool Assigner::give_load_layout(ValueId v, gpu::LayoutId l) {
  const Op& load = *producer[v];
  const Shape& shape = p.type(v).shape;
  std::vector<const Op*> chain;
  for (ValueId ptr = load.operands[0]; p.type(ptr).is_tile();) {
    const Op* d = producer[ptr];
    if (d == nullptr || d->kind != OpKind::PTR_OFFSET || users[ptr].size() != 1 ||
        assigned[ptr] != gpu::kUniform || p.type(ptr).shape != shape)
      return false;
    chain.push_back(d);
    ptr = d->operands[0];
  }
  if (chain.empty() || assigned[v] != gpu::kUniform) return false;
  auto index_math = [&](ValueId x) {
    const Op* d = producer[x];
    return p.type(x).is_tile() && !p.type(x).is_ptr && p.type(x).shape == shape && d != nullptr &&
           (d->kind == OpKind::BROADCAST || d->kind == OpKind::ARANGE || follows_operands(d->kind));
  };
  for (const Op* d : chain) {
    assigned[d->result()] = l;
    for (ValueId x : d->operands)
      if (index_math(x)) give_layout(x, l);
  }
  for (size_t i = 1; i < load.operands.size(); ++i)
    if (index_math(load.operands[i])) give_layout(load.operands[i], l);
  return give_layout(v, l);
}

// One propagation step for reductions, broadcasts and index math: whether it assigned a layout.
bool Assigner::slice_layouts(const Op& o) {
  bool changed = false;
  // A row or column reduction of an assigned tile: its outputs where the tile's threads hold them.
  // A tile in its canonical layout whose reduced axis lies within simdgroups likewise: its
  // statistics stay where the lanes combined them instead of going back to the canonical layout.
  if (has_trait(o.kind, kReduce) && o.attr_int("axis") != -1 && p.type(o.operands[0]).is_tile()) {
    const Shape& s = p.type(o.operands[0]).shape;
    const gpu::LayoutId from = assigned[o.operands[0]] != gpu::kUniform
        ? assigned[o.operands[0]] : f.add_layout(canonical_layout(s.numel(), f.threads, p.num_threads, out.chunk));
    std::optional<InPlaceReduce> plan = plan_in_place_reduce(
        f.layout(from), f.threads, f.simd_width, s,
        static_cast<int>(o.attr_int("axis")), p.type(o.result()).shape.numel());
    if (plan && plan->sg_bits.empty()) changed = give_layout(o.result(), f.add_layout(plan->part)) || changed;
  }
  // Index math (aranges, element-wise ops, broadcasts) feeding an element-wise op of an assigned
  // layout is computed in that layout: masks and offsets are made where they are used. So is a
  // tile loaded only to be broadcast (a row's scale, a vector against a block): each thread reads
  // the elements it needs, repeated addresses hitting in cache, where one thread an element and
  // an exchange through threadgroup memory cost two barriers every time it is used.
  auto computed = [&](ValueId x) {
    const Op* d = producer[x];
    return d != nullptr && (d->kind == OpKind::BROADCAST || d->kind == OpKind::ARANGE ||
                            follows_operands(d->kind) ||
                            (options.broadcast_loads && (d->kind == OpKind::TILE_LOAD || d->kind == OpKind::LOAD) &&
                             only_broadcast(x)));
  };
  auto give = [&](ValueId x, gpu::LayoutId l) {
    const Op* d = producer[x];
    return d != nullptr && d->kind == OpKind::LOAD ? give_load_layout(x, l) : give_layout(x, l);
  };
  if (follows_operands(o.kind) && !o.results.empty() && assigned[o.result()] != gpu::kUniform) {
    for (ValueId x : o.operands) {
      ValueId src = x;  // through reshapes (cols[None, :]): they keep the order a layout maps
      while (producer[src] != nullptr && producer[src]->kind == OpKind::RESHAPE)
        src = producer[src]->operands[0];
      if (computed(src) && p.type(x).shape == p.type(o.result()).shape)
        changed = give(src, assigned[o.result()]) || changed;
    }
  }
  // A broadcast made in a tile layout: its source (through reshapes) is computed where the
  // tile's threads need it, the layout a reduction over the broadcast axis would leave. Once the
  // fixed point is reached, broadcasts still in the canonical layout do the same.
  gpu::LayoutId to_l = o.kind != OpKind::BROADCAST ? gpu::kUniform : assigned[o.result()];
  if (o.kind == OpKind::BROADCAST && to_l == gpu::kUniform && canonical_broadcasts)
    to_l = f.add_layout(canonical_layout(p.type(o.result()).shape.numel(), f.threads, p.num_threads, out.chunk));
  if (to_l != gpu::kUniform) {
    const Shape &to = p.type(o.result()).shape, &from = p.type(o.operands[0]).shape;
    ValueId src = o.operands[0];
    while (producer[src] != nullptr && producer[src]->kind == OpKind::RESHAPE) src = producer[src]->operands[0];
    if (to.rank == 2 && from.numel() != to.numel() && computed(src) &&
        (from.rank == 1 || from.dims[0] == 1 || from.dims[1] == 1)) {
      const int axis = from.rank == 2 && from.dims[1] == 1 ? 1 : 0;  // the axis the source lacks
      std::optional<InPlaceReduce> plan = plan_in_place_reduce(
          f.layout(to_l), f.threads, f.simd_width, to, axis, from.numel());
      if (plan && p.type(src).shape.numel() == from.numel())
        changed = give(src, f.add_layout(plan->part)) || changed;
    }
  }
  return changed;
}

void Assigner::direct_copies(const Block& blk) {
  std::map<ValueId, size_t> loaded;  // tile_load result -> its position in blk
  for (size_t j = 0; j < blk.ops.size(); ++j) {
    const Op& o = blk.ops[j];
    for (const Block& r : o.regions) direct_copies(r);
    if (o.kind == OpKind::TILE_LOAD) loaded[o.result()] = j;
    if (o.kind != OpKind::DOT) continue;
    DotChoice& plan = out.dots.at(&o);
    const Shape& cs = p.type(o.operands[2]).shape;
    const int64_t k = p.type(o.operands[0]).shape.dims[1];
    plan.kc = dot_chunk(target, plan, cs.dims[0], cs.dims[1], k);
    if (!options.async_copy || plan.atom == nullptr || plan.kc != k) continue;
    const int64_t vec = 16 / static_cast<int64_t>(dtype_size(plan.stage));
    for (int i = 0; i < 2; ++i) {
      ValueId v = o.operands[i];
      // B = trans(tile_load), its only reader: the load is copied as it is (lower_trans_operand.cpp).
      const Op* tr = producer[v];
      const bool kmajor = i == 1 && tr != nullptr && tr->kind == OpKind::TRANS && users[v].size() == 1 &&
                          kmajor_b_fits(options, plan, k);
      if (kmajor) v = tr->operands[0];
      auto at = loaded.find(v);
      if (at == loaded.end() || users[v].size() != 1) continue;
      const Type& t = p.type(v);
      if (t.dtype != plan.stage || t.shape.dims[1] % vec != 0) continue;
      bool moves = true;  // nothing between the load and the dot writes memory
      for (size_t x = at->second + 1; x < j; ++x) moves = moves && writes_no_memory(blk.ops[x]);
      if (!moves) continue;
      plan.direct[i] = &blk.ops[at->second];
      plan.b_kmajor = plan.b_kmajor || kmajor;
    }
  }
}

void Assigner::run() {
  f.name = p.name;
  f.simd_width = target.simd_width;
  f.threads = static_cast<int>(threads());
  out.chunk = canonical_chunk(p, chunk_bytes(), f.threads);
  assigned.assign(p.values.size(), gpu::kUniform);
  producer.assign(p.values.size(), nullptr);
  users.assign(p.values.size(), {});
  walk(p.body, [&](const Op& d) {
    for (ValueId r : d.results) producer[r] = &d;
    for (ValueId x : d.operands) users[x].push_back(&d);
    if (d.kind == OpKind::IF)
      for (const Block& r : d.regions) branch_of[&r.ops.back()] = &d;
  });
  int64_t warps = f.threads / f.simd_width;
  // Rows reduced later (attention's scores) stay within one warp: shuffles, no partials; every
  // dot of that height splits its rows the same way, so the row statistics meet in registers.
  std::set<int64_t> whole_rows;
  walk(p.body, [&](const Op& o) {
    if (o.kind == OpKind::DOT && rows_reduced(o.result())) whole_rows.insert(p.type(o.result()).shape.dims[0]);
  });
  walk(p.body, [&](const Op& o) {
    if (o.kind != OpKind::DOT) return;
    const Type &a = p.type(o.operands[0]), &c = p.type(o.operands[2]);
    DotChoice plan;
    const DotPrecision precision = gpu_dot_precision(o, target, options);
    auto [atom, stage] = dot_atom(target, precision, a.dtype, c.dtype, c.shape.dims[0],
                                  c.shape.dims[1], a.shape.dims[1]);
    plan.stage = stage;
    plan.tf32x3 = atom != nullptr && atom->relaxed && precision == DotPrecision::tf32x3;
    if (atom != nullptr && options.warps_m > 0) {  // the asked grid, or an error naming it
      const int64_t m = c.shape.dims[0], n = c.shape.dims[1];
      if (int64_t{options.warps_m} * options.warps_n != warps)
        fail(METILE_ERROR_INVALID_ARGUMENT, "lower", p.name, ": warps_m ", options.warps_m, " x warps_n ",
             options.warps_n, " warps, but the kernel runs ", warps, " (num_threads ", f.threads, ") on ",
             options.device);
      if (m % (options.warps_m * atom->m) != 0 || n % (options.warps_n * atom->n) != 0)
        fail(METILE_ERROR_INVALID_ARGUMENT, "lower", p.name, ": warps_m ", options.warps_m, " x warps_n ",
             options.warps_n, " does not tile the ", m, "x", n, " dot by whole ", atom->m, "x", atom->n,
             " atoms on ", options.device);
      plan.warps_m = options.warps_m;
      plan.warps_n = options.warps_n;
    }
    if (atom != nullptr &&
        (options.warps_m > 0 ||
         warp_grid(c.shape.dims[0], c.shape.dims[1], *atom, warps, &plan.warps_m, &plan.warps_n))) {
      plan.atom = atom;
      // The whole-rows rule is the compiler's own choice: an asked grid is kept as asked (its
      // row statistics then combine partials across warps, slower but exact).
      if (options.warps_m == 0 && plan.warps_n > 1 && c.shape.dims[0] % (warps * atom->m) == 0 &&
          whole_rows.count(c.shape.dims[0])) {
        plan.warps_m = static_cast<int>(warps);
        plan.warps_n = 1;
      }
      plan.acc = fragment_layout(*atom, c.shape.dims[0], c.shape.dims[1], plan.warps_m, plan.warps_n);
      assigned[o.result()] = plan.acc;
    }
    out.dots[&o] = plan;
  });
  direct_copies(p.body);
  walk(p.body, [&](const Op& o) {
    // An asked warp grid is one of the warp-level atoms. A dot's A source comes first in the
    // walk, its choice made.
    if (o.kind != OpKind::DOT || options.warps_m != 0) return;
    const Op* src = accumulator_source(o.operands[0]);
    if (choose_warpgroup_atom(p, o, target, options, rows_reduced(o.result()),
                              src ? &out.dots.at(src) : nullptr, f, out.dots.at(&o)))
      assigned[o.result()] = out.dots.at(&o).acc;
  });
  // Forward propagation to a fixed point: epilogues and loop-carried accumulators; then once more
  // with the broadcasts left canonical.
  for (bool changed = true; changed || !canonical_broadcasts;) {
    if (!changed) canonical_broadcasts = true;
    changed = false;
    walk(p.body, [&](const Op& o) {
      changed = slice_layouts(o) || changed;
      if (follows_operands(o.kind) && !o.results.empty()) {
        const Type& rt = p.type(o.result());
        for (ValueId x : o.operands)
          if (assigned[x] != gpu::kUniform && p.type(x).shape == rt.shape)
            changed = give_layout(o.result(), assigned[x]) || changed;
      }
      if (o.kind == OpKind::FOR) {
        const Block& body = o.body();
        const Op& y = body.ops.back();
        for (size_t i = 0; i < o.results.size() && i < y.operands.size(); ++i)
          if (assigned[y.operands[i]] != gpu::kUniform) {
            changed = give_layout(body.args[1 + i], assigned[y.operands[i]]) || changed;
            changed = give_layout(o.results[i], assigned[y.operands[i]]) || changed;
          }
      }
      if (o.kind == OpKind::IF)  // both blocks yield into the result's registers
        for (const Block& r : o.regions)
          for (size_t i = 0; i < o.results.size(); ++i)
            if (assigned[r.ops.back().operands[i]] != gpu::kUniform)
              changed = give_layout(o.results[i], assigned[r.ops.back().operands[i]]) || changed;
    });
  }
}

}  // namespace

int64_t dot_chunk(const GpuTarget& target, const DotChoice& plan, int64_t m, int64_t n, int64_t k) {
  const int64_t elem = static_cast<int64_t>(dtype_size(plan.stage)), pad = staging_pad(plan.stage);
  const int64_t step = plan.atom != nullptr ? plan.atom->k : 1;
  const bool acc_array = plan.atom != nullptr && plan.atom->acc_through_threadgroup;
  const uint64_t acc_bytes = acc_array ? static_cast<uint64_t>(m * n) * 4 : 0;
  auto bytes = [&](int64_t c) {
    return static_cast<uint64_t>((m * (c + pad) + c * (n + pad)) * elem) + acc_bytes;
  };
  int64_t kc = k;
  while (bytes(kc) > target.threadgroup_memory_bytes / 2 && kc % 2 == 0 && (kc / 2) % step == 0)
    kc /= 2;
  return kc;
}

DotPrecision gpu_dot_precision(const Op& dot, const GpuTarget& target, const LowerOptions& options) {
  const DotPrecision p = metile::dot_precision(dot, options.dot_default);
  return p == DotPrecision::device_default ? target.dot_default : p;
}

std::pair<const MatrixAtom*, DType> dot_atom(const GpuTarget& target, DotPrecision precision, DType ab,
                                             DType acc, int64_t m, int64_t n, int64_t k) {
  if (acc != DType::f32) return {nullptr, ab};
  // The accumulator array plus the smallest staging (one atom's k) within 3/4 of the memory.
  auto acc_fits = [&](const MatrixAtom& a) {
    const int64_t elem = static_cast<int64_t>(dtype_size(a.ab)), pad = staging_pad(a.ab);
    const int64_t need = m * n * 4 + (m * (a.k + pad) + a.k * (n + pad)) * elem;
    return static_cast<uint64_t>(need) <= target.threadgroup_memory_bytes / 4 * 3;
  };
  // A relaxed (TF32) atom: for "tf32", and for "tf32x3" where its emitter splits the operands.
  auto allows = [&](const MatrixAtom& a) {
    return precision == DotPrecision::tf32 || (precision == DotPrecision::tf32x3 && a.splits);
  };
  auto find = [&](DType want) -> const MatrixAtom* {
    for (Atom id : target.matrix_atoms)
      if (const MatrixAtom& a = matrix_atom(id); a.ab == want && a.acc == DType::f32 && k % a.k == 0 &&
          (!a.relaxed || allows(a)) && (want == ab || !a.relaxed) && (!a.acc_through_threadgroup || acc_fits(a)))
        return &a;
    return nullptr;
  };
  // FP8 (cuda, where the fp8_dots Tile IR pass leaves dots to lowering): the operands stage as
  // their exact f16 values (stage() casts them) unless choose_warpgroup_atom takes an FP8 atom.
  if (is_f8(ab)) return {find(DType::f16), DType::f16};
  if (const MatrixAtom* a = find(ab)) return {a, ab};
  if (ab == DType::bf16)
    if (const MatrixAtom* a = find(DType::f32)) return {a, DType::f32};
  return {nullptr, ab};
}

void append_atom_mode(const metile::Layout& mode, const std::function<int64_t(int64_t)>& to_tile,
                      std::vector<IntTuple>& shape, std::vector<IntTuple>& stride) {
  metile::Layout flat = flatten(mode);
  std::vector<int64_t> sizes = flat.shape().leaves(), strides = flat.stride().leaves();
  for (size_t i = 0; i < sizes.size(); ++i) {
    shape.emplace_back(sizes[i]);
    stride.emplace_back(to_tile(strides[i]));
  }
}

int64_t staging_pad(DType t) { return std::max<int64_t>(1, 16 / static_cast<int64_t>(dtype_size(t))); }

gpu::Layout canonical_layout(int64_t n, int64_t threads, int64_t simt, int64_t chunk) {
  int64_t v = 1;
  if (!(simt > 0 && n == simt))  // SIMT kernels: T elements are the identity whatever the rank
    for (int64_t w = chunk; w >= 2; w /= 2)
      if (n % w == 0 && n >= threads * w) {
        v = w;
        break;
      }
  int64_t chunks = (n + threads * v - 1) / (threads * v);
  return gpu::tile_layout(n, make_layout(threads, v), make_layout(tup(v, chunks), tup(1, threads * v)));
}

namespace {

// Calls see(type) for each tile a load or store moves between registers and global memory.
template <class F>
void each_memory_tile(const Program& program, F see) {
  auto tile = [&](const Type& t) {
    if (t.is_tile() && (t.is_ptr ? t.space == AddrSpace::device : t.dtype != DType::boolean)) see(t);
  };
  walk(program.body, [&](const Op& o) {
    if (o.kind != OpKind::LOAD && o.kind != OpKind::STORE && o.kind != OpKind::TILE_LOAD &&
        o.kind != OpKind::TILE_STORE)
      return;
    for (ValueId v : o.operands) tile(program.type(v));
    for (ValueId v : o.results) tile(program.type(v));
  });
}

// The chunk the narrowest memory tile's dtype asks for, before the thread count is known.
int64_t wanted_chunk(const Program& program, int64_t chunk_bytes) {
  if (chunk_bytes == 0) return 4;
  int64_t narrowest = 0;
  each_memory_tile(program, [&](const Type& t) {
    int64_t s = static_cast<int64_t>(dtype_size(t.dtype));
    narrowest = narrowest == 0 ? s : std::min(narrowest, s);
  });
  return narrowest == 0 ? 4 : std::clamp<int64_t>(chunk_bytes / narrowest, 4, 8);
}

}  // namespace

int64_t canonical_chunk(const Program& program, int64_t chunk_bytes, int64_t threads) {
  int64_t chunk = wanted_chunk(program, chunk_bytes);
  // Every memory tile with whole chunks of 4 for every thread must take the wider chunk: one
  // left with 4 (a row broadcast against a block) would meet the block's chunks of 8 only
  // through threadgroup memory, where with 4 everywhere its elements sit in the threads that
  // use them. (Smaller tiles have narrower chunks whatever this choice.)
  each_memory_tile(program, [&](const Type& t) {
    int64_t n = t.shape.numel();
    if (n % (threads * 4) == 0 && n % (threads * chunk) != 0) chunk = 4;
  });
  return chunk;
}

LayoutAssignment assign_layouts(const Program& program, const GpuTarget& target,
                                const LowerOptions& options) {
  Assigner a(program, target, options);
  a.run();
  return std::move(a.out);
}

std::string print_layouts(const Program& program, const LayoutAssignment& layouts) {
  const gpu::Function& f = layouts.function;
  auto layout_text = [&](ValueId v) -> std::string {
    const Type& t = program.type(v);
    if (!t.is_tile()) return "uniform";
    gpu::LayoutId l = layouts.of.at(v);
    return l != gpu::kUniform ? cat("#", l, " ", f.layout(l).str())
                              : canonical_layout(t.shape.numel(), f.threads, program.num_threads,
                                                 layouts.chunk).str();
  };
  OpNote note = [&](const Op& op) {
    std::vector<ValueId> vs = op.results;
    if (op.kind == OpKind::FOR) vs.assign(op.body().args.begin() + 1, op.body().args.end());
    std::string s;
    for (ValueId v : vs)
      if (program.type(v).is_tile()) s += (s.empty() ? "" : "; ") + layout_text(v);
    if (auto d = layouts.dots.find(&op); d != layouts.dots.end()) {
      const DotChoice& c = d->second;
      s += c.atom == nullptr ? cat(" (fma, ", dtype_name(c.stage), ")")
                             : cat(" (", atom_kind_name(c.atom->kind), " ", c.atom->m, "x", c.atom->n, "x", c.atom->k,
                                   " ", dtype_name(c.stage), ", warps ", c.warps_m, "x", c.warps_n, ")");
    }
    return s;
  };
  return cat("// threads ", f.threads, ", simd width ", f.simd_width, "\n", print(program, false, note));
}

std::string assign_layouts_on_text(std::string_view tile_ir, const GpuTarget& target,
                                   const LowerOptions& options) {
  Program p = parse(tile_ir);
  return print_layouts(p, assign_layouts(p, target, options));
}

}  // namespace metile
