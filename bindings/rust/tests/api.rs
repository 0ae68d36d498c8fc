// The C API beyond the builder basics, through the safe crate: device info and streams, compile
// options and kernel info, prepared launches over new arguments and caller memory, wrapped
// memory, DLPack export/import, the cache and autotune records, program introspection and the
// SIMT ops. Runs on the default device ($METILE_DEVICE or the best available).
use metile::{cache, Arg, Builder, DType, Device, ErrorKind, Kernel, Result, Value};

fn device() -> Device {
    Device::open(None).expect("the default device opens")
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
        })
        .collect()
}

const BLOCK: i64 = 256;

/// out[i] = x[i] + y[i] for i < n.
fn vadd() -> Result<metile::Program> {
    vadd_named("vadd")
}

fn vadd_named(name: &str) -> Result<metile::Program> {
    let mut b = Builder::new(name)?;
    let x = b.param_ptr("x", DType::F32)?;
    let y = b.param_ptr("y", DType::F32)?;
    let out = b.param_ptr("out", DType::F32)?;
    let n = b.param_scalar("n", DType::I32)?;
    let pid = b.program_id(0)?;
    let block = b.const_i32(BLOCK as i32)?;
    let start = b.mul(pid, block)?;
    let offs = b.arange(start, BLOCK)?;
    let mask = b.lt(offs, n)?;
    let (px, py, po) = (b.ptr_offset(x, offs)?, b.ptr_offset(y, offs)?, b.ptr_offset(out, offs)?);
    let xv = b.load(px, Some(mask), None)?;
    let yv = b.load(py, Some(mask), None)?;
    let s = b.add(xv, yv)?;
    b.store(po, s, Some(mask))?;
    b.finish()
}

fn grid(n: usize) -> [u32; 3] {
    [((n as i64 + BLOCK - 1) / BLOCK) as u32, 1, 1]
}

fn assert_sum(got: &[f32], x: &[f32], y: &[f32]) {
    for i in 0..x.len() {
        assert_eq!(got[i], x[i] + y[i], "element {i}");
    }
}

#[test]
fn version_dtypes_ops_and_device_info() -> Result<()> {
    let parts: Vec<u32> = metile::version().split('.').map(|p| p.parse().unwrap()).collect();
    assert_eq!(metile::version_number(), parts[0] * 10000 + parts[1] * 100 + parts[2]);
    assert_eq!((DType::BF16.name(), DType::BF16.size()), ("bf16", 2));
    assert_eq!((DType::I64.name(), DType::I64.size()), ("i64", 8));
    assert_eq!(DType::from_raw(9), Some(DType::U8));
    assert_eq!((DType::F8E4M3.name(), DType::F8E4M3.size()), ("f8e4m3", 1));
    assert_eq!((DType::F8E5M2.name(), DType::F8E5M2.size()), ("f8e5m2", 1));
    assert_eq!(DType::from_raw(10), Some(DType::F8E4M3));
    assert_eq!(DType::from_raw(11), Some(DType::F8E5M2));
    assert_eq!(DType::from_raw(99), None);
    assert_eq!(metile::op_name(metile::sys::METILE_OP_TILE_LOAD), "tile_load");
    assert_eq!(metile::op_name(12345), "invalid");
    let dev = device();
    let info = dev.info()?;
    assert_eq!(info.name, dev.name());
    assert!(info.simd_width >= 1 && info.max_threads_per_group >= 1, "{info:?}");
    let stream = dev.stream()?;
    if info.name != "cuda" {
        assert_eq!(stream, 0);
    }
    dev.wait_stream(stream)?;
    dev.signal_stream(stream)?;
    Ok(())
}

