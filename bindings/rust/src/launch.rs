//! Launch arguments and prepared launches.
use crate::error::{check, Result};
use crate::sys;
use std::fmt;
use std::ptr;

use crate::{Buffer, Kernel};

/// A launch argument, in parameter order. Buffers the kernel writes (stores to) must be passed
/// as `BufferMut`/`BufferMutAt`: the exclusive borrow keeps every `as_slice` view of them out of
/// the launch. `Buffer`/`BufferAt` serve parameters the kernel only reads.
pub enum Arg<'a> {
    Buffer(&'a Buffer),
    BufferAt(&'a Buffer, u64),
    BufferMut(&'a mut Buffer),
    BufferMutAt(&'a mut Buffer, u64),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F64(f64),
}

impl Arg<'_> {
    pub(crate) fn raw(&self) -> sys::metile_arg {
        let mut a = sys::metile_arg { kind: 0, reserved: 0, buffer: ptr::null_mut(), offset: 0, i: 0, f: 0.0 };
        match *self {
            Arg::Buffer(b) => { a.kind = sys::METILE_ARG_BUFFER; a.buffer = b.raw; }
            Arg::BufferAt(b, off) => { a.kind = sys::METILE_ARG_BUFFER; a.buffer = b.raw; a.offset = off; }
            Arg::BufferMut(ref b) => { a.kind = sys::METILE_ARG_BUFFER; a.buffer = b.raw; }
            Arg::BufferMutAt(ref b, off) => { a.kind = sys::METILE_ARG_BUFFER; a.buffer = b.raw; a.offset = off; }
            Arg::I32(v) => { a.kind = sys::METILE_ARG_I32; a.i = v as i64; }
            Arg::U32(v) => { a.kind = sys::METILE_ARG_U32; a.i = v as i64; }
            Arg::I64(v) => { a.kind = sys::METILE_ARG_I64; a.i = v; }
            Arg::F32(v) => { a.kind = sys::METILE_ARG_F32; a.f = v as f64; }
            Arg::F64(v) => { a.kind = sys::METILE_ARG_F64; a.f = v; }
        }
        a
    }
}

/// A launch prepared once ([`Kernel::prepare`]) and run many times.
pub struct Launch<'a> {
    pub(crate) raw: *mut sys::metile_launch,
    pub(crate) _args: Vec<Arg<'a>>,
    pub(crate) _kernel: &'a Kernel,
}

impl Launch<'_> {
    /// Runs the launch again (asynchronous on GPUs).
    pub fn run(&mut self) -> Result<()> {
        check(unsafe { sys::metile_launch_run(self.raw) })
    }

    /// Changes the grid for later runs.
    pub fn set_grid(&mut self, grid: [u32; 3]) -> Result<()> {
        check(unsafe { sys::metile_launch_set_grid(self.raw, grid.as_ptr()) })
    }
}

impl fmt::Debug for Launch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Launch").field("raw", &self.raw).finish()
    }
}

impl Drop for Launch<'_> {
    fn drop(&mut self) {
        unsafe { sys::metile_launch_release(self.raw) };
    }
}

