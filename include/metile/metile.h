/**
 * \file metile.h
 * The stable C ABI of metile, a tile-kernel compiler and runtime.
 *
 * Conventions (fixed for the life of a major version):
 * - Every fallible call returns a ::metile_status; 0 (METILE_OK) means success. On failure a
 *   message naming the subsystem (and, for program errors, the user's source location) is stored
 *   per thread and read with metile_last_error(). Output parameters come first and are written
 *   only on success.
 * - Handles are opaque. Each has a `_release`; shared ones (device, program, kernel, buffer) also
 *   have `_retain`. NULL, released or foreign handles give METILE_ERROR_INVALID_ARGUMENT, never a
 *   crash (releasing NULL is a no-op that returns METILE_OK).
 * - Strings the library returns through `char **` are owned by the caller and freed with
 *   metile_free(). `const char *` returns are owned by the library (see each call for lifetime).
 * - Option structs start with `struct_size`; set it to sizeof(the struct) (the `_init` functions
 *   do) so the struct can grow without breaking callers.
 * - Thread safety: every call may be made from any thread. Builders and prepared launches are
 *   single-owner objects: one thread at a time per handle. Devices, programs, kernels and buffers
 *   may be used from many threads at once (buffer *contents* are the caller's to synchronize).
 * - No call aborts, exits or lets a C++ exception escape.
 */
#ifndef METILE_METILE_H
#define METILE_METILE_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(METILE_BUILDING_LIBRARY)
#    define METILE_API __declspec(dllexport)
#  else
#    define METILE_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define METILE_API __attribute__((visibility("default")))
#else
#  define METILE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/** \name Version */
/* ------------------------------------------------------------------------------------------ */

#define METILE_VERSION_MAJOR 0
#define METILE_VERSION_MINOR 1
#define METILE_VERSION_PATCH 0
/** MAJOR*10000 + MINOR*100 + PATCH, as metile_version() returns it. */
#define METILE_VERSION_NUMBER \
  (METILE_VERSION_MAJOR * 10000 + METILE_VERSION_MINOR * 100 + METILE_VERSION_PATCH)

/** The runtime library's version number (compare with METILE_VERSION_NUMBER). */
METILE_API uint32_t metile_version(void);
/** The runtime library's version as "MAJOR.MINOR.PATCH"; static storage. */
METILE_API const char *metile_version_string(void);

/* ------------------------------------------------------------------------------------------ */
/** \name Status and errors */
/* ------------------------------------------------------------------------------------------ */

/** Result of every fallible call. Values are pinned forever. */
typedef enum metile_status {
  METILE_OK = 0,
  /** A bad argument: NULL/released/foreign handle, out-of-range value, wrong launch args. */
  METILE_ERROR_INVALID_ARGUMENT = 1,
  /** The program is ill-formed: verifier or text-parse error (message has file:line). */
  METILE_ERROR_INVALID_PROGRAM = 2,
  /** A backend compiler failed; the message carries its log. */
  METILE_ERROR_COMPILE = 3,
  /** A valid program uses something this device cannot run yet; the message names both. */
  METILE_ERROR_UNSUPPORTED = 4,
  /** The device cannot start here (no driver, no compiler, wrong OS); the message says why. */
  METILE_ERROR_DEVICE_UNAVAILABLE = 5,
  /** A launch or device operation failed at run time (e.g. out-of-bounds access on interp). */
  METILE_ERROR_DEVICE = 6,
  /** An allocation failed. */
  METILE_ERROR_OUT_OF_MEMORY = 7,
  /** A file-system operation failed. */
  METILE_ERROR_IO = 8,
  /** A bug in metile; please report it with the message. */
  METILE_ERROR_INTERNAL = 9,
  METILE_STATUS_FORCE32 = 0x7fffffff
} metile_status;

/** "METILE_OK", "METILE_ERROR_INVALID_ARGUMENT", ...; "METILE_STATUS_UNKNOWN" otherwise. Static. */
METILE_API const char *metile_status_name(metile_status status);

/**
 * The message of the last failed call on this thread; "" if none. Never NULL. Valid until the
 * next metile call on this thread. A successful call does not clear it.
 */
METILE_API const char *metile_last_error(void);

/** Frees a string or array the library returned through an out-parameter. NULL is fine. */
METILE_API void metile_free(void *ptr);

/* ------------------------------------------------------------------------------------------ */
/** \name Element types */
/* ------------------------------------------------------------------------------------------ */

typedef enum metile_dtype {
  METILE_DTYPE_INVALID = 0,
  METILE_DTYPE_F32 = 1,
  METILE_DTYPE_F16 = 2,
  METILE_DTYPE_BF16 = 3,
  METILE_DTYPE_I32 = 4,
  METILE_DTYPE_U32 = 5,
  METILE_DTYPE_I64 = 6,
  METILE_DTYPE_BOOL = 7, /**< one byte: any non-zero byte loads as true; stores write 0 or 1 */
  METILE_DTYPE_I8 = 8,
  METILE_DTYPE_U8 = 9,
  /** FP8 E4M3 "fn": 1 sign, 4 exponent (bias 7), 3 mantissa bits; finite (max 448), NaN only as
   * S.1111.111. A storage type: load, store, cast and select it; arithmetic casts to f32 first. */
  METILE_DTYPE_F8E4M3 = 10,
  /** FP8 E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like (infinities, NaNs; max
   * 57344). A storage type like METILE_DTYPE_F8E4M3. Casts to either FP8 type round to nearest
   * even and saturate finite overflow to the largest finite value (docs/semantics.md). */
  METILE_DTYPE_F8E5M2 = 11,
  METILE_DTYPE_FORCE32 = 0x7fffffff
} metile_dtype;

/** Size in bytes of one element; 0 for an invalid dtype. */
METILE_API size_t metile_dtype_size(metile_dtype dtype);
/** "f32", "f16", "bf16", "i32", "u32", "i64", "bool", "i8", "u8", "f8e4m3", "f8e5m2"; "invalid"
 * otherwise. Static. */
METILE_API const char *metile_dtype_name(metile_dtype dtype);

typedef enum metile_address_space {
  METILE_ADDRESS_SPACE_DEVICE = 0,
  METILE_ADDRESS_SPACE_THREADGROUP = 1,
  METILE_ADDRESS_SPACE_FORCE32 = 0x7fffffff
} metile_address_space;

/**
 * The type of a value: a scalar (rank 0) or a 1-D/2-D tile of `dtype`, or, when `is_pointer`,
 * a pointer (or tile of pointers) to `dtype` elements in `address_space`.
 */
typedef struct metile_type {
  metile_dtype dtype;
  int32_t rank;     /**< 0, 1 or 2 */
  int64_t shape[2]; /**< the first `rank` entries are used */
  int32_t is_pointer;
  metile_address_space address_space;
} metile_type;

/**
 * Initializers (webgpu.h style): `metile_type t = METILE_TYPE_INIT(METILE_DTYPE_F32);` is an f32
 * scalar, METILE_POINTER_TYPE_INIT a pointer to `dtype` in device memory. Every struct below has
 * one: METILE_<STRUCT>_INIT fills struct_size and the documented defaults.
 */
#define METILE_TYPE_INIT(dtype) {(dtype), 0, {0, 0}, 0, METILE_ADDRESS_SPACE_DEVICE}
#define METILE_POINTER_TYPE_INIT(dtype) {(dtype), 0, {0, 0}, 1, METILE_ADDRESS_SPACE_DEVICE}

/* ------------------------------------------------------------------------------------------ */
/** \name Devices */
/* ------------------------------------------------------------------------------------------ */

typedef struct metile_device metile_device;

/**
 * Opens a device by name: "interp", "cpu", "metal", "metal-sim" or "cuda". NULL or "" opens the
 * default: $METILE_DEVICE, else metal, else cuda, else cpu. A GPU other than the first is named
 * by its index: "cuda:1" ("cuda" and "cuda:0" are the same device). Opening the same name twice
 * returns the same underlying device (retained). METILE_ERROR_DEVICE_UNAVAILABLE says why a
 * device cannot start (for "cuda:N" past the last GPU it names N and the number of GPUs);
 * METILE_ERROR_INVALID_ARGUMENT for an unknown name, or an index on a device without one.
 */
