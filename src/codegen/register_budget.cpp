#include "codegen/register_budget.h"

#include <algorithm>
#include <vector>

namespace metile {
namespace {

constexpr int64_t kRegistersPerMultiprocessor = 65536;
constexpr int64_t kMaxRegistersPerThread = 255;

// Registers of a value that must survive until its use: floating-point data (accumulators,
// loaded tiles, statistics). Integer and predicate tiles are index math that ptxas recomputes
// from the thread index rather than keep (a GEMM's load indices would otherwise double its
// count), and pointers are scalars.
int64_t data_regs(const gpu::Function& f, ValueId v) {
  const gpu::Value& x = f.value(v);
  return !x.is_ptr && is_float(x.dtype) ? f.regs(v) : 0;
}

// Marks the values defined in `b` (block arguments and op results, nested regions included).
void mark_defined(const gpu::Block& b, std::vector<bool>& inside) {
  for (ValueId a : b.args) inside[a] = true;
  for (const gpu::Op& op : b.ops) {
    for (ValueId r : op.results) inside[r] = true;
    for (const gpu::Block& r : op.regions) mark_defined(r, inside);
  }
}

// Sums the registers of the values `b` (nested regions included) reads but does not define.
int64_t live_in(const gpu::Function& f, const gpu::Block& b, const std::vector<bool>& inside,
                std::vector<bool>& counted) {
  int64_t n = 0;
  for (const gpu::Op& op : b.ops) {
    for (ValueId v : op.operands) {
      if (v == kNoValue || inside[v] || counted[v]) continue;
      counted[v] = true;
      n += data_regs(f, v);
    }
    for (const gpu::Block& r : op.regions) n += live_in(f, r, inside, counted);
  }
  return n;
}

// The most registers a loop body's own values hold at once: after each op, the values made
// at or before it (its carried arguments from the start) that a later op still reads, a use
// inside a nested region counting at its op. An mma updates its accumulator in place, so the
// operand it last reads is not counted beside its result.
int64_t body_peak(const gpu::Function& f, const gpu::Block& body) {
  const int none = -2;
  std::vector<int> def(f.values.size(), none), last(f.values.size(), none);
  for (size_t a = 1; a < body.args.size(); ++a) def[body.args[a]] = -1;
  for (int i = 0; i < static_cast<int>(body.ops.size()); ++i) {
    const gpu::Op& op = body.ops[i];
    for (ValueId r : op.results) def[r] = i;
    auto use = [&](const gpu::Op& o) {
      for (ValueId v : o.operands)
        if (v != kNoValue) last[v] = i;
    };
    use(op);
    for (const gpu::Block& r : op.regions) walk(r, use);
  }
  int64_t peak = 0;
  for (int i = 0; i < static_cast<int>(body.ops.size()); ++i) {
    int64_t n = 0;
    for (size_t v = 0; v < f.values.size(); ++v)
      if (def[v] != none && def[v] <= i && last[v] > i) n += data_regs(f, static_cast<ValueId>(v));
    peak = std::max(peak, n);
  }
  return peak;
}

}  // namespace

int64_t loop_live_registers(const gpu::Function& f) {
  int64_t most = 0;
  walk(f.body, [&](const gpu::Op& op) {
    if (op.kind != gpu::GpuOpKind::FOR) return;
    const gpu::Block& body = op.body();
    std::vector<bool> inside(f.values.size(), false), counted(f.values.size(), false);
    mark_defined(body, inside);
    most = std::max(most, live_in(f, body, inside, counted) + body_peak(f, body));
  });
  return most;
}

int min_blocks_per_multiprocessor(int threads, int64_t accumulator, int64_t loop) {
  if (accumulator <= 0 || threads <= 0) return 0;
  int64_t need = std::max(accumulator + 64, loop + 32);
  need = std::min(kMaxRegistersPerThread, (need + 7) / 8 * 8);
  int64_t blocks = kRegistersPerMultiprocessor / (static_cast<int64_t>(threads) * need);
  return blocks > 1 ? static_cast<int>(blocks) : 0;
}

}  // namespace metile
