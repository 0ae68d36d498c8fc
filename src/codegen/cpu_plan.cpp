// Planning for the CPU C++ generator (see cpu_plan.h). Requires a verified program; guarantees
// that every inline value can be evaluated at any element index inside the loop of each of its
// users without changing what any load observes, and that arrays sharing storage never hold two
// live values at once.
#include "codegen/cpu_plan.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/c_like.h"
#include "ir/param_access.h"

namespace metile {

namespace {

bool hoistable(const Op& op) {
  return has_trait(op.kind, kPure) && op.regions.empty() && op.kind != OpKind::YIELD;
}

void collect_defs(const Block& b, std::unordered_set<ValueId>& out) {
  out.insert(b.args.begin(), b.args.end());
  walk(b, [&](const Op& op) {
    out.insert(op.results.begin(), op.results.end());
    for (const Block& r : op.regions) out.insert(r.args.begin(), r.args.end());
  });
}

void hoist_block(Block& b) {
  for (size_t i = 0; i < b.ops.size(); ++i) {
    for (Block& r : b.ops[i].regions) hoist_block(r);
    if (b.ops[i].kind != OpKind::FOR) continue;
    Block& body = b.ops[i].body();
    std::unordered_set<ValueId> inside;
    collect_defs(body, inside);
    std::vector<Op> hoisted, kept;
    for (Op& op : body.ops) {
      bool invariant = hoistable(op) && std::none_of(op.operands.begin(), op.operands.end(),
                                                     [&](ValueId v) { return inside.count(v); });
      if (invariant) {
        for (ValueId r : op.results) inside.erase(r);
        hoisted.push_back(std::move(op));
      } else {
        kept.push_back(std::move(op));
      }
    }
    body.ops = std::move(kept);
    if (hoisted.empty()) continue;
    b.ops.insert(b.ops.begin() + static_cast<std::ptrdiff_t>(i),
                 std::make_move_iterator(hoisted.begin()), std::make_move_iterator(hoisted.end()));
    i += hoisted.size();
  }
}

struct Site {
  const Op* op = nullptr;
  const Block* block = nullptr;
  size_t pos = 0;
};

struct Use {
  const Op* user;
  size_t operand;
  const Block* block;
};

// Ops whose tile result can be written as an expression of the element index.
bool fusible(OpKind k) {
  switch (k) {
    case OpKind::ARANGE:
    case OpKind::BROADCAST:
    case OpKind::CAST:
    case OpKind::BITCAST:
    case OpKind::SELECT:
    case OpKind::PTR_OFFSET:
    case OpKind::LOAD:
    case OpKind::TILE_LOAD:
    case OpKind::THREAD_ID:
    case OpKind::SIMD_LANE_ID:
    case OpKind::SIMD_SHUFFLE_XOR:
    case OpKind::SIMD_BROADCAST:
      return true;
    default:
      return has_trait(k, kBinary | kCompare | kUnary);
  }
}

// Recomputing these per use costs about as much as reading them back from an array.
bool cheap_op(OpKind k, DType d) {
  switch (k) {
    case OpKind::ARANGE:
    case OpKind::THREAD_ID:
    case OpKind::SIMD_LANE_ID:
    case OpKind::BROADCAST:
    case OpKind::PTR_OFFSET:
    case OpKind::SELECT:
    case OpKind::NOT:
      return true;
    case OpKind::CAST:
      return !is_float(d);
    case OpKind::ADD:
    case OpKind::SUB:
    case OpKind::MUL:
    case OpKind::BITAND:
    case OpKind::BITOR:
    case OpKind::BITXOR:
      return !is_float(d);
    default:
      return has_trait(k, kCompare);
  }
}

// Users that read each element of their operands once, at the user's own element index.
bool aligned_use(const Op& user) {
  switch (user.kind) {
    case OpKind::BROADCAST:
    case OpKind::RESHAPE:
    case OpKind::DOT:
    case OpKind::SIMD_BROADCAST:
    case OpKind::SIMD_SHUFFLE_XOR:
    case OpKind::YIELD:
      return false;
    case OpKind::REDUCE_SUM:
    case OpKind::REDUCE_MAX:
    case OpKind::REDUCE_MIN:
      return true;
    default:
      return fusible(user.kind) || user.kind == OpKind::STORE || user.kind == OpKind::TILE_STORE ||
             has_trait(user.kind, kAtomic) || user.kind == OpKind::FOR;
  }
}

// Users that may evaluate an inline operand (possibly at permuted indices, once per element).
bool inline_consumer(const Op& user, size_t operand) {
  if (user.kind == OpKind::DOT) return operand == 2;  // the accumulator seeds the result array
  if (user.kind == OpKind::RESHAPE || user.kind == OpKind::YIELD) return false;
  return true;
}

struct Planner {
  CpuPlan& plan;
  const Program& p;
  std::unordered_map<ValueId, Site> def;
  std::vector<std::vector<Use>> uses;
  std::unordered_map<const Op*, Site> site;        // where each op sits
  std::unordered_map<const Block*, const Op*> owner;  // region op owning each block
  std::vector<const Op*> order;                     // pre-order
  std::vector<int> dup_size;
  std::vector<uint64_t> masks;  // parameters each pointer may point into

