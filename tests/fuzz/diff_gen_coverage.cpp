// The differential fuzzer's generator draws from the op table: over its first seeds it must use
// every op of the traits it draws by (binary, compare, unary, reduction, scan) and trans, so an
// op added to ops.def with one of those traits is fuzzed with no edit here. Generates only.
//
//   diff_gen_coverage [seeds]   (default 400)
#include <cstdio>
#include <set>
#include <string>

#include "diff_gen.h"
#include "ir/ops.h"
#include "ir/walk.h"

int main(int argc, char** argv) {
  using namespace metile;
  const uint64_t seeds = argc > 1 ? std::stoull(argv[1]) : 400;
  std::set<OpKind> seen;
  for (uint64_t s = 1; s <= seeds; ++s)
    walk(fuzz::generate(s).program.body, [&](const Op& op) { seen.insert(op.kind); });
  int missing = 0;
  for (OpKind k : all_ops()) {
    if (!has_trait(k, kBinary | kCompare | kUnary | kReduce | kScan) && k != OpKind::TRANS) continue;
    if (seen.count(k)) continue;
    std::printf("diff_gen_coverage: %s never generated in %llu seeds\n", std::string(op_name(k)).c_str(),
                static_cast<unsigned long long>(seeds));
    ++missing;
  }
  if (missing == 0) std::printf("diff_gen_coverage: every table op generated in %llu seeds\n",
                                static_cast<unsigned long long>(seeds));
  return missing == 0 ? 0 : 1;
}
