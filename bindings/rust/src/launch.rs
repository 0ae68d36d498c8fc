//! Launch arguments and prepared launches.
use crate::error::{check, Result};
use crate::sys;
use std::fmt;
use std::ptr;

use crate::{Buffer, Kernel};

/// A launch argument, in parameter order. Buffers the kernel writes (stores to) must be passed
/// as `BufferMut`/`BufferMutAt`: the exclusive borrow keeps every `as_slice` view of them out of
/// the launch. `Buffer`/`BufferAt` serve parameters the kernel only reads.
#[derive(Debug)]
pub enum Arg<'a> {
    /// A buffer the kernel only reads.
    Buffer(&'a Buffer),
    /// A buffer the kernel only reads, from a byte offset.
    BufferAt(&'a Buffer, u64),
    /// A buffer the kernel writes.
    BufferMut(&'a mut Buffer),
    /// A buffer the kernel writes, from a byte offset.
    BufferMutAt(&'a mut Buffer, u64),
    /// An i32 scalar.
    I32(i32),
    /// A u32 scalar.
    U32(u32),
    /// An i64 scalar.
    I64(i64),
    /// An f32 scalar.
    F32(f32),
    /// An f64 scalar.
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
    /// Caller memory given to `set_arg_memory`, borrowed exclusively while the launch exists.
    pub(crate) _memory: Vec<&'a mut [u8]>,
    pub(crate) _kernel: &'a Kernel,
}

impl<'a> Launch<'a> {
    /// Replaces argument `index` (checked like at creation; a written buffer needs
    /// `Arg::BufferMut`).
    pub fn set_arg(&mut self, index: usize, arg: Arg<'a>) -> Result<()> {
        if index >= self._args.len() {
            return Err(crate::Error {
                status: sys::METILE_ERROR_INVALID_ARGUMENT,
                message: format!("[launch] set_arg: index {index} outside the {} arguments", self._args.len()),
            });
        }
        self._kernel.check_exclusive_at(index, &arg)?;
        let raw = arg.raw();
        check(unsafe { sys::metile_launch_set_arg(self.raw, index, &raw) })?;
        self._args[index] = arg;
        Ok(())
    }

    /// Points pointer argument `index` at `memory`, which the device uses in place (the cheap
    /// way to re-run over a fresh host array); `Unsupported` where the device would have to
    /// copy it (wrap it with [`Device::wrap_vec`](crate::Device::wrap_vec) instead). The launch
    /// borrows the memory exclusively until it is dropped, and synchronizes the device then.
    pub fn set_arg_memory<T: crate::Element>(&mut self, index: usize, memory: &'a mut [T]) -> Result<()> {
        let bytes = std::mem::size_of_val(memory);
        // Element types are plain bytes: the borrow is kept as bytes.
        let view: &'a mut [u8] = unsafe { std::slice::from_raw_parts_mut(memory.as_mut_ptr().cast(), bytes) };
        check(unsafe { sys::metile_launch_set_arg_memory(self.raw, index, view.as_mut_ptr().cast(), bytes) })?;
        self._memory.push(view);
        Ok(())
    }

    /// Points pointer argument `index` at `bytes` of the device's own memory at device address
    /// `address` (on cuda: memory from cuMemAlloc/cudaMalloc, such as another library's tensor).
    /// The library checks that the range lies inside one allocation of the launch's GPU
    /// (`InvalidArgument` naming the address otherwise); host devices give `Unsupported`.
    ///
    /// # Safety
    /// The memory must stay allocated while the launch may run over it (until the argument is
    /// replaced, the launch dropped, or the device synchronized after its last run), and its
    /// producer's writes must be ordered before the launch (`Device::wait_stream`).
    pub unsafe fn set_arg_device_memory(&mut self, index: usize, address: u64, bytes: usize) -> Result<()> {
        check(unsafe { sys::metile_launch_set_arg_device_memory(self.raw, index, address, bytes) })
    }

    /// Runs the launch again (asynchronous on GPUs).
    pub fn run(&mut self) -> Result<()> {
        check(unsafe { sys::metile_launch_run(self.raw) })
    }

    /// Changes the grid for later runs.
    pub fn set_grid(&mut self, grid: [u32; 3]) -> Result<()> {
        check(unsafe { sys::metile_launch_set_grid(self.raw, grid.as_ptr()) })
    }

    /// Settings of later runs: `timeout_s`, the time limit in seconds (`Some(0.0)`: none; `None`:
    /// $METILE_TIMEOUT_S), past which a run fails naming the kernel (on cuda: when the host next
    /// waits, and the GPU is reset); `stream`, the CUDA stream to queue on (0: the device's own).
    pub fn set_options(&mut self, timeout_s: Option<f64>, stream: u64) -> Result<()> {
        let options = sys::metile_launch_options {
            struct_size: std::mem::size_of::<sys::metile_launch_options>(),
            timeout_s: timeout_s.unwrap_or(-1.0),
            stream,
        };
        check(unsafe { sys::metile_launch_set_options(self.raw, &options) })
    }
}

impl fmt::Debug for Launch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Launch")
            .field("args", &self._args.len())
            .field("kernel", self._kernel)
            .field("raw", &self.raw)
            .finish()
    }
}

impl Drop for Launch<'_> {
    fn drop(&mut self) {
        if !self._memory.is_empty() {
            let _ = self._kernel.device().synchronize(); // a run may still use the memory
        }
        unsafe { sys::metile_launch_release(self.raw) };
    }
}

