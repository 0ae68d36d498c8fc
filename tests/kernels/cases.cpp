// The suite's cases: deterministic inputs and float64 references. Tolerances follow spec §14
// (GEMM 1e-4, softmax / layernorm / rmsnorm 1e-5, FFT 1e-3); looser ones say why.
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <numbers>
#include <random>

#include "kernels/dsl.h"
#include "kernels/kernels.h"
#include "support/error.h"

namespace metile::kernels {

namespace {

// Stable across standard libraries (std::hash is not): FNV-1a of the case name.
uint64_t seed_of(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// Normal samples rounded to f32, so the reference sees exactly what the device reads.
std::vector<double> randn(std::mt19937_64& rng, size_t n) {
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(dist(rng));
  return v;
}

Arg input(std::vector<double> v, DType d = DType::f32) {
  return Arg{Arg::Kind::buffer, {d, std::move(v)}, false, 0};
}
Arg output(size_t n) {
  return Arg{Arg::Kind::buffer, {DType::f32, std::vector<double>(n, 0.0)}, true, 0};
}
Arg int_arg(int64_t v) { return Arg{Arg::Kind::i32, {}, false, v}; }

uint32_t cdiv(int64_t a, int64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

struct Dims {
  std::vector<int64_t> d;
  std::string variant;  // the text after a second '/', e.g. "const"
};

Dims parse_dims(const std::string& name, const std::string& shape, size_t count) {
  Dims out;
  std::string s = shape;
  size_t slash = s.find('/');
  if (slash != std::string::npos) {
    out.variant = s.substr(slash + 1);
    s = s.substr(0, slash);
  }
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t x = s.find('x', pos);
    out.d.push_back(std::stoll(s.substr(pos, x - pos)));
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (out.d.size() != count)
    fail(METILE_ERROR_INVALID_ARGUMENT, "kernels", "case ", name, " needs ", count, " dimensions");
  return out;
}

constexpr int kBlock = 256;

Case vector_add_case(const std::string& name, const Dims& dims, std::mt19937_64& rng) {
  const int64_t n = dims.d[0];
  std::vector<double> x = randn(rng, n), y = randn(rng, n), want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = x[i] + y[i];
  // One f32 rounding of the sum.
  return Case{name,
              vector_add(kBlock),
              {input(x), input(y), output(n), int_arg(n)},
              {cdiv(n, kBlock), 1, 1},
              {want},
              1e-7,
              0.0};
}

// softmax, layernorm, rmsnorm: one program per row of a rows x cols matrix.
Case row_case(const std::string& kernel, const std::string& name, const Dims& dims,
              std::mt19937_64& rng) {
  const int64_t rows = dims.d[0], cols = dims.d[1], total = rows * cols;
  std::vector<double> x = randn(rng, total);
  if (dims.variant == "const") {
    const double v = kernel == "softmax" ? 3.0 : kernel == "layernorm" ? 5.0 : 0.0;
    std::fill(x.begin(), x.end(), v);
  }
  std::vector<double> w = randn(rng, cols), b = randn(rng, cols), want(total);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * cols];
    double* o = &want[r * cols];
    double mean = 0, sq = 0, mx = -INFINITY, se = 0;
    for (int64_t c = 0; c < cols; ++c) {
      mean += xr[c];
      sq += xr[c] * xr[c];
      mx = std::max(mx, xr[c]);
    }
    mean /= cols;
    double var = 0;
    for (int64_t c = 0; c < cols; ++c) {
      var += (xr[c] - mean) * (xr[c] - mean);
      se += std::exp(xr[c] - mx);
    }
    var /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      if (kernel == "softmax")
        o[c] = std::exp(xr[c] - mx) / se;
      else if (kernel == "layernorm")
        o[c] = (xr[c] - mean) / std::sqrt(var + 1e-5) * w[c] + b[c];
      else
        o[c] = xr[c] / std::sqrt(sq / cols + 1e-5) * w[c];
    }
  }
  Case c{name, {}, {}, {static_cast<uint32_t>(rows), 1, 1}, {want}, 1e-5, 1e-5};
  if (kernel == "softmax") {
    c.program = softmax(kBlock);
    c.args = {input(x), output(total), int_arg(cols)};
  } else if (kernel == "layernorm") {
    c.program = layernorm(kBlock);
    c.args = {input(x), input(w), input(b), output(total), int_arg(cols)};
  } else {
    c.program = rmsnorm(kBlock);
    c.args = {input(x), input(w), output(total), int_arg(cols)};
  }
  return c;
}

Case gemm_case(const std::string& kernel, const std::string& name, const Dims& dims,
               std::mt19937_64& rng) {
  const int64_t m = dims.d[0], n = dims.d[1], k = dims.d[2];
  GemmConfig g;
  g.bounds = kernel.find("bounds") != std::string::npos;
  if (kernel.find("relu") != std::string::npos) g.epilogue = Epilogue::relu;
  if (kernel.find("gelu") != std::string::npos) g.epilogue = Epilogue::gelu;
  for (const char* p : {"morton", "grouped", "diagonal"})
    if (kernel.find(p) != std::string::npos) g.swizzle = p;
  if (g.bounds) g.block_k = 16;
  g.bias = kernel.find("bias") != std::string::npos;
  g.persistent = kernel.find("persistent") != std::string::npos;
  g.trans_b = kernel.find("_nt") != std::string::npos;
  if (kernel.find("f16") != std::string::npos) g.dtype = DType::f16;
  if (kernel.find("bf16") != std::string::npos) g.dtype = DType::bf16;
  const bool tf32 = kernel.find("tf32") != std::string::npos;
  // 1-row and 1-column tiles: no matrix atom fits, the exact FMA path runs.
  if (kernel.find("_m1") != std::string::npos) g.block_m = 1;
  if (kernel.find("_n1") != std::string::npos) g.block_n = 1;
  // 128x128 tiles: on Apple the staged operands exceed half the threadgroup memory, so K is
  // staged in chunks.
  if (kernel.find("_big") != std::string::npos) g.block_m = g.block_n = 128;
  // 64-row tiles and more: the warpgroup atom (wgmma) on sm_90, mma.sync elsewhere.
  if (kernel.find("_wg") != std::string::npos) g.block_m = g.block_n = kernel.find("_wgbig") != std::string::npos ? 128 : 64;
  if (!g.bounds && (m % g.block_m || n % g.block_n || k % g.block_k))
    fail(METILE_ERROR_INVALID_ARGUMENT, "kernels", "case ", name,
         ": unbounded GEMM shapes must be multiples of the blocks");
  std::vector<double> a = randn(rng, m * k), b = randn(rng, k * n), bias = randn(rng, n), want(m * n);
  // The reference sees the inputs as the device stores them (f16/bf16 rounded).
  for (std::vector<double>* v : {&a, &b})
    for (double& x : *v) {
      std::vector<uint8_t> e = encode(g.dtype, {x});
      x = decode(g.dtype, e.data());
    }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = g.bias ? bias[j] : 0;
      for (int64_t kk = 0; kk < k; ++kk) s += a[i * k + kk] * (g.trans_b ? b[j * k + kk] : b[kk * n + j]);
      if (g.epilogue == Epilogue::relu) s = std::max(s, 0.0);
      if (g.epilogue == Epilogue::gelu) s = s / (1.0 + std::exp(-1.702 * s));
      want[i * n + j] = s;
    }
  std::vector<Arg> args = {input(a, g.dtype), input(b, g.dtype), output(m * n), int_arg(m), int_arg(n),
                           int_arg(k)};
  if (g.bias) args.insert(args.begin() + 3, input(bias));
  Case c{name, gemm(g), args, {cdiv(m, g.block_m), cdiv(n, g.block_n), 1}, {want}, 1e-4, 1e-4};
  if (g.persistent) {  // a third of the tiles' programs, rounded up: most run 3, some fewer
    const int64_t tiles = static_cast<int64_t>(cdiv(m, g.block_m)) * cdiv(n, g.block_n);
    c.grid = {static_cast<uint32_t>(std::max<int64_t>(1, (tiles + 2) / 3)), 1, 1};
  }
  if (kernel.find("tf32x3") != std::string::npos) {  // 3xTF32: the exact cases' f32 bound
    c.allow_tf32 = -1;
    c.dot_precision = METILE_DOT_PRECISION_TF32X3;
  } else if (tf32) {  // inputs rounded to 10 mantissa bits: spec §14's TF32 bound
    c.allow_tf32 = 1;
    c.rtol = c.atol = 5e-2;
  }
  return c;
}

