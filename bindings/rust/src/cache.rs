//! The compile cache (`metile_cache_*`) and autotune records.
use crate::error::{check, c_string, owned_string, Result};
use crate::sys;
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
