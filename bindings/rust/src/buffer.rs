//! Buffers: memory the host and the device both address.
use crate::error::{check, Result};
use crate::sys;
use std::fmt;
use std::ptr;

use crate::{DType, Device, DLPack, Element};

/// Memory that the host and the device both address.
pub struct Buffer {
    pub(crate) raw: *mut sys::metile_buffer,
    pub(crate) bytes: usize,
    /// For [`Device::wrap_vec`]: the device (synchronized before the memory is freed, as an
    /// asynchronous launch may still use it) and the caller's memory the buffer may use in place.
    pub(crate) host: Option<(Device, Box<dyn std::any::Any + Send + Sync>)>,
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

    /// The size in bytes as the library knows it (`metile_buffer_size`).
    pub fn size(&self) -> Result<usize> {
        let mut n = 0;
        check(unsafe { sys::metile_buffer_size(self.raw, &mut n) })?;
        Ok(n)
    }

    /// Whether a wrapped buffer uses the caller's memory in place (else it holds a copy, read
    /// through `as_slice`).
    pub fn shares_memory(&self) -> bool {
        unsafe { sys::metile_buffer_shares_memory(self.raw) == 1 }
    }

    /// A second handle to the same buffer (`metile_buffer_retain`). It shares the memory, so it
    /// is `unsafe`: the caller keeps a `&mut` view of one from overlapping any view of the other.
    pub unsafe fn retain(&self) -> Result<Buffer> {
        check(sys::metile_buffer_retain(self.raw))?;
        Ok(Buffer { raw: self.raw, bytes: self.bytes, host: None })
    }

    /// Exports the buffer as a row-major DLPack tensor of `dtype` and `shape` (at most 8
    /// dimensions; a legacy `DLManagedTensor`, or with `versioned` a 1.x
    /// `DLManagedTensorVersioned`). The tensor keeps the buffer's memory alive until its deleter
    /// runs. cuda buffers are kDLCUDA, others kDLCPU. Nothing is synchronized: see
    /// [`Device::signal_stream`].
    pub fn to_dlpack(&self, dtype: DType, shape: &[i64], versioned: bool) -> Result<DLPack> {
        let mut out = ptr::null_mut();
        let ndim = i32::try_from(shape.len()).unwrap_or(i32::MAX);
        check(unsafe {
            if versioned {
                sys::metile_buffer_to_dlpack_versioned(self.raw, dtype as i32, ndim, shape.as_ptr(), &mut out)
            } else {
                sys::metile_buffer_to_dlpack(self.raw, dtype as i32, ndim, shape.as_ptr(), &mut out)
            }
        })?;
        Ok(unsafe { DLPack::from_raw(out, versioned) })
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
        if let Some((device, _)) = &self.host {
            let _ = device.synchronize();
        }
        unsafe { sys::metile_buffer_release(self.raw) };
        // `host` (the wrapped memory) is dropped after the release.
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("bytes", &self.bytes)
            .field("wrapped", &self.host.is_some())
            .field("raw", &self.raw)
            .finish()
    }
}