  explicit Planner(CpuPlan& pl) : plan(pl), p(pl.program) {}

  void index(const Block& b, const Op* parent) {
    owner[&b] = parent;
    for (ValueId a : b.args) def[a] = {parent, &b, 0};
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Op& op = b.ops[i];
      site[&op] = {&op, &b, i};
      order.push_back(&op);
      for (ValueId r : op.results) def[r] = {&op, &b, i};
      for (size_t k = 0; k < op.operands.size(); ++k) uses[op.operands[k]].push_back({&op, k, &b});
      for (const Block& r : op.regions) index(r, &op);
    }
  }

  // Names values as print() does: in order of first appearance.
  void number() {
    int next = 0;
    auto name = [&](ValueId v) {
      if (plan.values[v].ir_name.empty()) plan.values[v].ir_name = "%" + std::to_string(next++);
    };
    for (const Param& prm : p.params) plan.values[prm.value].ir_name = "%" + prm.name;
    walk(p.body, [&](const Op& op) {
      for (ValueId r : op.results) name(r);
      for (const Block& b : op.regions)
        for (ValueId a : b.args) name(a);
    });
  }

  void name_values() {
    std::set<std::string> taken;
    for (const Param& prm : p.params) {
      std::string n = c_identifier(prm.name);
      // Keep clear of generated names: vN and loop indices (c_identifier keeps mt_ clear).
      bool generated = n == "i" || n == "r" || n == "c" ||
                       (n.size() > 1 && n[0] == 'v' &&
                        n.find_first_not_of("0123456789_", 1) == std::string::npos);
      while (generated || taken.count(n)) {
        n += "_";
        generated = false;
      }
      taken.insert(n);
      plan.values[prm.value].name = n;
    }
    for (ValueId v = 1; v < p.values.size(); ++v)
      if (plan.values[v].name.empty() && !plan.values[v].ir_name.empty())
        plan.values[v].name = "v" + plan.values[v].ir_name.substr(1);
  }

  bool is_index_user(const Use& u) const {
    const Op& o = *u.user;
    if (has_trait(o.kind, kCompare) || o.kind == OpKind::ARANGE) return true;
    if (o.kind == OpKind::PTR_OFFSET) return u.operand == 1;
    if (o.kind == OpKind::TILE_LOAD) return u.operand >= 1;
    if (o.kind == OpKind::TILE_STORE) return u.operand >= 1 && u.operand != 4;
    if (o.kind == OpKind::FOR) return u.operand < 3;
    bool pass = o.kind == OpKind::ADD || o.kind == OpKind::SUB || o.kind == OpKind::MUL ||
                o.kind == OpKind::BROADCAST || o.kind == OpKind::CAST;
    return pass && !o.results.empty() && plan.values[o.results[0]].index_arith;
  }

