// A token-level pass over MSL (comments, literals and preprocessor lines skipped). It assumes
// the source is C++-shaped MSL as the emitter and people write it; anything it does not
// recognise is left for clang to diagnose.
#include "runtime/metal_sim/msl_prepare.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "support/error.h"

namespace metile::metal_sim {

namespace {

struct Token {
  enum Kind { ident, number, punct, literal } kind;
  size_t begin, end;
  int line;
  std::string_view text;
  bool is(std::string_view s) const { return text == s; }
};

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0, n = s.size();
  int line = 1;
  bool line_start = true;  // only whitespace so far on this line
  while (i < n) {
    char c = s[i];
    if (c == '\n') {
      ++line, ++i, line_start = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      end = end == std::string_view::npos ? n : end + 2;
      line += static_cast<int>(std::count(s.begin() + i, s.begin() + end, '\n'));
      i = end;
    } else if (c == '#' && line_start) {
      while (i < n && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\n') ++line, ++i;
        ++i;
      }
    } else {
      line_start = false;
      size_t b = i;
      Token::Kind kind = Token::punct;
      if (ident_start(c)) {
        kind = Token::ident;
        while (i < n && ident_char(s[i])) ++i;
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
        kind = Token::number;
        while (i < n && (ident_char(s[i]) || s[i] == '.' ||
                         ((s[i] == '+' || s[i] == '-') && std::strchr("eEpP", s[i - 1]))))
          ++i;
      } else if (c == '"' || c == '\'') {
        kind = Token::literal;
        for (++i; i < n && s[i] != c && s[i] != '\n'; ++i)
          if (s[i] == '\\') ++i;
        ++i;
      } else {
        ++i;
      }
      i = std::min(i, n);
      out.push_back({kind, b, i, line, s.substr(b, i - b)});
    }
  }
  return out;
}

bool is_metal_attribute(std::string_view name) {
  static constexpr std::string_view names[] = {"kernel", "buffer", "threadgroup",
                                               "max_total_threads_per_threadgroup"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names) ||
         parse_builtin(name).has_value();
}

/** One `[[...]]` list: its token range and, for Metal attributes, their names and arguments. */
struct Attribute {
  size_t first = 0, last = 0;  // token indices of the opening `[` and the closing `]`
  bool metal = false;
  std::string name;  // the first item's name
  std::string argument;
};

struct Edit {
  size_t begin, end;
  std::string text;
};

class Preparer {
 public:
  Preparer(std::string_view src, std::string_view file, const MslSignature* sig)
      : src_(src), file_(file), sig_(sig), toks_(tokenize(src)) {}

  std::string run() {
    find_attributes();
    rewrite_threadgroup();
    tick_loops();
    if (sig_ != nullptr) check_kernel();
    return apply();
  }

 private:
  [[noreturn]] void error(int line, const std::string& what) const {
    fail(METILE_ERROR_COMPILE, "metal-sim", file_, ":", line, ": ", what);
  }

  bool punct(size_t i, char c) const {
    return i < toks_.size() && toks_[i].kind == Token::punct && toks_[i].text[0] == c;
  }

  /** Index of the token closing the bracket opened at `open`. */
  size_t match(size_t open) const {
    char o = toks_[open].text[0];
    char c = o == '(' ? ')' : o == '[' ? ']' : '}';
    int depth = 0;
    for (size_t i = open; i < toks_.size(); ++i) {
      if (punct(i, o)) ++depth;
      if (punct(i, c) && --depth == 0) return i;
    }
    error(toks_[open].line, cat("unbalanced '", o, "'"));
  }

  const Attribute* attribute_at(size_t i) const {
    for (const Attribute& a : attrs_)
      if (i >= a.first && i <= a.last) return &a;
    return nullptr;
  }