METILE_API metile_status metile_device_open(metile_device **out, const char *name);
METILE_API metile_status metile_device_retain(metile_device *device);
METILE_API metile_status metile_device_release(metile_device *device);

/**
 * Writes a newly allocated comma-separated list of the device names usable on this machine
 * (probed; e.g. "interp,cpu,metal-sim") to *out. Free with metile_free().
 */
METILE_API metile_status metile_devices_available(char **out);

/**
 * Writes to *out how many devices of the kind `name` this machine has: for "cuda", the GPUs the
 * driver reports (cuda:0 to cuda:N-1, each opened by metile_device_open(&d, "cuda:1") and so
 * on); for a kind without indices, 1 when it can start here. 0 when the kind cannot start here
 * (no driver, no GPU, no compiler). METILE_ERROR_INVALID_ARGUMENT for NULL, an unknown name or a
 * name with an index ("cuda:1").
 */
METILE_API metile_status metile_device_count(const char *name, int32_t *out);

/** Device properties. Strings point into the device and live as long as it. */
typedef struct metile_device_info {
  size_t struct_size;
  const char *name;          /**< "cpu", "cuda", ... */
  const char *description;   /**< e.g. the GPU's or CPU's model name */
  const char *architecture;  /**< e.g. "sm_90", "apple8", "x86_64" */
  int32_t simd_width;        /**< 32 on GPUs, 1 on interp/cpu */
  int32_t max_threads_per_group;
  uint64_t threadgroup_memory_bytes;
  int32_t unified_memory;    /**< host and device address the same buffers */
  int32_t asynchronous;      /**< launches return before the work is done */
  /** The GPU's index on devices chosen by one ("cuda:N", the N), else 0. A caller's struct
   * that ends before this field (an older header's) is filled up to its end. */
  int32_t ordinal;
} metile_device_info;
#define METILE_DEVICE_INFO_INIT {sizeof(metile_device_info), 0, 0, 0, 0, 0, 0, 0, 0, 0}

METILE_API metile_status metile_device_get_info(const metile_device *device,
                                                metile_device_info *out);
/**
 * Waits until every launch issued on this device so far has finished. On cuda, when a launch
 * waited for has a time limit (metile_launch_options.timeout_s, METILE_TIMEOUT_S) and runs past
 * it, or metile_cancel_launches stopped it, METILE_ERROR_DEVICE names the kernel and the reason
 * (see metile_launch_options); nothing is reset. Only a kernel that did not answer within 1 s of
 * being asked (or answered but did not end within 30 s) ends by a reset of the GPU's primary context, which the error then says. The
 * device stays usable: later compiles and launches work, kernels compiled before are reloaded
 * at their next launch, but every buffer allocated or imported before the reset (its memory is
 * gone) and every stream and event created before it are invalid: using one is
 * METILE_ERROR_INVALID_ARGUMENT saying so.
 */
METILE_API metile_status metile_device_synchronize(metile_device *device);

/**
 * \name Ordering with other libraries' CUDA streams (the DLPack stream protocol)
 * A stream is a `CUstream` as an integer; 0 and 1 name the legacy default stream, 2 the
 * per-thread default stream (the values DLPack's `stream=` uses). On devices without streams
 * (interp, cpu, metal-sim) launches finish before they return: metile_device_stream() gives 0,
 * wait is a no-op and signal synchronizes.
 * @{
 */
/** The stream this device queues its launches on (0 when it has none). */
METILE_API metile_status metile_device_stream(metile_device *device, uint64_t *out);
/**
 * Launches issued from now on wait for the work queued on `stream` so far. Call it after
 * importing a tensor (metile_buffer_from_dlpack*) that a producer writes on `stream`.
 */
METILE_API metile_status metile_device_wait_stream(metile_device *device, uint64_t stream);
/**
 * Work queued on `stream` from now on waits for the launches issued so far. Call it before a
 * consumer on `stream` reads an exported buffer (metile_buffer_to_dlpack*).
 */
METILE_API metile_status metile_device_signal_stream(metile_device *device, uint64_t stream);
/**
 * A new stream of the device's (non-blocking on cuda: it does not wait for the legacy default
 * stream), as an integer usable wherever a stream is taken here. Launches queue on it through
 * metile_launch_options.stream. On devices without streams it is a token that launches accept
 * and ignore (each launch finishes before it returns). Destroy it with metile_stream_destroy().
 */
METILE_API metile_status metile_stream_create(metile_device *device, uint64_t *out);
/** Destroys a stream from metile_stream_create(); work queued on it still completes. */
METILE_API metile_status metile_stream_destroy(metile_device *device, uint64_t stream);
/** @} */

/**
 * \name Events: timing and waiting on a point in a device's queue (torch.cuda.Event's model)
 * On cuda an event is a CUevent: record() marks the work queued so far on a stream, and the
 * elapsed time is measured by the GPU. On devices without streams record() waits for the
 * device's launches and reads the host's clock, so the time between two events is the host's
 * wall time between the two records (launches included, as they run before returning).
 * @{
 */
typedef struct metile_event metile_event;
METILE_API metile_status metile_event_create(metile_event **out, metile_device *device);
/** Marks the work queued so far on `stream` (0: the device's own stream). Re-recording moves it. */
METILE_API metile_status metile_event_record(metile_event *event, uint64_t stream);
/** Waits until the work the event marks is done (returns at once if never recorded). */
METILE_API metile_status metile_event_synchronize(metile_event *event);
/**
 * Milliseconds between two recorded events of the same device (waits for `end`). Events never
 * recorded, or of two devices: METILE_ERROR_INVALID_ARGUMENT.
 */
METILE_API metile_status metile_event_elapsed_ms(metile_event *start, metile_event *end,
                                                 double *out_ms);
METILE_API metile_status metile_event_release(metile_event *event);
/** @} */

/* ------------------------------------------------------------------------------------------ */
/** \name Buffers */
/* ------------------------------------------------------------------------------------------ */

typedef struct metile_buffer metile_buffer;

/** Allocates `bytes` (> 0) of zeroed memory that host and device both address. */
METILE_API metile_status metile_buffer_alloc(metile_buffer **out, metile_device *device,
                                             size_t bytes);

/**
 * Wraps caller memory. Where the device can address `host` directly (cpu and interp always;
 * metal when pointer and length are page-aligned), no copy is made and writes by kernels land in
 * the caller's memory; metile_buffer_shares_memory() then returns 1. Otherwise the bytes are
 * copied into a new buffer (shares_memory returns 0) and the caller must read results through
 * metile_buffer_contents(). The caller keeps `host` alive until the buffer is released.
 * `host + bytes` must stay inside the address space and `bytes` <= PTRDIFF_MAX (else
 * METILE_ERROR_INVALID_ARGUMENT).
 */
METILE_API metile_status metile_buffer_wrap(metile_buffer **out, metile_device *device,
                                            void *host, size_t bytes);
METILE_API metile_status metile_buffer_retain(metile_buffer *buffer);
METILE_API metile_status metile_buffer_release(metile_buffer *buffer);

/**
 * The host address of the buffer's memory. Does not synchronize: call
 * metile_device_synchronize() before reading what an asynchronous launch wrote.
 */
METILE_API metile_status metile_buffer_contents(metile_buffer *buffer, void **out);
METILE_API metile_status metile_buffer_size(const metile_buffer *buffer, size_t *out);
/** 1 when the buffer uses the memory given to metile_buffer_wrap() in place, else 0. */
METILE_API int32_t metile_buffer_shares_memory(const metile_buffer *buffer);

/**
 * Exports the buffer as a DLPack (v0.8 ABI) `DLManagedTensor *` of the given dtype and shape
 * (row-major, `ndim` <= 8). The shape's byte size is computed with overflow checks and must fit
 * the buffer (else METILE_ERROR_INVALID_ARGUMENT). The tensor keeps the buffer alive until its
 * deleter runs. cuda
 * buffers are exported as kDLCUDA device memory (managed memory is device memory; consumers such
 * as torch refuse kDLCUDAManaged), other devices' as kDLCPU. Nothing is synchronized: see
 * metile_device_signal_stream().
 */
