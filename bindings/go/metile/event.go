package metile

/*
#include "wrappers.h"
*/
import "C"

import "runtime"

// Event is a point in a device's queue of work. On cuda it is a CUevent timed by the GPU; on
// devices without streams Record waits for the device and reads the host's clock, so the time
// between two events is the host's.
type Event struct {
	raw *C.metile_event
}

// NewEvent returns a new, unrecorded event of the device's.
func (d *Device) NewEvent() (*Event, error) {
	var raw *C.metile_event
	var msg *C.char
	if err := check(C.go_metile_event_create(&msg, &raw, d.raw), msg); err != nil {
		return nil, err
	}
	e := &Event{raw}
	runtime.SetFinalizer(e, (*Event).Close)
	return e, nil
}

// Record marks the work queued so far on stream (0: the device's own).
func (e *Event) Record(stream uint64) error {
	var msg *C.char
	err := check(C.go_metile_event_record(&msg, e.raw, C.uint64_t(stream)), msg)
	runtime.KeepAlive(e)
	return err
}

// Synchronize waits for the work the event marks (at once when never recorded).
func (e *Event) Synchronize() error {
	var msg *C.char
	err := check(C.go_metile_event_synchronize(&msg, e.raw), msg)
	runtime.KeepAlive(e)
	return err
}

// ElapsedMs returns the milliseconds from this event's record to end's (both recorded, same
// device).
func (e *Event) ElapsedMs(end *Event) (float64, error) {
	var ms C.double
	var msg *C.char
	var endRaw *C.metile_event // nil: the library reports the NULL event
	if end != nil {
		endRaw = end.raw
	}
	err := check(C.go_metile_event_elapsed_ms(&msg, e.raw, endRaw, &ms), msg)
	runtime.KeepAlive(e)
	runtime.KeepAlive(end)
	return float64(ms), err
}

// Close releases the event (idempotent: later calls return nil).
func (e *Event) Close() error {
	if e.raw == nil {
		return nil
	}
	var msg *C.char
	err := check(C.go_metile_event_release(&msg, e.raw), msg)
	e.raw = nil
	runtime.SetFinalizer(e, nil)
	return err
}
