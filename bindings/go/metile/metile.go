// Package metile binds the metile C ABI: build tile programs, compile them for a device
// ("cpu", "interp", "cuda", "metal", "metal-sim") and launch them on buffers the host can read.
//
// Handles are released by Close, or by a finalizer when the Go value is collected. Every error
// carries the library's status and message, read in the same cgo call as the failing function
// (see wrappers.h), so no goroutine needs to be locked to its OS thread.
package metile

/*
#cgo pkg-config: metile
#include "wrappers.h"
*/
import "C"

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"
)

// Status is a metile_status value (pinned by the C ABI).
type Status int

// Status values.
const (
	OK                      Status = 0
	StatusInvalidArgument   Status = 1
	StatusInvalidProgram    Status = 2
	StatusCompile           Status = 3
	StatusUnsupported       Status = 4
	StatusDeviceUnavailable Status = 5
	StatusDevice            Status = 6
	StatusOutOfMemory       Status = 7
	StatusIO                Status = 8
	StatusInternal          Status = 9
)

// String returns e.g. "METILE_ERROR_INVALID_ARGUMENT".
func (s Status) String() string {
	return C.GoString(C.metile_status_name(C.metile_status(s)))
}

// Error is a failed call: the status and the library's message.
type Error struct {
	Status  Status
	Message string
}

// Error returns "STATUS_NAME: message".
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", e.Status, e.Message)
}

// Is makes errors.Is(err, metile.ErrInvalidArgument) (and the other sentinels) match any
// *Error of that status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// Sentinels for errors.Is, one per failing status.
var (
	ErrInvalidArgument   = &Error{Status: StatusInvalidArgument}
	ErrInvalidProgram    = &Error{Status: StatusInvalidProgram}
	ErrCompile           = &Error{Status: StatusCompile}
	ErrUnsupported       = &Error{Status: StatusUnsupported}
	ErrDeviceUnavailable = &Error{Status: StatusDeviceUnavailable}
	ErrDevice            = &Error{Status: StatusDevice}
	ErrOutOfMemory       = &Error{Status: StatusOutOfMemory}
	ErrIO                = &Error{Status: StatusIO}
	ErrInternal          = &Error{Status: StatusInternal}
)

// errClosed is the error of a method called on a closed handle (errors.Is ErrInvalidArgument).
func errClosed(what string) error {
	return &Error{Status: StatusInvalidArgument, Message: "[api] use of a closed " + what}
}

// StatusName returns e.g. "METILE_ERROR_INVALID_ARGUMENT".
func StatusName(status Status) string { return status.String() }

// check turns a wrapper's status and error string into a Go error.
func check(status C.metile_status, msg *C.char) error {
	if status == C.METILE_OK {
		return nil
	}
	text := ""
	if msg != nil {
		text = C.GoString(msg)
		C.free(unsafe.Pointer(msg))
	}
	return &Error{Status: Status(status), Message: text}
}

// Version returns the library version, e.g. "0.1.0".
func Version() string { return C.GoString(C.metile_version_string()) }

// DevicesAvailable lists the devices usable on this machine.
func DevicesAvailable() ([]string, error) {
	var out, msg *C.char
	if err := check(C.go_metile_devices_available(&msg, &out), msg); err != nil {
		return nil, err
	}
	defer C.metile_free(unsafe.Pointer(out))
	s := C.GoString(out)
	if s == "" {
		return nil, nil
	}
	return strings.Split(s, ","), nil
}

// DeviceCount returns how many devices of kind this machine has: for "cuda" the GPUs (each
// opened as OpenDevice("cuda:N") for N below the count), for other kinds 1 when usable here; 0
// when the kind cannot start here. An unknown kind, or one with an index, is an error.
func DeviceCount(kind string) (int, error) {
	ckind := C.CString(kind)
	defer C.free(unsafe.Pointer(ckind))
	var out C.int32_t
	var msg *C.char
	if err := check(C.go_metile_device_count(&msg, ckind, &out), msg); err != nil {
		return 0, err
	}
	return int(out), nil
}

// DType is an element type.
type DType int