METILE_API metile_status metile_buffer_to_dlpack(metile_buffer *buffer, metile_dtype dtype,
                                                 int32_t ndim, const int64_t *shape,
                                                 void **out_managed_tensor);
/**
 * Imports a DLPack `DLManagedTensor *` without a copy when the device can address its memory;
 * the tensor's deleter runs when the buffer is released. A strided view (non-NULL strides, any
 * order, none negative) becomes a buffer over the bytes from its first element to the end of
 * its last, which a kernel indexes with the strides its caller passes; NULL strides mean
 * compact row-major. On failure the tensor is left untouched (the caller still owns it). Every
 * field is checked before use, and a refusal is METILE_ERROR_INVALID_ARGUMENT naming the field:
 * ndim outside [0, 32], a NULL shape (ndim > 0), a negative dimension, a negative stride (of a
 * dimension longer than 1), a byte size or span that overflows 64 bits or exceeds PTRDIFF_MAX,
 * NULL data for a non-empty tensor, a `data + byte_offset + size` that runs past the address
 * space. An empty tensor (a zero dimension; data may be NULL) becomes a private one-byte
 * buffer.
 */
METILE_API metile_status metile_buffer_from_dlpack(metile_buffer **out, metile_device *device,
                                                   void *managed_tensor);
/** As metile_buffer_to_dlpack(), as a DLPack 1.0 `DLManagedTensorVersioned *` (flags 0). */
METILE_API metile_status metile_buffer_to_dlpack_versioned(metile_buffer *buffer,
                                                           metile_dtype dtype, int32_t ndim,
                                                           const int64_t *shape,
                                                           void **out_managed_tensor);
/**
 * As metile_buffer_from_dlpack(), for a `DLManagedTensorVersioned *` of ABI major version 1
 * (others: METILE_ERROR_UNSUPPORTED). A read-only tensor (DLPACK_FLAG_BITMASK_READ_ONLY) is
 * METILE_ERROR_INVALID_ARGUMENT: kernels may write any buffer. On failure the caller still owns
 * the tensor.
 */
METILE_API metile_status metile_buffer_from_dlpack_versioned(metile_buffer **out,
                                                             metile_device *device,
                                                             void *managed_tensor);
/**
 * For Python bindings: the `PyCapsule_Destructor` to give PyCapsule_New() for a capsule named
 * "dltensor" or "dltensor_versioned" holding a tensor from metile_buffer_to_dlpack*(). When the
 * capsule dies unconsumed (not renamed "used_..."), it runs the tensor's deleter, keeping any
 * exception the consumer left pending. It calls the CPython API (PyCapsule_IsValid,
 * PyCapsule_GetPointer, PyErr_Fetch, PyErr_Restore) found in the running process, so it must
 * only be called by a Python interpreter, with the GIL held; outside one it does nothing.
 */
METILE_API void metile_dlpack_capsule_destructor(void *capsule);

/* ------------------------------------------------------------------------------------------ */
/** \name Tile IR ops (pinned values; meaning: docs/semantics.md) */
/* ------------------------------------------------------------------------------------------ */

typedef enum metile_op {
  METILE_OP_INVALID = 0,
  METILE_OP_CONST = 1,
  METILE_OP_PROGRAM_ID = 2,
  METILE_OP_NUM_PROGRAMS = 3,
  METILE_OP_ARANGE = 4,
  METILE_OP_CAST = 5,
  METILE_OP_BROADCAST = 6,
  METILE_OP_RESHAPE = 7,
  METILE_OP_BITCAST = 8, /**< each element's bits as another dtype of the same width */
  /* binary element-wise; operands are promoted and broadcast by the builder */
  METILE_OP_ADD = 10,
  METILE_OP_SUB = 11,
  METILE_OP_MUL = 12,
  METILE_OP_DIV = 13,      /**< true division on floats, truncating on integers */
  METILE_OP_FLOORDIV = 14, /**< floor(a / b) */
  METILE_OP_MOD = 15,      /**< remainder with the sign of the dividend (C fmod / %) */
  METILE_OP_MAXIMUM = 16,
  METILE_OP_MINIMUM = 17,
  METILE_OP_BITAND = 18,
  METILE_OP_BITOR = 19,
  METILE_OP_BITXOR = 20,
  METILE_OP_SHL = 21,
  METILE_OP_SHR = 22, /**< arithmetic on signed, logical on unsigned */
  METILE_OP_POW = 23,
  /* comparisons; result is bool */
  METILE_OP_LT = 30,
  METILE_OP_LE = 31,
  METILE_OP_GT = 32,
  METILE_OP_GE = 33,
  METILE_OP_EQ = 34,
  METILE_OP_NE = 35,
  /* unary element-wise */
  METILE_OP_NEG = 40,
  METILE_OP_NOT = 41, /**< bitwise not; logical not on bool */
  METILE_OP_EXP = 42,
  METILE_OP_LOG = 43,
  METILE_OP_SQRT = 44,
  METILE_OP_RSQRT = 45,
  METILE_OP_ABS = 46,
  METILE_OP_TANH = 47,
  METILE_OP_SIN = 48,
  METILE_OP_COS = 49,
  METILE_OP_EXP2 = 50,
  METILE_OP_LOG2 = 51,
  METILE_OP_FLOOR = 52,
  METILE_OP_CEIL = 53,
  METILE_OP_ERF = 54,
  METILE_OP_SIGMOID = 55,
  METILE_OP_SELECT = 60,
  /* memory */
  METILE_OP_PTR_OFFSET = 70,
  METILE_OP_LOAD = 71,
  METILE_OP_STORE = 72,
  METILE_OP_TILE_LOAD = 73,
  METILE_OP_TILE_STORE = 74,
  METILE_OP_SHARED = 75,
  /* tile */
  METILE_OP_DOT = 80,
  METILE_OP_REDUCE_SUM = 81,
  METILE_OP_REDUCE_MAX = 82,
  METILE_OP_REDUCE_MIN = 83,
  /* structure */
  METILE_OP_FOR = 90,
  METILE_OP_YIELD = 91,
  METILE_OP_SIMDGROUP_ROLE = 92,
  METILE_OP_IF = 93,
  METILE_OP_WHILE = 94,
  /* SIMT view */
  METILE_OP_THREAD_ID = 100,
  METILE_OP_SIMD_LANE_ID = 101,
  METILE_OP_SIMD_SHUFFLE_XOR = 102,
  METILE_OP_SIMD_BROADCAST = 103,
  METILE_OP_BARRIER = 104,
  /* scheduling */
  METILE_OP_TILE_SWIZZLE = 110,

  METILE_OP_ATOMIC_ADD = 120,
  METILE_OP_ATOMIC_MAX = 121,
  METILE_OP_ATOMIC_MIN = 122,
  METILE_OP_ATOMIC_XCHG = 123,
  METILE_OP_ATOMIC_CAS = 124,
  /* Triton habits: scans, transpose, printing from the kernel */
  METILE_OP_CUMSUM = 130,
  METILE_OP_CUMPROD = 131,
  METILE_OP_TRANS = 132,
  METILE_OP_DEVICE_PRINT = 133,
  METILE_OP_FORCE32 = 0x7fffffff
} metile_op;

/** The op's text spelling ("add", "tile_load", ...); "invalid" for unknown values. Static. */
METILE_API const char *metile_op_name(metile_op op);

/* ------------------------------------------------------------------------------------------ */
/** \name Builder: constructs a Tile IR program */
/* ------------------------------------------------------------------------------------------ */

/** A value inside one builder; 0 means "none" (for optional operands). */
typedef uint32_t metile_value;

typedef struct metile_builder metile_builder;
typedef struct metile_program metile_program;

/** Starts a kernel named `name` (a C identifier). */
METILE_API metile_status metile_builder_create(metile_builder **out, const char *name);
METILE_API metile_status metile_builder_release(metile_builder *builder);

/**
 * Sets the source location attached to every op built from now on (sticky). `file` is copied.
 * Errors about those ops name "file:line".
 */
