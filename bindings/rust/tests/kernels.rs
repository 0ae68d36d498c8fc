// Vector add, softmax and GEMM built with the safe API, run on the default device
// ($METILE_DEVICE or the best available) and checked against plain Rust.
use metile::{Arg, Builder, DType, Device, Kernel, Result};

fn lcg(seed: &mut u64) -> f32 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*seed >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
}

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n).map(|_| lcg(&mut s)).collect()
}

fn device() -> Device {
    Device::open(None).expect("the default device opens")
}

#[test]
fn vector_add() -> Result<()> {
    const BLOCK: i64 = 256;
    let n = 1000; // not a multiple of BLOCK
    let mut b = Builder::new("vadd")?;
    b.set_loc(file!(), line!() as i32)?;
    let x = b.param_ptr("x", DType::F32)?;
    let y = b.param_ptr("y", DType::F32)?;
    let out = b.param_ptr("out", DType::F32)?;
    let nv = b.param_scalar("n", DType::I32)?;
    let pid = b.program_id(0)?;
    let block = b.const_i32(BLOCK as i32)?;
    let start = b.mul(pid, block)?;
    let offs = b.arange(start, BLOCK)?;
    let mask = b.lt(offs, nv)?;
    let px = b.ptr_offset(x, offs)?;
    let py = b.ptr_offset(y, offs)?;
    let po = b.ptr_offset(out, offs)?;
    let xv = b.load(px, Some(mask), None)?;
    let yv = b.load(py, Some(mask), None)?;
    let sum = b.add(xv, yv)?;
    b.store(po, sum, Some(mask))?;
    let program = b.finish()?;
    assert!(program.text()?.contains("kernel @vadd"));

    let dev = device();
    let kernel = Kernel::compile(&dev, &program)?;
    let (hx, hy) = (random(n, 1), random(n, 2));
    let bx = dev.buffer_from(&hx)?;
    let by = dev.buffer_from(&hy)?;
    let mut bo = dev.alloc(n * 4)?;
    let grid = ((n as i64 + BLOCK - 1) / BLOCK) as u32;
    // Out is written: a shared reference is refused, naming it.
    let err = kernel
        .launch([grid, 1, 1], &[Arg::Buffer(&bx), Arg::Buffer(&by), Arg::Buffer(&bo), Arg::I32(n as i32)])
        .unwrap_err();
    assert_eq!(err.status, metile::sys::METILE_ERROR_INVALID_ARGUMENT);
    assert!(err.message.contains("`out` is written by the kernel"), "{}", err.message);
    kernel.launch([grid, 1, 1], &[Arg::Buffer(&bx), Arg::Buffer(&by), Arg::BufferMut(&mut bo), Arg::I32(n as i32)])?;
    dev.synchronize()?;
    for (i, v) in bo.as_slice::<f32>().iter().enumerate() {
        assert_eq!(*v, hx[i] + hy[i], "element {i}");
    }
    Ok(())
}

