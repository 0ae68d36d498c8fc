// The GPU IR verifier: SSA scoping, operand counts and types per op kind, layout agreement of
// per-register operands, loop structure, and where allocations may appear. The pipeline runs it
// after lowering and after every pass; a failure is a compiler bug (METILE_ERROR_INTERNAL).
#include <algorithm>
#include <set>
#include <vector>

#include "ir/gpu_ir.h"
#include "support/error.h"

namespace metile::gpu {

namespace {

bool same_type(const Value& a, const Value& b) {
  return a.dtype == b.dtype && a.is_ptr == b.is_ptr && a.layout == b.layout &&
         (!a.is_ptr || a.space == b.space);
}

struct Verifier {
  const Function& f;
  std::vector<bool> defined = std::vector<bool>(f.values.size(), false);
  std::vector<std::string> names = name_values(f, {});
  const Op* current = nullptr;
  // The warp_specialize op whose block is being checked, and which block (0: producers).
  const Op* roles = nullptr;
  size_t role = 0;

  template <typename... Args>
  [[noreturn]] void bad(Args&&... parts) const {
    std::string what = current == nullptr ? std::string("function")
                       : current->kind == GpuOpKind::ELEMENTWISE
                           ? std::string(op_name(current->tile_op))
                           : std::string(gpu_op_name(current->kind));
    fail(METILE_ERROR_INTERNAL, "gpu-verify", "@", f.name, ": ", what, ": ",
         std::forward<Args>(parts)...);
  }
  const Value& val(ValueId v) const { return f.value(v); }
  std::string show(ValueId v) const { return "%" + names[v]; }

  void define(ValueId v) {
    if (v == kNoValue || v >= f.values.size()) bad("result is not a value of the function");
    if (defined[v]) bad(show(v), " is defined twice");
    if (val(v).layout >= f.layouts.size()) bad(show(v), " has an unknown layout");
    defined[v] = true;
  }
  void use(ValueId v) const {
    if (v == kNoValue || v >= f.values.size()) bad("operand is not a value of the function");
    if (!defined[v]) bad(show(v), " is used where it is not defined");
  }
  void need(bool ok, const char* what) const {
    if (!ok) bad(what);
  }
  void operands(size_t lo, size_t hi) const {
    size_t n = current->operands.size();
    if (n < lo || n > hi) bad("takes ", lo, lo == hi ? "" : cat(" to ", hi), " operands, got ", n);
  }
  void results(size_t n) const {
    if (current->results.size() != n) bad("has ", current->results.size(), " results, expected ", n);
  }
  void uniform_int(ValueId v, const char* what) const {
    const Value& x = val(v);
    if (x.layout != kUniform || x.is_ptr || !is_int(x.dtype)) bad(what, " must be a uniform integer");
  }
  bool scalar_per_thread(ValueId v) const { return f.regs(v) == 1; }
  // Per-register ops: the result layout is the join of the operands' layouts.
  void agree(const std::vector<ValueId>& ops, ValueId result) const {
    LayoutId out = kUniform;
    for (ValueId v : ops) {
      LayoutId l = val(v).layout;
      if (l == kUniform) continue;
      if (l == kThread) {
        if (out == kUniform) out = kThread;
        continue;
      }
      if (out != kUniform && out != kThread && out != l)
        bad("operands have different layouts #", out, " and #", l);
      out = l;
    }
    if (result != kNoValue && val(result).layout != out)
      bad("result layout #", val(result).layout, " differs from the operands' #", out);
  }

