// The cpu C++ of one element: the expression of a value at an element index (inline values are
// written as `const` locals where first needed and reused by index), and the loop nests over a
// tile's elements that everything else is written inside.
#include <cmath>

#include "codegen/cpu_cpp_emitter.h"
#include "support/error.h"

namespace metile::cpu_cpp {

std::string CpuEmitter::ctype(const Type& t) const {
  return t.is_ptr ? d.storage(t.dtype) + "*" : d.value(t.dtype);
}

// A declaration of an immutable local.
std::string CpuEmitter::decl(const Type& t, const std::string& n) const {
  return t.is_ptr ? ctype(t) + " const " + n : "const " + ctype(t) + " " + n;
}

std::string CpuEmitter::flat(const Shape& s, const Idx& idx) {
  if (s.rank <= 1) return idx.i0;
  return "(" + idx.i0 + " * " + std::to_string(s.dims[1]) + " + " + idx.i1 + ")";
}

// The expression of value `v` at element `idx`, writing the statements it needs.
std::string CpuEmitter::elem(ValueId v, const Idx& idx) {
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

// Ops whose op_elem reads every operand at the result's own element.
bool CpuEmitter::same_index_operands(OpKind k) {
  return has_trait(k, kBinary | kCompare | kUnary) || k == OpKind::CAST ||
         k == OpKind::BITCAST || k == OpKind::SELECT || k == OpKind::PTR_OFFSET || k == OpKind::LOAD;
}

// Declares the inline operands `op` reads at `idx` in post-order with an explicit stack, so
// that a fused element-wise chain of any length does not recurse once per op (a 10k-op chain
// overflowed the host's stack); op_elem then finds every operand memoized.
void CpuEmitter::emit_operands_first(const Op& root, const Idx& idx) {
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

Idx CpuEmitter::broadcast_idx(const Shape& from, const Shape& to, const Idx& idx) const {
  std::string parts[2] = {idx.i0, idx.i1};
  std::string out[2];
  int off = to.rank - from.rank;
  for (int j = 0; j < from.rank; ++j)
    out[j] = (from.dims[j] == 1 && to.dims[j + off] != 1) ? "0" : parts[j + off];
  return {out[0], out[1]};
}

bool CpuEmitter::is_const_zero(ValueId v) const {
  auto it = defs.find(v);
  if (it == defs.end() || it->second->kind != OpKind::CONST) return false;
  const AttrValue* a = it->second->find_attr("value");
  if (auto* iv = std::get_if<int64_t>(a)) return *iv == 0;
  return false;
}

std::string CpuEmitter::offset_of(ValueId v, const Idx& idx) {
  std::string o = elem(v, idx);
  return type(v).dtype == DType::i64 ? o : "(int64_t)" + o;
}

// The value of `op`'s single result at `idx`, as an expression over operand elements.
std::string CpuEmitter::op_elem(const Op& op, const Idx& idx) {
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
    case OpKind::BITCAST: return spell_bitcast(d, in, type(op.results[0]).dtype, arg(0));
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
std::string CpuEmitter::lane_elem(const Op& op, const std::string& j) {
  ValueId x = op.operands[0];
  if (type(x).is_scalar()) return elem(x, {});
  return elem(x, {j, ""});
}

// Element (r, c) of a tile_load: row-major at (row + r, col + c), zero outside the bounds.
std::string CpuEmitter::tile_elem(const Op& op, const Idx& idx) {
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

// Writes loops over `s` and calls `body` with the element index inside the innermost one.
void CpuEmitter::for_each(const Shape& s, const std::function<void(const Idx&)>& body,
                          const std::string& clause) {
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

void CpuEmitter::declare_array(ValueId v) {
  const Type& t = type(v);
  w.line("alignas(64) " + ctype(t) + " " + name(v) + "[" + std::to_string(t.shape.numel()) + "];");
}

// Fills the array of `target` with the elements of `source` (an expression source).
void CpuEmitter::fill_array(ValueId target, ValueId source) {
  const Shape& s = type(target).shape;
  for_each(s, [&](const Idx& idx) {
    w.line(name(target) + "[" + flat(s, idx) + "] = " + elem(source, idx) + ";");
  });
}

}  // namespace metile::cpu_cpp