#[test]
fn softmax_rows() -> Result<()> {
    const BLOCK: i64 = 128;
    let (rows, cols) = (7usize, 300usize);
    let mut b = Builder::new("softmax")?;
    let x = b.param_ptr("x", DType::F32)?;
    let out = b.param_ptr("out", DType::F32)?;
    let n = b.param_scalar("n", DType::I32)?;
    let row = b.program_id(0)?;
    let row_start = b.mul(row, n)?;
    let zero = b.const_i32(0)?;
    let step = b.const_i32(BLOCK as i32)?;
    let neg_inf = b.const_f32(f32::NEG_INFINITY)?;
    let m0 = b.broadcast(neg_inf, &[BLOCK])?;
    // Pass 1: running maximum.
    let m = b.for_range(zero, n, step, &[m0], |b, i, c| {
        let cols = b.arange(i, BLOCK)?;
        let mask = b.lt(cols, n)?;
        let base = b.ptr_offset(x, row_start)?;
        let p = b.ptr_offset(base, cols)?;
        let v = b.load(p, Some(mask), Some(neg_inf))?;
        Ok(vec![b.maximum(c[0], v)?])
    })?;
    let m = b.max(m[0], None)?;
    // Pass 2: sum of exponentials.
    let fzero = b.const_f32(0.0)?;
    let s0 = b.broadcast(fzero, &[BLOCK])?;
    let s = b.for_range(zero, n, step, &[s0], |b, i, c| {
        let cols = b.arange(i, BLOCK)?;
        let mask = b.lt(cols, n)?;
        let base = b.ptr_offset(x, row_start)?;
        let p = b.ptr_offset(base, cols)?;
        let v = b.load(p, Some(mask), Some(neg_inf))?;
        let d = b.sub(v, m)?;
        let e = b.exp(d)?;
        Ok(vec![b.add(c[0], e)?])
    })?;
    let s = b.sum(s[0], None)?;
    // Pass 3: normalize.
    b.for_range(zero, n, step, &[], |b, i, _| {
        let cols = b.arange(i, BLOCK)?;
        let mask = b.lt(cols, n)?;
        let base = b.ptr_offset(x, row_start)?;
        let p = b.ptr_offset(base, cols)?;
        let v = b.load(p, Some(mask), None)?;
        let d = b.sub(v, m)?;
        let e = b.exp(d)?;
        let r = b.div(e, s)?;
        let obase = b.ptr_offset(out, row_start)?;
        let po = b.ptr_offset(obase, cols)?;
        b.store(po, r, Some(mask))?;
        Ok(vec![])
    })?;
    let program = b.finish()?;

    let dev = device();
    let kernel = Kernel::compile(&dev, &program)?;
    let hx = random(rows * cols, 3);
    let bx = dev.buffer_from(&hx)?;
    let mut bo = dev.alloc(rows * cols * 4)?;
    kernel.launch([rows as u32, 1, 1], &[Arg::Buffer(&bx), Arg::BufferMut(&mut bo), Arg::I32(cols as i32)])?;
    dev.synchronize()?;
    let got = bo.as_slice::<f32>();
    for r in 0..rows {
        let row = &hx[r * cols..(r + 1) * cols];
        let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
        let total: f64 = row.iter().map(|v| (*v as f64 - mx).exp()).sum();
        for c in 0..cols {
            let want = (row[c] as f64 - mx).exp() / total;
            let have = got[r * cols + c] as f64;
            assert!((have - want).abs() <= 1e-5 + 1e-5 * want.abs(), "({r},{c}): {have} vs {want}");
        }
    }
    Ok(())
}

#[test]
fn gemm_with_bounds() -> Result<()> {
    const BM: i64 = 16;
    const BN: i64 = 16;
    const BK: i64 = 8;
    let (m, n, k) = (37usize, 29usize, 21usize); // ragged in every dimension
    let mut b = Builder::new("gemm")?;
    let a = b.param_ptr("a", DType::F32)?;
    let bb = b.param_ptr("b", DType::F32)?;
    let c = b.param_ptr("c", DType::F32)?;
    let mv = b.param_scalar("M", DType::I32)?;
    let nv = b.param_scalar("N", DType::I32)?;
    let kv = b.param_scalar("K", DType::I32)?;
    let pm = b.program_id(0)?;
    let pn = b.program_id(1)?;
    let bm = b.const_i32(BM as i32)?;
    let bn = b.const_i32(BN as i32)?;
    let row = b.mul(pm, bm)?;
    let col = b.mul(pn, bn)?;
    let acc0 = b.zeros(&[BM, BN])?;
    let zero = b.const_i32(0)?;
    let step = b.const_i32(BK as i32)?;
    let acc = b.for_range(zero, kv, step, &[acc0], |b, kk, carried| {
        let ta = b.tile_load(a, row, kk, kv, [BM, BK], Some((mv, kv)))?;
        let tb = b.tile_load(bb, kk, col, nv, [BK, BN], Some((kv, nv)))?;
        Ok(vec![b.dot(ta, tb, carried[0])?])
    })?;
    b.tile_store(c, row, col, nv, acc[0], Some((mv, nv)))?;
    let program = b.finish()?;

    let dev = device();
    let kernel = match Kernel::compile(&dev, &program) {
        Err(e) if e.status == metile::sys::METILE_ERROR_UNSUPPORTED => {
            eprintln!("skipping: {e}");
            return Ok(());
        }
        other => other?,
    };
    let (ha, hb) = (random(m * k, 4), random(k * n, 5));
    let ba = dev.buffer_from(&ha)?;
    let bbuf = dev.buffer_from(&hb)?;
    let mut bc = dev.alloc(m * n * 4)?;
    let grid = [((m as i64 + BM - 1) / BM) as u32, ((n as i64 + BN - 1) / BN) as u32, 1];
    kernel.launch(grid, &[Arg::Buffer(&ba), Arg::Buffer(&bbuf), Arg::BufferMut(&mut bc),
                          Arg::I32(m as i32), Arg::I32(n as i32), Arg::I32(k as i32)])?;
    dev.synchronize()?;
    let got = bc.as_slice::<f32>();
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|p| ha[i * k + p] as f64 * hb[p * n + j] as f64).sum();
            let have = got[i * n + j] as f64;
            assert!((have - want).abs() <= 1e-4 + 1e-4 * want.abs(), "({i},{j}): {have} vs {want}");
        }
    }
    Ok(())
}