  void find_attributes() {
    for (size_t i = 0; i + 1 < toks_.size(); ++i) {
      if (!punct(i, '[') || !punct(i + 1, '[')) continue;
      size_t inner_end = match(i + 1);  // the first `]` of `]]`
      if (!punct(inner_end + 1, ']')) error(toks_[i].line, "malformed attribute list");
      Attribute a;
      a.first = i;
      a.last = inner_end + 1;
      int metal = 0, other = 0;
      for (size_t j = i + 2; j < inner_end;) {
        const Token& t = toks_[j];
        if (t.kind != Token::ident) error(t.line, "malformed attribute list");
        bool scoped = punct(j + 1, ':') && punct(j + 2, ':');
        if (scoped || !is_metal_attribute(t.text)) {
          static constexpr std::string_view standard[] = {"maybe_unused", "fallthrough",
                                                          "nodiscard", "noreturn", "deprecated"};
          if (!scoped &&
              std::find(std::begin(standard), std::end(standard), t.text) == std::end(standard))
            error(t.line, cat("unknown attribute [[", t.text, "]]"));
          ++other;
        } else {
          if (metal++ == 0) a.name = std::string(t.text);
        }
        size_t k = j + 1;
        while (k < inner_end && !punct(k, ',')) {
          if (punct(k, '(')) {
            size_t close = match(k);
            if (metal > 0 && a.argument.empty() && a.name == t.text)
              a.argument = std::string(
                  src_.substr(toks_[k + 1].begin, toks_[close].begin - toks_[k + 1].begin));
            k = close;
          }
          ++k;
        }
        j = k + 1;
      }
      if (metal > 0 && other > 0)
        error(toks_[i].line, "metal-sim cannot mix Metal and other attributes in one [[...]]");
      a.metal = metal > 0;
      if (a.metal) edits_.push_back({toks_[a.first].begin, toks_[a.last].end, " "});
      attrs_.push_back(a);
      i = a.last;
    }
  }

  void rewrite_threadgroup() {
    int depth = 0;
    for (size_t i = 0; i < toks_.size(); ++i) {
      if (punct(i, '{')) ++depth;
      if (punct(i, '}')) --depth;
      if (!toks_[i].is("threadgroup") || attribute_at(i) != nullptr) continue;
      bool statement_start = i == 0 || punct(i - 1, ';') || punct(i - 1, '{') || punct(i - 1, '}');
      if (!statement_start || !declare_variables(i, depth))
        edits_.push_back({toks_[i].begin, toks_[i].end, " "});
    }
  }

  /** Puts a loop_tick() at the top of every braced loop body, so the runtime can stop a launch
   *  past its time limit (METILE_TIMEOUT_S) even in a loop that never waits. */
  void tick_loops() {
    for (size_t i = 0; i + 1 < toks_.size(); ++i) {
      size_t brace = 0;
      if ((toks_[i].is("for") || toks_[i].is("while")) && toks_[i].kind == Token::ident &&
          punct(i + 1, '(')) {
        size_t close = match(i + 1);
        if (punct(close + 1, '{')) brace = close + 1;
      } else if (toks_[i].is("do") && toks_[i].kind == Token::ident && punct(i + 1, '{')) {
        brace = i + 1;
      }
      if (brace != 0)
        edits_.push_back({toks_[brace].end, toks_[brace].end, " ::metal::detail::loop_tick();"});
    }
  }

