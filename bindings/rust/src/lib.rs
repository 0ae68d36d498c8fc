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

pub mod sys;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_char;
use std::ptr;

/// A failed call: the status code and the library's message (naming the subsystem and, for
/// program errors, the source location).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: i32,
    pub message: String,
}

/// What kind of failure an [`Error`] is (its `status`, as an enum to match on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    InvalidArgument,
    InvalidProgram,
    Compile,
    Unsupported,
    DeviceUnavailable,
    Device,
    OutOfMemory,
    Io,
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

pub type Result<T> = std::result::Result<T, Error>;

unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Turns a status into a Result, reading the thread-local message right after the call.
fn check(status: sys::metile_status) -> Result<()> {
    if status == sys::METILE_OK {
        Ok(())
    } else {
        Err(Error { status, message: unsafe { cstr(sys::metile_last_error()) } })
    }
}

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error {
        status: sys::METILE_ERROR_INVALID_ARGUMENT,
        message: format!("string {s:?} contains a NUL byte"),
    })
}

/// Takes ownership of a string the library allocated.
unsafe fn owned_string(p: *mut c_char) -> String {
    let s = cstr(p);
    sys::metile_free(p.cast());
    s
}

/// The library's version, e.g. "0.1.0".
pub fn version() -> String {
    unsafe { cstr(sys::metile_version_string()) }
}

/// Device names usable on this machine, e.g. ["interp", "cpu"].
pub fn devices_available() -> Result<Vec<String>> {
    let mut out = ptr::null_mut();
    check(unsafe { sys::metile_devices_available(&mut out) })?;
    let s = unsafe { owned_string(out) };
    Ok(s.split(',').filter(|x| !x.is_empty()).map(String::from).collect())
}

/// Element types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum DType {
    F32 = 1,
    F16 = 2,
    BF16 = 3,
    I32 = 4,
    U32 = 5,
    I64 = 6,
    Bool = 7,
    I8 = 8,
    U8 = 9,
}

mod sealed {
    pub trait Sealed {}
}

/// Plain element types whose buffers can be viewed as Rust slices.
///
/// # Safety
/// Every bit pattern of the buffer's bytes must be a valid value of the type (no padding, no
/// references, no niches). The trait is sealed: it cannot be implemented outside this crate.
pub unsafe trait Element: sealed::Sealed + Copy + 'static {
    const DTYPE: DType;
}
macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        unsafe impl Element for $t { const DTYPE: DType = DType::$d; }
    )*};
}
element!(f32 => F32, i32 => I32, u32 => U32, i64 => I64, i8 => I8, u8 => U8);

/// An open device. Cloning retains it; dropping releases it.
pub struct Device {
    raw: *mut sys::metile_device,
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

/// Memory that the host and the device both address.
pub struct Buffer {
    raw: *mut sys::metile_buffer,
    bytes: usize,
}

unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}

impl Buffer {
    fn contents(&self) -> Result<*mut u8> {
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

/// A value inside a [`Builder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value(sys::metile_value);

impl Value {
    /// The "none" value (0) is accepted where an operand is optional, e.g. `arange`'s start.
    pub fn from_raw(raw: sys::metile_value) -> Value {
        Value(raw)
    }
}

/// Builds a tile program op by op (see DESIGN.md §3 for the semantics of each op).
pub struct Builder {
    raw: *mut sys::metile_builder,
}

macro_rules! binary_ops {
    ($($name:ident => $op:ident),* $(,)?) => {
        $(pub fn $name(&mut self, x: Value, y: Value) -> Result<Value> {
            self.binary(sys::$op, x, y)
        })*
    };
}

macro_rules! unary_ops {
    ($($name:ident => $op:ident),* $(,)?) => {
        $(pub fn $name(&mut self, x: Value) -> Result<Value> {
            self.unary(sys::$op, x)
        })*
    };
}

fn opt(v: Option<Value>) -> sys::metile_value {
    v.map_or(0, |v| v.0)
}

impl Builder {
    pub fn new(kernel_name: &str) -> Result<Builder> {
        let name = c_string(kernel_name)?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::metile_builder_create(&mut raw, name.as_ptr()) })?;
        Ok(Builder { raw })
    }

