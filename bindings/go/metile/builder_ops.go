package metile

/*
#include "wrappers.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Type is a value's or parameter's type: a scalar (Rank 0) or 1-D/2-D tile of DType, or, when
// Pointer, a pointer (tile) to DType elements (in threadgroup memory when Threadgroup).
type Type struct {
	DType       DType
	Rank        int
	Shape       [2]int64
	Pointer     bool
	Threadgroup bool
}

func typeFromC(t C.metile_type) Type {
	return Type{DType: DType(t.dtype), Rank: int(t.rank), Shape: [2]int64{int64(t.shape[0]), int64(t.shape[1])},
		Pointer: t.is_pointer != 0, Threadgroup: t.address_space == C.METILE_ADDRESS_SPACE_THREADGROUP}
}

// out runs one builder call that writes a value, unless an earlier call failed.
func (b *Builder) out(call func(msg **C.char, v *C.metile_value) C.metile_status) Value {
	if !b.ok() {
		return 0
	}
	var v C.metile_value
	var msg *C.char
	return b.value(call(&msg, &v), msg, v)
}

// do runs one builder call without a result, unless an earlier call failed.
func (b *Builder) do(call func(msg **C.char) C.metile_status) {
	if !b.ok() {
		return
	}
	var msg *C.char
	b.value(call(&msg), msg, 0)
}

// SetConstexpr records a compile-time constant the program was specialized with.
func (b *Builder) SetConstexpr(name, value string) {
	cn, cv := C.CString(name), C.CString(value)
	defer C.free(unsafe.Pointer(cn))
	defer C.free(unsafe.Pointer(cv))
	b.do(func(m **C.char) C.metile_status { return C.go_metile_builder_set_constexpr(m, b.raw, cn, cv) })
}

// SetNumThreads fixes the thread count T of a kernel that uses the SIMT view.
func (b *Builder) SetNumThreads(n int) {
	b.do(func(m **C.char) C.metile_status { return C.go_metile_builder_set_num_threads(m, b.raw, C.int32_t(n)) })
}

// TypeOf returns the type of a value built so far.
func (b *Builder) TypeOf(x Value) (Type, error) {
	var t C.metile_type
	var msg *C.char
	if err := check(C.go_metile_builder_value_type(&msg, b.raw, C.metile_value(x), &t), msg); err != nil {
		return Type{}, err
	}
	return typeFromC(t), nil
}

// ConstInt and ConstFloat make constants of any dtype (ConstI32, ConstF32 are shorthands).
func (b *Builder) ConstInt(dtype DType, x int64) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_const_int(m, b.raw, C.metile_dtype(dtype), C.int64_t(x), v)
	})
}

// ConstFloat is a float constant of dtype.
func (b *Builder) ConstFloat(dtype DType, x float64) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_const_float(m, b.raw, C.metile_dtype(dtype), C.double(x), v)
	})
}

// NumPrograms is the grid's size along axis.
func (b *Builder) NumPrograms(axis int) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_grid(m, b.raw, C.METILE_OP_NUM_PROGRAMS, C.int32_t(axis), v)
	})
}

// Cast converts x to dtype.
func (b *Builder) Cast(x Value, dtype DType) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_cast(m, b.raw, C.metile_value(x), C.metile_dtype(dtype), v)
	})
}

// Bitcast reads x's bits as dtype, a dtype of the same width (Triton's bitcast).
func (b *Builder) Bitcast(x Value, dtype DType) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_bitcast(m, b.raw, C.metile_value(x), C.metile_dtype(dtype), v)
	})
}

// Reshape gives x's elements (row-major order kept) a new shape of the same element count.
func (b *Builder) Reshape(x Value, shape ...int64) Value {
	if len(shape) == 0 {
		shape = []int64{0} // rank 0 is not a shape: the library names the problem
	}
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_reshape(m, b.raw, C.metile_value(x), C.int32_t(len(shape)),
			(*C.int64_t)(unsafe.Pointer(&shape[0])), v)
	})
}

// Select is where(cond, x, y), promoted and broadcast like binary ops.
func (b *Builder) Select(cond, x, y Value) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_select(m, b.raw, C.metile_value(cond), C.metile_value(x), C.metile_value(y), v)
	})
}

// Role builds body in a region whose side effects run only for simdgroup range role of
// numRoles (even split), or, when numSgs > 0, for simdgroups [firstSg, firstSg+numSgs).
func (b *Builder) Role(role, numRoles, firstSg, numSgs int, body func()) {
	b.do(func(m **C.char) C.metile_status {
		return C.go_metile_builder_role_begin(m, b.raw, C.int32_t(role), C.int32_t(numRoles),
			C.int32_t(firstSg), C.int32_t(numSgs))
	})
	if !b.ok() {
		return
	}
	body()
	b.do(func(m **C.char) C.metile_status { return C.go_metile_builder_role_end(m, b.raw) })
}

// Simt is a SIMT view op without operands: OpThreadId, OpSimdLaneId (T-element i32 tiles) or
// OpBarrier (whose Value is 0).
func (b *Builder) Simt(op int) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_simt(m, b.raw, C.metile_op(op), v)
	})
}

// Simd is OpSimdShuffleXor (x[i ^ laneOrMask]) or OpSimdBroadcast (x[(i &^ 31) + laneOrMask]).
func (b *Builder) Simd(op int, x, laneOrMask Value) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_simd(m, b.raw, C.metile_op(op), C.metile_value(x), C.metile_value(laneOrMask), v)
	})
}

// Shared is threadgroup memory of size elements of dtype; it gives a threadgroup pointer.
func (b *Builder) Shared(size int64, dtype DType) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_shared(m, b.raw, C.int64_t(size), C.metile_dtype(dtype), v)
	})
}

// TileSwizzle remaps program ids for locality ("morton", "hilbert", "diagonal", "grouped",
// "grouped2/4/8", "linear", "auto"); a bijection on any grid shape.
func (b *Builder) TileSwizzle(pidM, pidN Value, pattern string, blockSize int) (Value, Value) {
	if !b.ok() {
		return 0, 0
	}
	cp := C.CString(pattern)
	defer C.free(unsafe.Pointer(cp))
	var om, on C.metile_value
	var msg *C.char
	b.value(C.go_metile_builder_tile_swizzle(&msg, b.raw, C.metile_value(pidM), C.metile_value(pidN), cp,
		C.int32_t(blockSize), &om, &on), msg, 0)
	return Value(om), Value(on)
}

// ParseProgram parses (and verifies) the canonical text form that Program.Text writes.
func ParseProgram(text string) (*Program, error) {
	ct := C.CString(text)
	defer C.free(unsafe.Pointer(ct))
	var raw *C.metile_program
	var msg *C.char
	if err := check(C.go_metile_program_parse(&msg, &raw, ct), msg); err != nil {
		return nil, err
	}
	p := &Program{raw}
	runtime.SetFinalizer(p, (*Program).Close)
	return p, nil
}

// Clone returns a second handle to the same program (retained); each is closed on its own.
func (p *Program) Clone() (*Program, error) {
	var msg *C.char
	if err := check(C.go_metile_program_retain(&msg, p.raw), msg); err != nil {
		return nil, err
	}
	c := &Program{p.raw}
	runtime.SetFinalizer(c, (*Program).Close)
	return c, nil
}

// Name returns the kernel's name ("" for a closed program).
func (p *Program) Name() string {
	s := C.GoString(C.metile_program_name(p.raw))
	runtime.KeepAlive(p)
	return s
}

// Param is one kernel parameter: its name, type and, for pointers, whether the program reads
// and writes memory through it.
type Param struct {
	Name          string
	Type          Type
	Reads, Writes bool
}

// Params lists the kernel's parameters in order.
func (p *Program) Params() ([]Param, error) {
	defer runtime.KeepAlive(p) // names live as long as the program
	var n C.size_t
	var msg *C.char
	if err := check(C.go_metile_program_num_params(&msg, p.raw, &n), msg); err != nil {
		return nil, err
	}
	out := make([]Param, int(n))
	for i := range out {
		var name *C.char
		var t C.metile_type
		var access C.uint32_t
		if err := check(C.go_metile_program_param(&msg, p.raw, C.size_t(i), &name, &t), msg); err != nil {
			return nil, err
		}
		if err := check(C.go_metile_program_param_access(&msg, p.raw, C.size_t(i), &access), msg); err != nil {
			return nil, err
		}
		out[i] = Param{Name: C.GoString(name), Type: typeFromC(t),
			Reads: access&C.METILE_PARAM_READ != 0, Writes: access&C.METILE_PARAM_WRITE != 0}
	}
	return out, nil
}

// Scan is the inclusive scan of x along axis: op is OpCumsum or OpCumprod; reverse scans from
// the end. Inactive lanes count as the identity and stay inactive.
func (b *Builder) Scan(op int, x Value, axis int, reverse bool) Value {
	rev := 0
	if reverse {
		rev = 1
	}
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_scan(m, b.raw, C.metile_op(op), C.metile_value(x), C.int32_t(axis), C.int32_t(rev), v)
	})
}

// Trans is the transpose of a 2-D tile.
func (b *Builder) Trans(x Value) Value {
	return b.out(func(m **C.char, v *C.metile_value) C.metile_status {
		return C.go_metile_builder_trans(m, b.raw, C.metile_value(x), v)
	})
}

// DevicePrint prints values from the kernel, one line per active element, after prefix (UTF-8
// without control characters, at most 256 bytes); lines go to the process's stdout (or the CUDA
// printf buffer) in an unspecified order between programs and threads.
func (b *Builder) DevicePrint(prefix string, values ...Value) {
	cp := C.CString(prefix)
	defer C.free(unsafe.Pointer(cp))
	var vs *C.metile_value
	if len(values) > 0 {
		cv := make([]C.metile_value, len(values))
		for i, v := range values {
			cv[i] = C.metile_value(v)
		}
		vs = &cv[0]
		defer runtime.KeepAlive(cv)
	}
	b.do(func(m **C.char) C.metile_status {
		return C.go_metile_builder_device_print(m, b.raw, cp, vs, C.size_t(len(values)))
	})
}
