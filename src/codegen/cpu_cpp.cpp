// Tile IR -> C++ for the cpu device. Requires a verified program; produces one translation unit
// (prelude + one static function per program instance + the exported range entry point).
//
// Every tile that the plan (cpu_plan.h) keeps is a local array; each op that produces one is a
// loop nest over the tile's elements, simple counted loops that the host compiler vectorizes
// (masked loads and stores become masked vector moves). Inline values are written as `const`
// locals inside the loop of the op that consumes them, so an element-wise chain ending in a
// store or a reduction is a single loop, and whole-tile reductions join the loop that fills
// their operand. Reduction loops carry `#pragma omp simd reduction(...)` (-fopenmp-simd, no
// OpenMP runtime) so that float sums vectorize without fast-math. Values keep the Tile IR's
// numbering (%12 is v12) so the C++ reads side by side with METILE_DEBUG=tile_ir.
#include "codegen/cpu_cpp.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "codegen/cpu_plan.h"
#include "ir/swizzle_names.h"
#include "support/embedded.h"
#include "support/error.h"

namespace metile {

namespace {

// An element index: i0 for 1-D tiles, (i0, i1) for 2-D ones; empty for scalars.
struct Idx {
  std::string i0, i1;
  std::string key() const { return i0 + "," + i1; }
};

struct Emitter {
  const CpuPlan& plan;
  const Program& p;
  const Dialect& d = cpu_dialect();
  SourceWriter w;
  // Inline values already written in the current loop body, by (value, index).
  std::map<std::pair<ValueId, std::string>, std::string> memo;
  Idx canonical;
  int fresh = 0;
  // Inside a simdgroup_role region: T-element stores are limited to threads [lo, hi).
  int64_t role_lo = -1, role_hi = -1;

  explicit Emitter(const CpuPlan& pl) : plan(pl), p(pl.program) {}

  [[noreturn]] void unsupported(const Op& op, const std::string& why) const {
    fail(METILE_ERROR_UNSUPPORTED, "cpu", p.where(op.loc), op_name(op.kind),
         " is not supported on the cpu device: ", why);
  }

  const Type& type(ValueId v) const { return p.type(v); }
  const std::string& name(ValueId v) const { return plan[v].name; }

  std::string ctype(const Type& t) const {
    return t.is_ptr ? d.storage(t.dtype) + "*" : d.value(t.dtype);
  }
  // A declaration of an immutable local.
  std::string decl(const Type& t, const std::string& n) const {
    return t.is_ptr ? ctype(t) + " const " + n : "const " + ctype(t) + " " + n;
  }

  static std::string flat(const Shape& s, const Idx& idx) {
    if (s.rank <= 1) return idx.i0;
    return "(" + idx.i0 + " * " + std::to_string(s.dims[1]) + " + " + idx.i1 + ")";
  }

  // One line describing the op in Tile IR terms.
  std::string describe(const Op& op) const {
    std::string s;
    for (size_t i = 0; i < op.results.size(); ++i) s += (i ? ", " : "") + plan[op.results[i]].ir_name;
    if (!s.empty()) s += " = ";
    s += std::string(op_name(op.kind));
    for (size_t i = 0; i < op.operands.size(); ++i)
      s += (i ? ", " : " ") + plan[op.operands[i]].ir_name;
    for (const Attr& a : op.attrs) {
      s += " " + a.name + "=";
      if (auto* iv = std::get_if<int64_t>(&a.value)) s += std::to_string(*iv);
      else if (auto* sv = std::get_if<std::string>(&a.value)) s += *sv;
      else s += std::to_string(std::get<double>(a.value));
    }
    if (op.results.size() == 1) s += " : " + type(op.results[0]).str();
    std::string where = p.where(op.loc);
    if (!where.empty()) s += "  (" + where.substr(0, where.size() - 2) + ")";
    return s;
  }

  // ---- element expressions ---------------------------------------------------------------

  // The expression of value `v` at element `idx`, writing the statements it needs.
  std::string elem(ValueId v, const Idx& idx) {
    const ValuePlan& vp = plan[v];
    if (vp.form == Form::scalar) return vp.name;
    if (vp.form == Form::array) return vp.name + "[" + flat(type(v).shape, idx) + "]";
    METILE_ASSERT(vp.form == Form::inline_, "value ", vp.ir_name, " has no form");
    auto key = std::make_pair(v, idx.key());
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
    const Op& op = *def_op(v);
    if (same_index_operands(op.kind)) emit_operands_first(op, idx);
    std::string e = op_elem(op, idx);
    std::string n = idx.key() == canonical.key() ? vp.name : vp.name + "_" + std::to_string(++fresh);
    w.line(decl(type(v).element(), n) + " = " + e + ";");
    memo.emplace(key, n);
    return n;
  }

  std::map<ValueId, const Op*> defs;
  std::map<const Op*, uint32_t> loop_sites;  // for op -> its fault code
  const Op* def_op(ValueId v) const { return defs.at(v); }

  // Ops whose op_elem reads every operand at the result's own element.
  static bool same_index_operands(OpKind k) {
    return has_trait(k, kBinary | kCompare | kUnary) || k == OpKind::CAST ||
           k == OpKind::SELECT || k == OpKind::PTR_OFFSET || k == OpKind::LOAD;
  }

