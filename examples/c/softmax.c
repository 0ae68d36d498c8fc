/* Row softmax through the C API, written like the seed kernel: one program per row, three
 * loops over the columns (running max, sum of exponentials, normalized store), checked against
 * a double-precision reference. */
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

enum { BLOCK = 128, ROWS = 33, COLS = 1000 };

static metile_builder* b;
static metile_value X, Out, N, row_base, zero, step, neg_inf;

/* X[row, i + arange(BLOCK)] with masked lanes reading `other`. */
static metile_value load_cols(metile_value base, metile_value i, metile_value other,
                              metile_value* cols_out, metile_value* mask_out) {
  metile_value cols, mask, p, q, v;
  CHECK(metile_builder_arange(b, i, BLOCK, &cols));
  CHECK(metile_builder_binary(b, METILE_OP_LT, cols, N, &mask));
  CHECK(metile_builder_ptr_offset(b, base, row_base, &p));
  CHECK(metile_builder_ptr_offset(b, p, cols, &q));
  CHECK(metile_builder_load(b, q, mask, other, &v));
  if (cols_out) *cols_out = cols;
  if (mask_out) *mask_out = mask;
  return v;
}

static metile_program* build(void) {
  metile_type f32_ptr = {METILE_DTYPE_F32, 0, {0, 0}, 1, METILE_ADDRESS_SPACE_DEVICE};
  metile_type i32 = {METILE_DTYPE_I32, 0, {0, 0}, 0, METILE_ADDRESS_SPACE_DEVICE};
  int64_t shape[1] = {BLOCK};
  metile_value row, init, iv, carried, next, m_tile, m, s_tile, s, v, d, e, r, cols, mask, p, q, fzero;
  metile_program* program;
  CHECK(metile_builder_create(&b, "softmax"));
  CHECK(metile_builder_set_loc(b, __FILE__, __LINE__));
  CHECK(metile_builder_param(b, "X", &f32_ptr, &X));
  CHECK(metile_builder_param(b, "Out", &f32_ptr, &Out));
  CHECK(metile_builder_param(b, "N", &i32, &N));
  CHECK(metile_builder_grid(b, METILE_OP_PROGRAM_ID, 0, &row));
  CHECK(metile_builder_binary(b, METILE_OP_MUL, row, N, &row_base));
  CHECK(metile_builder_const_int(b, METILE_DTYPE_I32, 0, &zero));
  CHECK(metile_builder_const_int(b, METILE_DTYPE_I32, BLOCK, &step));
  CHECK(metile_builder_const_float(b, METILE_DTYPE_F32, -INFINITY, &neg_inf));
  CHECK(metile_builder_const_float(b, METILE_DTYPE_F32, 0.0, &fzero));

  /* pass 1: m = max over the row */
  CHECK(metile_builder_broadcast(b, neg_inf, 1, shape, &init));
  CHECK(metile_builder_for_begin(b, zero, N, step, &init, 1, &iv, &carried));
  v = load_cols(X, iv, neg_inf, NULL, NULL);
  CHECK(metile_builder_binary(b, METILE_OP_MAXIMUM, carried, v, &next));
  CHECK(metile_builder_for_end(b, &next, 1, &m_tile));
  CHECK(metile_builder_reduce(b, METILE_OP_REDUCE_MAX, m_tile, -1, &m));

  /* pass 2: s = sum of exp(x - m) */
  CHECK(metile_builder_broadcast(b, fzero, 1, shape, &init));
  CHECK(metile_builder_for_begin(b, zero, N, step, &init, 1, &iv, &carried));
  v = load_cols(X, iv, neg_inf, NULL, NULL);
  CHECK(metile_builder_binary(b, METILE_OP_SUB, v, m, &d));
  CHECK(metile_builder_unary(b, METILE_OP_EXP, d, &e));
  CHECK(metile_builder_binary(b, METILE_OP_ADD, carried, e, &next));
  CHECK(metile_builder_for_end(b, &next, 1, &s_tile));
  CHECK(metile_builder_reduce(b, METILE_OP_REDUCE_SUM, s_tile, -1, &s));

  /* pass 3: Out = exp(x - m) / s */
  CHECK(metile_builder_for_begin(b, zero, N, step, NULL, 0, &iv, NULL));
  v = load_cols(X, iv, 0, &cols, &mask);
  CHECK(metile_builder_binary(b, METILE_OP_SUB, v, m, &d));
  CHECK(metile_builder_unary(b, METILE_OP_EXP, d, &e));
  CHECK(metile_builder_binary(b, METILE_OP_DIV, e, s, &r));
  CHECK(metile_builder_ptr_offset(b, Out, row_base, &p));
  CHECK(metile_builder_ptr_offset(b, p, cols, &q));
  CHECK(metile_builder_store(b, q, r, mask));
  CHECK(metile_builder_for_end(b, NULL, 0, NULL));
  CHECK(metile_builder_finish(b, &program));
  metile_builder_release(b);
  return program;
}

int main(void) {
  metile_program* program = build();
  metile_device* dev;
  metile_kernel* kernel;
  metile_buffer *bx, *bo;
  float *hx, *ho;
  uint32_t grid[3] = {ROWS, 1, 1};
  metile_arg args[3] = {{0}};
  double worst = 0;
  int r, c;

  CHECK(metile_device_open(&dev, NULL));
  CHECK(metile_kernel_compile(&kernel, dev, program, NULL));
  CHECK(metile_buffer_alloc(&bx, dev, ROWS * COLS * sizeof(float)));
  CHECK(metile_buffer_alloc(&bo, dev, ROWS * COLS * sizeof(float)));
  CHECK(metile_buffer_contents(bx, (void**)&hx));
  for (r = 0; r < ROWS * COLS; ++r) hx[r] = (float)sin(r * 0.37) * 4.0f;
  args[0].kind = METILE_ARG_BUFFER;
  args[0].buffer = bx;
  args[1].kind = METILE_ARG_BUFFER;
  args[1].buffer = bo;
  args[2].kind = METILE_ARG_I32;
  args[2].i = COLS;
  CHECK(metile_kernel_launch(kernel, grid, args, 3));
  CHECK(metile_device_synchronize(dev));
  CHECK(metile_buffer_contents(bo, (void**)&ho));
  for (r = 0; r < ROWS; ++r) {
    double mx = -INFINITY, sum = 0;
    for (c = 0; c < COLS; ++c) mx = fmax(mx, hx[r * COLS + c]);
    for (c = 0; c < COLS; ++c) sum += exp(hx[r * COLS + c] - mx);
    for (c = 0; c < COLS; ++c) {
      double want = exp(hx[r * COLS + c] - mx) / sum;
      /* |got - want| <= atol + rtol * |want|, reported as a fraction of the allowance */
      double err = fabs(ho[r * COLS + c] - want) / (1e-5 + 1e-5 * fabs(want));
      if (err > worst) worst = err;
    }
  }
  metile_buffer_release(bx);
  metile_buffer_release(bo);
  metile_kernel_release(kernel);
  metile_program_release(program);
  metile_device_release(dev);
  printf("softmax: %dx%d, error %.2f of the tolerance, %s\n", ROWS, COLS, worst, worst <= 1 ? "ok" : "MISMATCH");
  return worst <= 1 ? 0 : 1;
}
