//! Events: waiting on and timing points in a device's queue (`metile_event_*`).
use crate::error::{check, Result};
use crate::sys;
use crate::Device;
use std::ptr;

/// A point in a device's queue of work. On cuda it is a `CUevent` timed by the GPU; on devices
/// without streams recording waits for the device and reads the host's clock, so the time
/// between two events is the host's.
pub struct Event {
    raw: *mut sys::metile_event,
}

unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Event {
    /// A new, unrecorded event of `device`'s.
    pub fn new(device: &Device) -> Result<Event> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::metile_event_create(&mut raw, device.raw) })?;
        Ok(Event { raw })
    }

    /// Marks the work queued so far on `stream` (0: the device's own).
    pub fn record(&self, stream: u64) -> Result<()> {
        check(unsafe { sys::metile_event_record(self.raw, stream) })
    }

    /// Waits for the work the event marks (at once when never recorded).
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::metile_event_synchronize(self.raw) })
    }

    /// Milliseconds from this event's record to `end`'s (both recorded, same device).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f64> {
        let mut ms = 0.0;
        check(unsafe { sys::metile_event_elapsed_ms(self.raw, end.raw, &mut ms) })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        unsafe { sys::metile_event_release(self.raw) };
    }
}
