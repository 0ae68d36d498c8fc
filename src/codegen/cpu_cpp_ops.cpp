// The cpu C++ of the ops that write statements rather than element expressions: stores and
// atomics, dot, reductions (fused into the loop that fills their operand where possible),
// shared memory, swizzles, simdgroup roles, `for` loops with their carried values and run-time
// `if` / `while`.
#include <cmath>

#include "codegen/cpu_cpp_emitter.h"
#include "ir/dot_precision.h"
#include "ir/swizzle_names.h"
#include "support/error.h"

namespace metile::cpu_cpp {

void CpuEmitter::emit_block(const Block& b) {
  for (size_t i = 0; i < b.ops.size(); ++i) {
    rest.clear();
    for (size_t j = i + 1; j < b.ops.size(); ++j) rest.push_back(&b.ops[j]);
    emit_op(b.ops[i]);
  }
}

void CpuEmitter::emit_op(const Op& op) {
  switch (op.kind) {
    case OpKind::FOR: return emit_for(op);
    case OpKind::IF: return emit_if(op);
    case OpKind::WHILE: return emit_while(op);
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
  std::vector<Fold> specs;
  for (const Op* r : reds) {
    w.comment(describe(*r) + ": accumulated in the loop below");
    specs.push_back(fold(*r));
    std::string acc = name(r->results[0]) + "_acc";
    w.line(specs.back().acc_type + " " + acc + " = " + specs.back().init + ";");
    clause += fill_pattern(specs.back().clause, acc);
    fused.insert(r);
  }
  if (op.kind == OpKind::TILE_LOAD && reds.empty() && op.operands.size() >= 6 && s.rank == 2)
    return emit_tile_load_rows(op);
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
std::vector<const Op*> CpuEmitter::fusable_reductions(const Op& op, std::vector<const Op*> rest) const {
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
bool CpuEmitter::reads_only(ValueId x, ValueId v, const std::set<ValueId>& later) const {
  if (x == v) return true;
  if (later.count(x)) return false;
  if (plan[x].form != Form::inline_) return plan[x].storage != plan[v].storage;
  const Op& o = *def_op(x);
  bool aligned = has_trait(o.kind, kBinary | kCompare | kUnary) || o.kind == OpKind::CAST ||
                 o.kind == OpKind::BITCAST || o.kind == OpKind::SELECT || o.kind == OpKind::ARANGE;
  for (ValueId a : o.operands) {
    if (!aligned && (a == v || plan[a].form == Form::inline_)) return false;
    if (!reads_only(a, v, later)) return false;
  }
  return true;
}

// Extra condition limiting a T-element side effect to the current role's threads.
std::string CpuEmitter::role_guard(const Type& t, const Idx& idx) const {
  if (role_lo < 0) return {};
  if (t.shape.rank == 1 && t.shape.dims[0] == p.num_threads)
    return "(" + idx.i0 + " >= " + std::to_string(role_lo) + ") & (" + idx.i0 + " < " +
           std::to_string(role_hi) + ")";
  return {};
}

void CpuEmitter::emit_store(const Op& op) {
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
  std::vector<UniformLeaf> leaves;
  if (pt.shape.rank == 1 && role_lo < 0) leaves = uniform_leaves(op);
  if (leaves.empty()) return emit_store_loop(op, body);
  // The compares that hold at both ends hold throughout: a copy of the loop without them.
  auto saved = memo;
  w.open("");
  w.open("if (" + uniform_condition(leaves, pt.shape.dims[0]) + ")");
  auto ends = memo;
  for (const UniformLeaf& l : leaves) memo[{l.leaf, Idx{"i", ""}.key()}] = "true";
  emit_store_loop(op, body);
  memo = std::move(ends);
  w.close();
  w.open("else");
  emit_store_loop(op, body);
  w.close();
  w.close();
  memo = std::move(saved);
}

void CpuEmitter::emit_store_loop(const Op& op, const std::function<void(const Idx&)>& body) {
  if (streamable(op)) return emit_streamed_store(op, body);
  for_each(type(op.operands[0]).shape, body);
}

// Elements a streamed store computes before writing them out. Measured on vector add (2^25
// f32): pieces of 16 elements lose the gain, 1024 or more let the loads and the stores take turns
// instead of overlapping; 64 (one to four cache lines) keeps both going.
constexpr int64_t kStreamPiece = 64;

// How far apart the addresses (or integers) of consecutive elements of a 1-D value are, where the
// program says so: arange steps by 1, scalars and their broadcasts by 0, sums and differences add
// up. Integer casts keep the step except where they wrap, which the streamed store checks at run time.
std::optional<int64_t> CpuEmitter::stride(ValueId v) const {
  const Type& t = type(v);
  if (t.is_scalar()) return 0;
  auto it = defs.find(v);
  if (t.shape.rank != 1 || it == defs.end()) return std::nullopt;
  const Op& o = *it->second;
  auto both = [&](int sign) -> std::optional<int64_t> {
    std::optional<int64_t> a = stride(o.operands[0]), b = stride(o.operands[1]);
    if (!a || !b) return std::nullopt;
    return *a + sign * *b;
  };
  switch (o.kind) {
    case OpKind::ARANGE: return 1;
    case OpKind::BROADCAST: {
      const Type& from = type(o.operands[0]);
      return from.is_scalar() || from.shape.numel() == 1 ? std::optional<int64_t>(0)
                                                          : stride(o.operands[0]);
    }
    case OpKind::CAST:
      if (is_int(t.dtype) && is_int(type(o.operands[0]).dtype)) return stride(o.operands[0]);
      return std::nullopt;
    case OpKind::ADD: return is_int(t.dtype) ? both(1) : std::nullopt;
    case OpKind::SUB: return is_int(t.dtype) ? both(-1) : std::nullopt;
    case OpKind::PTR_OFFSET: return both(1);
    default: return std::nullopt;
  }
}

// A store may bypass the cache when it writes a 1-D tile of consecutive addresses. Not in
// programs with atomics (another program may read what this one stored once it sees the atomic)
// nor inside simdgroup roles.
bool CpuEmitter::streamable(const Op& store) const {
  const Type& pt = type(store.operands[0]);
  return !atomics && role_lo < 0 && pt.shape.rank == 1 && pt.shape.dims[0] >= kStreamPiece &&
         stride(store.operands[0]) == std::optional<int64_t>(1);
}

// When the launch streams (mt_stream: it touches more memory than the cache holds) and the tile's
// addresses did not wrap, the tile goes out in pieces: each is computed into a local buffer and,
// when none of its elements is masked off, written with non-temporal stores, which neither read
// the destination's lines first nor evict what the cache holds. Otherwise the usual loop runs.
void CpuEmitter::emit_streamed_store(const Op& op, const std::function<void(const Idx&)>& body) {
  const Type& pt = type(op.operands[0]);
  const std::string n = std::to_string(pt.shape.dims[0]), piece = std::to_string(kStreamPiece);
  const bool masked = op.operands.size() > 2;
  streams = true;
  auto saved = memo;
  w.open("");
  std::string first = elem(op.operands[0], {"0", ""});
  std::string last = elem(op.operands[0], {std::to_string(pt.shape.dims[0] - 1), ""});
  w.open("if (mt_stream && " + last + " == " + first + " + " + std::to_string(pt.shape.dims[0] - 1) + ")");
  w.line("alignas(64) " + d.storage(pt.dtype) + " mt_sv[" + piece + "];");
  if (masked) w.line("unsigned char mt_sm[" + piece + "];");
  w.open("for (int32_t mt_b = 0; mt_b < " + n + "; mt_b += " + piece + ")");
  w.line("const int32_t mt_e = mt_b + " + piece + " < " + n + " ? mt_b + " + piece + " : " + n + ";");
  w.line("int32_t mt_all = 1;");
  {
    auto outer = memo;
    Idx prev = canonical;
    canonical = {"i", ""};
    w.open("for (int32_t i = mt_b; i < mt_e; ++i)");
    w.line("mt_sv[i - mt_b] = " + spell_to_storage(d, pt.dtype, elem(op.operands[1], canonical)) + ";");
    if (masked) {
      std::string cond = elem(op.operands[2], canonical);
      w.line("mt_sm[i - mt_b] = " + cond + ";");
      w.line("mt_all &= " + cond + ";");
    }
    w.close();
    canonical = prev;
    memo = std::move(outer);
  }
  w.line("if (mt_all) mt_stream_bytes(" + first + " + mt_b, mt_sv, (uint64_t)(mt_e - mt_b) * sizeof mt_sv[0]);");
  if (masked)
    w.line("else for (int32_t i = mt_b; i < mt_e; ++i) if (mt_sm[i - mt_b]) " + first +
           "[i] = mt_sv[i - mt_b];");
  w.close();
  w.close();
  w.open("else");
  for_each(pt.shape, body);
  w.close();
  w.close();
  memo = std::move(saved);
}

// Each lane calls the prelude's mt_atomic_<op>_<dtype>(address, [cmp,] value); masked-off
// lanes give 0 and touch nothing.
void CpuEmitter::emit_atomic(const Op& op) {
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
    // A scalar atomic (a lock, a ticket) also orders the instance's memory, as on the GPU
    // devices (lower_atomic.cpp): what it stored before is visible to an instance that sees the
    // atomic's effect, and what it loads after sees what such instances stored. The fences keep
    // the compiler from moving plain loads and stores across a relaxed atomic.
    w.line("__atomic_thread_fence(__ATOMIC_SEQ_CST);");
    w.line(decl(type(v), vp.name) + " = " + call({}) + ";");
    w.line("__atomic_thread_fence(__ATOMIC_SEQ_CST);");
    return;
  }
  if (owns_storage(v)) declare_array(v);
  const Shape& s = type(v).shape;
  for_each(s, [&](const Idx& idx) { w.line(vp.name + "[" + flat(s, idx) + "] = " + call(idx) + ";"); });
}

void CpuEmitter::emit_tile_store(const Op& op) {
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

// A tile_load with bounds into an array, a row at a time: a row wholly inside the bounds is
// copied without a guard per element (a plain copy the compiler turns into vector moves; the
// guards cost a quarter of a 64x64x32 GEMM), the others as tile_elem does it.
void CpuEmitter::emit_tile_load_rows(const Op& op) {
  ValueId v = op.results[0];
  const Shape& s = type(v).shape;
  DType t = type(v).dtype;
  const std::string R = std::to_string(s.dims[0]), C = std::to_string(s.dims[1]);
  std::string base = elem(op.operands[0], {}), row0 = elem(op.operands[1], {});
  std::string col0 = elem(op.operands[2], {}), ld = elem(op.operands[3], {});
  std::string rows = elem(op.operands[4], {}), cols = elem(op.operands[5], {});
  std::string n = name(v) + "_" + std::to_string(++fresh);
  w.line("const int64_t " + n + "_c0 = (int64_t)" + col0 + ";");
  w.line("const bool " + n + "_cols = (" + n + "_c0 >= 0) & (" + n + "_c0 + " + C + " <= " + cols + ");");
  w.open("for (int32_t r = 0; r < " + R + "; ++r)");
  w.line("const int64_t " + n + "_r = (int64_t)" + row0 + " + r;");
  w.line("const bool " + n + "_in = (" + n + "_r >= 0) & (" + n + "_r < " + rows + ");");
  w.line("const auto* const " + n + "_p = " + base + " + " + n + "_r * " + ld + " + " + n + "_c0;");
  std::string at = name(v) + "[r * " + C + " + c]";
  w.open("if (" + n + "_in & " + n + "_cols)");
  w.line("for (int32_t c = 0; c < " + C + "; ++c) " + at + " = " +
         spell_from_storage(d, t, n + "_p[c]") + ";");
  w.close();
  w.open("else");
  w.open("for (int32_t c = 0; c < " + C + "; ++c)");
  w.line("const int64_t " + n + "_c = " + n + "_c0 + c;");
  w.line(at + " = (" + n + "_in & (" + n + "_c >= 0) & (" + n + "_c < " + cols + ") ? " +
         spell_from_storage(d, t, n + "_p[c]") + " : " + spell_zero(d, t) + ");");
  w.close();
  w.close();
  w.close();
}

void CpuEmitter::emit_dot(const Op& op) {
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
    const DotPrecision prec = in == DType::f32 ? dot_precision(op, DotPrecision::ieee) : DotPrecision::ieee;
    if (prec == DotPrecision::ieee)
      w.line("mt_dot_f32<" + dims + ">(" + name(a) + ", " + name(b) + ", " + name(out) + ");");
    else
      w.line("mt_dot_f32_tf32<" + dims + (prec == DotPrecision::tf32 ? ", 1>(" : ", 0>(") + name(a) + ", " +
             name(b) + ", " + name(out) + ");");
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

CpuEmitter::Fold CpuEmitter::fold(const Op& op) const {
  DType t = type(op.operands[0]).dtype;
  bool fl = is_float(t);
  Fold r;
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

void CpuEmitter::emit_reduce(const Op& op) {
  if (fused.count(&op)) return;
  w.comment(describe(op));
  ValueId x = op.operands[0], out = op.results[0];
  const Type& xt = type(x);
  DType t = xt.dtype;
  int64_t axis = op.attr_int("axis");
  Fold red = fold(op);
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
void CpuEmitter::emit_scan(const Op& op) {
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
void CpuEmitter::emit_print(const Op& op) {
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
void CpuEmitter::emit_shared(const Op& op) {
  ValueId v = op.results[0];
  w.comment(describe(op));
  w.line(d.storage(type(v).dtype) + "* const " + name(v) + " = " + name(v) + "_mem;");
}

void CpuEmitter::emit_swizzle(const Op& op) {
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
void CpuEmitter::emit_role(const Op& op) {
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

void CpuEmitter::emit_for(const Op& op) {
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

void CpuEmitter::emit_yield(const Op& loop) {
  const Block& body = loop.body();
  assign(std::vector<ValueId>(body.args.begin() + 1, body.args.end()), body.ops.back().operands);
}

// Variables (scalars, arrays) for values assigned on several paths: an if's results, a while's
// carried and passed values. Uninitialized: every path assigns them before a read.
void CpuEmitter::declare_vars(const std::vector<ValueId>& vs) {
  for (ValueId v : vs) {
    if (plan[v].form == Form::scalar) w.line(ctype(type(v)) + " " + name(v) + ";");
    else if (owns_storage(v)) declare_array(v);
  }
}

// The condition is a scalar, the same for the whole program instance.
void CpuEmitter::emit_if(const Op& op) {
  w.comment(describe(op));
  declare_vars(op.results);
  for (size_t i = 0; i < 2; ++i) {
    const Block& b = op.regions[i];
    w.open(i == 0 ? "if (" + elem(op.operands[0], {}) + ")" : std::string("else"));
    auto saved = memo;
    emit_block(b);
    assign(op.results, b.ops.back().operands);
    memo = std::move(saved);
    w.close();
  }
}

// for (;;) { before; passed = its values; if (!cond) break; after; carried = its yield }: the
// results are the passed variables (cpu_plan.cpp).
void CpuEmitter::emit_while(const Op& op) {
  w.comment(describe(op));
  const Block& before = op.regions[0];
  const Block& after = op.regions[1];
  declare_vars(before.args);
  declare_vars(after.args);
  assign(before.args, op.operands);
  w.open("for (;;)");
  auto saved = memo;
  emit_block(before);
  const Op& y = before.ops.back();
  const std::string go = "mt_go" + std::to_string(++fresh);  // mt_: never a user's name
  w.line("const bool " + go + " = " + elem(y.operands[0], {}) + ";");
  assign(after.args, std::vector<ValueId>(y.operands.begin() + 1, y.operands.end()));
  w.line("if (!" + go + ") break;");
  emit_block(after);
  assign(before.args, after.ops.back().operands);
  memo = std::move(saved);
  w.close();
}

// Values take their next values "at once": a source that is itself a destination overwritten
// here is first copied aside.
void CpuEmitter::assign(const std::vector<ValueId>& dst, const std::vector<ValueId>& from) {
  std::vector<std::string> src(from.size());
  std::vector<bool> copy(from.size());
  std::map<ValueId, size_t> written;
  for (size_t k = 0; k < from.size(); ++k) {
    ValueId c = dst[k], y = from[k];
    copy[k] = plan[y].storage != plan[c].storage || plan[c].form == Form::scalar ? y != c : false;
    if (copy[k]) written[plan[c].storage] = k;
  }
  if (std::none_of(copy.begin(), copy.end(), [](bool b) { return b; })) return;
  w.comment("yield");
  for (size_t k = 0; k < from.size(); ++k) {
    if (!copy[k]) continue;
    ValueId y = from[k];
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
  for (size_t k = 0; k < from.size(); ++k) {
    if (!copy[k]) continue;
    ValueId c = dst[k], y = from[k];
    if (plan[c].form == Form::scalar) {
      w.line(name(c) + " = " + (src[k].empty() ? elem(y, {}) : src[k]) + ";");
    } else if (!src[k].empty()) {
      w.line("__builtin_memcpy(" + name(c) + ", " + src[k] + ", sizeof " + name(c) + ");");
    } else {
      fill_array(c, y);
    }
  }
}

}  // namespace metile::cpu_cpp
