// Conditions of a 1-D store that hold for the whole tile, decided once per tile at run time.
// The bounds guards and the activity mask of a row pass compare an index that steps through the
// tile (i + arange) with a bound that does not: such a compare is monotone in the element, so it
// holds for every element when it holds for the first and the last and the index did not wrap on
// the way. The store is then written twice: a loop where those compares are `true` (no mask,
// nothing to compute per element but the value) and the usual one. Measured on the seed
// softmax's output pass (cpu, 4096x4096): the guards cost about a quarter of the pass.
#include "codegen/cpu_cpp_emitter.h"

namespace metile::cpu_cpp {

namespace {

// Element-wise values a store's loop may compute and still be written twice.
constexpr size_t kMaxChain = 64;

bool ordering(OpKind k) {
  return k == OpKind::LT || k == OpKind::LE || k == OpKind::GT || k == OpKind::GE;
}

}  // namespace

// The inline integer compares that `store`'s value and mask read at the store's own element
// (through element-wise ops only), each with its stepping operand and that operand's step.
std::vector<CpuEmitter::UniformLeaf> CpuEmitter::uniform_leaves(const Op& store) const {
  std::vector<UniformLeaf> out;
  std::set<ValueId> seen;
  std::vector<ValueId> stack(store.operands.begin() + 1, store.operands.end());
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second || plan[v].form != Form::inline_ || type(v).is_scalar()) continue;
    const Op& o = *def_op(v);
    if (!same_index_operands(o.kind)) continue;
    // A second copy of a long chain costs more compile time than its masks cost at run time.
    if (seen.size() > kMaxChain) return {};
    if (ordering(o.kind) && is_int(type(o.operands[0]).dtype)) {
      std::optional<int64_t> a = stride(o.operands[0]), b = stride(o.operands[1]);
      if (a && b && (*a == 0) != (*b == 0)) {
        out.push_back({v, *a != 0 ? o.operands[0] : o.operands[1], *a != 0 ? *a : *b});
        continue;
      }
    }
    stack.insert(stack.end(), o.operands.begin(), o.operands.end());
  }
  return out;
}

// Writes each leaf at the tile's first and last element; returns the C condition that every leaf
// holds at both and that no stepping operand wraps between them.
std::string CpuEmitter::uniform_condition(const std::vector<UniformLeaf>& leaves, int64_t n) {
  const Idx first{"0", ""}, last{std::to_string(n - 1), ""};
  std::string cond;
  std::set<std::string> straight_checked;
  for (const UniformLeaf& l : leaves) {
    // The last element's index is x0 + step * (n - 1) when that fits the index's type; the check
    // reads only x0 (index arithmetic is plain C, so the compiler may assume x1 did not wrap).
    const std::string x0 = elem(l.stepping, first);
    const int64_t span = l.step * (n - 1);
    const DType t = type(l.stepping).dtype;
    std::string straight;
    if (t == DType::i64) {
      straight = span > 0 ? "(" + x0 + " <= INT64_MAX - " + std::to_string(span) + "LL)"
                          : "(" + x0 + " >= INT64_MIN + " + std::to_string(-span) + "LL)";
    } else {
      const int bits = t == DType::i8 || t == DType::u8 ? 8 : 32;
      const bool sign = is_signed(t);
      const int64_t hi = sign ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
      const int64_t lo = sign ? -(int64_t{1} << (bits - 1)) : 0;
      straight = span > 0 ? "((int64_t)" + x0 + " <= " + std::to_string(hi - span) + "LL)"
                          : "((int64_t)" + x0 + " >= " + std::to_string(lo - span) + "LL)";
    }
    cond += (cond.empty() ? "" : " & ") + elem(l.leaf, first) + " & " + elem(l.leaf, last);
    if (straight_checked.insert(straight).second) cond += " & " + straight;
  }
  return cond;
}

}  // namespace metile::cpu_cpp
