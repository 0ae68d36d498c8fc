// Parser for the canonical text form that print.cpp writes:
//
//   kernel @NAME(%p: TYPE, ...) [num_threads(N)] [constexprs(K = "V", ...)] {
//     [%r, ... =] OPNAME [%a, ...] [{attr = V, ...}] [: TYPE, ...] [loc("FILE":LINE)] [{ ... }]
//     [%r, ... =] for %iv = %s to %e step %st [iter_args(%c = %i, ...) -> (TYPE, ...)] [loc] { ... }
//   }
//
// Value names are scoped like the IR: a region's names are not visible after it. The result is
// verified before it is returned.
#include <charconv>
#include <cstring>
#include <unordered_map>

#include "ir/tile_ir.h"
#include "support/error.h"
#include "support/text.h"

namespace metile {

namespace {

struct Parser {
  std::string_view src;
  size_t pos = 0;
  int line = 1;
  Program prog;
  std::vector<std::unordered_map<std::string, ValueId>> scopes;

  template <typename... Args>
  [[noreturn]] void bad(Args&&... parts) {
    bad_at(line, std::forward<Args>(parts)...);
  }
  // For problems found after the parser looked past the end of the line they are on.
  template <typename... Args>
  [[noreturn]] void bad_at(int at, Args&&... parts) {
    fail(METILE_ERROR_INVALID_PROGRAM, "parse", "line ", at, ": ", std::forward<Args>(parts)...);
  }

