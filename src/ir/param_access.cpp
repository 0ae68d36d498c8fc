#include "ir/param_access.h"

#include "ir/pointer_provenance.h"

namespace metile {

ParamAccess param_access(const Program& p) {
  std::vector<ValueId> params;
  for (const Param& prm : p.params) params.push_back(prm.value);
  const std::vector<uint64_t> of = pointer_params(
      p.values.size(), params, p.body, [](const Op& o) { return pointer_sources(o.kind); },
      [](const Op& o) { return o.kind == OpKind::FOR; });
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
  for (size_t i = 0; i < params.size(); ++i) {
    if (read & param_bit(i)) out.read.insert(params[i]);
    if (written & param_bit(i)) out.written.insert(params[i]);
  }
  return out;
}

}  // namespace metile