// Element types (metile_dtype values, pinned by the C ABI).
const (
	F32  DType = 1
	F16  DType = 2
	BF16 DType = 3
	I32  DType = 4
	U32  DType = 5
	I64  DType = 6
	Bool DType = 7
)

// Device is an open device.
type Device struct {
	raw  *C.metile_device
	name string
}

// OpenDevice opens a device by name; "" opens the default ($METILE_DEVICE, else metal, cuda, cpu).
func OpenDevice(name string) (*Device, error) {
	var cname *C.char
	if name != "" {
		cname = C.CString(name)
		defer C.free(unsafe.Pointer(cname))
	}
	var raw *C.metile_device
	var msg *C.char
	if err := check(C.go_metile_device_open(&msg, &raw, cname), msg); err != nil {
		return nil, err
	}
	d := &Device{raw: raw}
	runtime.SetFinalizer(d, (*Device).Close)
	info, err := d.Info()
	if err != nil {
		d.Close()
		return nil, err
	}
	d.name = info.Name
	return d, nil
}

// Close releases the device (idempotent: later calls return nil). Its error is the
// library's, e.g. for a handle it no longer knows.
func (d *Device) Close() error {
	if d.raw == nil {
		return nil
	}
	var msg *C.char
	err := check(C.go_metile_device_release(&msg, d.raw), msg)
	d.raw = nil
	runtime.SetFinalizer(d, nil)
	return err
}

// Name returns the device's name ("cpu", "cuda", ...), read when it was opened (so it needs no
// call and cannot fail, even after Close).
func (d *Device) Name() string { return d.name }

// Synchronize waits for every launch issued so far.
func (d *Device) Synchronize() error {
	var msg *C.char
	return check(C.go_metile_device_synchronize(&msg, d.raw), msg)
}

// Buffer is memory that host and device both address. It holds its own reference to its
// device, so it stays usable after the Device handle that made it is closed, and reading it
// (With, CopyOut, Float32s) first waits for the launches issued on that device.
type Buffer struct {
	raw   *C.metile_buffer
	bytes int
	dev   *C.metile_device // retained; synchronized before the host reads or writes
}

// newBuffer wraps raw, retaining dev for the buffer's life; on failure it releases raw.
func newBuffer(raw *C.metile_buffer, bytes int, dev *C.metile_device) (*Buffer, error) {
	var msg *C.char
	if err := check(C.go_metile_device_retain(&msg, dev), msg); err != nil {
		C.go_metile_buffer_release(&msg, raw)
		return nil, err
	}
	b := &Buffer{raw, bytes, dev}
	runtime.SetFinalizer(b, (*Buffer).Close)
	return b, nil
}

// Alloc returns a zeroed buffer.
func (d *Device) Alloc(bytes int) (*Buffer, error) {
	var raw *C.metile_buffer
	var msg *C.char
	if err := check(C.go_metile_buffer_alloc(&msg, &raw, d.raw, C.size_t(bytes)), msg); err != nil {
		return nil, err
	}
	return newBuffer(raw, bytes, d.raw)
}

// Number is an element type buffers hold (metile's f32, i32, u32, i64, i8, u8).
type Number interface {
	~float32 | ~int32 | ~uint32 | ~int64 | ~int8 | ~uint8
}

// BufferFrom returns a new buffer holding a copy of data.
func BufferFrom[T Number](d *Device, data []T) (*Buffer, error) {
	var zero T
	b, err := d.Alloc(int(unsafe.Sizeof(zero)) * len(data))
	if err != nil {
		return nil, err
	}
	if err := CopyIn(b, data); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// BufferFromFloat32 returns a new buffer holding a copy of data.
func (d *Device) BufferFromFloat32(data []float32) (*Buffer, error) { return BufferFrom(d, data) }

// With calls fn with a view of the buffer's contents as []T. The view is valid only while fn
// runs (the buffer is kept alive until fn returns): never keep it, copy out what you need.
// It first synchronizes the buffer's device, so the view holds what every launch issued so far
// wrote, and no launch still running races fn; a failed synchronize is the error, and fn does
// not run.
func With[T Number](b *Buffer, fn func([]T)) error {
	p, err := b.contents()
	if err != nil {
		return err
	}
	var zero T
	fn(unsafe.Slice((*T)(p), b.bytes/int(unsafe.Sizeof(zero))))
	runtime.KeepAlive(b)
	return nil
}

// CopyOut returns a copy of the buffer's contents as []T (it outlives the buffer).
func CopyOut[T Number](b *Buffer) ([]T, error) {
	var out []T
	err := With(b, func(v []T) { out = append([]T(nil), v...) })
	return out, err
}

// CopyIn copies data to the start of the buffer; more data than fits is an error.
func CopyIn[T Number](b *Buffer, data []T) error {
	var zero T
	if n := len(data) * int(unsafe.Sizeof(zero)); n > b.bytes {
		return &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("[api] CopyIn: %d bytes do not fit in a %d-byte buffer", n, b.bytes)}
	}
	return With(b, func(v []T) { copy(v, data) })
}