Case activation_case(const std::string& kernel, const std::string& name, const Dims& dims,
                     std::mt19937_64& rng) {
  const int64_t n = dims.d[0];
  std::vector<double> x = randn(rng, n), up = randn(rng, n), want(n);
  auto gelu_ref = [](double v) { return v / (1.0 + std::exp(-1.702 * v)); };
  for (int64_t i = 0; i < n; ++i) {
    if (kernel == "gelu")
      want[i] = gelu_ref(x[i]);
    else if (kernel == "silu")
      want[i] = x[i] / (1.0 + std::exp(-x[i]));
    else
      want[i] = gelu_ref(x[i]) * up[i];
  }
  Case c{name, {}, {}, {cdiv(n, kBlock), 1, 1}, {want}, 1e-5, 1e-6};
  if (kernel == "geglu") {
    c.program = geglu(kBlock);
    c.args = {input(x), input(up), output(n), int_arg(n)};
  } else {
    c.program = kernel == "gelu" ? gelu(kBlock) : silu(kBlock);
    c.args = {input(x), output(n), int_arg(n)};
  }
  return c;
}

Case fft_case(const std::string& name, const Dims& dims, std::mt19937_64& rng) {
  const int64_t batch = dims.d[0], n = dims.d[1];
  int stages = 0;
  while ((int64_t{1} << stages) < n) ++stages;
  std::vector<double> re = randn(rng, batch * n), im = randn(rng, batch * n);
  std::vector<double> rev(n), tw_re(n, 0.0), tw_im(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = 0;
    for (int b = 0; b < stages; ++b) r |= ((i >> b) & 1) << (stages - 1 - b);
    rev[i] = static_cast<double>(r);
  }
  for (int s = 0; s < stages; ++s)
    for (int64_t j = 0; j < (int64_t{1} << s); ++j) {
      const double angle =
          -2.0 * std::numbers::pi * static_cast<double>(j) / static_cast<double>(int64_t{2} << s);
      tw_re[(int64_t{1} << s) - 1 + j] = static_cast<float>(std::cos(angle));
      tw_im[(int64_t{1} << s) - 1 + j] = static_cast<float>(std::sin(angle));
    }
  // The reference is a direct float64 DFT (independent of the kernel's algorithm).
  std::vector<double> want_re(batch * n), want_im(batch * n), cs(n), sn(n);
  for (int64_t t = 0; t < n; ++t) {
    cs[t] = std::cos(-2.0 * std::numbers::pi * static_cast<double>(t) / static_cast<double>(n));
    sn[t] = std::sin(-2.0 * std::numbers::pi * static_cast<double>(t) / static_cast<double>(n));
  }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < n; ++f) {
      double sr = 0, si = 0;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t e = f * t % n;
        const double xr = re[b * n + t], xi = im[b * n + t];
        sr += xr * cs[e] - xi * sn[e];
        si += xr * sn[e] + xi * cs[e];
      }
      want_re[b * n + f] = sr;
      want_im[b * n + f] = si;
    }
  return Case{name,
              fft(static_cast<int>(n)),
              {input(re), input(im), output(batch * n), output(batch * n), input(rev, DType::i32),
               input(tw_re), input(tw_im)},
              {static_cast<uint32_t>(batch), 1, 1},
              {want_re, want_im},
              1e-3,
              1e-3};
}