#[test]
fn kernel_info_cache_key_source_and_clones() -> Result<()> {
    let dev = device();
    let program = vadd()?;
    let k1 = Kernel::compile(&dev, &program)?;
    let options = metile::CompileOptions { opt_level: 0, no_cache: true, check_bounds: true, ..Default::default() };
    let k2 = Kernel::compile_with(&dev, &program.clone(), &options)?;
    let (key1, key2) = (k1.cache_key()?, k2.cache_key()?);
    assert!(key1.len() == 64 && key1.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{key1}");
    assert_ne!(key1, key2, "options change the key");
    let info = k2.info()?;
    assert!(!info.from_cache && info.compile_seconds >= 0.0, "{info:?}");
    // Threadgroup memory used and the device's limit it was checked against; registers only on cuda.
    assert_eq!(info.threadgroup_memory_limit, dev.info()?.threadgroup_memory_bytes, "{info:?}");
    assert!(info.threadgroup_memory_bytes <= info.threadgroup_memory_limit, "{info:?}");
    assert_eq!(info.registers_per_thread == 0, dev.name() != "cuda", "{info:?}");
    assert!(k1.source("tile_ir")?.contains("vadd"));
    let e = k1.source("no_such_stage").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message.contains("tile_ir"), "the stages are listed: {e}");
    let bad = metile::CompileOptions { allow_tf32: None, num_threads: -3, ..Default::default() };
    let e = Kernel::compile_with(&dev, &program, &bad).unwrap_err();
    assert!(e.kind() == ErrorKind::InvalidArgument && e.message.contains("num_threads"), "{e}");
    let k3 = k1.clone();
    drop(k1);
    assert_eq!(k3.cache_key()?, key1); // the clone holds its own reference
    assert_eq!(k3.device().name(), dev.name());
    Ok(())
}

#[test]
fn prepared_launch_set_arg_and_autotune_time() -> Result<()> {
    let dev = device();
    let kernel = Kernel::compile(&dev, &vadd()?)?;
    let n = 700;
    let (hx, hy, hz) = (random(n, 1), random(n, 2), random(n, 3));
    let (bx, by, bz) = (dev.buffer_from(&hx)?, dev.buffer_from(&hy)?, dev.buffer_from(&hz)?);
    let mut out = dev.alloc(4 * n)?;
    {
        let mut launch = kernel.prepare([1, 1, 1], vec![Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut out), Arg::I32(n as i32)])?;
        launch.set_grid(grid(n))?;
        launch.set_arg(1, Arg::Buffer(&bz))?;
        launch.set_arg(3, Arg::I64(n as i64))?;
        let ms = cache::autotune_time(&mut [&mut launch], 1, 2)?;
        assert!(ms.len() == 1 && ms[0] >= 0.0, "{ms:?}");
        let e = launch.set_arg(3, Arg::F32(0.5)).unwrap_err();
        assert!(e.kind() == ErrorKind::InvalidArgument && e.message.contains('n'), "{e}");
        let e = launch.set_arg(9, Arg::I32(1)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = launch.set_arg(2, Arg::Buffer(&bx)).unwrap_err(); // a written parameter, shared
        assert!(e.message.contains("`out`"), "{e}");
        assert_eq!(launch.set_grid([0, 1, 1]).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert!(format!("{launch:?}").contains("Launch"));
    }
    dev.synchronize()?;
    assert_sum(out.as_slice::<f32>(), &hx, &hz);
    Ok(())
}

#[test]
fn wrapped_memory_and_launch_over_caller_memory() -> Result<()> {
    let dev = device();
    let kernel = Kernel::compile(&dev, &vadd()?)?;
    let n = 300;
    let (hx, hy) = (random(n, 4), random(n, 5));
    let bx = dev.wrap_vec(hx.clone())?;
    let by = dev.wrap_vec(hy.clone())?;
    let mut out = dev.wrap_vec(vec![0f32; n])?;
    assert_eq!(out.size()?, 4 * n);
    kernel.launch(grid(n), &[Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut out), Arg::I32(n as i32)])?;
    dev.synchronize()?;
    assert_sum(out.as_slice::<f32>(), &hx, &hy);
    assert!(format!("{out:?}").contains("wrapped: true"));

    let mut host = vec![0f32; n];
    let mut scalar = [0i32; 1];
    let shares = out.shares_memory();
    {
        let mut launch = kernel.prepare(grid(n), vec![Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut out), Arg::I32(n as i32)])?;
        match launch.set_arg_memory(2, &mut host) {
            Err(e) if !shares && e.kind() == ErrorKind::Unsupported => return Ok(()), // a copying device
            r => r?,
        }
        launch.run()?;
        assert_eq!(launch.set_arg_memory(3, &mut scalar).unwrap_err().kind(), ErrorKind::InvalidArgument);
        // Host devices have no GPU memory to point at (cuda: tests/cuda_standin).
        let probe = [0u32; 1];
        let address = probe.as_ptr() as u64;
        let err = unsafe { launch.set_arg_device_memory(2, address, 4) }.unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Unsupported | ErrorKind::InvalidArgument), "{err}");
    } // dropping the launch synchronizes, then ends the borrow of `host`
    assert_sum(&host, &hx, &hy);
    assert_eq!(dev.wrap_vec(Vec::<f32>::new()).unwrap_err().kind(), ErrorKind::InvalidArgument);
    Ok(())
}

