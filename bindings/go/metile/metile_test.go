package metile

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func random(n int, seed uint64) []float32 {
	out := make([]float32, n)
	for i := range out {
		seed = seed*6364136223846793005 + 1442695040888963407
		out[i] = float32(seed>>33)/float32(1<<31)*2 - 1
	}
	return out
}

func device(t *testing.T) *Device {
	d, err := OpenDevice("")
	if err != nil {
		t.Fatalf("the default device does not open: %v", err)
	}
	return d
}

func TestVectorAdd(t *testing.T) {
	const block = 256
	n := 1000 // not a multiple of the block
	b, err := NewBuilder("vadd")
	if err != nil {
		t.Fatal(err)
	}
	x, y, out := b.ParamPtr("x", F32), b.ParamPtr("y", F32), b.ParamPtr("out", F32)
	nv := b.ParamScalar("n", I32)
	offs := b.Arange(b.Mul(b.ProgramID(0), b.ConstI32(block)), block)
	mask := b.Lt(offs, nv)
	sum := b.Add(b.Load(b.PtrOffset(x, offs), mask, 0), b.Load(b.PtrOffset(y, offs), mask, 0))
	b.Store(b.PtrOffset(out, offs), sum, mask)
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	d := device(t)
	k, err := Compile(d, prog)
	if err != nil {
		t.Fatal(err)
	}
	hx, hy := random(n, 1), random(n, 2)
	bx, _ := d.BufferFromFloat32(hx)
	by, _ := d.BufferFromFloat32(hy)
	bo, _ := d.Alloc(4 * n)
	if err := k.Launch([3]uint32{uint32((n + block - 1) / block), 1, 1},
		BufferArg(bx), BufferArg(by), BufferArg(bo), I32Arg(int32(n))); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got, err := bo.Float32s() // no Synchronize: reading waits for the launch
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != hx[i]+hy[i] {
			t.Fatalf("element %d: %v != %v", i, v, hx[i]+hy[i])
		}
	}
}

func TestSoftmax(t *testing.T) {
	const block = 128
	rows, cols := 5, 300
	b, _ := NewBuilder("softmax")
	x, out := b.ParamPtr("x", F32), b.ParamPtr("out", F32)
	n := b.ParamScalar("n", I32)
	rowStart := b.Mul(b.ProgramID(0), n)
	zero, step := b.ConstI32(0), b.ConstI32(block)
	negInf := b.ConstF32(float32(math.Inf(-1)))
	load := func(i Value, other Value) Value {
		c := b.Arange(i, block)
		return b.Load(b.PtrOffset(b.PtrOffset(x, rowStart), c), b.Lt(c, n), other)
	}
	m := b.ForRange(zero, n, step, []Value{b.Broadcast(negInf, block)}, func(i Value, c []Value) []Value {
		return []Value{b.Maximum(c[0], load(i, negInf))}
	})
	mx := b.Reduce(OpMax, m[0], -1)
	s := b.ForRange(zero, n, step, []Value{b.Broadcast(b.ConstF32(0), block)}, func(i Value, c []Value) []Value {
		return []Value{b.Add(c[0], b.Exp(b.Sub(load(i, negInf), mx)))}
	})
	total := b.Reduce(OpSum, s[0], -1)
	b.ForRange(zero, n, step, nil, func(i Value, _ []Value) []Value {
		c := b.Arange(i, block)
		v := b.Div(b.Exp(b.Sub(load(i, 0), mx)), total)
		b.Store(b.PtrOffset(b.PtrOffset(out, rowStart), c), v, b.Lt(c, n))
		return nil
	})
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	d := device(t)
	k, err := Compile(d, prog)
	if err != nil {
		t.Fatal(err)
	}
	hx := random(rows*cols, 3)
	bx, _ := d.BufferFromFloat32(hx)
	bo, _ := d.Alloc(4 * rows * cols)
	if err := k.Launch([3]uint32{uint32(rows), 1, 1}, BufferArg(bx), BufferArg(bo), I32Arg(int32(cols))); err != nil {
		t.Fatal(err)
	}
	got, err := bo.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rows; r++ {
		row := hx[r*cols : (r+1)*cols]
		mxv := math.Inf(-1)
		for _, v := range row {
			mxv = math.Max(mxv, float64(v))
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v) - mxv)
		}
		for c := 0; c < cols; c++ {
			want := math.Exp(float64(row[c])-mxv) / sum
			if have := float64(got[r*cols+c]); math.Abs(have-want) > 1e-5+1e-5*want {
				t.Fatalf("(%d,%d): %v vs %v", r, c, have, want)
			}
		}
	}
}