METILE_API metile_status metile_builder_set_loc(metile_builder *b, const char *file,
                                                int32_t line);
/** Records a compile-time constant the program was specialized with (for keys and signatures). */
METILE_API metile_status metile_builder_set_constexpr(metile_builder *b, const char *name,
                                                      const char *value);
/**
 * Fixes the thread count T of a kernel that uses the SIMT view (thread_id, shuffles, ...).
 * Without it, T is the unique arange size in the kernel; finish() fails if there is none.
 */
METILE_API metile_status metile_builder_set_num_threads(metile_builder *b, int32_t num_threads);

/** Declares the next parameter: a scalar or a (device) pointer; tiles are not parameters. */
METILE_API metile_status metile_builder_param(metile_builder *b, const char *name,
                                              const metile_type *type, metile_value *out);
/** The type of a value built so far. */
METILE_API metile_status metile_builder_value_type(const metile_builder *b, metile_value v,
                                                   metile_type *out);

METILE_API metile_status metile_builder_const_int(metile_builder *b, metile_dtype dtype,
                                                  int64_t value, metile_value *out);
METILE_API metile_status metile_builder_const_float(metile_builder *b, metile_dtype dtype,
                                                    double value, metile_value *out);
/** program_id (METILE_OP_PROGRAM_ID) or num_programs (METILE_OP_NUM_PROGRAMS) on axis 0..2. */
METILE_API metile_status metile_builder_grid(metile_builder *b, metile_op op, int32_t axis,
                                             metile_value *out);
/** `start + [0, size)` as an i32 tile; `start` is an integer scalar (0 = constant 0). */
METILE_API metile_status metile_builder_arange(metile_builder *b, metile_value start,
                                               int64_t size, metile_value *out);
METILE_API metile_status metile_builder_cast(metile_builder *b, metile_value x,
                                             metile_dtype dtype, metile_value *out);
/**
 * Reinterprets each element's bits as `dtype` (Triton's bitcast): the operand's dtype and `dtype`
 * have the same width (f32/i32/u32, f16/bf16, i8/u8/f8e4m3/f8e5m2; i64 alone); neither is bool,
 * the operand is no pointer. The same dtype returns `x`.
 */
METILE_API metile_status metile_builder_bitcast(metile_builder *b, metile_value x,
                                                metile_dtype dtype, metile_value *out);
/**
 * Broadcasts a scalar or a tile (along size-1 dimensions) to `shape`. A dimension of -1 is T, the
 * SIMT thread count (the shape of THREAD_ID's result), fixed later by the kernel's arange sizes,
 * metile_builder_set_num_threads or its BLOCK constexpr.
 */
METILE_API metile_status metile_builder_broadcast(metile_builder *b, metile_value x, int32_t rank,
                                                  const int64_t *shape, metile_value *out);
/** Same elements, row-major order kept, new shape of the same element count. */
METILE_API metile_status metile_builder_reshape(metile_builder *b, metile_value x, int32_t rank,
                                                const int64_t *shape, metile_value *out);
/**
 * Unary element-wise op (NEG ... SIGMOID). A float-only op (EXP ... SIGMOID except ABS) on an
 * integer or bool operand computes in f32: the cast to f32 appears in the program.
 */
METILE_API metile_status metile_builder_unary(metile_builder *b, metile_op op, metile_value x,
                                              metile_value *out);
/**
 * Binary element-wise op or comparison (ADD ... POW, LT ... NE). Operands are promoted (the
 * higher kind of bool < integer < float wins; within a kind a tile's dtype wins over a scalar's,
 * else the wider) and broadcast; the casts and broadcasts appear in the program.
 */
METILE_API metile_status metile_builder_binary(metile_builder *b, metile_op op, metile_value x,
                                               metile_value y, metile_value *out);
/** where(cond, x, y), promoted and broadcast like binary ops. */
METILE_API metile_status metile_builder_select(metile_builder *b, metile_value cond,
                                               metile_value x, metile_value y, metile_value *out);
/** `ptr + offsets`: a pointer, or a tile of pointers when `offsets` is a tile. */
METILE_API metile_status metile_builder_ptr_offset(metile_builder *b, metile_value ptr,
                                                   metile_value offsets, metile_value *out);
/** Reads via a pointer (tile); masked-off lanes touch no memory: inactive, or `other` if given. */
METILE_API metile_status metile_builder_load(metile_builder *b, metile_value ptrs,
                                             metile_value mask, metile_value other,
                                             metile_value *out);
/** Writes `value` (cast to the pointee type) through a pointer (tile); masked-off lanes skip. */
METILE_API metile_status metile_builder_store(metile_builder *b, metile_value ptrs,
                                              metile_value value, metile_value mask);
/**
 * An atomic read-modify-write through a pointer (tile): `op` is METILE_OP_ATOMIC_ADD, _MAX,
 * _MIN, _XCHG or _CAS; `cmp` is the compared value for _CAS and 0 (no value) otherwise. Each
 * active lane updates its element atomically with respect to every other program; *out gets
 * the old values (masked-off lanes touch no memory and their old values are inactive, as for a
 * load without `other`). A scalar pointer updates once
 * per program. Pointee types: i32, u32, i64, f32 (devices may support fewer: metal has no
 * i64 atomics and only add on f32; such ops fail to compile with
 * METILE_ERROR_UNSUPPORTED naming the op and the type).
 */
METILE_API metile_status metile_builder_atomic(metile_builder *b, metile_op op,
                                               metile_value ptrs, metile_value cmp,
                                               metile_value value, metile_value mask,
                                               metile_value *out);
/**
 * Reads the rows x cols tile at (row, col) of a row-major matrix with leading dimension
 * `stride`. With bounds (`bound_rows` and `bound_cols` both non-zero values), elements outside
 * [0, bound_rows) x [0, bound_cols) read 0 and are not accessed.
 */
METILE_API metile_status metile_builder_tile_load(metile_builder *b, metile_value ptr,
                                                  metile_value row, metile_value col,
                                                  metile_value stride, int64_t rows, int64_t cols,
                                                  metile_value bound_rows, metile_value bound_cols,
                                                  metile_value *out);
/** Writes a 2-D tile like tile_load reads one; elements outside the bounds are skipped. */
METILE_API metile_status metile_builder_tile_store(metile_builder *b, metile_value ptr,
                                                   metile_value row, metile_value col,
                                                   metile_value stride, metile_value value,
                                                   metile_value bound_rows,
                                                   metile_value bound_cols);
/**
 * acc + a @ b: a M x K, b K x N, acc M x N (f32 acc for f16/bf16/f32 inputs). Its f32 inputs
 * round as the compile's metile_compile_options.dot_precision says.
 */
METILE_API metile_status metile_builder_dot(metile_builder *b, metile_value a, metile_value bm,
                                            metile_value acc, metile_value *out);

/**
 * How a dot with f32 inputs rounds them (the Tile IR dot's `input_precision` attribute, Triton's
 * spellings; docs/semantics.md, "dot precision", measures each mode's error). Other input types
 * ignore it. Every device gives each mode at least its accuracy: a device without TF32 units
 * computes "tf32x3" (and interp, cpu and metal-sim even "tf32") exactly as written here, so
 * interp is the oracle for every mode.
 */
typedef enum metile_dot_precision {
  /** No precision of its own: the compile's dot_precision, which by default gives f32 accuracy
   * (cuda: TF32X3 on tensor cores; interp, cpu, metal, metal-sim: IEEE). */
  METILE_DOT_PRECISION_DEFAULT = 0,
  /** "ieee": f32 products and sums (FMA allowed): SIMT FMA on cuda. */
  METILE_DOT_PRECISION_IEEE = 1,
  /** "tf32": inputs rounded to TF32 (10 mantissa bits, nearest, ties away), products exact, sums
   * in f32: the fast path of tensor cores (cuda; Metal 4 matmul2d on parts with TF32). */
  METILE_DOT_PRECISION_TF32 = 2,
  /** "tf32x3": each input x split into hi = tf32(x) and lo = tf32(x - hi); the sum of
   * hi*hi + hi*lo + lo*hi (three tensor-core MMAs on cuda), close to f32. */
  METILE_DOT_PRECISION_TF32X3 = 3,
  METILE_DOT_PRECISION_FORCE32 = 0x7fffffff
} metile_dot_precision;

