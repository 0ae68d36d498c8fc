#include "kernel_params.h"

#include <cctype>

#include "support/error.h"

namespace metile::standin {

namespace {

using metal_sim::MslArg;

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

DType dtype_named(const std::string& name, const std::string& param) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::u32, DType::i64,
                  DType::boolean, DType::i8, DType::u8})
    if (name == metal_sim::msl_type_name(t)) return t;
  fail(METILE_ERROR_COMPILE, "metal stand-in", "parameter '", param, "': unknown type '", name, "'");
}

MslArg parse_param_alone(const std::string& msl, const std::string& text) {
  size_t open = text.find("[[");
  size_t close = text.find("]]", open);
  if (open == std::string::npos || close == std::string::npos)
    fail(METILE_ERROR_COMPILE, "metal stand-in", "kernel parameter without an attribute: ", text);
  std::string attr = trim(text.substr(open + 2, close - open - 2));
  std::string decl = trim(text.substr(0, open));
  size_t name_at = decl.find_last_not_of(
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
  std::string name = decl.substr(name_at + 1);
  std::string type = trim(decl.substr(0, name_at + 1));
  std::vector<std::string> words;  // the type's words, with * and & as words of their own
  std::string w;
  for (char c : type + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '<' || c == '>') {
      w += c;
      continue;
    }
    if (!w.empty()) words.push_back(w), w.clear();
    if (c == '*' || c == '&') words.push_back(std::string(1, c));
  }
  auto index = [&](const char* prefix) {
    return std::stoi(attr.substr(std::string(prefix).size(), attr.size() - std::string(prefix).size() - 1));
  };
  auto element = [&]() {
    for (const std::string& x : words)
      if (x != "device" && x != "constant" && x != "threadgroup" && x != "const" && x != "*" && x != "&")
        return x;
    return std::string();
  };
  if (attr.rfind("buffer(", 0) == 0) {
    bool reference = !words.empty() && words.back() == "&";
    std::string t = element();
    if (reference && msl.find("struct " + t + " {") != std::string::npos)
      return MslArg::packed(name, index("buffer("), t);
    if (reference) return MslArg::scalar(name, index("buffer("), dtype_named(t, name));
    if (t.rfind("atomic<", 0) == 0)
      return MslArg::atomic_buffer(name, index("buffer("), dtype_named(t.substr(7, t.size() - 8), name));
    bool is_const = false;
    for (const std::string& x : words) is_const |= x == "const";
    return MslArg::buffer(name, index("buffer("), dtype_named(t, name), is_const);
  }
  if (attr.rfind("threadgroup(", 0) == 0)
    return MslArg::threadgroup(name, index("threadgroup("), dtype_named(element(), name), 1);
  std::optional<metal_sim::MslBuiltin> b = metal_sim::parse_builtin(attr);
  if (!b) fail(METILE_ERROR_COMPILE, "metal stand-in", "parameter '", name, "': unknown attribute [[", attr, "]]");
  return MslArg::builtin_arg(name, *b);
}

/** The fields of `struct NAME { T a; U b; };` in `msl`, as members (in order). */
std::vector<MslArg> struct_members(const std::string& msl, const std::string& name) {
  const std::string head = "struct " + name + " {";
  size_t at = msl.find(head);
  size_t end = at == std::string::npos ? at : msl.find('}', at);
  if (end == std::string::npos)
    fail(METILE_ERROR_COMPILE, "metal stand-in", "no definition of struct '", name, "'");
  std::vector<MslArg> out;
  std::string body = msl.substr(at + head.size(), end - at - head.size());
  for (size_t b = 0, e; (e = body.find(';', b)) != std::string::npos; b = e + 1) {
    std::string field = trim(body.substr(b, e - b));
    size_t space = field.find_last_of(" \t");
    if (space == std::string::npos)
      fail(METILE_ERROR_COMPILE, "metal stand-in", "struct '", name, "': cannot read field '", field, "'");
    std::string member = field.substr(space + 1);
    out.push_back(MslArg::member(member, dtype_named(trim(field.substr(0, space)), member)));
  }
  return out;
}

/** `device const float* X [[buffer(0)]]` and the like; a `constant S& x` of a struct S adds its
 * fields as members before it. */
void parse_param(const std::string& msl, const std::string& text, std::vector<MslArg>* args) {
  args->push_back(parse_param_alone(msl, text));
  if (args->back().kind != MslArg::Kind::packed) return;
  std::vector<MslArg> members = struct_members(msl, args->back().struct_name);
  args->insert(args->end() - 1, members.begin(), members.end());
}

}  // namespace

std::vector<metal_sim::MslSignature> kernel_signatures(const std::string& msl) {
  std::vector<metal_sim::MslSignature> out;
  const std::string marker = "[[kernel]] void ";
  for (size_t at = msl.find(marker); at != std::string::npos; at = msl.find(marker, at + 1)) {
    size_t name_begin = at + marker.size();
    size_t paren = msl.find('(', name_begin);
    if (paren == std::string::npos) break;
    metal_sim::MslSignature sig;
    sig.kernel = trim(msl.substr(name_begin, paren - name_begin));
    int depth = 0;
    std::string param;
    size_t i = paren + 1;
    for (; i < msl.size(); ++i) {
      char c = msl[i];
      if ((c == ',' || c == ')') && depth == 0) {
        if (!trim(param).empty()) parse_param(msl, param, &sig.args);
        param.clear();
        if (c == ')') break;
        continue;
      }
      depth += (c == '(' || c == '[') - (c == ')' || c == ']');
      param += c;
    }
    out.push_back(std::move(sig));
  }
  return out;
}

}  // namespace metile::standin