  void skip_ws() {
    while (pos < src.size()) {
      char c = src[pos];
      if (c == '\n') {
        ++line;
        ++pos;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos;
      } else if (c == '/' && pos + 1 < src.size() && src[pos + 1] == '/') {
        while (pos < src.size() && src[pos] != '\n') ++pos;
      } else {
        break;
      }
    }
  }
  bool peek(std::string_view s) {
    skip_ws();
    return src.substr(pos, s.size()) == s;
  }
  // Like peek() but without crossing a line break: an operand-less op (`barrier`) must not take
  // the next line's result name as its operand.
  bool peek_inline(std::string_view s) {
    while (pos < src.size() && (src[pos] == ' ' || src[pos] == '\t' || src[pos] == '\r')) ++pos;
    return src.substr(pos, s.size()) == s;
  }
  bool accept(std::string_view s) {
    if (!peek(s)) return false;
    pos += s.size();
    return true;
  }
  void expect(std::string_view s) {
    if (!accept(s)) bad("expected '", s, "' near '", src.substr(pos, 20), "'");
  }
  static bool ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  }
  std::string ident() {
    skip_ws();
    size_t b = pos;
    while (pos < src.size() && (std::isalnum(static_cast<unsigned char>(src[pos])) || src[pos] == '_'))
      ++pos;
    if (b == pos) bad("expected a name near '", src.substr(pos, 20), "'");
    return std::string(src.substr(b, pos - b));
  }
  std::string value_name() {
    expect("%");
    size_t b = pos;
    while (pos < src.size() && (std::isalnum(static_cast<unsigned char>(src[pos])) || src[pos] == '_'))
      ++pos;
    if (b == pos) bad("expected a value name after '%'");
    return std::string(src.substr(b, pos - b));
  }
  std::string quoted() {
    expect("\"");
    std::string s;
    while (pos < src.size() && src[pos] != '"') {
      char c = src[pos++];
      if (c == '\\' && pos < src.size()) {
        c = src[pos++];
        if (c == 'n') c = '\n';
      }
      if (c == '\n') bad("newline in a string");
      s += c;
    }
    expect("\"");
    // Strings (source file names, constexpr values, attributes) may reach generated source.
    std::string why = text_problem(s);
    if (!why.empty()) bad("the string \"", printable_ascii(s.substr(0, 80)), "\" ", why);
    return s;
  }
  int64_t integer() {
    skip_ws();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(src.data() + pos, src.data() + src.size(), v);
    if (ec != std::errc()) bad("expected an integer near '", src.substr(pos, 20), "'");
    pos = static_cast<size_t>(p - src.data());
    return v;
  }
  AttrValue number() {
    skip_ws();
    size_t b = pos;
    if (pos < src.size() && (src[pos] == '-' || src[pos] == '+')) ++pos;
    while (pos < src.size() && (std::isalnum(static_cast<unsigned char>(src[pos])) || src[pos] == '.' ||
                                ((src[pos] == '-' || src[pos] == '+') && (src[pos - 1] == 'e' || src[pos - 1] == 'E'))))
      ++pos;
    std::string_view t = src.substr(b, pos - b);
    if (t == "inf") return 1.0 / 0.0;
    if (t == "-inf") return -1.0 / 0.0;
    if (t == "nan") return 0.0 / 0.0;
    bool is_float = t.find_first_of(".eE") != std::string_view::npos;
    if (is_float) {
      double d = 0;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
      if (ec != std::errc() || p != t.data() + t.size()) bad("bad number '", t, "'");
      return d;
    }
    int64_t i = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), i);
    if (ec != std::errc() || p != t.data() + t.size()) bad("bad number '", t, "'");
    return i;
  }
  Type type() {
    skip_ws();
    size_t b = pos;
    int depth = 0;
    while (pos < src.size()) {
      char c = src[pos];
      if (c == '<') ++depth;
      else if (c == '>') {
        if (depth == 0) break;
        --depth;
      } else if (depth == 0 && !(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) break;
      else if (depth > 0 && !(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ',' || c == ' '))
        break;
      ++pos;
    }
    std::string_view t = src.substr(b, pos - b);
    auto ty = parse_type(t);
    if (!ty) bad("bad type '", t, "'");
    return *ty;
  }

  ValueId lookup(const std::string& name) {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    bad("value %", name, " is not defined here");
  }
  void bind(const std::string& name, ValueId v, int at) {
    for (const auto& s : scopes)
      if (s.count(name)) bad_at(at, "value %", name, " is defined twice");
    scopes.back()[name] = v;
  }
  ValueId operand() { return lookup(value_name()); }

  Loc loc() {
    if (!accept("loc(")) return {};
    std::string file = quoted();
    expect(":");
    int64_t l = integer();
    expect(")");
    return Loc{prog.intern_file(file), static_cast<int32_t>(l)};
  }

  void block(Block& b) {
    if (static_cast<int>(scopes.size()) > kMaxRegionDepth + 1)
      bad("regions nest deeper than ", kMaxRegionDepth, " levels");
    expect("{");
    while (!accept("}")) {
      if (pos >= src.size()) bad("unexpected end of input (missing '}')");
      b.ops.push_back(op());
    }
  }

  Op op() {
    skip_ws();
    const int start = line;
    std::vector<std::string> results;
    if (peek("%")) {
      do results.push_back(value_name());
      while (accept(","));
      expect("=");
    }
    std::string name = ident();
    auto kind = parse_op_name(name);
    if (!kind) bad("unknown op '", name, "'");
    Op o;
    o.kind = *kind;
    if (o.kind == OpKind::FOR) return for_op(std::move(o), results, start);
    if (o.kind == OpKind::WHILE) return while_op(std::move(o), results, start);
    if (peek_inline("%")) {
      do o.operands.push_back(operand());
      while (accept(","));
    }
    if (o.kind != OpKind::IF && accept("{")) {  // an if's `{` opens its then block
      if (!accept("}")) {
        do {
          std::string an = ident();
          expect("=");
          if (peek("\"")) o.attrs.push_back({an, quoted()});
          else o.attrs.push_back({an, number()});
        } while (accept(","));
        expect("}");
      }
    }
    std::vector<Type> types;
    if (accept(":")) {
      do types.push_back(type());
      while (accept(","));
    }
    if (types.size() != results.size())
      bad_at(start, name, ": ", results.size(), " results but ", types.size(), " types");
    o.loc = loc();
    if (has_trait(o.kind, kRegion)) {
      o.regions.emplace_back();
      scopes.emplace_back();
      block(o.regions[0]);
      scopes.pop_back();
      if (o.kind == OpKind::IF) {
        expect("else");
        o.regions.emplace_back();
        scopes.emplace_back();
        block(o.regions[1]);
        scopes.pop_back();
      }
    }
    for (size_t i = 0; i < results.size(); ++i) {
      ValueId v = prog.new_value(types[i]);
      o.results.push_back(v);
      bind(results[i], v, start);
    }
    return o;
  }

  // while (%a = %init, ...) : types loc(...) { condition block } do (%b, ...) { body }
  Op while_op(Op o, const std::vector<std::string>& results, int start) {
    expect("(");
    std::vector<std::string> carried;
    if (!accept(")")) {
      do {
        carried.push_back(value_name());
        expect("=");
        o.operands.push_back(operand());
      } while (accept(","));
      expect(")");
    }
    std::vector<Type> types;
    if (accept(":")) {
      do types.push_back(type());
      while (accept(","));
    }
    if (types.size() != carried.size() || results.size() != carried.size())
      bad_at(start, "while: ", carried.size(), " carried values, ", types.size(), " types and ",
             results.size(), " results must agree");
    o.loc = loc();
    auto region = [&](const std::vector<std::string>& args) {
      Block b;
      scopes.emplace_back();
      for (size_t i = 0; i < args.size(); ++i) {
        b.args.push_back(prog.new_value(prog.type(o.operands[i])));
        bind(args[i], b.args.back(), start);
      }
      block(b);
      scopes.pop_back();
      o.regions.push_back(std::move(b));
    };
    region(carried);
    expect("do");
    expect("(");
    std::vector<std::string> passed;
    if (!accept(")")) {
      do passed.push_back(value_name());
      while (accept(","));
      expect(")");
    }
    if (passed.size() != carried.size())
      bad_at(start, "while: the body takes ", passed.size(), " arguments, the loop carries ",
             carried.size());
    region(passed);
    for (size_t i = 0; i < results.size(); ++i) {
      ValueId v = prog.new_value(types[i]);
      o.results.push_back(v);
      bind(results[i], v, start);
    }
    return o;
  }

  Op for_op(Op o, const std::vector<std::string>& results, int start) {
    std::string iv = value_name();
    expect("=");
    ValueId s = operand();
    expect("to");
    ValueId e = operand();
    expect("step");
    ValueId st = operand();
    o.operands = {s, e, st};
    std::vector<std::string> carried;
    std::vector<Type> types;
    if (accept("iter_args(")) {
      do {
        carried.push_back(value_name());
        expect("=");
        o.operands.push_back(operand());
      } while (accept(","));
      expect(")");
      expect("->");
      expect("(");
      do types.push_back(type());
      while (accept(","));
      expect(")");
    }
    if (types.size() != carried.size() || results.size() != carried.size())
      bad_at(start, "for: ", carried.size(), " carried values, ", types.size(), " types and ",
          results.size(), " results must agree");
    o.loc = loc();
    Block body;
    scopes.emplace_back();
    ValueId ivv = prog.new_value(prog.type(s));
    body.args.push_back(ivv);
    bind(iv, ivv, start);
    for (size_t i = 0; i < carried.size(); ++i) {
      ValueId v = prog.new_value(prog.type(o.operands[3 + i]));
      body.args.push_back(v);
      bind(carried[i], v, start);
    }
    block(body);
    scopes.pop_back();
    o.regions.push_back(std::move(body));
    for (size_t i = 0; i < results.size(); ++i) {
      ValueId v = prog.new_value(types[i]);
      o.results.push_back(v);
      bind(results[i], v, start);
    }
    return o;
  }

  Program run() {
    expect("kernel");
    expect("@");
    prog.name = ident();
    scopes.emplace_back();
    expect("(");
    if (!accept(")")) {
      do {
        std::string n = value_name();
        expect(":");
        ValueId v = prog.new_value(type());
        bind(n, v, line);
        prog.params.push_back({n, v});
      } while (accept(","));
      expect(")");
    }
    if (accept("num_threads(")) {
      prog.num_threads = integer();
      expect(")");
    }
    if (accept("constexprs(")) {
      do {
        std::string k = ident();
        expect("=");
        prog.constexprs.emplace_back(k, quoted());
      } while (accept(","));
      expect(")");
    }
    block(prog.body);
    skip_ws();
    if (pos != src.size()) bad("unexpected text after the kernel");
    verify(prog);
    return std::move(prog);
  }
};

}  // namespace

Program parse(std::string_view text) {
  Parser parser;
  parser.src = text;
  return parser.run();
}

}  // namespace metile