  // Declares the inline operands `op` reads at `idx` in post-order with an explicit stack, so
  // that a fused element-wise chain of any length does not recurse once per op (a 10k-op chain
  // overflowed the host's stack); op_elem then finds every operand memoized.
  void emit_operands_first(const Op& root, const Idx& idx) {
    const std::string key = idx.key();
    auto pending = [&](ValueId u) {
      return plan[u].form == Form::inline_ && memo.find({u, key}) == memo.end();
    };
    std::vector<std::pair<const Op*, size_t>> stack{{&root, 0}};
    while (!stack.empty()) {
      auto& [op, next] = stack.back();
      if (next < op->operands.size()) {
        ValueId u = op->operands[next++];
        if (!pending(u)) continue;
        const Op* d = def_op(u);
        if (same_index_operands(d->kind)) stack.push_back({d, 0});
        else elem(u, idx);  // changes the index (broadcast, reshape, ...): shallow recursion
        continue;
      }
      const Op* done = op;
      stack.pop_back();
      if (done != &root && pending(done->results[0])) elem(done->results[0], idx);
    }
  }

  Idx broadcast_idx(const Shape& from, const Shape& to, const Idx& idx) const {
    std::string parts[2] = {idx.i0, idx.i1};
    std::string out[2];
    int off = to.rank - from.rank;
    for (int j = 0; j < from.rank; ++j)
      out[j] = (from.dims[j] == 1 && to.dims[j + off] != 1) ? "0" : parts[j + off];
    return {out[0], out[1]};
  }

  bool is_const_zero(ValueId v) const {
    auto it = defs.find(v);
    if (it == defs.end() || it->second->kind != OpKind::CONST) return false;
    const AttrValue* a = it->second->find_attr("value");
    if (auto* iv = std::get_if<int64_t>(a)) return *iv == 0;
    return false;
  }

  std::string offset_of(ValueId v, const Idx& idx) {
    std::string o = elem(v, idx);
    return type(v).dtype == DType::i64 ? o : "(int64_t)" + o;
  }

  // The value of `op`'s single result at `idx`, as an expression over operand elements.
  std::string op_elem(const Op& op, const Idx& idx) {
    const OpKind k = op.kind;
    auto arg = [&](size_t i) { return elem(op.operands[i], idx); };
    DType in = op.operands.empty() ? DType::invalid : type(op.operands[0]).dtype;
    const ValuePlan& rp = plan[op.results[0]];
    if (has_trait(k, kBinary | kCompare)) {
      std::string a = arg(0), b = arg(1);
      if (rp.index_arith && (k == OpKind::ADD || k == OpKind::SUB || k == OpKind::MUL)) {
        const char* sym = k == OpKind::ADD ? " + " : k == OpKind::SUB ? " - " : " * ";
        return "(" + a + sym + b + ")";
      }
      return spell_binary(d, k, in, a, b);
    }
    if (has_trait(k, kUnary)) return spell_unary(d, k, in, arg(0));
    switch (k) {
      case OpKind::CONST: {
        DType t = type(op.results[0]).dtype;
        const AttrValue& a = *op.find_attr("value");
        if (auto* iv = std::get_if<int64_t>(&a)) return spell_int_literal(d, t, *iv);
        return spell_float_literal(d, t, std::get<double>(a));
      }
      case OpKind::PROGRAM_ID: return "mt_pid[" + std::to_string(op.attr_int("axis")) + "]";
      case OpKind::NUM_PROGRAMS: return "mt_npg[" + std::to_string(op.attr_int("axis")) + "]";
      case OpKind::ARANGE: {
        if (is_const_zero(op.operands[0])) return idx.i0;
        std::string s = elem(op.operands[0], {});
        return rp.index_arith ? "(" + s + " + " + idx.i0 + ")" : "mt_wrap_add(" + s + ", " + idx.i0 + ")";
      }
      case OpKind::THREAD_ID: return idx.i0;
      case OpKind::SIMD_LANE_ID: return "(" + idx.i0 + " & 31)";
      case OpKind::BROADCAST: {
        const Type& from = type(op.operands[0]);
        return elem(op.operands[0], broadcast_idx(from.shape, type(op.results[0]).shape, idx));
      }
      case OpKind::RESHAPE: {
        ValueId src = op.operands[0];
        std::string f = flat(type(op.results[0]).shape, idx);
        if (plan[src].form == Form::array) return name(src) + "[" + f + "]";
        const Shape& s = type(src).shape;
        if (s.rank <= 1) return elem(src, {f, ""});
        std::string cols = std::to_string(s.dims[1]);
        return elem(src, {"(" + f + " / " + cols + ")", "(" + f + " % " + cols + ")"});
      }
      case OpKind::CAST: return spell_cast(d, in, type(op.results[0]).dtype, arg(0));
      case OpKind::SELECT: return spell_select(arg(0), arg(1), arg(2));
      case OpKind::PTR_OFFSET: return "(" + arg(0) + " + " + offset_of(op.operands[1], idx) + ")";
      case OpKind::LOAD: {
        DType t = type(op.results[0]).dtype;
        std::string ptr = arg(0);
        std::string value = spell_from_storage(d, t, "*" + ptr);
        if (op.operands.size() < 2) return value;
        std::string other = op.operands.size() > 2 ? arg(2) : spell_zero(d, t);
        return spell_select(arg(1), value, other);
      }
      case OpKind::TILE_LOAD: return tile_elem(op, idx);
      case OpKind::TRANS: return elem(op.operands[0], {idx.i1, idx.i0});
      case OpKind::SIMD_SHUFFLE_XOR:
        return lane_elem(op, "(" + idx.i0 + " ^ " + elem(op.operands[1], {}) + ")");
      case OpKind::SIMD_BROADCAST:
        return lane_elem(op, "((" + idx.i0 + " & ~31) + " + elem(op.operands[1], {}) + ")");
      default:
        unsupported(op, "it has no element-wise form");
    }
  }

