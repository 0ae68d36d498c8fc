//! Verified programs: text form and parameters.
use crate::error::{check, cstr, c_string, owned_string, Result};
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

    pub fn name(&self) -> String {
        unsafe { cstr(sys::metile_program_name(self.raw)) }
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
