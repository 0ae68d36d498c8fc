// The canonical text form of the Tile IR. Values are renumbered in definition order (parameters
// keep their names), so two programs that differ only in builder-internal ids print the same:
// the text is the compile-cache key's program component. See parse.cpp for the grammar.
#include <charconv>
#include <sstream>
#include <unordered_map>

#include "ir/tile_ir.h"
#include "support/error.h"

namespace metile {

namespace {

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

std::string number(double v) {
  if (v != v) return "nan";
  if (v == 1.0 / 0.0) return "inf";
  if (v == -1.0 / 0.0) return "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

struct Printer {
  const Program& p;
  bool locs;
  const OpNote* note = nullptr;
  std::ostringstream out;
  std::unordered_map<ValueId, std::string> names;
  int next = 0;

  const std::string& name(ValueId v) {
    auto it = names.find(v);
    if (it == names.end()) it = names.emplace(v, "%" + std::to_string(next++)).first;
    return it->second;
  }
  void list(const std::vector<ValueId>& vs, size_t from = 0, size_t to = SIZE_MAX) {
    for (size_t i = from; i < vs.size() && i < to; ++i) out << (i > from ? ", " : "") << name(vs[i]);
  }
  void types(const std::vector<ValueId>& vs) {
    for (size_t i = 0; i < vs.size(); ++i) out << (i ? ", " : "") << p.type(vs[i]).str();
  }
  void loc(const Op& op) {
    if (locs && op.loc.file != 0 && op.loc.file <= p.files.size())
      out << " loc(" << quote(p.files[op.loc.file - 1]) << ":" << op.loc.line << ")";
  }
  void attrs(const Op& op) {
    if (op.attrs.empty()) return;
    out << " {";
    for (size_t i = 0; i < op.attrs.size(); ++i) {
      const Attr& a = op.attrs[i];
      out << (i ? ", " : "") << a.name << " = ";
      if (const auto* iv = std::get_if<int64_t>(&a.value)) out << *iv;
      else if (const auto* dv = std::get_if<double>(&a.value)) out << number(*dv);
      else out << quote(std::get<std::string>(a.value));
    }
    out << "}";
  }
  void block(const Block& b, int indent) {
    for (const Op& op : b.ops) one(op, indent);
  }
  void one(const Op& op, int indent) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    out << pad;
    if (!op.results.empty()) {
      list(op.results);
      out << " = ";
    }
    out << op_name(op.kind);
    if (op.kind == OpKind::FOR) {
      const Block& b = op.body();
      out << " " << name(b.args.at(0)) << " = " << name(op.operands[0]) << " to "
          << name(op.operands[1]) << " step " << name(op.operands[2]);
      if (op.operands.size() > 3) {
        out << " iter_args(";
        for (size_t i = 3; i < op.operands.size(); ++i)
          out << (i > 3 ? ", " : "") << name(b.args.at(i - 2)) << " = " << name(op.operands[i]);
        out << ") -> (";
        types(op.results);
        out << ")";
      }
    } else if (op.kind == OpKind::WHILE) {
      // while (%arg = %init, ...) : types { condition block } do (%arg, ...) { body }
      out << " (";
      for (size_t i = 0; i < op.operands.size(); ++i)
        out << (i ? ", " : "") << name(op.regions[0].args.at(i)) << " = " << name(op.operands[i]);
      out << ")";
      if (!op.results.empty()) {
        out << " : ";
        types(op.results);
      }
    } else {
      if (!op.operands.empty()) out << " ";
      list(op.operands);
      attrs(op);
      if (!op.results.empty()) {
        out << " : ";
        types(op.results);
      }
    }
    loc(op);
    std::string n = note != nullptr && *note ? (*note)(op) : std::string();
    if (!op.regions.empty()) {
      out << " {" << (n.empty() ? "" : " // " + n) << "\n";
      block(op.regions[0], indent + 1);
      out << pad << "}";
      if (op.kind == OpKind::IF) {
        out << " else {\n";
        block(op.regions.at(1), indent + 1);
        out << pad << "}";
      } else if (op.kind == OpKind::WHILE) {
        out << " do (";
        list(op.regions.at(1).args);
        out << ") {\n";
        block(op.regions[1], indent + 1);
        out << pad << "}";
      }
    } else if (!n.empty()) {
      out << " // " << n;
    }
    out << "\n";
  }
};

}  // namespace

std::string print(const Program& p, bool with_locations) { return print(p, with_locations, {}); }

std::string print(const Program& p, bool with_locations, const OpNote& note) {
  Printer pr{p, with_locations, &note, {}, {}, 0};
  auto& out = pr.out;
  out << "kernel @" << p.name << "(";
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Param& prm = p.params[i];
    pr.names[prm.value] = "%" + prm.name;
    out << (i ? ", " : "") << "%" << prm.name << ": " << p.type(prm.value).str();
  }
  out << ")";
  if (p.num_threads) out << " num_threads(" << p.num_threads << ")";
  if (!p.constexprs.empty()) {
    out << " constexprs(";
    for (size_t i = 0; i < p.constexprs.size(); ++i)
      out << (i ? ", " : "") << p.constexprs[i].first << " = " << quote(p.constexprs[i].second);
    out << ")";
  }
  out << " {\n";
  pr.block(p.body, 1);
  out << "}\n";
  return out.str();
}

}  // namespace metile
