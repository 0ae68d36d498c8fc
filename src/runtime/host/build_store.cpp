#include "runtime/host/build_store.h"

#include <atomic>

namespace metile::host {

namespace {
std::atomic<BuildStore*> g_store{nullptr};
}  // namespace

void set_build_store(BuildStore* store) { g_store.store(store, std::memory_order_release); }

BuildStore* build_store() { return g_store.load(std::memory_order_acquire); }

}  // namespace metile::host
