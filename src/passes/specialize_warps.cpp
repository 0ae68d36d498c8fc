// specialize-warps: a TMA ring whose stages release-stages freed with "empty" mbarriers still has
// thread 0 issue each iteration's copies between its own MMAs, so a refill waits behind the
// MMAs thread 0's warpgroup issued first, and every warp keeps the registers the copies' address
// math needs. This pass gives the copies a warpgroup of their own (warp_specialize, gpu_ir.h):
//
//   every thread: what comes before the K loop (the mbarriers' setup and its barrier, the
//     prologue's copies of chunks 0 .. stages-2 by thread 0, pure index math);
//   producers (one more warpgroup, threads `threads` .. threads+127): setmaxnreg down to 40,
//     then the K loop cut down to the copies: its first thread waits on empty[s] and issues the
//     copies of chunk it+stages-1 into stage s on full[s], as thread 0 did;
//   consumers (the function's threads, whom every layout covers): setmaxnreg up to the most the
//     register file leaves (232 for two warpgroups: 128 * 40 + 256 * 232 <= 65536), the K loop
//     without the copies (wait full, MMAs, retire, arrive on empty), then the epilogue, whose
//     barriers become the consumers' named barrier (the producers never come to it).
//
// Why it cannot deadlock or race (chunk c lives in stage c % S, S the stages, T the trip count).
// The protocol is release-stages' (release_stages.cpp); only who runs each side changes, and it
// never relied on one thread running both. Full: the consumers' wait at iteration it is for
// completion it / S of full[it % S] (parity (it / S) & 1), the fill of chunk it: by the prologue
// for it < S-1, by the producer's iteration it-S+1 otherwise, each chunk below T exactly once
// (copies past the end are predicated off and arrive nowhere). Completion it / S + 1 is chunk
// it+S's fill, which needs the release of chunk it, which the consumers make at iteration it+1,
// after this wait: the parity cannot alias. Empty: the producer, before filling chunk c >= S
// (iteration it = c-S+1 >= 1), waits for completion (it-1) / S of empty[(it-1) % S] (parity as
// release-stages computes it), which the consumers' eight (threads / 32) warp arrivals make at
// their iteration it, after the MMAs of chunk it-1 retired; completion (it-1) / S + 1 is the
// release of chunk c, not yet filled. So no stage is overwritten before every consumer warp
// released it and no chunk is read before it landed. Progress: the fill of chunk c waits on
// consumer iteration c-S+1, which waits on fills up to chunk c-S+1 < c; by induction on c
// every wait completes. Trip count 0: no loop turn on either side, the prologue's copies are
// predicated off. Trip count 1 .. S-1: the prologue fills every chunk, the producer's copies are
// all past the end and it waits for nothing. Ragged K: a chunk is in range while its first
// column is below K; TMA zero-fills the rest of the box, as without this pass. The producer
// reaches no barrier after the split, so it may finish first (its idle threads at once); the
// consumers' named barrier counts exactly the consumer threads, none that exited.
//
// What it takes (otherwise the function is left as it was): one K loop at top level whose body
// holds the ring's thread-0 empty wait and copies (what release-stages leaves; a persistent
// tile loop's ring sits one level down and stays); before the loop only pure ops, allocations,
// mbar_init, plain barriers, thread 0's copies and commits, which the producers may run too;
// the copies' slice of the loop body (their operands, back through carried values) pure; no
// consumer write to a buffer the copies read (the roles are not ordered against each other);
// two or more whole consumer warpgroups, and no register limit the user named (setmaxnreg needs the launch's
// registers: __launch_bounds__(384, 1) gives 65536 / 384 = 168 a thread at launch, which the
// producers' release makes room for; consumer_registers below).
// Needs: GPU IR after release-stages, before fold-constants, cse and dce (which remove what the
// consumers' loop no longer uses). Guarantees: the same values; the launch runs threads + 128
// threads (gpu::launch_threads). Off unless asked for (CompileOptions::enabled_passes,
// METILE_GPU_ON=specialize-warps): not yet measured on a GPU.
#include <algorithm>
#include <map>
#include <set>

#include "passes/pass.h"
#include "target/tma.h"