  void elementwise(const Op& op) {
    OpKind k = op.tile_op;
    results(1);
    const Value& r = val(op.result());
    if (has_trait(k, kBinary | kCompare)) {
      operands(2, 2);
      const Value &a = val(op.operands[0]), &b = val(op.operands[1]);
      if (a.is_ptr || b.is_ptr) bad("pointer operand");
      if (a.dtype != b.dtype) bad("operand dtypes differ: ", dtype_name(a.dtype), " vs ", dtype_name(b.dtype));
      DType want = has_trait(k, kCompare) ? DType::boolean : a.dtype;
      if (r.dtype != want || r.is_ptr) bad("result must be ", dtype_name(want));
    } else if (has_trait(k, kUnary) || k == OpKind::CAST || k == OpKind::BITCAST) {
      operands(1, 1);
      const Value& a = val(op.operands[0]);
      if (a.is_ptr || r.is_ptr) bad("pointer operand");
      if (k == OpKind::BITCAST && dtype_size(r.dtype) != dtype_size(a.dtype))
        bad("bitcast between dtypes of different widths");
      if (has_trait(k, kUnary) && r.dtype != a.dtype) bad("result dtype differs from the operand's");
    } else if (k == OpKind::SELECT) {
      operands(3, 3);
      const Value &c = val(op.operands[0]), &a = val(op.operands[1]), &b = val(op.operands[2]);
      if (c.dtype != DType::boolean || c.is_ptr) bad("condition must be bool");
      if (a.dtype != b.dtype || a.is_ptr != b.is_ptr || r.dtype != a.dtype || r.is_ptr != a.is_ptr)
        bad("branches and result must have one type");
    } else if (k == OpKind::PTR_OFFSET) {
      operands(2, 2);
      const Value &p = val(op.operands[0]), &o = val(op.operands[1]);
      if (!p.is_ptr || o.is_ptr || !is_int(o.dtype)) bad("needs a pointer and integer offsets");
      if (!r.is_ptr || r.dtype != p.dtype || r.space != p.space) bad("result must be the pointer type");
    } else {
      bad("is not element-wise");
    }
    agree(op.operands, op.result());
  }

  void memory(const Op& op) {
    bool load = op.kind == GpuOpKind::LOAD || op.kind == GpuOpKind::VLOAD;
    if (load) {
      operands(1, 3);
      results(1);
      if (op.operands.size() == 2) bad("a predicate needs an `other` value");
    } else {
      operands(2, 3);
      results(0);
    }
    const Value& p = val(op.operands[0]);
    if (!p.is_ptr) bad("first operand must be pointers");
    size_t pred_i = load ? 1 : 2;
    if (op.operands.size() > pred_i) {
      const Value& m = val(op.operands[pred_i]);
      if (m.is_ptr || m.dtype != DType::boolean) bad("predicate must be bool");
    }
    const Value& v = val(load ? (op.operands.size() > 2 ? op.operands[2] : op.result()) : op.operands[1]);
    if (v.is_ptr || v.dtype != p.dtype) bad("value type must be the pointee type ", dtype_name(p.dtype));
    if (load && val(op.result()).dtype != p.dtype) bad("result type must be the pointee type");
    agree(op.operands, load ? op.result() : kNoValue);
    if (op.kind == GpuOpKind::VLOAD || op.kind == GpuOpKind::VSTORE) {
      int64_t w = op.attr_int("width");
      int64_t regs = f.regs(load ? op.result() : op.operands[1]);
      if (w < 2 || regs % w != 0) bad("width ", w, " does not divide ", regs, " registers");
    }
  }