  void classify_index_arith() {
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Op& op = **it;
      if (op.results.size() != 1) continue;
      ValueId v = op.results[0];
      const Type& t = p.type(v);
      // An unsigned cast of an index counts too: the bounds guard compares u32(lane) < bound.
      const bool index_dtype = t.dtype == DType::i32 || t.dtype == DType::i64 ||
                               (op.kind == OpKind::CAST && t.dtype == DType::u32);
      bool candidate = !t.is_ptr && index_dtype &&
                       (op.kind == OpKind::ADD || op.kind == OpKind::SUB || op.kind == OpKind::MUL ||
                        op.kind == OpKind::ARANGE || op.kind == OpKind::BROADCAST ||
                        (op.kind == OpKind::CAST && is_int(p.type(op.operands[0]).dtype)));
      if (!candidate || uses[v].empty()) continue;
      plan.values[v].index_arith =
          std::all_of(uses[v].begin(), uses[v].end(), [&](const Use& u) { return is_index_user(u); });
    }
  }

  // True when some op strictly between positions `from` and `to` of `b` may write memory.
  static bool writes_between(const Block& b, size_t from, size_t to) {
    for (size_t i = from + 1; i < to && i < b.ops.size(); ++i) {
      const Op& o = b.ops[i];
      if (has_trait(o.kind, kSideEffect) || !o.regions.empty()) return true;
    }
    return false;
  }

  Form decide(ValueId v, const Op& op) {
    const Type& t = p.type(v);
    if (t.is_scalar()) return Form::scalar;
    // A reshape reads its operand's array in row-major order, or recomputes an inline operand.
    if (op.kind == OpKind::RESHAPE) return plan.values[op.operands[0]].form;
    if (!fusible(op.kind)) return Form::array;
    const Site& d = def.at(v);
    const auto& us = uses[v];
    bool free = op.kind == OpKind::ARANGE || op.kind == OpKind::THREAD_ID ||
                op.kind == OpKind::SIMD_LANE_ID;
    int size = 1;
    bool cheap = cheap_op(op.kind, t.dtype);
    for (ValueId o : op.operands) {
      const ValuePlan& vp = plan.values[o];
      if (vp.form == Form::inline_) {
        size += dup_size[o];
        cheap = cheap && dup_size[o] > 0;
      }
    }
    dup_size[v] = cheap ? size : 0;
    if (free) return Form::inline_;
    if (us.empty()) return Form::inline_;  // dead: never evaluated
    bool recompute_ok = cheap && size <= 12;
    bool memory = op.kind == OpKind::LOAD || op.kind == OpKind::TILE_LOAD;
    for (const Use& u : us) {
      if (!inline_consumer(*u.user, u.operand)) return Form::array;
      if (!aligned_use(*u.user) && !recompute_ok &&
          u.user->kind != OpKind::SIMD_SHUFFLE_XOR)
        return Form::array;
      if (u.block != d.block) {
        if (memory || !recompute_ok) return Form::array;
        continue;
      }
      if (memory && writes_between(*d.block, d.pos, site.at(u.user).pos)) return Form::array;
    }
    if (us.size() > 1 && (memory || !recompute_ok)) return Form::array;
    return Form::inline_;
  }