namespace metile {

namespace {

using gpu::GpuOpKind;

constexpr int64_t kProducers = 128;           // one warpgroup
constexpr int64_t kProducerRegisters = 40;    // address math and the wait loop
constexpr int64_t kRegisterFile = 65536;      // 32-bit registers per multiprocessor (sm_90)
constexpr int64_t kMostRegisters = 248;       // a thread's, in setmaxnreg's steps of 8 (ptxas: 255)
constexpr int64_t kMostConsumerRegisters = 240;

// The consumers' register limit: what the block holds at launch (one block a multiprocessor,
// __launch_bounds__(threads + 128, 1), each thread the most that allows: ptxas gives a kernel
// with setmaxnreg that many) less the producers' 40 each, shared by the consumers. setmaxnreg.inc
// waits until the block's pool has the registers, so asking for more would never return.
int64_t launch_registers(int64_t threads) {
  return std::min(kMostRegisters, kRegisterFile / (threads + kProducers) / 8 * 8);
}
int64_t consumer_registers(int64_t threads) {
  const int64_t pool = (threads + kProducers) * launch_registers(threads);
  return std::min(kMostConsumerRegisters, (pool - kProducers * kProducerRegisters) / threads / 8 * 8);
}

class Specializer {
 public:
  explicit Specializer(gpu::Function& f) : f_(f), defs_(defining_ops(f.body)) {}

  // Splits the function into the two roles; false (nothing changed) where it does not take.
  bool run() {
    if (f_.threads < 128 || f_.threads % 128 != 0 || f_.max_registers != 0 || f_.simd_width != 32) return false;
    // More registers for the consumers than the launch gives them (two warpgroups or more: one
    // has nearly all it can use at launch), or it does not pay.
    if (consumer_registers(f_.threads) <= launch_registers(f_.threads)) return false;
    if (!find_ring() || !prefix_ok() || !rest_ok() || !slice()) return false;
    split();
    return true;
  }

 private:
  const gpu::Op* def(ValueId v) const {
    auto d = defs_.find(v);
    return d == defs_.end() ? nullptr : d->second;
  }

  // `p` = ptr_offset(base, ...) with base a threadgroup array: the base (kNoValue otherwise).
  ValueId base_of(ValueId p) const {
    const gpu::Op* d = def(p);
    if (d == nullptr || d->kind != GpuOpKind::ELEMENTWISE || d->tile_op != OpKind::PTR_OFFSET) return kNoValue;
    const gpu::Op* a = def(d->operands[0]);
    return a != nullptr && a->kind == GpuOpKind::ALLOC ? d->operands[0] : kNoValue;
  }

  // The ring: the one top-level loop whose body arrives on an mbarrier; in it, thread 0's wait
  // on that mbarrier and the copies it guards, all by one thread index.
  bool find_ring() {
    int arrivals = 0;
    bool split_already = false;
    gpu::walk(f_.body, [&](const gpu::Op& op) {
      arrivals += op.kind == GpuOpKind::MBAR_ARRIVE;
      split_already = split_already || op.kind == GpuOpKind::WARP_SPECIALIZE;
    });
    if (arrivals != 1 || split_already) return false;
    for (size_t i = 0; i < f_.body.ops.size(); ++i) {
      const gpu::Op& op = f_.body.ops[i];
      if (op.kind != GpuOpKind::FOR) continue;
      for (const gpu::Op& a : op.body().ops)
        if (a.kind == GpuOpKind::MBAR_ARRIVE) loop_ = i;
    }
    if (loop_ == kNone) return false;
    const gpu::Block& body = f_.body.ops[loop_].body();
    ValueId slot = kNoValue;
    for (const gpu::Op& op : body.ops)
      if (op.kind == GpuOpKind::MBAR_ARRIVE) slot = op.operands[0];
    const ValueId empty = base_of(slot);
    if (empty == kNoValue) return false;
    for (size_t i = 0; i < body.ops.size(); ++i) {
      const gpu::Op& op = body.ops[i];
      if (op.kind == GpuOpKind::MBAR_WAIT && op.operands.size() == 4) {
        if (op.operands[0] != slot || tid_ != kNoValue) return false;
        tid_ = op.operands[2];
        producer_ops_.insert(i);
      } else if (op.kind == GpuOpKind::TMA_LOAD || op.kind == GpuOpKind::ASYNC_COMMIT) {
        producer_ops_.insert(i);
      }
    }
    const gpu::Op* t = def(tid_);
    if (t == nullptr || t->kind != GpuOpKind::BUILTIN || t->builtin != gpu::Builtin::thread_index) return false;
    for (size_t i : producer_ops_) {
      const gpu::Op& op = body.ops[i];
      if (op.kind == GpuOpKind::TMA_LOAD) {
        if (op.operands[4] != tid_ || base_of(op.operands[1]) == kNoValue) return false;
        copies_ = true;
        std::vector<TmaMap> maps;
        if (!parse_tma_maps(op.attr_str("spec"), &maps) || maps.size() != 1) return false;
        const int64_t p = maps[0].param;
        read_params_ |= p < 64 ? uint64_t{1} << p : ~uint64_t{0};
      }
    }
    return copies_;
  }

