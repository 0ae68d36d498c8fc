package metile

/*
#include "wrappers.h"
*/
import "C"

import (
	"unsafe"
)

// SetCacheDir sets the disk cache directory (created on demand; a relative path is made
// absolute now); "" restores the default ($METILE_CACHE_DIR, $XDG_CACHE_HOME/metile,
// ~/.cache/metile). Settings are process-wide.
func SetCacheDir(dir string) error {
	var cd *C.char
	if dir != "" {
		cd = C.CString(dir)
		defer C.free(unsafe.Pointer(cd))
	}
	var msg *C.char
	return check(C.go_metile_cache_set_dir(&msg, cd), msg)
}

// CacheDir returns the disk cache directory in use.
func CacheDir() (string, error) {
	var out, msg *C.char
	if err := check(C.go_metile_cache_get_dir(&msg, &out), msg); err != nil {
		return "", err
	}
	defer C.metile_free(unsafe.Pointer(out))
	return C.GoString(out), nil
}

// SetCacheEnabled turns the disk cache on or off (the in-memory cache stays).
func SetCacheEnabled(enabled bool) error {
	var msg *C.char
	return check(C.go_metile_cache_set_enabled(&msg, cbool(enabled)), msg)
}

// SetCacheMaxBytes caps the disk cache's size (> 0); least recently used entries go first.
func SetCacheMaxBytes(maxBytes uint64) error {
	var msg *C.char
	return check(C.go_metile_cache_set_max_bytes(&msg, C.uint64_t(maxBytes)), msg)
}

// CacheStats are the cache's counters since process start or the last ClearCache.
type CacheStats struct {
	MemoryHits, DiskHits, Misses uint64
	BytesRead, BytesWritten      uint64
	CompileSecondsSaved          float64
}

// GetCacheStats returns the counters.
func GetCacheStats() (CacheStats, error) {
	var s C.metile_cache_stats
	s.struct_size = C.size_t(unsafe.Sizeof(s))
	var msg *C.char
	if err := check(C.go_metile_cache_get_stats(&msg, &s), msg); err != nil {
		return CacheStats{}, err
	}
	return CacheStats{MemoryHits: uint64(s.memory_hits), DiskHits: uint64(s.disk_hits),
		Misses: uint64(s.misses), BytesRead: uint64(s.bytes_read), BytesWritten: uint64(s.bytes_written),
		CompileSecondsSaved: float64(s.compile_seconds_saved)}, nil
}

// ClearCache removes every disk entry and autotune record metile wrote in the cache directory
// and the in-memory cache, and resets the counters.
func ClearCache() error {
	var msg *C.char
	return check(C.go_metile_cache_clear(&msg), msg)
}
