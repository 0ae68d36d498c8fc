/*
 * hello.c: the smallest metile program, in C99.
 *
 * Prints the library version and the devices usable on this machine, builds a tiny kernel
 * (y[i] = alpha * x[i] for i < n) with the builder API and prints its Tile IR, then, when the
 * default device opens ($METILE_DEVICE, else metal, cuda, cpu, else interp), compiles the kernel
 * for it, runs it on 1000 elements and checks the result.
 *
 *   cc -std=c99 hello.c $(pkg-config --cflags --libs metile) -o hello && ./hello
 */
#include <metile/metile.h>

#include <stdio.h>
#include <string.h>

enum { BLOCK = 128 };

/* Reports a failed call; returns 1 on failure so callers can write `if (failed(...))`. */
static int failed(metile_status status, const char *what) {
  if (status == METILE_OK) return 0;
  fprintf(stderr, "hello: %s failed: %s: %s\n", what, metile_status_name(status),
          metile_last_error());
  return 1;
}

static metile_type scalar_type(metile_dtype dtype, int32_t is_pointer) {
  metile_type t = {METILE_DTYPE_INVALID, 0, {0, 0}, 0, METILE_ADDRESS_SPACE_DEVICE};
  t.dtype = dtype;
  t.is_pointer = is_pointer;
  return t;
}

/* The kernel `scale`: each program instance handles BLOCK elements, masked at the end. */
static metile_status build_scale(metile_program **out) {
  metile_builder *b = NULL;
  metile_type f32_ptr = scalar_type(METILE_DTYPE_F32, 1);
  metile_type f32 = scalar_type(METILE_DTYPE_F32, 0);
  metile_type i32 = scalar_type(METILE_DTYPE_I32, 0);
  metile_value x, y, alpha, n, pid, block, base, lanes, offs, mask, xs, scaled, ptr;
  metile_status s = metile_builder_create(&b, "scale");
  if (s != METILE_OK) return s;
  if ((s = metile_builder_set_loc(b, "hello.c", __LINE__)) != METILE_OK ||
      (s = metile_builder_param(b, "X", &f32_ptr, &x)) != METILE_OK ||
      (s = metile_builder_param(b, "Y", &f32_ptr, &y)) != METILE_OK ||
      (s = metile_builder_param(b, "alpha", &f32, &alpha)) != METILE_OK ||
      (s = metile_builder_param(b, "n", &i32, &n)) != METILE_OK ||
      (s = metile_builder_set_constexpr(b, "BLOCK", "128")) != METILE_OK ||
      (s = metile_builder_grid(b, METILE_OP_PROGRAM_ID, 0, &pid)) != METILE_OK ||
      (s = metile_builder_const_int(b, METILE_DTYPE_I32, BLOCK, &block)) != METILE_OK ||
      (s = metile_builder_binary(b, METILE_OP_MUL, pid, block, &base)) != METILE_OK ||
      (s = metile_builder_arange(b, 0, BLOCK, &lanes)) != METILE_OK ||
      (s = metile_builder_binary(b, METILE_OP_ADD, base, lanes, &offs)) != METILE_OK ||
      (s = metile_builder_binary(b, METILE_OP_LT, offs, n, &mask)) != METILE_OK ||
      (s = metile_builder_ptr_offset(b, x, offs, &ptr)) != METILE_OK ||
      (s = metile_builder_load(b, ptr, mask, 0, &xs)) != METILE_OK ||
      (s = metile_builder_binary(b, METILE_OP_MUL, alpha, xs, &scaled)) != METILE_OK ||
      (s = metile_builder_ptr_offset(b, y, offs, &ptr)) != METILE_OK ||
      (s = metile_builder_store(b, ptr, scaled, mask)) != METILE_OK ||
      (s = metile_builder_finish(b, out)) != METILE_OK) {
    /* Keep the builder's message: releasing succeeds and would not clear it anyway. */
    metile_builder_release(b);
    return s;
  }
  return metile_builder_release(b);
}

/* Opens the default device, compiles `program` for it and runs it on N elements, checking the
 * result. A machine without a usable device is not an error for this example: it says why. */
