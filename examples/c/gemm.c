/* C = A @ B through the C API with tile_load / dot / tile_store and bounds, so sizes need not be
 * multiples of the blocks. A device that cannot run dot yet (the GPU paths) says so and the
 * example reports it instead of failing. */
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

enum { BM = 32, BN = 32, BK = 16, M = 200, N = 150, K = 77 };

static metile_program* build(void) {
  metile_type f32_ptr = {METILE_DTYPE_F32, 0, {0, 0}, 1, METILE_ADDRESS_SPACE_DEVICE};
  metile_type i32 = {METILE_DTYPE_I32, 0, {0, 0}, 0, METILE_ADDRESS_SPACE_DEVICE};
  int64_t acc_shape[2] = {BM, BN};
  metile_builder* b;
  metile_value A, B, C, m, n, k, pm, pn, bm, bn, row, col, fzero, acc0, zero, step, kk, acc, ta, tb, next, result;
  metile_program* program;
  CHECK(metile_builder_create(&b, "gemm"));
  CHECK(metile_builder_set_loc(b, __FILE__, __LINE__));
  CHECK(metile_builder_param(b, "A", &f32_ptr, &A));
  CHECK(metile_builder_param(b, "B", &f32_ptr, &B));
  CHECK(metile_builder_param(b, "C", &f32_ptr, &C));
  CHECK(metile_builder_param(b, "M", &i32, &m));
  CHECK(metile_builder_param(b, "N", &i32, &n));
  CHECK(metile_builder_param(b, "K", &i32, &k));
  CHECK(metile_builder_grid(b, METILE_OP_PROGRAM_ID, 0, &pm));
  CHECK(metile_builder_grid(b, METILE_OP_PROGRAM_ID, 1, &pn));
  CHECK(metile_builder_const_int(b, METILE_DTYPE_I32, BM, &bm));
  CHECK(metile_builder_const_int(b, METILE_DTYPE_I32, BN, &bn));
  CHECK(metile_builder_binary(b, METILE_OP_MUL, pm, bm, &row));
  CHECK(metile_builder_binary(b, METILE_OP_MUL, pn, bn, &col));
  CHECK(metile_builder_const_float(b, METILE_DTYPE_F32, 0.0, &fzero));
  CHECK(metile_builder_broadcast(b, fzero, 2, acc_shape, &acc0));
  CHECK(metile_builder_const_int(b, METILE_DTYPE_I32, 0, &zero));
  CHECK(metile_builder_const_int(b, METILE_DTYPE_I32, BK, &step));
  CHECK(metile_builder_for_begin(b, zero, k, step, &acc0, 1, &kk, &acc));
  CHECK(metile_builder_tile_load(b, A, row, kk, k, BM, BK, m, k, &ta));
  CHECK(metile_builder_tile_load(b, B, kk, col, n, BK, BN, k, n, &tb));
  CHECK(metile_builder_dot(b, ta, tb, acc, &next));
  CHECK(metile_builder_for_end(b, &next, 1, &result));
  CHECK(metile_builder_tile_store(b, C, row, col, n, result, m, n));
  CHECK(metile_builder_finish(b, &program));
  metile_builder_release(b);
  return program;
}

int main(void) {
  metile_program* program = build();
  metile_device* dev;
  metile_kernel* kernel;
  metile_buffer *ba, *bb, *bc;
  float *ha, *hb, *hc;
  uint32_t grid[3] = {(M + BM - 1) / BM, (N + BN - 1) / BN, 1};
  metile_arg args[6] = {{0}};
  metile_compile_options options;
  metile_status status;
  double worst = 0;
  int i, j, p;

  CHECK(metile_device_open(&dev, NULL));
  metile_compile_options_init(&options);
  options.allow_tf32 = 0; /* exact f32 so the check below can be tight */
  status = metile_kernel_compile(&kernel, dev, program, &options);
  if (status == METILE_ERROR_UNSUPPORTED) {
    printf("gemm: skipped: %s\n", metile_last_error());
    metile_program_release(program);
    metile_device_release(dev);
    return 0;
  }
  CHECK(status);
  CHECK(metile_buffer_alloc(&ba, dev, M * K * sizeof(float)));
  CHECK(metile_buffer_alloc(&bb, dev, K * N * sizeof(float)));
  CHECK(metile_buffer_alloc(&bc, dev, M * N * sizeof(float)));
  CHECK(metile_buffer_contents(ba, (void**)&ha));
  CHECK(metile_buffer_contents(bb, (void**)&hb));
  for (i = 0; i < M * K; ++i) ha[i] = (float)cos(i * 0.11);
  for (i = 0; i < K * N; ++i) hb[i] = (float)sin(i * 0.07);
  for (i = 0; i < 3; ++i) args[i].kind = METILE_ARG_BUFFER;
  args[0].buffer = ba;
  args[1].buffer = bb;
  args[2].buffer = bc;
  args[3].kind = args[4].kind = args[5].kind = METILE_ARG_I32;
  args[3].i = M;
  args[4].i = N;
  args[5].i = K;
  CHECK(metile_kernel_launch(kernel, grid, args, 6));
  CHECK(metile_device_synchronize(dev));
  CHECK(metile_buffer_contents(bc, (void**)&hc));
  for (i = 0; i < M; ++i)
    for (j = 0; j < N; ++j) {
      double want = 0, err;
      for (p = 0; p < K; ++p) want += (double)ha[i * K + p] * hb[p * N + j];
      /* |got - want| <= atol + rtol * |want|, reported as a fraction of the allowance */
      err = fabs(hc[i * N + j] - want) / (1e-4 + 1e-4 * fabs(want));
      if (err > worst) worst = err;
    }
  metile_buffer_release(ba);
  metile_buffer_release(bb);
  metile_buffer_release(bc);
  metile_kernel_release(kernel);
  metile_program_release(program);
  metile_device_release(dev);
  printf("gemm: %dx%dx%d, error %.2f of the tolerance, %s\n", M, N, K, worst, worst <= 1 ? "ok" : "MISMATCH");
  return worst <= 1 ? 0 : 1;
}
