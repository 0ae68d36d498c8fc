// order-device-memory: a tile program runs its ops in program order (the interp device's
// semantics), but on a GPU each op is spread over the threadgroup with a layout the compiler
// chose, so a store and a later load or store of the same buffer may touch one element from two
// threads. This pass puts a barrier that orders device memory between two such accesses unless
// every thread touches exactly its own elements in both: the same pointer value (hence the same
// layout and addresses) in the same iteration, or in two iterations of a loop whose addresses
// move further per iteration than one iteration's span (Span below), or in such a loop and after
// it through the loop's pointer as a function of its induction variable applied to a value x
// that is the loop's start plus a multiple of its step, a power of two (same_elements below: the
// two loops whole_tiles splits a row loop into). A uniform store is made by thread 0 alone, so it
// is ordered before other threads' accesses. Atomics among themselves need no order. A conflict
// with what came before a loop gets its barrier before the loop. A TMA copy reads through the
// async proxy, so writes before it also need a proxy fence (attribute async_proxy on the barrier).
// An if's two blocks each see what came before it, and what either leaves pending is pending
// after it; a while is a loop whose turns run its before and after blocks; the blocks of a
// warp_specialize op are an if's, with their role's named barrier.
// Needs: verified GPU IR with uniform control flow (for, if and while). Guarantees: every
// such pair, in one iteration or across a loop's back edge, has a device barrier between them;
// nothing else changes.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "ir/pointer_provenance.h"
#include "passes/pass.h"
#include "target/tma.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

struct Access {
  uint64_t params = 0;     // which parameters it may touch (pointer_provenance.h)
  ValueId key = kNoValue;  // the pointer value; kNoValue: a mapping this pass cannot compare
  bool write = false;
  bool atomic = false;
  bool async_proxy = false;  // a TMA copy: the generic proxy's writes need a proxy fence first
  bool ordered = false;      // a write a device barrier ordered for every access but TMA copies
  bool leader = false;       // a write of one uniform value to one address: thread 0 makes it
  bool operator<(const Access& o) const {
    return std::tie(params, key, write, atomic, async_proxy, ordered, leader) <
           std::tie(o.params, o.key, o.write, o.atomic, o.async_proxy, o.ordered, o.leader);
  }
  bool operator==(const Access& o) const { return !(*this < o) && !(o < *this); }
};

using Pending = std::set<Access>;  // device accesses since the last barrier that orders them

// What stays pending after a barrier that orders device memory (with a fence for the async
// proxy, nothing).
void order(Pending& pending, bool async_proxy) {
  Pending left;
  if (!async_proxy)
    for (const Access& a : pending)
      if (a.write) left.insert(Access{a.params, kNoValue, true, false, false, true});
  pending = std::move(left);
}

// A loop body's pointer or index as c * iv + s + (a lane's part in [lo, hi]), where s is the
// same in every iteration and thread (uniform values defined outside the loop): two iterations
// touch disjoint addresses when |c * step| > hi - lo.
struct Span {
  int64_t c = 0, lo = 0, hi = 0;
};

// Span{c, lo, hi} from three int64 operations, none when one overflows (no proof then).
std::optional<Span> checked(int64_t a, char op_c, int64_t b, int64_t p, char op_lo, int64_t q,
                            int64_t u, char op_hi, int64_t w) {
  auto apply = [](int64_t x, char op, int64_t y, int64_t* r) {
    return op == '+' ? __builtin_add_overflow(x, y, r)
                     : op == '-' ? __builtin_sub_overflow(x, y, r) : __builtin_mul_overflow(x, y, r);
  };
  Span s;
  if (apply(a, op_c, b, &s.c) || apply(p, op_lo, q, &s.lo) || apply(u, op_hi, w, &s.hi))
    return std::nullopt;
  return s;
}

// v = coef * anchor + r modulo a power of two (coef and r reduced; coef 0: no anchor).
struct Residue {
  ValueId anchor = kNoValue;
  uint64_t coef = 0, r = 0;
  bool operator==(const Residue& o) const {
    return anchor == o.anchor && coef == o.coef && r == o.r;
  }
};

// A loop as the proofs see it (copied: barriers get inserted into its body as the pass runs).
struct Loop {
  ValueId iv = kNoValue, start = kNoValue, step = kNoValue;
  std::set<ValueId> inside;  // the values its body defines, nested bodies' included
};

gpu::Op whole_group_barrier() {
  gpu::Op bar;
  bar.kind = GpuOpKind::BARRIER;
  return bar;
}

