//! Devices: opening, properties, synchronization and stream ordering.
use crate::error::{check, cstr, c_string, Result};
use crate::sys;
use std::fmt;
use std::ptr;

use crate::{Buffer, DLPack, Element};

/// An open device. Cloning retains it; dropping releases it.
pub struct Device {
    pub(crate) raw: *mut sys::metile_device,
}

unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Device {
    /// Opens a device by name; `None` opens the default ($METILE_DEVICE, else metal, cuda, cpu).
    /// A GPU other than the first is named by index: "cuda:1".
    pub fn open(name: Option<&str>) -> Result<Device> {
        let name = name.map(c_string).transpose()?;
        let mut raw = ptr::null_mut();
        check(unsafe {
            sys::metile_device_open(&mut raw, name.as_ref().map_or(ptr::null(), |n| n.as_ptr()))
        })?;
        Ok(Device { raw })
    }

    /// The device's name ("cpu", "cuda", ...); empty if the library cannot say (see
    /// [`Device::info`] for the error).
    pub fn name(&self) -> String {
        let mut info: sys::metile_device_info = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::metile_device_info>();
        match check(unsafe { sys::metile_device_get_info(self.raw, &mut info) }) {
            Ok(()) => unsafe { cstr(info.name) },
            Err(_) => String::new(),
        }
    }

    /// Waits for every launch issued so far.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { sys::metile_device_synchronize(self.raw) })
    }

    /// A zeroed buffer of `bytes` bytes.
    pub fn alloc(&self, bytes: usize) -> Result<Buffer> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::metile_buffer_alloc(&mut raw, self.raw, bytes) })?;
        Ok(Buffer { raw, bytes, device: self.clone(), host: None })
    }

    /// The device's properties.
    pub fn info(&self) -> Result<DeviceInfo> {
        let mut info: sys::metile_device_info = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::metile_device_info>();
        check(unsafe { sys::metile_device_get_info(self.raw, &mut info) })?;
        Ok(unsafe {
            DeviceInfo {
                name: cstr(info.name),
                description: cstr(info.description),
                architecture: cstr(info.architecture),
                simd_width: info.simd_width,
                max_threads_per_group: info.max_threads_per_group,
                threadgroup_memory_bytes: info.threadgroup_memory_bytes,
                unified_memory: info.unified_memory != 0,
                asynchronous: info.asynchronous != 0,
                ordinal: info.ordinal,
            }
        })
    }

    /// The CUDA stream (a `CUstream` as an integer) this device queues launches on; 0 on devices
    /// without streams (interp, cpu, metal-sim).
    pub fn stream(&self) -> Result<u64> {
        let mut s = 0;
        check(unsafe { sys::metile_device_stream(self.raw, &mut s) })?;
        Ok(s)
    }

    /// Launches issued from now on wait for the work queued on `stream` so far (after importing
    /// a tensor a producer writes on `stream`; 0 and 1 are the legacy default stream, 2 the
    /// per-thread one). A no-op on devices without streams.
    pub fn wait_stream(&self, stream: u64) -> Result<()> {
        check(unsafe { sys::metile_device_wait_stream(self.raw, stream) })
    }

    /// Work queued on `stream` from now on waits for the launches issued so far (before a
    /// consumer on `stream` reads an exported buffer). Synchronizes on devices without streams.
    pub fn signal_stream(&self, stream: u64) -> Result<()> {
        check(unsafe { sys::metile_device_signal_stream(self.raw, stream) })
    }

    /// A new stream of the device's (a `CUstream` as an integer on cuda; on devices without
    /// streams a token launches accept and ignore). Launches queue on it through
    /// [`Launch::set_options`](crate::Launch::set_options); destroy it with
    /// [`destroy_stream`](Device::destroy_stream).
    pub fn create_stream(&self) -> Result<u64> {
        let mut s = 0;
        check(unsafe { sys::metile_stream_create(self.raw, &mut s) })?;
        Ok(s)
    }

    /// Destroys a stream from [`create_stream`](Device::create_stream); its queued work still runs.
    pub fn destroy_stream(&self, stream: u64) -> Result<()> {
        check(unsafe { sys::metile_stream_destroy(self.raw, stream) })
    }

    /// A buffer over `data`, which it owns: where the device addresses host memory directly
    /// (cpu, interp; metal for page-aligned memory) kernels use it in place
    /// ([`Buffer::shares_memory`]), else it is copied. Read results through
    /// [`Buffer::as_slice`] either way. Dropping the buffer synchronizes the device before the
    /// vector is freed.
    pub fn wrap_vec<T: Element>(&self, mut data: Vec<T>) -> Result<Buffer> {
        let bytes = std::mem::size_of_val(data.as_slice());
        let mut buf = unsafe { self.wrap_raw(data.as_mut_ptr().cast(), bytes)? };
        buf.host = Some(Box::new(data));
        Ok(buf)
    }

    /// A buffer over `bytes` of caller memory at `host` (`metile_buffer_wrap`).
    ///
    /// # Safety
    /// The memory stays valid, and is not accessed through any other reference while the
    /// buffer's views are alive or a launch may use it, until the buffer is dropped and the
    /// device synchronized.
    pub unsafe fn wrap_raw(&self, host: *mut std::os::raw::c_void, bytes: usize) -> Result<Buffer> {
        let mut raw = ptr::null_mut();
        check(sys::metile_buffer_wrap(&mut raw, self.raw, host, bytes))?;
        Ok(Buffer { raw, bytes, device: self.clone(), host: None })
    }

    /// Imports a compact row-major DLPack tensor, without a copy where the device can address
    /// its memory; its deleter runs when the buffer is dropped. On failure the tensor is dropped
    /// (its deleter runs). A read-only versioned tensor is refused. Call
    /// [`wait_stream`](Device::wait_stream) when a producer writes it on a CUDA stream.
    ///
    /// # Safety
    /// The tensor's memory may be any memory (another buffer's, another library's): the caller
    /// keeps views of the new buffer from overlapping any other live reference to it.
    pub unsafe fn from_dlpack(&self, tensor: DLPack) -> Result<Buffer> {
        let versioned = tensor.versioned();
        let p = tensor.into_raw();
        let mut raw = ptr::null_mut();
        let status = if versioned {
            sys::metile_buffer_from_dlpack_versioned(&mut raw, self.raw, p)
        } else {
            sys::metile_buffer_from_dlpack(&mut raw, self.raw, p)
        };
        if let Err(e) = check(status) {
            drop(DLPack::from_raw(p, versioned)); // the caller's again: delete it
            return Err(e);
        }
        let mut buf = Buffer { raw, bytes: 0, device: self.clone(), host: None };
        buf.bytes = buf.size()?;
        Ok(buf)
    }

    /// A new buffer holding a copy of `data`.
    pub fn buffer_from<T: Element>(&self, data: &[T]) -> Result<Buffer> {
        let buf = self.alloc(std::mem::size_of_val(data).max(1))?;
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr() as *const u8, buf.contents()?, std::mem::size_of_val(data));
        }
        Ok(buf)
    }
}

/// A device's properties (`metile_device_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The name `open` takes ("cpu", "cuda", ...).
    pub name: String,
    /// A human-readable description (e.g. the GPU's model).
    pub description: String,
    /// The target architecture (e.g. "sm_90"); empty where it means nothing.
    pub architecture: String,
    /// Threads per SIMD group (warp).
    pub simd_width: i32,
    /// The most threads one program instance may use.
    pub max_threads_per_group: i32,
    /// Threadgroup (shared) memory one program instance may use, in bytes.
    pub threadgroup_memory_bytes: u64,
    /// Host and device address the same buffers.
    pub unified_memory: bool,
    /// Launches return before the work is done.
    pub asynchronous: bool,
    /// The GPU's index ("cuda:N" opens GPU N); 0 on devices not chosen by index.
    pub ordinal: i32,
}

impl Clone for Device {
    fn clone(&self) -> Device {
        unsafe { sys::metile_device_retain(self.raw) };
        Device { raw: self.raw }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        unsafe { sys::metile_device_release(self.raw) };
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device").field("name", &self.name()).field("raw", &self.raw).finish()
    }
}