// Atomics with every program contending: a 64-bin histogram of random bins, and a sum that
// each program adds its block's partial to (f32: the order of the adds varies run to run).
Case atomic_case(const std::string& kernel, const std::string& name, const Dims& dims,
                 std::mt19937_64& rng) {
  const int64_t n = dims.d[0];
  if (kernel == "histogram") {
    std::vector<double> x(n), hist(64, 0.0);
    for (double& v : x) {
      v = static_cast<double>(rng() % 64);
      hist[static_cast<size_t>(v)] += 1;
    }
    Arg out{Arg::Kind::buffer, {DType::i32, std::vector<double>(64, 0.0)}, true, 0};
    return Case{name, histogram(kBlock), {input(x, DType::i32), out, int_arg(n)},
                {cdiv(n, kBlock), 1, 1}, {hist}, 0.0, 0.0};
  }
  std::vector<double> x = randn(rng, n);
  double sum = 0;
  for (double v : x) sum += v;
  return Case{name, atomic_sum(kBlock), {input(x), output(1), int_arg(n)},
              {cdiv(n, kBlock), 1, 1}, {{sum}}, 1e-5, 1e-4};
}

// Run-time while and if (Triton's layer-norm backward idiom): each program sums its block, takes
// a spin lock with atomic_cas in a while, and under it either starts the total (the first
// program there, flagged in Lock[1]) or adds to it, then releases the lock. Lock ends {0, 1}.
Program locked_sum(int block) {
  KernelBuilder k("locked_sum");
  V x = k.ptr("X"), out = k.ptr("Out"), lock = k.ptr("Lock", DType::i32);
  V n = k.scalar("N");
  k.constexpr_("BLOCK", block);
  V offs = k.program_id(0) * block + k.arange(0, block);
  V part = k.sum(k.load(x + offs, offs < n, 0.0));
  Builder& b = k.raw();
  b.while_begin({});
  b.while_do((k.atomic_cas(lock, k.i32(0), k.i32(1), V{}) == 1).id, {});
  b.while_end({});
  V count = lock + 1;
  b.if_begin((k.load(count) == 0).id);
  k.atomic(OpKind::ATOMIC_XCHG, count, k.i32(1));
  b.if_else({part.id});
  V total = k.wrap(b.if_end({(k.load(out) + part).id}).at(0));
  k.store(out + k.i32(0), total);
  k.atomic(OpKind::ATOMIC_XCHG, lock, k.i32(0));
  return k.finish();
}