    fn out(&mut self, f: impl FnOnce(*mut sys::metile_value) -> sys::metile_status) -> Result<Value> {
        let mut v = 0;
        check(f(&mut v))?;
        Ok(Value(v))
    }

    /// Attaches `file:line` to the ops built from now on.
    pub fn set_loc(&mut self, file: &str, line: i32) -> Result<()> {
        let f = c_string(file)?;
        check(unsafe { sys::metile_builder_set_loc(self.raw, f.as_ptr(), line) })
    }

    pub fn set_num_threads(&mut self, n: i32) -> Result<()> {
        check(unsafe { sys::metile_builder_set_num_threads(self.raw, n) })
    }

    fn param(&mut self, name: &str, dtype: DType, pointer: bool) -> Result<Value> {
        let n = c_string(name)?;
        let t = sys::metile_type {
            dtype: dtype as i32,
            rank: 0,
            shape: [0, 0],
            is_pointer: pointer as i32,
            address_space: sys::METILE_ADDRESS_SPACE_DEVICE,
        };
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_param(raw, n.as_ptr(), &t, o) })
    }

    /// A pointer parameter to `dtype` elements.
    pub fn param_ptr(&mut self, name: &str, dtype: DType) -> Result<Value> {
        self.param(name, dtype, true)
    }

    /// A scalar parameter.
    pub fn param_scalar(&mut self, name: &str, dtype: DType) -> Result<Value> {
        self.param(name, dtype, false)
    }

    pub fn const_i32(&mut self, v: i32) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_const_int(raw, sys::METILE_DTYPE_I32, v as i64, o) })
    }

    pub fn const_f32(&mut self, v: f32) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_const_float(raw, sys::METILE_DTYPE_F32, v as f64, o) })
    }

    pub fn program_id(&mut self, axis: i32) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_grid(raw, sys::METILE_OP_PROGRAM_ID, axis, o) })
    }

    pub fn num_programs(&mut self, axis: i32) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_grid(raw, sys::METILE_OP_NUM_PROGRAMS, axis, o) })
    }

    /// `start + [0, size)` as an i32 tile.
    pub fn arange(&mut self, start: Value, size: i64) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_arange(raw, start.0, size, o) })
    }

    pub fn cast(&mut self, x: Value, dtype: DType) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_cast(raw, x.0, dtype as i32, o) })
    }

    /// Broadcasts to a 1-D or 2-D shape (numpy rules).
    pub fn broadcast(&mut self, x: Value, shape: &[i64]) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_broadcast(raw, x.0, shape.len() as i32, shape.as_ptr(), o) })
    }

    pub fn reshape(&mut self, x: Value, shape: &[i64]) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_reshape(raw, x.0, shape.len() as i32, shape.as_ptr(), o) })
    }

    pub fn binary(&mut self, op: sys::metile_op, x: Value, y: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_binary(raw, op, x.0, y.0, o) })
    }

    pub fn unary(&mut self, op: sys::metile_op, x: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_unary(raw, op, x.0, o) })
    }

    binary_ops! {
        add => METILE_OP_ADD, sub => METILE_OP_SUB, mul => METILE_OP_MUL, div => METILE_OP_DIV,
        floordiv => METILE_OP_FLOORDIV, rem => METILE_OP_MOD, maximum => METILE_OP_MAXIMUM,
        minimum => METILE_OP_MINIMUM, lt => METILE_OP_LT, le => METILE_OP_LE, gt => METILE_OP_GT,
        ge => METILE_OP_GE, eq => METILE_OP_EQ, ne => METILE_OP_NE,
    }

    unary_ops! {
        neg => METILE_OP_NEG, exp => METILE_OP_EXP, log => METILE_OP_LOG, sqrt => METILE_OP_SQRT,
        rsqrt => METILE_OP_RSQRT, abs => METILE_OP_ABS, tanh => METILE_OP_TANH,
        sigmoid => METILE_OP_SIGMOID,
    }

    /// `where(cond, x, y)`.
    pub fn select(&mut self, cond: Value, x: Value, y: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_select(raw, cond.0, x.0, y.0, o) })
    }

    pub fn ptr_offset(&mut self, ptr: Value, offsets: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_ptr_offset(raw, ptr.0, offsets.0, o) })
    }

    /// Masked-off lanes give `other` (0 when None) and touch no memory.
    pub fn load(&mut self, ptrs: Value, mask: Option<Value>, other: Option<Value>) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_load(raw, ptrs.0, opt(mask), opt(other), o) })
    }

    pub fn store(&mut self, ptrs: Value, value: Value, mask: Option<Value>) -> Result<()> {
        check(unsafe { sys::metile_builder_store(self.raw, ptrs.0, value.0, opt(mask)) })
    }

    /// An atomic read-modify-write (`op`: METILE_OP_ATOMIC_ADD, _MAX, _MIN, _XCHG, _CAS; `cmp`
    /// only for _CAS); gives the old values, 0 where masked off.
    pub fn atomic(&mut self, op: sys::metile_op, ptrs: Value, cmp: Option<Value>, value: Value,
                  mask: Option<Value>) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe {
            sys::metile_builder_atomic(raw, op, ptrs.0, opt(cmp), value.0, opt(mask), o)
        })
    }

    /// The `shape` tile at (row, col) of a row-major matrix with leading dimension `stride`;
    /// with `bounds` (rows, cols), elements outside read 0.
    pub fn tile_load(&mut self, ptr: Value, row: Value, col: Value, stride: Value, shape: [i64; 2],
                     bounds: Option<(Value, Value)>) -> Result<Value> {
        let (br, bc) = bounds.map_or((0, 0), |(r, c)| (r.0, c.0));
        let raw = self.raw;
        self.out(|o| unsafe {
            sys::metile_builder_tile_load(raw, ptr.0, row.0, col.0, stride.0, shape[0], shape[1], br, bc, o)
        })
    }

    pub fn tile_store(&mut self, ptr: Value, row: Value, col: Value, stride: Value, value: Value,
                      bounds: Option<(Value, Value)>) -> Result<()> {
        let (br, bc) = bounds.map_or((0, 0), |(r, c)| (r.0, c.0));
        check(unsafe { sys::metile_builder_tile_store(self.raw, ptr.0, row.0, col.0, stride.0, value.0, br, bc) })
    }

    /// A zero-filled f32 tile.
    pub fn zeros(&mut self, shape: &[i64]) -> Result<Value> {
        let z = self.const_f32(0.0)?;
        self.broadcast(z, shape)
    }

    /// `acc + a @ b`.
    pub fn dot(&mut self, a: Value, b: Value, acc: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_dot(raw, a.0, b.0, acc.0, o) })
    }

    fn reduce(&mut self, op: sys::metile_op, x: Value, axis: Option<i32>) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_reduce(raw, op, x.0, axis.unwrap_or(-1), o) })
    }

    /// Sum of all elements (`axis` None) or along an axis of a 2-D tile.
    pub fn sum(&mut self, x: Value, axis: Option<i32>) -> Result<Value> {
        self.reduce(sys::METILE_OP_REDUCE_SUM, x, axis)
    }

    pub fn max(&mut self, x: Value, axis: Option<i32>) -> Result<Value> {
        self.reduce(sys::METILE_OP_REDUCE_MAX, x, axis)
    }

    pub fn min(&mut self, x: Value, axis: Option<i32>) -> Result<Value> {
        self.reduce(sys::METILE_OP_REDUCE_MIN, x, axis)
    }

    /// A counted loop with loop-carried values: `body(builder, iv, carried)` returns the next
    /// values; the values after the loop are returned.
    pub fn for_range<F>(&mut self, start: Value, end: Value, step: Value, inits: &[Value], body: F) -> Result<Vec<Value>>
    where
        F: FnOnce(&mut Builder, Value, &[Value]) -> Result<Vec<Value>>,
    {
        let raw_inits: Vec<sys::metile_value> = inits.iter().map(|v| v.0).collect();
        let mut iv = 0;
        let mut carried = vec![0; inits.len()];
        check(unsafe {
            sys::metile_builder_for_begin(self.raw, start.0, end.0, step.0, raw_inits.as_ptr(),
                                          raw_inits.len(), &mut iv, carried.as_mut_ptr())
        })?;
        let carried: Vec<Value> = carried.into_iter().map(Value).collect();
        let yields = body(self, Value(iv), &carried)?;
        let raw_yields: Vec<sys::metile_value> = yields.iter().map(|v| v.0).collect();
        let mut results = vec![0; raw_yields.len()];
        check(unsafe {
            sys::metile_builder_for_end(self.raw, raw_yields.as_ptr(), raw_yields.len(), results.as_mut_ptr())
        })?;
        Ok(results.into_iter().map(Value).collect())
    }

    /// Verifies and returns the program; the builder is spent.
    pub fn finish(self) -> Result<Program> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::metile_builder_finish(self.raw, &mut raw) })?;
        Ok(Program { raw })
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        unsafe { sys::metile_builder_release(self.raw) };
    }
}