  // x[j] for another thread j of the same T-element tile.
  std::string lane_elem(const Op& op, const std::string& j) {
    ValueId x = op.operands[0];
    if (type(x).is_scalar()) return elem(x, {});
    return elem(x, {j, ""});
  }

  // Element (r, c) of a tile_load: row-major at (row + r, col + c), zero outside the bounds.
  std::string tile_elem(const Op& op, const Idx& idx) {
    DType t = type(op.results[0]).dtype;
    std::string base = elem(op.operands[0], {});
    std::string n = name(op.results[0]) + "_" + std::to_string(++fresh);
    w.line("const int64_t " + n + "_r = (int64_t)" + elem(op.operands[1], {}) + " + " + idx.i0 +
           ", " + n + "_c = (int64_t)" + elem(op.operands[2], {}) + " + " + idx.i1 + ";");
    std::string at = spell_from_storage(
        d, t, base + "[" + n + "_r * " + elem(op.operands[3], {}) + " + " + n + "_c]");
    if (op.operands.size() < 6) return at;
    std::string rows = elem(op.operands[4], {}), cols = elem(op.operands[5], {});
    return "((" + n + "_r >= 0) & (" + n + "_r < " + rows + ") & (" + n + "_c >= 0) & (" + n +
           "_c < " + cols + ") ? " + at + " : " + spell_zero(d, t) + ")";
  }

  // ---- loops -----------------------------------------------------------------------------

  // Writes loops over `s` and calls `body` with the element index inside the innermost one.
  void for_each(const Shape& s, const std::function<void(const Idx&)>& body,
                const std::string& clause = {}) {
    auto inner = [&](const Idx& idx, const std::string& var, int64_t n) {
      // Only reductions get `omp simd` (to reassociate their sums): on element-wise loops GCC
      // vectorizes by itself, and GCC 12 if-converts masked stores wrongly under the pragma.
      if (!clause.empty()) w.line("#pragma omp simd" + clause);
      w.open("for (int32_t " + var + " = 0; " + var + " < " + std::to_string(n) + "; ++" + var + ")");
      auto saved = memo;
      Idx prev = canonical;
      canonical = idx;
      body(idx);
      canonical = prev;
      memo = std::move(saved);
      w.close();
    };
    if (s.rank <= 1) {
      inner({"i", ""}, "i", s.rank == 0 ? 1 : s.dims[0]);
      return;
    }
    w.open("for (int32_t r = 0; r < " + std::to_string(s.dims[0]) + "; ++r)");
    inner({"r", "c"}, "c", s.dims[1]);
    w.close();
  }

  void declare_array(ValueId v) {
    const Type& t = type(v);
    w.line("alignas(64) " + ctype(t) + " " + name(v) + "[" + std::to_string(t.shape.numel()) + "];");
  }

  bool owns_storage(ValueId v) const { return plan[v].storage == v; }

  // Fills the array of `target` with the elements of `source` (an expression source).
  void fill_array(ValueId target, ValueId source) {
    const Shape& s = type(target).shape;
    for_each(s, [&](const Idx& idx) {
      w.line(name(target) + "[" + flat(s, idx) + "] = " + elem(source, idx) + ";");
    });
  }

  // ---- ops -------------------------------------------------------------------------------

  void emit_block(const Block& b) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      rest.clear();
      for (size_t j = i + 1; j < b.ops.size(); ++j) rest.push_back(&b.ops[j]);
      emit_op(b.ops[i]);
    }
  }

  // The ops after the one being emitted in its block (for fusing reductions into its loop).
  std::vector<const Op*> rest;
  std::set<const Op*> fused;

  void emit_op(const Op& op) {
    switch (op.kind) {
      case OpKind::FOR: return emit_for(op);
      case OpKind::YIELD: return;  // written by emit_for
      case OpKind::SIMDGROUP_ROLE: return emit_role(op);
      case OpKind::STORE: return emit_store(op);
      case OpKind::ATOMIC_ADD:
      case OpKind::ATOMIC_MAX:
      case OpKind::ATOMIC_MIN:
      case OpKind::ATOMIC_XCHG:
      case OpKind::ATOMIC_CAS: return emit_atomic(op);
      case OpKind::TILE_STORE: return emit_tile_store(op);
      case OpKind::DOT: return emit_dot(op);
      case OpKind::REDUCE_SUM:
      case OpKind::REDUCE_MAX:
      case OpKind::REDUCE_MIN: return emit_reduce(op);
      case OpKind::SHARED: return emit_shared(op);
      case OpKind::BARRIER:
        w.comment("barrier: a no-op here, the whole tile of threads runs in program order");
        return;
      case OpKind::TILE_SWIZZLE: return emit_swizzle(op);
      case OpKind::CUMSUM:
      case OpKind::CUMPROD: return emit_scan(op);
      case OpKind::DEVICE_PRINT: return emit_print(op);
      default: break;
    }
    ValueId v = op.result();
    if (v == kNoValue) unsupported(op, "it has no lowering");
    const ValuePlan& vp = plan[v];
    if (vp.form == Form::inline_) return;
    if (vp.form == Form::scalar) {
      w.line(decl(type(v), vp.name) + " = " + op_elem(op, {}) + ";");
      return;
    }
    if (op.kind == OpKind::RESHAPE) {
      w.comment(describe(op) + ": the same array, viewed with another shape");
      return;
    }
    w.comment(describe(op));
    if (owns_storage(v)) declare_array(v);
    const Shape& s = type(v).shape;
    // Whole-tile reductions of this tile that follow it are accumulated in the same loop.
    std::vector<const Op*> reds = fusable_reductions(op, rest);
    std::string clause;
    std::vector<Reduction> specs;
    for (const Op* r : reds) {
      w.comment(describe(*r) + ": accumulated in the loop below");
      specs.push_back(reduction(*r));
      std::string acc = name(r->results[0]) + "_acc";
      w.line(specs.back().acc_type + " " + acc + " = " + specs.back().init + ";");
      clause += fill_pattern(specs.back().clause, acc);
      fused.insert(r);
    }
    for_each(s, [&](const Idx& idx) {
      w.line(vp.name + "[" + flat(s, idx) + "] = " + op_elem(op, idx) + ";");
      for (size_t i = 0; i < reds.size(); ++i)
        w.line(specs[i].step(name(reds[i]->results[0]) + "_acc", elem(reds[i]->operands[0], idx)));
    }, clause);
    for (size_t i = 0; i < reds.size(); ++i) {
      ValueId r = reds[i]->results[0];
      w.line("const " + d.value(type(r).dtype) + " " + name(r) + " = " +
             specs[i].finish(name(r) + "_acc") + ";");
    }
  }

