/* Vector add through the C API: build the program, compile it for the default device, launch it
 * over a size that is not a multiple of the block, check every element. */
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

enum { BLOCK = 256, N = 100000 };

int main(void) {
  metile_builder* b;
  metile_type f32_ptr = {METILE_DTYPE_F32, 0, {0, 0}, 1, METILE_ADDRESS_SPACE_DEVICE};
  metile_type i32 = {METILE_DTYPE_I32, 0, {0, 0}, 0, METILE_ADDRESS_SPACE_DEVICE};
  metile_value x, y, out, n, pid, block, start, offs, mask, px, py, po, vx, vy, sum;
  metile_program* program;
  metile_device* dev;
  metile_kernel* kernel;
  metile_buffer *bx, *by, *bo;
  float *hx, *hy, *ho;
  uint32_t grid[3] = {(N + BLOCK - 1) / BLOCK, 1, 1};
  metile_arg args[4] = {{0}};
  int i, bad = 0;

  CHECK(metile_builder_create(&b, "vector_add"));
  CHECK(metile_builder_set_loc(b, __FILE__, __LINE__));
  CHECK(metile_builder_param(b, "X", &f32_ptr, &x));
  CHECK(metile_builder_param(b, "Y", &f32_ptr, &y));
  CHECK(metile_builder_param(b, "Out", &f32_ptr, &out));
  CHECK(metile_builder_param(b, "N", &i32, &n));
  CHECK(metile_builder_grid(b, METILE_OP_PROGRAM_ID, 0, &pid));
  CHECK(metile_builder_const_int(b, METILE_DTYPE_I32, BLOCK, &block));
  CHECK(metile_builder_binary(b, METILE_OP_MUL, pid, block, &start));
  CHECK(metile_builder_arange(b, start, BLOCK, &offs));
  CHECK(metile_builder_binary(b, METILE_OP_LT, offs, n, &mask));
  CHECK(metile_builder_ptr_offset(b, x, offs, &px));
  CHECK(metile_builder_ptr_offset(b, y, offs, &py));
  CHECK(metile_builder_ptr_offset(b, out, offs, &po));
  CHECK(metile_builder_load(b, px, mask, 0, &vx));
  CHECK(metile_builder_load(b, py, mask, 0, &vy));
  CHECK(metile_builder_binary(b, METILE_OP_ADD, vx, vy, &sum));
  CHECK(metile_builder_store(b, po, sum, mask));
  CHECK(metile_builder_finish(b, &program));
  metile_builder_release(b);

  CHECK(metile_device_open(&dev, NULL));
  CHECK(metile_kernel_compile(&kernel, dev, program, NULL));
  CHECK(metile_buffer_alloc(&bx, dev, N * sizeof(float)));
  CHECK(metile_buffer_alloc(&by, dev, N * sizeof(float)));
  CHECK(metile_buffer_alloc(&bo, dev, N * sizeof(float)));
  CHECK(metile_buffer_contents(bx, (void**)&hx));
  CHECK(metile_buffer_contents(by, (void**)&hy));
  for (i = 0; i < N; ++i) {
    hx[i] = (float)i * 0.5f;
    hy[i] = (float)(N - i);
  }
  args[0].kind = METILE_ARG_BUFFER;
  args[0].buffer = bx;
  args[1].kind = METILE_ARG_BUFFER;
  args[1].buffer = by;
  args[2].kind = METILE_ARG_BUFFER;
  args[2].buffer = bo;
  args[3].kind = METILE_ARG_I32;
  args[3].i = N;
  CHECK(metile_kernel_launch(kernel, grid, args, 4));
  CHECK(metile_device_synchronize(dev));
  CHECK(metile_buffer_contents(bo, (void**)&ho));
  for (i = 0; i < N; ++i)
    if (ho[i] != hx[i] + hy[i] && bad++ < 5) fprintf(stderr, "out[%d] = %g, want %g\n", i, ho[i], hx[i] + hy[i]);

  metile_buffer_release(bx);
  metile_buffer_release(by);
  metile_buffer_release(bo);
  metile_kernel_release(kernel);
  metile_program_release(program);
  metile_device_release(dev);
  printf("vector_add: %d elements, %s\n", N, bad ? "MISMATCH" : "ok");
  return bad ? 1 : 0;
}
