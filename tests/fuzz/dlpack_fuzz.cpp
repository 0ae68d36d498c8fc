// libFuzzer target for DLPack through the C API, in both directions and both ABIs. The input
// describes one call: an export of a real buffer with a fuzzed dtype, ndim and shape, or an
// import of a DLTensor whose every field (data pointer, byte offset, ndim, shape, strides, dtype,
// device type) comes from the input. Every call must either succeed or fail with
// INVALID_ARGUMENT or UNSUPPORTED and a message; a crash, a sanitizer report, any other status,
// or an accepted tensor that does not describe memory it may use is a bug:
// - an exported tensor's shape times its element size must fit the buffer (checked in 128 bits,
//   and every byte is then written, so ASan sees any overrun);
// - an imported buffer must be exactly the tensor's bytes at data + byte_offset (one private byte
//   for an empty tensor), and the producer's deleter must run once on release and never on a
//   refusal.
#include <metile/metile.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/dlpack_abi.h"

namespace {

using namespace metile::dlpack;

struct Reader {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return v;
  }
  // Small sizes mostly; powers of two (the products that wrap) and raw values now and then.
  int64_t dim() {
    uint8_t k = byte();
    if (k < 200) return k % 20;
    if (k < 240) return int64_t{1} << (byte() % 63);
    return static_cast<int64_t>(u64());
  }
};

void check_failure(metile_status st) {
  if (st != METILE_ERROR_INVALID_ARGUMENT && st != METILE_ERROR_UNSUPPORTED) __builtin_trap();
  if (metile_last_error()[0] == '\0') __builtin_trap();
}

metile_device* interp() {
  static metile_device* d = [] {
    metile_device* dev = nullptr;
    if (metile_device_open(&dev, "interp") != METILE_OK) __builtin_trap();
    return dev;
  }();
  return d;
}

int deleted = 0;
void delete_legacy(DLManagedTensor*) { ++deleted; }
void delete_versioned(DLManagedTensorVersioned*) { ++deleted; }

void fuzz_export(Reader& r) {
  size_t lo = r.byte(), hi = r.byte();
  size_t bytes = 1 + (lo | hi << 8) % 4096;
  metile_buffer* b = nullptr;
  if (metile_buffer_alloc(&b, interp(), bytes) != METILE_OK) __builtin_trap();
  metile_dtype dtype = static_cast<metile_dtype>(r.byte() % 14);  // some invalid
  int32_t ndim = static_cast<int32_t>(r.byte() % 12) - 1;         // -1 .. 10
  bool versioned = r.byte() & 1;
  int64_t shape[16] = {};
  for (int64_t& s : shape) s = r.dim();
  const int64_t* shape_arg = (r.byte() % 16 == 0) ? nullptr : shape;
  void* out = nullptr;
  metile_status st = versioned ? metile_buffer_to_dlpack_versioned(b, dtype, ndim, shape_arg, &out)
                               : metile_buffer_to_dlpack(b, dtype, ndim, shape_arg, &out);
  if (st != METILE_OK) {
    check_failure(st);
    metile_buffer_release(b);
    return;
  }
  DLTensor* t = versioned ? &static_cast<DLManagedTensorVersioned*>(out)->dl_tensor
                          : &static_cast<DLManagedTensor*>(out)->dl_tensor;
  metile_buffer_release(b);  // the tensor keeps the memory alive
  if (t->ndim != ndim || t->byte_offset != 0 || t->dtype.lanes != 1) __builtin_trap();
  // Without a zero dimension every partial product is at most the whole, which must fit.
  unsigned __int128 need = t->dtype.bits / 8;
  bool empty = false;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) __builtin_trap();
    empty = empty || t->shape[i] == 0;
  }
  for (int i = 0; i < t->ndim && !empty; ++i) {
    need *= static_cast<uint64_t>(t->shape[i]);
    if (need > bytes) __builtin_trap();
  }
  if (empty) need = 0;
  std::memset(t->data, 0xa5, static_cast<size_t>(need));
  if (versioned) {
    auto* v = static_cast<DLManagedTensorVersioned*>(out);
    v->deleter(v);
  } else {
    auto* m = static_cast<DLManagedTensor*>(out);
    m->deleter(m);
  }
}