  void check(const Op& op, bool top_level) {
    current = &op;
    for (ValueId v : op.operands) use(v);
    switch (op.kind) {
      case GpuOpKind::CONST: {
        operands(0, 0);
        results(1);
        const Value& r = val(op.result());
        if (r.layout != kUniform || r.is_ptr) bad("must be a uniform scalar");
        const AttrValue* a = op.find_attr("value");
        if (a == nullptr || std::holds_alternative<std::string>(*a)) bad("needs a numeric value");
        if (is_float(r.dtype) != std::holds_alternative<double>(*a)) bad("value kind does not match ", dtype_name(r.dtype));
        break;
      }
      case GpuOpKind::BUILTIN: {
        operands(0, 0);
        results(1);
        if (static_cast<int>(op.builtin) >= kBuiltinCount)
          bad("unknown builtin ", static_cast<int>(op.builtin));
        std::string_view n = builtin_name(op.builtin);
        int64_t axis = op.attr_int("axis");
        if (axis < 0 || axis > 2) bad("axis ", axis);
        bool group_level = is_group_builtin(op.builtin);
        const Value& r = val(op.result());
        if (r.dtype != DType::i32) bad("builtins are i32");
        if (group_level != (r.layout == kUniform)) bad(n, group_level ? " is uniform" : " varies per thread");
        if (!group_level && f.regs(op.result()) != 1) bad(n, " has one register");
        break;
      }
      case GpuOpKind::ELEMENTWISE:
        elementwise(op);
        break;
      case GpuOpKind::COORD:
      case GpuOpKind::VALID: {
        operands(1, 1);
        results(1);
        const Value& tid = val(op.operands[0]);
        if (tid.layout != kThread || tid.dtype != DType::i32) bad("needs the thread index (an i32 thread value)");
        const Value& r = val(op.result());
        if (!f.layout(r.layout).is_tile()) bad("needs a tile layout");
        if (r.dtype != (op.kind == GpuOpKind::COORD ? DType::i32 : DType::boolean)) bad("wrong result type");
        break;
      }
      case GpuOpKind::SPLAT: {
        operands(1, 1);
        results(1);
        if (!scalar_per_thread(op.operands[0]) || f.layout_of(op.operands[0]).is_tile())
          bad("operand must be a uniform or thread value");
        Value a = val(op.operands[0]), r = val(op.result());
        if (!f.layout(r.layout).is_tile() && r.layout != kThread) bad("result needs a tile or thread layout");
        a.layout = r.layout;
        if (!same_type(a, r)) bad("result type differs from the operand's");
        break;
      }
      case GpuOpKind::LOAD:
      case GpuOpKind::STORE:
      case GpuOpKind::VLOAD:
      case GpuOpKind::VSTORE:
        memory(op);
        break;
      case GpuOpKind::ATOMIC: {
        if (!has_trait(op.tile_op, kAtomic)) bad("needs an atomic op, got ", op_name(op.tile_op));
        size_t values = op.tile_op == OpKind::ATOMIC_CAS ? 2 : 1;
        operands(1 + values, 2 + values);
        results(1);
        const Value& p = val(op.operands[0]);
        if (!p.is_ptr || p.space != AddrSpace::device) bad("first operand must be device pointers");
        for (size_t i = 1; i <= values; ++i) {
          const Value& v = val(op.operands[i]);
          if (v.is_ptr || v.dtype != p.dtype) bad("value type must be the pointee type ", dtype_name(p.dtype));
        }
        if (op.operands.size() > values + 1) {
          const Value& m = val(op.operands[values + 1]);
          if (m.is_ptr || m.dtype != DType::boolean) bad("predicate must be bool");
        }
        if (val(op.result()).dtype != p.dtype) bad("result type must be the pointee type");
        agree(op.operands, op.result());
        break;
      }
      case GpuOpKind::PRINT: {
        operands(7, 7);
        results(0);
        const Value& m = val(op.operands[0]);
        if (m.is_ptr || m.dtype != DType::boolean) bad("predicate must be bool");
        for (size_t i = 1; i < 6; ++i)
          if (val(op.operands[i]).is_ptr || !is_int(val(op.operands[i]).dtype))
            bad("program ids and indices must be integers");
        if (val(op.operands[6]).is_ptr) bad("cannot print a pointer");
        op.attr_str("head");
        op.attr_str("label");
        if (op.attr_int("rank") < -1 || op.attr_int("rank") > 2) bad("rank must be -1, 0, 1 or 2");
        agree(op.operands, kNoValue);
        break;
      }
      case GpuOpKind::ALLOC: {
        operands(0, 0);
        results(1);
        if (!top_level) bad("threadgroup allocations belong at the top level");
        const Value& r = val(op.result());
        if (!r.is_ptr || r.space != AddrSpace::threadgroup || r.layout != kUniform)
          bad("result must be a uniform threadgroup pointer");
        std::string why;
        shared_array(f, op, &why);
        if (!why.empty()) bad(why);
        break;
      }
      case GpuOpKind::BARRIER: {
        operands(0, 0);
        results(0);
        // Inside a warp role, the role's named barrier: the other role's threads never come.
        const bool named = op.find_attr("id") != nullptr || op.find_attr("threads") != nullptr;
        if (roles == nullptr && named) bad("a named barrier belongs in a warp_specialize block");
        if (roles != nullptr) {
          const Op want = role_barrier(f, *roles, role);
          if (!named || op.attr_int("id") != want.attr_int("id") || op.attr_int("threads") != want.attr_int("threads"))
            bad("in the ", role == 0 ? "producer" : "consumer", " block a barrier must be named id=",
                want.attr_int("id"), " threads=", want.attr_int("threads"));
        }
        break;
      }
      case GpuOpKind::SETMAXNREG: {
        operands(0, 0);
        results(0);
        const int64_t count = op.attr_int("count"), inc = op.attr_int("inc");
        if (count < 24 || count > 256 || count % 8 != 0) bad("count must be a multiple of 8 in 24..256");
        if (inc != 0 && inc != 1) bad("inc must be 0 or 1");
        if (roles == nullptr) bad("belongs in a warp_specialize block");
        break;
      }
      case GpuOpKind::WARP_SPECIALIZE:
        specialize(op, top_level);
        return;
      case GpuOpKind::SHUFFLE_XOR:
      case GpuOpKind::SHUFFLE: {
        operands(2, 2);
        results(1);
        if (!scalar_per_thread(op.operands[0]) &&
            !(op.kind == GpuOpKind::SHUFFLE_XOR && f.layout(val(op.operands[0]).layout).is_tile()))
          bad("operand must have one register");
        uniform_int(op.operands[1], op.kind == GpuOpKind::SHUFFLE ? "lane" : "mask");
        if (val(op.operands[0]).layout != val(op.result()).layout) bad("result layout differs from the operand's");
        if (!same_type(val(op.operands[0]), val(op.result()))) bad("result type differs from the operand's");
        break;
      }
      case GpuOpKind::SIMD_REDUCE:
      case GpuOpKind::REG_REDUCE: {
        operands(1, 1);
        results(1);
        if (op.reduce != Reduction::sum && op.reduce != Reduction::max && op.reduce != Reduction::min)
          bad("reduction must be sum, max or min");
        const Value &a = val(op.operands[0]), &r = val(op.result());
        if (op.kind == GpuOpKind::SIMD_REDUCE && !scalar_per_thread(op.operands[0]))
          bad("operand must have one register");
        if (op.kind == GpuOpKind::SIMD_REDUCE && op.find_attr("lanes") != nullptr) {
          const int64_t lanes = op.attr_int("lanes");
          if (lanes < 1 || lanes >= f.simd_width || (lanes & (lanes - 1)) != 0)
            bad("lanes must be a power of two below the simd width");
        }
        if (op.kind == GpuOpKind::REG_REDUCE && !f.layout(a.layout).is_tile())
          bad("operand must be a tile");
        bool per_thread = r.layout == kThread ||
                          (op.kind == GpuOpKind::SIMD_REDUCE && r.layout == kUniform);
        if (op.kind == GpuOpKind::REG_REDUCE && op.find_attr("fold") != nullptr) {
          // A fold into the registers of a tile: fold maps each operand register to one of them.
          if (!f.layout(r.layout).is_tile() || r.dtype != a.dtype || a.is_ptr)
            bad("a fold's result must be a tile of the operand's type");
          std::vector<int64_t> fold = parse_register_list(op.attr_str("fold"), "reg_reduce fold");
          if (static_cast<int64_t>(fold.size()) != f.layout(a.layout).regs()) bad("fold must cover the operand's registers");
          std::vector<bool> hit(static_cast<size_t>(f.layout(r.layout).regs()), false);
          for (int64_t g : fold) {
            if (g >= static_cast<int64_t>(hit.size())) bad("fold reaches past the result's registers");
            else hit[g] = true;
          }
          if (std::find(hit.begin(), hit.end(), false) != hit.end()) bad("fold leaves a result register unset");
          break;
        }
        if (!per_thread || r.dtype != a.dtype || a.is_ptr)
          bad("result must be a thread value of the operand's type");
        break;
      }
      case GpuOpKind::REG_GATHER: {
        operands(1, 1);
        results(1);
        const Value &a = val(op.operands[0]), &r = val(op.result());
        if (!f.layout(a.layout).is_tile() || !f.layout(r.layout).is_tile()) bad("operand and result must be tiles");
        if (r.dtype != a.dtype || r.is_ptr != a.is_ptr) bad("result type differs from the operand's");
        std::vector<int64_t> from = parse_register_list(op.attr_str("from"), "reg_gather from");
        if (static_cast<int64_t>(from.size()) != f.layout(r.layout).regs()) bad("from must name each result register's source");
        for (int64_t g : from)
          if (g >= f.layout(a.layout).regs()) bad("from reaches past the operand's registers");
        break;
      }
      case GpuOpKind::SWIZZLE: {
        operands(4, 4);
        results(2);
        for (ValueId v : op.operands) uniform_int(v, "operand");
        for (ValueId v : op.results)
          if (val(v).layout != kUniform || val(v).dtype != val(op.operands[0]).dtype) bad("results must be uniform");
        op.attr_str("pattern");
        if (op.attr_int("block") < 1) bad("block must be positive");
        break;
      }
      case GpuOpKind::CONVERT_LAYOUT: {
        operands(3, 3);
        results(1);
        const Value &x = val(op.operands[0]), &buf = val(op.operands[1]), &tid = val(op.operands[2]);
        const Value& r = val(op.result());
        if (x.is_ptr || r.is_ptr || !f.layout(x.layout).is_tile() || !f.layout(r.layout).is_tile())
          bad("operand and result must be tiles of values");
        if (r.dtype != x.dtype || f.layout(r.layout).numel != f.layout(x.layout).numel)
          bad("result must hold the operand's elements and dtype");
        if (!buf.is_ptr || buf.space != AddrSpace::threadgroup || buf.layout != kUniform || buf.dtype != x.dtype)
          bad("scratch must be a uniform threadgroup pointer of the operand's dtype");
        if (tid.layout != kThread || tid.dtype != DType::i32) bad("needs the thread index (an i32 thread value)");
        break;
      }
      case GpuOpKind::MMA: {
        operands(4, 5);
        results(1);
        // {register_a}: a is a register tile in the accumulator fragments of a warpgroup atom (dot_choices.cpp).
        const bool reg_a = op.find_attr("register_a") != nullptr && op.attr_int("register_a") != 0;
        if (reg_a) {
          const Value& a = val(op.operands[0]);
          if (a.is_ptr || a.layout == kUniform || a.layout == kThread || dtype_size(a.dtype) != 2)
            bad("a register a must be a 16-bit tile in a tile layout");
        }
        for (size_t i = reg_a ? 1 : 0; i < 2; ++i) {
          const Value& m = val(op.operands[i]);
          if (!m.is_ptr || m.space != AddrSpace::threadgroup || m.layout != kUniform)
            bad("operands a and b must be uniform threadgroup pointers");
        }
        if (op.operands.size() == 5) {  // the accumulator's threadgroup array (tensor_ops)
          const Value& m = val(op.operands[4]);
          if (!m.is_ptr || m.space != AddrSpace::threadgroup || m.layout != kUniform ||
              m.dtype != DType::f32)
            bad("the accumulator array must be a uniform f32 threadgroup pointer");
        }
        const Value &c = val(op.operands[2]), &r = val(op.result());
        if (c.is_ptr || !f.layout(c.layout).is_tile() || r.layout != c.layout || r.dtype != c.dtype)
          bad("the accumulator and the result must share one tile layout and dtype");
        // Products with overflow checks: the GPU IR parser hands the verifier any attributes.
        int64_t mn = 0, warps = 0;
        if (__builtin_mul_overflow(op.attr_int("m"), op.attr_int("n"), &mn) || f.layout(c.layout).numel != mn)
          bad("the accumulator does not hold m x n elements");
        if (__builtin_mul_overflow(op.attr_int("warps_m"), op.attr_int("warps_n"), &warps) ||
            __builtin_mul_overflow(warps, int64_t{f.simd_width}, &warps) || warps != f.threads)
          bad("warps_m x warps_n warps do not make up the threadgroup");
        break;
      }
      case GpuOpKind::ASYNC_COPY: {
        const bool whole = op.find_attr("whole") != nullptr && op.attr_int("whole") != 0;
        const size_t fixed = whole ? 6 : 4;
        operands(fixed, fixed + 1);
        results(0);
        if (whole && (val(op.operands[op.operands.size() - 2]).is_ptr ||
                      val(op.operands[op.operands.size() - 2]).dtype != DType::boolean ||
                      !val(op.operands.back()).is_ptr || val(op.operands.back()).space != AddrSpace::device))
          bad("whole must be bool and base a device pointer");
        const Value &d = val(op.operands[0]), &s = val(op.operands[1]);
        if (!d.is_ptr || d.space != AddrSpace::threadgroup) bad("dst must be threadgroup pointers");
        if (!s.is_ptr || s.space != AddrSpace::device) bad("src must be device pointers");
        if (d.dtype != s.dtype) bad("dst and src must point to one element type");
        for (size_t i = 2; i < 4; ++i)
          if (val(op.operands[i]).is_ptr || val(op.operands[i]).dtype != DType::i32) bad("lo and hi must be i32");
        if (op.operands.size() == fixed + 1 && (val(op.operands[4]).is_ptr || val(op.operands[4]).dtype != DType::boolean))
          bad("live must be bool");
        if (!f.layout(d.layout).is_tile()) bad("operands must be tiles");
        agree(op.operands, kNoValue);
        if (op.attr_int("width") < 1) bad("width must be positive");
        break;
      }
      case GpuOpKind::ASYNC_COMMIT:
      case GpuOpKind::WARPGROUP_SYNC:
        operands(0, 0);
        results(0);
        break;
      case GpuOpKind::MBAR_INIT:
      case GpuOpKind::TMA_LOAD:
      case GpuOpKind::MBAR_WAIT:
      case GpuOpKind::MBAR_ARRIVE: {
        const bool load = op.kind == GpuOpKind::TMA_LOAD, init = op.kind == GpuOpKind::MBAR_INIT;
        const bool arrive = op.kind == GpuOpKind::MBAR_ARRIVE, wait = op.kind == GpuOpKind::MBAR_WAIT;
        const size_t slab = load && op.find_attr("slabs") != nullptr ? 1 : 0;  // a third coordinate
        operands(load ? 5 + slab : 2, load ? 6 + slab : arrive ? 3 : wait ? 4 : 2);
        if (wait && op.operands.size() == 3) bad("takes a predicate with its thread index");
        if ((arrive && op.operands.size() == 3) || (wait && op.operands.size() == 4))
          uniform_bool(op.operands.back(), "the predicate");
        results(0);
        const Value& bar = val(op.operands[load ? 1 : 0]);
        if (!bar.is_ptr || bar.space != AddrSpace::threadgroup || bar.dtype != DType::i64)
          bad("the mbarrier must be a threadgroup i64 pointer");
        if (load && (!val(op.operands[0]).is_ptr || val(op.operands[0]).space != AddrSpace::threadgroup))
          bad("dst must be a threadgroup pointer");
        for (size_t i = load ? 2 : init ? 1 : 1; i < op.operands.size(); ++i)
          if (val(op.operands[i]).is_ptr) bad("coordinates, tid, parity and predicate must be scalars");
        if (init && (op.attr_int("count") < 1 || op.attr_int("n") < 1)) bad("count and n must be positive");
        if (load && (op.attr_int("blocks") < 1 || op.attr_int("map") < 0)) bad("blocks and map must be positive");
        break;
      }
      case GpuOpKind::OPAQUE:
        operands(1, 1);
        results(1);
        if (val(op.operands[0]).is_ptr || !is_int(val(op.operands[0]).dtype) || !scalar_per_thread(op.operands[0]))
          bad("takes one integer scalar");
        break;
      case GpuOpKind::CANCEL_POINT: {
        operands(0, 0);
        results(0);
        const int64_t every = op.attr_int("every");
        if (every < 0 || (every & (every - 1)) != 0) bad("every must be a power of two (or 0: once, at entry)");
        break;
      }
      case GpuOpKind::ASYNC_WAIT:
      case GpuOpKind::WARPGROUP_WAIT:
        operands(0, 0);
        results(0);
        if (op.attr_int("pending") < 0) bad("pending must not be negative");
        break;
      case GpuOpKind::FOR:
        loop(op);
        return;  // loop() defines the results after the body
      case GpuOpKind::IF:
      case GpuOpKind::WHILE:
        control(op);
        return;  // control() defines the results after the blocks
      case GpuOpKind::YIELD:
        bad("yield outside the end of a loop body");
    }
    for (ValueId r : op.results) define(r);
  }

