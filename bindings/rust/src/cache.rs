//! The compile cache (`metile_cache_*`) and autotuning (timing launches, persisted winners).
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

/// Turns the disk cache on or off (the in-memory cache stays); overrides METILE_CACHE.
pub fn set_enabled(enabled: bool) -> Result<()> {
    check(unsafe { sys::metile_cache_set_enabled(i32::from(enabled)) })
}

/// Removes every disk entry and the in-memory cache; resets the statistics.
pub fn clear() -> Result<()> {
    check(unsafe { sys::metile_cache_clear() })
}

/// Caps the disk cache's size in bytes (> 0); least recently used entries go first.
pub fn set_max_bytes(max_bytes: u64) -> Result<()> {
    check(unsafe { sys::metile_cache_set_max_bytes(max_bytes) })
}

/// Counters since process start or the last [`clear`] (`metile_cache_stats`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Compiles served from the in-memory cache.
    pub memory_hits: u64,
    /// Compiles served from the disk cache.
    pub disk_hits: u64,
    /// Compiles that built the kernel (not counting `no_cache` ones).
    pub misses: u64,
    /// Bytes read from the disk cache.
    pub bytes_read: u64,
    /// Bytes written to the disk cache.
    pub bytes_written: u64,
    /// Sum over hits of the build time each entry originally took.
    pub compile_seconds_saved: f64,
}

/// The cache's counters.
pub fn stats() -> Result<Stats> {
    let mut s: sys::metile_cache_stats = unsafe { std::mem::zeroed() };
    s.struct_size = std::mem::size_of::<sys::metile_cache_stats>();
    check(unsafe { sys::metile_cache_get_stats(&mut s) })?;
    Ok(Stats {
        memory_hits: s.memory_hits,
        disk_hits: s.disk_hits,
        misses: s.misses,
        bytes_read: s.bytes_read,
        bytes_written: s.bytes_written,
        compile_seconds_saved: s.compile_seconds_saved,
    })
}

/// Restores the default directory ($METILE_CACHE_DIR, $XDG_CACHE_HOME/metile, ~/.cache/metile).
pub fn reset_dir() -> Result<()> {
    check(unsafe { sys::metile_cache_set_dir(ptr::null()) })
}

/// Times each prepared launch: `warmup` untimed runs and a synchronize, then `rep` (>= 1) timed
/// runs each followed by a synchronize; gives the median milliseconds per launch.
pub fn autotune_time(launches: &mut [&mut crate::Launch<'_>], warmup: i32, rep: i32) -> Result<Vec<f64>> {
    let raws: Vec<*mut sys::metile_launch> = launches.iter().map(|l| l.raw).collect();
    let mut ms = vec![0.0; raws.len()];
    check(unsafe { sys::metile_autotune_time(raws.as_ptr(), raws.len(), warmup, rep, ms.as_mut_ptr()) })?;
    Ok(ms)
}

/// Persists `winner` for `key` under the cache directory (nothing when the disk cache is off).
pub fn autotune_store(key: &str, winner: &str) -> Result<()> {
    let (k, w) = (c_string(key)?, c_string(winner)?);
    check(unsafe { sys::metile_autotune_store(k.as_ptr(), w.as_ptr()) })
}

/// The stored winner for `key`, if any.
pub fn autotune_lookup(key: &str) -> Result<Option<String>> {
    let k = c_string(key)?;
    let mut out = ptr::null_mut();
    check(unsafe { sys::metile_autotune_lookup(k.as_ptr(), &mut out) })?;
    Ok(if out.is_null() { None } else { Some(unsafe { owned_string(out) }) })
}