func TestGemmWithBounds(t *testing.T) {
	const bm, bn, bk = 16, 16, 8
	m, n, kdim := 37, 29, 21
	b, _ := NewBuilder("gemm")
	a, bb, c := b.ParamPtr("a", F32), b.ParamPtr("b", F32), b.ParamPtr("c", F32)
	mv, nv, kv := b.ParamScalar("M", I32), b.ParamScalar("N", I32), b.ParamScalar("K", I32)
	row, col := b.Mul(b.ProgramID(0), b.ConstI32(bm)), b.Mul(b.ProgramID(1), b.ConstI32(bn))
	acc := b.ForRange(b.ConstI32(0), kv, b.ConstI32(bk), []Value{b.Broadcast(b.ConstF32(0), bm, bn)},
		func(kk Value, carried []Value) []Value {
			ta := b.TileLoad(a, row, kk, kv, bm, bk, mv, kv)
			tb := b.TileLoad(bb, kk, col, nv, bk, bn, kv, nv)
			return []Value{b.Dot(ta, tb, carried[0])}
		})
	b.TileStore(c, row, col, nv, acc[0], mv, nv)
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	d := device(t)
	k, err := Compile(d, prog)
	if e, ok := err.(*Error); ok && e.Status == StatusUnsupported {
		t.Skipf("device %s: %v", d.Name(), err)
	} else if err != nil {
		t.Fatal(err)
	}
	ha, hb := random(m*kdim, 4), random(kdim*n, 5)
	ba, _ := d.BufferFromFloat32(ha)
	bbuf, _ := d.BufferFromFloat32(hb)
	bc, _ := d.Alloc(4 * m * n)
	grid := [3]uint32{uint32((m + bm - 1) / bm), uint32((n + bn - 1) / bn), 1}
	if err := k.Launch(grid, BufferArg(ba), BufferArg(bbuf), BufferArg(bc), I32Arg(int32(m)), I32Arg(int32(n)), I32Arg(int32(kdim))); err != nil {
		t.Fatal(err)
	}
	got, err := bc.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want := 0.0
			for p := 0; p < kdim; p++ {
				want += float64(ha[i*kdim+p]) * float64(hb[p*n+j])
			}
			if have := float64(got[i*n+j]); math.Abs(have-want) > 1e-4+1e-4*math.Abs(want) {
				t.Fatalf("(%d,%d): %v vs %v", i, j, have, want)
			}
		}
	}
}

func TestErrorsCarryStatusAndLocation(t *testing.T) {
	b, _ := NewBuilder("bad")
	b.SetLoc("bad.go", 42)
	b.Add(b.Arange(0, 8), b.Arange(0, 16))
	_, err := b.Finish()
	e, ok := err.(*Error)
	if !ok || e.Status != StatusInvalidProgram || !strings.Contains(e.Message, "bad.go:42") {
		t.Fatalf("unexpected error %v", err)
	}
	if _, err := OpenDevice("no-such-device"); err == nil || !strings.Contains(err.Error(), "no-such-device") {
		t.Fatalf("unexpected error %v", err)
	}
}

// Without SetLoc, each op records the file:line of the code that called it.
func TestErrorsNameTheCallersLineAutomatically(t *testing.T) {
	b, _ := NewBuilder("bad")
	x, y := b.Arange(0, 8), b.Arange(0, 16)
	_, file, line, _ := runtime.Caller(0)
	b.Add(x, y) // line + 1
	_, err := b.Finish()
	if want := fmt.Sprintf("%s:%d", file, line+1); !errors.Is(err, ErrInvalidProgram) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %s in %v", want, err)
	}
	// Inside a loop body: the body's line, not ForRange's.
	b, _ = NewBuilder("bad_loop")
	b.ForRange(b.ConstI32(0), b.ConstI32(4), b.ConstI32(1), nil, func(iv Value, _ []Value) []Value {
		_, _, line, _ = runtime.Caller(0)
		b.Add(b.Arange(0, 8), b.Arange(0, 16)) // line + 1
		return nil
	})
	if want := fmt.Sprintf("%s:%d", file, line+1); !strings.Contains(fmt.Sprint(b.Err()), want) {
		t.Fatalf("want %s in %v", want, b.Err())
	}
}