/**
 * metile_builder_dot with the dot's own precision (METILE_DOT_PRECISION_DEFAULT: none, as
 * metile_builder_dot). Any other value is METILE_ERROR_INVALID_ARGUMENT naming it.
 */
METILE_API metile_status metile_builder_dot_with_precision(metile_builder *b, metile_value a,
                                                           metile_value bm, metile_value acc,
                                                           metile_dot_precision precision,
                                                           metile_value *out);
/**
 * Reduction (REDUCE_SUM/MAX/MIN) of the whole tile to a scalar (axis = -1) or along one axis
 * of a 2-D tile (0 or 1) to a 1-D tile.
 */
METILE_API metile_status metile_builder_reduce(metile_builder *b, metile_op op, metile_value x,
                                               int32_t axis, metile_value *out);

/**
 * Inclusive scan (METILE_OP_CUMSUM or METILE_OP_CUMPROD) of a 1-D or 2-D tile along `axis` (0, or
 * 0/1 on 2-D tiles), from the last element when `reverse` is 1 (Triton's tl.cumsum). The result
 * has the operand's type (bool counts as i32); f16/bf16 accumulate in f32 and round each output.
 * Inactive lanes count as the identity (0 or 1) and stay inactive.
 */
METILE_API metile_status metile_builder_scan(metile_builder *b, metile_op op, metile_value x,
                                             int32_t axis, int32_t reverse, metile_value *out);
/** The transpose of a 2-D tile (R x C -> C x R); activity moves with the elements. */
METILE_API metile_status metile_builder_trans(metile_builder *b, metile_value x,
                                              metile_value *out);
/**
 * Prints `values[n]` (scalars or tiles, not pointers) from the kernel: for each program, one line
 * per active element of each value, "FILE:LINE: pid (x, y, z) idx (i[, j]) PREFIX VALUE" (no idx
 * for a scalar, "PREFIX (operand k) VALUE" when n > 1), or one line "FILE:LINE: pid (x, y, z)
 * PREFIX" when n is 0. `prefix` is UTF-8 text without control characters, at most 256 bytes
 * (INVALID_ARGUMENT otherwise); it reaches the device as data, never as source. Lines go to the
 * host process's stdout (interp, cpu, metal-sim) or the CUDA printf buffer (shown at the next
 * synchronization); their order between programs and between a program's threads is
 * unspecified.
 */
METILE_API metile_status metile_builder_device_print(metile_builder *b, const char *prefix,
                                                     const metile_value *values, size_t n);

/**
 * Opens a counted loop `for iv in range(start, end, step)` with `n` loop-carried values starting
 * at `inits`. Writes the induction variable to *out_iv and the in-loop carried values to
 * `out_carried[n]`. Ops built until metile_builder_for_end() form the body.
 */
METILE_API metile_status metile_builder_for_begin(metile_builder *b, metile_value start,
                                                  metile_value end, metile_value step,
                                                  const metile_value *inits, size_t n,
                                                  metile_value *out_iv,
                                                  metile_value *out_carried);
/**
 * Closes the innermost loop; `yields[n]` are the carried values for the next iteration (same
 * types as the inits). Writes the values after the loop to `out_results[n]`.
 */
METILE_API metile_status metile_builder_for_end(metile_builder *b, const metile_value *yields,
                                                size_t n, metile_value *out_results);
/**
 * Opens `if cond` on a bool scalar `cond` (uniform per program: every thread of a program takes
 * the same branch). Ops built until metile_builder_if_else() (or metile_builder_if_end() when
 * there is no else) form the then branch.
 */
METILE_API metile_status metile_builder_if_begin(metile_builder *b, metile_value cond);
/**
 * Ends the then branch of the innermost `if` with the `yields[n]` it gives; the ops built until
 * metile_builder_if_end() form the else branch.
 */
METILE_API metile_status metile_builder_if_else(metile_builder *b, const metile_value *yields,
                                                size_t n);
/**
 * Closes the innermost `if`. After metile_builder_if_else(), `yields[n]` are the else branch's
 * values (the same number and types as the then branch's); without it the if has no results and
 * n must be 0. Writes the if's results to `out_results[n]`.
 */
METILE_API metile_status metile_builder_if_end(metile_builder *b, const metile_value *yields,
                                               size_t n, metile_value *out_results);
/**
 * Opens `while` with `n` carried values starting at `inits`; writes the carried values as seen by
 * the condition to `out_carried[n]`. Ops built until metile_builder_while_do() compute the
 * condition (they run once more than the body).
 */
METILE_API metile_status metile_builder_while_begin(metile_builder *b, const metile_value *inits,
                                                    size_t n, metile_value *out_carried);
/**
 * Ends the condition: the loop goes on while the bool scalar `cond` (uniform per program) is
 * true, passing `values[n]` (the carried types) to the body, or out of the loop as its results
 * when false. Writes the body's view of them to `out_args[n]`.
 */
METILE_API metile_status metile_builder_while_do(metile_builder *b, metile_value cond,
                                                 const metile_value *values, size_t n,
                                                 metile_value *out_args);
/**
 * Closes the innermost `while`; `yields[n]` are the next carried values (the inits' types).
 * Writes the values after the loop to `out_results[n]`.
 */
METILE_API metile_status metile_builder_while_end(metile_builder *b, const metile_value *yields,
                                                  size_t n, metile_value *out_results);
/**
 * Opens a region whose side effects run only for the threads of simdgroup range `role` of
 * `num_roles` (even split), or, when num_sgs > 0, of simdgroups [first_sg, first_sg + num_sgs).
 * Values defined inside do not escape.
 */
METILE_API metile_status metile_builder_role_begin(metile_builder *b, int32_t role,
                                                   int32_t num_roles, int32_t first_sg,
                                                   int32_t num_sgs);
METILE_API metile_status metile_builder_role_end(metile_builder *b);

/** SIMT view ops without operands: THREAD_ID, SIMD_LANE_ID (T-element i32 tiles), BARRIER. */
METILE_API metile_status metile_builder_simt(metile_builder *b, metile_op op, metile_value *out);
/** SIMD_SHUFFLE_XOR (x[i ^ lane_or_mask]) or SIMD_BROADCAST (x[(i & ~31) + lane_or_mask]). */
METILE_API metile_status metile_builder_simd(metile_builder *b, metile_op op, metile_value x,
                                             metile_value lane_or_mask, metile_value *out);
/** Threadgroup memory of `size` elements; returns a threadgroup pointer. */
METILE_API metile_status metile_builder_shared(metile_builder *b, int64_t size,
                                               metile_dtype dtype, metile_value *out);
/**
 * Remaps program ids for locality: pattern "morton" (Z-order in block_size x block_size blocks),
 * "hilbert" (a Hilbert curve in those blocks), "diagonal", "grouped" (groups of block_size rows),
 * "grouped2"/"grouped4"/"grouped8" (grouped with that group size, block_size ignored), "linear"
 * (the identity) or "auto" (morton); a bijection on any grid shape.
 */
METILE_API metile_status metile_builder_tile_swizzle(metile_builder *b, metile_value pid_m,
                                                     metile_value pid_n, const char *pattern,
                                                     int32_t block_size, metile_value *out_m,
                                                     metile_value *out_n);

/**
 * Verifies and returns the program. The builder stays usable only for release. Errors:
 * METILE_ERROR_INVALID_PROGRAM with the op and its source location.
 */
METILE_API metile_status metile_builder_finish(metile_builder *b, metile_program **out);

/* ------------------------------------------------------------------------------------------ */
/** \name Programs */
/* ------------------------------------------------------------------------------------------ */

/** Parses the canonical text form (as metile_program_print writes it) and verifies it. */
METILE_API metile_status metile_program_parse(metile_program **out, const char *text);
/** The canonical text; parsing it gives the same program. Free with metile_free(). */
METILE_API metile_status metile_program_print(const metile_program *program, char **out);
METILE_API metile_status metile_program_retain(metile_program *program);
METILE_API metile_status metile_program_release(metile_program *program);
/** The kernel's name; lives as long as the program. NULL for a bad handle. */
METILE_API const char *metile_program_name(const metile_program *program);
METILE_API metile_status metile_program_num_params(const metile_program *program, size_t *out);
/** Name (lives as long as the program) and type of parameter `index`. */
METILE_API metile_status metile_program_param(const metile_program *program, size_t index,
                                              const char **out_name, metile_type *out_type);

