#include "runtime/host_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "support/error.h"

namespace metile {

namespace {

// An anonymous mapping: page-aligned and zeroed by the kernel, so large buffers cost no memset.
class MappedBuffer final : public Buffer {
 public:
  MappedBuffer(size_t bytes, const char* subsystem) : size_(bytes) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    if (bytes > SIZE_MAX - page)
      fail(METILE_ERROR_OUT_OF_MEMORY, subsystem, "cannot allocate a buffer of ", bytes, " bytes");
    mapped_ = (bytes + page - 1) / page * page;
    void* p = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      fail(METILE_ERROR_OUT_OF_MEMORY, subsystem, "cannot allocate a buffer of ", bytes, " bytes");
    data_ = p;
  }
  ~MappedBuffer() override { ::munmap(data_, mapped_); }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  void* contents() override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0, mapped_ = 0;
};

class WrappedBuffer final : public Buffer {
 public:
  WrappedBuffer(void* host, size_t bytes) : data_(host), size_(bytes) {}
  void* contents() override { return data_; }
  size_t size() const override { return size_; }
  bool shares_memory() const override { return true; }

 private:
  void* data_;
  size_t size_;
};

}  // namespace

std::shared_ptr<Buffer> alloc_host_buffer(Device* device, size_t bytes, const char* subsystem) {
  auto b = std::make_shared<MappedBuffer>(bytes, subsystem);
  b->device = device;
  return b;
}

std::shared_ptr<Buffer> wrap_host_buffer(Device* device, void* host, size_t bytes) {
  auto b = std::make_shared<WrappedBuffer>(host, bytes);
  b->device = device;
  return b;
}

}  // namespace metile
