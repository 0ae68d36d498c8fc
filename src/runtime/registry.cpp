// The device registry: one row per backend. Adding a backend is one row here plus its folder.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "runtime/backends.h"
#include "runtime/device.h"
#include "support/env.h"
#include "support/error.h"
#include "support/text.h"

namespace metile {

const std::vector<DeviceEntry>& device_registry() {
  static const std::vector<DeviceEntry> entries = {
      {"interp", probe_interp_device, make_interp_device},
      {"cpu", probe_cpu_device, make_cpu_device},
      {"cuda", probe_cuda_device, make_cuda_device, make_cuda_device_nth, cuda_device_count},
      {"metal", probe_metal_device, make_metal_device},
      {"metal-sim", probe_metal_sim_device, make_metal_sim_device},
  };
  return entries;
}

namespace {

const DeviceEntry* find(const std::string& name) {
  for (const DeviceEntry& e : device_registry())
    if (name == e.name) return &e;
  return nullptr;
}

std::string known_names() {
  std::string s;
  for (const DeviceEntry& e : device_registry()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

std::string default_name() {
  std::string env = env_string("METILE_DEVICE");
  if (!env.empty()) return env;
  for (const char* n : {"metal", "cuda", "cpu"}) {
    const DeviceEntry* e = find(n);
    if (e && e->probe().empty()) return n;
  }
  return "interp";
}

}  // namespace

std::shared_ptr<Buffer> Device::wrap_device_memory(uint64_t, size_t, bool) {
  fail(METILE_ERROR_UNSUPPORTED, "device", info().name, " cannot wrap device memory");
}

void Device::check_device_memory(uint64_t, size_t) {
  fail(METILE_ERROR_UNSUPPORTED, "device", info().name, " has no device memory of its own");
}

std::unique_ptr<Event> Device::create_event() { return make_host_event(*this); }

uint64_t Device::create_stream() {
  // Any distinct nonzero token: devices without streams ignore the stream a launch names.
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

int device_count(const std::string& name) {
  const DeviceEntry* e = find(name);
  if (e == nullptr)
    fail(METILE_ERROR_INVALID_ARGUMENT, "device", "unknown device kind \"", printable_ascii(name),
         "\" (known: ", known_names(), name.find(':') != std::string::npos ? "; give the kind without an index" : "",
         ")");
  if (!e->probe().empty()) return 0;
  return e->count ? e->count() : 1;
}

std::shared_ptr<Device> open_device(const std::string& requested) {
  std::string name = requested.empty() ? default_name() : requested;
  // "cuda:N": the entry's name and a GPU index (decimal digits only).
  std::string base = name;
  int ordinal = -1;
  if (size_t colon = name.find(':'); colon != std::string::npos) {
    base = name.substr(0, colon);
    std::string digits = name.substr(colon + 1);
    bool ok = !digits.empty() && digits.size() <= 6 &&
              digits.find_first_not_of("0123456789") == std::string::npos;
    if (!ok)
      fail(METILE_ERROR_INVALID_ARGUMENT, "device", "device \"", printable_ascii(name),
           "\": the part after ':' must be a GPU index (e.g. cuda:1)");
    ordinal = std::stoi(digits);
  }
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, std::shared_ptr<Device>> open;
  std::lock_guard<std::mutex> lock(mu);
  const DeviceEntry* e = find(base);
  if (e == nullptr)
    fail(METILE_ERROR_INVALID_ARGUMENT, "device", "unknown device \"", printable_ascii(name),
         "\" (known: ", known_names(), ")");
  if (ordinal >= 0 && e->create_nth == nullptr)
    fail(METILE_ERROR_INVALID_ARGUMENT, "device", "device \"", printable_ascii(name), "\": ", base,
         " is not chosen by index (only cuda is, e.g. cuda:1)");
  // "cuda" and "cuda:0" are the same device.
  std::pair<std::string, int> key{base, std::max(ordinal, 0)};
  auto it = open.find(key);
  if (it != open.end()) return it->second;
  std::string why = e->probe();
  if (!why.empty()) fail(METILE_ERROR_DEVICE_UNAVAILABLE, "device", name, " is unavailable: ", why);
  std::shared_ptr<Device> dev = ordinal > 0 ? e->create_nth(ordinal) : e->create();
  open.emplace(key, dev);
  return dev;
}

}  // namespace metile