  void loop(const Op& op) {
    if (op.operands.size() < 3) bad("needs start, end and step");
    for (size_t i = 0; i < 3; ++i) uniform_int(op.operands[i], "bound");
    const Value& s = val(op.operands[0]);
    if (val(op.operands[1]).dtype != s.dtype || val(op.operands[2]).dtype != s.dtype)
      bad("start, end and step must have one type");
    size_t n = op.operands.size() - 3;
    const Block& body = op.body();
    if (body.args.size() != n + 1 || op.results.size() != n) bad("carries ", n, " values but has ", body.args.size(), " block arguments and ", op.results.size(), " results");
    for (ValueId a : body.args) define(a);
    if (!same_type(val(body.args[0]), s)) bad("induction variable must have the bounds' type");
    for (size_t i = 0; i < n; ++i) {
      const Value& init = val(op.operands[3 + i]);
      if (!same_type(init, val(body.args[1 + i])) || !same_type(init, val(op.results[i])))
        bad("carried value ", i, " changes type");
    }
    const Op* self = &op;
    block(body, false, true);
    current = self;
    const Op& y = body.ops.back();
    for (size_t i = 0; i < n; ++i)
      if (!same_type(val(y.operands[i]), val(op.results[i]))) bad("yielded value ", i, " has the wrong type");
    for (ValueId r : op.results) define(r);
  }