  /**
   * `threadgroup` at `kw` starts a declaration. Rewrites it when it declares variables and
   * returns true; returns false for pointer declarations (the qualifier is then dropped).
   */
  bool declare_variables(size_t kw, int depth) {
    size_t semi = kw + 1;
    for (int nest = 0; semi < toks_.size(); ++semi) {
      if (punct(semi, '(') || punct(semi, '[') || punct(semi, '{')) ++nest;
      if (punct(semi, ')') || punct(semi, ']') || punct(semi, '}')) --nest;
      if (nest == 0 && punct(semi, ';')) break;
      if (nest < 0) return false;
    }
    if (semi >= toks_.size()) return false;
    // Split the declarators at top-level commas.
    std::vector<std::pair<size_t, size_t>> parts;
    size_t start = kw + 1;
    for (size_t i = start, nest = 0; i <= semi; ++i) {
      if (punct(i, '(') || punct(i, '[') || punct(i, '{') || (punct(i, '<') && nest == 0)) ++nest;
      if (punct(i, ')') || punct(i, ']') || punct(i, '}') || (punct(i, '>') && nest == 1)) --nest;
      if (i == semi || (nest == 0 && punct(i, ','))) {
        parts.push_back({start, i});
        start = i + 1;
      }
    }
    struct Declarator {
      size_t name;
      size_t dims_end;
      bool pointer;
    };
    std::vector<Declarator> decls;
    size_t type_end = kw + 1;
    for (size_t p = 0; p < parts.size(); ++p) {
      auto [b, e] = parts[p];
      size_t stop = b;
      while (stop < e && !punct(stop, '[') && !punct(stop, '=')) ++stop;
      size_t name = stop;
      while (name > b && toks_[name - 1].kind != Token::ident) --name;
      if (name == b) return false;  // not a declaration we understand; clang will say more
      --name;
      if (p == 0) type_end = name;
      bool pointer = false;
      for (size_t i = p == 0 ? kw + 1 : b; i < name; ++i)
        pointer |= punct(i, '*') || punct(i, '&') || punct(i, '(');
      bool initialized = false;
      for (size_t i = name + 1, nest = 0; i < e; ++i) {
        if (punct(i, '(') || punct(i, '[') || punct(i, '{')) ++nest;
        if (punct(i, ')') || punct(i, ']') || punct(i, '}')) --nest;
        initialized |= nest == 0 && punct(i, '=');
      }
      if (initialized && !pointer)
        error(toks_[kw].line,
              cat("threadgroup variable '", toks_[name].text, "' cannot have an initializer"));
      decls.push_back({name, e, pointer});
    }
    bool any_pointer = false, all_pointer = true;
    for (const Declarator& d : decls) any_pointer |= d.pointer, all_pointer &= d.pointer;
    if (all_pointer) return false;
    if (any_pointer)
      error(toks_[kw].line, "declare threadgroup variables and threadgroup pointers separately");
    if (depth == 0)
      error(toks_[kw].line, cat("threadgroup variable '", toks_[decls[0].name].text,
                                "' at program scope (MSL allows them only in kernel functions)"));
    std::string type = joined(kw + 1, type_end);
    std::string text;
    for (const Declarator& d : decls) {
      std::string name(toks_[d.name].text);
      text += cat("auto& ", name, " = ::metal::detail::threadgroup_variable<", type,
                  joined(d.name + 1, d.dims_end), ">(", next_variable_++, ", \"", name, "\"); ");
    }
    edits_.push_back({toks_[kw].begin, toks_[semi].end, text});
    return true;
  }

  std::string joined(size_t b, size_t e) const {
    std::string s;
    for (size_t i = b; i < e; ++i) {
      if (i != b) s += ' ';
      s += toks_[i].text;
    }
    return s;
  }

  void check_kernel() {
    size_t open = 0;
    for (size_t i = 1, depth = 0; i + 1 < toks_.size() && open == 0; ++i) {
      if (punct(i, '{')) ++depth;
      if (punct(i, '}')) --depth;
      if (depth == 0 && toks_[i].is(sig_->kernel) && toks_[i - 1].is("void") && punct(i + 1, '('))
        open = i + 1;
    }
    if (open == 0)
      fail(METILE_ERROR_COMPILE, "metal-sim", file_, ": no kernel function `void ", sig_->kernel,
           "(...)` in the MSL source");
    size_t close = match(open);
    std::vector<std::pair<size_t, size_t>> params;
    if (close > open + 1) {
      size_t start = open + 1;
      for (size_t i = start, nest = 0; i <= close; ++i) {
        if (punct(i, '(') || punct(i, '[') || punct(i, '<')) ++nest;
        if (punct(i, ')') || punct(i, ']') || punct(i, '>')) --nest;
        if (i == close || (nest == 0 && punct(i, ','))) {
          params.push_back({start, i});
          start = i + 1;
        }
      }
    }
    int line = toks_[open].line;
    std::vector<const MslArg*> kernel_params;  // members live inside the packed parameter
    for (const MslArg& a : sig_->args)
      if (a.kind != MslArg::Kind::member) kernel_params.push_back(&a);
    if (params.size() != kernel_params.size())
      error(line, cat("kernel '", sig_->kernel, "' has ", params.size(),
                      " parameters but its signature lists ", kernel_params.size()));
    for (size_t p = 0; p < params.size(); ++p)
      check_parameter(p, *kernel_params[p], params[p].first, params[p].second);
  }

