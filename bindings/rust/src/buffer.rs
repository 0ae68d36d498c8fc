//! Buffers: memory the host and the device both address.
use crate::error::{check, Result};
use crate::sys;
use std::fmt;
use std::ptr;

use crate::Element;

/// Memory that the host and the device both address.
pub struct Buffer {
    pub(crate) raw: *mut sys::metile_buffer,
    pub(crate) bytes: usize,
}

unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Buffer {
    pub(crate) fn contents(&self) -> Result<*mut u8> {
        let mut p = ptr::null_mut();
        check(unsafe { sys::metile_buffer_contents(self.raw, &mut p) })?;
        Ok(p.cast())
    }

    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    /// The contents as a slice (synchronize the device first after asynchronous launches).
    pub fn as_slice<T: Element>(&self) -> &[T] {
        let p = self.contents().expect("a live buffer has contents");
        unsafe { std::slice::from_raw_parts(p as *const T, self.bytes / std::mem::size_of::<T>()) }
    }

    /// The contents as a mutable slice.
    pub fn as_mut_slice<T: Element>(&mut self) -> &mut [T] {
        let p = self.contents().expect("a live buffer has contents");
        unsafe { std::slice::from_raw_parts_mut(p as *mut T, self.bytes / std::mem::size_of::<T>()) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        unsafe { sys::metile_buffer_release(self.raw) };
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer").field("bytes", &self.bytes).field("raw", &self.raw).finish()
    }
}