  // Reductions to a scalar, among the ops after `op` up to the next one that stores, loops or
  // fills an array, whose operand (through inline values) reads only `op`'s tile at the same
  // element and values computed before `op`.
  std::vector<const Op*> fusable_reductions(const Op& op, std::vector<const Op*> rest) const {
    std::vector<const Op*> out;
    ValueId v = op.results[0];
    std::set<ValueId> later;  // values defined after op: not yet available in its loop
    for (const Op* o : rest) {
      bool reduce = has_trait(o->kind, kReduce) && o->attr_int("axis") == -1;
      if (reduce && type(o->operands[0]).shape == type(v).shape && reads_only(o->operands[0], v, later))
        out.push_back(o);
      else if (!(has_trait(o->kind, kPure) && o->regions.empty() &&
                 (o->results.size() != 1 || plan[o->results[0]].form != Form::array)))
        break;
      for (ValueId r : o->results) later.insert(r);
    }
    return out;
  }

  // True when evaluating `x` elementwise needs nothing in `later` and reads `v` only aligned.
  bool reads_only(ValueId x, ValueId v, const std::set<ValueId>& later) const {
    if (x == v) return true;
    if (later.count(x)) return false;
    if (plan[x].form != Form::inline_) return plan[x].storage != plan[v].storage;
    const Op& o = *def_op(x);
    bool aligned = has_trait(o.kind, kBinary | kCompare | kUnary) || o.kind == OpKind::CAST ||
                   o.kind == OpKind::SELECT || o.kind == OpKind::ARANGE;
    for (ValueId a : o.operands) {
      if (!aligned && (a == v || plan[a].form == Form::inline_)) return false;
      if (!reads_only(a, v, later)) return false;
    }
    return true;
  }

  // Extra condition limiting a T-element side effect to the current role's threads.
  std::string role_guard(const Type& t, const Idx& idx) const {
    if (role_lo < 0) return {};
    if (t.shape.rank == 1 && t.shape.dims[0] == p.num_threads)
      return "(" + idx.i0 + " >= " + std::to_string(role_lo) + ") & (" + idx.i0 + " < " +
             std::to_string(role_hi) + ")";
    return {};
  }

  void emit_store(const Op& op) {
    w.comment(describe(op));
    const Type& pt = type(op.operands[0]);
    DType t = pt.dtype;
    auto body = [&](const Idx& idx) {
      std::string ptr = elem(op.operands[0], idx);
      std::string value = spell_to_storage(d, t, elem(op.operands[1], idx));
      std::string cond = op.operands.size() > 2 ? elem(op.operands[2], idx) : "";
      std::string guard = role_guard(pt, idx);
      if (!guard.empty()) cond = cond.empty() ? guard : "(" + cond + ") & " + guard;
      w.line((cond.empty() ? "" : "if (" + cond + ") ") + "*" + ptr + " = " + value + ";");
    };
    if (pt.is_scalar()) {
      w.open("");
      body({});
      w.close();
      return;
    }
    for_each(pt.shape, body);
  }

  // Each lane calls the prelude's mt_atomic_<op>_<dtype>(address, [cmp,] value); masked-off
  // lanes give 0 and touch nothing.
  void emit_atomic(const Op& op) {
    w.comment(describe(op));
    const bool cas = op.kind == OpKind::ATOMIC_CAS;
    const size_t value_i = cas ? 2 : 1;
    ValueId v = op.result();
    const ValuePlan& vp = plan[v];
    DType t = type(op.operands[0]).dtype;
    std::string fn = "mt_" + std::string(op_name(op.kind)) + "_" + dtype_name(t);
    auto call = [&](const Idx& idx) {
      std::string args = elem(op.operands[0], idx);
      if (cas) args += ", " + elem(op.operands[1], idx);
      args += ", " + elem(op.operands[value_i], idx);
      std::string cond = op.operands.size() > value_i + 1 ? elem(op.operands[value_i + 1], idx) : "";
      std::string guard = role_guard(type(op.operands[0]), idx);  // as for stores
      if (!guard.empty()) cond = cond.empty() ? guard : "(" + cond + ") & " + guard;
      std::string c = fn + "(" + args + ")";
      return cond.empty() ? c : "(" + cond + ") ? " + c + " : (" + d.value(t) + ")0";
    };
    if (vp.form == Form::scalar) {
      w.line(decl(type(v), vp.name) + " = " + call({}) + ";");
      return;
    }
    if (owns_storage(v)) declare_array(v);
    const Shape& s = type(v).shape;
    for_each(s, [&](const Idx& idx) { w.line(vp.name + "[" + flat(s, idx) + "] = " + call(idx) + ";"); });
  }

