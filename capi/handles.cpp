#include "handles.h"

#include <mutex>
#include <unordered_map>

#include "support/error.h"

namespace metile::capi {

namespace {

const char* kind_name(HandleKind k) {
  switch (k) {
    case HandleKind::device: return "metile_device";
    case HandleKind::buffer: return "metile_buffer";
    case HandleKind::builder: return "metile_builder";
    case HandleKind::program: return "metile_program";
    case HandleKind::kernel: return "metile_kernel";
    case HandleKind::launch: return "metile_launch";
  }
  return "handle";
}

struct Table {
  std::mutex mu;
  std::unordered_map<const void*, HandleKind> live;
};

Table& table() {
  static Table* t = new Table();  // never destroyed: handles may be released during exit
  return *t;
}

[[noreturn]] void invalid(const void* h, HandleKind kind, const char* fn) {
  fail(METILE_ERROR_INVALID_ARGUMENT, "api", fn, ": ",
       h == nullptr ? cat("the ", kind_name(kind), " is NULL")
                    : cat(h, " is not a live ", kind_name(kind), " (released, or another kind of handle)"));
}

}  // namespace

void register_handle(const void* h, HandleKind kind) {
  std::lock_guard<std::mutex> lock(table().mu);
  table().live[h] = kind;
}

void check_handle(const void* h, HandleKind kind, const char* fn) {
  if (h == nullptr) invalid(h, kind, fn);
  std::lock_guard<std::mutex> lock(table().mu);
  auto it = table().live.find(h);
  if (it == table().live.end() || it->second != kind) invalid(h, kind, fn);
}

void unregister_handle(const void* h, HandleKind kind, const char* fn) {
  std::lock_guard<std::mutex> lock(table().mu);
  auto it = table().live.find(h);
  if (it == table().live.end() || it->second != kind) invalid(h, kind, fn);
  table().live.erase(it);
}

}  // namespace metile::capi
