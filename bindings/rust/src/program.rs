//! Verified programs: text form and parameters.
use crate::error::{check, cstr, c_string, owned_string, Result};
use crate::DType;
use crate::sys;
use std::fmt;
use std::ptr;


/// A verified tile program.
pub struct Program {
    pub(crate) raw: *mut sys::metile_program,
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

    /// The kernel's name.
    pub fn name(&self) -> String {
        unsafe { cstr(sys::metile_program_name(self.raw)) }
    }

    /// The parameters in order: name, type and how the program uses the memory behind them.
    pub fn params(&self) -> Result<Vec<Param>> {
        let mut n = 0usize;
        check(unsafe { sys::metile_program_num_params(self.raw, &mut n) })?;
        (0..n)
            .map(|i| {
                let mut name = ptr::null();
                let mut raw_t: sys::metile_type = unsafe { std::mem::zeroed() };
                let mut access = 0u32;
                check(unsafe { sys::metile_program_param(self.raw, i, &mut name, &mut raw_t) })?;
                check(unsafe { sys::metile_program_param_access(self.raw, i, &mut access) })?;
                Ok(Param {
                    name: unsafe { cstr(name) },
                    ty: Type::from_raw(&raw_t),
                    reads: access & sys::METILE_PARAM_READ as u32 != 0,
                    writes: access & sys::METILE_PARAM_WRITE as u32 != 0,
                })
            })
            .collect()
    }
}

/// A value's or parameter's type (`metile_type`): a scalar (rank 0) or 1-D/2-D tile of `dtype`,
/// or, when `pointer`, a pointer (tile) to `dtype` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Type {
    /// `None` for a dtype value this crate does not know.
    pub dtype: Option<DType>,
    /// 0 for a scalar, 1 or 2 for a tile.
    pub rank: i32,
    /// The tile's shape (unused dimensions 0).
    pub shape: [i64; 2],
    /// A pointer (tile) rather than values.
    pub pointer: bool,
    /// A pointer into threadgroup (shared) memory.
    pub threadgroup: bool,
}

impl Type {
    pub(crate) fn from_raw(t: &sys::metile_type) -> Type {
        Type {
            dtype: DType::from_raw(t.dtype),
            rank: t.rank,
            shape: t.shape,
            pointer: t.is_pointer != 0,
            threadgroup: t.address_space == sys::METILE_ADDRESS_SPACE_THREADGROUP,
        }
    }
}

/// One kernel parameter ([`Program::params`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The parameter's name.
    pub name: String,
    /// The parameter's type.
    pub ty: Type,
    /// The program reads memory through this pointer parameter.
    pub reads: bool,
    /// The program writes memory through it.
    pub writes: bool,
}

impl Clone for Program {
    /// Retains the program (`metile_program_retain`): programs are immutable and shared.
    fn clone(&self) -> Program {
        unsafe { sys::metile_program_retain(self.raw) };
        Program { raw: self.raw }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        unsafe { sys::metile_program_release(self.raw) };
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program").field("name", &self.name()).field("raw", &self.raw).finish()
    }
}
