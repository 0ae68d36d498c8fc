/** \file cancel.h
 * Stopping launches that are running on the host devices (cpu, interp, metal-sim): a
 * metile_cancel_launches() call, which the Python binding makes when SIGINT arrives, and the
 * METILE_TIMEOUT_S launch limit. Devices check between program instances (interp: every 256
 * ops too), so a launch stops within one instance's run time of the request.
 */
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace metile::host {

/**
 * Makes every launch running now stop at its next check; launches started afterwards run
 * normally. Thread-safe and async-signal-safe (one lock-free atomic increment).
 */
void cancel_launches();

/** What stops one launch: noted when it starts. */
class LaunchStop {
 public:
  LaunchStop();
  /** Cancelled since the launch started, or past METILE_TIMEOUT_S (reads the clock). */
  bool should_stop() const;
  /** Why should_stop() said so: "kernel K was cancelled ..." or "... did not finish within". */
  std::string why(const std::string& kernel) const;

 private:
  uint64_t epoch_;
  double limit_s_;
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace metile::host
