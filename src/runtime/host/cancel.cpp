// Launch cancellation and time limits for the host devices (cancel.h).
#include "runtime/host/cancel.h"

#include <atomic>

#include "runtime/host/process.h"
#include "support/error.h"

namespace metile::host {

namespace {
// Lock-free, so a signal handler may bump it.
std::atomic<uint64_t> g_cancel_epoch{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
}  // namespace

void cancel_launches() { g_cancel_epoch.fetch_add(1, std::memory_order_relaxed); }

LaunchStop::LaunchStop()
    : epoch_(g_cancel_epoch.load(std::memory_order_relaxed)),
      limit_s_(launch_timeout_s()),
      deadline_(std::chrono::steady_clock::time_point::max()) {
  if (limit_s_ > 0)
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(limit_s_));
}

bool LaunchStop::should_stop() const {
  if (g_cancel_epoch.load(std::memory_order_relaxed) != epoch_) return true;
  return limit_s_ > 0 && std::chrono::steady_clock::now() >= deadline_;
}

std::string LaunchStop::why(const std::string& kernel) const {
  if (g_cancel_epoch.load(std::memory_order_relaxed) != epoch_)
    return cat("kernel ", kernel, " was cancelled (metile_cancel_launches, e.g. Ctrl-C); its "
               "outputs are partly written");
  return cat("kernel ", kernel, " did not finish within ", limit_s_,
             " s (METILE_TIMEOUT_S); its outputs are partly written");
}

}  // namespace metile::host