static int run_on_default_device(const metile_program *program) {
  enum { N = 1000 };
  const float alpha = 2.5f;
  metile_device *device = NULL;
  metile_kernel *kernel = NULL;
  metile_buffer *x = NULL, *y = NULL;
  metile_device_info info;
  metile_kernel_info kinfo;
  metile_arg args[4];
  uint32_t grid[3] = {(N + BLOCK - 1) / BLOCK, 1, 1};
  float *xs = NULL, *ys = NULL;
  int i, wrong = 0, rc = 1;
  metile_status s = metile_device_open(&device, NULL);
  if (s != METILE_OK) {
    printf("default device: none (%s: %s)\n", metile_status_name(s), metile_last_error());
    return 0;
  }
  info.struct_size = sizeof info;
  kinfo.struct_size = sizeof kinfo;
  if (failed(metile_device_get_info(device, &info), "metile_device_get_info")) goto done;
  printf("default device: %s (%s, %s)\n", info.name, info.description, info.architecture);
  s = metile_kernel_compile(&kernel, device, program, NULL);
  if (s == METILE_ERROR_UNSUPPORTED) {
    /* A valid program this device cannot run yet: reported, not a failure of the example. */
    printf("%s cannot run scale yet: %s\n", info.name, metile_last_error());
    rc = 0;
    goto done;
  }
  if (failed(s, "metile_kernel_compile") ||
      failed(metile_kernel_get_info(kernel, &kinfo), "metile_kernel_get_info"))
    goto done;
  printf("compiled %s for %s: %d threads per group, %.3f s%s\n", metile_program_name(program),
         info.name, (int)kinfo.threads_per_group, kinfo.compile_seconds,
         kinfo.from_cache ? " (from the cache)" : "");

  if (failed(metile_buffer_alloc(&x, device, N * sizeof(float)), "metile_buffer_alloc") ||
      failed(metile_buffer_alloc(&y, device, N * sizeof(float)), "metile_buffer_alloc") ||
      failed(metile_buffer_contents(x, (void **)&xs), "metile_buffer_contents") ||
      failed(metile_buffer_contents(y, (void **)&ys), "metile_buffer_contents"))
    goto done;
  for (i = 0; i < N; ++i) xs[i] = 0.5f * (float)i - 100.0f;

  memset(args, 0, sizeof args);
  args[0].kind = METILE_ARG_BUFFER;
  args[0].buffer = x;
  args[1].kind = METILE_ARG_BUFFER;
  args[1].buffer = y;
  args[2].kind = METILE_ARG_F32;
  args[2].f = alpha;
  args[3].kind = METILE_ARG_I32;
  args[3].i = N;
  if (failed(metile_kernel_launch(kernel, grid, args, 4), "metile_kernel_launch") ||
      failed(metile_device_synchronize(device), "metile_device_synchronize"))
    goto done;
  /* One correctly rounded f32 multiply per element: every device gives exactly this. */
  for (i = 0; i < N; ++i)
    if (ys[i] != alpha * xs[i]) ++wrong;
  printf("ran scale on %d elements in %u programs: %s\n", N, (unsigned)grid[0],
         wrong ? "WRONG RESULTS" : "results match the host");
  if (wrong) fprintf(stderr, "hello: %d of %d results differ from the host's\n", wrong, N);
  rc = wrong ? 1 : 0;
done:
  metile_buffer_release(x);
  metile_buffer_release(y);
  metile_kernel_release(kernel);
  metile_device_release(device);
  return rc;
}

int main(void) {
  char *devices = NULL;
  char *text = NULL;
  metile_program *program = NULL;
  int rc = 1;

  printf("metile %s (header %d.%d.%d)\n", metile_version_string(), METILE_VERSION_MAJOR,
         METILE_VERSION_MINOR, METILE_VERSION_PATCH);
  if (metile_version() / 10000 != METILE_VERSION_MAJOR) {
    fprintf(stderr, "hello: library major version %u does not match the header's %d\n",
            (unsigned)(metile_version() / 10000), METILE_VERSION_MAJOR);
    return 1;
  }

  if (failed(metile_devices_available(&devices), "metile_devices_available")) return 1;
  printf("devices: %s\n", devices[0] ? devices : "(none)");
  metile_free(devices);

  if (failed(build_scale(&program), "building the kernel")) return 1;
  if (failed(metile_program_print(program, &text), "metile_program_print")) goto done;
  printf("%s", text);
  metile_free(text);

  rc = run_on_default_device(program);
done:
  metile_program_release(program);
  return rc;
}