void fuzz_import(Reader& r) {
  std::vector<uint8_t> host(1 + r.byte() % 256);
  DLTensor t{};
  switch (r.byte() % 4) {
    case 0: t.data = nullptr; break;
    case 1: t.data = reinterpret_cast<void*>(r.u64()); break;
    default: t.data = host.data() + r.byte() % host.size(); break;
  }
  uint8_t k = r.byte();
  t.byte_offset = k < 128 ? k % 32 : k < 192 ? uint64_t{1} << (r.byte() % 64) : r.u64();
  t.ndim = static_cast<int32_t>(r.byte() % 36) - 1;  // -1 .. 34
  static const int32_t kTypes[] = {1, 1, 1, 2, 3, 13, 4, 7};
  t.device = {kTypes[r.byte() % 8], 0};
  static const uint8_t kBits[] = {8, 16, 32, 64, 1, 12, 0, 128};
  t.dtype = {static_cast<uint8_t>(r.byte() % 6), kBits[r.byte() % 8],
             static_cast<uint16_t>(r.byte() % 8 == 0 ? r.byte() : 1)};
  int64_t shape[40] = {}, strides[40] = {};
  for (int64_t& s : shape) s = r.dim();
  uint8_t how = r.byte();
  t.shape = how % 16 == 0 ? nullptr : shape;
  if (how & 0x10) {  // strides: compact ones, then perhaps one disturbed (any stride, even negative)
    int64_t expect = 1;
    for (int i = (t.ndim > 40 ? 40 : t.ndim) - 1; i >= 0; --i) {
      strides[i] = expect;
      if (__builtin_mul_overflow(expect, shape[i], &expect)) expect = 1;
    }
    if (how & 0x20) strides[r.byte() % 40] = r.dim();
    t.strides = strides;
  }
  bool versioned = r.byte() & 1;
  DLManagedTensor legacy{t, nullptr, delete_legacy};
  uint32_t minor = r.byte() % 3;
  uint64_t flags = r.byte() % 4;  // bit 0 is read-only (refused), bit 1 is-copied
  DLManagedTensorVersioned v{{1, minor}, nullptr, delete_versioned, flags, t};
  deleted = 0;
  metile_buffer* b = nullptr;
  metile_status st = versioned ? metile_buffer_from_dlpack_versioned(&b, interp(), &v)
                               : metile_buffer_from_dlpack(&b, interp(), &legacy);
  if (st != METILE_OK) {
    check_failure(st);
    if (deleted != 0) __builtin_trap();
    return;
  }
  // Accepted: the buffer is the bytes the tensor's elements span (its strides, when given), and
  // they lie inside the address space.
  unsigned __int128 need = t.dtype.bits / 8;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) need = 0;
    if (need > (unsigned __int128){1} << 64) need = (unsigned __int128){1} << 64;  // only a bound
    need *= static_cast<uint64_t>(t.shape[i]);
  }
  if (need != 0 && t.strides != nullptr) {
    unsigned __int128 last = 0;
    for (int i = 0; i < t.ndim; ++i)
      if (t.shape[i] != 1) {
        if (t.strides[i] < 0) __builtin_trap();  // refused by the import
        last += static_cast<unsigned __int128>(t.shape[i] - 1) * static_cast<uint64_t>(t.strides[i]);
      }
    need = (last + 1) * (t.dtype.bits / 8);
  }
  size_t size = 0;
  void* mem = nullptr;
  if (metile_buffer_size(b, &size) != METILE_OK || metile_buffer_contents(b, &mem) != METILE_OK)
    __builtin_trap();
  if (need == 0) {
    if (size != 1 || mem == nullptr) __builtin_trap();
    static_cast<uint8_t*>(mem)[0] = 1;  // the private byte is usable
  } else {
    uintptr_t start = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
    if (t.data == nullptr || size != need || reinterpret_cast<uintptr_t>(mem) != start ||
        start < reinterpret_cast<uintptr_t>(t.data) ||
        static_cast<unsigned __int128>(start) + need > UINTPTR_MAX)
      __builtin_trap();
  }
  metile_buffer_release(b);
  if (deleted != 1) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r{data, size};
  if (r.byte() & 1)
    fuzz_import(r);
  else
    fuzz_export(r);
  return 0;
}
