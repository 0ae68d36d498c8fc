/** \file cancel.h
 * Stopping launches: a metile_cancel_launches() call, which the Python binding makes when SIGINT
 * arrives, and time limits (METILE_TIMEOUT_S, or a launch's own timeout). The host devices (cpu,
 * interp, metal-sim) check between program instances (interp: every 256 ops too; metal-sim: at
 * barriers and every 4096 loop turns too), so a launch stops within one instance's run time of
 * the request; cuda and metal check their limit while they wait and then, as cancel_launches()
 * does at once, set the stop word their kernels check in their loops (cancel_words.h).
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace metile::host {

/**
 * Makes every launch running now stop at its next check; launches started afterwards run
 * normally. Thread-safe and async-signal-safe (lock-free atomics only).
 */
void cancel_launches();

/** A launch's time limit and where it came from (named in the error). */
struct LaunchLimit {
  double seconds = 0;  // 0: none
  const char* source = "METILE_TIMEOUT_S";
  /** now + seconds; time_point::max() without a limit. */
  std::chrono::steady_clock::time_point deadline_from_now() const;
  /** "kernel K did not finish within S s (SOURCE)". */
  std::string exceeded(const std::string& kernel) const;
};

/** The limit of a launch starting on this thread now: a ScopedLaunchLimit's, else METILE_TIMEOUT_S. */
LaunchLimit current_launch_limit();

/**
 * While alive, launches started on this thread get `seconds` as their limit (0: none) instead of
 * METILE_TIMEOUT_S; a negative value keeps METILE_TIMEOUT_S. The C API sets one around each run of
 * a launch that has its own timeout (metile_launch_set_options).
 */
class ScopedLaunchLimit {
 public:
  explicit ScopedLaunchLimit(double seconds);
  ~ScopedLaunchLimit();
  ScopedLaunchLimit(const ScopedLaunchLimit&) = delete;
  ScopedLaunchLimit& operator=(const ScopedLaunchLimit&) = delete;

 private:
  double previous_;
};

/** What stops one launch: noted when it starts. */
class LaunchStop {
 public:
  LaunchStop();
  /** Cancelled since the launch started, or past its time limit (reads the clock). */
  bool should_stop() const;
  /** Why should_stop() said so: "kernel K was cancelled ..." or "... did not finish within",
   * then that its outputs are partly written. */
  std::string why(const std::string& kernel) const;
  /** why() without the clause on the outputs (metal: a kernel that ran on, or one that stopped). */
  std::string reason(const std::string& kernel) const;
  /** It has a time limit (else only a cancel stops it). */
  bool limited() const { return limit_.seconds > 0; }

 private:
  uint64_t epoch_;
  LaunchLimit limit_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace metile::host
