//! Run-time `if` and `while` through the builder, run on interp (the oracle).
use metile::*;

#[test]
fn while_and_if_else() -> Result<()> {
    let mut b = Builder::new("ctrl")?;
    let out = b.param_ptr("out", DType::I32)?;
    let n = b.param_scalar("n", DType::I32)?;
    let zero = b.const_i32(0)?;
    let three = b.const_i32(3)?;
    let i = b.while_loop(&[zero], |b, c| Ok((b.lt(c[0], n)?, c.to_vec())),
                         |b, a| Ok(vec![b.add(a[0], three)?]))?;
    let ten = b.const_i32(10)?;
    let small = b.lt(n, ten)?;
    let r = b.if_else(small, |_| Ok(vec![i[0]]), |b| {
        let hundred = b.const_i32(100)?;
        Ok(vec![b.add(i[0], hundred)?])
    })?;
    b.store(out, r[0], None)?;
    let program = b.finish()?;
    let dev = Device::open(Some("interp"))?;
    let kernel = Kernel::compile(&dev, &program)?;
    for (n, want) in [(7, 9), (20, 121), (0, 0)] {
        let mut bo = dev.buffer_from(&[-1i32])?;
        kernel.launch([1, 1, 1], &[Arg::BufferMut(&mut bo), Arg::I32(n)])?;
        dev.synchronize()?;
        assert_eq!(bo.as_slice::<i32>()[0], want, "n = {n}");
    }
    Ok(())
}

#[test]
fn if_on_a_tile_condition_is_an_error() -> Result<()> {
    let mut b = Builder::new("bad")?;
    let zero = b.const_i32(0)?;
    let t = b.arange(zero, 8)?;
    let three = b.const_i32(3)?;
    let c = b.lt(t, three)?;
    let err = b.if_else(c, |_| Ok(vec![]), |_| Ok(vec![])).unwrap_err();
    assert!(err.to_string().contains("must be a bool scalar"), "{err}");
    Ok(())
}
