package metile

/*
#include "wrappers.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// CompileOptions are metile_compile_options; DefaultCompileOptions gives the library's defaults.
type CompileOptions struct {
	NumThreads       int          // threads per program instance on GPUs; 0 = the compiler chooses
	AllowTF32        int          // 1: f32 dot may use TF32; 0: exact f32; -1: device default
	OptLevel         int          // 0: no optimization passes; 1: the default pipeline
	NoCache          bool         // bypass the compile cache (memory and disk) for this kernel
	CheckBounds      bool         // an out-of-bounds access fails the launch, naming the op's line
	Unchecked        bool         // no bounds guards (an access outside a buffer is undefined)
	NoFuseReductions bool         // keep consecutive reduction passes as written
	KeepRows         bool         // a later pass takes the tiles an earlier pass kept when the row fits
	NumStages        int          // the K-loop pipeline's stages (0: the device's choice, 1: none, up to 8)
	WarpsM, WarpsN   int          // the warp grid of a dot on matrix units (both 0: the compiler chooses)
	SplitK           int          // a GEMM's K loop in parts (0: the compiler's choice, 1: off, up to 64)
	DotPrecision     DotPrecision // of the dots that have none of their own (Default: f32 accuracy)
	MaxNReg          int          // registers a thread on cuda (Triton's maxnreg: 0 = the compiler's choice, else 16..255)
}

// DefaultCompileOptions returns what metile_compile_options_init writes.
func DefaultCompileOptions() CompileOptions {
	var o C.metile_compile_options
	C.metile_compile_options_init(&o)
	return CompileOptions{NumThreads: int(o.num_threads), AllowTF32: int(o.allow_tf32),
		OptLevel: int(o.opt_level), NoCache: o.no_cache != 0, CheckBounds: o.check_bounds != 0,
		Unchecked: o.unchecked != 0, NoFuseReductions: o.no_fuse_reductions != 0,
		KeepRows: o.keep_rows != 0, NumStages: int(o.num_stages), WarpsM: int(o.warps_m),
		WarpsN: int(o.warps_n), SplitK: int(o.split_k), DotPrecision: DotPrecision(o.dot_precision),
		MaxNReg: int(o.maxnreg)}
}

func cbool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

func (o CompileOptions) c() C.metile_compile_options {
	var c C.metile_compile_options
	C.metile_compile_options_init(&c)
	c.num_threads, c.allow_tf32, c.opt_level = C.int32_t(o.NumThreads), C.int32_t(o.AllowTF32), C.int32_t(o.OptLevel)
	c.no_cache, c.check_bounds, c.unchecked = cbool(o.NoCache), cbool(o.CheckBounds), cbool(o.Unchecked)
	c.no_fuse_reductions, c.keep_rows = cbool(o.NoFuseReductions), cbool(o.KeepRows)
	c.num_stages, c.warps_m, c.warps_n = C.int32_t(o.NumStages), C.int32_t(o.WarpsM), C.int32_t(o.WarpsN)
	c.split_k, c.dot_precision, c.maxnreg = C.int32_t(o.SplitK), C.int32_t(o.DotPrecision), C.int32_t(o.MaxNReg)
	return c
}

// CompileWith compiles p for d with explicit options.
func CompileWith(d *Device, p *Program, options CompileOptions) (*Kernel, error) {
	opts := options.c()
	var raw *C.metile_kernel
	var msg *C.char
	if err := check(C.go_metile_kernel_compile(&msg, &raw, d.raw, p.raw, &opts), msg); err != nil {
		return nil, err
	}
	k := &Kernel{raw}
	runtime.SetFinalizer(k, (*Kernel).Close)
	return k, nil
}

// Clone returns a second handle to the same kernel (retained); each is closed on its own.
func (k *Kernel) Clone() (*Kernel, error) {
	var msg *C.char
	if err := check(C.go_metile_kernel_retain(&msg, k.raw), msg); err != nil {
		return nil, err
	}
	c := &Kernel{k.raw}
	runtime.SetFinalizer(c, (*Kernel).Close)
	return c, nil
}

// Source returns a compile stage's text: "tile_ir", "layouts", "gpu_ir", "gpu_ir_opt", "msl", "cuda",
// "cpp" (what the device has; the error lists them for any other name).
func (k *Kernel) Source(stage string) (string, error) {
	cs := C.CString(stage)
	defer C.free(unsafe.Pointer(cs))
	var out, msg *C.char
	if err := check(C.go_metile_kernel_source(&msg, k.raw, cs, &out), msg); err != nil {
		return "", err
	}
	defer C.metile_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// CacheKey returns the compile-cache key: 64 lowercase hex digits.
func (k *Kernel) CacheKey() (string, error) {
	var buf [65]C.char
	var msg *C.char
	if err := check(C.go_metile_kernel_cache_key(&msg, k.raw, &buf[0]), msg); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// KernelInfo holds what compiling a kernel produced.
type KernelInfo struct {
	ThreadsPerGroup int
	// ThreadgroupMemoryBytes is the threadgroup (shared) memory one program instance uses;
	// ThreadgroupMemoryLimit the most the device allows (what compiling checked against).
	ThreadgroupMemoryBytes uint64
	ThreadgroupMemoryLimit uint64
	// RegistersPerThread is reported by cuda; 0 where unknown.
	RegistersPerThread int
	FromCache          bool
	CompileSeconds     float64
}

// Info returns the kernel's compile results.
func (k *Kernel) Info() (KernelInfo, error) {
	var info C.metile_kernel_info
	info.struct_size = C.size_t(unsafe.Sizeof(info))
	var msg *C.char
	if err := check(C.go_metile_kernel_get_info(&msg, k.raw, &info), msg); err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{ThreadsPerGroup: int(info.threads_per_group),
		ThreadgroupMemoryBytes: uint64(info.threadgroup_memory_bytes),
		ThreadgroupMemoryLimit: uint64(info.threadgroup_memory_limit),
		RegistersPerThread:     int(info.registers_per_thread),
		FromCache:              info.from_cache != 0, CompileSeconds: float64(info.compile_seconds)}, nil
}

// BufferArgAt passes a buffer from byte offset on; U32Arg, I64Arg and F64Arg are scalars
// (converted to the parameter's dtype when the value fits exactly).
func BufferArgAt(b *Buffer, offset uint64) Arg {
	a := BufferArg(b)
	a.c.offset = C.uint64_t(offset)
	return a
}

// U32Arg passes a u32 scalar.
func U32Arg(v uint32) Arg {
	var a Arg
	a.c.kind, a.c.i = C.METILE_ARG_U32, C.int64_t(v)
	return a
}

// I64Arg passes an i64 scalar.
func I64Arg(v int64) Arg {
	var a Arg
	a.c.kind, a.c.i = C.METILE_ARG_I64, C.int64_t(v)
	return a
}

// F64Arg passes an f64 scalar.
func F64Arg(v float64) Arg {
	var a Arg
	a.c.kind, a.c.f = C.METILE_ARG_F64, C.double(v)
	return a
}

func cGrid(grid [3]uint32) [3]C.uint32_t {
	return [3]C.uint32_t{C.uint32_t(grid[0]), C.uint32_t(grid[1]), C.uint32_t(grid[2])}
}

// Launch is a launch prepared once (its arguments checked) and run many times: the hot path.
// One goroutine at a time may use it.
type Launch struct {
	raw    *C.metile_launch
	kernel *Kernel
	keep   []*Buffer // the buffers its arguments name stay alive while it may run over them
}

// Prepare checks grid and args once and returns a Launch.
func (k *Kernel) Prepare(grid [3]uint32, args ...Arg) (*Launch, error) {
	cargs := make([]C.metile_arg, len(args)+1)
	keep := make([]*Buffer, len(args))
	for i, a := range args {
		cargs[i], keep[i] = a.c, a.keep
	}
	cgrid := cGrid(grid)
	var raw *C.metile_launch
	var msg *C.char
	if err := check(C.go_metile_launch_create(&msg, &raw, k.raw, &cgrid[0], &cargs[0], C.size_t(len(args))), msg); err != nil {
		return nil, err
	}
	l := &Launch{raw: raw, kernel: k, keep: keep}
	runtime.SetFinalizer(l, (*Launch).Close)
	return l, nil
}

// SetArg replaces argument index (checked like at Prepare).
func (l *Launch) SetArg(index int, arg Arg) error {
	if index < 0 || index >= len(l.keep) {
		return &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("[launch] SetArg: index %d outside the %d arguments", index, len(l.keep))}
	}
	c := arg.c
	var msg *C.char
	if err := check(C.go_metile_launch_set_arg(&msg, l.raw, C.size_t(index), &c), msg); err != nil {
		return err
	}
	l.keep[index] = arg.keep
	return nil
}

// SetArgMemory points pointer argument index at bytes of host memory the device uses in place
// (ErrUnsupported where it would have to copy: then wrap the memory in a buffer). As for
// WrapMemory, the memory must not belong to Go's garbage collector, and it must stay valid
// until the argument is replaced, the launch closed, or the device synchronized after its
// last run.
func (l *Launch) SetArgMemory(index int, ptr unsafe.Pointer, bytes int) error {
	if index < 0 || index >= len(l.keep) || bytes < 0 {
		return &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("[launch] SetArgMemory: index %d (of %d arguments) or size %d out of range", index, len(l.keep), bytes)}
	}
	var msg *C.char
	if err := check(C.go_metile_launch_set_arg_memory(&msg, l.raw, C.size_t(index), ptr, C.size_t(bytes)), msg); err != nil {
		return err
	}
	l.keep[index] = nil
	return nil
}

// SetArgDeviceMemory points pointer argument index at bytes of the device's own memory at
// device address address (on cuda: memory from cuMemAlloc/cudaMalloc, such as another library's
// tensor). The library checks that the range lies inside one allocation of the launch's GPU
// (ErrInvalidArgument naming the address otherwise); host devices give ErrUnsupported. The
// memory must stay allocated while the launch may run over it, and its producer's writes must be
// ordered before the launch (Device.WaitStream).
func (l *Launch) SetArgDeviceMemory(index int, address uint64, bytes int) error {
	if index < 0 || index >= len(l.keep) || bytes < 0 {
		return &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("[launch] SetArgDeviceMemory: index %d (of %d arguments) or size %d out of range", index, len(l.keep), bytes)}
	}
	var msg *C.char
	if err := check(C.go_metile_launch_set_arg_device_memory(&msg, l.raw, C.size_t(index), C.uint64_t(address), C.size_t(bytes)), msg); err != nil {
		return err
	}
	l.keep[index] = nil
	return nil
}

// SetGrid changes the grid for later runs.
func (l *Launch) SetGrid(grid [3]uint32) error {
	cgrid := cGrid(grid)
	var msg *C.char
	return check(C.go_metile_launch_set_grid(&msg, l.raw, &cgrid[0]), msg)
}

// SetOptions sets how later runs go: timeoutS, the time limit in seconds (0: none; negative:
// $METILE_TIMEOUT_S), past which a run fails naming the kernel (on cuda: when the host next waits
// for it, and the GPU is reset); stream, the CUDA stream to queue on (0: the device's own).
func (l *Launch) SetOptions(timeoutS float64, stream uint64) error {
	var o C.metile_launch_options
	o.struct_size = C.size_t(unsafe.Sizeof(o))
	o.timeout_s = C.double(timeoutS)
	o.stream = C.uint64_t(stream)
	var msg *C.char
	err := check(C.go_metile_launch_set_options(&msg, l.raw, &o), msg)
	runtime.KeepAlive(l)
	return err
}

// Run runs the launch (asynchronous on GPUs).
func (l *Launch) Run() error {
	var msg *C.char
	err := check(C.go_metile_launch_run(&msg, l.raw), msg)
	runtime.KeepAlive(l)
	return err
}

// Close releases the launch (idempotent: later calls return nil).
func (l *Launch) Close() error {
	if l.raw == nil {
		return nil
	}
	var msg *C.char
	err := check(C.go_metile_launch_release(&msg, l.raw), msg)
	l.raw, l.keep = nil, nil
	runtime.SetFinalizer(l, nil)
	return err
}

// AutotuneTime times each launch: warmup untimed runs and a synchronize, then rep (>= 1) timed
// runs each followed by a synchronize; it returns the median milliseconds per launch.
func AutotuneTime(launches []*Launch, warmup, rep int) ([]float64, error) {
	raws := make([]*C.metile_launch, len(launches)+1)
	for i, l := range launches {
		raws[i] = l.raw
	}
	ms := make([]C.double, len(launches)+1)
	var msg *C.char
	err := check(C.go_metile_autotune_time(&msg, &raws[0], C.size_t(len(launches)), C.int32_t(warmup),
		C.int32_t(rep), &ms[0]), msg)
	runtime.KeepAlive(launches)
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(launches))
	for i := range out {
		out[i] = float64(ms[i])
	}
	return out, nil
}

// AutotuneStore persists winner for key under the cache directory (nothing when the disk cache
// is disabled).
func AutotuneStore(key, winner string) error {
	ck, cw := C.CString(key), C.CString(winner)
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(cw))
	var msg *C.char
	return check(C.go_metile_autotune_store(&msg, ck, cw), msg)
}

// AutotuneLookup returns the stored winner for key; ok is false when there is none.
func AutotuneLookup(key string) (winner string, ok bool, err error) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var out, msg *C.char
	if err := check(C.go_metile_autotune_lookup(&msg, ck, &out), msg); err != nil {
		return "", false, err
	}
	if out == nil {
		return "", false, nil
	}
	defer C.metile_free(unsafe.Pointer(out))
	return C.GoString(out), true, nil
}
