//! Devices: opening, properties, synchronization and stream ordering.
use crate::error::{check, cstr, c_string, Result};
use crate::sys;
use std::fmt;
use std::ptr;

use crate::{Buffer, Element};

/// An open device. Cloning retains it; dropping releases it.
pub struct Device {
    pub(crate) raw: *mut sys::metile_device,
}

unsafe impl Send for Device {}
unsafe impl Sync for Device {}

impl Device {
    /// Opens a device by name; `None` opens the default ($METILE_DEVICE, else metal, cuda, cpu).
    pub fn open(name: Option<&str>) -> Result<Device> {
        let name = name.map(c_string).transpose()?;
        let mut raw = ptr::null_mut();
        check(unsafe {
            sys::metile_device_open(&mut raw, name.as_ref().map_or(ptr::null(), |n| n.as_ptr()))
        })?;
        Ok(Device { raw })
    }

    /// The device's name ("cpu", "cuda", ...).
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
        Ok(Buffer { raw, bytes })
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
