/*
 * A fresh process that uses metile through its public C API only: opens a device, builds a small
 * kernel (Out[i] = X[i] * 3 + 1 over N elements, 256 per program), compiles it through the
 * compile cache, launches it once and checks the result; then does the same for a second kernel
 * (scale 5) to time a compile once the device's one-time setup is done. Used by the
 * cross-process cache test and by the cold/warm benchmark.
 *
 *   metile_cache_driver <device> [hit|miss]
 *
 * Prints one line of key=value pairs (from_cache, open_ms, build_ms, compile_ms, launch_ms,
 * total_ms: open + build + compile + launch of the first kernel, second_compile_ms, disk_hits,
 * misses). Exit status: 0 ok, 1 a metile call failed, 2 wrong results,
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

static metile_program* build_program(double scale) {
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
  CHECK(metile_builder_const_float(b, METILE_DTYPE_F32, scale, &three));
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

/* Launches `k` on X[i] = i / 2 and counts the elements that differ from X * scale + 1. */
static int run_and_check(metile_device* dev, metile_kernel* k, float scale, double* launch_ms) {
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
  double t0 = now_ms();
  CHECK(metile_kernel_launch(k, grid, args, 3));
  CHECK(metile_device_synchronize(dev));
  *launch_ms = now_ms() - t0;
  int bad = 0;
  for (int i = 0; i < N; ++i)
    if (os[i] != xs[i] * scale + 1.0f) bad++;
  metile_buffer_release(xb);
  metile_buffer_release(ob);
  return bad;
}

static int from_cache(metile_kernel* k) {
  metile_kernel_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK(metile_kernel_get_info(k, &info));
  return info.from_cache;
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
  metile_program* prog = build_program(3.0);
  double t2 = now_ms();
  metile_kernel* k;
  CHECK(metile_kernel_compile(&k, dev, prog, NULL));
  double t3 = now_ms();
  double launch_ms, second_launch_ms;
  int bad = run_and_check(dev, k, 3.0f, &launch_ms);

  metile_program* prog2 = build_program(5.0);
  double t4 = now_ms();
  metile_kernel* k2;
  CHECK(metile_kernel_compile(&k2, dev, prog2, NULL));
  double t5 = now_ms();
  bad += run_and_check(dev, k2, 5.0f, &second_launch_ms);

  metile_cache_stats stats;
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK(metile_cache_get_stats(&stats));
  int cached = from_cache(k), cached2 = from_cache(k2);
  printf("from_cache=%d open_ms=%.3f build_ms=%.3f compile_ms=%.3f launch_ms=%.3f total_ms=%.3f "
         "second_compile_ms=%.3f disk_hits=%llu misses=%llu\n",
         cached, t1 - t0, t2 - t1, t3 - t2, launch_ms, (t3 - t0) + launch_ms, t5 - t4,
         (unsigned long long)stats.disk_hits, (unsigned long long)stats.misses);

  metile_kernel_release(k);
  metile_kernel_release(k2);
  metile_program_release(prog);
  metile_program_release(prog2);
  metile_device_release(dev);
  if (bad) {
    fprintf(stderr, "%d wrong results\n", bad);
    return 2;
  }
  if ((strcmp(expect, "hit") == 0 && !(cached && cached2)) ||
      (strcmp(expect, "miss") == 0 && (cached || cached2))) {
    fprintf(stderr, "expected cache %ss\n", expect);
    return 3;
  }
  return 0;
}