#[test]
fn dlpack_export_import_round_trip() -> Result<()> {
    let dev = device();
    let kernel = Kernel::compile(&dev, &vadd()?)?;
    let n = 6 * 50;
    let (hx, hy) = (random(n, 6), random(n, 7));
    let (bx, by) = (dev.buffer_from(&hx)?, dev.buffer_from(&hy)?);
    let out = dev.alloc(4 * n)?;
    for versioned in [false, true] {
        let tensor = out.to_dlpack(DType::F32, &[6, 50], versioned)?;
        let info = tensor.info();
        assert_eq!((info.shape.clone(), info.code, info.bits, info.lanes, info.strides.clone()), (vec![6, 50], 2, 32, 1, None));
        assert_eq!(info.device_type, if dev.name() == "cuda" { 2 } else { 1 });
        assert_eq!(info.version, if versioned { Some((1, 0)) } else { None });
        assert!(format!("{tensor:?}").contains("DLPack"));
        let mut imported = unsafe { dev.from_dlpack(tensor)? };
        assert_eq!(imported.len_bytes(), 4 * n);
        kernel.launch(grid(n), &[Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut imported), Arg::I32(n as i32)])?;
        dev.synchronize()?;
        drop(imported); // runs the tensor's deleter
        assert_sum(out.as_slice::<f32>(), &hx, &hy); // written through the imported tensor
    }
    let bf16 = bx.to_dlpack(DType::BF16, &[2 * n as i64], true)?;
    assert_eq!((bf16.info().code, bf16.info().bits), (4, 16));
    drop(bf16); // an unconsumed tensor: its deleter runs
    let e = bx.to_dlpack(DType::F32, &[n as i64 + 1], false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(bx.to_dlpack(DType::F32, &[1; 9], true).unwrap_err().kind(), ErrorKind::InvalidArgument);
    Ok(())
}