/** Bits of metile_program_param_access()'s answer. */
typedef enum metile_param_access {
  METILE_PARAM_READ = 1,  /**< some op reads memory through the pointer parameter */
  METILE_PARAM_WRITE = 2, /**< some op writes memory through it (e.g. store, tile_store) */
  METILE_PARAM_ACCESS_FORCE32 = 0x7FFFFFFF
} metile_param_access;

/**
 * How the program uses pointer parameter `index`: a bitwise or of metile_param_access (0 for a
 * scalar, or a pointer the program never dereferences). Pointers are traced back through
 * offsets, broadcasts, reshapes, selects and loop-carried values (a carried pointer counts as
 * every parameter its initial and yielded values may point into), so a bit is never missing
 * where the access can happen. Bindings use
 * METILE_PARAM_WRITE to refuse read-only memory for an output.
 */
METILE_API metile_status metile_program_param_access(const metile_program *program, size_t index,
                                                     uint32_t *out);

/* ------------------------------------------------------------------------------------------ */
/** \name Kernels: a program compiled for a device */
/* ------------------------------------------------------------------------------------------ */

typedef struct metile_kernel metile_kernel;

typedef struct metile_compile_options {
  size_t struct_size;
  /** Threads per program instance on GPUs; 0 = the compiler chooses (or T of a SIMT kernel). */
  int32_t num_threads;
  /**
   * Triton's allow_tf32, kept as an alias: 1 is dot_precision TF32, 0 is IEEE, -1 (the default)
   * leaves it to dot_precision. Both set to different precisions: INVALID_ARGUMENT.
   */
  int32_t allow_tf32;
  /** 0: no optimization passes (debugging); 1: the default pipeline; anything else is refused. */
  int32_t opt_level;
  /** 1: bypass the compile cache for this kernel (memory and disk). */
  int32_t no_cache;
  /**
   * 1: a launch that accesses memory outside a buffer fails with METILE_ERROR_DEVICE naming the
   * op's source line (METILE_CHECK=1 sets this for every compile); the launch synchronizes.
   * Without it such loads read 0 and such stores are dropped (the interp device always reports).
   */
  int32_t check_bounds;
  /** 1: no bounds guards (for experts: an access outside its buffer is undefined behaviour). */
  int32_t unchecked;
  /**
   * 1: keep the kernel's tile_range passes as written. By default (0) consecutive passes over the
   * same rows whose reductions combine run as one (independent reductions together; a max pass
   * then a sum-of-exp pass as an online softmax with rescaling; a mean pass then a sum of squares
   * about it as Welford's update) where the compiler verifies the algebra on the IR;
   * METILE_DEBUG=tile_ir_opt shows the result.
   */
  int32_t no_fuse_reductions;
  /**
   * 1: a later tile_range pass that re-reads what an earlier pass over the same range read takes
   * the tiles the earlier pass kept (GPUs: one tile, in registers, 16 elements per thread) when
   * the row fits, checked at run time, and reads memory otherwise; METILE_DEBUG=tile_ir_opt shows
   * the result. Off by default (0): on an H100 it measured slower than re-reading
   * (bench/results/cuda_rows_h100.md); the cpu device never keeps rows.
   */
  int32_t keep_rows;
  /**
   * Stages of the software pipeline of a K loop whose dot operands come straight from
   * tile_loads (copies of later iterations in flight while this one computes; cp.async on
   * CUDA): 0 = the device's choice (3 on CUDA, as far as shared memory allows: a kernel whose
   * stages and epilogue arrays together exceed the limit gets 2 stages, then none, before the
   * compile fails), 1 = no pipeline, 2..8 = that many (over the limit: UNSUPPORTED). Metal has no asynchronous copies: any value but 1 is double
   * buffering (two threadgroup stages, the next iteration's tiles loaded into registers during
   * this one's multiplies) where two stages fit. A K loop whose body writes memory (store,
   * tile_store, atomics) is never pipelined: its loads stay after the previous iteration's
   * writes. Other values: INVALID_ARGUMENT.
   */
  int32_t num_stages;
  /**
   * The warp (simdgroup) grid of a dot on matrix units: warps_m x warps_n warps tile the
   * accumulator, each a (BLOCK_M / warps_m) x (BLOCK_N / warps_n) block of it. 0 and 0 = the
   * compiler chooses (warp tiles as square as possible). Both set, each 1..32; with num_threads
   * 0 the kernel runs warps_m * warps_n warps, else they must make up num_threads. A dot the grid
   * cannot tile by whole atoms fails to compile with INVALID_ARGUMENT naming both values. A grid
   * asks for the warp-level atoms (mma.sync on CUDA), not warpgroup ones (wgmma).
   */
  int32_t warps_m;
  int32_t warps_n;
  /**
   * Split-K on GPUs (cuda, metal-sim, metal): the K loop of a GEMM-shaped program (one top-level
   * tile_range carrying only a zero-initialised f32 dot accumulator) runs as n parts, each its
   * own program instance. 0 = the compiler's choice, which today is not to split: on an H100
   * every split measured slower than none, small grids included (bench/results/
   * gemm_splitk_h100.md). 1 = off, 2..64 = n parts. Each part writes its f32 partial sums to
   * a workspace the runtime owns (grid x n tiles, at most 256 MiB; ticket counters it zeroes
   * once, which the kernel leaves zero again); the last part of each output tile to arrive adds
   * the n partials in part order (deterministic), runs the epilogue and stores. Launches of one
   * kernel share that workspace and are ordered on the device's queue. A launch whose K loop has
   * fewer iterations than n fails with METILE_ERROR_DEVICE naming the loop; a workspace over
   * the bound fails with METILE_ERROR_INVALID_ARGUMENT. Programs of another shape, interp and
   * cpu ignore it; METILE_GPU_OFF=split_k turns it off. Other values: INVALID_ARGUMENT.
   */
  int32_t split_k;
  /**
   * The metile_dot_precision of the dots that have none of their own (added later: read only
   * when struct_size covers it). DEFAULT (0) gives f32 accuracy on every device; TF32 is the
   * opt-in fast path. Values outside the enum: INVALID_ARGUMENT.
   */
  int32_t dot_precision;
  /**
   * Triton's maxnreg: at most this many registers a thread on cuda (ptxas's limit for the
   * kernel; added later: read only when struct_size covers it). Fewer registers let more
   * programs share a multiprocessor, which keeps more loads in flight in a kernel bound by
   * memory latency; too few make ptxas spill to local memory. 0 (the default) leaves it to the
   * compiler (matrix kernels ask for as many blocks as their accumulators allow); 16..255 set
   * it. Other devices ignore it (Metal has no such limit). Other values: INVALID_ARGUMENT.
   */
  int32_t maxnreg;
} metile_compile_options;
/** The defaults metile_compile_options_init() writes. */
#define METILE_COMPILE_OPTIONS_INIT {sizeof(metile_compile_options), 0, -1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/** Fills *options with defaults and struct_size. */
METILE_API void metile_compile_options_init(metile_compile_options *options);

/**
 * Compiles (or loads from the cache). `options` may be NULL for defaults. A host compiler, clang
 * (metal-sim) or NVRTC compile that runs past $METILE_TIMEOUT_S seconds (default 600; 0 = no
 * limit) is abandoned (a compiler process is killed) and reported as METILE_ERROR_COMPILE.
 *
 * Limits, checked before any backend compiler runs (METILE_ERROR_INVALID_PROGRAM when the
 * program is verified, METILE_ERROR_UNSUPPORTED for a device's own limit): at most 2^24 elements
 * per tile, 2^20 ops per kernel and 64 nested regions; on metal-sim at most 1024 elements of a
 * tile per thread (tiles of about 2^20 elements at 1024 threads), and one thread's stack frames
 * at most 64 MiB (METILE_ERROR_COMPILE). A `for` whose step is the constant 0 does not verify;
 * a step that is 0 at run time is METILE_ERROR_DEVICE naming the loop on every device (on
 * metal-sim, metal and cuda the loop runs no iteration and the launch then reports it through
 * a hidden error flag, so a kernel with a run-time step synchronizes after each launch there).
 */
