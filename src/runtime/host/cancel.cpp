// Launch cancellation and time limits (cancel.h).
#include "runtime/host/cancel.h"

#include <atomic>

#include "runtime/host/cancel_words.h"
#include "runtime/host/process.h"
#include "support/error.h"

namespace metile::host {

namespace {
// Lock-free, so a signal handler may bump it.
std::atomic<uint64_t> g_cancel_epoch{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
// The limit a ScopedLaunchLimit set on this thread; negative: METILE_TIMEOUT_S.
thread_local double t_launch_limit = -1;
}  // namespace

void cancel_launches() {
  g_cancel_epoch.fetch_add(1, std::memory_order_relaxed);
  stop_words_in_use();  // GPU kernels running now stop at their next check
}

std::chrono::steady_clock::time_point LaunchLimit::deadline_from_now() const {
  if (seconds <= 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

std::string LaunchLimit::exceeded(const std::string& kernel) const {
  return cat("kernel ", kernel, " did not finish within ", seconds, " s (", source, ")");
}

LaunchLimit current_launch_limit() {
  if (t_launch_limit < 0) return {launch_timeout_s(), "METILE_TIMEOUT_S"};
  // Longer limits are none, as for METILE_TIMEOUT_S: a deadline must fit steady_clock's range.
  return {t_launch_limit > kLongestTimeoutS ? 0 : t_launch_limit, "the launch's timeout"};
}

ScopedLaunchLimit::ScopedLaunchLimit(double seconds) : previous_(t_launch_limit) {
  if (seconds >= 0) t_launch_limit = seconds;
}

ScopedLaunchLimit::~ScopedLaunchLimit() { t_launch_limit = previous_; }

LaunchStop::LaunchStop()
    : epoch_(g_cancel_epoch.load(std::memory_order_relaxed)),
      limit_(current_launch_limit()),
      deadline_(limit_.deadline_from_now()) {}

bool LaunchStop::should_stop() const {
  if (g_cancel_epoch.load(std::memory_order_relaxed) != epoch_) return true;
  return limit_.seconds > 0 && std::chrono::steady_clock::now() >= deadline_;
}

std::string LaunchStop::reason(const std::string& kernel) const {
  if (g_cancel_epoch.load(std::memory_order_relaxed) != epoch_)
    return cat("kernel ", kernel, " was cancelled (metile_cancel_launches, e.g. Ctrl-C)");
  return limit_.exceeded(kernel);
}

std::string LaunchStop::why(const std::string& kernel) const {
  return reason(kernel) + "; its outputs are partly written";
}

}  // namespace metile::host
