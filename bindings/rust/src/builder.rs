//! The program builder: one method per op of the C API.
use crate::error::{check, c_string, Result};
use crate::sys;
use std::fmt;
use std::panic::Location;
use std::ptr;

use crate::{DType, Program, Type};

/// A value inside a [`Builder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value(pub(crate) sys::metile_value);

impl Value {
    /// The "none" value (0) is accepted where an operand is optional, e.g. `arange`'s start.
    #[track_caller]
    pub fn from_raw(raw: sys::metile_value) -> Value {
        Value(raw)
    }
}

/// Builds a tile program op by op (docs/semantics.md gives the meaning of each op).
///
/// Every op records the caller's `file:line` (through `#[track_caller]`), so an error about the
/// op names the line of the user's code that built it; [`Builder::set_loc`] replaces that with
/// explicit locations.
pub struct Builder {
    pub(crate) raw: *mut sys::metile_builder,
    // The location last given to the library; `None` once set_loc took over.
    loc: Option<(&'static str, u32)>,
}

macro_rules! binary_ops {
    ($($name:ident => $op:ident),* $(,)?) => {
        $(#[doc = concat!("Elementwise `", stringify!($op), "`, promoting and broadcasting like numpy.")]
        #[track_caller]
        pub fn $name(&mut self, x: Value, y: Value) -> Result<Value> {
            self.binary(sys::$op, x, y)
        })*
    };
}

macro_rules! unary_ops {
    ($($name:ident => $op:ident),* $(,)?) => {
        $(#[doc = concat!("Elementwise `", stringify!($op), "`.")]
        #[track_caller]
        pub fn $name(&mut self, x: Value) -> Result<Value> {
            self.unary(sys::$op, x)
        })*
    };
}

include!("ops.rs");

#[track_caller]
fn opt(v: Option<Value>) -> sys::metile_value {
    v.map_or(0, |v| v.0)
}

impl Builder {
    /// Starts a kernel named `kernel_name` (a C identifier).
    pub fn new(kernel_name: &str) -> Result<Builder> {
        let name = c_string(kernel_name)?;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::metile_builder_create(&mut raw, name.as_ptr()) })?;
        Ok(Builder { raw, loc: Some(("", 0)) })
    }

    /// Attaches the caller's location to the next ops, unless `set_loc` was called.
    #[track_caller]
    fn here(&mut self) {
        let caller = Location::caller();
        let loc = (caller.file(), caller.line());
        if self.loc.map_or(true, |l| l == loc) {
            return;
        }
        // A file name with a NUL byte cannot come from rustc; a failure here only loses the location.
        if let Ok(f) = c_string(loc.0) {
            if unsafe { sys::metile_builder_set_loc(self.raw, f.as_ptr(), loc.1 as i32) } == sys::METILE_OK {
                self.loc = Some(loc);
            }
        }
    }

    #[track_caller]
    fn out(&mut self, f: impl FnOnce(*mut sys::metile_value) -> sys::metile_status) -> Result<Value> {
        self.here();
        let mut v = 0;
        check(f(&mut v))?;
        Ok(Value(v))
    }

    /// Attaches `file:line` to the ops built from now on, and stops the automatic capture of
    /// each op's caller location for this builder.
    pub fn set_loc(&mut self, file: &str, line: i32) -> Result<()> {
        self.loc = None;
        let f = c_string(file)?;
        check(unsafe { sys::metile_builder_set_loc(self.raw, f.as_ptr(), line) })
    }

    #[track_caller]
    /// Fixes the thread count T of a kernel that uses the SIMT view.
    pub fn set_num_threads(&mut self, n: i32) -> Result<()> {
        check(unsafe { sys::metile_builder_set_num_threads(self.raw, n) })
    }

    #[track_caller]
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
    #[track_caller]
    pub fn param_ptr(&mut self, name: &str, dtype: DType) -> Result<Value> {
        self.param(name, dtype, true)
    }

    /// A scalar parameter.
    #[track_caller]
    pub fn param_scalar(&mut self, name: &str, dtype: DType) -> Result<Value> {
        self.param(name, dtype, false)
    }

    #[track_caller]
    /// An i32 constant.
    pub fn const_i32(&mut self, v: i32) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_const_int(raw, sys::METILE_DTYPE_I32, v as i64, o) })
    }

    #[track_caller]
    /// An f32 constant.
    pub fn const_f32(&mut self, v: f32) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_const_float(raw, sys::METILE_DTYPE_F32, v as f64, o) })
    }

    #[track_caller]
    /// This program instance's index along grid `axis` (0..3).
    pub fn program_id(&mut self, axis: i32) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_grid(raw, sys::METILE_OP_PROGRAM_ID, axis, o) })
    }

    #[track_caller]
    /// The grid's size along `axis`.
    pub fn num_programs(&mut self, axis: i32) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_grid(raw, sys::METILE_OP_NUM_PROGRAMS, axis, o) })
    }

    /// `start + [0, size)` as an i32 tile; `start` is a `Value` or `None` (0).
    #[track_caller]
    pub fn arange(&mut self, start: impl Into<Option<Value>>, size: i64) -> Result<Value> {
        let (raw, start) = (self.raw, opt(start.into()));
        self.out(|o| unsafe { sys::metile_builder_arange(raw, start, size, o) })
    }

    #[track_caller]
    /// `x` converted to `dtype`.
    pub fn cast(&mut self, x: Value, dtype: DType) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_cast(raw, x.0, dtype as i32, o) })
    }

    #[track_caller]
    /// `x`'s bits read as `dtype`, a dtype of the same width (Triton's bitcast).
    pub fn bitcast(&mut self, x: Value, dtype: DType) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_bitcast(raw, x.0, dtype as i32, o) })
    }

    /// Broadcasts to a 1-D or 2-D shape (numpy rules).
    #[track_caller]
    pub fn broadcast(&mut self, x: Value, shape: &[i64]) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_broadcast(raw, x.0, shape.len() as i32, shape.as_ptr(), o) })
    }

    #[track_caller]
    /// `x`'s elements (row-major order kept) in a new shape of the same element count.
    pub fn reshape(&mut self, x: Value, shape: &[i64]) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_reshape(raw, x.0, shape.len() as i32, shape.as_ptr(), o) })
    }

    #[track_caller]
    /// A binary op or comparison (`op`: a `sys::METILE_OP_*`), promoting and broadcasting like numpy.
    pub fn binary(&mut self, op: sys::metile_op, x: Value, y: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_binary(raw, op, x.0, y.0, o) })
    }

    #[track_caller]
    /// A unary op (`op`: a `sys::METILE_OP_*`).
    pub fn unary(&mut self, op: sys::metile_op, x: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_unary(raw, op, x.0, o) })
    }

    // One method per element-wise op of the op table (ops.rs, generated from src/ir/ops.def).
    elementwise_ops!();

    /// `where(cond, x, y)`.
    #[track_caller]
    pub fn select(&mut self, cond: Value, x: Value, y: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_select(raw, cond.0, x.0, y.0, o) })
    }

    #[track_caller]
    /// `ptr + offsets`: a pointer tile.
    pub fn ptr_offset(&mut self, ptr: Value, offsets: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_ptr_offset(raw, ptr.0, offsets.0, o) })
    }

    /// Masked-off lanes touch no memory; with `other` None they are inactive (reductions, dots
    /// and stores skip them), else active with the value `other`.
    #[track_caller]
    pub fn load(&mut self, ptrs: Value, mask: Option<Value>, other: Option<Value>) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_load(raw, ptrs.0, opt(mask), opt(other), o) })
    }

    #[track_caller]
    /// Writes `value` through `ptrs` where `mask` (everywhere with `None`).
    pub fn store(&mut self, ptrs: Value, value: Value, mask: Option<Value>) -> Result<()> {
        self.here();
        check(unsafe { sys::metile_builder_store(self.raw, ptrs.0, value.0, opt(mask)) })
    }

    /// An atomic read-modify-write (`op`: METILE_OP_ATOMIC_ADD, _MAX, _MIN, _XCHG, _CAS; `cmp`
    /// only for _CAS); gives the old values, 0 where masked off.
    #[track_caller]
    pub fn atomic(&mut self, op: sys::metile_op, ptrs: Value, cmp: Option<Value>, value: Value,
                  mask: Option<Value>) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe {
            sys::metile_builder_atomic(raw, op, ptrs.0, opt(cmp), value.0, opt(mask), o)
        })
    }

    /// The `shape` tile at (row, col) of a row-major matrix with leading dimension `stride`;
    /// with `bounds` (rows, cols), elements outside read 0.
    #[track_caller]
    pub fn tile_load(&mut self, ptr: Value, row: Value, col: Value, stride: Value, shape: [i64; 2],
                     bounds: Option<(Value, Value)>) -> Result<Value> {
        let (br, bc) = bounds.map_or((0, 0), |(r, c)| (r.0, c.0));
        let raw = self.raw;
        self.out(|o| unsafe {
            sys::metile_builder_tile_load(raw, ptr.0, row.0, col.0, stride.0, shape[0], shape[1], br, bc, o)
        })
    }

    #[track_caller]
    /// Writes a 2-D tile at (row, col) of a row-major matrix with leading dimension `stride`;
    /// with `bounds` (rows, cols), elements outside are not written.
    pub fn tile_store(&mut self, ptr: Value, row: Value, col: Value, stride: Value, value: Value,
                      bounds: Option<(Value, Value)>) -> Result<()> {
        self.here();
        let (br, bc) = bounds.map_or((0, 0), |(r, c)| (r.0, c.0));
        check(unsafe { sys::metile_builder_tile_store(self.raw, ptr.0, row.0, col.0, stride.0, value.0, br, bc) })
    }

    /// A zero-filled f32 tile.
    #[track_caller]
    pub fn zeros(&mut self, shape: &[i64]) -> Result<Value> {
        let z = self.const_f32(0.0)?;
        self.broadcast(z, shape)
    }

    /// `acc + a @ b`.
    #[track_caller]
    pub fn dot(&mut self, a: Value, b: Value, acc: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_dot(raw, a.0, b.0, acc.0, o) })
    }

    /// `acc + a @ b` rounded as `precision` says (a `metile_dot_precision`:
    /// `sys::METILE_DOT_PRECISION_IEEE`, `_TF32`, `_TF32X3`; `_DEFAULT` is the compile's).
    #[track_caller]
    pub fn dot_with_precision(&mut self, a: Value, b: Value, acc: Value,
                              precision: sys::metile_dot_precision) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_dot_with_precision(raw, a.0, b.0, acc.0, precision, o) })
    }

    #[track_caller]
    fn reduce(&mut self, op: sys::metile_op, x: Value, axis: Option<i32>) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_reduce(raw, op, x.0, axis.unwrap_or(-1), o) })
    }

    /// Sum of all elements (`axis` None) or along an axis of a 2-D tile.
    #[track_caller]
    pub fn sum(&mut self, x: Value, axis: Option<i32>) -> Result<Value> {
        self.reduce(sys::METILE_OP_REDUCE_SUM, x, axis)
    }

    #[track_caller]
    /// Maximum of all elements (`axis` None) or along an axis of a 2-D tile.
    pub fn max(&mut self, x: Value, axis: Option<i32>) -> Result<Value> {
        self.reduce(sys::METILE_OP_REDUCE_MAX, x, axis)
    }

    #[track_caller]
    /// Minimum of all elements (`axis` None) or along an axis of a 2-D tile.
    pub fn min(&mut self, x: Value, axis: Option<i32>) -> Result<Value> {
        self.reduce(sys::METILE_OP_REDUCE_MIN, x, axis)
    }

    /// A counted loop with loop-carried values: `body(builder, iv, carried)` returns the next
    /// values; the values after the loop are returned.
    #[track_caller]
    pub fn for_range<F>(&mut self, start: Value, end: Value, step: Value, inits: &[Value], body: F) -> Result<Vec<Value>>
    where
        F: FnOnce(&mut Builder, Value, &[Value]) -> Result<Vec<Value>>,
    {
        self.here();
        let raw_inits: Vec<sys::metile_value> = inits.iter().map(|v| v.0).collect();
        let mut iv = 0;
        let mut carried = vec![0; inits.len()];
        check(unsafe {
            sys::metile_builder_for_begin(self.raw, start.0, end.0, step.0, raw_inits.as_ptr(),
                                          raw_inits.len(), &mut iv, carried.as_mut_ptr())
        })?;
        let carried: Vec<Value> = carried.into_iter().map(Value).collect();
        let yields = body(self, Value(iv), &carried)?;
        self.here();
        let raw_yields: Vec<sys::metile_value> = yields.iter().map(|v| v.0).collect();
        let mut results = vec![0; raw_yields.len()];
        check(unsafe {
            sys::metile_builder_for_end(self.raw, raw_yields.as_ptr(), raw_yields.len(), results.as_mut_ptr())
        })?;
        Ok(results.into_iter().map(Value).collect())
    }

    /// `if cond` on a bool scalar (uniform per program: every thread of a program takes the
    /// same branch). Each closure builds its branch and returns the values it gives (the same
    /// number and types in both); the if's results are returned.
    #[track_caller]
    pub fn if_else<T, E>(&mut self, cond: Value, then: T, otherwise: E) -> Result<Vec<Value>>
    where
        T: FnOnce(&mut Builder) -> Result<Vec<Value>>,
        E: FnOnce(&mut Builder) -> Result<Vec<Value>>,
    {
        self.here();
        check(unsafe { sys::metile_builder_if_begin(self.raw, cond.0) })?;
        let t: Vec<sys::metile_value> = then(self)?.iter().map(|v| v.0).collect();
        self.here();
        check(unsafe { sys::metile_builder_if_else(self.raw, t.as_ptr(), t.len()) })?;
        let e: Vec<sys::metile_value> = otherwise(self)?.iter().map(|v| v.0).collect();
        self.here();
        let mut results = vec![0; e.len()];
        check(unsafe { sys::metile_builder_if_end(self.raw, e.as_ptr(), e.len(), results.as_mut_ptr()) })?;
        Ok(results.into_iter().map(Value).collect())
    }

    /// A `while` loop with carried values: `cond(builder, carried)` returns the bool scalar
    /// condition (uniform per program) and the values passed on (the carried types);
    /// `body(builder, passed)` returns the next carried values. Returns the values after the loop.
    #[track_caller]
    pub fn while_loop<C, B>(&mut self, inits: &[Value], cond: C, body: B) -> Result<Vec<Value>>
    where
        C: FnOnce(&mut Builder, &[Value]) -> Result<(Value, Vec<Value>)>,
        B: FnOnce(&mut Builder, &[Value]) -> Result<Vec<Value>>,
    {
        self.here();
        let raw_inits: Vec<sys::metile_value> = inits.iter().map(|v| v.0).collect();
        let mut carried = vec![0; inits.len()];
        check(unsafe {
            sys::metile_builder_while_begin(self.raw, raw_inits.as_ptr(), raw_inits.len(), carried.as_mut_ptr())
        })?;
        let carried: Vec<Value> = carried.into_iter().map(Value).collect();
        let (c, passed) = cond(self, &carried)?;
        self.here();
        let raw_passed: Vec<sys::metile_value> = passed.iter().map(|v| v.0).collect();
        let mut args = vec![0; raw_passed.len()];
        check(unsafe {
            sys::metile_builder_while_do(self.raw, c.0, raw_passed.as_ptr(), raw_passed.len(), args.as_mut_ptr())
        })?;
        let args: Vec<Value> = args.into_iter().map(Value).collect();
        let yields: Vec<sys::metile_value> = body(self, &args)?.iter().map(|v| v.0).collect();
        self.here();
        let mut results = vec![0; yields.len()];
        check(unsafe {
            sys::metile_builder_while_end(self.raw, yields.as_ptr(), yields.len(), results.as_mut_ptr())
        })?;
        Ok(results.into_iter().map(Value).collect())
    }

    /// Records a compile-time constant the program was specialized with.
    #[track_caller]
    pub fn set_constexpr(&mut self, name: &str, value: &str) -> Result<()> {
        self.here();
        let (n, v) = (c_string(name)?, c_string(value)?);
        check(unsafe { sys::metile_builder_set_constexpr(self.raw, n.as_ptr(), v.as_ptr()) })
    }

    /// The type of a value built so far.
    pub fn value_type(&self, x: Value) -> Result<Type> {
        let mut t: sys::metile_type = unsafe { std::mem::zeroed() };
        check(unsafe { sys::metile_builder_value_type(self.raw, x.0, &mut t) })?;
        Ok(Type::from_raw(&t))
    }

    /// An integer constant of any integer (or bool) dtype.
    #[track_caller]
    pub fn const_int(&mut self, dtype: DType, v: i64) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_const_int(raw, dtype as i32, v, o) })
    }

    /// A float constant of any float dtype.
    #[track_caller]
    pub fn const_float(&mut self, dtype: DType, v: f64) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_const_float(raw, dtype as i32, v, o) })
    }

    /// Builds `body` in a region whose side effects run only for simdgroup range `role` of
    /// `num_roles` (even split), or, when `num_sgs > 0`, simdgroups `[first_sg, first_sg + num_sgs)`.
    #[track_caller]
    pub fn role<F>(&mut self, role: i32, num_roles: i32, first_sg: i32, num_sgs: i32, body: F) -> Result<()>
    where
        F: FnOnce(&mut Builder) -> Result<()>,
    {
        self.here();
        check(unsafe { sys::metile_builder_role_begin(self.raw, role, num_roles, first_sg, num_sgs) })?;
        body(self)?;
        self.here();
        check(unsafe { sys::metile_builder_role_end(self.raw) })
    }

    /// The thread index (a T-element i32 tile) of the SIMT view.
    #[track_caller]
    pub fn thread_id(&mut self) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_simt(raw, sys::METILE_OP_THREAD_ID, o) })
    }

    /// The lane index within the simdgroup (a T-element i32 tile).
    #[track_caller]
    pub fn simd_lane_id(&mut self) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_simt(raw, sys::METILE_OP_SIMD_LANE_ID, o) })
    }

    /// A threadgroup barrier.
    #[track_caller]
    pub fn barrier(&mut self) -> Result<()> {
        self.here();
        let mut v = 0;
        check(unsafe { sys::metile_builder_simt(self.raw, sys::METILE_OP_BARRIER, &mut v) })
    }

    /// `x[i ^ mask]` across the simdgroup.
    #[track_caller]
    pub fn simd_shuffle_xor(&mut self, x: Value, mask: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_simd(raw, sys::METILE_OP_SIMD_SHUFFLE_XOR, x.0, mask.0, o) })
    }

    /// `x[(i & !31) + lane]`: one lane's value to its whole simdgroup.
    #[track_caller]
    pub fn simd_broadcast(&mut self, x: Value, lane: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_simd(raw, sys::METILE_OP_SIMD_BROADCAST, x.0, lane.0, o) })
    }

    /// Threadgroup memory of `size` elements; gives a threadgroup pointer.
    #[track_caller]
    pub fn shared(&mut self, size: i64, dtype: DType) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_shared(raw, size, dtype as i32, o) })
    }

    /// Remaps program ids for locality ("morton", "hilbert", "diagonal", "grouped",
    /// "grouped2/4/8", "linear", "auto"); a bijection on any grid shape.
    #[track_caller]
    pub fn tile_swizzle(&mut self, pid_m: Value, pid_n: Value, pattern: &str, block_size: i32) -> Result<(Value, Value)> {
        self.here();
        let p = c_string(pattern)?;
        let (mut m, mut n) = (0, 0);
        check(unsafe { sys::metile_builder_tile_swizzle(self.raw, pid_m.0, pid_n.0, p.as_ptr(), block_size, &mut m, &mut n) })?;
        Ok((Value(m), Value(n)))
    }

    /// Inclusive scan of `x` along `axis`: `op` is `METILE_OP_CUMSUM` or `METILE_OP_CUMPROD`;
    /// `reverse` scans from the end. Inactive lanes count as the identity and stay inactive.
    #[track_caller]
    pub fn scan(&mut self, op: sys::metile_op, x: Value, axis: i32, reverse: bool) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_scan(raw, op, x.0, axis, reverse as i32, o) })
    }

    /// The transpose of a 2-D tile.
    #[track_caller]
    pub fn trans(&mut self, x: Value) -> Result<Value> {
        let raw = self.raw;
        self.out(|o| unsafe { sys::metile_builder_trans(raw, x.0, o) })
    }

    /// Prints `values` from the kernel, one line per active element, after `prefix` (UTF-8
    /// without control characters, at most 256 bytes), to the process's stdout (or the CUDA
    /// printf buffer); the order between programs and threads is unspecified.
    #[track_caller]
    pub fn device_print(&mut self, prefix: &str, values: &[Value]) -> Result<()> {
        self.here();
        let p = c_string(prefix)?;
        let raw: Vec<sys::metile_value> = values.iter().map(|v| v.0).collect();
        check(unsafe { sys::metile_builder_device_print(self.raw, p.as_ptr(), raw.as_ptr(), raw.len()) })
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

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder").field("raw", &self.raw).finish()
    }
}