METILE_API metile_status metile_kernel_compile(metile_kernel **out, metile_device *device,
                                               const metile_program *program,
                                               const metile_compile_options *options);
METILE_API metile_status metile_kernel_retain(metile_kernel *kernel);
METILE_API metile_status metile_kernel_release(metile_kernel *kernel);
/**
 * A stage's text: "tile_ir", "tile_ir_opt", "layouts" (GPU layout assignment), "gpu_ir",
 * "gpu_ir_opt", "msl", "cuda", "cpp" (what the device has).
 * METILE_ERROR_INVALID_ARGUMENT names the stages available when `stage` is not one of them.
 */
METILE_API metile_status metile_kernel_source(const metile_kernel *kernel, const char *stage,
                                              char **out);
/** The compile-cache key: 64 lowercase hex digits and a NUL, written to out[65]. */
METILE_API metile_status metile_kernel_cache_key(const metile_kernel *kernel, char *out);

/**
 * What compiling a kernel produced, and the resources one program instance (threadgroup, CUDA
 * block) of it uses. Fields past compile_seconds were added later: they are written only when
 * struct_size covers them, so a caller built against the older, shorter struct keeps working.
 */
typedef struct metile_kernel_info {
  size_t struct_size;
  /** Threads per program instance (interp and cpu: the program's thread count, else 1). */
  int32_t threads_per_group;
  /**
   * Threadgroup (CUDA: shared) memory per program instance, in bytes: the kernel's `shared`
   * arrays and the compiler's staging (dot operands, reductions, layout exchanges), each
   * array 16-byte aligned.
   */
  uint64_t threadgroup_memory_bytes;
  int32_t from_cache;     /**< 1 when loaded from the compile cache */
  double compile_seconds; /**< time spent compiling (or loading) */
  /**
   * The most threadgroup memory the device allows one program instance, which compiling checked
   * threadgroup_memory_bytes against (the device's metile_device_info.threadgroup_memory_bytes:
   * cuda: the GPU's opt-in per-block limit, 227 KiB on H100/H200; metal: the GPU's
   * maxThreadgroupMemoryLength; metal-sim: its emulated Apple family's 32 KiB). A kernel over it
   * does not compile: METILE_ERROR_UNSUPPORTED naming the kernel, the bytes and the limit.
   */
  uint64_t threadgroup_memory_limit;
  /**
   * Registers per thread where the device reports them (cuda: the loaded function's
   * CU_FUNC_ATTRIBUTE_NUM_REGS); 0 where unknown (interp, cpu, metal, metal-sim).
   */
  int32_t registers_per_thread;
} metile_kernel_info;
#define METILE_KERNEL_INFO_INIT {sizeof(metile_kernel_info), 0, 0, 0, 0.0, 0, 0}
/** struct_size of the metile_kernel_info before threadgroup_memory_limit was added. */
#define METILE_KERNEL_INFO_V1_SIZE 40

/**
 * Fills *out for `kernel`. out->struct_size must be at least METILE_KERNEL_INFO_V1_SIZE
 * (METILE_ERROR_INVALID_ARGUMENT otherwise); fields it does not cover are left untouched.
 */
METILE_API metile_status metile_kernel_get_info(const metile_kernel *kernel,
                                                metile_kernel_info *out);

/* ------------------------------------------------------------------------------------------ */
/** \name Launches */
/* ------------------------------------------------------------------------------------------ */

typedef enum metile_arg_kind {
  METILE_ARG_BUFFER = 1, /**< `buffer` + byte `offset`, for pointer parameters */
  METILE_ARG_I32 = 2,    /**< integer kinds read `i` */
  METILE_ARG_U32 = 3,
  METILE_ARG_I64 = 4,
  METILE_ARG_F32 = 5, /**< float kinds read `f` */
  METILE_ARG_F64 = 6,
  METILE_ARG_KIND_FORCE32 = 0x7fffffff
} metile_arg_kind;

/**
 * One launch argument. A flat struct rather than a union so every FFI can fill it. Scalars are
 * converted to the parameter's dtype when the value fits exactly (an f64 argument for an f32
 * parameter is rounded); otherwise the launch fails naming the parameter. An I32 or U32 argument's
 * `i` must also fit its own kind (a U32 of -5 is refused, whatever the parameter).
 */
typedef struct metile_arg {
  metile_arg_kind kind;
  int32_t reserved;
  metile_buffer *buffer;
  uint64_t offset;
  int64_t i;
  double f;
} metile_arg;
/** Arguments: a buffer (offset 0), an integer and a float (converted to the parameter's dtype). */
#define METILE_ARG_BUFFER_INIT(buffer) {METILE_ARG_BUFFER, 0, (buffer), 0, 0, 0.0}
#define METILE_ARG_I64_INIT(value) {METILE_ARG_I64, 0, 0, 0, (value), 0.0}
#define METILE_ARG_F64_INIT(value) {METILE_ARG_F64, 0, 0, 0, 0, (value)}

/**
 * Launches `kernel` over grid[0] x grid[1] x grid[2] program instances (each >= 1, and at most
 * 2^63 - 1 in all: METILE_ERROR_INVALID_ARGUMENT otherwise, also from metile_launch_create and
 * metile_launch_set_grid) with the
 * arguments in parameter order. Asynchronous on GPU devices. Arguments are checked against
 * the signature (count, kind, dtype, offset alignment) with a message naming the parameter.
 * On interp, cpu and metal-sim, a launch that runs past $METILE_TIMEOUT_S seconds (unset or 0:
 * no limit) stops with METILE_ERROR_DEVICE naming the kernel (its outputs are then partly
 * written); on cuda and metal the limit is enforced when the host waits, which then stops the
 * kernel at a loop's check (metile_launch_options.timeout_s).
 * A buffer of another device (another GPU included) is METILE_ERROR_INVALID_ARGUMENT naming the
 * parameter and both devices.
 */
METILE_API metile_status metile_kernel_launch(metile_kernel *kernel, const uint32_t grid[3],
                                              const metile_arg *args, size_t num_args);

/** A launch prepared once and run many times (the hot path: arguments are checked once). */
typedef struct metile_launch metile_launch;

METILE_API metile_status metile_launch_create(metile_launch **out, metile_kernel *kernel,
                                              const uint32_t grid[3], const metile_arg *args,
                                              size_t num_args);
/** Replaces argument `index` (checked like at creation). */
METILE_API metile_status metile_launch_set_arg(metile_launch *launch, size_t index,
                                               const metile_arg *arg);
/**
 * Points pointer argument `index` at `bytes` of host memory that the launch's device uses in
 * place, as a metile_buffer_wrap() buffer would be, without a handle: the cheap way to re-run a
 * launch over a fresh host array. METILE_ERROR_UNSUPPORTED when the device would have to copy
 * the memory (then wrap it in a buffer). The memory must stay valid while the launch may run
 * over it (until the argument is replaced, the launch is released, or the device synchronized
 * after its last run).
 */
METILE_API metile_status metile_launch_set_arg_memory(metile_launch *launch, size_t index,
                                                      void *host, size_t bytes);
/**
 * Points pointer argument `index` at `bytes` of the device's own memory at device address
 * `address` (on cuda: memory from cuMemAlloc/cudaMalloc, such as a torch or CuPy tensor's
 * data pointer), without a buffer: the cheap way to re-run a launch over a fresh GPU tensor. The
 * range must lie inside one allocation of this GPU (METILE_ERROR_INVALID_ARGUMENT naming the
 * address and the allocation otherwise); devices without memory of their own, or a driver that
 * cannot say where an address belongs, give METILE_ERROR_UNSUPPORTED (import the memory through
 * DLPack instead). Nothing orders the memory's producer before the launch (do it with
 * metile_device_wait_stream or a stream of your own), and the memory must stay valid while the
 * launch may run over it (until the argument is replaced, the launch is released, or the device
 * synchronized after its last run).
 */
