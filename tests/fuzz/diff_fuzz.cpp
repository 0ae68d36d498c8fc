// The differential fuzzer: random valid Tile IR programs (diff_gen.h) run on interp, cpu and
// metal-sim through the C API (printed and parsed back, so the text form is exercised too), with
// every output compared against interp: bit for bit where the program is exact, within a
// tolerance where it is not. Any error, crash or mismatch is a finding; the program's text is
// printed (and saved with --save); `--seed S --count 1` runs it again.
//
//   diff_fuzz [--seed S] [--count N] [--seconds T] [--devices interp,cpu,metal-sim] [--save DIR]
#include <metile/metile.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "diff_gen.h"

namespace {

using metile::fuzz::GenProgram;

constexpr size_t kInputs = 4;  // X, I, Z, M before the outputs

struct Outputs {
  std::string error;  // empty: ran
  std::vector<std::vector<float>> ys;
};

int64_t input_int(int64_t i, uint64_t seed) { return static_cast<int64_t>((i * 13 + seed) % 101) - 50; }
float input_float(int64_t i, uint64_t seed) {
  return static_cast<float>(static_cast<int64_t>((i * 7 + seed * 3) % 65) - 32) / 4.0f;
}

// Z's values: NaNs of both signs with payloads, quiet and signalling; subnormals; signed zeros;
// the smallest normal; a few ordinary numbers so that specials meet numbers.
float special_float(int64_t i, uint64_t seed) {
  static const uint32_t bits[] = {
      0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xffe00001u,  // quiet NaNs
      0x7f800001u, 0xff800001u, 0x7fa5a5a5u, 0xffbfffffu,  // signalling NaNs
      0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, 0x00400000u, 0x00000100u,  // subnormals
      0x00000000u, 0x80000000u, 0x00800000u,                                   // zeros, smallest normal
      0x3fc00000u, 0xc0100000u, 0x40400000u, 0xbe800000u};                    // 1.5 -2.25 3 -0.25
  const size_t n = sizeof(bits) / sizeof(bits[0]);
  uint32_t b = bits[static_cast<size_t>(i * 5 + static_cast<int64_t>(seed % 1000)) % n];
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
// M's bytes: a bool in memory is a byte and any non-zero byte is true (docs/semantics.md).
uint8_t bool_byte(int64_t i, uint64_t seed) {
  static const uint8_t bytes[] = {0, 1, 2, 255, 128, 0, 3, 64, 1, 0, 0x7f};
  return bytes[static_cast<size_t>(i * 3 + static_cast<int64_t>(seed % 1000)) % sizeof(bytes)];
}

std::string status_text(const char* what) {
  return std::string(what) + ": " + metile_last_error();
}

Outputs run_on(const char* device, const std::string& text, int64_t size, int outputs, uint64_t seed) {
  Outputs r;
  metile_device* dev = nullptr;
  metile_program* p = nullptr;
  metile_kernel* k = nullptr;
  std::vector<metile_buffer*> bufs;
  std::vector<metile_arg> args;
  auto buffer = [&](size_t bytes) {
    metile_buffer* b = nullptr;
    if (metile_buffer_alloc(&b, dev, bytes) != METILE_OK) return static_cast<void*>(nullptr);
    bufs.push_back(b);
    metile_arg a{};
    a.kind = METILE_ARG_BUFFER;
    a.buffer = b;
    args.push_back(a);
    void* data = nullptr;
    metile_buffer_contents(b, &data);
    return data;
  };
  do {
    if (metile_device_open(&dev, device) != METILE_OK) { r.error = status_text("open"); break; }
    if (metile_program_parse(&p, text.c_str()) != METILE_OK) { r.error = status_text("parse"); break; }
    if (metile_kernel_compile(&k, dev, p, nullptr) != METILE_OK) { r.error = status_text("compile"); break; }
    auto* x = static_cast<float*>(buffer(static_cast<size_t>(size) * 4));
    auto* in = static_cast<int32_t*>(buffer(static_cast<size_t>(size) * 4));
    auto* z = static_cast<float*>(buffer(static_cast<size_t>(size) * 4));
    auto* m = static_cast<uint8_t*>(buffer(static_cast<size_t>(size)));
    if (!x || !in || !z || !m) { r.error = status_text("alloc"); break; }
    for (int64_t i = 0; i < size; ++i) {
      x[i] = input_float(i, seed), in[i] = static_cast<int32_t>(input_int(i, seed));
      z[i] = special_float(i, seed), m[i] = bool_byte(i, seed);
    }
    for (int i = 0; i < outputs; ++i)
      if (!buffer(static_cast<size_t>(size) * 4)) r.error = status_text("alloc");
    if (!r.error.empty()) break;
    metile_arg n{}, s{};
    n.kind = METILE_ARG_I32;
    n.i = size;
    s.kind = METILE_ARG_F32;
    s.f = 1.5;
    args.push_back(n);
    args.push_back(s);
    const uint32_t grid[3] = {1, 1, 1};
    if (metile_kernel_launch(k, grid, args.data(), args.size()) != METILE_OK ||
        metile_device_synchronize(dev) != METILE_OK) {
      r.error = status_text("launch");
      break;
    }
    for (int i = 0; i < outputs; ++i) {
      void* data = nullptr;
      metile_buffer_contents(bufs[kInputs + static_cast<size_t>(i)], &data);
      const float* y = static_cast<const float*>(data);
      r.ys.emplace_back(y, y + size);
    }
  } while (false);
  for (metile_buffer* b : bufs) metile_buffer_release(b);
  if (k) metile_kernel_release(k);
  if (p) metile_program_release(p);
  if (dev) metile_device_release(dev);
  return r;
}

// The contract's rules (docs/semantics.md): a NaN result is any NaN (sign and payload
// unspecified); subnormals are kept, so exact values match bit for bit but for zeros' signs.
bool same(float a, float b, bool fuzzy) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;  // also -0 == +0: signed zeros of max/min are unspecified
  if (!fuzzy) return false;
  // Near overflow one device may round to inf where another stays finite.
  if (std::fabs(a) > 1e30f && std::fabs(b) > 1e30f) return std::signbit(a) == std::signbit(b);
  double scale = std::max({1.0, std::fabs(static_cast<double>(a)), std::fabs(static_cast<double>(b))});
  return std::fabs(static_cast<double>(a) - b) <= 1e-2 * scale;
}

struct Options {
  uint64_t seed = 1;
  long count = 100;
  double seconds = 0;
  std::vector<std::string> devices = {"interp", "cpu", "metal-sim"};
  std::string save;
};

// One program on every device; returns the number of findings (0 or 1) and prints them.
int check(uint64_t seed, const Options& o) {
  GenProgram g;
  std::string text;
  try {
    g = metile::fuzz::generate(seed);
    text = metile::print(g.program, true);
  } catch (const std::exception& e) {
    std::printf("FINDING seed %llu: the generator's program was rejected: %s\n",
                static_cast<unsigned long long>(seed), e.what());
    return 1;
  }
  std::vector<Outputs> results;
  for (const std::string& d : o.devices) results.push_back(run_on(d.c_str(), text, g.size, g.outputs, seed));
  std::ostringstream why;
  for (size_t d = 0; d < results.size(); ++d)
    if (!results[d].error.empty()) why << "  " << o.devices[d] << ": " << results[d].error << "\n";
  if (why.str().empty()) {
    for (size_t d = 1; d < results.size(); ++d)
      for (int y = 0; y < g.outputs; ++y)
        for (int64_t i = 0; i < g.size; ++i) {
          float a = results[0].ys[static_cast<size_t>(y)][static_cast<size_t>(i)];
          float b = results[d].ys[static_cast<size_t>(y)][static_cast<size_t>(i)];
          if (!same(a, b, g.fuzzy[static_cast<size_t>(y)])) {
            why << "  Y" << y << "[" << i << "]: " << o.devices[0] << " " << a << ", " << o.devices[d]
                << " " << b << (g.fuzzy[static_cast<size_t>(y)] ? " (with tolerance)" : " (exact)") << "\n";
            i = g.size;  // one element per output and device is enough
          }
        }
  }
  if (why.str().empty()) return 0;
  std::printf("FINDING seed %llu:\n%s%s\n", static_cast<unsigned long long>(seed), why.str().c_str(),
              text.c_str());
  if (!o.save.empty())
    std::ofstream(o.save + "/seed-" + std::to_string(seed) + ".mtir") << text;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "diff_fuzz: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seed") o.seed = std::stoull(next());
    else if (a == "--count") o.count = std::stol(next());
    else if (a == "--seconds") o.seconds = std::stod(next());
    else if (a == "--save") o.save = next();
    else if (a == "--devices") {
      o.devices.clear();
      std::stringstream ss(next());
      for (std::string d; std::getline(ss, d, ',');) o.devices.push_back(d);
    } else {
      std::fprintf(stderr, "usage: diff_fuzz [--seed S] [--count N] [--seconds T] [--devices a,b] [--save DIR]\n");
      return 2;
    }
  }
  auto start = std::chrono::steady_clock::now();
  long ran = 0;
  int findings = 0;
  for (uint64_t seed = o.seed;; ++seed) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (o.seconds > 0 ? elapsed >= o.seconds : ran >= o.count) break;
    findings += check(seed, o);
    ++ran;
  }
  std::printf("diff_fuzz: %ld programs (seeds %llu..%llu) on %zu devices, %d findings\n", ran,
              static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.seed + ran - 1),
              o.devices.size(), findings);
  return findings == 0 ? 0 : 1;
}
