package metile

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// Every method of a closed Buffer, Kernel, Device, Program, Launch or Builder returns an error
// (errors.Is ErrInvalidArgument) or a documented zero value; none panics.
func TestMethodsAfterCloseReturnErrors(t *testing.T) {
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s after Close: %v", what, err)
		}
	}
	d := device(t)
	p := vadd(t)
	k, err := Compile(d, p)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := d.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	l, err := k.Prepare(grid1(16), BufferArg(buf), BufferArg(buf), BufferArg(buf), I32Arg(16))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []interface{ Close() error }{l, buf, k, p} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}

	_, err = buf.Size()
	closed("Buffer.Size", err)
	_, err = buf.Float32s()
	closed("Buffer.Float32s", err)
	_, err = CopyOut[int32](buf)
	closed("CopyOut", err)
	closed("CopyIn", CopyIn(buf, []float32{1}))
	closed("With", With(buf, func([]uint8) { t.Error("With ran on a closed buffer") }))
	_, err = buf.Clone()
	closed("Buffer.Clone", err)
	_, err = buf.ToDLPack(F32, []int64{16}, false)
	closed("Buffer.ToDLPack", err)
	if buf.SharesMemory() {
		t.Error("a closed buffer shares memory")
	}

	closed("Kernel.Launch", k.Launch(grid1(16), I32Arg(1)))
	_, err = k.Prepare(grid1(16))
	closed("Kernel.Prepare", err)
	_, err = k.Info()
	closed("Kernel.Info", err)
	_, err = k.Source("")
	closed("Kernel.Source", err)
	_, err = k.CacheKey()
	closed("Kernel.CacheKey", err)
	_, err = k.Clone()
	closed("Kernel.Clone", err)

	closed("Launch.Run", l.Run())
	closed("Launch.SetGrid", l.SetGrid(grid1(16)))
	closed("Launch.SetOptions", l.SetOptions(1, 0))
	ev, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	ev2, _ := d.NewEvent()
	ev.Close()
	closed("Event.Record", ev.Record(0))
	closed("Event.Synchronize", ev.Synchronize())
	_, err = ev.ElapsedMs(ev2)
	closed("Event.ElapsedMs", err)
	_, err = ev2.ElapsedMs(nil)
	closed("Event.ElapsedMs(nil)", err)
	ev2.Close()
	closed("Launch.SetArg", l.SetArg(3, I32Arg(1)))

	_, err = p.Text()
	closed("Program.Text", err)
	_, err = p.Params()
	closed("Program.Params", err)
	_, err = p.Clone()
	closed("Program.Clone", err)
	_, err = Compile(d, p)
	closed("Compile of a closed program", err)

	live, err := d.Alloc(64) // a buffer outlives its closed Device handle
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Float32s(); err != nil {
		t.Errorf("a buffer of a closed Device handle: %v", err)
	}
	live.Close()
	closed("Device.Synchronize", d.Synchronize())
	_, err = d.Alloc(64)
	closed("Device.Alloc", err)
	_, err = d.Info()
	closed("Device.Info", err)
	_, err = d.Stream()
	closed("Device.Stream", err)
	closed("Device.WaitStream", d.WaitStream(0))
	closed("Device.SignalStream", d.SignalStream(0))
	_, err = d.CreateStream()
	closed("Device.CreateStream", err)
	closed("Device.DestroyStream", d.DestroyStream(1))
	_, err = d.NewEvent()
	closed("Device.NewEvent", err)
	_, err = d.Clone()
	closed("Device.Clone", err)
	_, err = d.BufferFromFloat32([]float32{1})
	closed("Device.BufferFromFloat32", err)
	_, err = Compile(d, vadd(t))
	closed("Compile on a closed device", err)

	b, err := NewBuilder("closed")
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	b.Add(b.ConstI32(1), b.ConstI32(2))
	closed("Builder op", b.Err())
	_, err = b.Finish()
	closed("Builder.Finish", err)
}

// Reading a buffer waits for the launches still running on its device (asynchronous devices),
// with no explicit Synchronize, and works after the Device handle is closed.
func TestReadsWaitForPendingLaunches(t *testing.T) {
	const block, n = 256, 1 << 16
	b, _ := NewBuilder("incr")
	px := b.PtrOffset(b.ParamPtr("x", F32), b.Arange(b.Mul(b.ProgramID(0), b.ConstI32(block)), block))
	b.Store(px, b.Add(b.Load(px, 0, 0), b.ConstF32(1)), 0)
	p, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	names, err := DevicesAvailable()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		d, err := OpenDevice(name)
		if err != nil {
			t.Fatal(err)
		}
		k, err := Compile(d, p)
		if err != nil {
			t.Fatal(err)
		}
		buf, err := d.Alloc(4 * n)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			if err := k.Launch([3]uint32{n / block, 1, 1}, BufferArg(buf)); err != nil {
				t.Fatal(err)
			}
		}
		k.Close()
		d.Close()
		got, err := buf.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			if v != 20 {
				t.Fatalf("%s: element %d is %v: a launch had not finished", name, i, v)
			}
		}
		buf.Close()
	}
}

// go doc shows no cgo names in the exported API: types, signatures and constants read as Go.
func TestGoDocShowsNoCgoNames(t *testing.T) {
	out, err := exec.Command("go", "doc", "-all", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go doc: %v: %s", err, out)
	}
	for i, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "C.") && !strings.Contains(line, "C.malloc") && !strings.Contains(line, "HeaderVersionNumber") {
			t.Errorf("go doc line %d names cgo: %s", i+1, line)
		}
	}
}
