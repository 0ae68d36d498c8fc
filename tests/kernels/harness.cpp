// Runs a suite case on a device through the public C API only, as a binding would.
#include <cmath>
#include <cstring>
#include <sstream>

#include "kernels/kernels.h"
#include "support/half.h"

namespace metile::kernels {

namespace {

// Owns the handles of one run; releases them whatever happens.
struct Handles {
  metile_device* device = nullptr;
  metile_program* program = nullptr;
  metile_kernel* kernel = nullptr;
  std::vector<metile_buffer*> buffers;
  ~Handles() {
    for (metile_buffer* b : buffers) metile_buffer_release(b);
    metile_kernel_release(kernel);
    metile_program_release(program);
    metile_device_release(device);
  }
};

}  // namespace

std::vector<uint8_t> encode(DType dtype, const std::vector<double>& values) {
  const size_t size = dtype_size(dtype);
  std::vector<uint8_t> out(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* p = &out[i * size];
    const double v = values[i];
    switch (dtype) {
      case DType::f32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::f16:
      case DType::bf16: {
        uint16_t h = dtype == DType::f16 ? float_to_f16(static_cast<float>(v))
                                         : float_to_bf16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::i64: {
        int64_t x = static_cast<int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      case DType::i32:
      case DType::u32: {
        uint32_t x = static_cast<uint32_t>(static_cast<int64_t>(v));
        std::memcpy(p, &x, 4);
        break;
      }
      default:
        *p = static_cast<uint8_t>(static_cast<int64_t>(v));
        break;
    }
  }
  return out;
}

double decode(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return dtype == DType::f16 ? f16_to_float(h) : bf16_to_float(h);
    }
    case DType::i32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::u32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::i64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case DType::i8: return static_cast<int8_t>(*p);
    default: return *p;
  }
}

RunResult run_case(const std::string& device, const Case& c) {
  RunResult r;
  Handles h;
  auto failed = [&](metile_status s) {
    r.status = s;
    r.message = metile_last_error();
    return s != METILE_OK;
  };
  if (failed(metile_device_open(&h.device, device.c_str()))) return r;
  if (failed(metile_program_parse(&h.program, print(c.program).c_str()))) return r;
  metile_compile_options options;
  metile_compile_options_init(&options);
  // The references are exact f32 math unless a case opts into TF32 (with spec §14's looser bound).
  options.allow_tf32 = c.allow_tf32;
  options.dot_precision = c.dot_precision;
  if (failed(metile_kernel_compile(&h.kernel, h.device, h.program, &options))) return r;
  std::vector<metile_arg> args(c.args.size());
  for (size_t i = 0; i < c.args.size(); ++i) {
    const Arg& a = c.args[i];
    if (a.kind == Arg::Kind::i32) {
      args[i].kind = METILE_ARG_I32;
      args[i].i = a.i;
      continue;
    }
    std::vector<uint8_t> bytes = encode(a.data.dtype, a.data.values);
    metile_buffer* b = nullptr;
    if (failed(metile_buffer_alloc(&b, h.device, std::max<size_t>(bytes.size(), 1)))) return r;
    h.buffers.push_back(b);
    void* p = nullptr;
    if (failed(metile_buffer_contents(b, &p))) return r;
    std::memcpy(p, bytes.data(), bytes.size());
    args[i].kind = METILE_ARG_BUFFER;
    args[i].buffer = b;
  }
  const uint32_t grid[3] = {c.grid[0], c.grid[1], c.grid[2]};
  if (failed(metile_kernel_launch(h.kernel, grid, args.data(), args.size()))) return r;
  if (failed(metile_device_synchronize(h.device))) return r;
  for (size_t i = 0; i < c.args.size(); ++i) {
    const Arg& a = c.args[i];
    if (a.kind != Arg::Kind::buffer || !a.output) continue;
    void* p = nullptr;
    if (failed(metile_buffer_contents(args[i].buffer, &p))) return r;
    const auto* bytes = static_cast<const uint8_t*>(p);
    std::vector<double> values(a.data.values.size());
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = decode(a.data.dtype, bytes + i * dtype_size(a.data.dtype));
    r.outputs.push_back(std::move(values));
  }
  return r;
}

std::string compare(const std::vector<std::vector<double>>& got,
                    const std::vector<std::vector<double>>& want, double rtol, double atol) {
  std::ostringstream os;
  if (got.size() != want.size()) {
    os << got.size() << " outputs, expected " << want.size();
    return os.str();
  }
  for (size_t o = 0; o < want.size(); ++o) {
    if (got[o].size() != want[o].size()) {
      os << "output " << o << " has " << got[o].size() << " elements, expected " << want[o].size();
      return os.str();
    }
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < want[o].size(); ++i) {
      const double g = got[o][i], w = want[o][i], err = std::fabs(g - w);
      if (err <= atol + rtol * std::fabs(w)) continue;  // NaN never passes
      if (bad < 5) os << "output " << o << "[" << i << "] = " << g << ", expected " << w << "\n";
      worst = std::isnan(err) ? err : std::max(worst, err);
      ++bad;
    }
    if (bad)
      os << bad << " of " << want[o].size() << " elements of output " << o
         << " differ (worst abs error " << worst << ", rtol " << rtol << ", atol " << atol << ")\n";
  }
  return os.str();
}

}  // namespace metile::kernels