  // A uniform bool: every thread takes the same branch (barriers may sit in the blocks).
  void uniform_bool(ValueId v, const char* what) const {
    const Value& x = val(v);
    if (x.layout != kUniform || x.is_ptr || x.dtype != DType::boolean) bad(what, " must be a uniform bool");
  }

  // The yield ending `b` gives values of the types of `want` (after a leading uniform bool
  // condition when `cond`).
  void yields(const Block& b, const std::vector<ValueId>& want, bool cond, const char* what) {
    const Op& y = b.ops.back();
    const size_t skip = cond ? 1 : 0;
    if (y.operands.size() != want.size() + skip)
      bad(what, " yields ", y.operands.size(), " values, expected ", want.size() + skip);
    if (cond) uniform_bool(y.operands[0], "the condition");
    for (size_t i = 0; i < want.size(); ++i)
      if (!same_type(val(y.operands[skip + i]), val(want[i]))) bad(what, " value ", i, " has the wrong type");
  }

  // A block of an if or while: its arguments and what it defines are not visible after it.
  void scoped(const Block& b) {
    for (ValueId a : b.args) define(a);
    block(b, false, true);
    for (ValueId a : b.args) defined[a] = false;
    walk(b, [&](const Op& o) {
      for (ValueId r : o.results) defined[r] = false;
      for (const Block& r : o.regions)
        for (ValueId a : r.args) defined[a] = false;
    });
  }

