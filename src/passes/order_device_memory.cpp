// order-device-memory: a tile program runs its ops in program order (the interp device's
// semantics), but on a GPU each op is spread over the threadgroup with a layout the compiler
// chose, so a store and a later load or store of the same buffer may touch one element from two
// threads. This pass puts a barrier that orders device memory between two such accesses unless
// every thread touches exactly its own elements in both: the same pointer value (hence the same
// layout and addresses) in the same iteration, or in two iterations of a loop whose addresses
// move further per iteration than one iteration's span (Span below). A uniform store is made by
// thread 0 alone, so it is ordered before other threads' accesses. Atomics among themselves
// need no order. A conflict with what came before a loop gets its barrier before the loop. A
// TMA copy reads through the async proxy, so writes before it also need a proxy fence
// (attribute async_proxy on the barrier).
// Needs: verified GPU IR with uniform control flow (FOR is the only region). Guarantees: every
// such pair, in one iteration or across a loop's back edge, has a device barrier between them;
// nothing else changes.
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

// Whether `a`, pending, and a later `b` need a barrier between them.
bool conflict(const Access& a, const Access& b) {
  if ((a.params & b.params) == 0) return false;
  if (a.ordered) return b.async_proxy;
  if ((!a.write && !b.write) || (a.atomic && b.atomic) || (a.leader && b.leader)) return false;
  return a.key == kNoValue || a.key != b.key || a.leader != b.leader;
}

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

struct Order {
  gpu::Function& f;
  std::vector<uint64_t> params_of;
  // Copies of the ops that define values (without regions): barriers get inserted as it runs.
  std::unordered_map<ValueId, gpu::Op> def;

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

  // Whether the pointer `key` of a loop body touches disjoint addresses in every two iterations.
  bool apart(ValueId key, const gpu::Op& loop, const std::set<ValueId>& inside) const {
    auto step = def.find(loop.operands.at(2));
    if (step == def.end() || step->second.kind != GpuOpKind::CONST) return false;
    std::optional<Span> s = span(key, loop.body().args.at(0), inside);
    if (!s) return false;
    int64_t move = 0, span = 0;
    if (__builtin_mul_overflow(s->c, step->second.attr_int("value"), &move) ||
        __builtin_sub_overflow(s->hi, s->lo, &span) || move == INT64_MIN)
      return false;
    return (move < 0 ? -move : move) > span;
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

  static bool conflicts(const Pending& pending, const Access& a) {
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
  static void order_before(gpu::Block& blk, size_t& i, Pending& pending, bool async_proxy) {
    if (i == 0 || blk.ops[i - 1].kind != GpuOpKind::BARRIER) {
      gpu::Op bar;
      bar.kind = GpuOpKind::BARRIER;
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
      std::optional<Access> a = access(op);
      if (!a) continue;
      if (conflicts(pending, *a)) order_before(blk, i, pending, a->async_proxy);
      pending.insert(*a);
    }
  }

  // The body sees what came before the loop and what its own previous iteration left pending;
  // a pointer defined in the body names other addresses in the next iteration, so across the
  // back edge its accesses compare as unknown mappings. Barriers only ever get added, so the
  // walk reaches a fixed point.
  void loop(gpu::Op& op, Pending& pending) {
    std::set<ValueId> inside(op.body().args.begin(), op.body().args.end());
    gpu::walk(op.body(), [&](const gpu::Op& o) {
      inside.insert(o.results.begin(), o.results.end());
      for (const gpu::Block& r : o.regions) inside.insert(r.args.begin(), r.args.end());
    });
    Pending in = pending;
    for (;;) {
      Pending out = in;
      block(op.body(), out);
      Pending next = in;
      for (Access a : out) {
        if (inside.count(a.key) && !apart(a.key, op, inside)) a.key = kNoValue;
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
  Order o{f, gpu::param_masks(f), {}};
  gpu::walk(f.body, [&](const gpu::Op& op) {
    if (op.regions.empty())
      for (ValueId r : op.results) o.def[r] = op;
  });
  Pending pending;
  o.block(f.body, pending);
}

}  // namespace metile