#[test]
fn cache_dir_stats_clear_and_autotune_records() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("metile-rust-cache-{}", std::process::id()));
    let dir_s = dir.to_str().unwrap();
    cache::set_dir(dir_s)?;
    assert_eq!(cache::dir()?, dir_s);
    cache::clear()?;
    assert_eq!(cache::stats()?, cache::Stats::default());
    let dev = device();
    // The counters are process-wide and the other tests compile concurrently: this kernel is
    // theirs to miss only once, and the counters only grow.
    let program = vadd_named("vadd_cache_test")?;
    assert!(!Kernel::compile(&dev, &program)?.info()?.from_cache);
    let k = Kernel::compile(&dev, &program)?;
    assert!(k.info()?.from_cache);
    let s = cache::stats()?;
    assert!(s.misses >= 1 && s.memory_hits + s.disk_hits >= 1, "{s:?}");
    cache::set_max_bytes(1 << 20)?;
    assert_eq!(cache::set_max_bytes(0).unwrap_err().kind(), ErrorKind::InvalidArgument);
    cache::autotune_store("rust-test-key", "BLOCK=128")?;
    assert_eq!(cache::autotune_lookup("rust-test-key")?.as_deref(), Some("BLOCK=128"));
    assert_eq!(cache::autotune_lookup("absent")?, None);
    cache::set_enabled(false)?;
    assert_eq!(cache::autotune_lookup("rust-test-key")?, None, "a disabled disk cache answers nothing");
    cache::set_enabled(true)?;
    cache::clear()?;
    assert_eq!(cache::autotune_lookup("rust-test-key")?, None, "clear removes records");
    assert_eq!(cache::set_dir("").unwrap_err().kind(), ErrorKind::InvalidArgument);
    cache::reset_dir()?;
    assert_ne!(cache::dir()?, dir_s);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn builder_types_constants_params_and_text_round_trip() -> Result<()> {
    let mut b = Builder::new("scaled")?;
    b.set_constexpr("BLOCK", "64")?;
    let x = b.param_ptr("x", DType::F32)?;
    let out = b.param_ptr("out", DType::I64)?;
    let offs = b.arange(None, 64)?;
    let p = b.ptr_offset(x, offs)?;
    let v = b.load(p, None, None)?;
    let k = b.const_float(DType::F32, 100.0)?;
    let scaled = b.mul(v, k)?;
    let as_int = b.cast(scaled, DType::I64)?;
    let two = b.const_int(DType::I64, 2)?;
    let r = b.mul(as_int, two)?;
    let t = b.value_type(r)?;
    assert_eq!((t.dtype, t.rank, t.shape[0], t.pointer), (Some(DType::I64), 1, 64, false));
    let po = b.ptr_offset(out, offs)?;
    b.store(po, r, None)?;
    let program = b.finish()?;
    let params = program.params()?;
    assert_eq!(params.len(), 2);
    assert!(params[0].name == "x" && params[0].reads && !params[0].writes && params[0].ty.pointer);
    assert!(params[1].writes && params[1].ty.dtype == Some(DType::I64));
    let again = metile::Program::parse(&program.text()?)?;
    assert_eq!(again.text()?, program.text()?);
    let dev = device();
    let kernel = Kernel::compile(&dev, &again)?;
    let hx = random(64, 8);
    let bx = dev.buffer_from(&hx)?;
    let mut bo = dev.alloc(8 * 64)?;
    kernel.launch([1, 1, 1], &[Arg::Buffer(&bx), Arg::BufferMut(&mut bo)])?;
    dev.synchronize()?;
    for (i, &h) in hx.iter().enumerate() {
        assert_eq!(bo.as_slice::<i64>()[i], ((h * 100.0) as i64) * 2, "element {i}");
    }
    assert_eq!(b_err(|b| { let c = b.const_int(DType::I32, 1)?; b.value_type(Value::from_raw(999)).map(|_| c) }), ErrorKind::InvalidArgument);
    Ok(())
}

/// out[i] = the bits of x[i] as a u32 (bitcast); a bitcast between widths is refused.
#[test]
fn bitcast_keeps_the_bits() -> Result<()> {
    let mut b = Builder::new("bits")?;
    let x = b.param_ptr("x", DType::F32)?;
    let out = b.param_ptr("out", DType::U32)?;
    let offs = b.arange(None, 64)?;
    let px = b.ptr_offset(x, offs)?;
    let v = b.load(px, None, None)?;
    let bits = b.bitcast(v, DType::U32)?;
    let po = b.ptr_offset(out, offs)?;
    b.store(po, bits, None)?;
    let dev = device();
    let kernel = Kernel::compile(&dev, &b.finish()?)?;
    let mut hx = random(64, 9);
    hx[0] = -0.0;
    hx[1] = f32::INFINITY;
    let bx = dev.buffer_from(&hx)?;
    let mut bo = dev.alloc(4 * 64)?;
    kernel.launch([1, 1, 1], &[Arg::Buffer(&bx), Arg::BufferMut(&mut bo)])?;
    dev.synchronize()?;
    for (i, &h) in hx.iter().enumerate() {
        assert_eq!(bo.as_slice::<u32>()[i], h.to_bits(), "element {i}");
    }
    let wide = b_err(|b| {
        let c = b.const_float(DType::F32, 1.0)?;
        b.bitcast(c, DType::I64)
    });
    assert_eq!(wide, ErrorKind::InvalidProgram);
    Ok(())
}

fn b_err(f: impl FnOnce(&mut Builder) -> Result<Value>) -> ErrorKind {
    let mut b = Builder::new("e").unwrap();
    f(&mut b).unwrap_err().kind()
}

