#include "ir/ops.h"

#include <map>
#include <string>

#include "support/error.h"
#include "support/text.h"

namespace metile {

namespace {

std::vector<AttrSpec> parse_specs(std::string_view text) {
  std::vector<AttrSpec> out;
  for (std::string_view item : split_list(text)) {
    size_t colon = item.find(':');
    std::string_view kind = item.substr(colon + 1), name = item.substr(0, colon);
    AttrKind k = kind == "int" ? AttrKind::integer
                 : kind == "num" ? AttrKind::number
                                 : AttrKind::string;
    const bool optional = name.ends_with('?');
    if (optional) name.remove_suffix(1);
    out.push_back({name, k, optional});
  }
  return out;
}

struct Table {
  std::map<int, OpInfo> by_pin;
  std::map<std::string_view, OpKind> by_name;
  std::vector<OpKind> order;
  Table() {
#define OP(E, name, pin, mn, mx, nres, attrs, traits)                                         \
  by_pin.emplace(pin, OpInfo{OpKind::E, #name, mn, mx, nres, parse_specs(attrs), traits}); \
  by_name.emplace(#name, OpKind::E);                                                        \
  order.push_back(OpKind::E);
#include "ir/ops.def"
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const OpInfo& op_info(OpKind kind) {
  auto it = table().by_pin.find(static_cast<int>(kind));
  METILE_ASSERT(it != table().by_pin.end(), "unknown op kind ", static_cast<int>(kind));
  return it->second;
}

std::optional<OpKind> parse_op_name(std::string_view name) {
  auto it = table().by_name.find(name);
  if (it == table().by_name.end()) return std::nullopt;
  return it->second;
}

bool is_valid_op(int pin) { return table().by_pin.count(pin) != 0; }

const std::vector<OpKind>& all_ops() { return table().order; }

}  // namespace metile
