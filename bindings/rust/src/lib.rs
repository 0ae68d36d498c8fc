//! Safe Rust bindings for metile: build tile programs, compile them for a device (`cpu`,
//! `interp`, `cuda`, `metal`, `metal-sim`), and launch them on buffers the host can read.
//!
//! ```no_run
//! use metile::{Arg, Builder, DType, Device, Kernel, Value};
//! let dev = Device::open(None)?;                      // $METILE_DEVICE or the best available
//! let mut b = Builder::new("double_it")?;
//! let x = b.param_ptr("x", DType::F32)?;
//! let offs = b.arange(Value::from_raw(0), 256)?;
//! let p = b.ptr_offset(x, offs)?;
//! let v = b.load(p, None, None)?;
//! let two = b.const_f32(2.0)?;
//! let doubled = b.mul(v, two)?;
//! b.store(p, doubled, None)?;
//! let kernel = Kernel::compile(&dev, &b.finish()?)?;
//! let mut buf = dev.buffer_from(&[1.0f32; 256])?;
//! kernel.launch([1, 1, 1], &[Arg::BufferMut(&mut buf)])?;  // written: exclusive access
//! dev.synchronize()?;
//! assert_eq!(buf.as_slice::<f32>()[0], 2.0);
//! # Ok::<(), metile::Error>(())
//! ```
//!
//! A buffer the kernel writes is passed as `Arg::BufferMut(&mut buf)` (a shared `Arg::Buffer` for
//! such a parameter is an error), so no `&[T]` view of it can be alive during the launch:
//!
//! ```compile_fail
//! # use metile::{Arg, Device, Kernel};
//! # fn f(kernel: &Kernel, dev: &Device) -> metile::Result<()> {
//! let mut out = dev.alloc(1024)?;
//! let view = out.as_slice::<f32>();
//! kernel.launch([1, 1, 1], &[Arg::BufferMut(&mut out)])?;  // error: `out` is borrowed
//! println!("{}", view[0]);
//! # Ok(()) }
//! ```
//!
//! [`Element`] is sealed: only the plain number types below can view buffer memory.
//!
//! ```compile_fail
//! struct NotPod(&'static u64);
//! unsafe impl metile::Element for NotPod { const DTYPE: metile::DType = metile::DType::F32; }
//! ```
#![allow(clippy::missing_safety_doc)]
#![warn(missing_docs)]

pub mod cache;
/// The raw C declarations, generated from `include/metile/metile.h` (documented there).
#[allow(missing_docs)]
pub mod sys;
mod buffer;
mod builder;
mod device;
mod dlpack;
mod element;
mod error;
mod event;
mod kernel;
mod launch;
mod program;

pub use buffer::Buffer;
pub use builder::{Builder, Value};
pub use device::{Device, DeviceInfo};
pub use dlpack::{DLPack, DLPackInfo};
pub use element::{DType, Element};
pub use error::{Error, ErrorKind, Result};
pub use event::Event;
pub use kernel::{CompileOptions, Kernel, KernelInfo};
pub use launch::{Arg, Launch};
pub use program::{Param, Program, Type};

use error::{c_string, check, cstr, owned_string};
use std::ptr;

/// The library's version, e.g. "0.1.0".
pub fn version() -> String {
    unsafe { cstr(sys::metile_version_string()) }
}

/// The loaded library's version number, MAJOR*10000 + MINOR*100 + PATCH.
pub fn version_number() -> u32 {
    unsafe { sys::metile_version() }
}

/// An op's text spelling ("add", "tile_load", ...); "invalid" for an unknown value.
pub fn op_name(op: sys::metile_op) -> String {
    unsafe { cstr(sys::metile_op_name(op)) }
}

/// Stops the launches running now on cpu, interp and metal-sim, from any thread: each fails
/// with `ErrorKind::Device` ("cancelled"), its outputs partly written; later launches run
/// normally. cuda kernels stop at a loop back-edge and the GPU is reset (see the C header's
/// `metile_cancel_launches`); metal is not affected. Safe to call from a signal handler.
pub fn cancel_launches() {
    unsafe { sys::metile_cancel_launches() }
}

/// Device names usable on this machine, e.g. ["interp", "cpu"].
pub fn devices_available() -> Result<Vec<String>> {
    let mut out = ptr::null_mut();
    check(unsafe { sys::metile_devices_available(&mut out) })?;
    let s = unsafe { owned_string(out) };
    Ok(s.split(',').filter(|x| !x.is_empty()).map(String::from).collect())
}

/// How many devices of `kind` this machine has: for "cuda" the GPUs (each opened as
/// `Device::open(Some("cuda:N"))` for N below the count), for other kinds 1 when usable here;
/// 0 when the kind cannot start here. An unknown kind, or one with an index, is an error.
pub fn device_count(kind: &str) -> Result<i32> {
    let kind = c_string(kind)?;
    let mut out = 0;
    check(unsafe { sys::metile_device_count(kind.as_ptr(), &mut out) })?;
    Ok(out)
}
