package metile

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

const vaddBlock = 256

// vadd builds out[i] = x[i] + y[i] for i < n.
func vadd(t *testing.T) *Program {
	b, err := NewBuilder("vadd")
	if err != nil {
		t.Fatal(err)
	}
	x, y, out := b.ParamPtr("x", F32), b.ParamPtr("y", F32), b.ParamPtr("out", F32)
	nv := b.ParamScalar("n", I32)
	offs := b.Arange(b.Mul(b.ProgramID(0), b.ConstI32(vaddBlock)), vaddBlock)
	mask := b.Lt(offs, nv)
	b.Store(b.PtrOffset(out, offs), b.Add(b.Load(b.PtrOffset(x, offs), mask, 0), b.Load(b.PtrOffset(y, offs), mask, 0)), mask)
	p, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func grid1(n int) [3]uint32 { return [3]uint32{uint32((n + vaddBlock - 1) / vaddBlock), 1, 1} }

func checkSum(t *testing.T, got, x, y []float32) {
	t.Helper()
	for i := range x {
		if got[i] != x[i]+y[i] {
			t.Fatalf("element %d: %v != %v", i, got[i], x[i]+y[i])
		}
	}
}

func TestVersionDTypesOpsAndDeviceInfo(t *testing.T) {
	if VersionNumber() != HeaderVersionNumber {
		t.Fatalf("library %d, header %d", VersionNumber(), HeaderVersionNumber)
	}
	for dt, want := range map[DType]struct {
		name string
		size int
	}{F32: {"f32", 4}, F16: {"f16", 2}, BF16: {"bf16", 2}, I64: {"i64", 8}, Bool: {"bool", 1}, U8: {"u8", 1}, I32: {"i32", 4}, U32: {"u32", 4}, I8: {"i8", 1}, F8E4M3: {"f8e4m3", 1}, F8E5M2: {"f8e5m2", 1}, DType(99): {"invalid", 0}} {
		if dt.String() != want.name || dt.Size() != want.size {
			t.Errorf("dtype %d: %q %d, want %q %d", int(dt), dt.String(), dt.Size(), want.name, want.size)
		}
	}
	if OpName(OpTileLoad) != "tile_load" || OpName(OpAdd) != "add" || OpName(12345) != "invalid" {
		t.Fatalf("op names: %q %q %q", OpName(OpTileLoad), OpName(OpAdd), OpName(12345))
	}
	d := device(t)
	info, err := d.Info()
	if err != nil || info.Name != d.Name() || info.Name == "" || info.SimdWidth < 1 || info.MaxThreadsPerGroup < 1 {
		t.Fatalf("info %+v, %v", info, err)
	}
	stream, err := d.Stream()
	if err != nil || (info.Name != "cuda" && stream != 0) {
		t.Fatalf("stream %d on %s: %v", stream, info.Name, err)
	}
	if err := d.WaitStream(stream); err != nil {
		t.Fatal(err)
	}
	if err := d.SignalStream(stream); err != nil {
		t.Fatal(err)
	}
	c, err := d.Clone()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil { // the original stays open
		t.Fatal(err)
	}
	if _, err := d.Info(); err != nil {
		t.Fatalf("the device closed with its clone: %v", err)
	}
}

func TestCompileOptionsSourceCacheKeyAndInfo(t *testing.T) {
	def := DefaultCompileOptions()
	if def.AllowTF32 != -1 || def.OptLevel != 1 || def.NoCache || def.CheckBounds || def.NumThreads != 0 {
		t.Fatalf("defaults %+v", def)
	}
	d, p := device(t), vadd(t)
	k1, err := CompileWith(d, p, def)
	if err != nil {
		t.Fatal(err)
	}
	opts := def
	opts.OptLevel, opts.NoCache, opts.CheckBounds = 0, true, true
	k2, err := CompileWith(d, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	key1, err := k1.CacheKey()
	key2, _ := k2.CacheKey()
	if err != nil || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(key1) || key1 == key2 {
		t.Fatalf("cache keys %q %q (options must change the key): %v", key1, key2, err)
	}
	if info, err := k2.Info(); err != nil || info.FromCache || info.CompileSeconds < 0 {
		t.Fatalf("a no_cache kernel's info %+v: %v", info, err)
	}
	// Threadgroup memory used and the device's limit it was checked against; registers only on cuda.
	if info, err := k2.Info(); err != nil {
		t.Fatal(err)
	} else if dinfo, _ := d.Info(); info.ThreadgroupMemoryLimit != dinfo.ThreadgroupMemoryBytes ||
		info.ThreadgroupMemoryBytes > info.ThreadgroupMemoryLimit ||
		(info.RegistersPerThread == 0) != (dinfo.Name != "cuda") {
		t.Fatalf("kernel info %+v on device %+v", info, dinfo)
	}
	src, err := k1.Source("tile_ir")
	if err != nil || !strings.Contains(src, "vadd") {
		t.Fatalf("tile_ir: %q %v", src, err)
	}
	if _, err := k1.Source("no_such_stage"); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "tile_ir") {
		t.Fatalf("an unknown stage should list the stages: %v", err)
	}
	bad := def
	bad.AllowTF32 = 2
	if _, err := CompileWith(d, p, bad); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "allow_tf32") {
		t.Fatalf("allow_tf32 2: %v", err)
	}
	kc, _ := k1.Clone()
	if err := kc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := k1.CacheKey(); err != nil {
		t.Fatalf("the kernel closed with its clone: %v", err)
	}
}