/// Each of 64 threads reads x[t ^ 1] through threadgroup memory, a barrier and a shuffle, in a
/// role region, with the program ids swizzled (the identity on a 1 x 1 grid).
#[test]
fn simt_shuffle_shared_role_and_swizzle() -> Result<()> {
    const T: i64 = 64;
    let mut b = Builder::new("shuffle_pairs")?;
    b.set_num_threads(T as i32)?;
    let x = b.param_ptr("x", DType::F32)?;
    let out = b.param_ptr("out", DType::F32)?;
    let (p0, p1) = (b.program_id(0)?, b.program_id(1)?);
    let (pm, pn) = b.tile_swizzle(p0, p1, "hilbert", 2)?;
    let s = b.add(pm, pn)?;
    let tn = b.const_i32(T as i32)?;
    let base = b.mul(s, tn)?;
    let tid = b.thread_id()?;
    let idx = b.add(tid, base)?;
    let px = b.ptr_offset(x, idx)?;
    let v = b.load(px, None, None)?;
    let sh = b.shared(T, DType::F32)?;
    let ps = b.ptr_offset(sh, tid)?;
    b.store(ps, v, None)?;
    b.barrier()?;
    let w = b.load(ps, None, None)?;
    let one = b.const_i32(1)?;
    let swapped = b.simd_shuffle_xor(w, one)?;
    let lane = b.simd_lane_id()?;
    let zero = b.const_i32(0)?;
    let first = b.simd_broadcast(lane, zero)?; // lane 0's lane id: 0 everywhere
    let fz = b.cast(first, DType::F32)?;
    let result = b.add(swapped, fz)?;
    let po = b.ptr_offset(out, idx)?;
    b.role(0, 1, 0, 0, |b| b.store(po, result, None))?;
    let program = b.finish()?;
    let dev = device();
    let kernel = match Kernel::compile(&dev, &program) {
        Err(e) if e.kind() == ErrorKind::Unsupported => return Ok(()), // no SIMT view here
        k => k?,
    };
    let hx = random(T as usize, 9);
    let bx = dev.buffer_from(&hx)?;
    let mut bo = dev.alloc(4 * T as usize)?;
    kernel.launch([1, 1, 1], &[Arg::Buffer(&bx), Arg::BufferMut(&mut bo)])?;
    dev.synchronize()?;
    for (i, &g) in bo.as_slice::<f32>().iter().enumerate() {
        assert_eq!(g, hx[i ^ 1], "thread {i}");
    }
    let mut bad = Builder::new("bad")?;
    let a = bad.program_id(0)?;
    let e = bad.tile_swizzle(a, a, "spiral", 2).unwrap_err();
    assert!(e.message.contains("spiral"), "{e}");
    Ok(())
}

/// cumsum and reverse cumprod of a 64-element tile, the transpose of its 8x8 reshape, and a
/// device_print; a prefix with a newline is refused.
#[test]
fn scan_trans_and_device_print() -> Result<()> {
    const N: i64 = 64;
    let mut b = Builder::new("scan_trans")?;
    let x = b.param_ptr("x", DType::F32)?;
    let (sum, prod, tr) = (b.param_ptr("sum", DType::F32)?, b.param_ptr("prod", DType::F32)?, b.param_ptr("tr", DType::F32)?);
    let zero = b.const_i32(0)?;
    let offs = b.arange(zero, N)?;
    let px = b.ptr_offset(x, offs)?;
    let v = b.load(px, None, None)?;
    let s = b.scan(metile::sys::METILE_OP_CUMSUM, v, 0, false)?;
    let p = b.scan(metile::sys::METILE_OP_CUMPROD, v, 0, true)?;
    let square = b.reshape(v, &[8, 8])?;
    let t = b.trans(square)?;
    let t = b.reshape(t, &[N])?;
    for (dst, val) in [(sum, s), (prod, p), (tr, t)] {
        let ptr = b.ptr_offset(dst, offs)?;
        b.store(ptr, val, None)?;
    }
    b.device_print("first", &[square])?;
    let dev = device();
    let kernel = Kernel::compile(&dev, &b.finish()?)?;
    let hx: Vec<f32> = (0..N).map(|i| 1.0 + (i % 5) as f32 * 0.25).collect();
    let bx = dev.buffer_from(&hx)?;
    let (mut bs, mut bp, mut bt) = (dev.alloc(4 * N as usize)?, dev.alloc(4 * N as usize)?, dev.alloc(4 * N as usize)?);
    kernel.launch([1, 1, 1], &[Arg::Buffer(&bx), Arg::BufferMut(&mut bs), Arg::BufferMut(&mut bp), Arg::BufferMut(&mut bt)])?;
    dev.synchronize()?;
    let (gs, gp, gt) = (bs.as_slice::<f32>(), bp.as_slice::<f32>(), bt.as_slice::<f32>());
    let (mut acc, mut accp) = (0f64, 1f64);
    for i in 0..N as usize {
        acc += hx[i] as f64;
        assert!((gs[i] as f64 - acc).abs() <= 1e-4 * acc, "cumsum[{i}] = {} want {acc}", gs[i]);
        assert_eq!(gt[i], hx[(i % 8) * 8 + i / 8], "trans[{i}]");
    }
    for i in (0..N as usize).rev() {
        accp *= hx[i] as f64;
        assert!((gp[i] as f64 - accp).abs() <= 1e-4 * accp, "cumprod[{i}] = {} want {accp}", gp[i]);
    }
    let mut bad = Builder::new("bad_print")?;
    assert_eq!(bad.device_print("two\nlines", &[]).unwrap_err().kind(), ErrorKind::InvalidArgument);
    Ok(())
}