// Float32s returns a copy of the contents as float32s (see With for a view without a copy).
func (b *Buffer) Float32s() ([]float32, error) { return CopyOut[float32](b) }

// Close releases the buffer (idempotent: later calls return nil). Its error is the
// library's, e.g. for a handle it no longer knows.
func (b *Buffer) Close() error {
	if b.raw == nil {
		return nil
	}
	var msg *C.char
	err := check(C.go_metile_buffer_release(&msg, b.raw), msg)
	if err2 := check(C.go_metile_device_release(&msg, b.dev), msg); err == nil {
		err = err2
	}
	b.raw, b.dev = nil, nil
	runtime.SetFinalizer(b, nil)
	return err
}

// contents synchronizes the buffer's device and returns the host address of its memory.
func (b *Buffer) contents() (unsafe.Pointer, error) {
	if b.raw == nil {
		return nil, errClosed("Buffer")
	}
	var p unsafe.Pointer
	var msg *C.char
	if err := check(C.go_metile_device_synchronize(&msg, b.dev), msg); err != nil {
		return nil, err
	}
	if err := check(C.go_metile_buffer_contents(&msg, b.raw, &p), msg); err != nil {
		return nil, err
	}
	return p, nil
}

// Value is a value inside a Builder; the zero Value means "none" for optional operands.
type Value uint32 // a metile_value

// Builder builds a tile program op by op.
//
// Every op records the file:line of the code that called it (the first caller outside this
// package, found with runtime.Callers), so an error about the op names the user's line;
// SetLoc replaces that with explicit locations.
type Builder struct {
	raw       *C.metile_builder
	err       error  // the first error; later calls do nothing and Finish returns it
	manualLoc bool   // SetLoc was called: no automatic locations
	file      string // the location last given to the library
	line      int
}

// NewBuilder starts a kernel named name.
func NewBuilder(name string) (*Builder, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var raw *C.metile_builder
	var msg *C.char
	if err := check(C.go_metile_builder_create(&msg, &raw, cname), msg); err != nil {
		return nil, err
	}
	b := &Builder{raw: raw}
	runtime.SetFinalizer(b, (*Builder).Close)
	return b, nil
}

// Close releases the builder (idempotent: later calls return nil). Its error is the
// library's, e.g. for a handle it no longer knows.
func (b *Builder) Close() error {
	if b.raw == nil {
		return nil
	}
	var msg *C.char
	err := check(C.go_metile_builder_release(&msg, b.raw), msg)
	b.raw = nil
	runtime.SetFinalizer(b, nil)
	return err
}

// Err returns the first error the builder met.
func (b *Builder) Err() error { return b.err }

// value records the first failure so a program reads as straight-line code; check Err or Finish.
func (b *Builder) value(status C.metile_status, msg *C.char, v C.metile_value) Value {
	if err := check(status, msg); err != nil && b.err == nil {
		b.err = err
	}
	return Value(v)
}

// ok reports whether the builder can take another op, and if so attaches the caller's
// location to it. A closed builder records an error instead.
func (b *Builder) ok() bool {
	if b.err == nil && b.raw == nil {
		b.err = errClosed("Builder")
	}
	if b.err != nil {
		return false
	}
	if !b.manualLoc {
		b.here()
	}
	return true
}

// pkgDir is this package's source directory: frames of its non-test files are not the user's.
var pkgDir = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}()

