// The GPU IR walker's memory statements: vector loads and stores with their masked tails,
// async copies into threadgroup memory, and the mma op handed to the dialect.
#include "codegen/gpu_emit_internal.h"

#include <algorithm>

#include "support/error.h"

namespace metile::emit_detail {

void Emitter::vector_access(const gpu::Op& op) {
  bool load = op.kind == GpuOpKind::VLOAD;
  int64_t width = op.attr_int("width");
  ValueId ptr = op.operands[0];
  ValueId data = load ? op.result() : op.operands[1];
  DType t = dtype(ptr);
  int64_t n = regs(data);
  bool predicated = op.operands.size() > (load ? 1u : 2u);
  ValueId pred = predicated ? op.operands[load ? 1 : 2] : kNoValue;
  AddrSpace space = f_.value(ptr).space;
  if (load) w_.line(type_of(data) + " " + name_[data] + "[" + std::to_string(n) + "];");
  bool chunks = n > width;
  // one_align (vectorize_access.cpp): every chunk has the first chunk's alignment.
  const bool one_align = op.find_attr("one_align") != nullptr && op.attr_int("one_align") != 0;
  // aligned (vectorize_access.cpp): every chunk's address is a multiple of the vector.
  const bool aligned = op.find_attr("aligned") != nullptr && op.attr_int("aligned") != 0;
  const int64_t bytes = width * static_cast<int64_t>(dtype_size(t));
  // The chunk at `c` (a name or a number): element j's index, its address, and the test that
  // it may be accessed as one vector (every element in bounds, the address aligned).
  auto at = [](const std::string& c, int64_t j) {
    if (c == "0") return std::to_string(j);
    if (is_number(c)) return std::to_string(std::stoll(c) + j);
    return j == 0 ? c : c + " + " + std::to_string(j);
  };
  auto test = [&](const std::string& c, bool align = true) {
    std::string cond;
    if (predicated)
      for (int64_t j = 0; j < width; ++j) cond += (j ? " && " : "") + strip_parens(expr(pred, at(c, j)));
    if (!align || aligned) return cond;
    std::string a = d_.vector_aligned(one_align ? strip_parens(expr(ptr, "0")) : strip_parens(expr(ptr, at(c, 0))),
                                      bytes);
    if (!a.empty()) cond += (cond.empty() ? "" : " && ") + a;
    return cond;
  };
  std::string vt = d_.vector_type(t, width);
  // The chunks at `c` (the loop's variable, or "0"), each tested when `checked`.
  auto emit = [&](const std::string& c, bool checked) {
    std::string address = strip_parens(expr(ptr, at(c, 0)));
    std::string vptr = "(" + d_.vector_pointer(t, width, space, load && const_ptr_[ptr]) + ")(" + address + ")";
    std::string cond = checked ? test(c) : "";
    if (!cond.empty()) w_.open("if (" + cond + ")");
    if (load) {
      // Named after the array it fills: several unpredicated loads can share one scope.
      std::string vec = fresh_name(name_[data] + "_vec");
      w_.line("const " + vt + " " + vec + " = *" + vptr + ";");
      for (int64_t j = 0; j < width; ++j)
        w_.line(name_[data] + "[" + at(c, j) + "] = " + spell_from_storage(c_, t, vec + "[" + std::to_string(j) + "]") + ";");
    } else {
      std::string parts;
      for (int64_t j = 0; j < width; ++j)
        parts += (j ? ", " : "") + strip_parens(spell_to_storage(c_, t, expr(data, at(c, j))));
      w_.line("*" + vptr + " = " + vt + "(" + parts + ");");
    }
    if (cond.empty()) return;
    // "} else {" at the if's depth; the writer's indentation already suits the else branch.
    w_.raw(std::string(static_cast<size_t>(w_.indent() - 1) * 2, ' ') + "} else {\n");
    // The masked tail: register by register, exactly like a scalar load/store.
    w_.line(d_.unroll());
    w_.open("for (int j = 0; j < " + std::to_string(width) + "; ++j)");
    std::string r = c == "0" ? "j" : c + " + j";
    if (load) {
      std::string value = spell_from_storage(c_, t, deref(ptr, r));
      if (predicated) value = spell_select(expr(pred, r), value, expr(op.operands[2], r));
      w_.line(name_[data] + "[" + r + "] = " + strip_parens(value) + ";");
    } else {
      std::string s = deref(ptr, r) + " = " + strip_parens(spell_to_storage(c_, t, expr(data, r))) + ";";
      w_.line(predicated ? "if (" + strip_parens(expr(pred, r)) + ") " + s : s);
    }
    w_.close();
    w_.close();
  };
  auto each_chunk = [&](bool checked) {
    if (!chunks) return emit("0", checked);
    w_.line(d_.unroll());
    w_.open("for (int c = 0; c < " + std::to_string(n) + "; c += " + std::to_string(width) + ")");
    emit("c", checked);
    w_.close();
  };
  if (!(load && chunks && d_.vector_loads_in_flight() && !test("0").empty())) return each_chunk(true);
  // Several tested chunks: one test for all of them, then the chunks' loads in one block (all in
  // flight before the first use waits, Dialect::vector_loads_in_flight), and chunk by chunk
  // only where some chunk fails its test.
  std::string all;  // with one_align, the first chunk's alignment once
  for (int64_t c = 0; c < n; c += width)
    if (std::string t = test(std::to_string(c), !(one_align && c > 0)); !t.empty())
      all += (all.empty() ? "" : " && ") + t;
  std::string whole = fresh_name(name_[data] + "_whole");
  w_.line("const bool " + whole + " = " + all + ";");
  w_.open("if (" + whole + ")");
  each_chunk(false);
  w_.raw(std::string(static_cast<size_t>(w_.indent() - 1) * 2, ' ') + "} else {\n");
  each_chunk(true);
  w_.close();
}


// Per register (one chunk of `width` elements): the dialect's asynchronous copy when the whole
// chunk is in bounds and the source suits it (else vector loads and stores of at most 4
// elements, as the dialects' vector types go), and element by element otherwise.
void Emitter::async_copy(const gpu::Op& op) {
  const bool whole = op.find_attr("whole") != nullptr && op.attr_int("whole") != 0;
  const size_t fixed = whole ? 6 : 4;
  const ValueId live = op.operands.size() > fixed ? op.operands[4] : kNoValue;
  if (!whole) return async_chunks(op, live, false);
  // The aligned body (lower_dot.cpp): one uniform test instead of each chunk's bounds.
  const size_t at = op.operands.size() - 2;
  const DType t = dtype(op.operands[0]);
  const int64_t bytes = op.attr_int("width") * static_cast<int64_t>(dtype_size(t));
  std::string cond = strip_parens(expr(op.operands[at], "0"));
  if (std::string a = d_.vector_aligned(strip_parens(expr(op.operands[at + 1], "0")), bytes); !a.empty())
    cond += " && " + a;
  if (!d_.async_copy_if("d", "s", bytes, "p").empty()) {
    // Predicated copies under the test, then the per-chunk path only where it fails: no branch
    // around the copies of whole tiles.
    const std::string w = fresh_name("whole");
    w_.line("const bool " + w + " = " + cond + ";");
    async_chunks(op, live, true, w);
    w_.open("if (!" + w + ")");
    async_chunks(op, live, false);
    w_.close();
    return;
  }
  w_.open("if (" + cond + ")");
  async_chunks(op, live, true);
  w_.raw(std::string(static_cast<size_t>(w_.indent() - 1) * 2, ' ') + "} else {\n");
  async_chunks(op, live, false);
  w_.close();
}

// Per register (one chunk of `width` elements): the dialect's asynchronous copy when the whole
// chunk is in bounds and the source suits it (else vector loads and stores of at most 4
// elements, as the dialects' vector types go), and element by element otherwise. `aligned`:
// every chunk is known whole and aligned (the aligned body), no test is written; with `pred`
// (a boolean's name) the copies are the dialect's predicated ones under it.
void Emitter::async_chunks(const gpu::Op& op, ValueId live, bool aligned, const std::string& pred) {
  const int64_t width = op.attr_int("width"), n = regs(op.operands[0]);
  const ValueId dst = op.operands[0], src = op.operands[1], lo = op.operands[2], hi = op.operands[3];
  const DType t = dtype(dst);
  const int64_t elem = static_cast<int64_t>(dtype_size(t));
  std::string r = "0";
  if (n > 1) {
    r = "r";
    w_.line(d_.unroll());
    w_.open("for (int r = 0; r < " + std::to_string(n) + "; ++r)");
  }
  if (live != kNoValue) w_.open("if (" + strip_parens(expr(live, r)) + ")");
  const std::string to = strip_parens(expr(dst, r)), from = strip_parens(expr(src, r));
  auto operand = [](std::string x) { return is_identifier(x) || is_number(x) ? x : "(" + strip_parens(x) + ")"; };
  const std::string l = aligned ? "0" : operand(expr(lo, r)), h = aligned ? std::to_string(width) : operand(expr(hi, r));
  std::vector<std::string> copies;
  std::string cond;
  if (l != "0") cond = l + " == 0";
  if (h != std::to_string(width)) cond += (cond.empty() ? "" : " && ") + h + " == " + std::to_string(width);
  auto also = [&](const std::string& x) {
    if (!x.empty() && !aligned) cond += (cond.empty() ? "" : " && ") + x;
  };
  // A kept row's copies (copy_rows_async.cpp): chunks aligned in the tile, not known to be in
  // the array, so each threadgroup address is tested too; and copies below 16 bytes are the
  // dialect's asynchronous ones where it has them (a K loop's narrow chunks stay synchronous).
  const bool row = op.find_attr("row") != nullptr;
  if (std::string a = !row && width * elem < 16 ? std::string()
                      : pred.empty()             ? d_.async_copy(to, from, width * elem)
                                                 : d_.async_copy_if(to, from, width * elem, pred);
      !a.empty()) {
    copies.push_back(a);
    also(d_.vector_aligned(from, width * elem));
    if (row && width > 1) also(d_.vector_aligned(to, width * elem));
  } else if (op.attr_int("vector") != 0) {
    const int64_t sub = std::min<int64_t>(width, 4);
    for (int64_t s = 0; s < width; s += sub) {
      std::string off = s == 0 ? "" : " + " + std::to_string(s);
      copies.push_back("*(" + d_.vector_pointer(t, sub, AddrSpace::threadgroup, false) + ")(" + to + off +
                       ") = *(" + d_.vector_pointer(t, sub, AddrSpace::device, const_ptr_[src]) + ")(" +
                       from + off + ")");
    }
    also(d_.vector_aligned(from, sub * elem));
    also(d_.vector_aligned(to, sub * elem));
  }
  const bool fast = !copies.empty(), guarded = fast && !cond.empty();
  if (guarded) w_.open("if (" + cond + ")");
  for (const std::string& x : copies) w_.line(x + ";");
  if (guarded) w_.raw(std::string(static_cast<size_t>(w_.indent() - 1) * 2, ' ') + "} else {\n");
  if (guarded || !fast) {
    w_.line(d_.unroll());
    w_.open("for (int j = 0; j < " + std::to_string(width) + "; ++j)");
    std::string zero = strip_parens(spell_to_storage(c_, t, spell_zero(c_, t)));
    // The source address is formed only where the element is in bounds.
    w_.line("if (j >= " + l + " && j < " + h + ") (" + to + ")[j] = (" + from + ")[j]; else (" + to + ")[j] = " +
            zero + ";");
    w_.close();
    if (guarded) w_.close();
  }
  if (live != kNoValue) w_.close();
  if (n > 1) w_.close();
}

void Emitter::mma(const gpu::Op& op) {
  ValueId v = op.result();
  int64_t n = regs(v);
  METILE_ASSERT(n > 1, "an mma accumulator holds several registers per thread");
  w_.line(type_of(v) + " " + name_[v] + "[" + std::to_string(n) + "];");
  w_.line(d_.unroll());
  w_.line("for (int r = 0; r < " + std::to_string(n) + "; ++r) " + name_[v] + "[r] = " +
          strip_parens(expr(op.operands[2], "r")) + ";");
  MmaSpec s;
  s.atom = mma_atom_kind(op);
  if (op.operands.size() > 4) s.c = name_[op.operands[4]];
  auto array = [&](ValueId x) {  // a stage of a pipelined dot is an offset into its array
    std::string e = strip_parens(expr(x, "0"));
    return is_identifier(e) ? e : "(" + e + ")";
  };
  if (op.find_attr("register_a") != nullptr && op.attr_int("register_a") != 0) {
    // A's registers hold f32 values of the 16-bit dtype; the fragments take their bits.
    for (int64_t r = 0; r < regs(op.operands[0]); ++r)
      s.a_regs.push_back(strip_parens(spell_to_storage(c_, dtype(op.operands[0]), expr(op.operands[0], std::to_string(r)))));
  } else {
    s.a = array(op.operands[0]);
  }
  s.b = array(op.operands[1]);
  s.acc = name_[v];
  s.tid = strip_parens(expr(op.operands[3], "0"));
  s.ab = dtype(op.operands[0]);
  s.bt = dtype(op.operands[1]);
  s.m = op.attr_int("m");
  s.n = op.attr_int("n");
  s.k = op.attr_int("k");
  s.lda = op.attr_int("lda");
  s.ldb = op.attr_int("ldb");
  s.atom_m = op.attr_int("atom_m");
  s.atom_n = op.attr_int("atom_n");
  s.atom_k = op.attr_int("atom_k");
  s.warps_m = op.attr_int("warps_m");
  s.warps_n = op.attr_int("warps_n");
  s.tf32 = op.attr_int("tf32") != 0;
  s.tf32x3 = op.find_attr("tf32x3") != nullptr && op.attr_int("tf32x3") != 0;
  s.ldmatrix = op.find_attr("ldmatrix") != nullptr && op.attr_int("ldmatrix") != 0;
  s.preload = op.find_attr("preload") != nullptr && op.attr_int("preload") != 0;
  s.serpentine = op.find_attr("serpentine") != nullptr && op.attr_int("serpentine") != 0;
  s.b_kmajor = op.find_attr("b_kmajor") != nullptr && op.attr_int("b_kmajor") != 0;
  s.wait = op.find_attr("wait") == nullptr || op.attr_int("wait") != 0;
  s.transposed = op.find_attr("transposed") != nullptr && op.attr_int("transposed") != 0;
  s.promote = op.find_attr("promote") != nullptr ? op.attr_int("promote") : 0;
  w_.open("");
  d_.mma(w_, s);
  w_.close();
}

}  // namespace metile::emit_detail
