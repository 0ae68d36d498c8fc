/*
 * A fresh process that uses metile through its public C API only: opens a device, builds a small
 * kernel (Out[i] = X[i] * 3 + 1 over N elements, 256 per program), compiles it through the
 * compile cache, launches it once and checks the result. Used by the cross-process cache test
 * and by the cold/warm benchmark.
 *
 *   metile_cache_driver <device> [hit|miss]
 *
 * Prints one line of key=value pairs (from_cache, open_ms, build_ms, compile_ms, launch_ms,
 * total_ms, disk_hits, misses). Exit status: 0 ok, 1 a metile call failed, 2 wrong results,
 * 3 the kernel was (not) loaded from the cache although `hit` (`miss`) was expected.
 */
#include <metile/metile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 1000

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define CHECK(call)                                                            \
  do {                                                                         \
    metile_status st_ = (call);                                                \
    if (st_ != METILE_OK) {                                                    \
      fprintf(stderr, "%s failed: %s: %s\n", #call, metile_status_name(st_), \
              metile_last_error());                                            \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static metile_program* build_program(void) {
  metile_builder* b;
  CHECK(metile_builder_create(&b, "cache_driver_axpb"));
  metile_type fptr = {METILE_DTYPE_F32, 0, {0, 0}, 1, METILE_ADDRESS_SPACE_DEVICE};
  metile_type i32 = {METILE_DTYPE_I32, 0, {0, 0}, 0, METILE_ADDRESS_SPACE_DEVICE};
  metile_value x, out, n, pid, block, base, range, offs, mask, xv, three, one, prod, y, xp, op;
  CHECK(metile_builder_param(b, "X", &fptr, &x));
  CHECK(metile_builder_param(b, "Out", &fptr, &out));
  CHECK(metile_builder_param(b, "N", &i32, &n));
  CHECK(metile_builder_grid(b, METILE_OP_PROGRAM_ID, 0, &pid));
  CHECK(metile_builder_const_int(b, METILE_DTYPE_I32, 256, &block));
  CHECK(metile_builder_binary(b, METILE_OP_MUL, pid, block, &base));
  CHECK(metile_builder_arange(b, 0, 256, &range));
  CHECK(metile_builder_binary(b, METILE_OP_ADD, base, range, &offs));
  CHECK(metile_builder_binary(b, METILE_OP_LT, offs, n, &mask));
  CHECK(metile_builder_ptr_offset(b, x, offs, &xp));
  CHECK(metile_builder_load(b, xp, mask, 0, &xv));
  CHECK(metile_builder_const_float(b, METILE_DTYPE_F32, 3.0, &three));
  CHECK(metile_builder_const_float(b, METILE_DTYPE_F32, 1.0, &one));
  CHECK(metile_builder_binary(b, METILE_OP_MUL, xv, three, &prod));
  CHECK(metile_builder_binary(b, METILE_OP_ADD, prod, one, &y));
  CHECK(metile_builder_ptr_offset(b, out, offs, &op));
  CHECK(metile_builder_store(b, op, y, mask));
  metile_program* p;
  CHECK(metile_builder_finish(b, &p));
  CHECK(metile_builder_release(b));
  return p;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s <device> [hit|miss]\n", argv[0]);
    return 1;
  }
  const char* expect = argc == 3 ? argv[2] : "";
  double t0 = now_ms();
  metile_device* dev;
  CHECK(metile_device_open(&dev, argv[1]));
  double t1 = now_ms();
  metile_program* prog = build_program();
  double t2 = now_ms();
  metile_kernel* k;
  CHECK(metile_kernel_compile(&k, dev, prog, NULL));
  double t3 = now_ms();

  metile_buffer *xb, *ob;
  CHECK(metile_buffer_alloc(&xb, dev, N * sizeof(float)));
  CHECK(metile_buffer_alloc(&ob, dev, N * sizeof(float)));
  float *xs, *os;
  CHECK(metile_buffer_contents(xb, (void**)&xs));
  CHECK(metile_buffer_contents(ob, (void**)&os));
  for (int i = 0; i < N; ++i) xs[i] = (float)i * 0.5f;
  metile_arg args[3];
  memset(args, 0, sizeof args);
  args[0].kind = METILE_ARG_BUFFER;
  args[0].buffer = xb;
  args[1].kind = METILE_ARG_BUFFER;
  args[1].buffer = ob;
  args[2].kind = METILE_ARG_I32;
  args[2].i = N;
  uint32_t grid[3] = {(N + 255) / 256, 1, 1};
  double t4 = now_ms();
  CHECK(metile_kernel_launch(k, grid, args, 3));
  CHECK(metile_device_synchronize(dev));
  double t5 = now_ms();

  int bad = 0;
  for (int i = 0; i < N; ++i)
    if (os[i] != xs[i] * 3.0f + 1.0f) bad++;
  metile_kernel_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK(metile_kernel_get_info(k, &info));
  metile_cache_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK(metile_cache_get_stats(&stats));
  printf("from_cache=%d open_ms=%.3f build_ms=%.3f compile_ms=%.3f launch_ms=%.3f total_ms=%.3f "
         "disk_hits=%llu misses=%llu\n",
         info.from_cache, t1 - t0, t2 - t1, t3 - t2, t5 - t4, (t3 - t0) + (t5 - t4),
         (unsigned long long)stats.disk_hits, (unsigned long long)stats.misses);

  metile_buffer_release(xb);
  metile_buffer_release(ob);
  metile_kernel_release(k);
  metile_program_release(prog);
  metile_device_release(dev);
  if (bad) {
    fprintf(stderr, "%d wrong results\n", bad);
    return 2;
  }
  if ((strcmp(expect, "hit") == 0 && !info.from_cache) ||
      (strcmp(expect, "miss") == 0 && info.from_cache)) {
    fprintf(stderr, "expected a cache %s\n", expect);
    return 3;
  }
  return 0;
}
