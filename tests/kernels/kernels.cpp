// The suite's kernels, written after the seed's Python (spec §13) with the dsl.h layer.
#include "kernels/kernels.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "kernels/dsl.h"
#include "support/error.h"

namespace metile::kernels {

Program vector_add(int block) {
  KernelBuilder k("vector_add");
  V x = k.ptr("X"), y = k.ptr("Y"), out = k.ptr("Out");
  V n = k.scalar("N");
  k.constexpr_("BLOCK", block);
  V offs = k.program_id(0) * block + k.arange(0, block);
  k.at();
  V mask = offs < n;
  V xv = k.load(x + offs, mask);
  V yv = k.load(y + offs, mask);
  k.store(out + offs, xv + yv, mask);
  return k.finish();
}

Program softmax(int block) {
  KernelBuilder k("softmax");
  V x = k.ptr("X"), out = k.ptr("Out");
  V n = k.scalar("N");
  k.constexpr_("BLOCK", block);
  V row = k.program_id(0);
  k.at();
  V row_start = row * n;
  const double neg_inf = -INFINITY;
  // Masked-off lanes read -inf: they change neither the running max nor the sum of exp.
  V m = k.tile_range(k.i32(0), n, k.i32(block), {k.full(Shape::of(block), -1e38)},
                     [&](V i, std::vector<V> c) -> std::vector<V> {
                       V cols = i + k.arange(0, block);
                       k.at();
                       V xv = k.load(x + row_start + cols, cols < n, neg_inf);
                       return {k.maximum(c[0], xv)};
                     })[0];
  m = k.max(m);
  V s = k.tile_range(k.i32(0), n, k.i32(block), {k.zeros(Shape::of(block))},
                     [&](V i, std::vector<V> c) -> std::vector<V> {
                       V cols = i + k.arange(0, block);
                       k.at();
                       V xv = k.load(x + row_start + cols, cols < n, neg_inf);
                       return {c[0] + k.exp(xv - m)};
                     })[0];
  s = k.sum(s);
  k.tile_range(k.i32(0), n, k.i32(block), {}, [&](V i, std::vector<V>) -> std::vector<V> {
    V cols = i + k.arange(0, block);
    k.at();
    V mask = cols < n;
    V xv = k.load(x + row_start + cols, mask);
    k.store(out + row_start + cols, k.exp(xv - m) / s, mask);
    return {};
  });
  return k.finish();
}

namespace {

// Σx and Σx² over a row in one tile_range pass.
std::pair<V, V> row_sums(KernelBuilder& k, V x, V row_start, V n, int block, bool with_sum) {
  std::vector<V> inits{k.zeros(Shape::of(block))};
  if (with_sum) inits.push_back(k.zeros(Shape::of(block)));
  std::vector<V> r =
      k.tile_range(k.i32(0), n, k.i32(block), inits, [&](V i, std::vector<V> c) -> std::vector<V> {
        V cols = i + k.arange(0, block);
        V xv = k.load(x + row_start + cols, cols < n);
        k.at();
        if (!with_sum) return {c[0] + xv * xv};
        return {c[0] + xv * xv, c[1] + xv};
      });
  return {k.sum(r[0]), with_sum ? k.sum(r[1]) : V{}};
}

}  // namespace

Program layernorm(int block) {
  KernelBuilder k("layernorm");
  V x = k.ptr("X"), w = k.ptr("W"), b = k.ptr("B"), out = k.ptr("Out");
  V n = k.scalar("N");
  k.constexpr_("BLOCK", block);
  V row_start = k.program_id(0) * n;
  auto [ss, s] = row_sums(k, x, row_start, n, block, true);
  k.at();
  V mean = s / n;
  V inv_std = 1.0 / k.sqrt(ss / n - mean * mean + 1e-5);
  k.tile_range(k.i32(0), n, k.i32(block), {}, [&](V i, std::vector<V>) -> std::vector<V> {
    V cols = i + k.arange(0, block);
    k.at();
    V mask = cols < n;
    V xv = k.load(x + row_start + cols, mask);
    V wv = k.load(w + cols, mask);
    V bv = k.load(b + cols, mask);
    k.store(out + row_start + cols, (xv - mean) * inv_std * wv + bv, mask);
    return {};
  });
  return k.finish();
}

Program rmsnorm(int block) {
  KernelBuilder k("rmsnorm");
  V x = k.ptr("X"), w = k.ptr("W"), out = k.ptr("Out");
  V n = k.scalar("N");
  k.constexpr_("BLOCK", block);
  V row_start = k.program_id(0) * n;
  V ss = row_sums(k, x, row_start, n, block, false).first;
  V rms = 1.0 / k.sqrt(ss / n + 1e-5);
  k.tile_range(k.i32(0), n, k.i32(block), {}, [&](V i, std::vector<V>) -> std::vector<V> {
    V cols = i + k.arange(0, block);
    k.at();
    V mask = cols < n;
    V xv = k.load(x + row_start + cols, mask);
    k.store(out + row_start + cols, xv * rms * k.load(w + cols, mask), mask);
    return {};
  });
  return k.finish();
}

Program gemm(const GemmConfig& g) {
  std::string name = "matmul";
  if (!g.swizzle.empty()) name += "_swizzled";
  if (g.epilogue == Epilogue::relu) name += "_relu";
  if (g.epilogue == Epilogue::gelu) name += "_gelu";
  if (g.bounds) name += "_bounded";
  if (g.bias) name += "_bias";
  if (g.trans_b) name += "_nt";
  if (g.dtype != DType::f32) name += std::string("_") + dtype_name(g.dtype);
  const DType bt = g.b_dtype == DType::invalid ? g.dtype : g.b_dtype;
  if (bt != g.dtype) name += std::string("_") + dtype_name(bt);
  if (g.persistent) name += "_persistent";
  KernelBuilder k(name);
  V a = k.ptr("A", g.dtype), b = k.ptr("B", bt), c = k.ptr("C");
  V bias = g.bias ? k.ptr("Bias") : V{};
  V m = k.scalar("M"), n = k.scalar("N"), kk = k.scalar("K");
  k.constexpr_("BLOCK_M", g.block_m);
  k.constexpr_("BLOCK_N", g.block_n);
  k.constexpr_("BLOCK_K", g.block_k);
  auto tile = [&](V pid_m, V pid_n) {
    k.at();
    V row = pid_m * g.block_m, col = pid_n * g.block_n;
    V acc = k.tile_range(
        k.i32(0), kk, k.i32(g.block_k), {k.zeros(Shape::of(g.block_m, g.block_n))},
        [&](V kv, std::vector<V> carried) -> std::vector<V> {
          Shape sa = Shape::of(g.block_m, g.block_k), sb = Shape::of(g.block_k, g.block_n);
          V ta = g.bounds ? k.tile_load(a, row, kv, kk, sa, m, kk) : k.tile_load(a, row, kv, kk, sa);
          V tb;
          if (g.trans_b) {  // the N x K tile of B, transposed: K-major, as wgmma's tf32 form reads it
            Shape st = Shape::of(g.block_n, g.block_k);
            tb = k.trans(g.bounds ? k.tile_load(b, col, kv, kk, st, n, kk) : k.tile_load(b, col, kv, kk, st));
          } else {
            tb = g.bounds ? k.tile_load(b, kv, col, n, sb, kk, n) : k.tile_load(b, kv, col, n, sb);
          }
          return {k.dot(ta, tb, carried[0])};
        })[0];
    if (g.bias) {
      V cols = col + k.arange(0, g.block_n);
      k.at();
      V row_of_bias = k.load(bias + cols, cols < n, 0.0);
      acc = acc + row_of_bias;  // broadcast over the rows
    }
    if (g.epilogue == Epilogue::relu) acc = k.where(acc > 0.0, acc, 0.0);
    if (g.epilogue == Epilogue::gelu) {
      k.at();
      acc = acc / (1.0 + k.exp(0.0 - 1.702 * acc));
    }
    if (g.bounds)
      k.tile_store(c, row, col, n, acc, m, n);
    else
      k.tile_store(c, row, col, n, acc);
  };
  if (g.persistent) {
    V tiles_n = (n + (g.block_n - 1)) / g.block_n;
    V tiles = (m + (g.block_m - 1)) / g.block_m * tiles_n;
    k.tile_range(k.program_id(0), tiles, k.num_programs(0), {}, [&](V t, const std::vector<V>&) {
      tile(t / tiles_n, t % tiles_n);
      return std::vector<V>{};
    });
  } else {
    V pid_m = k.program_id(0), pid_n = k.program_id(1);
    if (!g.swizzle.empty())
      std::tie(pid_m, pid_n) = k.tile_swizzle(pid_m, pid_n, g.swizzle, g.swizzle_block);
    tile(pid_m, pid_n);
  }
  return k.finish();
}

namespace {

// The element-wise kernels share offs = pid * BLOCK + arange and mask offs < N.
template <typename F>
Program elementwise(const std::string& name, int block, int inputs, F&& f) {
  KernelBuilder k(name);
  std::vector<V> in;
  for (int i = 0; i < inputs; ++i) in.push_back(k.ptr(inputs == 1 ? "X" : i == 0 ? "Gate" : "Up"));
  V out = k.ptr("Out");
  V n = k.scalar("N");
  k.constexpr_("BLOCK", block);
  V offs = k.program_id(0) * block + k.arange(0, block);
  k.at();
  V mask = offs < n;
  std::vector<V> vals;
  for (V p : in) vals.push_back(k.load(p + offs, mask));
  k.store(out + offs, f(k, vals), mask);
  return k.finish();
}

V gelu_of(KernelBuilder& k, V x) {
  k.at();
  return x / (1.0 + k.exp(0.0 - 1.702 * x));
}

}  // namespace

Program gelu(int block) {
  return elementwise("gelu_kernel", block, 1,
                     [](KernelBuilder& k, std::vector<V> v) { return gelu_of(k, v[0]); });
}

Program silu(int block) {
  return elementwise("silu_kernel", block, 1, [](KernelBuilder& k, std::vector<V> v) {
    k.at();
    return v[0] / (1.0 + k.exp(0.0 - v[0]));
  });
}

Program geglu(int block) {
  return elementwise("geglu_kernel", block, 2,
                     [](KernelBuilder& k, std::vector<V> v) { return gelu_of(k, v[0]) * v[1]; });
}

Program fft(int n) {
  int stages = 0;
  while ((1 << stages) < n) ++stages;
  if (n < 2 || n > 1024 || (1 << stages) != n)
    fail(METILE_ERROR_INVALID_ARGUMENT, "kernels", "fft length ", n,
         " is not a power of two in [2, 1024]");
  const int simd_stages = std::min(5, stages);
  KernelBuilder k("fft_kernel");
  V x_re = k.ptr("X_re"), x_im = k.ptr("X_im"), y_re = k.ptr("Y_re"), y_im = k.ptr("Y_im");
  V bit_rev = k.ptr("BIT_REV", DType::i32);
  V tw_re = k.ptr("TW_re"), tw_im = k.ptr("TW_im");
  k.constexpr_("N", n);
  k.constexpr_("NUM_STAGES", stages);
  k.constexpr_("BLOCK", n);
  k.raw().set_num_threads(n);
  V row = k.program_id(0);
  V tid = k.thread_id();
  V s_re = k.shared(n), s_im = k.shared(n), t_re = k.shared(n), t_im = k.shared(n);
  // The twiddle table holds stage s's factors exp(-2 pi i j / 2^(s+1)) at 2^s - 1 + j.
  k.at();
  V tw_mask = tid < n - 1;
  k.store(t_re + tid, k.load(tw_re + tid, tw_mask), tw_mask);
  k.store(t_im + tid, k.load(tw_im + tid, tw_mask), tw_mask);
  V base = row * n;
  V rev = k.load(bit_rev + tid);
  k.store(s_re + rev, k.load(x_re + base + tid));
  k.store(s_im + rev, k.load(x_im + base + tid));
  k.barrier();
  V re = k.load(s_re + tid), im = k.load(s_im + tid);

  // Stage s pairs thread i with i ^ half (half = 2^s): the lower one computes a + w b, the
  // upper one a - w b, with w the twiddle of j = i & (half - 1).
  for (int s = 0; s < simd_stages; ++s) {
    const int half = 1 << s;
    V p_re = k.shuffle_xor(re, k.i32(half)), p_im = k.shuffle_xor(im, k.i32(half));
    k.at();
    V lower = (tid & half) == 0;
    if (s == 0) {
      re = k.where(lower, re + p_re, p_re - re);
      im = k.where(lower, im + p_im, p_im - im);
      continue;
    }
    V j = tid & (half - 1);
    V w_re = k.load(t_re + (half - 1 + j)), w_im = k.load(t_im + (half - 1 + j));
    V a_re = k.where(lower, re, p_re), a_im = k.where(lower, im, p_im);
    V b_re = k.where(lower, p_re, re), b_im = k.where(lower, p_im, im);
    k.at();
    V wb_re = w_re * b_re - w_im * b_im, wb_im = w_re * b_im + w_im * b_re;
    re = k.where(lower, a_re + wb_re, a_re - wb_re);
    im = k.where(lower, a_im + wb_im, a_im - wb_im);
  }
  k.store(s_re + tid, re);
  k.store(s_im + tid, im);
  k.barrier();

  k.tile_range(k.i32(0), k.i32(stages - simd_stages), k.i32(1), {},
               [&](V st, std::vector<V>) -> std::vector<V> {
                 k.at();
                 V half = k.i32(1) << (st + simd_stages);
                 V lower = (tid & half) == 0;
                 V even = tid & ~half;
                 V odd = even + half;
                 V tw = half - 1 + (tid & (half - 1));
                 V w_re = k.load(t_re + tw), w_im = k.load(t_im + tw);
                 V a_re = k.load(s_re + even), a_im = k.load(s_im + even);
                 V b_re = k.load(s_re + odd), b_im = k.load(s_im + odd);
                 k.at();
                 V wb_re = w_re * b_re - w_im * b_im, wb_im = w_re * b_im + w_im * b_re;
                 V new_re = k.where(lower, a_re + wb_re, a_re - wb_re);
                 V new_im = k.where(lower, a_im + wb_im, a_im - wb_im);
                 k.barrier();
                 k.store(s_re + tid, new_re);
                 k.store(s_im + tid, new_im);
                 k.barrier();
                 return {};
               });
  k.store(y_re + base + tid, k.load(s_re + tid));
  k.store(y_im + base + tid, k.load(s_im + tid));
  return k.finish();
}

Program histogram(int block) {
  KernelBuilder k("histogram");
  V x = k.ptr("X", DType::i32), hist = k.ptr("Hist", DType::i32);
  V n = k.scalar("N");
  k.constexpr_("BLOCK", block);
  V offs = k.program_id(0) * block + k.arange(0, block);
  V mask = offs < n;
  k.atomic(OpKind::ATOMIC_ADD, hist + k.load(x + offs, mask), k.i32(1), mask);
  return k.finish();
}

Program atomic_sum(int block) {
  KernelBuilder k("atomic_sum");
  V x = k.ptr("X"), out = k.ptr("Out");
  V n = k.scalar("N");
  k.constexpr_("BLOCK", block);
  V offs = k.program_id(0) * block + k.arange(0, block);
  k.atomic(OpKind::ATOMIC_ADD, out + k.i32(0), k.sum(k.load(x + offs, offs < n, 0.0)));
  return k.finish();
}

std::vector<Program> all_programs() {
  std::vector<Program> out;
  out.push_back(vector_add(256));
  out.push_back(softmax(256));
  out.push_back(layernorm(256));
  out.push_back(rmsnorm(256));
  out.push_back(gemm({}));
  GemmConfig bounded;
  bounded.bounds = true;
  bounded.epilogue = Epilogue::relu;
  out.push_back(gemm(bounded));
  GemmConfig swizzled;
  swizzled.swizzle = "morton";
  swizzled.epilogue = Epilogue::gelu;
  out.push_back(gemm(swizzled));
  out.push_back(gelu(256));
  out.push_back(silu(256));
  out.push_back(geglu(256));
  out.push_back(fft(64));
  out.push_back(fft(1024));
  return out;
}

}  // namespace metile::kernels