Case control_case(const std::string& name, const Dims& dims, std::mt19937_64& rng) {
  const int64_t n = dims.d[0];
  std::vector<double> x = randn(rng, n);
  double sum = 0;
  for (double v : x) sum += v;
  Arg lock{Arg::Kind::buffer, {DType::i32, {0.0, 0.0}}, true, 0};
  return Case{name, locked_sum(kBlock), {input(x), output(1), lock, int_arg(n)},
              {cdiv(n, kBlock), 1, 1}, {{sum}, {0.0, 1.0}}, 1e-5, 1e-4};
}

const std::vector<std::string>& names() {
  static const std::vector<std::string> n = {
      "vector_add/1000",
      "vector_add/4096",
      "vector_add/1",
      "softmax/32x64",
      "softmax/64x300",
      "softmax/1x512",
      "softmax/16x1000",
      "softmax/32x128/const",
      "layernorm/32x64",
      "layernorm/64x300",
      "layernorm/1x512",
      "layernorm/8x2048",
      "layernorm/16x128/const",
      "rmsnorm/32x64",
      "rmsnorm/64x300",
      "rmsnorm/1x512",
      "rmsnorm/8x2048",
      "rmsnorm/16x128/const",
      "gemm/64x64x64",
      "gemm/128x64x96",
      "gemm/32x32x128",
      "gemm_bounds/50x70x37",
      "gemm_bounds/1x1x1",
      "gemm_bounds/65x33x100",
      "gemm_relu/64x64x64",
      "gemm_relu_bounds/45x77x20",
      "gemm_gelu/64x96x32",
      "gemm_gelu_bounds/33x31x65",
      "gemm_morton/128x160x64",
      "gemm_grouped/160x96x32",
      "gemm_diagonal/96x128x32",
      "gemm_tf32/64x64x64",
      "gemm_tf32_bounds/50x70x37",
      // 3xTF32 (input_precision "tf32x3", cuda's default): mma.sync on hi/lo parts, within the
      // exact cases' 1e-4; the _wg shape would take wgmma under "tf32" but stays on mma.sync.
      "gemm_tf32x3/64x64x64",
      "gemm_tf32x3_bounds/50x70x37",
      "gemm_tf32x3_wg_bounds/136x72x40",
      "gemm_f16/64x64x64",
      "gemm_f16_bounds/65x33x100",
      "gemm_bf16/64x96x32",
      "gemm_bf16_relu_bounds/45x77x20",
      "gemm_bias_bounds/50x70x37",
      "gemm_bias_gelu/64x64x32",
      "gemm_m1_bounds/5x40x20",
      "gemm_n1_bounds/40x5x20",
      "gemm_big/128x128x64",
      "gemm_f16_wg/128x128x96",
      "gemm_f16_wg_bounds/130x70x50",
      "gemm_bf16_wg_relu_bounds/100x77x45",
      // Rows of 16-byte multiples: TMA copies on sm_90 (ragged M, N and K; the two above fall
      // back to the build without TMA at launch).
      "gemm_f16_wg_bounds/136x72x40",
      "gemm_bf16_wg_relu_bounds/72x200x88",
      "gemm_bf16_wg_bias_gelu/128x64x64",
      "gemm_f16_wgbig/256x128x64",
      // A loop over tiles around the K loop (persistent_range): on sm_90 with TMA the next
      // tile's first stages are issued before this tile's epilogue (lower_persistent.cpp);
      // 130x70x50 falls back to the build without TMA at launch.
      "gemm_persistent_bounds/50x70x37",
      "gemm_f16_wg_persistent_bounds/136x200x40",
      "gemm_bf16_wg_relu_bounds_persistent/72x200x88",
      "gemm_f16_wgbig_persistent/256x256x64",
      "gemm_f16_wg_persistent_bounds/130x70x50",
      // tf32 with B given N x K (dot(a, trans(b))): the tf32 warpgroup atom on sm_90 (TMA where
      // rows are 16-byte multiples; K = 45 falls back to the async copies at launch).
      "gemm_tf32_nt_bounds/50x70x37",
      // tf32 with B given K x N: the transposed tf32 warpgroup form on sm_90 (C^T = B^T A^T).
      "gemm_tf32_wg/128x128x96",
      "gemm_tf32_wg_bounds/136x72x40",
      "gemm_tf32_wg_relu_bounds/100x77x45",
      "gemm_tf32_wg_bias_gelu/128x64x64",
      "gemm_tf32_wg_nt/128x128x96",
      "gemm_tf32_wg_nt_bounds/136x72x40",
      "gemm_tf32_wg_nt_relu_bounds/100x77x45",
      "gemm_tf32_wgbig_nt_bias_gelu/256x128x64",
      "gelu/1000",
      "gelu/1",
      "silu/1000",
      "geglu/1000",
      "geglu/4096",
      "fft/1x2",
      "fft/1x8",
      "fft/1x16",
      "fft/2x32",
      "fft/1x64",
      "fft/4x256",
      "fft/1x1024",
      "fft/3x1024",
      "histogram/5000",
      "histogram/1",
      "atomic_sum/3000",
      "locked_sum/3000",
  };
  return n;
}

}  // namespace

