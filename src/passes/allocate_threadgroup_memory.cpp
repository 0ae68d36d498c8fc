// allocate-threadgroup-memory: gives every alloc its byte offset in the threadgroup's memory
// (the `offset` attribute the emitters read) and checks the total against the target's limit.
// Needs: verified GPU IR whose allocs say what they hold (gpu::SharedArray). Guarantees: each
// array starts at a multiple of its alignment (1024 bytes for the warpgroup/TMA swizzles, 16
// otherwise); arrays that are live at the same time never overlap; nothing else changes unless
// arrays share memory (below), or the kernel's cancel_points are removed where only the
// threadgroup memory their check takes (GpuTarget::cancel_threadgroup_bytes) is over the limit.
// Runs last: a later pass that added or removed an array would leave offsets stale.
//
// The plain placement puts the arrays one after another, the most aligned first, then in IR order.
// It is what every kernel that fits gets, so its memory and occupancy stay as tuned. Only a kernel
// over the limit, on a target whose arrays are offsets into one block
// (GpuTarget::threadgroup_arrays_alias; Metal binds each array as an argument of its own), gets the
// packed placement: arrays whose live ranges (the top-level ops that use them or a pointer derived
// from them) do not overlap may share bytes, so an epilogue's arrays reuse the K loop's stages. The
// later array's first writes must not overtake the earlier one's last reads by other threads or
// in-flight copies: an array written by async_copy may be reused only after an async_wait
// {pending=0}, one a warpgroup mma reads only after a warpgroup_sync, and an array TMA writes or
// that holds mbarriers never; a barrier between them is inserted where none is.
#include <algorithm>
#include <map>

#include "passes/pass.h"
#include "support/error.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