  // What every thread runs before the split: nothing a producer thread may not run too.
  bool prefix_ok() const {
    for (size_t i = 0; i < loop_; ++i) {
      const gpu::Op& op = f_.body.ops[i];
      switch (op.kind) {
        case GpuOpKind::ALLOC:
        case GpuOpKind::MBAR_INIT:
        case GpuOpKind::ASYNC_COMMIT:
          break;
        case GpuOpKind::TMA_LOAD:
          if (op.operands[4] != tid_) return false;
          break;
        case GpuOpKind::BARRIER:
          if (!op.attrs.empty()) return false;
          break;
        default:
          if (!gpu::has_gpu_trait(op.kind, gpu::kGPure)) return false;
      }
    }
    return true;
  }

  // The consumers' part (the loop without the copies, the epilogue): nothing of the ring besides
  // the loop's, and no write to a buffer the copies read.
  bool rest_ok() const {
    const std::vector<uint64_t> params = gpu::param_masks(f_);
    bool ok = true;
    auto check = [&](const gpu::Op& op) {
      switch (op.kind) {
        case GpuOpKind::TMA_LOAD:
        case GpuOpKind::MBAR_INIT:
        case GpuOpKind::CANCEL_POINT:
          ok = false;
          break;
        case GpuOpKind::STORE:
        case GpuOpKind::VSTORE:
        case GpuOpKind::ATOMIC:
          ok = ok && (params[op.operands[0]] & read_params_) == 0;
          break;
        default:
          break;
      }
    };
    const gpu::Block& body = f_.body.ops[loop_].body();
    for (size_t i = 0; i < body.ops.size(); ++i) {
      if (producer_ops_.count(i)) continue;
      gpu::Block one;
      one.ops.push_back(body.ops[i]);
      gpu::walk(one, check);
    }
    for (size_t i = loop_ + 1; i < f_.body.ops.size(); ++i) {
      gpu::Block one;
      one.ops.push_back(f_.body.ops[i]);
      gpu::walk(one, check);
    }
    return ok;
  }

  // The producers' part of the loop body: the copies, what they read (pure ops only), and the
  // carried values those read, through their yields.
  bool slice() {
    const gpu::Op& loop = f_.body.ops[loop_];
    const gpu::Block& body = loop.body();
    std::map<ValueId, size_t> at;  // the body's top-level op defining each value
    for (size_t i = 0; i < body.ops.size(); ++i)
      for (ValueId r : body.ops[i].results) at[r] = i;
    std::vector<ValueId> work;
    for (size_t i : producer_ops_) work.insert(work.end(), body.ops[i].operands.begin(), body.ops[i].operands.end());
    keep_ = producer_ops_;
    while (!work.empty()) {
      const ValueId v = work.back();
      work.pop_back();
      for (size_t k = 1; k < body.args.size(); ++k)
        if (body.args[k] == v && carried_.insert(k).second) work.push_back(body.ops.back().operands[k - 1]);
      auto d = at.find(v);
      if (d == at.end() || !keep_.insert(d->second).second) continue;
      const gpu::Op& op = body.ops[d->second];
      if (!gpu::has_gpu_trait(op.kind, gpu::kGPure) || !op.regions.empty()) return false;
      work.insert(work.end(), op.operands.begin(), op.operands.end());
    }
    return true;
  }

  ValueId fresh(ValueId v) { return remap_[v] = f_.new_value(f_.value(v)); }
  ValueId mapped(ValueId v) const {
    auto m = remap_.find(v);
    return m == remap_.end() ? v : m->second;
  }

