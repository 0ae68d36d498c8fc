package metile

/*
#include "wrappers.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// VersionNumber returns MAJOR*10000 + MINOR*100 + PATCH of the library loaded at run time
// (compare with HeaderVersionNumber, the header cgo compiled against).
func VersionNumber() uint32 { return uint32(C.metile_version()) }

// HeaderVersionNumber is METILE_VERSION_NUMBER (MAJOR*10000 + MINOR*100 + PATCH) of the
// header this package was built with.
const HeaderVersionNumber = uint32(C.METILE_VERSION_NUMBER)

// More element types (F32 ... Bool are in metile.go).
const (
	I8 DType = 8
	U8 DType = 9
	// F8E4M3 and F8E5M2 are FP8 storage types (arithmetic on them computes in f32): E4M3 "fn"
	// (finite, max 448) and E5M2 (IEEE-like, max 57344).
	F8E4M3 DType = 10
	F8E5M2 DType = 11
)

// Size returns the size in bytes of one element (0 for an invalid dtype).
func (t DType) Size() int { return int(C.metile_dtype_size(C.metile_dtype(t))) }

// String returns "f32", "bf16", ...; "invalid" for an unknown value.
func (t DType) String() string { return C.GoString(C.metile_dtype_name(C.metile_dtype(t))) }

// OpName returns an op's text spelling ("add", "tile_load", ...); "invalid" for unknown values.
func OpName(op int) string { return C.GoString(C.metile_op_name(C.metile_op(op))) }

// DeviceInfo holds a device's properties.
type DeviceInfo struct {
	Name, Description, Architecture string
	SimdWidth                       int
	MaxThreadsPerGroup              int
	ThreadgroupMemoryBytes          uint64
	UnifiedMemory                   bool // host and device address the same buffers
	Asynchronous                    bool // launches return before the work is done
	Ordinal                         int  // the GPU's index ("cuda:N"); 0 on devices without one
}

// Info returns the device's properties.
func (d *Device) Info() (DeviceInfo, error) {
	var info C.metile_device_info
	info.struct_size = C.size_t(unsafe.Sizeof(info))
	var msg *C.char
	if err := check(C.go_metile_device_get_info(&msg, d.raw, &info), msg); err != nil {
		return DeviceInfo{}, err
	}
	defer runtime.KeepAlive(d) // the strings live as long as the device
	return DeviceInfo{
		Name:                   C.GoString(info.name),
		Description:            C.GoString(info.description),
		Architecture:           C.GoString(info.architecture),
		SimdWidth:              int(info.simd_width),
		MaxThreadsPerGroup:     int(info.max_threads_per_group),
		ThreadgroupMemoryBytes: uint64(info.threadgroup_memory_bytes),
		UnifiedMemory:          info.unified_memory != 0,
		Asynchronous:           info.asynchronous != 0,
		Ordinal:                int(info.ordinal),
	}, nil
}

// Clone returns a second handle to the same device (retained); each is closed on its own.
func (d *Device) Clone() (*Device, error) {
	var msg *C.char
	if err := check(C.go_metile_device_retain(&msg, d.raw), msg); err != nil {
		return nil, err
	}
	c := &Device{d.raw, d.name}
	runtime.SetFinalizer(c, (*Device).Close)
	return c, nil
}

// Stream returns the CUDA stream (a CUstream as an integer) this device queues its launches on;
// 0 on devices without streams (interp, cpu, metal-sim).
func (d *Device) Stream() (uint64, error) {
	var out C.uint64_t
	var msg *C.char
	if err := check(C.go_metile_device_stream(&msg, d.raw, &out), msg); err != nil {
		return 0, err
	}
	return uint64(out), nil
}

// WaitStream makes launches issued from now on wait for the work queued on stream so far (call
// it after importing a tensor another library writes on stream). 0 and 1 name the legacy
// default stream, 2 the per-thread one. A no-op on devices without streams.
func (d *Device) WaitStream(stream uint64) error {
	var msg *C.char
	return check(C.go_metile_device_wait_stream(&msg, d.raw, C.uint64_t(stream)), msg)
}

// SignalStream makes work queued on stream from now on wait for the launches issued so far
// (call it before a consumer on stream reads an exported buffer). Synchronizes on devices
// without streams.
func (d *Device) SignalStream(stream uint64) error {
	var msg *C.char
	return check(C.go_metile_device_signal_stream(&msg, d.raw, C.uint64_t(stream)), msg)
}

// CreateStream returns a new stream of the device's (a CUstream as an integer on cuda; on devices
// without streams a token launches accept and ignore). Launches queue on it through
// Launch.SetOptions; destroy it with DestroyStream.
func (d *Device) CreateStream() (uint64, error) {
	var out C.uint64_t
	var msg *C.char
	if err := check(C.go_metile_stream_create(&msg, d.raw, &out), msg); err != nil {
		return 0, err
	}
	return uint64(out), nil
}

// DestroyStream destroys a stream from CreateStream; the work queued on it still runs.
func (d *Device) DestroyStream(stream uint64) error {
	var msg *C.char
	return check(C.go_metile_stream_destroy(&msg, d.raw, C.uint64_t(stream)), msg)
}