  void decide_forms() {
    for (const Param& prm : p.params) {
      plan.values[prm.value].form = Form::scalar;
      plan.values[prm.value].storage = prm.value;
    }
    for (const Op* op : order) {
      if (op->kind == OpKind::FOR) {
        const Block& body = op->body();
        plan.values[body.args[0]].form = Form::scalar;  // induction variable
        for (size_t k = 1; k < body.args.size(); ++k) {
          ValueId a = body.args[k];
          plan.values[a].form = p.type(a).is_scalar() ? Form::scalar : Form::array;
          plan.values[a].storage = a;
        }
      }
      if (op->kind == OpKind::WHILE)  // carried (before) and passed (after) variables
        for (const Block& b : op->regions)
          for (ValueId a : b.args) {
            plan.values[a].form = p.type(a).is_scalar() ? Form::scalar : Form::array;
            plan.values[a].storage = a;
          }
      for (ValueId r : op->results) {
        ValuePlan& vp = plan.values[r];
        vp.uses = static_cast<int>(uses[r].size());
        vp.form = decide(r, *op);
        vp.storage = vp.form == Form::inline_ ? kNoValue : r;
      }
      // Loop results are the carried variables after the loop.
      if (op->kind == OpKind::FOR)
        for (size_t k = 0; k < op->results.size(); ++k) {
          ValueId carried = op->body().args[k + 1];
          plan.values[op->results[k]].form = plan.values[carried].form;
          plan.values[op->results[k]].storage = carried;
        }
      // A while's results are its passed variables after the loop.
      if (op->kind == OpKind::WHILE)
        for (size_t k = 0; k < op->results.size(); ++k) {
          ValueId passed = op->regions[1].args[k];
          plan.values[op->results[k]].form = plan.values[passed].form;
          plan.values[op->results[k]].storage = passed;
        }
      if (op->kind == OpKind::RESHAPE && plan.values[op->results[0]].form == Form::array)
        plan.values[op->results[0]].storage = owner_of(op->operands[0]);
    }
  }

  // Whether `writer`, evaluated element by element with `load` inline, may store an element
  // the load has yet to read: only the same pointers pair each element with itself.
  bool overwrites(const Op& writer, const Op& load) const {
    if (!has_trait(writer.kind, kSideEffect) || !has_trait(writer.kind, kMemory)) return false;
    if ((masks[writer.operands[0]] & masks[load.operands[0]]) == 0) return false;
    return !(writer.kind == OpKind::STORE && load.kind == OpKind::LOAD &&
             writer.operands[0] == load.operands[0]);
  }