struct Order {
  gpu::Function& f;
  std::vector<uint64_t> params_of;
  // Copies of the ops that define values (without regions): barriers get inserted as it runs.
  std::unordered_map<ValueId, gpu::Op> def;
  std::vector<Loop> loops;
  std::unordered_map<ValueId, size_t> loop_of;  // a value a loop body defines: the innermost one
  // The barrier this pass inserts: the whole group's, or in a warp_specialize block its role's
  // (the other role's threads never come to it).
  gpu::Op barrier = whole_group_barrier();

  // Fills loops and loop_of; `open`: the loops around blk, innermost last.
  void index(const gpu::Block& blk, std::vector<size_t>& open) {
    auto define = [&](ValueId v) {
      for (size_t l : open) loops[l].inside.insert(v);
      if (!open.empty()) loop_of[v] = open.back();
    };
    for (const gpu::Op& op : blk.ops) {
      for (ValueId r : op.results) define(r);
      const bool is_for = op.kind == GpuOpKind::FOR;
      if (is_for) {
        loops.push_back(Loop{op.body().args.at(0), op.operands.at(0), op.operands.at(2), {}});
        open.push_back(loops.size() - 1);
      }
      for (const gpu::Block& r : op.regions) {
        for (ValueId a : r.args) define(a);
        index(r, open);
      }
      if (is_for) open.pop_back();
    }
  }

  std::optional<int64_t> constant(ValueId v) const {
    auto it = def.find(v);
    if (it == def.end() || it->second.kind != GpuOpKind::CONST) return std::nullopt;
    return it->second.attr_int("value");
  }

  bool device(ValueId ptr) const {
    const gpu::Value& v = f.value(ptr);
    return v.is_ptr && v.space == AddrSpace::device;
  }