// Without set_loc, each op records the line of the test that built it (#[track_caller]).
#[test]
fn errors_name_the_callers_line_automatically() {
    let mut b = Builder::new("bad").unwrap();
    let x = b.arange(None, 8).unwrap();
    let y = b.arange(None, 16).unwrap();
    let line = line!() + 1;
    let e = b.add(x, y).unwrap_err();
    assert_eq!(e.kind(), metile::ErrorKind::InvalidProgram);
    assert!(e.message.contains(&format!("{}:{line}", file!())), "{}", e.message);
    // Inside a loop body too: the body's own line, not for_range's.
    let mut b = Builder::new("bad_loop").unwrap();
    let (lo, hi, one) = (b.const_i32(0).unwrap(), b.const_i32(4).unwrap(), b.const_i32(1).unwrap());
    let e = b.for_range(lo, hi, one, &[], |b, _, _| {
        let x = b.arange(None, 8)?;
        let y = b.arange(None, 16)?;
        let line = line!() + 1;
        let e = b.add(x, y).unwrap_err();
        assert!(e.message.contains(&format!("{}:{line}", file!())), "{}", e.message);
        Err(e)
    });
    assert!(e.is_err());
}

#[test]
fn errors_carry_status_and_location() {
    let mut b = Builder::new("bad").unwrap();
    b.set_loc("bad.rs", 42).unwrap();
    let x = b.arange(None, 8).unwrap();
    let y = b.arange(None, 16).unwrap();
    let e = b.add(x, y).unwrap_err();
    assert_eq!(e.status, metile::sys::METILE_ERROR_INVALID_PROGRAM);
    assert!(e.message.contains("bad.rs:42"), "{}", e.message);
    assert_eq!(e.status_name(), "METILE_ERROR_INVALID_PROGRAM");
    let e = Device::open(Some("no-such-device")).err().unwrap();
    assert_eq!(e.status, metile::sys::METILE_ERROR_INVALID_ARGUMENT);
    assert_eq!(e.kind(), metile::ErrorKind::InvalidArgument);
    assert!(e.message.contains("no-such-device"), "{}", e.message);
}

#[test]
fn handles_have_debug() {
    let dev = device();
    let buf = dev.alloc(16).unwrap();
    let shown = format!("{dev:?} {buf:?}");
    assert!(shown.contains("Device { name: ") && shown.contains("Buffer { bytes: 16"), "{shown}");
    let mut b = Builder::new("dbg").unwrap();
    let x = b.param_ptr("x", DType::F32).unwrap();
    let v = b.load(x, None, None).unwrap();
    b.store(x, v, None).unwrap();
    let program = b.finish().unwrap();
    assert!(format!("{program:?}").contains("\"dbg\""));
    let kernel = Kernel::compile(&dev, &program).unwrap();
    assert!(format!("{kernel:?}").contains("[\"x\"]"), "{kernel:?}");
}

#[test]
fn prepared_launch_with_options_runs_again() -> Result<()> {
    let dev = device();
    let mut b = Builder::new("inc")?;
    let x = b.param_ptr("x", DType::F32)?;
    let offs = b.arange(None, 64)?;
    let p = b.ptr_offset(x, offs)?;
    let v = b.load(p, None, None)?;
    let one = b.const_f32(1.0)?;
    let w = b.add(v, one)?;
    b.store(p, w, None)?;
    let program = b.finish()?;
    let defaults = metile::CompileOptions::default();
    assert_eq!((defaults.opt_level, defaults.allow_tf32, defaults.no_cache), (1, None, false));
    let options = metile::CompileOptions { opt_level: 0, no_cache: true, ..defaults };
    let kernel = Kernel::compile_with(&dev, &program, &options)?;
    let mut buf = dev.alloc(64 * 4)?;
    {
        let mut launch = kernel.prepare([1, 1, 1], vec![Arg::BufferMut(&mut buf)])?;
        for _ in 0..3 {
            launch.run()?;
        }
        launch.set_grid([1, 1, 1])?;
        launch.run()?;
    } // the launch ends its exclusive borrow of `buf`
    dev.synchronize()?;
    assert!(buf.as_slice::<f32>().iter().all(|&v| v == 4.0));
    let e = kernel.prepare([1, 1, 1], vec![Arg::Buffer(&buf)]).unwrap_err();
    assert_eq!(e.kind(), metile::ErrorKind::InvalidArgument);
    assert!(!metile::cache::dir()?.is_empty());
    Ok(())
}

