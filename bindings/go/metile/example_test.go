package metile_test

import (
	"fmt"

	"metile.dev/metile"
)

// An external package imports the binding by the module path of go.mod (metile.dev/metile):
// this example builds, compiles and runs a kernel on the cpu device.
func Example() {
	b, _ := metile.NewBuilder("scale")
	px := b.PtrOffset(b.ParamPtr("x", metile.F32), b.Arange(0, 4))
	b.Store(px, b.Mul(b.Load(px, 0, 0), b.ConstF32(2)), 0)
	p, err := b.Finish()
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := metile.OpenDevice("cpu")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	k, err := metile.Compile(d, p)
	if err != nil {
		fmt.Println(err)
		return
	}
	x, _ := d.BufferFromFloat32([]float32{1, 2, 3, 4})
	if err := k.Launch([3]uint32{1, 1, 1}, metile.BufferArg(x)); err != nil {
		fmt.Println(err)
		return
	}
	out, err := x.Float32s()
	fmt.Println(out, err)
	// Output: [2 4 6 8] <nil>
}
