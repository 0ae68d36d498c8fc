#include "ir/param_access.h"

#include <map>

#include "ir/ops.h"

namespace metile {

ParamAccess param_access(const Program& p) {
  std::map<ValueId, const Op*> def;
  walk(p.body, [&](const Op& o) {
    for (ValueId r : o.results) def[r] = &o;
  });
  std::set<ValueId> params;
  for (const Param& prm : p.params) params.insert(prm.value);
  auto roots = [&](ValueId v, auto& self) -> std::set<ValueId> {
    if (params.count(v)) return {v};
    auto it = def.find(v);
    if (it == def.end()) return params;  // a block argument
    const Op& o = *it->second;
    if (o.kind == OpKind::PTR_OFFSET || o.kind == OpKind::BROADCAST || o.kind == OpKind::RESHAPE)
      return self(o.operands[0], self);
    if (o.kind == OpKind::SELECT) {
      std::set<ValueId> a = self(o.operands[1], self), c = self(o.operands[2], self);
      a.insert(c.begin(), c.end());
      return a;
    }
    return {};  // shared memory
  };
  ParamAccess out;
  walk(p.body, [&](const Op& o) {
    if (!has_trait(o.kind, kMemory) || o.operands.empty()) return;
    std::set<ValueId> r = roots(o.operands[0], roots);
    bool writes = has_trait(o.kind, kSideEffect);
    // A writing op with a result (an atomic returning the old value) reads as well.
    if (!writes || !o.results.empty()) out.read.insert(r.begin(), r.end());
    if (writes) out.written.insert(r.begin(), r.end());
  });
  return out;
}

}  // namespace metile