  // Span of v in a loop with induction variable iv whose body defines `inside`.
  std::optional<Span> span(ValueId v, ValueId iv, const std::set<ValueId>& inside,
                           int depth = 0) const {
    if (v == iv) return Span{1, 0, 0};
    // One value in every thread, the same in every iteration; a tile's lanes still differ.
    if (!inside.count(v) && f.value(v).layout == gpu::kUniform) return Span{};
    auto it = def.find(v);
    if (it == def.end() || depth > 32) return std::nullopt;
    const gpu::Op& op = it->second;
    auto at = [&](size_t i) { return span(op.operands.at(i), iv, inside, depth + 1); };
    auto invariant = [](const Span& x) { return x.c == 0 && x.lo == x.hi; };
    switch (op.kind) {
      case GpuOpKind::CONST:
        if (!is_int(f.value(v).dtype)) return std::nullopt;
        return Span{0, op.attr_int("value"), op.attr_int("value")};
      case GpuOpKind::COORD: {
        const gpu::Layout& l = f.layout_of(v);
        if (l.padded || !l.is_tile()) return std::nullopt;
        return Span{0, 0, l.numel - 1};
      }
      case GpuOpKind::SPLAT:
        return at(0);
      case GpuOpKind::ELEMENTWISE:
        break;
      default:
        return std::nullopt;
    }
    std::vector<Span> x;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      std::optional<Span> s = at(i);
      if (!s) return std::nullopt;
      x.push_back(*s);
    }
    switch (op.tile_op) {
      case OpKind::CAST:
        if (!is_int(f.value(v).dtype) || !is_int(f.value(op.operands[0]).dtype))
          return std::nullopt;
        return x[0];
      case OpKind::PTR_OFFSET:
      case OpKind::ADD:
        return checked(x[0].c, '+', x[1].c, x[0].lo, '+', x[1].lo, x[0].hi, '+', x[1].hi);
      case OpKind::SUB:
        return checked(x[0].c, '-', x[1].c, x[0].lo, '-', x[1].hi, x[0].hi, '-', x[1].lo);
      case OpKind::MUL: {
        // A literal factor scales; two iteration-invariant factors make an invariant.
        const ValueId a = op.operands[0], b = op.operands[1];
        auto literal = [&](ValueId u) {
          auto d = def.find(u);
          return d != def.end() && d->second.kind == GpuOpKind::CONST;
        };
        if (literal(b) || literal(a)) {
          const Span& s = literal(b) ? x[0] : x[1];
          const int64_t k = literal(b) ? x[1].lo : x[0].lo;
          return k >= 0 ? checked(s.c, '*', k, s.lo, '*', k, s.hi, '*', k)
                        : checked(s.c, '*', k, s.hi, '*', k, s.lo, '*', k);
        }
        if (invariant(x[0]) && invariant(x[1])) return Span{};
        return std::nullopt;
      }
      default: {
        bool all = true;
        for (const Span& s : x) all = all && invariant(s);
        if (all && has_trait(op.tile_op, kPure)) return Span{};
        return std::nullopt;
      }
    }
  }

  // Whether the pointer `key` of loop l's body touches disjoint addresses in every two iterations.
  bool apart(ValueId key, const Loop& l) const {
    std::optional<int64_t> step = constant(l.step);
    if (!step) return false;
    std::optional<Span> s = span(key, l.iv, l.inside);
    if (!s) return false;
    int64_t move = 0, span = 0;
    if (__builtin_mul_overflow(s->c, *step, &move) ||
        __builtin_sub_overflow(s->hi, s->lo, &span) || move == INT64_MIN)
      return false;
    return (move < 0 ? -move : move) > span;
  }

  // v's residue modulo mask + 1, a power of two. Integer arithmetic and casts wrap modulo 2^bits
  // of their result type, a multiple of the modulus when it is no larger; what else defines v
  // leaves v its own anchor.
  Residue residue(ValueId v, uint64_t mask, int depth = 0) const {
    const Residue leaf{v, 1, 0};
    const gpu::Value& val = f.value(v);
    const size_t bits = dtype_size(val.dtype) * 8;
    if (val.is_ptr || !is_int(val.dtype) || (bits < 64 && (mask >> bits) != 0) || depth > 32)
      return leaf;
    auto reduced = [mask](ValueId anchor, uint64_t coef, uint64_t r) {
      coef &= mask;
      return Residue{coef == 0 ? kNoValue : anchor, coef, r & mask};
    };
    if (auto l = loop_of.find(v); l != loop_of.end() && loops[l->second].iv == v) {
      // start + k * step, each step a multiple of the modulus.
      std::optional<int64_t> step = constant(loops[l->second].step);
      if (!step || (static_cast<uint64_t>(*step) & mask) != 0) return leaf;
      return residue(loops[l->second].start, mask, depth + 1);
    }
    auto it = def.find(v);
    if (it == def.end()) return leaf;
    const gpu::Op& op = it->second;
    if (op.kind == GpuOpKind::CONST)
      return reduced(kNoValue, 0, static_cast<uint64_t>(op.attr_int("value")));
    if (op.kind != GpuOpKind::ELEMENTWISE) return leaf;
    auto at = [&](size_t i) { return residue(op.operands.at(i), mask, depth + 1); };
    switch (op.tile_op) {
      case OpKind::CAST:
        return is_int(f.value(op.operands[0]).dtype) ? at(0) : leaf;
      case OpKind::ADD:
      case OpKind::SUB: {
        const Residue a = at(0), b = at(1);
        if (a.coef != 0 && b.coef != 0 && a.anchor != b.anchor) return leaf;
        const ValueId anchor = a.coef != 0 ? a.anchor : b.anchor;
        return op.tile_op == OpKind::ADD ? reduced(anchor, a.coef + b.coef, a.r + b.r)
                                         : reduced(anchor, a.coef - b.coef, a.r - b.r);
      }
      case OpKind::MUL: {
        Residue a = at(0), b = at(1);
        if (a.coef != 0) std::swap(a, b);
        if (a.coef != 0) return leaf;  // two anchors
        return reduced(b.anchor, b.coef * a.r, b.r * a.r);
      }
      default:
        return leaf;
    }
  }

  // Whether b is a's value with some x in place of loop l's induction variable: the same ops on
  // the same types and layouts over the same values from outside l (x: its first counterpart).
  bool same_function(ValueId a, ValueId b, const Loop& l, ValueId& x, int depth = 0) const {
    const gpu::Value &u = f.value(a), &w = f.value(b);
    if (u.dtype != w.dtype || u.is_ptr != w.is_ptr || u.space != w.space || u.layout != w.layout)
      return false;
    if (a == l.iv) {
      if (x == kNoValue) x = b;
      return x == b;
    }
    if (!l.inside.count(a)) return a == b;
    auto p = def.find(a), q = def.find(b);
    if (p == def.end() || q == def.end() || depth > 32) return false;
    const gpu::Op &s = p->second, &t = q->second;
    auto same_attr = [](const Attr& i, const Attr& j) {
      return i.name == j.name && i.value == j.value;
    };
    if (s.kind != t.kind || s.tile_op != t.tile_op || s.reduce != t.reduce ||
        s.builtin != t.builtin || s.results.size() != 1 || t.results.size() != 1 ||
        s.operands.size() != t.operands.size() ||
        !std::equal(s.attrs.begin(), s.attrs.end(), t.attrs.begin(), t.attrs.end(), same_attr))
      return false;
    for (size_t i = 0; i < s.operands.size(); ++i)
      if (!same_function(s.operands[i], t.operands[i], l, x, depth + 1)) return false;
    return true;
  }

  // Whether the pointers a (pending) and b (later) give each thread its own elements in both.
  // Beyond a == b: a is made in a loop whose iterations it keeps apart, and b is a's function of
  // some x that is the loop's start plus a multiple of its step (s): then x equals an iteration's
  // iv, the elements and their threads being that iteration's, or lies a nonzero multiple of s
  // from it, the addresses further apart than a's span. A power-of-two s divides 2^bits, so the
  // residues hold through wrap-around.
  bool same_elements(ValueId a, ValueId b) const {
    if (a == b) return true;
    auto in = loop_of.find(a);
    if (b == kNoValue || in == loop_of.end()) return false;
    const Loop& l = loops[in->second];
    std::optional<int64_t> step = constant(l.step);
    if (!step) return false;
    const uint64_t s = *step < 0 ? 0 - static_cast<uint64_t>(*step) : static_cast<uint64_t>(*step);
    ValueId x = kNoValue;
    return s != 0 && (s & (s - 1)) == 0 && same_function(a, b, l, x) && x != kNoValue &&
           apart(a, l) && residue(x, s - 1) == residue(l.iv, s - 1);
  }

  // Whether `a`, pending, and a later `b` need a barrier between them.
  bool conflict(const Access& a, const Access& b) const {
    if ((a.params & b.params) == 0) return false;
    if (a.ordered) return b.async_proxy;
    if ((!a.write && !b.write) || (a.atomic && b.atomic) || (a.leader && b.leader)) return false;
    return a.key == kNoValue || a.leader != b.leader || !same_elements(a.key, b.key);
  }

  std::optional<Access> access(const gpu::Op& op) const {
    auto at = [&](size_t i, bool write, bool atomic = false) -> std::optional<Access> {
      const ValueId ptr = op.operands.at(i);
      if (!device(ptr)) return std::nullopt;
      Access a{params_of[ptr], ptr, write, atomic};
      // lower_memory.cpp / lower_atomic.cpp: all operands uniform, one thread writes.
      a.leader = write && f.value(ptr).layout == gpu::kUniform &&
                 f.value(op.operands.at(i + 1)).layout == gpu::kUniform;
      return a;
    };
    switch (op.kind) {
      case GpuOpKind::LOAD:
      case GpuOpKind::VLOAD:
        return at(0, false);
      case GpuOpKind::STORE:
      case GpuOpKind::VSTORE:
        return at(0, true);
      case GpuOpKind::ATOMIC:
        return at(0, true, true);
      case GpuOpKind::ASYNC_COPY: {  // copies chunks with their own thread mapping
        std::optional<Access> a = at(1, false);
        if (a) a->key = kNoValue;
        return a;
      }
      case GpuOpKind::TMA_LOAD: {  // through the async proxy: its barrier needs a proxy fence
        std::vector<TmaMap> maps;
        uint64_t params = ~uint64_t{0};
        if (parse_tma_maps(op.attr_str("spec"), &maps) && maps.size() == 1)
          params = param_bit(static_cast<size_t>(maps[0].param));
        return Access{params, kNoValue, false, false, true};
      }
      default:
        return std::nullopt;
    }
  }

  bool conflicts(const Pending& pending, const Access& a) const {
    for (const Access& p : pending)
      if (conflict(p, a)) return true;
    return false;
  }

  // A barrier that orders the group's device memory: "memory" (this pass's), or "device" (which
  // also publishes it to other groups: split_k's tickets, user barriers in exchanging kernels).
  static bool orders(const gpu::Op& barrier) {
    return barrier.find_attr("memory") != nullptr || barrier.find_attr("device") != nullptr;
  }

  static void add_attr(gpu::Op& op, const char* name) {
    if (op.find_attr(name) == nullptr) op.attrs.push_back({name, int64_t{1}});
  }

  // A barrier that orders device memory (and fences the async proxy) before op i; the barrier
  // just before it, if there is one, gains that order. i then still names that op.
  void order_before(gpu::Block& blk, size_t& i, Pending& pending, bool async_proxy) const {
    if (i == 0 || blk.ops[i - 1].kind != GpuOpKind::BARRIER) {
      gpu::Op bar = barrier;
      bar.loc = blk.ops[i].loc;
      blk.ops.insert(blk.ops.begin() + static_cast<std::ptrdiff_t>(i), std::move(bar));
      ++i;
    }
    if (!orders(blk.ops[i - 1])) add_attr(blk.ops[i - 1], "memory");
    if (async_proxy) add_attr(blk.ops[i - 1], "async_proxy");
    order(pending, async_proxy);
  }

  void block(gpu::Block& blk, Pending& pending) {
    for (size_t i = 0; i < blk.ops.size(); ++i) {
      const gpu::Op& op = blk.ops[i];
      if (op.kind == GpuOpKind::BARRIER && orders(op)) {
        order(pending, op.find_attr("async_proxy") != nullptr);
        continue;
      }
      if (op.kind == GpuOpKind::FOR) {
        bool hazard = false, async_proxy = false;
        gpu::walk(op.body(), [&](const gpu::Op& o) {
          std::optional<Access> a = access(o);
          if (!a || !conflicts(pending, *a)) return;
          hazard = true;
          async_proxy = async_proxy || a->async_proxy;
        });
        if (hazard) order_before(blk, i, pending, async_proxy);
        loop(blk.ops[i], pending);
        continue;
      }
      if (op.kind == GpuOpKind::IF) {
        Pending other = pending;
        block(blk.ops[i].regions[0], pending);
        block(blk.ops[i].regions[1], other);
        pending.insert(other.begin(), other.end());
        continue;
      }
      if (op.kind == GpuOpKind::WHILE) {
        while_loop(blk.ops[i], pending);
        continue;
      }
      // Warp roles: as an if's blocks, each with its own barrier. Accesses of one role are not
      // ordered against the other's here: specialize_warps.cpp leaves none that conflict.
      if (op.kind == GpuOpKind::WARP_SPECIALIZE) {
        Pending other = pending;
        for (size_t r = 0; r < 2; ++r) {
          barrier = gpu::role_barrier(f, blk.ops[i], r);
          block(blk.ops[i].regions[r], r == 0 ? other : pending);
        }
        barrier = whole_group_barrier();
        pending.insert(other.begin(), other.end());
        continue;
      }
      std::optional<Access> a = access(op);
      if (!a) continue;
      if (conflicts(pending, *a)) order_before(blk, i, pending, a->async_proxy);
      pending.insert(*a);
    }
  }

  // A while: each turn runs the before block, then the after block; it ends after a before
  // block. Pointers its blocks define name other addresses in the next turn (unknown mappings
  // across the back edge, as in loop()).
  void while_loop(gpu::Op& op, Pending& pending) {
    std::set<ValueId> inside;
    for (const gpu::Block& r : op.regions) {
      inside.insert(r.args.begin(), r.args.end());
      gpu::walk(r, [&](const gpu::Op& o) {
        inside.insert(o.results.begin(), o.results.end());
        for (const gpu::Block& n : o.regions) inside.insert(n.args.begin(), n.args.end());
      });
    }
    Pending in = pending;
    for (;;) {
      Pending out = in;
      block(op.regions[0], out);
      block(op.regions[1], out);
      Pending next = in;
      for (Access a : out) {
        if (inside.count(a.key)) a.key = kNoValue;
        next.insert(a);
      }
      if (next == in) break;
      in = std::move(next);
    }
    block(op.regions[0], in);  // the last turn's before block
    pending = std::move(in);
  }

  // The body sees what came before the loop and what its own previous iteration left pending;
  // a pointer defined in the body names other addresses in the next iteration, so across the
  // back edge its accesses compare as unknown mappings. Barriers only ever get added, so the
  // walk reaches a fixed point.
  void loop(gpu::Op& op, Pending& pending) {
    const Loop& l = loops[loop_of.at(op.body().args.at(0))];
    Pending in = pending;
    for (;;) {
      Pending out = in;
      block(op.body(), out);
      Pending next = in;
      for (Access a : out) {
        if (l.inside.count(a.key) && !apart(a.key, l)) a.key = kNoValue;
        next.insert(a);
      }
      if (next == in) break;
      in = std::move(next);
    }
    pending = std::move(in);  // zero or more iterations ran
  }
};

}  // namespace

void order_device_memory(gpu::Function& f, const PassContext&) {
  Order o{f, gpu::param_masks(f), {}, {}, {}};
  gpu::walk(f.body, [&](const gpu::Op& op) {
    if (op.regions.empty())
      for (ValueId r : op.results) o.def[r] = op;
  });
  std::vector<size_t> open;
  o.index(f.body, open);
  Pending pending;
  o.block(f.body, pending);
}

}  // namespace metile