// here gives the library the location of the first caller outside this package's own code.
func (b *Builder) here() {
	var pcs [32]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs[:])])
	for {
		f, more := frames.Next()
		if f.File != "" && (filepath.Dir(f.File) != pkgDir || strings.HasSuffix(f.File, "_test.go")) {
			if f.File != b.file || f.Line != b.line {
				c := C.CString(f.File)
				defer C.free(unsafe.Pointer(c))
				var msg *C.char
				// A failure only loses the location; the op itself still reports its error.
				if check(C.go_metile_builder_set_loc(&msg, b.raw, c, C.int32_t(f.Line)), msg) == nil {
					b.file, b.line = f.File, f.Line
				}
			}
			return
		}
		if !more {
			return
		}
	}
}

// SetLoc attaches file:line to the ops built from now on, and stops the automatic capture of
// each op's caller location for this builder.
func (b *Builder) SetLoc(file string, line int) {
	b.manualLoc = true
	if !b.ok() {
		return
	}
	c := C.CString(file)
	defer C.free(unsafe.Pointer(c))
	var msg *C.char
	b.value(C.go_metile_builder_set_loc(&msg, b.raw, c, C.int32_t(line)), msg, 0)
}

func (b *Builder) param(name string, dtype DType, pointer bool) Value {
	if !b.ok() {
		return 0
	}
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	var t C.metile_type
	t.dtype = C.metile_dtype(dtype)
	if pointer {
		t.is_pointer = 1
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_param(&msg, b.raw, c, &t, &v), msg, v)
}

// ParamPtr declares a pointer parameter; ParamScalar a scalar one.
func (b *Builder) ParamPtr(name string, dtype DType) Value { return b.param(name, dtype, true) }

// ParamScalar declares a scalar parameter.
func (b *Builder) ParamScalar(name string, dtype DType) Value { return b.param(name, dtype, false) }

// ConstI32 and ConstF32 make constants.
func (b *Builder) ConstI32(x int32) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_const_int(&msg, b.raw, C.METILE_DTYPE_I32, C.int64_t(x), &v), msg, v)
}

// ConstF32 is an f32 constant.
func (b *Builder) ConstF32(x float32) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_const_float(&msg, b.raw, C.METILE_DTYPE_F32, C.double(x), &v), msg, v)
}

// ProgramID is the program instance's index along axis.
func (b *Builder) ProgramID(axis int) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_grid(&msg, b.raw, C.METILE_OP_PROGRAM_ID, C.int32_t(axis), &v), msg, v)
}

// Arange is start + [0, size).
func (b *Builder) Arange(start Value, size int64) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_arange(&msg, b.raw, C.metile_value(start), C.int64_t(size), &v), msg, v)
}

// Broadcast broadcasts x to shape (1-D or 2-D).
func (b *Builder) Broadcast(x Value, shape ...int64) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_broadcast(&msg, b.raw, C.metile_value(x), C.int32_t(len(shape)),
		(*C.int64_t)(unsafe.Pointer(&shape[0])), &v), msg, v)
}

// Short names for the reductions (every op code is in the generated ops.go).
const (
	OpSum = OpReduceSum
	OpMax = OpReduceMax
	OpMin = OpReduceMin
)

// Binary applies a binary op or comparison (promoting and broadcasting like numpy).
func (b *Builder) Binary(op int, x, y Value) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_binary(&msg, b.raw, C.metile_op(op), C.metile_value(x), C.metile_value(y), &v), msg, v)
}

// Add is x + y (Sub, Mul, Div, Maximum and Lt likewise: Binary with that op).
func (b *Builder) Add(x, y Value) Value     { return b.Binary(OpAdd, x, y) }
func (b *Builder) Sub(x, y Value) Value     { return b.Binary(OpSub, x, y) }
func (b *Builder) Mul(x, y Value) Value     { return b.Binary(OpMul, x, y) }
func (b *Builder) Div(x, y Value) Value     { return b.Binary(OpDiv, x, y) }
func (b *Builder) Maximum(x, y Value) Value { return b.Binary(OpMaximum, x, y) }
func (b *Builder) Lt(x, y Value) Value      { return b.Binary(OpLt, x, y) }