std::vector<std::string> case_names() { return names(); }

Case make_case(const std::string& name) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos)
    fail(METILE_ERROR_INVALID_ARGUMENT, "kernels", "case name ", name, " has no shape");
  const std::string kernel = name.substr(0, slash), shape = name.substr(slash + 1);
  std::mt19937_64 rng(seed_of(name));
  if (kernel == "vector_add") return vector_add_case(name, parse_dims(name, shape, 1), rng);
  if (kernel == "softmax" || kernel == "layernorm" || kernel == "rmsnorm")
    return row_case(kernel, name, parse_dims(name, shape, 2), rng);
  if (kernel.rfind("gemm", 0) == 0) return gemm_case(kernel, name, parse_dims(name, shape, 3), rng);
  if (kernel == "gelu" || kernel == "silu" || kernel == "geglu")
    return activation_case(kernel, name, parse_dims(name, shape, 1), rng);
  if (kernel == "fft") return fft_case(name, parse_dims(name, shape, 2), rng);
  if (kernel == "histogram" || kernel == "atomic_sum")
    return atomic_case(kernel, name, parse_dims(name, shape, 1), rng);
  if (kernel == "locked_sum") return control_case(name, parse_dims(name, shape, 1), rng);
  fail(METILE_ERROR_INVALID_ARGUMENT, "kernels", "unknown case ", name);
}

}  // namespace metile::kernels