  // if: a uniform bool condition, two blocks without arguments yielding the results. while: a
  // before block (args: the carried values, typed as the inits) yielding a uniform bool and the
  // passed values, and an after block (args: the passed values) yielding the next carried
  // values; carried, passed and result types are the inits'.
  void control(const Op& op) {
    const Op* self = &op;
    if (op.kind == GpuOpKind::IF) {
      operands(1, 1);
      use(op.operands[0]);
      uniform_bool(op.operands[0], "the condition");
      for (const Block& b : op.regions) {
        if (!b.args.empty()) bad("if blocks take no arguments");
        scoped(b);
        current = self;
        yields(b, op.results, false, &b == &op.regions[0] ? "the then block" : "the else block");
      }
    } else {
      for (ValueId v : op.operands) use(v);
      const size_t n = op.operands.size();
      for (const Block& b : op.regions)
        if (b.args.size() != n || op.results.size() != n)
          bad("carries ", n, " values but has ", b.args.size(), " block arguments and ", op.results.size(), " results");
      for (size_t i = 0; i < n; ++i) {
        const Value& init = val(op.operands[i]);
        if (!same_type(init, val(op.regions[0].args[i])) || !same_type(init, val(op.regions[1].args[i])) ||
            !same_type(init, val(op.results[i])))
          bad("carried value ", i, " changes type");
      }
      scoped(op.regions[0]);
      current = self;
      yields(op.regions[0], op.results, true, "the before block");
      scoped(op.regions[1]);
      current = self;
      yields(op.regions[1], op.results, false, "the after block");
    }
    for (ValueId r : op.results) define(r);
  }

