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
    /// The buffer's device (retained): synchronized before a host view is made, so a view never
    /// races a launch still running.
    pub(crate) device: Device,
    /// For [`Device::wrap_vec`]: the caller's memory the buffer may use in place (the device is
    /// synchronized before it is freed, as an asynchronous launch may still use it).
    pub(crate) host: Option<Box<dyn std::any::Any + Send + Sync>>,
}

unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Buffer {
    pub(crate) fn contents(&self) -> Result<*mut u8> {
        self.device.synchronize()?;
        let mut p = ptr::null_mut();
        check(unsafe { sys::metile_buffer_contents(self.raw, &mut p) })?;
        Ok(p.cast())
    }

    /// The size in bytes this handle was made with (no library call).
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
        Ok(Buffer { raw: self.raw, bytes: self.bytes, device: self.device.clone(), host: None })
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

    /// The contents as a slice. Synchronizes the buffer's device first, so the view holds what
    /// every launch issued so far wrote.
    ///
    /// # Panics
    /// When that synchronize fails (a launch failed on an asynchronous device): call
    /// [`Device::synchronize`] first to get the error as a `Result`.
    pub fn as_slice<T: Element>(&self) -> &[T] {
        let p = self.contents().unwrap_or_else(|e| panic!("metile: Buffer::as_slice: {e}"));
        unsafe { std::slice::from_raw_parts(p as *const T, self.bytes / std::mem::size_of::<T>()) }
    }

    /// The contents as a mutable slice; synchronizes the device first, as
    /// [`as_slice`](Buffer::as_slice) does (and panics as it does).
    pub fn as_mut_slice<T: Element>(&mut self) -> &mut [T] {
        let p = self.contents().unwrap_or_else(|e| panic!("metile: Buffer::as_mut_slice: {e}"));
        unsafe { std::slice::from_raw_parts_mut(p as *mut T, self.bytes / std::mem::size_of::<T>()) }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if self.host.is_some() {
            let _ = self.device.synchronize(); // an error here was the launch's to report
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