#[test]
fn histogram_with_atomics() -> Result<()> {
    // hist[x[i]] += 1 with every program contending, and the old values of a scalar counter.
    const BLOCK: i64 = 128;
    let n = 3000;
    let mut b = Builder::new("histogram")?;
    b.set_loc(file!(), line!() as i32)?;
    let x = b.param_ptr("x", DType::I32)?;
    let hist = b.param_ptr("hist", DType::I32)?;
    let counter = b.param_ptr("counter", DType::I32)?;
    let nv = b.param_scalar("n", DType::I32)?;
    let pid = b.program_id(0)?;
    let block = b.const_i32(BLOCK as i32)?;
    let start = b.mul(pid, block)?;
    let offs = b.arange(start, BLOCK)?;
    let mask = b.lt(offs, nv)?;
    let px = b.ptr_offset(x, offs)?;
    let bins = b.load(px, Some(mask), None)?;
    let ph = b.ptr_offset(hist, bins)?;
    let one = b.const_i32(1)?;
    b.atomic(metile::sys::METILE_OP_ATOMIC_ADD, ph, None, one, Some(mask))?;
    let old = b.atomic(metile::sys::METILE_OP_ATOMIC_ADD, counter, None, one, None)?;
    let slot = b.add(old, one)?;
    let pc = b.ptr_offset(counter, slot)?;
    b.store(pc, pid, None)?;
    let program = b.finish()?;

    let mut bad = Builder::new("bad")?;
    let p = bad.param_ptr("p", DType::I32)?;
    let v = bad.const_i32(1)?;
    let err = bad.atomic(metile::sys::METILE_OP_ADD, p, None, v, None).unwrap_err();
    assert!(err.message.contains("is not an atomic op"), "{}", err.message);

    let dev = device();
    let kernel = Kernel::compile(&dev, &program)?;
    let hx: Vec<i32> = (0..n).map(|i| ((i * 7919) % 64) as i32).collect();
    let grid = ((n as i64 + BLOCK - 1) / BLOCK) as u32;
    let bx = dev.buffer_from(&hx)?;
    let mut bh = dev.buffer_from(&vec![0i32; 64])?;
    let mut counts = vec![-1i32; 1 + grid as usize];
    counts[0] = 0;
    let mut bc = dev.buffer_from(&counts)?;
    kernel.launch([grid, 1, 1], &[Arg::Buffer(&bx), Arg::BufferMut(&mut bh), Arg::BufferMut(&mut bc), Arg::I32(n as i32)])?;
    dev.synchronize()?;
    let mut want = vec![0i32; 64];
    for v in &hx {
        want[*v as usize] += 1;
    }
    assert_eq!(bh.as_slice::<i32>(), &want[..]);
    let c = bc.as_slice::<i32>();
    assert_eq!(c[0], grid as i32);
    let mut pids: Vec<i32> = c[1..].to_vec();
    pids.sort();
    assert_eq!(pids, (0..grid as i32).collect::<Vec<_>>());
    Ok(())
}