func TestErrorsMatchSentinelsWithErrorsIs(t *testing.T) {
	_, err := OpenDevice("no-such-device")
	if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrDevice) {
		t.Fatalf("errors.Is does not match the status: %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusInvalidArgument ||
		e.Status.String() != "METILE_ERROR_INVALID_ARGUMENT" {
		t.Fatalf("unexpected error %#v", err)
	}
}

func TestCloseReturnsAnErrorAndIsIdempotent(t *testing.T) {
	d := device(t)
	b, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := CopyOut[float32](b); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("reading a closed buffer: %v", err)
	}
	var closer interface{ Close() error } = d // an io.Closer
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
}

// A copy from CopyOut (or Float32s) outlives its buffer: the buffer is closed and collected
// (finalizers run) before the copy is read. Views exist only inside With.
func TestCopiesOutliveTheirBuffer(t *testing.T) {
	d := device(t)
	b, err := BufferFrom(d, []int32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	got, err := CopyOut[int32](b)
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	b = nil
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	for i, v := range got {
		if v != int32(i+1) {
			t.Fatalf("element %d = %d", i, v)
		}
	}
	if len(f) != 4 {
		t.Fatalf("Float32s gave %d elements", len(f))
	}
	u8, err := BufferFrom(d, []uint8{7, 8, 9})
	if err != nil {
		t.Fatal(err)
	}
	defer u8.Close()
	sum := 0
	if err := With(u8, func(v []uint8) {
		for _, x := range v {
			sum += int(x)
		}
		v[0] = 1
	}); err != nil {
		t.Fatal(err)
	}
	again, _ := CopyOut[uint8](u8)
	if sum != 24 || again[0] != 1 {
		t.Fatalf("With: sum %d, first %d", sum, again[0])
	}
	if err := CopyIn(u8, []uint8{1, 2, 3, 4}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("CopyIn of too much: %v", err)
	}
}

// Every function of metile.h that reports a status has a same-call error wrapper, and the
// wrappers call the header's functions with its own parameter types (the C compiler checks them
// when cgo builds wrappers.h), so the binding cannot drift from the header.
func TestEveryHeaderFunctionIsWrapped(t *testing.T) {
	header, err := os.ReadFile("../../../include/metile/metile.h")
	if err != nil {
		t.Fatal(err)
	}
	wrappers, _ := os.ReadFile("wrappers.h")
	re := regexp.MustCompile(`METILE_API\s+metile_status\s+(metile_\w+)\s*\(`)
	for _, m := range re.FindAllStringSubmatch(string(header), -1) {
		if !strings.Contains(string(wrappers), "go_"+m[1]+"(") {
			t.Errorf("%s has no wrapper: run python3 regen.py", m[1])
		}
	}
}

// Every function of metile.h is called by the package (README.md lists them), except those
// that make no sense from Go.
func TestEveryHeaderFunctionIsCalled(t *testing.T) {
	notFromGo := map[string]bool{
		"metile_last_error":                true, // read inside each go_* wrapper, in the same cgo call
		"metile_dlpack_capsule_destructor": true, // a CPython PyCapsule destructor
	}
	header, err := os.ReadFile("../../../include/metile/metile.h")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			text, _ := os.ReadFile(f)
			src.Write(text)
		}
	}
	re := regexp.MustCompile(`METILE_API\s+[^;(]*?\b(metile_\w+)\s*\(`)
	for _, m := range re.FindAllStringSubmatch(string(header), -1) {
		name := m[1]
		called := strings.Contains(src.String(), "C."+name+"(") || strings.Contains(src.String(), "C.go_"+name+"(")
		if called == notFromGo[name] {
			t.Errorf("%s: called from Go %v, listed as not from Go %v", name, called, notFromGo[name])
		}
	}
}

