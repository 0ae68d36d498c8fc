#include "handles.h"

#include <cstdint>
#include <mutex>
#include <vector>

#include "support/error.h"

namespace metile::capi {

namespace {

static_assert(sizeof(void*) == 8, "handles encode a slot and a generation in 64 bits");

// A handle is kTag | generation << 32 | slot. The tag (bit 63) puts every handle outside the
// user address space, so no handle is also the address of something (and garbage-collected
// bindings never mistake one for a pointer into their heap).
constexpr uint64_t kTag = uint64_t{1} << 63;
constexpr uint32_t kMaxGeneration = (uint32_t{1} << 31) - 1;

const char* kind_name(HandleKind k) {
  switch (k) {
    case HandleKind::device: return "metile_device";
    case HandleKind::buffer: return "metile_buffer";
    case HandleKind::builder: return "metile_builder";
    case HandleKind::program: return "metile_program";
    case HandleKind::kernel: return "metile_kernel";
    case HandleKind::launch: return "metile_launch";
    case HandleKind::event: return "metile_event";
  }
  return "handle";
}

struct Slot {
  std::shared_ptr<void> object;  // null while the slot is free
  uint32_t generation = 1;       // of the live handle, or of the next one
  HandleKind kind = HandleKind::device;
  int64_t refs = 0;              // user references (retain/release)
};

struct Table {
  std::mutex mu;
  std::vector<Slot> slots;
  std::vector<uint32_t> free;
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

// The live slot of `h`; the table's lock must be held.
Slot& live_slot(Table& t, const void* h, HandleKind kind, const char* fn) {
  uint64_t v = reinterpret_cast<uintptr_t>(h);
  if ((v & kTag) == 0) invalid(h, kind, fn);
  uint64_t index = v & 0xffffffffu;
  uint32_t generation = static_cast<uint32_t>((v & ~kTag) >> 32);
  if (index >= t.slots.size()) invalid(h, kind, fn);
  Slot& s = t.slots[index];
  if (!s.object || s.generation != generation || s.kind != kind) invalid(h, kind, fn);
  return s;
}

}  // namespace

std::shared_ptr<void> lookup_handle(const void* h, HandleKind kind, const char* fn) {
  if (h == nullptr) invalid(h, kind, fn);
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return live_slot(t, h, kind, fn).object;
}

void* publish_handle(std::shared_ptr<void> object, HandleKind kind) {
  METILE_ASSERT(object != nullptr, "publishing an empty handle");
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  uint64_t index;
  if (!t.free.empty()) {
    index = t.free.back();
    t.free.pop_back();
  } else {
    if (t.slots.size() > 0xffffffffu)
      fail(METILE_ERROR_OUT_OF_MEMORY, "api", "too many live handles");
    index = t.slots.size();
    t.slots.emplace_back();
  }
  Slot& s = t.slots[index];
  s.object = std::move(object);
  s.kind = kind;
  s.refs = 1;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(kTag | uint64_t{s.generation} << 32 | index));
}

void retain_handle(const void* h, HandleKind kind, const char* fn) {
  if (h == nullptr) invalid(h, kind, fn);
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  ++live_slot(t, h, kind, fn).refs;
}

std::shared_ptr<void> release_handle(const void* h, HandleKind kind, const char* fn) {
  if (h == nullptr) invalid(h, kind, fn);
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  Slot& s = live_slot(t, h, kind, fn);
  if (--s.refs > 0) return nullptr;
  std::shared_ptr<void> dead = std::move(s.object);
  s.object = nullptr;
  // A slot whose generations are used up is never handed out again, so no handle value repeats.
  if (++s.generation <= kMaxGeneration)
    t.free.push_back(static_cast<uint32_t>(&s - t.slots.data()));
  return dead;
}

}  // namespace metile::capi