  // The producers' loop: the kept ops of the body under fresh values, their thread index the
  // producers' own (0 for the first producer thread), carrying the kept values only.
  gpu::Op producer_loop(ValueId producer_tid) {
    const gpu::Op& loop = f_.body.ops[loop_];
    const gpu::Block& body = loop.body();
    gpu::Op out;
    out.kind = GpuOpKind::FOR;
    out.loc = loop.loc;
    out.operands = {loop.operands[0], loop.operands[1], loop.operands[2]};
    gpu::Block b;
    b.args.push_back(fresh(body.args[0]));
    for (size_t k : carried_) {
      out.operands.push_back(loop.operands[2 + k]);
      b.args.push_back(fresh(body.args[k]));
    }
    for (size_t i = 0; i + 1 < body.ops.size(); ++i) {
      if (!keep_.count(i)) continue;
      gpu::Op op = body.ops[i];
      for (ValueId& v : op.operands) v = mapped(v);
      if (op.kind == GpuOpKind::TMA_LOAD) op.operands[4] = producer_tid;
      if (op.kind == GpuOpKind::MBAR_WAIT) op.operands[2] = producer_tid;
      for (ValueId& r : op.results) r = fresh(r);
      b.ops.push_back(std::move(op));
    }
    gpu::Op yield = body.ops.back();
    yield.operands.clear();
    for (size_t k : carried_) {
      yield.operands.push_back(mapped(body.ops.back().operands[k - 1]));
      out.results.push_back(fresh(loop.results[k - 1]));
    }
    b.ops.push_back(std::move(yield));
    out.regions.push_back(std::move(b));
    return out;
  }

  static gpu::Op setmaxnreg(int64_t count, bool inc, Loc loc) {
    gpu::Op op;
    op.kind = GpuOpKind::SETMAXNREG;
    op.attrs = {{"count", count}, {"inc", int64_t{inc ? 1 : 0}}};
    op.loc = loc;
    return op;
  }

  static void name_barriers(gpu::Block& b, const gpu::Op& named) {
    for (gpu::Op& op : b.ops) {
      if (op.kind == GpuOpKind::BARRIER)
        for (const Attr& a : named.attrs) op.attrs.push_back(a);
      for (gpu::Block& r : op.regions) name_barriers(r, named);
    }
  }

  void split() {
    const Loc loc = f_.body.ops[loop_].loc;
    gpu::Op roles;
    roles.kind = GpuOpKind::WARP_SPECIALIZE;
    roles.attrs = {{"producers", kProducers}};
    roles.loc = loc;
    roles.regions.resize(2);
    // Producers: fewer registers, their own thread index, the copies' loop.
    gpu::Block& producers = roles.regions[0];
    producers.ops.push_back(setmaxnreg(kProducerRegisters, false, loc));
    gpu::GpuBuilder b(f_, &producers);
    b.set_loc(loc);
    const ValueId first = b.constant_int(DType::i32, f_.threads);
    const ValueId producer_tid = b.named(b.ew(OpKind::SUB, {tid_, first}), "producer_tid");
    producers.ops.push_back(producer_loop(producer_tid));
    gpu::Op yield;
    yield.kind = GpuOpKind::YIELD;
    yield.loc = loc;
    producers.ops.push_back(yield);
    // Consumers: the rest of the registers, the loop without the copies, the epilogue.
    gpu::Block& consumers = roles.regions[1];
    consumers.ops.push_back(setmaxnreg(consumer_registers(f_.threads), true, loc));
    gpu::Block& body = f_.body.ops[loop_].body();
    for (size_t i = body.ops.size(); i-- > 0;)
      if (producer_ops_.count(i)) body.ops.erase(body.ops.begin() + static_cast<std::ptrdiff_t>(i));
    for (size_t i = loop_; i < f_.body.ops.size(); ++i) consumers.ops.push_back(std::move(f_.body.ops[i]));
    name_barriers(consumers, gpu::role_barrier(f_, roles, 1));
    consumers.ops.push_back(yield);
    f_.body.ops.resize(loop_);
    f_.body.ops.push_back(std::move(roles));
  }

  static constexpr size_t kNone = ~size_t{0};
  gpu::Function& f_;
  DefiningOps<gpu::Block> defs_;
  size_t loop_ = kNone;
  ValueId tid_ = kNoValue;
  bool copies_ = false;
  uint64_t read_params_ = 0;           // the parameters the copies read
  std::set<size_t> producer_ops_;      // body indices: the empty wait, the copies, their commits
  std::set<size_t> keep_;              // body indices the producers' loop keeps
  std::set<size_t> carried_;           // body argument indices (1..) it carries
  std::map<ValueId, ValueId> remap_;   // body values to the producers' copies
};

}  // namespace

void specialize_warps(gpu::Function& f, const PassContext&) { Specializer(f).run(); }

}  // namespace metile