// Unary applies a unary op.
func (b *Builder) Unary(op int, x Value) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_unary(&msg, b.raw, C.metile_op(op), C.metile_value(x), &v), msg, v)
}

// Exp is e**x.
func (b *Builder) Exp(x Value) Value { return b.Unary(OpExp, x) }

// Reduce reduces a tile to a scalar (axis -1) or along an axis of a 2-D tile.
func (b *Builder) Reduce(op int, x Value, axis int) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_reduce(&msg, b.raw, C.metile_op(op), C.metile_value(x), C.int32_t(axis), &v), msg, v)
}

// PtrOffset is ptr + offsets.
func (b *Builder) PtrOffset(ptr, offsets Value) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_ptr_offset(&msg, b.raw, C.metile_value(ptr), C.metile_value(offsets), &v), msg, v)
}

// Load reads through ptrs. Masked-off lanes touch no memory; when other is the zero Value they
// are inactive (reductions, dots and stores skip them), else active with the value other.
func (b *Builder) Load(ptrs, mask, other Value) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_load(&msg, b.raw, C.metile_value(ptrs), C.metile_value(mask), C.metile_value(other), &v), msg, v)
}

// Atomic is an atomic read-modify-write (op: OpAtomicAdd, ...; cmp only for the CAS op, else
// the zero Value) where mask (zero Value: everywhere); it gives the old values, 0 where masked.
func (b *Builder) Atomic(op int, ptrs, cmp, value, mask Value) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_atomic(&msg, b.raw, C.metile_op(op), C.metile_value(ptrs), C.metile_value(cmp), C.metile_value(value), C.metile_value(mask), &v), msg, v)
}

// Store writes value through ptrs where mask (zero Value: everywhere).
func (b *Builder) Store(ptrs, value, mask Value) {
	if !b.ok() {
		return
	}
	var msg *C.char
	b.value(C.go_metile_builder_store(&msg, b.raw, C.metile_value(ptrs), C.metile_value(value), C.metile_value(mask)), msg, 0)
}

// TileLoad reads the rows x cols tile at (row, col); bounds are (boundRows, boundCols) or zero Values.
func (b *Builder) TileLoad(ptr, row, col, stride Value, rows, cols int64, boundRows, boundCols Value) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_tile_load(&msg, b.raw, C.metile_value(ptr), C.metile_value(row), C.metile_value(col),
		C.metile_value(stride), C.int64_t(rows), C.int64_t(cols), C.metile_value(boundRows), C.metile_value(boundCols), &v), msg, v)
}

// TileStore writes a 2-D tile.
func (b *Builder) TileStore(ptr, row, col, stride, value, boundRows, boundCols Value) {
	if !b.ok() {
		return
	}
	var msg *C.char
	b.value(C.go_metile_builder_tile_store(&msg, b.raw, C.metile_value(ptr), C.metile_value(row), C.metile_value(col),
		C.metile_value(stride), C.metile_value(value), C.metile_value(boundRows), C.metile_value(boundCols)), msg, 0)
}

// Dot is acc + a @ bm.
func (b *Builder) Dot(a, bm, acc Value) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_dot(&msg, b.raw, C.metile_value(a), C.metile_value(bm), C.metile_value(acc), &v), msg, v)
}

// DotPrecision is how an f32 dot rounds (metile_dot_precision).
type DotPrecision int

// DotPrecision values: Default defers to CompileOptions.DotPrecision (f32 accuracy unless set).
const (
	DotPrecisionDefault DotPrecision = 0
	DotPrecisionIEEE    DotPrecision = 1
	DotPrecisionTF32    DotPrecision = 2
	DotPrecisionTF32x3  DotPrecision = 3
)

// DotWithPrecision is acc + a @ bm, rounded as precision says.
func (b *Builder) DotWithPrecision(a, bm, acc Value, precision DotPrecision) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(C.go_metile_builder_dot_with_precision(&msg, b.raw, C.metile_value(a), C.metile_value(bm),
		C.metile_value(acc), C.metile_dot_precision(precision), &v), msg, v)
}