  void emit_tile_store(const Op& op) {
    w.comment(describe(op));
    ValueId value = op.operands[4];
    const Shape& s = type(value).shape;
    DType t = type(op.operands[0]).dtype;
    for_each(s, [&](const Idx& idx) {
      std::string base = elem(op.operands[0], {});
      w.line("const int64_t row = (int64_t)" + elem(op.operands[1], {}) + " + " + idx.i0 +
             ", col = (int64_t)" + elem(op.operands[2], {}) + " + " + idx.i1 + ";");
      std::string store = base + "[row * " + elem(op.operands[3], {}) + " + col] = " +
                          spell_to_storage(d, t, elem(value, idx)) + ";";
      if (op.operands.size() < 7) {
        w.line(store);
        return;
      }
      w.line("if ((row >= 0) & (row < " + elem(op.operands[5], {}) + ") & (col >= 0) & (col < " +
             elem(op.operands[6], {}) + ")) " + store);
    });
  }

  void emit_dot(const Op& op) {
    w.comment(describe(op));
    ValueId a = op.operands[0], b = op.operands[1], acc = op.operands[2], out = op.results[0];
    const Shape& sa = type(a).shape;
    const Shape& so = type(out).shape;
    if (owns_storage(out)) declare_array(out);
    if (plan[out].storage != plan[acc].storage || plan[acc].form != Form::array) fill_array(out, acc);
    std::string dims = std::to_string(so.dims[0]) + ", " + std::to_string(so.dims[1]) + ", " +
                       std::to_string(sa.dims[1]);
    DType in = type(a).dtype, acc_t = type(out).dtype;
    if (is_float(in)) {
      w.line("mt_dot_f32<" + dims + ">(" + name(a) + ", " + name(b) + ", " + name(out) + ");");
      if (!d.round_to[static_cast<size_t>(acc_t)].empty()) {
        for_each(so, [&](const Idx& idx) {
          std::string e = name(out) + "[" + flat(so, idx) + "]";
          w.line(e + " = " + fill_pattern(d.round_to[static_cast<size_t>(acc_t)], e) + ";");
        });
      }
      return;
    }
    w.line("mt_dot_int<" + dims + ">(" + name(a) + ", " + name(b) + ", " + name(out) + ");");
  }

  // How one reduction accumulates: its accumulator, identity, omp clause, step and result.
  struct Reduction {
    std::string acc_type, init, clause;
    std::function<std::string(const std::string&, const std::string&)> step;
    std::function<std::string(const std::string&)> finish;
  };

  Reduction reduction(const Op& op) const {
    DType t = type(op.operands[0]).dtype;
    bool fl = is_float(t);
    Reduction r;
    // Sums accumulate in f32 (floats) or wrap (integers, through an unsigned type).
    r.acc_type = fl ? "float" : dtype_size(t) == 8 ? "uint64_t" : "uint32_t";
    if (op.kind == OpKind::REDUCE_SUM) {
      r.init = fl ? "0.0f" : "0";
      r.clause = " reduction(+ : {})";
      std::string cast = fl ? "" : "(" + r.acc_type + ")";
      r.step = [cast](const std::string& a, const std::string& e) { return a + " += " + cast + e + ";"; };
      std::string round = d.round_to[static_cast<size_t>(t)], value = d.value(t);
      r.finish = [fl, round, value](const std::string& a) {
        if (fl) return round.empty() ? a : fill_pattern(round, a);
        return "(" + value + ")" + a;
      };
      return r;
    }
    bool mx = op.kind == OpKind::REDUCE_MAX;
    r.acc_type = d.value(t);
    r.init = fl ? spell_float_literal(d, DType::f32, mx ? -HUGE_VAL : HUGE_VAL)
                : std::string(mx ? "mt_lowest<" : "mt_highest<") + r.acc_type + ">()";
    r.clause = std::string(" reduction(") + (mx ? "max" : "min") + " : {})";
    // NaNs never win (maxNum folding from the identity), so a plain compare-select suffices.
    r.step = [mx](const std::string& a, const std::string& e) {
      return a + " = " + e + (mx ? " > " : " < ") + a + " ? " + e + " : " + a + ";";
    };
    r.finish = [](const std::string& a) { return a; };
    return r;
  }

  void emit_reduce(const Op& op) {
    if (fused.count(&op)) return;
    w.comment(describe(op));
    ValueId x = op.operands[0], out = op.results[0];
    const Type& xt = type(x);
    DType t = xt.dtype;
    int64_t axis = op.attr_int("axis");
    Reduction red = reduction(op);
    const std::string& acc_type = red.acc_type;
    const std::string& init = red.init;
    const std::string& clause = red.clause;
    auto& step = red.step;
    auto& finish = red.finish;
    if (axis == -1) {
      std::string acc = name(out) + "_acc";
      w.line(acc_type + " " + acc + " = " + init + ";");
      for_each(xt.shape, [&](const Idx& idx) { w.line(step(acc, elem(x, idx))); },
               fill_pattern(clause, acc));
      w.line("const " + d.value(t) + " " + name(out) + " = " + finish(acc) + ";");
      return;
    }
    declare_array(out);
    int64_t rows = xt.shape.dims[0], cols = xt.shape.dims[1];
    if (axis == 0) {
      // Column sums: rows outer, columns inner and vectorized, in row order.
      std::string acc = name(out) + "_acc";
      w.line(acc_type + " " + acc + "[" + std::to_string(cols) + "];");
      w.line("for (int32_t c = 0; c < " + std::to_string(cols) + "; ++c) " + acc + "[c] = " + init + ";");
      for_each(xt.shape, [&](const Idx& idx) { w.line(step(acc + "[c]", elem(x, idx))); });
      w.line("for (int32_t c = 0; c < " + std::to_string(cols) + "; ++c) " + name(out) +
             "[c] = " + finish(acc + "[c]") + ";");
      return;
    }
    w.open("for (int32_t r = 0; r < " + std::to_string(rows) + "; ++r)");
    std::string acc = name(out) + "_acc";
    w.line(acc_type + " " + acc + " = " + init + ";");
    w.line("#pragma omp simd" + fill_pattern(clause, acc));
    w.open("for (int32_t c = 0; c < " + std::to_string(cols) + "; ++c)");
    auto saved = memo;
    Idx prev = canonical;
    canonical = {"r", "c"};
    w.line(step(acc, elem(x, canonical)));
    canonical = prev;
    memo = std::move(saved);
    w.close();
    w.line(name(out) + "[r] = " + finish(acc) + ";");
    w.close();
  }

