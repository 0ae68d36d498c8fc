package metile

import "testing"

// While and IfElse build a run-time loop and branch; interp runs them (the oracle).
func TestWhileAndIfElse(t *testing.T) {
	b, _ := NewBuilder("ctrl")
	out := b.ParamPtr("out", I32)
	n := b.ParamScalar("n", I32)
	three := b.ConstI32(3)
	i := b.While([]Value{b.ConstI32(0)}, func(c []Value) (Value, []Value) {
		return b.Lt(c[0], n), c
	}, func(a []Value) []Value {
		return []Value{b.Add(a[0], three)}
	})
	r := b.IfElse(b.Lt(n, b.ConstI32(10)), func() []Value { return []Value{i[0]} },
		func() []Value { return []Value{b.Add(i[0], b.ConstI32(100))} })
	b.Store(out, r[0], 0)
	prog, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDevice("interp")
	if err != nil {
		t.Fatal(err)
	}
	k, err := Compile(d, prog)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ n, want int32 }{{7, 9}, {20, 121}, {0, 0}} {
		bo, _ := BufferFrom(d, []int32{-1})
		if err := k.Launch([3]uint32{1, 1, 1}, BufferArg(bo), I32Arg(c.n)); err != nil {
			t.Fatal(err)
		}
		got, err := CopyOut[int32](bo)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != c.want {
			t.Fatalf("n=%d: got %d, want %d", c.n, got[0], c.want)
		}
	}
	// A tile condition is the builder's error, naming the op.
	b2, _ := NewBuilder("bad")
	b2.IfElse(b2.Lt(b2.Arange(b2.ConstI32(0), 8), b2.ConstI32(3)), func() []Value { return nil },
		func() []Value { return nil })
	if _, err := b2.Finish(); err == nil || !contains(err.Error(), "must be a bool scalar") {
		t.Fatalf("want the condition error, got %v", err)
	}
}

func contains(s, part string) bool {
	for i := 0; i+len(part) <= len(s); i++ {
		if s[i:i+len(part)] == part {
			return true
		}
	}
	return false
}