func TestPreparedLaunchRunsAgainWithNewArgsAndGrid(t *testing.T) {
	d := device(t)
	k, err := Compile(d, vadd(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 700
	hx, hy := random(n, 11), random(n, 12)
	bx, _ := BufferFrom(d, hx)
	by, _ := BufferFrom(d, hy)
	bo, _ := d.Alloc(4 * n)
	l, err := k.Prepare([3]uint32{1, 1, 1}, BufferArg(bx), BufferArg(by), BufferArg(bo), I32Arg(int32(n)))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetGrid(grid1(n)); err != nil {
		t.Fatal(err)
	}
	if err := l.Run(); err != nil {
		t.Fatal(err)
	}
	d.Synchronize()
	got, _ := CopyOut[float32](bo)
	checkSum(t, got, hx, hy)

	hz := random(n, 13)
	bz, _ := BufferFrom(d, hz)
	if err := l.SetArg(1, BufferArg(bz)); err != nil {
		t.Fatal(err)
	}
	if err := l.SetArg(3, I64Arg(int64(n))); err != nil {
		t.Fatal(err)
	}
	ms, err := AutotuneTime([]*Launch{l}, 1, 2)
	if err != nil || len(ms) != 1 || !(ms[0] >= 0) {
		t.Fatalf("autotune time %v: %v", ms, err)
	}
	d.Synchronize()
	got, _ = CopyOut[float32](bo)
	checkSum(t, got, hx, hz)

	if err := l.SetArg(3, F32Arg(0.5)); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "n") {
		t.Fatalf("0.5 for an i32 parameter: %v", err)
	}
	if err := l.SetArg(9, I32Arg(1)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("index 9: %v", err)
	}
	if err := l.SetGrid([3]uint32{0, 1, 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an empty grid: %v", err)
	}
	if err := l.Close(); err != nil || l.Close() != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := k.Prepare(grid1(n), BufferArg(bx)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("too few arguments: %v", err)
	}
}

// mmap gives memory outside Go's heap, which C may keep (WrapMemory, SetArgMemory).
func mmap(t *testing.T, bytes int) []byte {
	m, err := syscall.Mmap(-1, 0, bytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	return m
}

func floats(m []byte) []float32 { return unsafe.Slice((*float32)(unsafe.Pointer(&m[0])), len(m)/4) }

func TestWrapMemoryAndSetArgMemory(t *testing.T) {
	d := device(t)
	k, err := Compile(d, vadd(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 300
	mx, my, mo := mmap(t, 4*n), mmap(t, 4*n), mmap(t, 4*n)
	copy(floats(mx), random(n, 21))
	copy(floats(my), random(n, 22))
	bx, err := d.WrapMemory(unsafe.Pointer(&mx[0]), 4*n)
	if err != nil {
		t.Fatal(err)
	}
	by, _ := d.WrapMemory(unsafe.Pointer(&my[0]), 4*n)
	bo, _ := d.WrapMemory(unsafe.Pointer(&mo[0]), 4*n)
	if size, err := bo.Size(); err != nil || size != 4*n {
		t.Fatalf("size %d: %v", size, err)
	}
	if err := k.Launch(grid1(n), BufferArg(bx), BufferArg(by), BufferArg(bo), I32Arg(int32(n))); err != nil {
		t.Fatal(err)
	}
	d.Synchronize()
	got, _ := CopyOut[float32](bo)
	checkSum(t, got, floats(mx)[:n], floats(my)[:n])
	if bo.SharesMemory() {
		checkSum(t, floats(mo), floats(mx), floats(my)) // written in place
	}

	l, err := k.Prepare(grid1(n), BufferArg(bx), BufferArg(by), BufferArg(bo), I32Arg(int32(n)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m2 := mmap(t, 4*n)
	err = l.SetArgMemory(2, unsafe.Pointer(&m2[0]), 4*n)
	if errors.Is(err, ErrUnsupported) && !bo.SharesMemory() {
		return // a device that copies host memory: SetArgMemory refuses it, as documented
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(); err != nil {
		t.Fatal(err)
	}
	d.Synchronize()
	checkSum(t, floats(m2), floats(mx), floats(my))
	if err := l.SetArgMemory(3, unsafe.Pointer(&m2[0]), 4*n); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("memory for the scalar n: %v", err)
	}
	// Host devices have no GPU memory to point at (cuda: tests/cuda_standin).
	if err := l.SetArgDeviceMemory(2, uint64(uintptr(unsafe.Pointer(&m2[0]))), 4*n); !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("host memory as device memory: %v", err)
	}
	if _, err := d.WrapMemory(nil, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative size: %v", err)
	}
}

func TestDLPackExportImportRoundTrip(t *testing.T) {
	d := device(t)
	k, err := Compile(d, vadd(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 6 * 50
	hx, hy := random(n, 31), random(n, 32)
	bx, _ := BufferFrom(d, hx)
	by, _ := BufferFrom(d, hy)
	bo, _ := d.Alloc(4 * n)
	for _, versioned := range []bool{false, true} {
		tensor, err := bo.ToDLPack(F32, []int64{6, 50}, versioned)
		if err != nil {
			t.Fatal(err)
		}
		desc := tensor.Describe()
		if len(desc.Shape) != 2 || desc.Shape[0] != 6 || desc.Shape[1] != 50 || desc.Code != 2 || desc.Bits != 32 ||
			desc.Lanes != 1 || desc.Data == 0 {
			t.Fatalf("described %+v", desc)
		}
		if wantDev := map[bool]int32{true: 2, false: 1}[d.Name() == "cuda"]; desc.DeviceType != wantDev {
			t.Fatalf("device type %d on %s", desc.DeviceType, d.Name())
		}
		if versioned && (desc.Version[0] != 1 || desc.Flags != 0) {
			t.Fatalf("versioned header %+v", desc)
		}
		imported, err := d.FromDLPack(tensor)
		if err != nil {
			t.Fatal(err)
		}
		if tensor.Pointer() != nil {
			t.Fatal("the import did not take the tensor")
		}
		if size, _ := imported.Size(); size != 4*n {
			t.Fatalf("imported size %d", size)
		}
		// The kernel writes through the imported tensor; the exporting buffer sees it.
		if err := k.Launch(grid1(n), BufferArg(bx), BufferArg(by), BufferArg(imported), I32Arg(int32(n))); err != nil {
			t.Fatal(err)
		}
		d.Synchronize()
		got, _ := CopyOut[float32](bo)
		checkSum(t, got, hx, hy)
		if err := imported.Close(); err != nil {
			t.Fatal(err)
		}
		CopyIn(bo, make([]float32, n))
		hy = random(n, 33)
		CopyIn(by, hy)
	}

	unconsumed, err := bx.ToDLPack(BF16, []int64{int64(2 * n)}, true)
	if err != nil {
		t.Fatal(err)
	}
	if desc := unconsumed.Describe(); desc.Code != 4 || desc.Bits != 16 || desc.Shape[0] != int64(2*n) {
		t.Fatalf("bf16 view %+v", desc)
	}
	unconsumed.Delete()
	unconsumed.Delete() // a second Delete does nothing
	if _, err := d.FromDLPack(unconsumed); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a spent tensor: %v", err)
	}
	if _, err := bx.ToDLPack(F32, []int64{int64(n + 1)}, false); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a shape larger than the buffer: %v", err)
	}
	if _, err := bx.ToDLPack(F32, make([]int64, 9), true); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("9 dimensions: %v", err)
	}
}

func TestCacheDirStatsClearAndAutotuneRecords(t *testing.T) {
	old, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	defer SetCacheDir(old)
	dir := filepath.Join(t.TempDir(), "cache")
	if err := SetCacheDir(dir); err != nil {
		t.Fatal(err)
	}
	if got, _ := CacheDir(); got != dir {
		t.Fatalf("cache dir %q, want %q", got, dir)
	}
	if err := ClearCache(); err != nil {
		t.Fatal(err)
	}
	if s, err := GetCacheStats(); err != nil || s != (CacheStats{}) {
		t.Fatalf("stats after clear %+v: %v", s, err)
	}
	d, p := device(t), vadd(t)
	if _, err := Compile(d, p); err != nil {
		t.Fatal(err)
	}
	k, err := Compile(d, p)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := GetCacheStats()
	if s.Misses != 1 || s.MemoryHits+s.DiskHits != 1 {
		t.Fatalf("one compile and one hit, got %+v", s)
	}
	if info, _ := k.Info(); !info.FromCache {
		t.Fatal("the second compile did not come from the cache")
	}
	if err := SetCacheMaxBytes(1 << 20); err != nil {
		t.Fatal(err)
	}
	if err := SetCacheMaxBytes(0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a zero cap: %v", err)
	}
	if err := AutotuneStore("go-test-key", "BLOCK=128"); err != nil {
		t.Fatal(err)
	}
	if w, ok, err := AutotuneLookup("go-test-key"); err != nil || !ok || w != "BLOCK=128" {
		t.Fatalf("lookup: %q %v %v", w, ok, err)
	}
	if _, ok, err := AutotuneLookup("absent"); err != nil || ok {
		t.Fatalf("an absent key: %v %v", ok, err)
	}
	if err := SetCacheEnabled(false); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := AutotuneLookup("go-test-key"); ok {
		t.Fatal("a disabled disk cache still answers lookups")
	}
	if err := SetCacheEnabled(true); err != nil {
		t.Fatal(err)
	}
	if err := ClearCache(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := AutotuneLookup("go-test-key"); ok {
		t.Fatal("clear kept the autotune record")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the cache directory: %v", err)
	}
}

// clampAbs: out[i] = where(x < 0, -x, x) * (pid count) cast to i32, through Select, Cast,
// Reshape, NumPrograms, ConstInt/ConstFloat; the text form parses back to the same program.
func TestBuilderOpsParamsAndTextRoundTrip(t *testing.T) {
	const block = 64
	b, _ := NewBuilder("clamp_abs")
	b.SetConstexpr("BLOCK", "64")
	x, out := b.ParamPtr("x", F32), b.ParamPtr("out", I32)
	offs := b.Arange(b.Mul(b.ProgramID(0), b.ConstInt(I32, block)), block)
	v := b.Load(b.PtrOffset(x, offs), 0, 0)
	abs := b.Select(b.Lt(v, b.ConstFloat(F32, 0)), b.Unary(OpNeg, v), v)
	scaled := b.Mul(abs, b.Cast(b.NumPrograms(0), F32))
	r := b.Reshape(b.Reshape(b.Cast(scaled, I32), 8, 8), block)
	if ty, err := b.TypeOf(r); err != nil || ty.DType != I32 || ty.Rank != 1 || ty.Shape[0] != block {
		t.Fatalf("type of the reshape %+v: %v", ty, err)
	}
	b.Store(b.PtrOffset(out, offs), r, 0)
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	params, err := prog.Params()
	if err != nil || len(params) != 2 || params[0].Name != "x" || !params[0].Reads || params[0].Writes ||
		!params[1].Writes || !params[1].Type.Pointer || params[1].Type.DType != I32 {
		t.Fatalf("params %+v: %v", params, err)
	}
	text, _ := prog.Text()
	again, err := ParseProgram(text)
	if err != nil {
		t.Fatal(err)
	}
	if text2, _ := again.Text(); text2 != text || again.Name() != "clamp_abs" {
		t.Fatalf("the text form does not round-trip:\n%s\n%s", text, text2)
	}
	pc, _ := again.Clone()
	pc.Close()
	d := device(t)
	k, err := Compile(d, again)
	if err != nil {
		t.Fatal(err)
	}
	hx := random(3*block, 41)
	bx, _ := BufferFrom(d, hx)
	bo, _ := d.Alloc(4 * 3 * block)
	if err := k.Launch([3]uint32{3, 1, 1}, BufferArg(bx), BufferArg(bo)); err != nil {
		t.Fatal(err)
	}
	d.Synchronize()
	got, _ := CopyOut[int32](bo)
	for i, xv := range hx {
		if want := int32(math.Abs(float64(xv)) * 3); got[i] != want {
			t.Fatalf("element %d: %d != %d", i, got[i], want)
		}
	}
	if _, err := ParseProgram("kernel ("); !errors.Is(err, ErrInvalidProgram) {
		t.Fatalf("bad text: %v", err)
	}
	bad, _ := NewBuilder("bad_reshape")
	bad.Reshape(bad.Arange(0, 64), 5, 5)
	if _, err := bad.Finish(); !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrInvalidProgram) {
		t.Fatalf("64 elements reshaped to 5x5: %v", err)
	}
}

// out[i] = the bits of x[i] as a u32 (Bitcast); a bitcast between widths is refused.
func TestBitcastKeepsTheBits(t *testing.T) {
	const block = 64
	b, _ := NewBuilder("bits")
	x, out := b.ParamPtr("x", F32), b.ParamPtr("out", U32)
	offs := b.Arange(0, block)
	b.Store(b.PtrOffset(out, offs), b.Bitcast(b.Load(b.PtrOffset(x, offs), 0, 0), U32), 0)
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	d := device(t)
	k, err := Compile(d, prog)
	if err != nil {
		t.Fatal(err)
	}
	hx := random(block, 43)
	hx[0], hx[1] = float32(math.Copysign(0, -1)), float32(math.Inf(1))
	bx, _ := BufferFrom(d, hx)
	bo, _ := d.Alloc(4 * block)
	if err := k.Launch([3]uint32{1, 1, 1}, BufferArg(bx), BufferArg(bo)); err != nil {
		t.Fatal(err)
	}
	d.Synchronize()
	got, _ := CopyOut[uint32](bo)
	for i, xv := range hx {
		if want := math.Float32bits(xv); got[i] != want {
			t.Fatalf("element %d: %#x != %#x", i, got[i], want)
		}
	}
	bad, _ := NewBuilder("bad_bitcast")
	bad.Bitcast(bad.ConstFloat(F32, 1), I64)
	if _, err := bad.Finish(); !errors.Is(err, ErrInvalidProgram) {
		t.Fatalf("f32 bitcast to i64: %v", err)
	}
}

// A SIMT kernel: each of T threads reads x[thread ^ 1] through a shuffle, with a role region,
// threadgroup memory and a barrier, and the program ids swizzled (identity on a 1x1 grid).
func TestSimtSimdSharedRoleAndSwizzle(t *testing.T) {
	const threads = 64
	b, _ := NewBuilder("shuffle_pairs")
	b.SetNumThreads(threads)
	x, out := b.ParamPtr("x", F32), b.ParamPtr("out", F32)
	pm, pn := b.TileSwizzle(b.ProgramID(0), b.ProgramID(1), "morton", 2)
	base := b.Mul(b.Add(pm, pn), b.ConstI32(threads))
	tid := b.Simt(OpThreadId)
	v := b.Load(b.PtrOffset(x, b.Add(tid, base)), 0, 0)
	sh := b.Shared(threads, F32)
	b.Store(b.PtrOffset(sh, tid), v, 0)
	b.Simt(OpBarrier)
	w := b.Load(b.PtrOffset(sh, tid), 0, 0)
	swapped := b.Simd(OpSimdShuffleXor, w, b.ConstI32(1))
	b.Role(0, 1, 0, 0, func() {
		b.Store(b.PtrOffset(out, b.Add(tid, base)), swapped, 0)
	})
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	d := device(t)
	k, err := Compile(d, prog)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("%s has no SIMT view: %v", d.Name(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	hx := random(threads, 51)
	bx, _ := BufferFrom(d, hx)
	bo, _ := d.Alloc(4 * threads)
	if err := k.Launch([3]uint32{1, 1, 1}, BufferArg(bx), BufferArg(bo)); err != nil {
		t.Fatal(err)
	}
	d.Synchronize()
	got, _ := CopyOut[float32](bo)
	for i := range got {
		if got[i] != hx[i^1] {
			t.Fatalf("thread %d: %v != %v", i, got[i], hx[i^1])
		}
	}
	bad, _ := NewBuilder("bad_simd")
	bad.Simd(OpAdd, bad.ConstI32(1), bad.ConstI32(1))
	if bad.Err() == nil || !errors.Is(bad.Err(), ErrInvalidArgument) && !errors.Is(bad.Err(), ErrInvalidProgram) {
		t.Fatalf("add is not a simd op: %v", bad.Err())
	}
	bad2, _ := NewBuilder("bad_swizzle")
	bad2.TileSwizzle(bad2.ProgramID(0), bad2.ProgramID(1), "spiral", 2)
	if bad2.Err() == nil || !strings.Contains(bad2.Err().Error(), "spiral") {
		t.Fatalf("an unknown pattern should be named: %v", bad2.Err())
	}
}

// cumsum and cumprod along a 1-D tile, a transpose of an 8x8 tile, and device_print, compared
// with the same computation in Go; a prefix with a newline is refused.
func TestScanTransAndDevicePrint(t *testing.T) {
	const n = 64
	b, _ := NewBuilder("scan_trans")
	x, sum, prod, tr := b.ParamPtr("x", F32), b.ParamPtr("sum", F32), b.ParamPtr("prod", F32), b.ParamPtr("tr", F32)
	offs := b.Arange(0, n)
	v := b.Load(b.PtrOffset(x, offs), 0, 0)
	b.Store(b.PtrOffset(sum, offs), b.Scan(OpCumsum, v, 0, false), 0)
	b.Store(b.PtrOffset(prod, offs), b.Scan(OpCumprod, v, 0, true), 0)
	b.Store(b.PtrOffset(tr, offs), b.Reshape(b.Trans(b.Reshape(v, 8, 8)), n), 0)
	b.DevicePrint("first", b.Reshape(v, 8, 8))
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	d := device(t)
	k, err := Compile(d, prog)
	if err != nil {
		t.Fatal(err)
	}
	hx := make([]float32, n)
	for i := range hx {
		hx[i] = 1 + float32(i%5)*0.25
	}
	bx, _ := BufferFrom(d, hx)
	bs, _ := d.Alloc(4 * n)
	bp, _ := d.Alloc(4 * n)
	bt, _ := d.Alloc(4 * n)
	if err := k.Launch([3]uint32{1, 1, 1}, BufferArg(bx), BufferArg(bs), BufferArg(bp), BufferArg(bt)); err != nil {
		t.Fatal(err)
	}
	d.Synchronize()
	gs, _ := CopyOut[float32](bs)
	gp, _ := CopyOut[float32](bp)
	gt, _ := CopyOut[float32](bt)
	acc, accp := 0.0, 1.0
	for i := 0; i < n; i++ {
		acc += float64(hx[i])
		if math.Abs(float64(gs[i])-acc) > 1e-4*math.Abs(acc) {
			t.Fatalf("cumsum[%d] = %v, want %v", i, gs[i], acc)
		}
		if gt[i] != hx[(i%8)*8+i/8] {
			t.Fatalf("trans[%d] = %v, want %v", i, gt[i], hx[(i%8)*8+i/8])
		}
	}
	for i := n - 1; i >= 0; i-- {
		accp *= float64(hx[i])
		if math.Abs(float64(gp[i])-accp) > 1e-4*accp {
			t.Fatalf("reverse cumprod[%d] = %v, want %v", i, gp[i], accp)
		}
	}
	bad, _ := NewBuilder("bad_print")
	bad.DevicePrint("two\nlines")
	if _, err := bad.Finish(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a prefix with a newline: %v", err)
	}
}

func TestCancelLaunchesStopsARunningHostLaunch(t *testing.T) {
	for _, name := range []string{"interp", "cpu"} {
		d, err := OpenDevice(name)
		if err != nil {
			t.Fatal(err)
		}
		k, err := Compile(d, vadd(t))
		if err != nil {
			t.Fatal(err)
		}
		n := 300
		hx, hy := random(n, 31), random(n, 32)
		bx, _ := d.BufferFromFloat32(hx)
		by, _ := d.BufferFromFloat32(hy)
		bo, _ := d.Alloc(4 * n)
		done := make(chan struct{})
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(50 * time.Millisecond):
					CancelLaunches()
				}
			}
		}()
		// 2^30 instances (axis 1 only repeats axis 0, so offsets never overflow): far more than
		// finish in the test's lifetime, only the cancel ends it.
		err = k.Launch([3]uint32{1 << 22, 256, 1}, BufferArg(bx), BufferArg(by), BufferArg(bo), I32Arg(int32(n)))
		if err == nil {
			err = d.Synchronize()
		}
		close(done)
		var e *Error
		if !errors.Is(err, ErrDevice) || !errors.As(err, &e) || !strings.Contains(e.Message, "cancelled") {
			t.Fatalf("%s: %v", name, err)
		}
		CancelLaunches() // before a launch: it runs to the end
		if err := k.Launch(grid1(n), BufferArg(bx), BufferArg(by), BufferArg(bo), I32Arg(int32(n))); err != nil {
			t.Fatal(err)
		}
		got, _ := bo.Float32s()
		checkSum(t, got, hx, hy)
	}
}

func TestLaunchTimeoutStreamsAndEvents(t *testing.T) {
	for _, name := range []string{"interp", "cpu"} {
		d, err := OpenDevice(name)
		if err != nil {
			t.Fatal(err)
		}
		k, err := Compile(d, vadd(t))
		if err != nil {
			t.Fatal(err)
		}
		n := 300
		hx, hy := random(n, 41), random(n, 42)
		bx, _ := d.BufferFromFloat32(hx)
		by, _ := d.BufferFromFloat32(hy)
		bo, _ := d.Alloc(4 * n)
		// 2^30 instances: only the 0.2 s limit ends it.
		long, err := k.Prepare([3]uint32{1 << 22, 256, 1}, BufferArg(bx), BufferArg(by), BufferArg(bo), I32Arg(int32(n)))
		if err != nil {
			t.Fatal(err)
		}
		if err := long.SetOptions(math.NaN(), 0); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%s: NaN timeout: %v", name, err)
		}
		if err := long.SetOptions(0.2, 0); err != nil {
			t.Fatal(err)
		}
		err = long.Run()
		var e *Error
		if !errors.Is(err, ErrDevice) || !errors.As(err, &e) || !strings.Contains(e.Message, "did not finish within 0.2 s (the launch's timeout)") {
			t.Fatalf("%s: %v", name, err)
		}
		long.Close()
		stream, err := d.CreateStream()
		if err != nil {
			t.Fatal(err)
		}
		l, err := k.Prepare(grid1(n), BufferArg(bx), BufferArg(by), BufferArg(bo), I32Arg(int32(n)))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SetOptions(-1, stream); err != nil {
			t.Fatal(err)
		}
		start, _ := d.NewEvent()
		end, _ := d.NewEvent()
		if _, err := start.ElapsedMs(end); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%s: unrecorded events: %v", name, err)
		}
		if err := start.Record(0); err != nil {
			t.Fatal(err)
		}
		if err := l.Run(); err != nil {
			t.Fatal(err)
		}
		end.Record(0)
		if err := end.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if ms, err := start.ElapsedMs(end); err != nil || ms < 0 {
			t.Fatalf("%s: elapsed %v %v", name, ms, err)
		}
		l.Close()
		start.Close()
		end.Close()
		if err := d.DestroyStream(stream); err != nil {
			t.Fatal(err)
		}
		got, _ := bo.Float32s()
		checkSum(t, got, hx, hy)
		if info, _ := d.Info(); info.Ordinal != 0 {
			t.Fatalf("%s: ordinal %d", name, info.Ordinal)
		}
	}
	if _, err := OpenDevice("cpu:1"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("cpu:1: %v", err)
	}
}

func TestDeviceCountPerKind(t *testing.T) {
	if n, err := DeviceCount("interp"); err != nil || n != 1 {
		t.Fatalf("interp: %d %v", n, err)
	}
	names, _ := DevicesAvailable()
	gpus, err := DeviceCount("cuda")
	if err != nil || (gpus > 0) != strings.Contains(","+strings.Join(names, ",")+",", ",cuda,") {
		t.Fatalf("cuda: %d %v (available %v)", gpus, err, names)
	}
	if gpus > 0 {
		if _, err := OpenDevice(fmt.Sprintf("cuda:%d", gpus)); !errors.Is(err, ErrDeviceUnavailable) {
			t.Fatalf("cuda:%d: %v", gpus, err)
		}
	}
	for _, bad := range []string{"gpu", "cuda:1", ""} {
		if _, err := DeviceCount(bad); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "unknown device kind") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}
