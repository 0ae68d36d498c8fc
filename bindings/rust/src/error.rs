//! Errors: the status of a failed call and the library's message.
use crate::sys;
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;

/// A failed call: the status code and the library's message (naming the subsystem and, for
/// program errors, the source location).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The `metile_status` (a `sys::METILE_ERROR_*`).
    pub status: i32,
    /// The library's message (for program errors, with the op's source location).
    pub message: String,
}

/// What kind of failure an [`Error`] is (its `status`, as an enum to match on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `METILE_ERROR_INVALID_ARGUMENT`.
    InvalidArgument,
    /// `METILE_ERROR_INVALID_PROGRAM`.
    InvalidProgram,
    /// `METILE_ERROR_COMPILE`.
    Compile,
    /// `METILE_ERROR_UNSUPPORTED`.
    Unsupported,
    /// `METILE_ERROR_DEVICE_UNAVAILABLE`.
    DeviceUnavailable,
    /// `METILE_ERROR_DEVICE`.
    Device,
    /// `METILE_ERROR_OUT_OF_MEMORY`.
    OutOfMemory,
    /// `METILE_ERROR_IO`.
    Io,
    /// `METILE_ERROR_INTERNAL`.
    Internal,
    /// A status this version of the crate does not know.
    Other(i32),
}

impl Error {
    /// The status as an [`ErrorKind`].
    pub fn kind(&self) -> ErrorKind {
        match self.status {
            sys::METILE_ERROR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::METILE_ERROR_INVALID_PROGRAM => ErrorKind::InvalidProgram,
            sys::METILE_ERROR_COMPILE => ErrorKind::Compile,
            sys::METILE_ERROR_UNSUPPORTED => ErrorKind::Unsupported,
            sys::METILE_ERROR_DEVICE_UNAVAILABLE => ErrorKind::DeviceUnavailable,
            sys::METILE_ERROR_DEVICE => ErrorKind::Device,
            sys::METILE_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
            sys::METILE_ERROR_IO => ErrorKind::Io,
            sys::METILE_ERROR_INTERNAL => ErrorKind::Internal,
            other => ErrorKind::Other(other),
        }
    }

    /// The status's name, e.g. "METILE_ERROR_INVALID_ARGUMENT".
    pub fn status_name(&self) -> String {
        unsafe { cstr(sys::metile_status_name(self.status)) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message)
    }
}

impl std::error::Error for Error {}

/// The result of every fallible call of this crate.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Turns a status into a Result, reading the thread-local message right after the call.
pub(crate) fn check(status: sys::metile_status) -> Result<()> {
    if status == sys::METILE_OK {
        Ok(())
    } else {
        Err(Error { status, message: unsafe { cstr(sys::metile_last_error()) } })
    }
}

pub(crate) fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error {
        status: sys::METILE_ERROR_INVALID_ARGUMENT,
        message: format!("string {s:?} contains a NUL byte"),
    })
}

/// Takes ownership of a string the library allocated.
pub(crate) unsafe fn owned_string(p: *mut c_char) -> String {
    let s = cstr(p);
    sys::metile_free(p.cast());
    s
}
