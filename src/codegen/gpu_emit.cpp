// The GPU IR -> C-family walker (see gpu_emit.h for the shape of the output).
//
// Before writing, it decides for every value how it is spelled:
//   literal   constants;
//   inline    a pure op with one use in the same block, written inside its user's expression
//             (per-register values only when the user sits in the same register loop, or when
//             the value is an address a load or store dereferences);
//   local     a per-register value used only inside its own register loop;
//   array     any other per-register value with more than one register;
//   scalar    one-register values (uniforms, per-thread values, SIMT tiles).
// Integer add/sub/mul on launch geometry (program ids, coords, loop counters, parameters) is
// index arithmetic and uses plain operators; data arithmetic keeps the wrapping helpers.
#include "codegen/gpu_emit_internal.h"

#include <algorithm>

#include "codegen/register_budget.h"
#include "ir/swizzle_names.h"
#include "support/error.h"

namespace metile {

std::string strip_parens(const std::string& s) {
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
    if (depth == 0 && i + 1 < s.size()) return s;  // the first group closes early
  }
  return s.substr(1, s.size() - 2);
}

namespace emit_detail {

bool is_identifier(const std::string& s) {
  if (s.empty() || isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char ch : s)
    if (!isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  return true;
}

bool is_number(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// Per-register ops with more than one register join the current register loop.
int64_t Emitter::op_regs(const gpu::Op& op) const {
  if (!gpu::has_gpu_trait(op.kind, gpu::kGPerRegister)) return 0;
  int64_t n = op.results.empty() ? 1 : regs(op.result());
  for (ValueId v : op.operands) n = std::max(n, regs(v));
  return n;
}

void Emitter::index(const gpu::Block& b, int& next_unit) {
  int group = -1;
  int64_t group_regs = 0;
  for (const gpu::Op& op : b.ops) {
    block_of_[&op] = &b;
    for (ValueId r : op.results) {
      def_[r] = &op;
      def_block_[r] = &b;
    }
    for (ValueId v : op.operands) users_[v].push_back(&op);
    if (op.kind == GpuOpKind::CONST) continue;  // literals: no statement, no break in a run
    int64_t n = op_regs(op);
    if (n > 1) {
      if (group < 0 || group_regs != n) {
        group = next_unit++;
        group_regs = n;
      }
      unit_[&op] = group;
    } else {
      group = -1;
      unit_[&op] = next_unit++;
    }
    for (const gpu::Block& r : op.regions) {
      for (ValueId a : r.args) def_block_[a] = &r;
      index(r, next_unit);
    }
  }
}

int Emitter::effective_unit(const gpu::Op* user) const {
  if (!user->results.empty() && inline_[user->result()])
    return effective_unit(users_[user->result()].front());
  return unit_.at(user);
}

const gpu::Op* Emitter::effective_user(const gpu::Op* user) const {
  if (!user->results.empty() && inline_[user->result()])
    return effective_user(users_[user->result()].front());
  return user;
}

// acc = f(acc, ...) as the loop's next value is written into acc itself when nothing reads acc
// after that point of the body, which saves a copy per carried value and reads as intended.
void Emitter::find_in_place_updates(const gpu::Op& loop) {
  const gpu::Block& body = loop.body();
  const gpu::Op& yield = body.ops.back();
  std::map<const gpu::Op*, size_t> pos;
  for (size_t i = 0; i < body.ops.size(); ++i) pos[&body.ops[i]] = i;
  for (size_t i = 0; i < yield.operands.size(); ++i) {
    ValueId v = yield.operands[i], carried = body.args[1 + i];
    const gpu::Op* d = def_[v];
    if (v == carried || d == nullptr || def_block_[v] != &body || users_[v].size() != 1) continue;
    if (d->kind != GpuOpKind::ELEMENTWISE && d->kind != GpuOpKind::LOAD) continue;
    bool ok = true;
    for (const gpu::Op* u : users_[carried]) {
      const gpu::Op* e = effective_user(u);
      ok = ok && e != &yield && block_of_.at(e) == &body && pos.at(e) <= pos.at(d);
    }
    if (ok) in_place_[v] = carried;
  }
}

void Emitter::decide() {
  size_t n = f_.values.size();
  inline_.assign(n, false);
  local_.assign(n, false);
  geometry_.assign(n, false);
  for (const gpu::GpuParam& p : f_.params) geometry_[p.value] = !f_.value(p.value).is_ptr;
  // Definitions come before uses in this order, so one forward sweep settles `geometry`.
  gpu::walk(f_.body, [&](const gpu::Op& op) {
    bool geo = op.kind == GpuOpKind::CONST || op.kind == GpuOpKind::BUILTIN ||
               op.kind == GpuOpKind::COORD || op.kind == GpuOpKind::ELEMENTWISE;
    if (op.kind == GpuOpKind::ELEMENTWISE)
      for (ValueId v : op.operands) geo = geo && geometry_[v];
    for (ValueId r : op.results) geometry_[r] = geo;
    if (op.kind == GpuOpKind::FOR) geometry_[op.body().args[0]] = true;
  });
  // Inline decisions run backwards, so a value knows whether its user is inlined.
  std::vector<const gpu::Op*> order;
  gpu::walk(f_.body, [&](const gpu::Op& op) { order.push_back(&op); });
  // A one-register value that divides by a run-time value (a bound derived from a buffer's
  // extent: a 64-bit division, a call with branches) is named once, not spelled into a
  // per-register user: the compiler did not hoist it out of the unrolled chunks of a tile_store
  // (an H100 GEMM spent 40% of its instructions there, bench/results/gemm_h100.md).
  std::vector<bool> divides(n, false);
  for (const gpu::Op* op : order) {
    if (op->kind != GpuOpKind::ELEMENTWISE || op->results.size() != 1) continue;
    bool d = (op->tile_op == OpKind::DIV || op->tile_op == OpKind::FLOORDIV || op->tile_op == OpKind::MOD) &&
             op->operands.size() == 2 &&
             (def_[op->operands[1]] == nullptr || def_[op->operands[1]]->kind != GpuOpKind::CONST);
    for (ValueId o : op->operands) d = d || divides[o];
    divides[op->result()] = d && regs(op->result()) == 1;
  }
  auto per_register = [&](const gpu::Op* u) {
    return u->results.empty() ? !u->operands.empty() && regs(u->operands[0]) > 1 : regs(u->result()) > 1;
  };
  std::vector<bool> store_feed(n, false);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const gpu::Op& op = **it;
    if (op.results.size() != 1) continue;
    ValueId v = op.result();
    bool pure = op.kind == GpuOpKind::ELEMENTWISE || op.kind == GpuOpKind::COORD ||
                op.kind == GpuOpKind::VALID || op.kind == GpuOpKind::SPLAT;
    if (op.kind == GpuOpKind::SPLAT) {  // one scalar in every register: spelled as the scalar
      inline_[v] = true;
      continue;
    }
    // Addresses and predicates that only a vector store consumes (a tile_store from fragments)
    // are spelled inside its chunk loop: as arrays they would all be live at once beside the
    // values, which costs a 64-register accumulator's store 192 more registers.
    bool feeds_store = pure && regs(v) > 1 && !users_[v].empty();
    for (const gpu::Op* u : users_[v])
      feeds_store = feeds_store && block_of_[u] == block_of_[&op] &&
                    (u->kind == GpuOpKind::VSTORE ||
                     (u->results.size() == 1 && store_feed[u->result()] && inline_[u->result()]));
    if (feeds_store) {
      inline_[v] = store_feed[v] = true;
      continue;
    }
    if (!pure || users_[v].size() != 1) continue;
    const gpu::Op* u = users_[v].front();
    if (divides[v] && per_register(u)) continue;
    if (u->kind == GpuOpKind::YIELD || block_of_[u] != block_of_[&op]) continue;
    if (std::count(u->operands.begin(), u->operands.end(), v) != 1) continue;
    bool address = op.kind == GpuOpKind::ELEMENTWISE && op.tile_op == OpKind::PTR_OFFSET &&
                   gpu::has_gpu_trait(u->kind, gpu::kGRead | gpu::kGWrite) && u->operands[0] == v;
    // An expression over one-register values reads the same anywhere in the block.
    bool portable = true;
    for (ValueId o : op.operands) portable = portable && regs(o) == 1;
    // The bounds of an async copy with an aligned body are spelled in its per-chunk path only:
    // as arrays they were computed for every chunk of every K step (an H100 GEMM's integer work).
    bool chunk_bounds = u->kind == GpuOpKind::ASYNC_COPY && u->find_attr("whole") != nullptr &&
                        (u->operands[2] == v || u->operands[3] == v);
    inline_[v] = regs(v) == 1 || address || portable || chunk_bounds || unit_.at(u) == unit_.at(&op);
  }
  // A long element-wise chain would become one expression nested past the compiler's bracket
  // limit (clang: 256); every kMaxInlineDepth-th link is materialized as a named value instead.
  constexpr int kMaxInlineDepth = 64;
  std::vector<int> depth(n, 0);
  for (const gpu::Op* op : order) {
    if (op->results.size() != 1 || !inline_[op->result()]) continue;
    int d = 1;
    for (ValueId o : op->operands) d = std::max(d, 1 + depth[o]);
    bool cut = d > kMaxInlineDepth && op->kind == GpuOpKind::ELEMENTWISE && op->tile_op != OpKind::PTR_OFFSET;
    if (cut) inline_[op->result()] = false;
    depth[op->result()] = cut ? 0 : d;
  }
  in_place_.assign(n, kNoValue);
  gpu::walk(f_.body, [&](const gpu::Op& op) {
    if (op.kind == GpuOpKind::FOR) find_in_place_updates(op);
  });
  for (ValueId v = 1; v < n; ++v) {
    if (def_[v] == nullptr || inline_[v] || regs(v) == 1 || def_[v]->kind == GpuOpKind::CONST) continue;
    if (!gpu::has_gpu_trait(def_[v]->kind, gpu::kGPerRegister)) continue;
    int home = unit_.at(def_[v]);
    bool all_home = true;
    for (const gpu::Op* u : users_[v]) all_home = all_home && effective_unit(u) == home;
    local_[v] = all_home;
  }
}

// Which parameters each pointer value may point into (stores make those parameters writable).
void Emitter::derive_params() {
  params_of_ = gpu::param_masks(f_);
  written_params_ = 0;
  gpu::walk(f_.body, [&](const gpu::Op& op) {
    if (op.kind == GpuOpKind::STORE || op.kind == GpuOpKind::VSTORE || op.kind == GpuOpKind::ATOMIC)
      written_params_ |= params_of_[op.operands[0]];
  });
  const_ptr_.assign(f_.values.size(), false);
  for (ValueId v = 1; v < f_.values.size(); ++v) {
    const gpu::Value& val = f_.value(v);
    const_ptr_[v] = val.is_ptr && val.space == AddrSpace::device && (params_of_[v] & written_params_) == 0;
  }
}

std::string Emitter::type_of(ValueId v) const {
  const gpu::Value& val = f_.value(v);
  if (val.is_ptr) return d_.pointer(val.dtype, val.space, const_ptr_[v]);
  return c_.value(val.dtype);
}

// `const float x`; pointers are `device float* x` (a leading const would bind to the pointee).
std::string Emitter::decl(ValueId v) const {
  return (f_.value(v).is_ptr ? "" : "const ") + type_of(v) + " " + name_[v];
}

std::string Emitter::expr(ValueId v, const std::string& r) const {
  const gpu::Op* op = def_[v];
  if (op != nullptr && op->kind == GpuOpKind::CONST) {
    const AttrValue& a = *op->find_attr("value");
    if (const auto* i = std::get_if<int64_t>(&a)) return spell_int_literal(c_, dtype(v), *i);
    return spell_float_literal(c_, dtype(v), std::get<double>(a));
  }
  if (inline_[v]) return spell(*op, r);
  if (regs(v) == 1 || local_[v]) return name_[v];
  return name_[v] + "[" + r + "]";
}

std::string Emitter::coord(gpu::LayoutId id, const std::string& tid, const std::string& r) const {
  const gpu::Layout& l = f_.layout(id);
  std::vector<std::string> terms;
  // Each mode of the (flat) CuTe layout contributes ((i / below) % size) * stride.
  auto modes = [&](const metile::Layout& layout, const std::string& i, int64_t total) {
    if (is_number(i)) {  // a literal register index folds to a number
      int64_t x = layout(std::stoll(i));
      if (x != 0) terms.push_back(std::to_string(x));
      return;
    }
    metile::Layout flat = flatten(layout);
    std::vector<int64_t> sizes = flat.shape().leaves(), strides = flat.stride().leaves();
    int64_t below = 1;
    for (size_t m = 0; m < sizes.size(); ++m) {
      std::string t = below == 1 ? i : "(" + i + " / " + std::to_string(below) + ")";
      if (below * sizes[m] < total) t += " % " + std::to_string(sizes[m]);
      if (sizes[m] > 1 && strides[m] != 0)
        terms.push_back(strides[m] == 1 ? t : (t.find(' ') != std::string::npos ? "(" + t + ")" : t) +
                                                  " * " + std::to_string(strides[m]));
      below *= sizes[m];
    }
  };
  auto operand = [](const std::string& x) {  // "c + 1" from a vector access's chunk loop
    return is_identifier(x) || is_number(x) ? x : "(" + x + ")";
  };
  modes(l.thr, operand(tid), f_.threads);
  modes(l.reg, operand(r), l.regs());
  if (terms.empty()) return "0";
  std::string s;
  for (const std::string& t : terms) s += (s.empty() ? "" : " + ") + t;
  // Callers splice the coordinate in as an operand: one term like "tid % 32" needs parentheses
  // too (2 * tid % 32 is (2 * tid) % 32).
  const bool whole = is_identifier(s) || is_number(s) || strip_parens(s) != s;
  return whole ? s : "(" + s + ")";
}

std::string Emitter::deref(ValueId ptr, const std::string& r) const {
  // base[o1 + o2] for a chain of inlined ptr + offset; *p otherwise.
  std::vector<std::string> offsets;
  ValueId base = ptr;
  while (inline_[base] && def_[base]->kind == GpuOpKind::ELEMENTWISE &&
         def_[base]->tile_op == OpKind::PTR_OFFSET) {
    offsets.insert(offsets.begin(), strip_parens(expr(def_[base]->operands[1], r)));
    base = def_[base]->operands[0];
  }
  if (offsets.empty()) return "*" + expr(ptr, r);
  std::string off;
  for (const std::string& o : offsets) off += (off.empty() ? "" : " + ") + o;
  return expr(base, r) + "[" + off + "]";
}

std::string Emitter::combine(Reduction reduce, DType t, const std::string& a, const std::string& b) const {
  return strip_parens(spell_binary(c_, combining_op(reduce), t, a, b));
}

std::string Emitter::spell(const gpu::Op& op, const std::string& r) const {
  auto arg = [&](size_t i) { return expr(op.operands[i], r); };
  switch (op.kind) {
    case GpuOpKind::COORD:
      return coord(f_.value(op.result()).layout, arg(0), r);
    case GpuOpKind::VALID: {
      const gpu::Layout& l = f_.layout(f_.value(op.result()).layout);
      return "(" + coord(f_.value(op.result()).layout, arg(0), r) + " < " + std::to_string(l.numel) + ")";
    }
    case GpuOpKind::SPLAT:
      return expr(op.operands[0], "0");
    case GpuOpKind::ELEMENTWISE:
      break;
    default:
      METILE_ASSERT(false, "cannot spell ", gpu::gpu_op_name(op.kind), " as an expression");
  }
  OpKind k = op.tile_op;
  DType t = dtype(op.operands[0]);
  if (k == OpKind::PTR_OFFSET) {  // (p + a) + b reads as p + a + b
    std::string base = arg(0);
    if (inline_[op.operands[0]]) base = strip_parens(base);
    return "(" + base + " + " + arg(1) + ")";
  }
  if (k == OpKind::SELECT) return spell_select(arg(0), arg(1), arg(2));
  if (k == OpKind::CAST) return spell_cast(c_, t, dtype(op.result()), arg(0));
  if (k == OpKind::BITCAST) return spell_bitcast(c_, t, dtype(op.result()), arg(0));
  // 32/64-bit bitwise ops need no narrowing cast (C only promotes the 8-bit types).
  bool wide = t == DType::i32 || t == DType::u32 || t == DType::i64;
  if (wide && (k == OpKind::BITAND || k == OpKind::BITOR || k == OpKind::BITXOR)) {
    const char* sym = k == OpKind::BITAND ? " & " : k == OpKind::BITOR ? " | " : " ^ ";
    return "(" + arg(0) + sym + arg(1) + ")";
  }
  if (wide && k == OpKind::NOT) return "(~" + arg(0) + ")";
  if (has_trait(k, kUnary))  // float math is a call: its argument needs no parentheses
    return spell_unary(c_, k, t, is_float(t) && k != OpKind::NEG ? strip_parens(arg(0)) : arg(0));
  if (index_op(op)) {
    // Integer + and * are associative even when they wrap, so operands that are themselves
    // sums (for +) or products drop their parentheses: pid_x * 256 + tid * 4 + r.
    enum { atom, sum, difference, product, other };
    auto kind = [&](ValueId x) {
      if (!inline_[x]) return atom;
      const gpu::Op& d = *def_[x];
      if (d.kind == GpuOpKind::COORD) return sum;
      if (!index_op(d)) return other;
      return d.tile_op == OpKind::ADD ? sum : d.tile_op == OpKind::SUB ? difference : product;
    };
    auto operand = [&](size_t i) {
      int o = kind(op.operands[i]);
      bool bare = o == atom || o == product;
      if (k == OpKind::ADD) bare = bare || o == sum || (i == 0 && o == difference);
      if (k == OpKind::SUB && i == 0) bare = bare || o == sum || o == difference;
      return bare ? strip_parens(arg(i)) : arg(i);
    };
    const char* sym = k == OpKind::ADD ? " + " : k == OpKind::SUB ? " - " : " * ";
    return "(" + operand(0) + sym + operand(1) + ")";
  }
  return spell_binary(c_, k, t, arg(0), arg(1));
}

void Emitter::statement(const gpu::Op& op, const std::string& r, bool in_loop) {
  if (op.kind == GpuOpKind::CONST) return;
  if (op.kind == GpuOpKind::PRINT) {
    print(op, r);
    return;
  }
  if (op.kind == GpuOpKind::STORE) {
    ValueId ptr = op.operands[0], v = op.operands[1];
    std::string s = deref(ptr, r) + " = " + strip_parens(spell_to_storage(c_, dtype(v), expr(v, r))) + ";";
    if (op.operands.size() > 2) s = "if (" + strip_parens(expr(op.operands[2], r)) + ") " + s;
    w_.line(s);
    return;
  }
  ValueId v = op.result();
  if (inline_[v]) return;
  std::string value;
  if (op.kind == GpuOpKind::ATOMIC) {
    // mt_atomic_<op>(address, [cmp,] value): the dialect's prelude spells each one.
    size_t n = op.tile_op == OpKind::ATOMIC_CAS ? 3 : 2;
    std::string args = "&" + deref(op.operands[0], r);
    for (size_t i = 1; i < n; ++i) args += ", " + strip_parens(expr(op.operands[i], r));
    value = std::string("mt_") + std::string(op_name(op.tile_op)) + "(" + args + ")";
    if (op.operands.size() > n)
      value = spell_select(expr(op.operands[n], r), value, spell_zero(c_, dtype(v)));
  } else if (op.kind == GpuOpKind::LOAD) {
    value = spell_from_storage(c_, dtype(v), deref(op.operands[0], r));
    if (op.operands.size() > 1) value = spell_select(expr(op.operands[1], r), value, expr(op.operands[2], r));
  } else {
    value = spell(op, r);
  }
  value = strip_parens(value);
  if (ValueId into = in_place_[v]; into != kNoValue) {
    w_.line(name_[into] + (regs(v) > 1 ? "[" + r + "]" : "") + " = " + value + ";");
    return;
  }
  // A copy of a variable that never changes reuses its name (loop-carried variables change).
  if (regs(v) == 1 && is_identifier(value) && !carried_names_.count(value)) {
    name_[v] = value;
    return;
  }
  if (in_loop && !local_[v] && regs(v) > 1) w_.line(name_[v] + "[" + r + "] = " + value + ";");
  else w_.line(decl(v) + " = " + value + ";");
}

// metile_device_print(head, label, px, py, pz, rank, i, j, kind, ival, fval): the text arrays
// were written before the kernel (see run()).
void Emitter::print(const gpu::Op& op, const std::string& r) {
  auto arg = [&](size_t i) { return strip_parens(expr(op.operands[i], r)); };
  ValueId v = op.operands[6];
  DType t = dtype(v);
  const int64_t rank = op.attr_int("rank");
  const bool fl = is_float(t);
  std::string ival = "0", fval = "0.0";
  if (rank >= 0 && fl) fval = "(double)(" + strip_parens(spell_cast(c_, t, DType::f32, expr(v, r))) + ")";
  if (rank >= 0 && !fl) ival = "(long long)(" + arg(6) + ")";
  std::string call = "metile_device_print(" + texts_.at(op.attr_str("head")) + ", " +
                     texts_.at(op.attr_str("label")) + ", (unsigned)(" + arg(1) + "), (unsigned)(" +
                     arg(2) + "), (unsigned)(" + arg(3) + "), " + std::to_string(rank) +
                     ", (long long)(" + arg(4) + "), (long long)(" + arg(5) + "), " +
                     (fl ? "1" : "0") + ", " + ival + ", " + fval + ");";
  w_.line("if (" + arg(0) + ") " + call);
}

void Emitter::group(const std::vector<const gpu::Op*>& ops, int64_t n) {
  for (const gpu::Op* op : ops)
    for (ValueId v : op->results)
      if (!inline_[v] && !local_[v] && in_place_[v] == kNoValue) w_.line(type_of(v) + " " + name_[v] + "[" + std::to_string(n) + "];");
  w_.line(d_.unroll());
  w_.open("for (int r = 0; r < " + std::to_string(n) + "; ++r)");
  for (const gpu::Op* op : ops) statement(*op, "r", true);
  w_.close();
}

std::string Emitter::fresh_name(const std::string& stem) {
  std::string n = stem;
  for (int i = 1; taken_.count(n); ++i) n = stem + std::to_string(i);
  taken_.insert(n);
  return n;
}

void Emitter::assign_all(const std::vector<ValueId>& dst, const std::vector<ValueId>& src) {
  // Sources that are themselves destinations (a swap of carried values) go through copies.
  std::vector<std::string> from(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == dst[i]) continue;
    bool clobbered = false;
    for (size_t j = 0; j < i; ++j) clobbered = clobbered || dst[j] == src[i];
    if (std::find(dst.begin(), dst.end(), src[i]) != dst.end()) clobbered = true;
    if (!clobbered) continue;
    from[i] = name_[dst[i]] + "_next";
    int64_t n = regs(src[i]);
    if (n == 1) {
      w_.line("const " + type_of(src[i]) + " " + from[i] + " = " + name_[src[i]] + ";");
    } else {
      w_.line(type_of(src[i]) + " " + from[i] + "[" + std::to_string(n) + "];");
      w_.line("for (int r = 0; r < " + std::to_string(n) + "; ++r) " + from[i] + "[r] = " + name_[src[i]] + "[r];");
    }
  }
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == dst[i] || in_place_[src[i]] == dst[i]) continue;
    int64_t n = regs(dst[i]);
    auto value = [&](const std::string& r) {
      if (!from[i].empty()) return n == 1 ? from[i] : from[i] + "[" + r + "]";
      return strip_parens(expr(src[i], r));
    };
    if (n == 1) {
      w_.line(name_[dst[i]] + " = " + value("0") + ";");
    } else {
      w_.line(d_.unroll());
      w_.line("for (int r = 0; r < " + std::to_string(n) + "; ++r) " + name_[dst[i]] + "[r] = " + value("r") + ";");
    }
  }
}

