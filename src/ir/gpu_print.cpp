// The GPU IR's text form (METILE_DEBUG=gpu_ir / gpu_ir_opt). Values print with the names the
// emitters use, so a line of generated code can be traced back to its op:
//   %x: f32 x4 #2 = load %x_ptrs, %mask, %zero
// reads "x is a 4-register f32 array in layout #2"; uniform values have no suffix and
// per-thread scalars say `thread`. String attributes are quoted, and atomics print their Tile IR
// op (`atomic_add`) as element-wise ops do, so gpu_parse.cpp reads the text back exactly.
#include <charconv>
#include <sstream>

#include "ir/gpu_ir.h"
#include "support/error.h"

namespace metile::gpu {

namespace {

std::string number(double v) {
  if (v != v) return "nan";
  if (v == 1.0 / 0.0) return "inf";
  if (v == -1.0 / 0.0) return "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

struct Printer {
  const Function& f;
  std::vector<std::string> names;
  std::ostringstream out;

  std::string ref(ValueId v) const { return "%" + names[v]; }
  std::string type(ValueId v) const {
    const Value& val = f.value(v);
    std::string t = dtype_name(val.dtype);
    if (val.is_ptr)
      t = val.space == AddrSpace::threadgroup ? cat("ptr<", t, ", threadgroup>") : cat("ptr<", t, ">");
    if (val.layout == kThread) return t + " thread";
    if (val.layout == kUniform) return t;
    return cat(t, " x", f.layout(val.layout).regs(), " #", val.layout);
  }
  std::string typed(ValueId v) const { return ref(v) + ": " + type(v); }
  void list(const std::vector<ValueId>& vs, size_t from, size_t to) {
    for (size_t i = from; i < to && i < vs.size(); ++i) out << (i > from ? ", " : "") << ref(vs[i]);
  }
  void attrs(const Op& op) {
    for (const Attr& a : op.attrs) {
      out << " " << a.name << "=";
      if (const auto* i = std::get_if<int64_t>(&a.value)) out << *i;
      else if (const auto* d = std::get_if<double>(&a.value)) out << number(*d);
      else out << quote(std::get<std::string>(a.value));
    }
  }
  void block(const Block& b, int indent) {
    for (const Op& op : b.ops) one(op, indent);
  }
  // if %c { ... } else { ... }; while iter(%c: T = %init, ...) { ... } do (%a: T, ...) { ... };
  // warp_specialize producers=N { ... } consumers { ... }
  void control(const Op& op, int indent, const std::string& pad) {
    if (op.kind == GpuOpKind::WARP_SPECIALIZE) {
      out << "warp_specialize";
      attrs(op);
      out << " {\n";
      block(op.regions[0], indent + 1);
      out << pad << "} consumers {\n";
    } else if (op.kind == GpuOpKind::IF) {
      out << "if " << ref(op.operands[0]) << " {\n";
      block(op.regions[0], indent + 1);
      out << pad << "} else {\n";
    } else {
      out << "while";
      if (!op.operands.empty()) {
        out << " iter(";
        for (size_t i = 0; i < op.operands.size(); ++i)
          out << (i ? ", " : "") << typed(op.regions[0].args[i]) << " = " << ref(op.operands[i]);
        out << ")";
      }
      out << " {\n";
      block(op.regions[0], indent + 1);
      out << pad << "} do (";
      for (size_t i = 0; i < op.regions[1].args.size(); ++i)
        out << (i ? ", " : "") << typed(op.regions[1].args[i]);
      out << ") {\n";
    }
    block(op.regions[1], indent + 1);
    out << pad << "}\n";
  }
  void one(const Op& op, int indent) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    out << pad;
    if (op.kind == GpuOpKind::FOR) {
      const Block& body = op.body();
      out << "for " << typed(body.args[0]) << " = " << ref(op.operands[0]) << " to "
          << ref(op.operands[1]) << " step " << ref(op.operands[2]);
      if (op.operands.size() > 3) {
        out << " iter(";
        for (size_t i = 3; i < op.operands.size(); ++i)
          out << (i > 3 ? ", " : "") << typed(body.args[i - 2]) << " = " << ref(op.operands[i]);
        out << ") -> (";
        list(op.results, 0, op.results.size());
        out << ")";
      }
      out << " {\n";
      block(body, indent + 1);
      out << pad << "}\n";
      return;
    }
    for (size_t i = 0; i < op.results.size(); ++i) out << (i ? ", " : "") << typed(op.results[i]);
    if (!op.results.empty()) out << " = ";
    if (op.kind == GpuOpKind::IF || op.kind == GpuOpKind::WHILE || op.kind == GpuOpKind::WARP_SPECIALIZE) {
      control(op, indent, pad);
      return;
    }
    if (op.kind == GpuOpKind::ELEMENTWISE || op.kind == GpuOpKind::ATOMIC) out << op_name(op.tile_op);
    else out << gpu_op_name(op.kind);
    if (op.kind == GpuOpKind::BUILTIN) {
      static const char* axes[] = {"x", "y", "z"};
      out << " " << builtin_name(op.builtin) << "." << axes[op.attr_int("axis") % 3] << "\n";
      return;
    }
    if (op.kind == GpuOpKind::SIMD_REDUCE || op.kind == GpuOpKind::REG_REDUCE)
      out << "." << reduction_name(op.reduce);
    if (op.kind == GpuOpKind::COORD || op.kind == GpuOpKind::VALID)
      out << " #" << f.value(op.result()).layout;
    if (!op.operands.empty()) out << " ";
    list(op.operands, 0, op.operands.size());
    attrs(op);
    out << "\n";
  }
};

}  // namespace

std::string print(const Function& f) {
  Printer p{f, name_values(f, {}), {}};
  p.out << "gpu_kernel @" << f.name << "(";
  for (size_t i = 0; i < f.params.size(); ++i)
    p.out << (i ? ", " : "") << p.typed(f.params[i].value);
  p.out << ") threads=" << f.threads << " simd=" << f.simd_width;
  if (f.max_registers != 0) p.out << " maxnreg=" << f.max_registers;
  p.out << " {\n";
  for (LayoutId l = 2; l < f.layouts.size(); ++l)
    p.out << "  #" << l << " = " << f.layout(l).str() << "\n";
  p.block(f.body, 1);
  p.out << "}\n";
  return p.out.str();
}

}  // namespace metile::gpu