/// A verified tile program.
pub struct Program {
    raw: *mut sys::metile_program,
}

unsafe impl Send for Program {}
unsafe impl Sync for Program {}

impl Program {
    /// Parses the canonical text form.
    pub fn parse(text: &str) -> Result<Program> {
        let t = c_string(text)?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::metile_program_parse(&mut raw, t.as_ptr()) })?;
        Ok(Program { raw })
    }

    /// The canonical text form.
    pub fn text(&self) -> Result<String> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::metile_program_print(self.raw, &mut out) })?;
        Ok(unsafe { owned_string(out) })
    }

    pub fn name(&self) -> String {
        unsafe { cstr(sys::metile_program_name(self.raw)) }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        unsafe { sys::metile_program_release(self.raw) };
    }
}

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
    fn raw(&self) -> sys::metile_arg {
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

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device").field("name", &self.name()).field("raw", &self.raw).finish()
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer").field("bytes", &self.bytes).field("raw", &self.raw).finish()
    }
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder").field("raw", &self.raw).finish()
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program").field("name", &self.name()).field("raw", &self.raw).finish()
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.params.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Kernel").field("params", &names).field("raw", &self.raw).finish()
    }
}

/// A program compiled for a device.
pub struct Kernel {
    raw: *mut sys::metile_kernel,
    /// Per parameter: (name, whether the kernel writes through it).
    params: Vec<(String, bool)>,
}

unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Kernel {
    pub fn compile(device: &Device, program: &Program) -> Result<Kernel> {
        Kernel::compile_with(device, program, &CompileOptions::default())
    }

    /// Compiles with explicit options.
    pub fn compile_with(device: &Device, program: &Program, options: &CompileOptions) -> Result<Kernel> {
        let mut n = 0usize;
        check(unsafe { sys::metile_program_num_params(program.raw, &mut n) })?;
        let mut params = Vec::with_capacity(n);
        for i in 0..n {
            let mut name = ptr::null();
            let mut access = 0u32;
            check(unsafe { sys::metile_program_param(program.raw, i, &mut name, ptr::null_mut()) })?;
            check(unsafe { sys::metile_program_param_access(program.raw, i, &mut access) })?;
            params.push((unsafe { cstr(name) }, access & sys::METILE_PARAM_WRITE as u32 != 0));
        }
        let mut raw = ptr::null_mut();
        let opts = options.raw();
        check(unsafe { sys::metile_kernel_compile(&mut raw, device.raw, program.raw, &opts) })?;
        Ok(Kernel { raw, params })
    }

    /// Launches over `grid` program instances (asynchronous on GPUs). A parameter the kernel
    /// writes needs `Arg::BufferMut`; a shared `Arg::Buffer` for it is an invalid-argument error.
    pub fn launch(&self, grid: [u32; 3], args: &[Arg]) -> Result<()> {
        self.check_exclusive(args)?;
        let raw: Vec<sys::metile_arg> = args.iter().map(Arg::raw).collect();
        check(unsafe { sys::metile_kernel_launch(self.raw, grid.as_ptr(), raw.as_ptr(), raw.len()) })
    }

    /// Checks the arguments once and returns a [`Launch`] to run many times. It holds the
    /// arguments' borrows, so buffers it writes stay exclusively borrowed while it exists.
    pub fn prepare<'a>(&'a self, grid: [u32; 3], args: Vec<Arg<'a>>) -> Result<Launch<'a>> {
        self.check_exclusive(&args)?;
        let raw: Vec<sys::metile_arg> = args.iter().map(Arg::raw).collect();
        let mut launch = ptr::null_mut();
        check(unsafe { sys::metile_launch_create(&mut launch, self.raw, grid.as_ptr(), raw.as_ptr(), raw.len()) })?;
        Ok(Launch { raw: launch, _args: args, _kernel: self })
    }

    fn check_exclusive(&self, args: &[Arg]) -> Result<()> {
        for (i, a) in args.iter().enumerate() {
            if let (Arg::Buffer(_) | Arg::BufferAt(..), Some((name, true))) = (a, self.params.get(i)) {
                return Err(Error {
                    status: sys::METILE_ERROR_INVALID_ARGUMENT,
                    message: format!("[launch] argument `{name}` is written by the kernel: pass \
                                      Arg::BufferMut(&mut buffer) so no view of it is alive"),
                });
            }
        }
        Ok(())
    }

    /// A stage's text: "tile_ir", "cpp", "msl", "cuda", ...
    pub fn source(&self, stage: &str) -> Result<String> {
        let s = c_string(stage)?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::metile_kernel_source(self.raw, s.as_ptr(), &mut out) })?;
        Ok(unsafe { owned_string(out) })
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        unsafe { sys::metile_kernel_release(self.raw) };
    }
}