  // One running accumulator per line, in interp's order: f32 for floats (each output rounds
  // once), a wrapping unsigned integer otherwise.
  void emit_scan(const Op& op) {
    w.comment(describe(op));
    ValueId x = op.operands[0], out = op.results[0];
    const Shape& s = type(x).shape;
    DType t = type(x).dtype;
    bool fl = is_float(t), sum = op.kind == OpKind::CUMSUM;
    std::string acc_type = fl ? "float" : dtype_size(t) == 8 ? "uint64_t" : "uint32_t";
    std::string round = d.round_to[static_cast<size_t>(t)];
    const int64_t axis = op.attr_int("axis");
    const int64_t len = s.rank == 2 && axis == 0 ? s.dims[0] : s.dims[s.rank - 1];
    const int64_t lines = s.numel() / len;
    std::string at = op.attr_int("reverse") ? "(" + std::to_string(len - 1) + " - n)" : "n";
    Idx idx = s.rank == 1 ? Idx{at, ""} : axis == 0 ? Idx{at, "g"} : Idx{"g", at};
    std::string acc = name(out) + "_acc";
    if (owns_storage(out)) declare_array(out);
    w.open("for (int32_t g = 0; g < " + std::to_string(lines) + "; ++g)");
    w.line(acc_type + " " + acc + " = " + (sum ? "0" : "1") + ";");
    w.open("for (int32_t n = 0; n < " + std::to_string(len) + "; ++n)");
    auto saved = memo;
    Idx prev = canonical;
    canonical = idx;
    std::string e = elem(x, idx);
    w.line(acc + " = " + acc + (sum ? " + " : " * ") + (fl ? e : "(" + acc_type + ")" + e) + ";");
    std::string value = fl ? (round.empty() ? acc : fill_pattern(round, acc)) : "(" + d.value(t) + ")" + acc;
    w.line(name(out) + "[" + flat(s, idx) + "] = " + value + ";");
    canonical = prev;
    memo = std::move(saved);
    w.close();
    w.close();
  }

  // Each printed element calls the prelude's metile_device_print; the user's text is a byte
  // array (data), never a literal in the source.
  void emit_print(const Op& op) {
    w.comment(cat("device_print at ", p.where(op.loc), "(text as data below)"));
    const size_t n = device_print_values(op);
    const bool masked = op.attr_int("masked") != 0;
    std::string head = "mt_head_" + std::to_string(++fresh);
    w.line("static const char " + head + "[] = " + byte_initializer(p.where(op.loc)) + ";");
    std::string pid = "(unsigned)mt_pid[0], (unsigned)mt_pid[1], (unsigned)mt_pid[2]";
    if (n == 0) {
      std::string label = "mt_label_" + std::to_string(++fresh);
      w.line("static const char " + label + "[] = " + byte_initializer(device_print_label(op, 0)) + ";");
      w.line("metile_device_print(" + head + ", " + label + ", " + pid + ", -1, 0, 0, 0, 0, 0.0);");
      return;
    }
    for (size_t k = 0; k < n; ++k) {
      ValueId v = op.operands[k];
      const Type& t = type(v);
      std::string label = "mt_label_" + std::to_string(++fresh);
      w.line("static const char " + label + "[] = " + byte_initializer(device_print_label(op, k)) + ";");
      bool fl = is_float(t.dtype);
      auto body = [&](const Idx& idx) {
        std::string x = elem(v, idx);
        std::string cond = masked ? elem(op.operands[n + k], idx) : "";
        std::string i = t.shape.rank >= 1 ? idx.i0 : "0", j = t.shape.rank == 2 ? idx.i1 : "0";
        std::string call = "metile_device_print(" + head + ", " + label + ", " + pid + ", " +
                           std::to_string(t.shape.rank) + ", " + i + ", " + j + ", " +
                           (fl ? "1, 0, (double)(" + spell_cast(d, t.dtype, DType::f32, x) + ")"
                               : "0, (long long)(" + x + "), 0.0") + ");";
        w.line((cond.empty() ? "" : "if (" + cond + ") ") + call);
      };
      if (t.is_scalar()) {
        w.open("");
        body({});
        w.close();
      } else {
        for_each(t.shape, body);
      }
    }
  }

  // The memory itself is declared (zero-filled) at the top of the instance: one region per
  // shared op and instance, however often the op runs.
  void emit_shared(const Op& op) {
    ValueId v = op.results[0];
    w.comment(describe(op));
    w.line(d.storage(type(v).dtype) + "* const " + name(v) + " = " + name(v) + "_mem;");
  }

