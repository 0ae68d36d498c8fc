// The device registry: one row per backend. Adding a backend is one row here plus its folder.
#include <map>
#include <mutex>

#include "runtime/backends.h"
#include "runtime/device.h"
#include "support/env.h"
#include "support/error.h"

namespace metile {

const std::vector<DeviceEntry>& device_registry() {
  static const std::vector<DeviceEntry> entries = {
      {"interp", probe_interp_device, make_interp_device},
      {"cpu", probe_cpu_device, make_cpu_device},
      {"cuda", probe_cuda_device, make_cuda_device},
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

std::shared_ptr<Device> open_device(const std::string& requested) {
  std::string name = requested.empty() ? default_name() : requested;
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Device>> open;
  std::lock_guard<std::mutex> lock(mu);
  auto it = open.find(name);
  if (it != open.end()) return it->second;
  const DeviceEntry* e = find(name);
  if (e == nullptr)
    fail(METILE_ERROR_INVALID_ARGUMENT, "device", "unknown device \"", name, "\" (known: ",
         known_names(), ")");
  std::string why = e->probe();
  if (!why.empty()) fail(METILE_ERROR_DEVICE_UNAVAILABLE, "device", name, " is unavailable: ", why);
  std::shared_ptr<Device> dev = e->create();
  open.emplace(name, dev);
  return dev;
}

}  // namespace metile
