// cse: merges a pure op into an earlier equal one (same kind, operands, attributes and result
// type) whose definition dominates it: in the same block or an enclosing one. Needs: verified
// GPU IR. Guarantees: every use of a merged value reads the earlier one; the merged op is left
// for DCE. Loads, stores, allocations and barriers are never merged.
#include <cstring>
#include <map>
#include <tuple>

#include "passes/pass.h"

namespace metile {

namespace {

using Key = std::tuple<int, int, int, int, std::vector<ValueId>, std::string, DType, bool, gpu::LayoutId>;

std::string attr_key(const gpu::Op& op) {
  std::string s;
  for (const Attr& a : op.attrs) {
    s += a.name + "=";
    if (const auto* i = std::get_if<int64_t>(&a.value)) s += "i" + std::to_string(*i);
    else if (const auto* d = std::get_if<double>(&a.value)) {
      uint64_t bits;  // by bits: 0.0 and -0.0 differ, NaNs with one payload match
      static_assert(sizeof bits == sizeof *d);
      std::memcpy(&bits, d, sizeof bits);
      s += "f" + std::to_string(bits);
    } else {
      s += "s" + std::get<std::string>(a.value);
    }
    s += ";";
  }
  return s;
}

struct Cse {
  gpu::Function& f;
  std::map<ValueId, ValueId> subst;

  void block(gpu::Block& b, std::map<Key, ValueId> seen) {
    for (gpu::Op& op : b.ops) {
      for (ValueId& v : op.operands)
        if (auto it = subst.find(v); it != subst.end()) v = it->second;
      for (gpu::Block& r : op.regions) block(r, seen);
      if (!gpu::has_gpu_trait(op.kind, gpu::kGPure) || op.results.size() != 1) continue;
      const gpu::Value& r = f.value(op.result());
      Key key{static_cast<int>(op.kind), static_cast<int>(op.tile_op), static_cast<int>(op.reduce),
              static_cast<int>(op.builtin),
              op.operands, attr_key(op), r.dtype, r.is_ptr, r.layout};
      auto [it, fresh] = seen.emplace(std::move(key), op.result());
      if (!fresh) subst[op.result()] = it->second;
    }
  }
};

}  // namespace

void eliminate_common_subexpressions(gpu::Function& f, const PassContext&) {
  Cse cse{f, {}};
  cse.block(f.body, {});
}

}  // namespace metile