/// Compile options (`metile_compile_options`); `Default` gives the library's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileOptions {
    /// Threads per program instance on GPUs; 0 lets the compiler choose.
    pub num_threads: i32,
    /// Whether f32 `dot` may use TF32/relaxed matrix units; `None` is the device default.
    pub allow_tf32: Option<bool>,
    /// 0: no optimization passes; 1: the default pipeline.
    pub opt_level: i32,
    /// Bypass the compile cache (memory and disk) for this kernel.
    pub no_cache: bool,
    /// A launch that accesses memory outside a buffer fails, naming the op's source line.
    pub check_bounds: bool,
    /// No bounds guards (an access outside its buffer is undefined behaviour).
    pub unchecked: bool,
    /// Merge consecutive reduction loops over the same rows (online softmax); default on.
    pub fuse_reductions: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        let mut o = sys::metile_compile_options {
            struct_size: 0,
            num_threads: 0,
            allow_tf32: 0,
            opt_level: 0,
            no_cache: 0,
            check_bounds: 0,
            unchecked: 0,
            no_fuse_reductions: 0,
        };
        unsafe { sys::metile_compile_options_init(&mut o) };
        CompileOptions {
            num_threads: o.num_threads,
            allow_tf32: if o.allow_tf32 < 0 { None } else { Some(o.allow_tf32 != 0) },
            opt_level: o.opt_level,
            no_cache: o.no_cache != 0,
            check_bounds: o.check_bounds != 0,
            unchecked: o.unchecked != 0,
            fuse_reductions: o.no_fuse_reductions == 0,
        }
    }
}

impl CompileOptions {
    fn raw(&self) -> sys::metile_compile_options {
        sys::metile_compile_options {
            struct_size: std::mem::size_of::<sys::metile_compile_options>(),
            num_threads: self.num_threads,
            allow_tf32: self.allow_tf32.map_or(-1, i32::from),
            opt_level: self.opt_level,
            no_cache: i32::from(self.no_cache),
            check_bounds: i32::from(self.check_bounds),
            unchecked: i32::from(self.unchecked),
            no_fuse_reductions: i32::from(!self.fuse_reductions),
        }
    }
}

/// A launch prepared once ([`Kernel::prepare`]) and run many times.
pub struct Launch<'a> {
    raw: *mut sys::metile_launch,
    _args: Vec<Arg<'a>>,
    _kernel: &'a Kernel,
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

/// The compile cache (`metile_cache_*`).
pub mod cache {
    use super::{check, c_string, owned_string, sys, Result};
    use std::ptr;

    /// Sets the disk cache directory (created when needed).
    pub fn set_dir(dir: &str) -> Result<()> {
        let d = c_string(dir)?;
        check(unsafe { sys::metile_cache_set_dir(d.as_ptr()) })
    }

    /// The disk cache directory.
    pub fn dir() -> Result<String> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::metile_cache_get_dir(&mut out) })?;
        Ok(unsafe { owned_string(out) })
    }

    /// Turns the cache (memory and disk) on or off.
    pub fn set_enabled(enabled: bool) -> Result<()> {
        check(unsafe { sys::metile_cache_set_enabled(i32::from(enabled)) })
    }

    /// Removes every disk entry and the in-memory cache; resets the statistics.
    pub fn clear() -> Result<()> {
        check(unsafe { sys::metile_cache_clear() })
    }
}