// ForRange builds `for iv in range(start, end, step)` with loop-carried values: body receives
// the induction variable and the carried values and returns the next ones.
func (b *Builder) ForRange(start, end, step Value, inits []Value, body func(iv Value, carried []Value) []Value) []Value {
	if !b.ok() {
		return make([]Value, len(inits))
	}
	n := len(inits)
	cin := make([]C.metile_value, n+1)
	for i, v := range inits {
		cin[i] = C.metile_value(v)
	}
	carried := make([]C.metile_value, n+1)
	var iv C.metile_value
	var msg *C.char
	b.value(C.go_metile_builder_for_begin(&msg, b.raw, C.metile_value(start), C.metile_value(end), C.metile_value(step),
		&cin[0], C.size_t(n), &iv, &carried[0]), msg, 0)
	if !b.ok() {
		return make([]Value, n)
	}
	goCarried := make([]Value, n)
	for i := range goCarried {
		goCarried[i] = Value(carried[i])
	}
	yields := body(Value(iv), goCarried)
	cy := make([]C.metile_value, len(yields)+1)
	for i, v := range yields {
		cy[i] = C.metile_value(v)
	}
	if !b.ok() { // also names ForRange's caller in errors about the loop's end
		return make([]Value, len(yields))
	}
	results := make([]C.metile_value, len(yields)+1)
	var msg2 *C.char
	b.value(C.go_metile_builder_for_end(&msg2, b.raw, &cy[0], C.size_t(len(yields)), &results[0]), msg2, 0)
	out := make([]Value, len(yields))
	for i := range out {
		out[i] = Value(results[i])
	}
	return out
}

func cValues(vs []Value) []C.metile_value {
	out := make([]C.metile_value, len(vs)+1)
	for i, v := range vs {
		out[i] = C.metile_value(v)
	}
	return out
}

func goValues(vs []C.metile_value, n int) []Value {
	out := make([]Value, n)
	for i := range out {
		out[i] = Value(vs[i])
	}
	return out
}

// IfElse builds `if cond` on a bool scalar (uniform per program: every thread of a program
// takes the same branch): each function builds its branch and returns the values it gives (the
// same number and types in both); the if's results are returned.
func (b *Builder) IfElse(cond Value, then func() []Value, otherwise func() []Value) []Value {
	if !b.ok() {
		return nil
	}
	var msg *C.char
	b.value(C.go_metile_builder_if_begin(&msg, b.raw, C.metile_value(cond)), msg, 0)
	if !b.ok() {
		return nil
	}
	t := then()
	ct := cValues(t)
	var msg2 *C.char
	b.value(C.go_metile_builder_if_else(&msg2, b.raw, &ct[0], C.size_t(len(t))), msg2, 0)
	if !b.ok() {
		return make([]Value, len(t))
	}
	e := otherwise()
	ce := cValues(e)
	results := make([]C.metile_value, len(e)+1)
	var msg3 *C.char
	b.value(C.go_metile_builder_if_end(&msg3, b.raw, &ce[0], C.size_t(len(e)), &results[0]), msg3, 0)
	return goValues(results, len(e))
}

// While builds a `while` loop with carried values: cond receives the carried values and returns
// the bool scalar condition (uniform per program) and the values passed on (the carried types);
// body receives those and returns the next carried values. Returns the values after the loop.
func (b *Builder) While(inits []Value, cond func(carried []Value) (Value, []Value), body func(passed []Value) []Value) []Value {
	if !b.ok() {
		return make([]Value, len(inits))
	}
	n := len(inits)
	cin := cValues(inits)
	carried := make([]C.metile_value, n+1)
	var msg *C.char
	b.value(C.go_metile_builder_while_begin(&msg, b.raw, &cin[0], C.size_t(n), &carried[0]), msg, 0)
	if !b.ok() {
		return make([]Value, n)
	}
	c, passed := cond(goValues(carried, n))
	cp := cValues(passed)
	args := make([]C.metile_value, len(passed)+1)
	var msg2 *C.char
	b.value(C.go_metile_builder_while_do(&msg2, b.raw, C.metile_value(c), &cp[0], C.size_t(len(passed)), &args[0]), msg2, 0)
	if !b.ok() {
		return make([]Value, n)
	}
	yields := body(goValues(args, len(passed)))
	cy := cValues(yields)
	results := make([]C.metile_value, len(yields)+1)
	var msg3 *C.char
	b.value(C.go_metile_builder_while_end(&msg3, b.raw, &cy[0], C.size_t(len(yields)), &results[0]), msg3, 0)
	return goValues(results, len(yields))
}