// The Builder's element-wise methods come from the op table (src/ops.rs, generated from
// src/ir/ops.def): the ones the hand-written list lacked (erf, floor, pow, bitand, ...) run too.
#[test]
fn generated_elementwise_methods() -> Result<()> {
    const N: i64 = 64;
    let mut b = Builder::new("elementwise")?;
    let x = b.param_ptr("x", DType::F32)?;
    let (fout, iout) = (b.param_ptr("f", DType::F32)?, b.param_ptr("i", DType::I32)?);
    let zero = b.const_i32(0)?;
    let offs = b.arange(zero, N)?;
    let px = b.ptr_offset(x, offs)?;
    let v = b.load(px, None, None)?;
    let (e, fl, two) = (b.erf(v)?, b.floor(v)?, b.const_f32(2.0)?);
    let p = b.pow(v, two)?;
    let s = b.add(e, fl)?;
    let f = b.add(s, p)?;
    let three = b.const_i32(3)?;
    let i = b.bitand(offs, three)?;
    let one = b.const_i32(1)?;
    let i = b.shl(i, one)?;
    let (pf, pi) = (b.ptr_offset(fout, offs)?, b.ptr_offset(iout, offs)?);
    b.store(pf, f, None)?;
    b.store(pi, i, None)?;
    let dev = device();
    let kernel = Kernel::compile(&dev, &b.finish()?)?;
    let hx: Vec<f32> = (0..N).map(|i| (i as f32 - 32.0) / 8.0).collect();
    let bx = dev.buffer_from(&hx)?;
    let (mut bf, mut bi) = (dev.alloc(4 * N as usize)?, dev.alloc(4 * N as usize)?);
    kernel.launch([1, 1, 1], &[Arg::Buffer(&bx), Arg::BufferMut(&mut bf), Arg::BufferMut(&mut bi)])?;
    dev.synchronize()?;
    let (gf, gi) = (bf.as_slice::<f32>(), bi.as_slice::<i32>());
    for k in 0..N as usize {
        let x = hx[k] as f64;
        // erf by its series (|x| <= 4 here; 60 terms reach f64 precision).
        let (mut term, mut erf) = (x, x);
        for n in 1..60 {
            term *= -x * x / n as f64;
            erf += term / (2 * n + 1) as f64;
        }
        let want = erf * 2.0 / std::f64::consts::PI.sqrt() + x.floor() + x * x;
        assert!((gf[k] as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()), "f[{k}] = {} want {want}", gf[k]);
        assert_eq!(gi[k], ((k as i32) & 3) << 1, "i[{k}]");
    }
    Ok(())
}

