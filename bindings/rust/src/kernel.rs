//! Kernels: programs compiled for a device, and the compile options.
use crate::error::{check, cstr, c_string, owned_string, Result};
use crate::sys;
use std::fmt;
use std::ptr;

use crate::{Arg, Device, Error, Launch, Program};

/// A program compiled for a device.
pub struct Kernel {
    pub(crate) raw: *mut sys::metile_kernel,
    /// Per parameter: (name, whether the kernel writes through it).
    params: Vec<(String, bool)>,
    /// The device it runs on (a launch over caller memory synchronizes it before letting go).
    device: Device,
}

unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Kernel {
    /// Compiles `program` for `device` with the default [`CompileOptions`].
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
        Ok(Kernel { raw, params, device: device.clone() })
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
        Ok(Launch { raw: launch, _args: args, _memory: Vec::new(), _kernel: self })
    }

    /// The device the kernel was compiled for.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The compile-cache key: 64 lowercase hex digits.
    pub fn cache_key(&self) -> Result<String> {
        let mut buf = [0 as std::os::raw::c_char; 65];
        check(unsafe { sys::metile_kernel_cache_key(self.raw, buf.as_mut_ptr()) })?;
        Ok(unsafe { cstr(buf.as_ptr()) })
    }

    /// What compiling produced (`metile_kernel_get_info`).
    pub fn info(&self) -> Result<KernelInfo> {
        let mut info: sys::metile_kernel_info = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::metile_kernel_info>();
        check(unsafe { sys::metile_kernel_get_info(self.raw, &mut info) })?;
        Ok(KernelInfo {
            threads_per_group: info.threads_per_group,
            threadgroup_memory_bytes: info.threadgroup_memory_bytes,
            threadgroup_memory_limit: info.threadgroup_memory_limit,
            registers_per_thread: info.registers_per_thread,
            from_cache: info.from_cache != 0,
            compile_seconds: info.compile_seconds,
        })
    }

    pub(crate) fn check_exclusive_at(&self, index: usize, arg: &Arg) -> Result<()> {
        if let (Arg::Buffer(_) | Arg::BufferAt(..), Some((name, true))) = (arg, self.params.get(index)) {
            return Err(Error {
                status: sys::METILE_ERROR_INVALID_ARGUMENT,
                message: format!("[launch] argument `{name}` is written by the kernel: pass \
                                  Arg::BufferMut(&mut buffer) so no view of it is alive"),
            });
        }
        Ok(())
    }

    fn check_exclusive(&self, args: &[Arg]) -> Result<()> {
        for (i, a) in args.iter().enumerate() {
            self.check_exclusive_at(i, a)?;
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

/// What compiling a kernel produced (`metile_kernel_info`).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelInfo {
    /// Threads per program instance the kernel runs with.
    pub threads_per_group: i32,
    /// Threadgroup (shared) memory one program instance uses, in bytes.
    pub threadgroup_memory_bytes: u64,
    /// The most the device allows one program instance (what compiling checked against).
    pub threadgroup_memory_limit: u64,
    /// Registers per thread where the device reports them (cuda); 0 when unknown.
    pub registers_per_thread: i32,
    /// Loaded from the compile cache.
    pub from_cache: bool,
    /// Time spent compiling (or loading).
    pub compile_seconds: f64,
}

impl Clone for Kernel {
    /// Retains the kernel (`metile_kernel_retain`): kernels are immutable and shared.
    fn clone(&self) -> Kernel {
        unsafe { sys::metile_kernel_retain(self.raw) };
        Kernel { raw: self.raw, params: self.params.clone(), device: self.device.clone() }
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
    /// A later pass over the same range reads what an earlier pass kept when the row fits; default off.
    pub keep_rows: bool,
    /// Stages of the K-loop pipeline of a dot (0: the device's choice, 1: none, up to 8).
    pub num_stages: i32,
    /// The warp grid of a dot on matrix units, both 0 (the compiler chooses) or both 1..32.
    pub warps_m: i32,
    /// See `warps_m`.
    pub warps_n: i32,
    /// A GEMM's K loop in parts (0: the compiler's choice, 1: off, up to 64).
    pub split_k: i32,
    /// The `metile_dot_precision` of dots that have none of their own (0: f32 accuracy,
    /// 1: IEEE, 2: TF32, 3: TF32x3).
    pub dot_precision: i32,
    /// Registers a thread may use on cuda (Triton's `maxnreg`: 0 lets the compiler choose,
    /// else 16..255); other devices ignore it.
    pub maxnreg: i32,
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
            keep_rows: 0,
            num_stages: 0,
            warps_m: 0,
            warps_n: 0,
            split_k: 0,
            dot_precision: 0,
            maxnreg: 0,
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
            keep_rows: o.keep_rows != 0,
            num_stages: o.num_stages,
            warps_m: o.warps_m,
            warps_n: o.warps_n,
            split_k: o.split_k,
            dot_precision: o.dot_precision,
            maxnreg: o.maxnreg,
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
            keep_rows: i32::from(self.keep_rows),
            num_stages: self.num_stages,
            warps_m: self.warps_m,
            warps_n: self.warps_n,
            split_k: self.split_k,
            dot_precision: self.dot_precision,
            maxnreg: self.maxnreg,
        }
    }
}


impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.params.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Kernel").field("params", &names).field("raw", &self.raw).finish()
    }
}