struct Array {
  gpu::Op* op = nullptr;
  size_t order = 0;  // in the IR
  gpu::SharedArray a;
  uint64_t bytes = 0, align = 16;
  int64_t first = -1, last = -1;  // top-level ops that use it (-1: none)
  bool async_copied = false, warpgroup_read = false, pinned = false;  // pinned: never shares bytes
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Which arrays each threadgroup pointer may point into (bit i: arrays[i]), following derived
// pointers (ptr_offset, select) and loop-carried ones until nothing changes.
std::vector<uint64_t> roots(const gpu::Function& f, const std::map<ValueId, size_t>& index) {
  std::vector<uint64_t> r(f.values.size(), 0);
  for (const auto& [v, i] : index) r[v] = uint64_t{1} << i;
  for (bool changed = true; changed;) {
    changed = false;
    auto add = [&](ValueId to, uint64_t bits) {
      if ((r[to] | bits) != r[to]) r[to] |= bits, changed = true;
    };
    gpu::walk(f.body, [&](const gpu::Op& op) {
      uint64_t in = 0;
      for (ValueId o : op.operands) in |= r[o];
      if (op.kind == GpuOpKind::FOR) {
        const gpu::Block& body = op.body();
        const std::vector<ValueId>& next = body.ops.back().operands;  // the yield
        for (size_t i = 0; i + 3 < op.operands.size(); ++i) {
          uint64_t bits = r[op.operands[i + 3]] | (i < next.size() ? r[next[i]] : 0);
          add(body.args[i + 1], bits);
          add(op.results[i], bits);
        }
        return;
      }
      if (in == 0) return;
      for (ValueId res : op.results)
        if (f.value(res).is_ptr && f.value(res).space == AddrSpace::threadgroup) add(res, in);
    });
  }
  return r;
}

// Fills first/last and the kinds of access that outlive an op (see the header comment).
void live_ranges(const gpu::Function& f, std::vector<Array>& arrays, const std::map<ValueId, size_t>& index) {
  const std::vector<uint64_t> r = roots(f, index);
  for (size_t t = 0; t < f.body.ops.size(); ++t) {
    gpu::Block one;  // the top-level op t and what it nests
    one.ops.push_back(f.body.ops[t]);
    gpu::walk(one, [&](const gpu::Op& op) {
      if (op.kind == GpuOpKind::ALLOC) return;
      for (size_t k = 0; k < op.operands.size(); ++k) {
        uint64_t bits = r[op.operands[k]];
        for (size_t i = 0; bits != 0; ++i, bits >>= 1) {
          if (!(bits & 1)) continue;
          Array& a = arrays[i];
          if (a.first < 0) a.first = static_cast<int64_t>(t);
          a.last = static_cast<int64_t>(t);
          a.async_copied |= op.kind == GpuOpKind::ASYNC_COPY && k == 0;
          a.warpgroup_read |= op.kind == GpuOpKind::MMA && atom_kind_threads(mma_atom_kind(op)) > 32;
          a.pinned |= op.kind == GpuOpKind::TMA_LOAD || op.kind == GpuOpKind::MBAR_INIT ||
                      op.kind == GpuOpKind::MBAR_WAIT || op.kind == GpuOpKind::MBAR_ARRIVE;
        }
      }
    });
  }
}

// `op` is `kind`, with pending=0 where it is a wait.
bool is_drain(const gpu::Op& op, GpuOpKind kind) {
  if (op.kind != kind) return false;
  return kind != GpuOpKind::ASYNC_WAIT || op.attr_int("pending") == 0;
}

bool found_between(const gpu::Block& b, int64_t from, int64_t to, GpuOpKind kind) {
  for (int64_t t = from + 1; t < to; ++t)
    if (is_drain(b.ops[static_cast<size_t>(t)], kind)) return true;
  return false;
}

// Whether `later` may take bytes of `earlier` (earlier's uses all before later's).
bool may_follow(const gpu::Block& b, const Array& earlier, const Array& later) {
  if (earlier.pinned || later.pinned || earlier.last < 0 || later.first < 0) return false;
  if (earlier.last >= later.first) return false;
  if (earlier.async_copied && !found_between(b, earlier.last, later.first, GpuOpKind::ASYNC_WAIT))
    return false;
  if (earlier.warpgroup_read && !found_between(b, earlier.last, later.first, GpuOpKind::WARPGROUP_SYNC))
    return false;
  return true;
}

bool disjoint(const gpu::Block& b, const Array& x, const Array& y) {
  return may_follow(b, x, y) || may_follow(b, y, x);
}

// Lowest aligned offset for `a` clear of every placed array it may not share bytes with.
uint64_t first_fit(const gpu::Block& b, const Array& a, const std::vector<const Array*>& placed) {
  uint64_t at = 0;
  for (bool moved = true; moved;) {
    moved = false;
    at = align_up(at, a.align);
    for (const Array* p : placed) {
      const uint64_t lo = static_cast<uint64_t>(p->a.offset), hi = lo + p->bytes;
      if (at < hi && lo < at + a.bytes && !disjoint(b, a, *p)) {
        at = hi;
        moved = true;
      }
    }
  }
  return at;
}

uint64_t end_of(const std::vector<Array>& arrays) {
  uint64_t end = 0;
  for (const Array& a : arrays) end = std::max(end, static_cast<uint64_t>(a.a.offset) + a.bytes);
  return align_threadgroup(end);
}

void place_plainly(std::vector<Array>& arrays) {
  std::vector<Array*> order;
  for (Array& a : arrays) order.push_back(&a);
  std::stable_sort(order.begin(), order.end(), [](const Array* x, const Array* y) { return x->align > y->align; });
  uint64_t at = 0;
  for (Array* a : order) {
    at = align_up(at, a->align);
    a->a.offset = static_cast<int64_t>(at);
    at = align_threadgroup(at + a->bytes);
  }
}

// Largest first, each at its first fit. Returns the top-level ops a barrier must go before: the
// first use of each array that takes bytes of an earlier one with no barrier in between.
std::vector<int64_t> place_packed(const gpu::Function& f, std::vector<Array>& arrays) {
  std::vector<Array*> order;
  for (Array& a : arrays) order.push_back(&a);
  std::stable_sort(order.begin(), order.end(), [](const Array* x, const Array* y) {
    return x->align != y->align ? x->align > y->align : x->bytes > y->bytes;
  });
  std::vector<const Array*> placed;
  for (Array* a : order) {
    a->a.offset = static_cast<int64_t>(first_fit(f.body, *a, placed));
    placed.push_back(a);
  }
  std::vector<int64_t> barriers;
  for (const Array& x : arrays)
    for (const Array& y : arrays) {
      const uint64_t xl = static_cast<uint64_t>(x.a.offset), yl = static_cast<uint64_t>(y.a.offset);
      if (&x == &y || !(xl < yl + y.bytes && yl < xl + x.bytes) || !may_follow(f.body, x, y)) continue;
      if (!found_between(f.body, x.last, y.first, GpuOpKind::BARRIER)) barriers.push_back(y.first);
    }
  std::sort(barriers.begin(), barriers.end());
  barriers.erase(std::unique(barriers.begin(), barriers.end()), barriers.end());
  return barriers;
}

void insert_barriers(gpu::Function& f, const std::vector<int64_t>& before) {
  for (auto t = before.rbegin(); t != before.rend(); ++t) {
    gpu::Op bar;
    bar.kind = GpuOpKind::BARRIER;
    bar.loc = f.body.ops[static_cast<size_t>(*t)].loc;
    f.body.ops.insert(f.body.ops.begin() + *t, std::move(bar));
  }
}

// Threadgroup memory the kernel's cancel_points take beside its arrays (GpuTarget).
uint64_t cancel_bytes(const gpu::Function& f, const GpuTarget& t) {
  bool cancel = false;
  gpu::walk(f.body, [&](const gpu::Op& op) { cancel = cancel || op.kind == GpuOpKind::CANCEL_POINT; });
  return cancel ? t.cancel_threadgroup_bytes : 0;
}

void remove_cancel_points(gpu::Block& b) {
  std::erase_if(b.ops, [](const gpu::Op& op) { return op.kind == GpuOpKind::CANCEL_POINT; });
  for (gpu::Op& op : b.ops)
    for (gpu::Block& r : op.regions) remove_cancel_points(r);
}

}  // namespace