  void declare_shared_memory() {
    walk(p.body, [&](const Op& op) {
      if (op.kind != OpKind::SHARED) return;
      ValueId v = op.results[0];
      w.line("alignas(64) " + d.storage(type(v).dtype) + " " + name(v) + "_mem[" +
             std::to_string(op.attr_int("size")) + "] = {};");
    });
  }

  void emit_swizzle(const Op& op) {
    w.comment(describe(op));
    const std::string& pattern = op.attr_str("pattern");
    std::string code = std::to_string(swizzle_code(pattern));
    std::string s = name(op.results[0]) + "_swizzled";
    w.line("const metile_swizzled<int32_t> " + s + " = metile_swizzle<int32_t>(" + code + ", " +
           elem(op.operands[0], {}) + ", " + elem(op.operands[1], {}) + ", mt_npg[0], mt_npg[1], " +
           std::to_string(op.attr_int("block_size")) + ");");
    w.line("const int32_t " + name(op.results[0]) + " = " + s + ".m;");
    w.line("const int32_t " + name(op.results[1]) + " = " + s + ".n;");
  }

  // A role's T-element stores write only its threads' elements; its other side effects run
  // when it has any thread. Nested roles intersect.
  void emit_role(const Op& op) {
    int64_t t = p.num_threads;
    int64_t lo = 0, hi = t;
    if (t > 0) {
      int64_t role = op.attr_int("role"), n = op.attr_int("num_roles");
      int64_t first = op.attr_int("first_sg"), count = op.attr_int("num_sgs");
      int64_t sgs = (t + 31) / 32;
      int64_t sg_begin = count == 0 ? role * sgs / n : first;
      int64_t sg_end = count == 0 ? (role + 1) * sgs / n : first + count;
      lo = std::min(sg_begin * 32, t);
      hi = std::min(sg_end * 32, t);
      if (role_lo >= 0) {
        lo = std::max(lo, role_lo);
        hi = std::min(hi, role_hi);
      }
    }
    if (lo >= hi) {
      w.comment(describe(op) + ": no thread has this role, so nothing runs");
      return;
    }
    w.comment(describe(op) + ": side effects of threads [" + std::to_string(lo) + ", " +
              std::to_string(hi) + ") only");
    w.open("");
    int64_t saved_lo = role_lo, saved_hi = role_hi;
    if (t > 0) {
      role_lo = lo;
      role_hi = hi;
    }
    emit_block(op.body());
    role_lo = saved_lo;
    role_hi = saved_hi;
    w.close();
  }

  void emit_for(const Op& op) {
    const Block& body = op.body();
    w.comment(describe(op));
    ValueId iv = body.args[0];
    // Carried values live in variables declared before the loop; the results are those
    // variables after it.
    for (size_t k = 1; k < body.args.size(); ++k) {
      ValueId c = body.args[k], init = op.operands[k + 2];
      if (plan[c].form == Form::scalar) {
        w.line(ctype(type(c)) + " " + name(c) + " = " + elem(init, {}) + ";");
      } else {
        declare_array(c);
        fill_array(c, init);
      }
    }
    // iv takes the exact integers start, start + step, ... while below end (step > 0) or above
    // it (step < 0); a 64-bit counter keeps i32 loops from wrapping near the type's limits.
    std::string t = ctype(type(iv));
    std::string start = elem(op.operands[0], {}), end = elem(op.operands[1], {}),
                step = elem(op.operands[2], {});
    std::string k = name(iv) + "_k";
    // A step of 0 would never end; it stops the instance with this loop's fault code.
    w.line("if (" + step + " == 0) return " + std::to_string(loop_sites.at(&op)) + "u;");
    bool wide = type(iv).dtype == DType::i64 || type(iv).dtype == DType::u32;
    std::string cond = "(" + step + " > 0 ? " + k + " < " + end + " : " + step + " < 0 && " + k +
                       " > " + end + ")";
    w.open("for (int64_t " + k + " = " + start + "; " + cond + "; " +
           (wide ? "" : k + " += " + step) + ")");
    w.line("const " + t + " " + name(iv) + " = (" + t + ")" + k + ";");
    emit_block(body);
    emit_yield(op);
    if (wide) w.line("if (__builtin_add_overflow(" + k + ", " + step + ", &" + k + ")) break;");
    w.close();
    if (!op.results.empty()) {
      std::string s;
      for (size_t k = 0; k < op.results.size(); ++k)
        s += (k ? ", " : "") + plan[op.results[k]].ir_name + " is " + name(op.results[k]);
      w.comment("after the loop: " + s);
    }
  }

  // Carried values take their next values "at once": a source that is itself a carried value
  // overwritten by this yield is first copied aside.
  void emit_yield(const Op& loop) {
    const Block& body = loop.body();
    const Op& yield = body.ops.back();
    std::vector<std::string> src(yield.operands.size());
    std::vector<bool> copy(yield.operands.size());
    std::map<ValueId, size_t> written;
    for (size_t k = 0; k < yield.operands.size(); ++k) {
      ValueId c = body.args[k + 1], y = yield.operands[k];
      copy[k] = plan[y].storage != plan[c].storage || plan[c].form == Form::scalar ? y != c : false;
      if (copy[k]) written[plan[c].storage] = k;
    }
    if (std::none_of(copy.begin(), copy.end(), [](bool b) { return b; })) return;
    w.comment("yield");
    for (size_t k = 0; k < yield.operands.size(); ++k) {
      if (!copy[k]) continue;
      ValueId y = yield.operands[k];
      auto hit = written.find(plan[y].storage);
      bool clobbered = hit != written.end() && hit->second != k;
      if (!clobbered) continue;
      std::string tmp = name(y) + "_next" + std::to_string(k);
      if (plan[y].form == Form::scalar) {
        w.line(decl(type(y), tmp) + " = " + name(y) + ";");
      } else {
        const Shape& s = type(y).shape;
        w.line("alignas(64) " + ctype(type(y)) + " " + tmp + "[" + std::to_string(s.numel()) + "];");
        w.line("__builtin_memcpy(" + tmp + ", " + name(y) + ", sizeof " + tmp + ");");
      }
      src[k] = tmp;
    }
    for (size_t k = 0; k < yield.operands.size(); ++k) {
      if (!copy[k]) continue;
      ValueId c = body.args[k + 1], y = yield.operands[k];
      if (plan[c].form == Form::scalar) {
        w.line(name(c) + " = " + (src[k].empty() ? elem(y, {}) : src[k]) + ";");
      } else if (!src[k].empty()) {
        w.line("__builtin_memcpy(" + name(c) + ", " + src[k] + ", sizeof " + name(c) + ");");
      } else {
        fill_array(c, y);
      }
    }
  }