void Emitter::loop(const gpu::Op& op) {
  const gpu::Block& body = op.body();
  std::vector<ValueId> carried(body.args.begin() + 1, body.args.end());
  std::vector<ValueId> inits(op.operands.begin() + 3, op.operands.end());
  for (size_t i = 0; i < carried.size(); ++i) {
    name_[op.results[i]] = name_[carried[i]];  // the loop's results are its carried variables
    int64_t n = regs(carried[i]);
    w_.line(type_of(carried[i]) + " " + name_[carried[i]] + (n > 1 ? "[" + std::to_string(n) + "]" : "") + ";");
  }
  assign_all(carried, inits);
  ValueId iv = body.args[0];
  std::string step = expr(op.operands[2], "0"), end = expr(op.operands[1], "0");
  std::string cond;
  const gpu::Op* s = def_[op.operands[2]];
  if (s != nullptr && s->kind == GpuOpKind::CONST)
    cond = std::string(name_[iv]) + (std::get<int64_t>(*s->find_attr("value")) > 0 ? " < " : " > ") + end;
  else
    cond = "(" + step + " > 0 ? " + name_[iv] + " < " + end + " : " + step + " < 0 && " + name_[iv] +
           " > " + end + ")";  // a runtime step of 0 runs no iteration (it never hangs)
  w_.open("for (" + type_of(iv) + " " + name_[iv] + " = " + strip_parens(expr(op.operands[0], "0")) + "; " +
          cond + "; " + name_[iv] + " += " + step + ")");
  block(body);
  assign_all(carried, body.ops.back().operands);
  w_.close();
}