func TestHistogramWithAtomics(t *testing.T) {
	const block = 128
	n := 3000
	b, _ := NewBuilder("histogram")
	x, hist := b.ParamPtr("x", I32), b.ParamPtr("hist", I32)
	nv := b.ParamScalar("n", I32)
	offs := b.Arange(b.Mul(b.ProgramID(0), b.ConstI32(block)), block)
	mask := b.Lt(offs, nv)
	bins := b.Load(b.PtrOffset(x, offs), mask, 0)
	b.Atomic(OpAtomicAdd, b.PtrOffset(hist, bins), 0, b.ConstI32(1), mask)
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	d := device(t)
	k, err := Compile(d, prog)
	if err != nil {
		t.Fatal(err)
	}
	hx := make([]int32, n)
	want := make([]int32, 64)
	for i := range hx {
		hx[i] = int32((i * 7919) % 64)
		want[hx[i]]++
	}
	bx, _ := BufferFrom(d, hx)
	bh, _ := BufferFrom(d, make([]int32, 64))
	if err := k.Launch([3]uint32{uint32((n + block - 1) / block), 1, 1},
		BufferArg(bx), BufferArg(bh), I32Arg(int32(n))); err != nil {
		t.Fatal(err)
	}
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got, err := CopyOut[int32](bh)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bin %d: %d != %d", i, got[i], want[i])
		}
	}
	bad, _ := NewBuilder("bad")
	bad.Atomic(OpAdd, bad.ParamPtr("p", I32), 0, bad.ConstI32(1), 0)
	if _, err := bad.Finish(); err == nil || !strings.Contains(err.Error(), "is not an atomic op") {
		t.Fatalf("want an error naming the op, got %v", err)
	}
}

// dotOfOnes runs a 16x16x16 dot of a = 1 + 2^-12 (not a TF32 value: it rounds to 1) and b = 1
// on interp, which rounds as each mode says.
func dotOfOnes(t *testing.T, precision *DotPrecision, options CompileOptions) (float32, error) {
	b, _ := NewBuilder("dot_prec")
	a, bb, c := b.ParamPtr("a", F32), b.ParamPtr("b", F32), b.ParamPtr("c", F32)
	zero, ld := b.ConstI32(0), b.ConstI32(16)
	ta := b.TileLoad(a, zero, zero, ld, 16, 16, 0, 0)
	tb := b.TileLoad(bb, zero, zero, ld, 16, 16, 0, 0)
	acc := b.Broadcast(b.ConstF32(0), 16, 16)
	var d Value
	if precision != nil {
		d = b.DotWithPrecision(ta, tb, acc, *precision)
	} else {
		d = b.Dot(ta, tb, acc)
	}
	b.TileStore(c, zero, zero, ld, d, 0, 0)
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := OpenDevice("interp")
	if err != nil {
		t.Fatal(err)
	}
	k, err := CompileWith(dev, prog, options)
	if err != nil {
		return 0, err
	}
	ones, skewed := make([]float32, 256), make([]float32, 256)
	for i := range ones {
		ones[i], skewed[i] = 1, 1+1.0/4096
	}
	ba, _ := dev.BufferFromFloat32(skewed)
	bbuf, _ := dev.BufferFromFloat32(ones)
	bc, _ := dev.Alloc(4 * 256)
	if err := k.Launch([3]uint32{1, 1, 1}, BufferArg(ba), BufferArg(bbuf), BufferArg(bc)); err != nil {
		t.Fatal(err)
	}
	dev.Synchronize()
	got, err := bc.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return got[0], nil
}

func TestDotPrecisionPerDotAndPerCompile(t *testing.T) {
	exact := float32(16 * (1 + 1.0/4096))
	def := DefaultCompileOptions()
	if def.DotPrecision != DotPrecisionDefault {
		t.Fatalf("default dot precision %d", def.DotPrecision)
	}
	tf32 := def
	tf32.DotPrecision = DotPrecisionTF32
	ieee, fast, split := DotPrecisionIEEE, DotPrecisionTF32, DotPrecisionTF32x3
	for _, c := range []struct {
		precision *DotPrecision
		options   CompileOptions
		want      float32
	}{{&ieee, def, exact}, {&fast, def, 16}, {&split, def, exact}, {nil, def, exact}, {nil, tf32, 16}, {&ieee, tf32, exact}} {
		got, err := dotOfOnes(t, c.precision, c.options)
		if err != nil || got != c.want {
			t.Fatalf("precision %v, options %d: got %v (%v), want %v", c.precision, c.options.DotPrecision, got, err, c.want)
		}
	}
	both := tf32
	both.AllowTF32 = 0
	if _, err := dotOfOnes(t, nil, both); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "dot_precision") {
		t.Fatalf("allow_tf32 0 with dot_precision tf32: %v", err)
	}
}
