/* Attention through the C builder API: the kernels of examples/python/flash_attention.py and
 * decode_attention.py, built op by op.
 *  - flash attention forward: softmax(Q K^T / sqrt(D)) V over [heads, seq, D] with an online
 *    softmax over BLOCK_N-row tiles of K and V, causal or not, any seq;
 *  - decode attention: one query per head against a KV cache with GQA (HEADS query heads share
 *    KV_HEADS key/value heads), split over the sequence with a merge kernel.
 * Each result is checked against a double-precision reference computed here. */
#include <math.h>
#include <metile/metile.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    metile_status s_ = (call);                                                   \
    if (s_ != METILE_OK) {                                                       \
      fprintf(stderr, "%s failed: %s: %s\n", #call, metile_status_name(s_),      \
              metile_last_error());                                              \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

enum { D = 64, BM = 16, BN = 16, HEADS = 8, KV_HEADS = 2, SPLITS_P2 = 4 };
static const double LOG2E = 1.4426950408889634;

/* The builder being filled, and one-line spellings of the ops used below. */
static metile_builder *bld;
static metile_value ci(int64_t v) { metile_value r; CHECK(metile_builder_const_int(bld, METILE_DTYPE_I32, v, &r)); return r; }
static metile_value cf(double v) { metile_value r; CHECK(metile_builder_const_float(bld, METILE_DTYPE_F32, v, &r)); return r; }
static metile_value bin(metile_op op, metile_value x, metile_value y) { metile_value r; CHECK(metile_builder_binary(bld, op, x, y, &r)); return r; }
static metile_value un(metile_op op, metile_value x) { metile_value r; CHECK(metile_builder_unary(bld, op, x, &r)); return r; }
static metile_value sel(metile_value c, metile_value x, metile_value y) { metile_value r; CHECK(metile_builder_select(bld, c, x, y, &r)); return r; }
static metile_value red(metile_op op, metile_value x, int axis) { metile_value r; CHECK(metile_builder_reduce(bld, op, x, axis, &r)); return r; }
static metile_value at(metile_value p, metile_value off) { metile_value r; CHECK(metile_builder_ptr_offset(bld, p, off, &r)); return r; }
static metile_value range(metile_value start, int64_t n) { metile_value r; CHECK(metile_builder_arange(bld, start, n, &r)); return r; }
static metile_value pid(metile_op op, int axis) { metile_value r; CHECK(metile_builder_grid(bld, op, axis, &r)); return r; }
static metile_value shaped(metile_value x, int64_t rows, int64_t cols) {
  int64_t s[2]; metile_value r;
  s[0] = rows; s[1] = cols;
  CHECK(metile_builder_reshape(bld, x, 2, s, &r));
  return r;
}
static metile_value fill(double v, int rank, int64_t rows, int64_t cols) {
  int64_t s[2]; metile_value r;
  s[0] = rows; s[1] = cols;
  CHECK(metile_builder_broadcast(bld, cf(v), rank, s, &r));
  return r;
}
static metile_value param(const char *name, metile_dtype dtype, int pointer) {
  metile_type t = {METILE_DTYPE_F32, 0, {0, 0}, 0, METILE_ADDRESS_SPACE_DEVICE};
  metile_value r;
  t.dtype = dtype;
  t.is_pointer = pointer;
  CHECK(metile_builder_param(bld, name, &t, &r));
  return r;
}

static metile_program *build_flash(int causal) {
  metile_value Q, K, V, O, seq, scale, start_m, base, rows, q, end, n, m, l, acc, k, v, kt, s, cols;
  metile_value keep, m_new, alpha, p, inits[3], carried[3], yields[3], done[3], program_out, kv;
  metile_program *program;
  CHECK(metile_builder_create(&bld, causal ? "flash_attention_causal" : "flash_attention"));
  CHECK(metile_builder_set_loc(bld, __FILE__, __LINE__));
  Q = param("Q", METILE_DTYPE_F32, 1), K = param("K", METILE_DTYPE_F32, 1);
  V = param("V", METILE_DTYPE_F32, 1), O = param("Out", METILE_DTYPE_F32, 1);
  seq = param("seq", METILE_DTYPE_I32, 0), scale = param("qk_scale_log2", METILE_DTYPE_F32, 0);
  start_m = bin(METILE_OP_MUL, pid(METILE_OP_PROGRAM_ID, 0), ci(BM));
  base = bin(METILE_OP_MUL, bin(METILE_OP_MUL, pid(METILE_OP_PROGRAM_ID, 1), seq), ci(D));
  rows = range(start_m, BM);
  CHECK(metile_builder_tile_load(bld, at(Q, base), start_m, ci(0), ci(D), BM, D, seq, ci(D), &q));
  inits[0] = fill(-INFINITY, 1, BM, 0);  /* running row max, in log2 units */
  inits[1] = fill(0.0, 1, BM, 0);        /* running row sum */
  inits[2] = fill(0.0, 2, BM, D);        /* unnormalized output rows */
  end = causal ? bin(METILE_OP_MINIMUM, bin(METILE_OP_ADD, start_m, ci(BM)), seq) : seq;
  CHECK(metile_builder_for_begin(bld, ci(0), end, ci(BN), inits, 3, &n, carried));
  m = carried[0], l = carried[1], acc = carried[2];
  CHECK(metile_builder_tile_load(bld, at(K, base), n, ci(0), ci(D), BN, D, seq, ci(D), &k));
  CHECK(metile_builder_tile_load(bld, at(V, base), n, ci(0), ci(D), BN, D, seq, ci(D), &v));
  CHECK(metile_builder_trans(bld, k, &kt));
  CHECK(metile_builder_dot(bld, q, kt, fill(0.0, 2, BM, BN), &s));
  s = bin(METILE_OP_MUL, s, scale);
  cols = shaped(range(n, BN), 1, BN);
  keep = bin(METILE_OP_LT, cols, seq);
  if (causal) keep = bin(METILE_OP_BITAND, keep, bin(METILE_OP_LE, cols, shaped(rows, BM, 1)));
  s = sel(keep, s, cf(-INFINITY));
  m_new = bin(METILE_OP_MAXIMUM, m, red(METILE_OP_REDUCE_MAX, s, 1));
  alpha = un(METILE_OP_EXP2, bin(METILE_OP_SUB, m, m_new));
  p = un(METILE_OP_EXP2, bin(METILE_OP_SUB, s, shaped(m_new, BM, 1)));
  yields[0] = m_new;
  yields[1] = bin(METILE_OP_ADD, bin(METILE_OP_MUL, l, alpha), red(METILE_OP_REDUCE_SUM, p, 1));
  CHECK(metile_builder_dot(bld, p, v, bin(METILE_OP_MUL, acc, shaped(alpha, BM, 1)), &kv));
  yields[2] = kv;
  CHECK(metile_builder_for_end(bld, yields, 3, done));
  program_out = bin(METILE_OP_DIV, done[2], shaped(done[1], BM, 1));
  CHECK(metile_builder_tile_store(bld, at(O, base), start_m, ci(0), ci(D), program_out, seq, ci(D)));
  CHECK(metile_builder_finish(bld, &program));
  metile_builder_release(bld);
  return program;
}

/* One program per (batch * HEADS + head, split): the split's keys, online softmax, partials out. */
static metile_program *build_decode_partial(void) {
  metile_value Q, K, V, Acc, Max, Sum, seq, chunk, scale, bh, split, kv, kv_base, d, q, start, end;
  metile_value n, k, v, s, m_new, alpha, p, part, inits[3], carried[3], yields[3], done[3], one;
  metile_program *program;
  CHECK(metile_builder_create(&bld, "decode_attention_partial"));
  CHECK(metile_builder_set_loc(bld, __FILE__, __LINE__));
  Q = param("Q", METILE_DTYPE_F32, 1), K = param("K", METILE_DTYPE_F32, 1);
  V = param("V", METILE_DTYPE_F32, 1), Acc = param("Acc", METILE_DTYPE_F32, 1);
  Max = param("Max", METILE_DTYPE_F32, 1), Sum = param("Sum", METILE_DTYPE_F32, 1);
  seq = param("seq", METILE_DTYPE_I32, 0), chunk = param("chunk", METILE_DTYPE_I32, 0);
  scale = param("qk_scale_log2", METILE_DTYPE_F32, 0);
  bh = pid(METILE_OP_PROGRAM_ID, 0), split = pid(METILE_OP_PROGRAM_ID, 1);
  kv = bin(METILE_OP_ADD, bin(METILE_OP_MUL, bin(METILE_OP_DIV, bh, ci(HEADS)), ci(KV_HEADS)),
           bin(METILE_OP_DIV, bin(METILE_OP_MOD, bh, ci(HEADS)), ci(HEADS / KV_HEADS)));
  kv_base = bin(METILE_OP_MUL, bin(METILE_OP_MUL, kv, seq), ci(D));
  d = range(0, D);
  CHECK(metile_builder_load(bld, at(Q, bin(METILE_OP_ADD, bin(METILE_OP_MUL, bh, ci(D)), d)), 0, 0, &q));
  start = bin(METILE_OP_MUL, split, chunk);
  end = bin(METILE_OP_MINIMUM, bin(METILE_OP_ADD, start, chunk), seq);
  inits[0] = cf(-INFINITY), inits[1] = cf(0.0), inits[2] = fill(0.0, 1, D, 0);
  CHECK(metile_builder_for_begin(bld, start, end, ci(BN), inits, 3, &n, carried));
  CHECK(metile_builder_tile_load(bld, at(K, kv_base), n, ci(0), ci(D), BN, D, end, ci(D), &k));
  CHECK(metile_builder_tile_load(bld, at(V, kv_base), n, ci(0), ci(D), BN, D, end, ci(D), &v));
  s = bin(METILE_OP_MUL, red(METILE_OP_REDUCE_SUM, bin(METILE_OP_MUL, k, shaped(q, 1, D)), 1), scale);
  s = sel(bin(METILE_OP_LT, range(n, BN), end), s, cf(-INFINITY));
  m_new = bin(METILE_OP_MAXIMUM, carried[0], red(METILE_OP_REDUCE_MAX, s, -1));
  alpha = un(METILE_OP_EXP2, bin(METILE_OP_SUB, carried[0], m_new));
  p = un(METILE_OP_EXP2, bin(METILE_OP_SUB, s, m_new));
  yields[0] = m_new;
  yields[1] = bin(METILE_OP_ADD, bin(METILE_OP_MUL, carried[1], alpha), red(METILE_OP_REDUCE_SUM, p, -1));
  yields[2] = bin(METILE_OP_ADD, bin(METILE_OP_MUL, carried[2], alpha),
                  red(METILE_OP_REDUCE_SUM, bin(METILE_OP_MUL, shaped(p, BN, 1), v), 0));
  CHECK(metile_builder_for_end(bld, yields, 3, done));
  part = bin(METILE_OP_ADD, bin(METILE_OP_MUL, bh, pid(METILE_OP_NUM_PROGRAMS, 1)), split);
  CHECK(metile_builder_store(bld, at(Acc, bin(METILE_OP_ADD, bin(METILE_OP_MUL, part, ci(D)), d)), done[2], 0));
  one = range(part, 1);
  CHECK(metile_builder_store(bld, at(Max, one), bin(METILE_OP_ADD, fill(0.0, 1, 1, 0), done[0]), 0));
  CHECK(metile_builder_store(bld, at(Sum, one), bin(METILE_OP_ADD, fill(0.0, 1, 1, 0), done[1]), 0));
  CHECK(metile_builder_finish(bld, &program));
  metile_builder_release(bld);
  return program;
}

/* One program per (batch * HEADS + head): partials rescaled to the global max and combined. */
static metile_program *build_decode_merge(void) {
  metile_value Acc, Max, Sum, O, splits, bh, s, live, m, l, w, acc, out, base;
  metile_program *program;
  CHECK(metile_builder_create(&bld, "decode_attention_merge"));
  CHECK(metile_builder_set_loc(bld, __FILE__, __LINE__));
  Acc = param("Acc", METILE_DTYPE_F32, 1), Max = param("Max", METILE_DTYPE_F32, 1);
  Sum = param("Sum", METILE_DTYPE_F32, 1), O = param("Out", METILE_DTYPE_F32, 1);
  splits = param("splits", METILE_DTYPE_I32, 0);
  bh = pid(METILE_OP_PROGRAM_ID, 0);
  s = range(0, SPLITS_P2);
  live = bin(METILE_OP_LT, s, splits);
  base = bin(METILE_OP_MUL, bh, splits);
  CHECK(metile_builder_load(bld, at(Max, bin(METILE_OP_ADD, base, s)), live, cf(-INFINITY), &m));
  CHECK(metile_builder_load(bld, at(Sum, bin(METILE_OP_ADD, base, s)), live, cf(0.0), &l));
  w = un(METILE_OP_EXP2, bin(METILE_OP_SUB, m, red(METILE_OP_REDUCE_MAX, m, -1)));
  w = sel(live, w, cf(0.0));  /* a split with no keys has weight 0 */
  CHECK(metile_builder_tile_load(bld, at(Acc, bin(METILE_OP_MUL, base, ci(D))), ci(0), ci(0), ci(D),
                                 SPLITS_P2, D, splits, ci(D), &acc));
  out = bin(METILE_OP_DIV, red(METILE_OP_REDUCE_SUM, bin(METILE_OP_MUL, acc, shaped(w, SPLITS_P2, 1)), 0),
            red(METILE_OP_REDUCE_SUM, bin(METILE_OP_MUL, l, w), -1));
  CHECK(metile_builder_store(bld, at(O, bin(METILE_OP_ADD, bin(METILE_OP_MUL, bh, ci(D)), range(0, D))), out, 0));
  CHECK(metile_builder_finish(bld, &program));
  metile_builder_release(bld);
  return program;
}

static metile_kernel *compile(metile_device *dev, metile_program *program) {
  metile_compile_options options;
  metile_kernel *kernel;
  metile_compile_options_init(&options);
  options.allow_tf32 = 0; /* exact f32 so the checks can be tight */
  CHECK(metile_kernel_compile(&kernel, dev, program, &options));
  metile_program_release(program);
  return kernel;
}

static float *alloc(metile_device *dev, metile_buffer **buf, size_t n, int random) {
  float *h;
  size_t i;
  CHECK(metile_buffer_alloc(buf, dev, n * sizeof(float)));
  CHECK(metile_buffer_contents(*buf, (void **)&h));
  for (i = 0; i < n; ++i) h[i] = random ? (float)(2.0 * rand() / RAND_MAX - 1.0) : 0.0f;
  return h;
}

static metile_arg buf_arg(metile_buffer *b) { metile_arg a = {0}; a.kind = METILE_ARG_BUFFER; a.buffer = b; return a; }
static metile_arg i32_arg(int32_t v) { metile_arg a = {0}; a.kind = METILE_ARG_I32; a.i = v; return a; }
static metile_arg f32_arg(float v) { metile_arg a = {0}; a.kind = METILE_ARG_F32; a.f = v; return a; }

/* Out row = softmax(q . keys / sqrt(D)) @ values over `n` keys of stride D, in double. */
static void reference_row(const float *q, const float *keys, const float *values, int n, double *out) {
  double mx = -INFINITY, sum = 0, w;
  int j, c;
  for (c = 0; c < D; ++c) out[c] = 0;
  for (j = 0; j < n; ++j) {
    double dotp = 0;
    for (c = 0; c < D; ++c) dotp += (double)q[c] * keys[j * D + c];
    if (dotp / sqrt(D) > mx) mx = dotp / sqrt(D);
  }
  for (j = 0; j < n; ++j) {
    double dotp = 0;
    for (c = 0; c < D; ++c) dotp += (double)q[c] * keys[j * D + c];
    w = exp(dotp / sqrt(D) - mx);
    sum += w;
    for (c = 0; c < D; ++c) out[c] += w * values[j * D + c];
  }
  for (c = 0; c < D; ++c) out[c] /= sum;
}

static double worst_error(const float *got, const double *want) {
  double worst = 0, e;
  int c;
  for (c = 0; c < D; ++c) {
    e = fabs(got[c] - want[c]) / (1e-4 + 1e-4 * fabs(want[c]));
    if (e > worst) worst = e;
  }
  return worst;
}

static int run_flash(metile_device *dev, int causal) {
  enum { BH = 3, SEQ = 100 };
  metile_kernel *kernel = compile(dev, build_flash(causal));
  metile_buffer *bq, *bk, *bv, *bo;
  float *q = alloc(dev, &bq, BH * SEQ * D, 1), *k = alloc(dev, &bk, BH * SEQ * D, 1);
  float *v = alloc(dev, &bv, BH * SEQ * D, 1), *o = alloc(dev, &bo, BH * SEQ * D, 0);
  uint32_t grid[3] = {(SEQ + BM - 1) / BM, BH, 1};
  metile_arg args[6];
  double want[D], worst = 0, e;
  int h, r;
  args[0] = buf_arg(bq), args[1] = buf_arg(bk), args[2] = buf_arg(bv), args[3] = buf_arg(bo);
  args[4] = i32_arg(SEQ), args[5] = f32_arg((float)(LOG2E / sqrt(D)));
  CHECK(metile_kernel_launch(kernel, grid, args, 6));
  CHECK(metile_device_synchronize(dev));
  for (h = 0; h < BH; ++h)
    for (r = 0; r < SEQ; ++r) {
      size_t m = (size_t)h * SEQ * D;
      reference_row(q + m + r * D, k + m, v + m, causal ? r + 1 : SEQ, want);
      e = worst_error(o + m + r * D, want);
      if (e > worst) worst = e;
    }
  printf("flash attention (%s): %d heads x %d x %d, error %.3f of the tolerance, %s\n",
         causal ? "causal" : "full", BH, SEQ, D, worst, worst <= 1 ? "ok" : "MISMATCH");
  metile_buffer_release(bq), metile_buffer_release(bk), metile_buffer_release(bv);
  metile_buffer_release(bo), metile_kernel_release(kernel);
  return worst <= 1;
}

static int run_decode(metile_device *dev, int splits) {
  enum { BATCH = 2, SEQ = 300 };
  metile_kernel *partial = compile(dev, build_decode_partial()), *merge = compile(dev, build_decode_merge());
  metile_buffer *bq, *bk, *bv, *bo, *bacc, *bmax, *bsum;
  float *q = alloc(dev, &bq, BATCH * HEADS * D, 1), *k = alloc(dev, &bk, BATCH * KV_HEADS * SEQ * D, 1);
  float *v = alloc(dev, &bv, BATCH * KV_HEADS * SEQ * D, 1), *o = alloc(dev, &bo, BATCH * HEADS * D, 0);
  int chunk = ((SEQ + splits - 1) / splits + BN - 1) / BN * BN, b, h;
  uint32_t grid[3] = {BATCH * HEADS, 0, 1}, merge_grid[3] = {BATCH * HEADS, 1, 1};
  metile_arg args[9];
  double want[D], worst = 0, e;
  grid[1] = (uint32_t)splits;
  alloc(dev, &bacc, (size_t)BATCH * HEADS * splits * D, 0);
  alloc(dev, &bmax, (size_t)BATCH * HEADS * splits, 0);
  alloc(dev, &bsum, (size_t)BATCH * HEADS * splits, 0);
  args[0] = buf_arg(bq), args[1] = buf_arg(bk), args[2] = buf_arg(bv), args[3] = buf_arg(bacc);
  args[4] = buf_arg(bmax), args[5] = buf_arg(bsum), args[6] = i32_arg(SEQ), args[7] = i32_arg(chunk);
  args[8] = f32_arg((float)(LOG2E / sqrt(D)));
  CHECK(metile_kernel_launch(partial, grid, args, 9));
  args[0] = buf_arg(bacc), args[1] = buf_arg(bmax), args[2] = buf_arg(bsum), args[3] = buf_arg(bo);
  args[4] = i32_arg(splits);
  CHECK(metile_kernel_launch(merge, merge_grid, args, 5));
  CHECK(metile_device_synchronize(dev));
  for (b = 0; b < BATCH; ++b)
    for (h = 0; h < HEADS; ++h) {
      size_t kv = ((size_t)b * KV_HEADS + h / (HEADS / KV_HEADS)) * SEQ * D;
      reference_row(q + (b * HEADS + h) * D, k + kv, v + kv, SEQ, want);
      e = worst_error(o + (b * HEADS + h) * D, want);
      if (e > worst) worst = e;
    }
  printf("decode attention: batch %d, heads %d/%d, cache %d, %d splits, error %.3f of the tolerance, %s\n",
         BATCH, HEADS, KV_HEADS, SEQ, splits, worst, worst <= 1 ? "ok" : "MISMATCH");
  metile_buffer_release(bq), metile_buffer_release(bk), metile_buffer_release(bv);
  metile_buffer_release(bo), metile_buffer_release(bacc), metile_buffer_release(bmax);
  metile_buffer_release(bsum), metile_kernel_release(partial), metile_kernel_release(merge);
  return worst <= 1;
}

int main(void) {
  metile_device *dev;
  int ok = 1;
  CHECK(metile_device_open(&dev, NULL));
  ok &= run_flash(dev, 0);
  ok &= run_flash(dev, 1);
  ok &= run_decode(dev, 1);
  ok &= run_decode(dev, SPLITS_P2);
  metile_device_release(dev);
  return ok ? 0 : 1;
}