  // warp_specialize: the last op at top level; whole warpgroups of producers beside a function
  // of whole warpgroups; two blocks without arguments, each ending in an empty yield.
  void specialize(const Op& op, bool top_level) {
    operands(0, 0);
    results(0);
    if (!top_level || &op != &f.body.ops.back()) bad("must be the last op at top level");
    const int64_t producers = op.attr_int("producers");
    if (producers < 128 || producers % 128 != 0 || f.threads % 128 != 0)
      bad("producers (", producers, ") and threads (", f.threads, ") must be whole warpgroups");
    roles = &op;
    for (size_t r = 0; r < 2; ++r) {
      const Block& b = op.regions[r];
      if (!b.args.empty()) bad("warp_specialize blocks take no arguments");
      role = r;
      scoped(b);
      current = &op;
      yields(b, {}, false, r == 0 ? "the producer block" : "the consumer block");
    }
    roles = nullptr;
  }

  void block(const Block& b, bool top_level, bool loop_body) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Op& op = b.ops[i];
      current = &op;
      if (op.regions.size() != gpu_regions(op.kind)) bad("has ", op.regions.size(), " regions");
      if (has_gpu_trait(op.kind, kGTerminator)) {
        if (!loop_body || i + 1 != b.ops.size()) bad("yield must end a loop body or an if or while block");
        for (ValueId v : op.operands) use(v);
        results(0);
        continue;
      }
      check(op, top_level);
    }
    if (loop_body && (b.ops.empty() || b.ops.back().kind != GpuOpKind::YIELD)) {
      current = nullptr;
      bad("loop body does not end in yield (nor does an if or while block)");
    }
  }

  void run() {
    if (f.threads < 1 || f.simd_width < 1) bad("threads must be positive");
    for (LayoutId l = 2; l < f.layouts.size(); ++l) {
      const Layout& lay = f.layout(l);
      if (!lay.is_tile()) bad("layout #", l, " is not a tile layout");
      if (lay.thr.size() != f.threads)
        bad("layout #", l, " covers ", lay.thr.size(), " threads, the group has ", f.threads);
    }
    for (const GpuParam& p : f.params) {
      define(p.value);
      if (val(p.value).layout != kUniform) bad("parameter ", p.name, " must be uniform");
    }
    block(f.body, true, false);
  }
};

}  // namespace

void verify(const Function& f) { Verifier{f}.run(); }

void verify(const Function& f, const Op** failed) {
  Verifier v{f};
  try {
    v.run();
  } catch (...) {  // also a missing attribute, found while `current` is being checked
    *failed = v.current;
    throw;
  }
}

}  // namespace metile::gpu