  // ---- the translation unit --------------------------------------------------------------

  std::string param_decl(const Param& prm, bool storage) const {
    const Type& t = type(prm.value);
    if (t.is_ptr) return d.storage(t.dtype) + "* " + name(prm.value);
    return (storage ? d.storage(t.dtype) : d.value(t.dtype)) + " " + name(prm.value) +
           (storage ? "_arg" : "");
  }

  CpuSource run() {
    walk(p.body, [&](const Op& op) {
      for (ValueId r : op.results) defs[r] = &op;
      if (op.kind == OpKind::FOR) loop_sites.emplace(&op, static_cast<uint32_t>(loop_sites.size() + 1));
    });
    std::string fn = c_identifier(p.name);
    w.raw(embedded_file("cpu_prelude.h"));
    w.line();
    w.comment("---- kernel " + p.name + " (generated by metile from its Tile IR) ----");
    std::string params, args, entry_params;
    for (const Param& prm : p.params) {
      params += param_decl(prm, false) + ", ";
      entry_params += param_decl(prm, true) + ", ";
      const Type& t = type(prm.value);
      std::string a = t.is_ptr ? name(prm.value) : name(prm.value) + "_arg";
      args += (t.is_ptr ? a : spell_from_storage(d, t.dtype, a)) + ", ";
    }
    bool swizzles = false;
    walk(p.body, [&](const Op& op) { swizzles = swizzles || op.kind == OpKind::TILE_SWIZZLE; });
    if (swizzles) w.raw(embedded_file("swizzle.h")).line();
    bool prints = false;
    walk(p.body, [&](const Op& op) { prints = prints || op.kind == OpKind::DEVICE_PRINT; });
    if (prints)
      w.raw("#include <stdio.h>\n#define METILE_PRINT_FLUSH() fflush(stdout)\n")
          .raw(embedded_file("device_print.h"))
          .line();
    w.comment("One program instance; returns 0, or a fault code.");
    w.open(d.inline_qualifier + " uint32_t " + fn + "(" + params +
           "const int32_t mt_pid[3], const int32_t mt_npg[3])");
    declare_shared_memory();
    emit_block(p.body);
    w.line("return 0;");
    w.close();
    w.line();
    CpuSource out;
    out.entry = "metile_entry";
    out.stack_symbol = "metile_stack_bytes";
    out.stack_bytes = plan.array_bytes;
    w.line(d.kernel_qualifier + " const uint64_t " + out.stack_symbol + " = " +
           std::to_string(out.stack_bytes) + ";");
    w.line();
    w.comment("Runs program instances [begin, end) of the grid, x fastest.");
    w.open(d.kernel_qualifier + " void " + out.entry + "(" + entry_params + "mt_range* mt_r)");
    w.line("const uint32_t mt_g0 = mt_r->grid[0], mt_g1 = mt_r->grid[1];");
    w.line("const int32_t mt_npg[3] = {(int32_t)mt_g0, (int32_t)mt_g1, (int32_t)mt_r->grid[2]};");
    w.line("uint32_t mt_p0 = (uint32_t)(mt_r->begin % mt_g0);");
    w.line("uint32_t mt_p1 = (uint32_t)(mt_r->begin / mt_g0 % mt_g1);");
    w.line("uint32_t mt_p2 = (uint32_t)(mt_r->begin / ((uint64_t)mt_g0 * mt_g1));");
    w.open("for (uint64_t mt_n = mt_r->begin; mt_n < mt_r->end; ++mt_n)");
    w.line("const int32_t mt_pid[3] = {(int32_t)mt_p0, (int32_t)mt_p1, (int32_t)mt_p2};");
    w.open("if (const uint32_t mt_fault = " + fn + "(" + args + "mt_pid, mt_npg))");
    w.line("mt_r->fault = mt_fault;");
    w.line("return;");
    w.close();
    w.open("if (++mt_p0 == mt_g0)");
    w.line("mt_p0 = 0;");
    w.line("if (++mt_p1 == mt_g1) mt_p1 = 0, ++mt_p2;");
    w.close();
    w.close();
    w.close();
    out.text = w.str();
    return out;
  }
};

}  // namespace

const Op* cpu_fault_loop(const Program& program, uint32_t code) {
  const Op* found = nullptr;
  uint32_t n = 0;
  walk(program.body, [&](const Op& op) {
    if (op.kind == OpKind::FOR && ++n == code) found = &op;
  });
  return found;
}

CpuSource generate_cpu_cpp(const Program& program) {
  CpuPlan plan = plan_cpu(program);
  return Emitter(plan).run();
}

}  // namespace metile