// metile::cancel_launches() stops every host launch in the process: the tests that stop launches
// run one at a time, so a cancel meant for one does not stop another's.
static STOPPING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn cancel_launches_stops_a_running_host_launch() -> Result<()> {
    let _one_at_a_time = STOPPING.lock().unwrap_or_else(|e| e.into_inner());
    for name in ["interp", "cpu"] {
        let dev = Device::open(Some(name))?;
        let kernel = Kernel::compile(&dev, &vadd()?)?;
        let n = 300;
        let bx = dev.wrap_vec(random(n, 6))?;
        let by = dev.wrap_vec(random(n, 7))?;
        let mut out = dev.wrap_vec(vec![0f32; n])?;
        let done = std::sync::atomic::AtomicBool::new(false);
        let result = std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    metile::cancel_launches();
                }
            });
            // 2^30 instances (axis 1 only repeats axis 0, so offsets never overflow): far more than
            // finish in the test's lifetime, only the cancel ends it.
            let args = [Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut out), Arg::I32(n as i32)];
            let r = kernel.launch([1 << 22, 256, 1], &args).and_then(|_| dev.synchronize());
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            r
        });
        let e = result.unwrap_err();
        assert!(e.kind() == ErrorKind::Device && e.message.contains("cancelled"), "{name}: {e}");
        metile::cancel_launches(); // before a launch: it runs to the end
        let (hx, hy) = (random(n, 6), random(n, 7));
        kernel.launch(grid(n), &[Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut out), Arg::I32(n as i32)])?;
        dev.synchronize()?;
        assert_sum(out.as_slice::<f32>(), &hx, &hy);
    }
    Ok(())
}

#[test]
fn a_launch_past_its_timeout_fails_and_the_next_runs() -> Result<()> {
    let _one_at_a_time = STOPPING.lock().unwrap_or_else(|e| e.into_inner());
    for name in ["interp", "cpu"] {
        let dev = Device::open(Some(name))?;
        let kernel = Kernel::compile(&dev, &vadd()?)?;
        let n = 300;
        let (hx, hy) = (random(n, 8), random(n, 9));
        let bx = dev.wrap_vec(hx.clone())?;
        let by = dev.wrap_vec(hy.clone())?;
        let mut out = dev.wrap_vec(vec![0f32; n])?;
        {
            // 2^30 instances: only the 0.2 s limit ends it.
            let args = vec![Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut out), Arg::I32(n as i32)];
            let mut launch = kernel.prepare([1 << 22, 256, 1], args)?;
            assert_eq!(launch.set_options(Some(f64::NAN), 0).unwrap_err().kind(), ErrorKind::InvalidArgument);
            launch.set_options(Some(0.2), 0)?;
            let e = launch.run().unwrap_err();
            assert!(e.kind() == ErrorKind::Device && e.message.contains("did not finish within 0.2 s (the launch's timeout)"),
                    "{name}: {e}");
        }
        let stream = dev.create_stream()?;
        let args = vec![Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut out), Arg::I32(n as i32)];
        let mut launch = kernel.prepare(grid(n), args)?;
        launch.set_options(None, stream)?;
        let (start, end) = (metile::Event::new(&dev)?, metile::Event::new(&dev)?);
        assert_eq!(start.elapsed_ms(&end).unwrap_err().kind(), ErrorKind::InvalidArgument);
        start.record(0)?;
        launch.run()?;
        end.record(0)?;
        end.synchronize()?;
        assert!(start.elapsed_ms(&end)? >= 0.0, "{name}");
        drop(launch);
        dev.destroy_stream(stream)?;
        assert_sum(out.as_slice::<f32>(), &hx, &hy);
        assert_eq!(dev.info()?.ordinal, 0);
    }
    let e = Device::open(Some("cpu:1")).unwrap_err();
    assert!(e.kind() == ErrorKind::InvalidArgument && e.message.contains("not chosen by index"), "{e}");
    Ok(())
}

#[test]
fn device_count_per_kind() -> Result<()> {
    assert_eq!(metile::device_count("interp")?, 1);
    let available = metile::devices_available()?;
    let gpus = metile::device_count("cuda")?;
    assert_eq!(gpus > 0, available.iter().any(|d| d == "cuda"), "{gpus} {available:?}");
    if gpus > 0 {
        let last = Device::open(Some(&format!("cuda:{}", gpus - 1)))?;
        assert_eq!(last.info()?.ordinal, gpus - 1);
        let e = Device::open(Some(&format!("cuda:{gpus}"))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DeviceUnavailable, "{e}");
    }
    for bad in ["gpu", "cuda:1", ""] {
        let e = metile::device_count(bad).unwrap_err();
        assert!(e.kind() == ErrorKind::InvalidArgument && e.message.contains("unknown device kind"), "{bad}: {e}");
    }
    Ok(())
}