// A host view synchronizes the buffer's device first: launches that are still running (on
// asynchronous devices) finish before as_slice reads, with no explicit synchronize, and the
// buffer keeps its device even after the caller's Device handle is dropped.
#[test]
fn as_slice_waits_for_pending_launches() -> Result<()> {
    const BLOCK: i64 = 256;
    let n = 1 << 16;
    let mut b = Builder::new("incr")?;
    let x = b.param_ptr("x", DType::F32)?;
    let pid = b.program_id(0)?;
    let block = b.const_i32(BLOCK as i32)?;
    let start = b.mul(pid, block)?;
    let offs = b.arange(start, BLOCK)?;
    let px = b.ptr_offset(x, offs)?;
    let xv = b.load(px, None, None)?;
    let one = b.const_f32(1.0)?;
    let next = b.add(xv, one)?;
    b.store(px, next, None)?;
    let program = b.finish()?;
    for name in metile::devices_available()? {
        let dev = Device::open(Some(&name))?;
        let kernel = Kernel::compile(&dev, &program)?;
        let mut buf = dev.alloc(n * 4)?;
        let grid = (n as i64 / BLOCK) as u32;
        for _ in 0..20 {
            kernel.launch([grid, 1, 1], &[Arg::BufferMut(&mut buf)])?;
        }
        drop(kernel);
        drop(dev);
        assert!(buf.as_slice::<f32>().iter().all(|&v| v == 20.0), "{name}: a launch had not finished");
    }
    Ok(())
}

// A 16x16x16 dot of a = 1 + 2^-12 (not a TF32 value: it rounds to 1) and b = 1 on interp, which
// rounds as each mode says: "ieee" keeps the 2^-12, "tf32" drops it, per dot or per compile.
fn dot_of_ones(precision: Option<metile::sys::metile_dot_precision>, options: &metile::CompileOptions) -> Result<f32> {
    let mut b = Builder::new("dot_prec")?;
    let a = b.param_ptr("a", DType::F32)?;
    let bb = b.param_ptr("b", DType::F32)?;
    let c = b.param_ptr("c", DType::F32)?;
    let zero = b.const_i32(0)?;
    let ld = b.const_i32(16)?;
    let ta = b.tile_load(a, zero, zero, ld, [16, 16], None)?;
    let tb = b.tile_load(bb, zero, zero, ld, [16, 16], None)?;
    let acc = b.zeros(&[16, 16])?;
    let d = match precision {
        Some(p) => b.dot_with_precision(ta, tb, acc, p)?,
        None => b.dot(ta, tb, acc)?,
    };
    b.tile_store(c, zero, zero, ld, d, None)?;
    let program = b.finish()?;
    let dev = Device::open(Some("interp"))?;
    let kernel = Kernel::compile_with(&dev, &program, options)?;
    let ba = dev.buffer_from(&vec![1.0f32 + 1.0 / 4096.0; 256])?;
    let bb = dev.buffer_from(&vec![1.0f32; 256])?;
    let mut bc = dev.alloc(256 * 4)?;
    kernel.launch([1, 1, 1], &[Arg::Buffer(&ba), Arg::Buffer(&bb), Arg::BufferMut(&mut bc)])?;
    dev.synchronize()?;
    Ok(bc.as_slice::<f32>()[0])
}

#[test]
fn dot_precision_per_dot_and_per_compile() -> Result<()> {
    use metile::sys::{METILE_DOT_PRECISION_DEFAULT, METILE_DOT_PRECISION_IEEE, METILE_DOT_PRECISION_TF32,
                      METILE_DOT_PRECISION_TF32X3};
    let defaults = metile::CompileOptions::default();
    assert_eq!(defaults.dot_precision, METILE_DOT_PRECISION_DEFAULT);
    let exact = 16.0 * (1.0 + 1.0 / 4096.0);
    assert_eq!(dot_of_ones(Some(METILE_DOT_PRECISION_IEEE), &defaults)?, exact);
    assert_eq!(dot_of_ones(Some(METILE_DOT_PRECISION_TF32), &defaults)?, 16.0);
    assert_eq!(dot_of_ones(Some(METILE_DOT_PRECISION_TF32X3), &defaults)?, exact);
    assert_eq!(dot_of_ones(None, &defaults)?, exact);
    let tf32 = metile::CompileOptions { dot_precision: METILE_DOT_PRECISION_TF32, ..Default::default() };
    assert_eq!(dot_of_ones(None, &tf32)?, 16.0);
    // A dot's own precision wins over the compile's.
    assert_eq!(dot_of_ones(Some(METILE_DOT_PRECISION_IEEE), &tf32)?, exact);
    // allow_tf32 contradicting dot_precision is refused, naming both.
    let both = metile::CompileOptions { allow_tf32: Some(false), ..tf32 };
    let e = dot_of_ones(None, &both).unwrap_err();
    assert!(e.message.contains("allow_tf32") && e.message.contains("dot_precision"), "{}", e.message);
    Ok(())
}
