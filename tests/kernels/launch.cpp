#include "kernels/launch.h"

#include <cstring>

namespace metile::kernels {

metile_status Launch::check(metile_status s) {
  error_ = s == METILE_OK ? std::string() : std::string(metile_last_error());
  return s;
}

Launch::Launch(const Program& program, const std::string& device) {
  compile_status_ = check(metile_device_open(&device_, device.c_str()));
  if (compile_status_ == METILE_OK)
    compile_status_ = check(metile_program_parse(&program_, print(program).c_str()));
  if (compile_status_ == METILE_OK)
    compile_status_ = check(metile_kernel_compile(&kernel_, device_, program_, nullptr));
}

Launch::~Launch() {
  for (metile_buffer* b : buffers_) metile_buffer_release(b);
  metile_kernel_release(kernel_);
  metile_program_release(program_);
  metile_device_release(device_);
}

Launch& Launch::wrap(void* host, size_t bytes, uint64_t byte_offset) {
  metile_buffer* b = nullptr;
  if (device_ != nullptr && metile_buffer_wrap(&b, device_, host, bytes) == METILE_OK) {
    buffers_.push_back(b);
    hosts_.emplace_back(host, bytes);
  }
  metile_arg a{};
  a.kind = METILE_ARG_BUFFER;
  a.buffer = b;
  a.offset = byte_offset;
  return arg(a);
}

Launch& Launch::scalar(metile_arg_kind kind, int64_t i, double f) {
  metile_arg a{};
  a.kind = kind;
  a.i = i;
  a.f = f;
  return arg(a);
}

Launch& Launch::arg(const metile_arg& a) {
  args_.push_back(a);
  return *this;
}

metile_status Launch::run(std::array<uint32_t, 3> grid) {
  if (compile_status_ != METILE_OK) return compile_status_;
  const uint32_t g[3] = {grid[0], grid[1], grid[2]};
  metile_status s = check(metile_kernel_launch(kernel_, g, args_.data(), args_.size()));
  if (s != METILE_OK) return s;
  if ((s = check(metile_device_synchronize(device_))) != METILE_OK) return s;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (metile_buffer_shares_memory(buffers_[i])) continue;
    void* p = nullptr;
    if ((s = check(metile_buffer_contents(buffers_[i], &p))) != METILE_OK) return s;
    std::memcpy(hosts_[i].first, p, hosts_[i].second);
  }
  return METILE_OK;
}

}  // namespace metile::kernels