void allocate_threadgroup_memory(gpu::Function& f, const PassContext& ctx) {
  std::vector<Array> arrays;
  std::map<ValueId, size_t> index;
  for (gpu::Op& op : f.body.ops) {
    if (op.kind != GpuOpKind::ALLOC) continue;
    Array a;
    a.op = &op;
    a.order = arrays.size();
    a.a = gpu::shared_array(f, op);
    a.bytes = a.a.bytes(f.value(op.result()).dtype);
    a.align = a.a.alignment();
    index[op.result()] = arrays.size();
    arrays.push_back(a);
  }
  if (arrays.empty()) return;
  place_plainly(arrays);
  const uint64_t limit = ctx.target.threadgroup_memory_bytes - cancel_bytes(f, ctx.target);
  std::vector<int64_t> barriers;
  if (end_of(arrays) > limit && ctx.target.threadgroup_arrays_alias && arrays.size() <= 64) {
    live_ranges(f, arrays, index);
    barriers = place_packed(f, arrays);
  }
  const uint64_t bytes = end_of(arrays);
  if (bytes > limit && bytes <= ctx.target.threadgroup_memory_bytes) {
    // Only the loops' stop check does not fit: the kernel keeps its memory and goes without
    // checks (a time limit or cancel then cannot stop it while it runs).
    remove_cancel_points(f.body);
  } else if (bytes > limit && ctx.check_threadgroup_limit) {
    std::vector<const Array*> big;
    for (const Array& a : arrays) big.push_back(&a);
    std::stable_sort(big.begin(), big.end(), [](const Array* x, const Array* y) { return x->bytes > y->bytes; });
    std::vector<std::string> names = gpu::name_values(f, {});
    std::string largest;
    bool staged = false;
    for (size_t i = 0; i < big.size() && i < 3; ++i) {
      const gpu::SharedArray& s = big[i]->a;
      std::string shape;
      for (int64_t d : s.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
      largest += cat(i ? ", " : "", names[big[i]->op->result()], " ", big[i]->bytes, " (",
                     dtype_name(f.value(big[i]->op->result()).dtype), " ", shape,
                     s.stages > 1 ? cat(" x ", s.stages, " stages") : std::string(), ")");
      staged = staged || s.stages > 1;
    }
    fail(METILE_ERROR_UNSUPPORTED, "allocate-threadgroup-memory", f.name, " needs ", bytes,
         " bytes of threadgroup memory; ", ctx.device, " allows ", ctx.target.threadgroup_memory_bytes,
         " (largest arrays: ", largest, ")",
         staged ? "; fewer pipeline stages (num_stages) need less" : "");
  }
  for (Array& a : arrays) a.a.write(*a.op);
  insert_barriers(f, barriers);  // last: it moves the ops the arrays point to
}

}  // namespace metile