  void check_parameter(size_t index, const MslArg& arg, size_t b, size_t e) {
    const Attribute* attr = nullptr;
    std::string_view name;
    bool star = false, amp = false, is_const = false;
    for (size_t i = b; i < e; ++i) {
      if (const Attribute* a = attribute_at(i)) {
        if (a->metal) attr = a;
        i = a->last;
        continue;
      }
      star |= punct(i, '*');
      amp |= punct(i, '&');
      is_const |= toks_[i].is("const");
      if (toks_[i].kind == Token::ident) name = toks_[i].text;
    }
    int line = toks_[b < e ? b : b - 1].line;
    std::string what = cat("kernel parameter ", index, " '", name, "'");
    if (name != arg.name) error(line, cat(what, " is named '", arg.name, "' in the signature"));
    std::string expected;
    bool shape_ok = true;
    switch (arg.kind) {
      case MslArg::Kind::buffer:
        expected = cat("buffer(", arg.binding, ")");
        shape_ok = star && is_const == arg.is_const;
        break;
      case MslArg::Kind::stop:
        expected = cat("buffer(", arg.binding, ")");
        shape_ok = star && !is_const;
        break;
      case MslArg::Kind::scalar:
      case MslArg::Kind::packed:
        expected = cat("buffer(", arg.binding, ")");
        shape_ok = amp;
        break;
      case MslArg::Kind::member:
        break;
      case MslArg::Kind::threadgroup:
        expected = cat("threadgroup(", arg.binding, ")");
        shape_ok = star;
        break;
      case MslArg::Kind::builtin:
        expected = builtin_name(arg.builtin);
        shape_ok = !star && !amp;
        break;
    }
    std::string found = attr == nullptr ? "no attribute"
                        : attr->argument.empty()
                            ? cat("[[", attr->name, "]]")
                            : cat("[[", attr->name, "(", attr->argument, ")]]");
    if (found != cat("[[", expected, "]]"))
      error(line, cat(what, " has ", found, " but the signature expects [[", expected, "]]"));
    if (!shape_ok) {
      const char* shape = arg.kind == MslArg::Kind::scalar || arg.kind == MslArg::Kind::packed
                              ? "a `constant T&` reference"
                          : arg.kind == MslArg::Kind::builtin ? "a value"
                          : arg.is_const                      ? "a `device const T*` pointer"
                                                              : "a non-const pointer";
      error(line, cat(what, " should be ", shape, " per its signature"));
    }
  }

  std::string apply() {
    std::sort(edits_.begin(), edits_.end(),
              [](const Edit& a, const Edit& b) {
                return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
              });
    std::string out;
    size_t pos = 0;
    for (const Edit& e : edits_) {
      if (e.begin < pos) continue;  // inside an earlier rewrite
      out.append(src_.substr(pos, e.begin - pos));
      out += e.text;
      // Keep the line count so clang's diagnostics point at the MSL's lines.
      out.append(
          static_cast<size_t>(std::count(src_.begin() + e.begin, src_.begin() + e.end, '\n')),
          '\n');
      pos = e.end;
    }
    out.append(src_.substr(pos));
    return out;
  }

  std::string_view src_;
  std::string_view file_;
  const MslSignature* sig_;
  std::vector<Token> toks_;
  std::vector<Attribute> attrs_;
  std::vector<Edit> edits_;
  int next_variable_ = 0;
};

}  // namespace

std::string prepare_msl(std::string_view msl, std::string_view file_name,
                        const MslSignature* signature) {
  return Preparer(msl, file_name, signature).run();
}

}  // namespace metile::metal_sim
