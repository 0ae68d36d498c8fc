package metile

/*
#include "wrappers.h"

// The DLPack ABI's structs (v0.8 DLManagedTensor and 1.x DLManagedTensorVersioned), declared
// here because metile.h passes them as void *: only their layout is shared with other libraries.
typedef struct { void *data; int32_t device_type, device_id, ndim; uint8_t code, bits;
                 uint16_t lanes; int64_t *shape, *strides; uint64_t byte_offset; } go_dl_tensor;
typedef struct go_dl_managed { go_dl_tensor t; void *ctx; void (*deleter)(struct go_dl_managed *); }
    go_dl_managed;
typedef struct go_dl_versioned { uint32_t major, minor; void *ctx;
                                 void (*deleter)(struct go_dl_versioned *); uint64_t flags;
                                 go_dl_tensor t; } go_dl_versioned;

static go_dl_tensor *go_dl_tensor_of(void *m, int versioned) {
  return versioned ? &((go_dl_versioned *)m)->t : &((go_dl_managed *)m)->t;
}
// Go cannot call a C function pointer: these run a tensor's deleter for it.
static void go_dl_delete(void *m, int versioned) {
  if (versioned) {
    go_dl_versioned *v = m;
    if (v->deleter) v->deleter(v);
  } else {
    go_dl_managed *t = m;
    if (t->deleter) t->deleter(t);
  }
}
static void go_dl_version(void *m, uint32_t *major, uint32_t *minor, uint64_t *flags) {
  go_dl_versioned *v = m;
  *major = v->major; *minor = v->minor; *flags = v->flags;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// WrapMemory makes a buffer over bytes of caller memory at ptr. Where the device addresses it
// directly (cpu and interp always) kernels write it in place and SharesMemory reports true;
// otherwise the bytes are copied and results are read through the buffer (With, CopyOut).
//
// The memory must not belong to Go's garbage collector (cgo forbids C keeping a Go pointer):
// use C.malloc'd memory, a syscall.Mmap region or memory another library owns, and keep it
// valid until the buffer is closed.
func (d *Device) WrapMemory(ptr unsafe.Pointer, bytes int) (*Buffer, error) {
	if bytes < 0 {
		return nil, &Error{Status: StatusInvalidArgument,
			Message: fmt.Sprintf("[api] WrapMemory: negative size %d", bytes)}
	}
	var raw *C.metile_buffer
	var msg *C.char
	if err := check(C.go_metile_buffer_wrap(&msg, &raw, d.raw, ptr, C.size_t(bytes)), msg); err != nil {
		return nil, err
	}
	return newBuffer(raw, bytes, d.raw)
}

// Size returns the buffer's size in bytes, as the library knows it.
func (b *Buffer) Size() (int, error) {
	if b.raw == nil {
		return 0, errClosed("Buffer")
	}
	var n C.size_t
	var msg *C.char
	if err := check(C.go_metile_buffer_size(&msg, b.raw, &n), msg); err != nil {
		return 0, err
	}
	return int(n), nil
}

// SharesMemory reports whether a WrapMemory buffer uses the caller's memory in place (false
// for a closed buffer).
func (b *Buffer) SharesMemory() bool {
	return b.raw != nil && C.metile_buffer_shares_memory(b.raw) == 1
}

// Clone returns a second handle to the same buffer (retained); each is closed on its own.
func (b *Buffer) Clone() (*Buffer, error) {
	if b.raw == nil {
		return nil, errClosed("Buffer")
	}
	var msg *C.char
	if err := check(C.go_metile_buffer_retain(&msg, b.raw), msg); err != nil {
		return nil, err
	}
	return newBuffer(b.raw, b.bytes, b.dev)
}

// DLPack is a DLPack tensor this process holds: a DLManagedTensor (legacy, v0.8 ABI) or, when
// Versioned, a DLManagedTensorVersioned (1.x ABI), both in C memory. Hand Pointer() to a
// consumer (which then owns it and runs its deleter), import it with Device.FromDLPack, or
// Delete it.
type DLPack struct {
	ptr       unsafe.Pointer
	Versioned bool
}

// ToDLPack exports the buffer as a row-major tensor of dtype and shape (up to 8 dimensions),
// keeping the buffer alive until the tensor's deleter runs. cuda buffers are kDLCUDA (2), others
// kDLCPU (1). Nothing is synchronized: see Device.SignalStream.
func (b *Buffer) ToDLPack(dtype DType, shape []int64, versioned bool) (*DLPack, error) {
	if b.raw == nil {
		return nil, errClosed("Buffer")
	}
	var shp *C.int64_t
	if len(shape) > 0 {
		shp = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	var out unsafe.Pointer
	var msg *C.char
	var status C.metile_status
	if versioned {
		status = C.go_metile_buffer_to_dlpack_versioned(&msg, b.raw, C.metile_dtype(dtype),
			C.int32_t(len(shape)), shp, &out)
	} else {
		status = C.go_metile_buffer_to_dlpack(&msg, b.raw, C.metile_dtype(dtype),
			C.int32_t(len(shape)), shp, &out)
	}
	if err := check(status, msg); err != nil {
		return nil, err
	}
	return &DLPack{out, versioned}, nil
}

// DLPackFromPointer adopts a DLManagedTensor (or, when versioned, DLManagedTensorVersioned)
// another library produced.
func DLPackFromPointer(ptr unsafe.Pointer, versioned bool) *DLPack { return &DLPack{ptr, versioned} }

// Pointer returns the DLManagedTensor(Versioned) pointer.
func (t *DLPack) Pointer() unsafe.Pointer { return t.ptr }

// DLPackTensor describes a DLPack tensor's fields.
type DLPackTensor struct {
	Data                 uintptr
	DeviceType, DeviceID int32   // kDLCPU = 1, kDLCUDA = 2, ...
	Shape                []int64 // copied
	Strides              []int64 // nil for compact row-major
	Code, Bits           uint8   // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6
	Lanes                uint16
	ByteOffset           uint64
	Version              [2]uint32 // major, minor (versioned tensors only)
	Flags                uint64    // versioned tensors only: 1 read-only, 2 is-copied
}

// Describe reads the tensor's fields.
func (t *DLPack) Describe() DLPackTensor {
	v := 0
	if t.Versioned {
		v = 1
	}
	c := C.go_dl_tensor_of(t.ptr, C.int(v))
	d := DLPackTensor{Data: uintptr(c.data), DeviceType: int32(c.device_type),
		DeviceID: int32(c.device_id), Code: uint8(c.code), Bits: uint8(c.bits),
		Lanes: uint16(c.lanes), ByteOffset: uint64(c.byte_offset)}
	if c.ndim > 0 {
		d.Shape = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(c.shape)), int(c.ndim))...)
		if c.strides != nil {
			d.Strides = append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(c.strides)), int(c.ndim))...)
		}
	}
	if t.Versioned {
		var major, minor C.uint32_t
		var flags C.uint64_t
		C.go_dl_version(t.ptr, &major, &minor, &flags)
		d.Version, d.Flags = [2]uint32{uint32(major), uint32(minor)}, uint64(flags)
	}
	return d
}

// Delete runs the deleter of a tensor no consumer took (once; later calls do nothing).
func (t *DLPack) Delete() {
	if t.ptr == nil {
		return
	}
	v := 0
	if t.Versioned {
		v = 1
	}
	C.go_dl_delete(t.ptr, C.int(v))
	t.ptr = nil
}

// FromDLPack imports a compact row-major DLPack tensor without a copy where the device can
// address its memory. On success the buffer owns the tensor (its deleter runs when the buffer is
// released) and t is spent; on failure the caller still owns it. A read-only versioned tensor
// is refused (kernels may write any buffer). Call WaitStream first when a producer writes the
// tensor on a CUDA stream.
func (d *Device) FromDLPack(t *DLPack) (*Buffer, error) {
	if t == nil || t.ptr == nil {
		return nil, &Error{Status: StatusInvalidArgument, Message: "[api] FromDLPack: no tensor (nil or spent)"}
	}
	var raw *C.metile_buffer
	var msg *C.char
	var status C.metile_status
	if t.Versioned {
		status = C.go_metile_buffer_from_dlpack_versioned(&msg, &raw, d.raw, t.ptr)
	} else {
		status = C.go_metile_buffer_from_dlpack(&msg, &raw, d.raw, t.ptr)
	}
	if err := check(status, msg); err != nil {
		return nil, err
	}
	t.ptr = nil
	b, err := newBuffer(raw, 0, d.raw)
	if err != nil {
		return nil, err
	}
	n, err := b.Size()
	if err != nil {
		b.Close()
		return nil, err
	}
	b.bytes = n
	return b, nil
}