// Program is a verified tile program.
type Program struct{ raw *C.metile_program }

// Finish verifies the program; it returns the builder's first error if there was one.
func (b *Builder) Finish() (*Program, error) {
	if b.err != nil {
		return nil, b.err
	}
	var raw *C.metile_program
	var msg *C.char
	if err := check(C.go_metile_builder_finish(&msg, b.raw, &raw), msg); err != nil {
		return nil, err
	}
	p := &Program{raw}
	runtime.SetFinalizer(p, (*Program).Close)
	return p, nil
}

// Close releases the program (idempotent: later calls return nil). Its error is the
// library's, e.g. for a handle it no longer knows.
func (p *Program) Close() error {
	if p.raw == nil {
		return nil
	}
	var msg *C.char
	err := check(C.go_metile_program_release(&msg, p.raw), msg)
	p.raw = nil
	runtime.SetFinalizer(p, nil)
	return err
}

// Text returns the canonical text form.
func (p *Program) Text() (string, error) {
	var out, msg *C.char
	if err := check(C.go_metile_program_print(&msg, p.raw, &out), msg); err != nil {
		return "", err
	}
	defer C.metile_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// Kernel is a program compiled for a device.
type Kernel struct{ raw *C.metile_kernel }

// Compile compiles p for d (or loads it from the compile cache).
func Compile(d *Device, p *Program) (*Kernel, error) {
	var raw *C.metile_kernel
	var msg *C.char
	if err := check(C.go_metile_kernel_compile(&msg, &raw, d.raw, p.raw, nil), msg); err != nil {
		return nil, err
	}
	k := &Kernel{raw}
	runtime.SetFinalizer(k, (*Kernel).Close)
	return k, nil
}

// Close releases the kernel (idempotent: later calls return nil). Its error is the
// library's, e.g. for a handle it no longer knows.
func (k *Kernel) Close() error {
	if k.raw == nil {
		return nil
	}
	var msg *C.char
	err := check(C.go_metile_kernel_release(&msg, k.raw), msg)
	k.raw = nil
	runtime.SetFinalizer(k, nil)
	return err
}

// Arg is one launch argument: BufferArg, I32Arg or F32Arg.
type Arg struct {
	c    C.metile_arg
	keep *Buffer // alive until the launch call returns (Launch keeps its args alive)
}

// BufferArg passes a buffer (kept alive while a Launch may use it).
func BufferArg(b *Buffer) Arg {
	var a Arg
	a.c.kind = C.METILE_ARG_BUFFER
	a.c.buffer = b.raw
	a.keep = b
	return a
}

// I32Arg passes an i32 scalar.
func I32Arg(v int32) Arg {
	var a Arg
	a.c.kind = C.METILE_ARG_I32
	a.c.i = C.int64_t(v)
	return a
}

// F32Arg passes an f32 scalar.
func F32Arg(v float32) Arg {
	var a Arg
	a.c.kind = C.METILE_ARG_F32
	a.c.f = C.double(v)
	return a
}

// CancelLaunches stops the launches running now on cpu, interp and metal-sim, from any
// goroutine: each fails with ErrDevice ("cancelled"), its outputs partly written; launches
// started afterwards run normally. cuda kernels stop at a loop back-edge and the GPU is reset
// (see the C header's metile_cancel_launches); metal is not affected.
func CancelLaunches() {
	C.metile_cancel_launches()
}

// Launch runs the kernel over grid program instances (asynchronous on GPUs).
func (k *Kernel) Launch(grid [3]uint32, args ...Arg) error {
	cargs := make([]C.metile_arg, len(args)+1)
	for i, a := range args {
		cargs[i] = a.c
	}
	cgrid := [3]C.uint32_t{C.uint32_t(grid[0]), C.uint32_t(grid[1]), C.uint32_t(grid[2])}
	var msg *C.char
	err := check(C.go_metile_kernel_launch(&msg, k.raw, &cgrid[0], &cargs[0], C.size_t(len(args))), msg)
	runtime.KeepAlive(args)
	return err
}
