/** \file instance.h
 * The interp executor's internals, shared by its files: one launch's state and the Instance that
 * runs one program instance. executor.cpp holds the semantics (its opening comment), the op
 * dispatch, control flow and the launch; exec_math.cpp the tile arithmetic; exec_memory.cpp
 * loads, stores, atomics and shared memory; exec_simt.cpp the SIMT view and tile_swizzle.
 */
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/device.h"
#include "runtime/host/cancel.h"
#include "runtime/interp/values.h"
#include "support/error.h"

namespace metile::interp {

constexpr int64_t kLanes = 32;

struct Region {
  std::string label;  // "buffer `X`", "shared memory #0"
  uint8_t* base = nullptr;
  int64_t extent = 0;  // in elements
  DType dtype = DType::invalid;
};

// What all instances of one launch share.
struct LaunchState {
  const Program& p;
  Grid grid;
  std::vector<Region> regions;  // one per pointer parameter
  std::vector<std::pair<ValueId, Val>> params;
  // Makes each atomic op of an instance one indivisible step (a pointer: the state is moved).
  std::unique_ptr<std::mutex> atomics = std::make_unique<std::mutex>();
  // METILE_TIMEOUT_S and metile_cancel_launches: every instance stops at its next check.
  host::LaunchStop stop = host::LaunchStop();
};

inline const Elem& at(const Val& v, size_t k) { return v.e.size() == 1 ? v.e[0] : v.e[k]; }
inline uint32_t region_at(const Val& v, size_t k) {
  return v.region.size() == 1 ? v.region[0] : v.region[k];
}

inline int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fault("element offset overflows 64 bits");
  return r;
}
inline int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fault("element offset overflows 64 bits");
  return r;
}

class Instance {
 public:
  explicit Instance(const LaunchState& launch)
      : l_(launch), p_(launch.p), threads_(launch.p.num_threads), env_(launch.p.values.size()) {}

  void run(const std::array<uint32_t, 3>& pid) {
    pid_ = pid;
    regions_ = l_.regions;
    shared_.clear();
    shared_region_.clear();
    in_role_ = false;
    for (const auto& [id, v] : l_.params) env_[id] = v;
    block(p_.body);
  }

 private:
  const Val& val(ValueId v) const { return env_[v]; }
  const Type& type(ValueId v) const { return p_.type(v); }
  int64_t scalar(ValueId v) const { return env_[v].e[0].i; }
  void set(const Op& op, Val v) { env_[op.results[0]] = std::move(v); }

  void block(const Block& b) {
    for (const Op& op : b.ops) {
      // A cooperative time limit: the clock is read every 256 ops (and at the first), cheap
      // next to the ops themselves.
      if ((ops_++ & 255) == 0 && l_.stop.should_stop())
        fail(METILE_ERROR_DEVICE, "interp", l_.stop.why(p_.name), "; stopped at ",
             p_.where(op.loc), op_name(op.kind),
             " in program (", pid_[0], ",", pid_[1], ",", pid_[2], ")");
      try {
        exec(op);
      } catch (const OpFault& f) {
        fail(METILE_ERROR_DEVICE, "interp", p_.where(op.loc), op_name(op.kind), ": ", f.message,
             " in program (", pid_[0], ",", pid_[1], ",", pid_[2], ")");
      }
    }
  }

  uint8_t* address(uint32_t region, int64_t offset) {
    const Region& r = regions_[region];
    if (offset < 0 || offset >= r.extent)
      fault(cat("access of element ", offset, " outside ", r.label, " (", r.extent, " elements)"));
    return r.base + offset * static_cast<int64_t>(dtype_size(r.dtype));
  }

  void exec(const Op& op);
  Val elementwise(const Op& op);
  Val broadcast(const Op& op);
  void load(const Op& op);
  void store(const Op& op);
  void atomic(const Op& op);
  void tile_access(const Op& op);
  void shared(const Op& op);
  void dot(const Op& op);
  void reduce(const Op& op);
  void loop(const Op& op);
  void branch(const Op& op);
  void while_loop(const Op& op);
  void role(const Op& op);
  void simt(const Op& op);
  void swizzle(const Op& op);
  void scan(const Op& op);
  void print(const Op& op);

  const LaunchState& l_;
  const Program& p_;
  const int64_t threads_;
  std::array<uint32_t, 3> pid_{};
  std::vector<Val> env_;  // by ValueId; SSA guarantees a definition before every use
  std::vector<Region> regions_;
  std::vector<std::unique_ptr<uint8_t[]>> shared_;
  std::unordered_map<ValueId, uint32_t> shared_region_;
  std::vector<Val> yielded_;
  bool in_role_ = false;
  int64_t role_lo_ = 0, role_hi_ = 0;  // the threads whose stores a role region keeps
  uint64_t ops_ = 0;                   // ops run, for the time-limit checks
};

}  // namespace metile::interp
