#include "ir/tile_ir.h"

#include <cstdint>

#include "support/error.h"

namespace metile {

const AttrValue* find_attr(const std::vector<Attr>& attrs, std::string_view name) {
  for (const Attr& a : attrs)
    if (a.name == name) return &a.value;
  return nullptr;
}

int64_t attr_int(const std::vector<Attr>& attrs, std::string_view name, std::string_view op) {
  const AttrValue* v = find_attr(attrs, name);
  METILE_ASSERT(v != nullptr && std::holds_alternative<int64_t>(*v), "attribute ", name, " of ", op);
  return std::get<int64_t>(*v);
}

double attr_num(const std::vector<Attr>& attrs, std::string_view name, std::string_view op) {
  const AttrValue* v = find_attr(attrs, name);
  METILE_ASSERT(v != nullptr && !std::holds_alternative<std::string>(*v), "attribute ", name,
                " of ", op);
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return std::get<double>(*v);
}

const std::string& attr_str(const std::vector<Attr>& attrs, std::string_view name,
                            std::string_view op) {
  const AttrValue* v = find_attr(attrs, name);
  METILE_ASSERT(v != nullptr && std::holds_alternative<std::string>(*v), "attribute ", name,
                " of ", op);
  return std::get<std::string>(*v);
}

const AttrValue* Op::find_attr(std::string_view name) const { return metile::find_attr(attrs, name); }
int64_t Op::attr_int(std::string_view name) const {
  return metile::attr_int(attrs, name, op_name(kind));
}
double Op::attr_num(std::string_view name) const {
  return metile::attr_num(attrs, name, op_name(kind));
}
const std::string& Op::attr_str(std::string_view name) const {
  return metile::attr_str(attrs, name, op_name(kind));
}

void set_attr(std::vector<Attr>& attrs, std::string_view name, AttrValue v) {
  for (Attr& a : attrs)
    if (a.name == name) {
      a.value = std::move(v);
      return;
    }
  attrs.push_back({std::string(name), std::move(v)});
}

void Op::set_attr(std::string_view name, AttrValue v) { metile::set_attr(attrs, name, std::move(v)); }

uint32_t Program::intern_file(const std::string& file) {
  for (size_t i = 0; i < files.size(); ++i)
    if (files[i] == file) return static_cast<uint32_t>(i + 1);
  files.push_back(file);
  return static_cast<uint32_t>(files.size());
}

std::string Program::where(const Loc& loc) const {
  if (loc.file == 0 || loc.file > files.size()) return {};
  return files[loc.file - 1] + ":" + std::to_string(loc.line) + ": ";
}

uint64_t shared_bytes(const Program& p, const Op& shared_op) {
  const uint64_t size = static_cast<uint64_t>(shared_op.attr_int("size"));
  const uint64_t elem = dtype_size(p.type(shared_op.result()).dtype);
  return elem != 0 && size > UINT64_MAX / elem ? UINT64_MAX : size * elem;
}

uint64_t shared_memory_bytes(const Program& p) {
  uint64_t total = 0;
  walk(p.body, [&](const Op& op) {
    if (op.kind != OpKind::SHARED) return;
    uint64_t bytes = shared_bytes(p, op);
    total = bytes > UINT64_MAX - total ? UINT64_MAX : total + bytes;
  });
  return total;
}

bool uses_simt(const Program& p) {
  bool found = false;
  walk(p.body, [&](const Op& op) { found = found || has_trait(op.kind, kSimt); });
  return found;
}

std::string device_print_label(const Op& print_op, size_t k) {
  const std::string& prefix = print_op.attr_str("prefix");
  std::string label = prefix.empty() ? std::string() : " " + prefix;
  if (device_print_values(print_op) > 1) label += " (operand " + std::to_string(k) + ")";
  return label;
}

size_t device_print_values(const Op& print_op) {
  const size_t n = print_op.operands.size();
  return print_op.attr_int("masked") ? n / 2 : n;
}

}  // namespace metile