void Emitter::cancel_point(int64_t every) {
  const std::string check = d_.cancel_check(every);
  METILE_ASSERT(!check.empty(), "cancel_point reached a dialect that cannot stop a kernel");
  w_.line(check);
}

void Emitter::standalone(const gpu::Op& op) {
  ValueId v = op.results.empty() ? kNoValue : op.result();
  switch (op.kind) {
    case GpuOpKind::ALLOC:
    case GpuOpKind::YIELD:
      return;
    case GpuOpKind::BUILTIN:
      w_.line("const int " + name_[v] + " = " + d_.builtin(op.builtin, static_cast<int>(op.attr_int("axis"))) + ";");
      return;
    case GpuOpKind::BARRIER:
      if (op.find_attr("async_proxy") != nullptr && !d_.async_proxy_fence().empty())
        w_.line(d_.async_proxy_fence() + ";");
      if (op.find_attr("id") != nullptr) {  // one warp role's: orders memory among its threads
        const std::string named =
            d_.named_barrier(op.attr_int("id"), op.attr_int("threads"), op.find_attr("device") != nullptr);
        if (named.empty()) fail(METILE_ERROR_INTERNAL, "emit", f_.name, ": the dialect has no named barriers (warp_specialize)");
        w_.line(named + ";");
      } else if (op.find_attr("device") == nullptr && op.find_attr("memory") != nullptr)
        w_.line(d_.group_memory_barrier() + ";");
      else
        w_.line(d_.barrier(op.find_attr("device") != nullptr) + ";");
      return;
    case GpuOpKind::SHUFFLE_XOR:
    case GpuOpKind::SHUFFLE:
      if (regs(v) > 1) {  // a tile, register by register
        w_.line(type_of(v) + " " + name_[v] + "[" + std::to_string(regs(v)) + "];");
        w_.line(d_.unroll());
        w_.line("for (int r = 0; r < " + std::to_string(regs(v)) + "; ++r) " + name_[v] + "[r] = " +
                d_.shuffle(op.kind == GpuOpKind::SHUFFLE_XOR, dtype(v), expr(op.operands[0], "r"),
                           strip_parens(expr(op.operands[1], "0"))) + ";");
        return;
      }
      w_.line(decl(v) + " = " +
              d_.shuffle(op.kind == GpuOpKind::SHUFFLE_XOR, dtype(v), expr(op.operands[0], "0"),
                         strip_parens(expr(op.operands[1], "0"))) + ";");
      return;
    case GpuOpKind::SIMD_REDUCE: {
      std::string x = strip_parens(expr(op.operands[0], "0"));
      // "lanes": x repeats every `lanes` lanes, so the shuffle tree starts at lanes / 2.
      const int64_t lanes = op.find_attr("lanes") != nullptr ? op.attr_int("lanes") : f_.simd_width;
      std::string native = lanes == f_.simd_width ? d_.simd_reduce(op.reduce, dtype(v), x) : "";
      if (!native.empty()) {
        w_.line(decl(v) + " = " + native + ";");
        return;
      }
      w_.line(type_of(v) + " " + name_[v] + " = " + x + ";");
      w_.line(d_.unroll());
      w_.open("for (int m = " + std::to_string(lanes / 2) + "; m > 0; m >>= 1)");
      // The shuffle gets its own statement: `combine` may spell its operand twice (a ternary for
      // min/max), and a shuffle evaluated on one side only would diverge within the simdgroup.
      w_.line("const " + type_of(v) + " " + name_[v] + "_other = " + d_.shuffle(true, dtype(v), name_[v], "m") + ";");
      w_.line(name_[v] + " = " + combine(op.reduce, dtype(v), name_[v], name_[v] + "_other") + ";");
      w_.close();
      return;
    }
    case GpuOpKind::REG_REDUCE: {
      ValueId x = op.operands[0];
      if (op.find_attr("fold") != nullptr) {  // into the registers of a tile: straight-line code
        std::vector<int64_t> fold = gpu::parse_register_list(op.attr_str("fold"), "reg_reduce fold");
        std::vector<bool> started(static_cast<size_t>(regs(v)), false);
        w_.line(type_of(v) + " " + name_[v] + (regs(v) > 1 ? "[" + std::to_string(regs(v)) + "]" : "") + ";");
        for (int64_t r = 0; r < regs(x); ++r) {
          std::string to = regs(v) > 1 ? name_[v] + "[" + std::to_string(fold[r]) + "]" : name_[v];
          std::string from = strip_parens(expr(x, std::to_string(r)));
          w_.line(to + " = " + (started[fold[r]] ? combine(op.reduce, dtype(v), to, from) : from) + ";");
          started[fold[r]] = true;
        }
        return;
      }
      w_.line(type_of(v) + " " + name_[v] + " = " + strip_parens(expr(x, "0")) + ";");
      w_.line(d_.unroll());
      w_.line("for (int r = 1; r < " + std::to_string(regs(x)) + "; ++r) " + name_[v] + " = " +
              combine(op.reduce, dtype(v), name_[v], expr(x, "r")) + ";");
      return;
    }
    case GpuOpKind::REG_GATHER: {  // register renaming: the C compiler moves nothing
      std::vector<int64_t> from = gpu::parse_register_list(op.attr_str("from"), "reg_gather from");
      if (regs(v) == 1) {
        w_.line(decl(v) + " = " + strip_parens(expr(op.operands[0], std::to_string(from[0]))) + ";");
        return;
      }
      w_.line(type_of(v) + " " + name_[v] + "[" + std::to_string(regs(v)) + "];");
      for (int64_t r = 0; r < regs(v); ++r)
        w_.line(name_[v] + "[" + std::to_string(r) + "] = " +
                strip_parens(expr(op.operands[0], std::to_string(from[r]))) + ";");
      return;
    }
    case GpuOpKind::VLOAD:
    case GpuOpKind::VSTORE:
      vector_access(op);
      return;
    case GpuOpKind::SWIZZLE: {
      const char* code = swizzle_symbol(op.attr_str("pattern"));
      METILE_ASSERT(code != nullptr, "unknown swizzle pattern ", op.attr_str("pattern"));
      std::string s = name_[op.results[0]] + "_" + name_[op.results[1]];
      std::string args;
      for (ValueId a : op.operands) args += ", " + strip_parens(expr(a, "0"));
      w_.line("const metile_swizzled<int> " + s + " = metile_swizzle<int>(" + code +
              args + ", " + std::to_string(op.attr_int("block")) + ");");
      w_.line("const int " + name_[op.results[0]] + " = " + s + ".m;");
      w_.line("const int " + name_[op.results[1]] + " = " + s + ".n;");
      return;
    }
    case GpuOpKind::FOR:
      loop(op);
      return;
    case GpuOpKind::IF:
      branch(op);
      return;
    case GpuOpKind::WHILE:
      while_loop(op);
      return;
    case GpuOpKind::WARP_SPECIALIZE:
      warp_roles(op);
      return;
    case GpuOpKind::SETMAXNREG:
      if (std::string st = d_.set_max_registers(op.attr_int("count"), op.attr_int("inc") != 0); !st.empty())
        w_.line(st + ";");
      return;
    case GpuOpKind::CANCEL_POINT:
      cancel_point(op.attr_int("every"));
      return;
    case GpuOpKind::MMA:
      mma(op);
      return;
    case GpuOpKind::ASYNC_COPY:
      async_copy(op);
      return;
    case GpuOpKind::ASYNC_COMMIT:
    case GpuOpKind::ASYNC_WAIT: {
      std::string st = d_.async_sync(op.kind == GpuOpKind::ASYNC_WAIT ? op.attr_int("pending") : -1);
      if (!st.empty()) w_.line(st + ";");
      return;
    }
    case GpuOpKind::CONVERT_LAYOUT:
      METILE_ASSERT(false, "convert_layout reached the emitter: run the lower-convert-layout pass first");
      return;
    case GpuOpKind::WARPGROUP_SYNC:
      if (std::string st = d_.warpgroup_sync(); !st.empty()) w_.line(st + ";");
      return;
    case GpuOpKind::MBAR_INIT:
    case GpuOpKind::TMA_LOAD:
    case GpuOpKind::MBAR_WAIT:
    case GpuOpKind::MBAR_ARRIVE:
    case GpuOpKind::WARPGROUP_WAIT:
    case GpuOpKind::OPAQUE: {
      std::vector<std::string> operands;
      for (ValueId v : op.operands) operands.push_back(expr(v, "0"));
      d_.tma(w_, op, operands, op.operands.empty() ? DType::invalid : dtype(op.operands[0]),
             op.results.empty() ? "" : name_[op.result()]);
      return;
    }
    default:
      statement(op, "0", false);  // one-register per-register ops
  }
}