  // An inline load is evaluated where its chain of inline users ends; no write may come first,
  // and the end may not overwrite what it has yet to read.
  void check_inline_loads() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const Op* op : order) {
        if (op->kind != OpKind::LOAD && op->kind != OpKind::TILE_LOAD) continue;
        ValueId v = op->results[0];
        if (plan.values[v].form != Form::inline_) continue;
        const Site& d = def.at(v);
        std::vector<ValueId> stack{v};
        bool bad = false;
        while (!stack.empty() && !bad) {
          ValueId x = stack.back();
          stack.pop_back();
          for (const Use& u : uses[x]) {
            bad = u.block != d.block || writes_between(*d.block, d.pos, site.at(u.user).pos) ||
                  overwrites(*u.user, *op);
            if (bad) break;
            if (u.user->results.size() == 1 && plan.values[u.user->results[0]].form == Form::inline_)
              stack.push_back(u.user->results[0]);
          }
        }
        if (bad) {
          plan.values[v].form = Form::array;
          plan.values[v].storage = v;
          changed = true;
        }
      }
    }
  }

  ValueId owner_of(ValueId v) const {
    ValueId s = plan.values[v].storage;
    while (s != kNoValue && plan.values[s].storage != s) s = plan.values[s].storage;
    return s;
  }

  // Storage read when `op` is emitted, through inline operands; `unaligned` collects the storage
  // read at some other element than the op's own (broadcasts, shuffles, dot operands, ...).
  void reads(const Op& op, std::set<ValueId>& out, std::set<ValueId>& unaligned,
             bool path_aligned) const {
    for (size_t k = 0; k < op.operands.size(); ++k) {
      ValueId v = op.operands[k];
      bool a = path_aligned && (op.kind == OpKind::DOT ? k == 2 : aligned_use(op));
      const ValuePlan& vp = plan.values[v];
      if (vp.form == Form::inline_) {
        reads(*def.at(v).op, out, unaligned, a);
      } else if (vp.form == Form::array) {
        ValueId s = owner_of(v);
        out.insert(s);
        if (!a) unaligned.insert(s);
      }
    }
    for (const Block& r : op.regions)
      for (const Op& inner : r.ops) reads(inner, out, unaligned, false);
  }

  // A value yielded at carried position k may be computed straight into the carried array when
  // nothing reads the carried array after that point (in-place loop update, no copy).
  void plan_in_place(const Op& loop) {
    const Block& body = loop.body();
    const Op& yield = body.ops.back();
    for (size_t k = 0; k + 1 < body.args.size(); ++k) {
      ValueId carried = body.args[k + 1], y = yield.operands[k];
      ValuePlan& yp = plan.values[y];
      if (yp.form != Form::array || yp.storage != y || yp.uses != 1) continue;
      auto d = def.find(y);
      if (d == def.end() || d->second.block != &body || d->second.op == nullptr) continue;
      const Op& producer = *d->second.op;
      if (producer.kind == OpKind::FOR || producer.kind == OpKind::RESHAPE ||
          has_trait(producer.kind, kReduce))
        continue;
      std::set<ValueId> r, unaligned;
      reads(producer, r, unaligned, true);
      if (unaligned.count(carried)) continue;
      if (producer.kind == OpKind::DOT && (owner_of(producer.operands[0]) == carried ||
                                           owner_of(producer.operands[1]) == carried))
        continue;
      bool read_later = false;
      for (size_t i = d->second.pos + 1; i < body.ops.size() && !read_later; ++i) {
        std::set<ValueId> later, unused;
        reads(body.ops[i], later, unused, false);
        later.erase(y);
        read_later = later.count(carried) > 0;
      }
      if (read_later) continue;
      yp.storage = carried;
    }
  }

  // `dot` accumulates into its accumulator's array when that array dies at the dot.
  void plan_dot_accumulate(const Op& dot) {
    ValueId acc = dot.operands[2], out = dot.results[0];
    const ValuePlan& ap = plan.values[acc];
    if (ap.form != Form::array || ap.uses != 1 || plan.values[out].storage != out) return;
    ValueId s = owner_of(acc);
    if (s != acc || s == owner_of(dot.operands[0]) || s == owner_of(dot.operands[1])) return;
    if (def.at(acc).block != site.at(&dot).block || def.at(acc).op == nullptr) return;
    if (def.at(acc).op->kind == OpKind::FOR) return;  // a loop's carried array stays its own
    plan.values[out].storage = s;
  }

  void run() {
    uses.assign(p.values.size(), {});
    dup_size.assign(p.values.size(), 0);
    plan.values.assign(p.values.size(), {});
    masks = param_masks(p);
    index(p.body, nullptr);
    number();
    name_values();
    classify_index_arith();
    decide_forms();
    check_inline_loads();
    for (const Op* op : order)
      if (op->kind == OpKind::DOT) plan_dot_accumulate(*op);
    for (const Op* op : order)
      if (op->kind == OpKind::FOR) plan_in_place(*op);
    for (ValueId v = 1; v < p.values.size(); ++v) {
      ValuePlan& vp = plan.values[v];
      if (vp.form == Form::array && owner_of(v) == v)
        plan.array_bytes += static_cast<uint64_t>(p.type(v).shape.numel()) * 8;
      if (vp.form != Form::inline_ && vp.storage != kNoValue && owner_of(v) != v)
        vp.name = plan.values[owner_of(v)].name;
    }
    walk(p.body, [&](const Op& op) {
      if (op.kind == OpKind::SHARED)
        plan.array_bytes += static_cast<uint64_t>(op.attr_int("size")) * 8;
    });
  }
};

}  // namespace

void hoist_loop_invariants(Program& program) { hoist_block(program.body); }

CpuPlan plan_cpu(const Program& program) {
  CpuPlan plan;
  plan.program = program;
  hoist_loop_invariants(plan.program);
  Planner(plan).run();
  return plan;
}

}  // namespace metile
