#include "ir/param_access.h"

#include "ir/pointer_provenance.h"

namespace metile {

std::vector<uint64_t> param_masks(const Program& p) {
  std::vector<ValueId> params;
  for (const Param& prm : p.params) params.push_back(prm.value);
  return pointer_params(
      p.values.size(), params, p.body, [](const Op& o) { return pointer_sources(o.kind); },
      [](const Op& o) { return o.kind == OpKind::FOR; });
}

ParamAccess param_access(const Program& p) {
  const std::vector<uint64_t> of = param_masks(p);
  uint64_t read = 0, written = 0;
  walk(p.body, [&](const Op& o) {
    if (!has_trait(o.kind, kMemory) || o.operands.empty()) return;
    const uint64_t m = of[o.operands[0]];
    const bool writes = has_trait(o.kind, kSideEffect);
    // A writing op with a result (an atomic returning the old value) reads as well.
    if (!writes || !o.results.empty()) read |= m;
    if (writes) written |= m;
  });
  ParamAccess out;
  for (size_t i = 0; i < p.params.size(); ++i) {
    if (read & param_bit(i)) out.read.insert(p.params[i].value);
    if (written & param_bit(i)) out.written.insert(p.params[i].value);
  }
  return out;
}

}  // namespace metile