void Emitter::block(const gpu::Block& b) {
  for (size_t i = 0; i < b.ops.size();) {
    const gpu::Op& op = b.ops[i];
    int64_t n = op_regs(op);
    if (op.kind == GpuOpKind::CONST || n <= 1) {
      if (op.kind != GpuOpKind::CONST) standalone(op);
      ++i;
      continue;
    }
    std::vector<const gpu::Op*> run;
    int unit = unit_.at(&op);
    for (; i < b.ops.size(); ++i) {
      const gpu::Op& o = b.ops[i];
      if (o.kind == GpuOpKind::CONST) continue;
      if (unit_.at(&o) != unit) break;
      run.push_back(&o);
    }
    bool all_inline = true;
    for (const gpu::Op* o : run)
      all_inline = all_inline && !o->results.empty() && inline_[o->result()];
    if (!all_inline) group(run, n);
  }
}

std::string Emitter::run(KernelInterface* k) {
  size_t n = f_.values.size();
  def_.assign(n, nullptr);
  def_block_.assign(n, nullptr);
  users_.assign(n, {});
  int next_unit = 0;
  index(f_.body, next_unit);
  std::vector<std::string> reserved = d_.reserved();
  reserved.insert(reserved.end(), {"r", "c", "j", "m", "v", "mma_lane", "mma_warp", "mma_g", "mma_t",
                                   "mma_row", "mma_col", "mma_k", "mma_i", "mma_j", "mma_a",
                                   "mma_b", "mma_c", "mma_p", "mma_q", "mma_lr", "mma_lh",
                                   "mma_row0", "mma_col0"});
  gpu::Function named = f_;  // parameters keep C-safe spellings of their names
  auto safe = [](const std::string& n) { return c_identifier(n.empty() ? "t" : n); };
  for (gpu::GpuParam& p : named.params) named.value(p.value).stem = safe(p.name);
  for (gpu::Value& v : named.values) v.stem = safe(v.stem);
  for (gpu::GpuParam& p : named.params) p.name = safe(p.name);
  name_ = gpu::name_values(named, reserved);
  taken_.insert(name_.begin(), name_.end());
  gpu::walk(f_.body, [&](const gpu::Op& op) {
    if (op.kind == GpuOpKind::FOR)
      for (size_t i = 1; i < op.body().args.size(); ++i) carried_names_.insert(name_[op.body().args[i]]);
    // An if's results and a while's variables are assigned on several paths, too.
    if (op.kind == GpuOpKind::IF)
      for (ValueId r : op.results) carried_names_.insert(name_[r]);
    if (op.kind == GpuOpKind::WHILE)
      for (const gpu::Block& r : op.regions)
        for (ValueId a : r.args) carried_names_.insert(name_[a]);
  });
  taken_.insert(reserved.begin(), reserved.end());
  decide();
  derive_params();

  k->name = safe(f_.name);
  if (std::find(reserved.begin(), reserved.end(), k->name) != reserved.end()) k->name += "_kernel";
  k->threads = gpu::launch_threads(f_);
  k->warp_roles = k->threads != f_.threads;
  k->max_registers = f_.max_registers;
  gpu::walk(f_.body, [&](const gpu::Op& op) {
    if (op.kind == GpuOpKind::BUILTIN) k->builtins.insert(op.builtin);
    if (op.kind == GpuOpKind::ALLOC) {
      const gpu::SharedArray a = gpu::shared_array(f_, op);
      k->shared.push_back({name_[op.result()], dtype(op.result()), a.stages * a.stage_elements(), a.offset});
    }
  });
  for (size_t i = 0; i < f_.params.size(); ++i) {
    const gpu::Value& v = f_.value(f_.params[i].value);
    bool w = i >= 64 || (written_params_ >> i) & 1;
    k->params.push_back({name_[f_.params[i].value], v.dtype, v.is_ptr, v.is_ptr && w});
  }
  PreludeUses uses;
  gpu::walk(f_.body, [&](const gpu::Op& op) {
    uses.swizzle = uses.swizzle || op.kind == GpuOpKind::SWIZZLE;
    if (op.kind == GpuOpKind::MMA) {
      uses.atoms.insert(mma_atom_kind(op));
      // FP8's two-level accumulation keeps a second tile of partial sums beside it (mma_p).
      const int64_t tiles = op.find_attr("promote") != nullptr ? 2 : 1;
      k->accumulator_registers = std::max(k->accumulator_registers, tiles * regs(op.result()));
    }
    k->cancel = k->cancel || op.kind == GpuOpKind::CANCEL_POINT;
    if (op.kind == GpuOpKind::TMA_LOAD) {  // the maps' texts by index (GpuDialect::tma)
      uses.tma = true;
      uses.tma_3d = uses.tma_3d || op.find_attr("slabs") != nullptr;
      const size_t map = static_cast<size_t>(op.attr_int("map"));
      if (k->tensor_maps.size() <= map) k->tensor_maps.resize(map + 1);
      k->tensor_maps[map] = op.attr_str("spec");
    }
  });
  auto fp8 = [](const gpu::Value& v) { return is_f8(v.dtype); };
  uses.float8 = std::any_of(f_.values.begin(), f_.values.end(), fp8);
  uses.cancel = k->cancel;
  k->loop_registers = loop_live_registers(f_);
  w_.raw(d_.prelude(uses));
  gpu::walk(f_.body, [&](const gpu::Op& op) {
    if (op.kind != GpuOpKind::PRINT) return;
    if (texts_.empty()) w_.raw(d_.print_prelude());
    for (const char* a : {"head", "label"}) {
      const std::string& text = op.attr_str(a);
      if (texts_.count(text)) continue;
      std::string name = "mt_text_" + std::to_string(texts_.size());
      texts_.emplace(text, name);
      w_.line(d_.text_array(name, text));
    }
  });
  if (!texts_.empty()) w_.line();
  d_.open_kernel(w_, *k);
  if (k->cancel) w_.line(d_.cancel_prologue());
  block(f_.body);
  w_.close();
  return w_.str();
}

}  // namespace emit_detail

std::string emit_gpu_kernel(const gpu::Function& f, const GpuDialect& d, KernelInterface* iface) {
  emit_detail::Emitter e(f, d);
  return e.run(iface);
}

}  // namespace metile