METILE_API metile_status metile_launch_set_arg_device_memory(metile_launch *launch, size_t index,
                                                             uint64_t address, size_t bytes);
METILE_API metile_status metile_launch_set_grid(metile_launch *launch, const uint32_t grid[3]);

/** A launch's own settings; METILE_LAUNCH_OPTIONS_INIT gives the defaults. */
typedef struct metile_launch_options {
  size_t struct_size;
  /**
   * Time limit of each run in seconds, instead of $METILE_TIMEOUT_S: 0 (or INFINITY) means none,
   * a negative value (the default, -1) keeps METILE_TIMEOUT_S; NaN is
   * METILE_ERROR_INVALID_ARGUMENT. A run
   * past it fails with METILE_ERROR_DEVICE naming the kernel and the limit, its outputs partly
   * written. On cuda the limit is enforced while the host waits (metile_device_synchronize,
   * metile_event_synchronize), which then polls the GPU (ending up to 0.5 ms late) instead of
   * blocking. Past it metile sets a stop word that every cuda kernel checks at its loops'
   * back-edges and, where no loop comes first, before its first write; its threads leave
   * there, and the wait fails naming the kernel and the limit, its outputs partly written;
   * nothing is reset (a kernel that answered gets 30 s for the rest of its grid to leave). A
   * kernel that reaches no such check within 1 s (spinning inside a single generated
   * op, or with wgmma dots, which get no checks) is ended by a reset of the GPU's context (see
   * metile_device_synchronize), which a GPU may not finish while the kernel runs (an H100 did
   * not). On metal the limit is likewise enforced while the host waits: past it metile sets the
   * launch's stop word, which every loop of a metal kernel checks (its first turn, then every
   * 1024th; the whole threadgroup returns there), and the wait fails naming the kernel and the
   * limit, its outputs partly written; nothing is reset. A metal kernel that reaches no check
   * within 1 s (one without loops) runs on, as Metal cannot stop a committed command buffer,
   * and the next metile_device_synchronize waits for it in full.
   */
  double timeout_s;
  /** The stream to queue on (cuda): 0, the default, for the device's own; else a CUstream as an
   * integer (1: legacy default, 2: per-thread default) or one from metile_stream_create(). */
  uint64_t stream;
} metile_launch_options;
#define METILE_LAUNCH_OPTIONS_INIT {sizeof(metile_launch_options), -1.0, 0}

/** Sets the options every later run of `launch` uses (NULL: the defaults). */
METILE_API metile_status metile_launch_set_options(metile_launch *launch,
                                                   const metile_launch_options *options);
METILE_API metile_status metile_launch_run(metile_launch *launch);
METILE_API metile_status metile_launch_release(metile_launch *launch);

/**
 * Stops the launches running now on cpu, interp, metal-sim, metal and cuda (on any thread): each fails
 * with METILE_ERROR_DEVICE saying it was cancelled, its outputs partly written; launches started
 * afterwards run normally. They stop at their next check: cpu between slices of about 10 ms
 * of program instances, interp every 256 ops, metal-sim before each threadgroup, at barriers and
 * every 4096 loop turns, cuda programs at a loop back-edge or before their first write (the
 * wait for the launch reports the cancel: see metile_device_synchronize), metal
 * kernels at a loop back-edge (the first turn and every
 * 1024th; the threadgroup returns, and the wait for the launch reports the cancel; a kernel
 * without loops runs to its end). Thread-safe and async-signal-safe (a signal handler may call
 * it); the Python binding calls it when SIGINT arrives during a launch.
 */
METILE_API void metile_cancel_launches(void);

/* ------------------------------------------------------------------------------------------ */
/** \name Compile cache (process-wide) */
/* ------------------------------------------------------------------------------------------ */

/*
 * Compiled kernels are kept in memory (per device) and, for devices that can reload a binary
 * (cpu, metal, cuda; not interp), on disk: one zlib-compressed file per kernel under the cache
 * directory, keyed by sha256 of the library build, the device and its toolchain, the compile
 * options and the canonical Tile IR. Many processes may share the directory. A corrupt or foreign
 * entry is ignored and replaced; a read-only or full disk means "no disk cache" and one warning,
 * never a failed compile. METILE_CACHE=0 disables the disk level. Settings are process-wide.
 * Entries are code the process runs, so the directory is trusted only when it belongs to the user
 * and no one else may write to it (else one warning and no disk cache), and each entry carries an
 * HMAC keyed by a random per-user secret kept in it (file `secret`, mode 0600): an entry someone
 * else wrote is a miss. The memory level keeps the most recently used kernels (128) loaded.
 */

/**
 * Sets the disk cache directory (created on demand; a relative path is made absolute now). NULL
 * restores the default: $METILE_CACHE_DIR, else $XDG_CACHE_HOME/metile, else ~/.cache/metile.
 * "" is METILE_ERROR_INVALID_ARGUMENT.
 */
METILE_API metile_status metile_cache_set_dir(const char *dir);
/**
 * The disk cache directory in use. Free with metile_free(). METILE_ERROR_IO when none can be
 * determined (no override, no variable and no home directory).
 */
METILE_API metile_status metile_cache_get_dir(char **out);
/** 1 enables, 0 disables the disk cache (the in-memory cache stays). Overrides METILE_CACHE. */
METILE_API metile_status metile_cache_set_enabled(int32_t enabled);
/**
 * Size cap of the disk cache in bytes (> 0; default $METILE_CACHE_MAX_BYTES, else 1 GiB). After
 * a write that takes the directory past the cap, least recently used entries (by last read or
 * write) are removed until it is under 90% of the cap. Each process tracks the size it knows
 * of, so several writers may overshoot briefly.
 */
METILE_API metile_status metile_cache_set_max_bytes(uint64_t max_bytes);

/** Counters since process start or the last metile_cache_clear(). */
typedef struct metile_cache_stats {
  size_t struct_size;
  uint64_t memory_hits;
  uint64_t disk_hits;
  /** Compiles that built the kernel (those with no_cache set are not counted). */
  uint64_t misses;
  uint64_t bytes_read;    /**< entry bytes read for disk hits */
  uint64_t bytes_written; /**< entry bytes written */
  /** Sum over hits of the build time each entry originally took. */
  double compile_seconds_saved;
} metile_cache_stats;
#define METILE_CACHE_STATS_INIT {sizeof(metile_cache_stats), 0, 0, 0, 0, 0, 0.0}

METILE_API metile_status metile_cache_get_stats(metile_cache_stats *out);
/**
 * Removes every disk entry and autotune record metile wrote in the cache directory (other files
 * are left alone) and the in-memory cache; resets the statistics. METILE_ERROR_IO names an entry
 * that could not be removed.
 */
METILE_API metile_status metile_cache_clear(void);

/* ------------------------------------------------------------------------------------------ */
/** \name Autotuning helpers */
/* ------------------------------------------------------------------------------------------ */

/**
 * Times each prepared launch: `warmup` untimed runs and a device synchronize, then `rep` (>= 1)
 * timed runs, each followed by a synchronize of the launch's device so the time covers the
 * kernel, not just its enqueue. Writes the median milliseconds to out_ms[i]. Every handle is
 * checked before anything runs. n == 0 does nothing.
 */
METILE_API metile_status metile_autotune_time(metile_launch *const *launches, size_t n,
                                              int32_t warmup, int32_t rep, double *out_ms);
/**
 * Persists `winner` (any string) for `key` (any string; the caller puts in it whatever the choice
 * depends on: kernel, shapes, dtypes, device) under <cache dir>/autotune/. Replaces an earlier
 * winner. With the disk cache disabled it does nothing; a failed write warns once and is not an
 * error.
 */
METILE_API metile_status metile_autotune_store(const char *key, const char *winner);
/**
 * Looks up a stored winner; *out (free with metile_free()) is NULL, with METILE_OK, when there
 * is none, the record is unreadable, or the disk cache is disabled.
 */
METILE_API metile_status metile_autotune_lookup(const char *key, char **out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* METILE_METILE_H */
