// The raw declarations cannot drift from the C header: every METILE_API function of metile.h is
// declared in src/sys.rs (regen.py --check, run by the test suite, compares the full signatures).
#[test]
fn every_header_function_is_declared() {
    let header = include_str!("../../../include/metile/metile.h");
    let sys = include_str!("../src/sys.rs");
    let mut missing = Vec::new();
    for chunk in header.split("METILE_API").skip(1) {
        let before_paren = chunk.split('(').next().unwrap();
        let name = before_paren.split_whitespace().last().unwrap().trim_start_matches('*');
        if !name.starts_with("metile_") {
            continue;
        }
        if !sys.contains(&format!("pub fn {name}(")) {
            missing.push(name.to_string());
        }
    }
    assert!(missing.is_empty(), "missing from src/sys.rs: {missing:?}");
}

// Every function of metile.h is called by the safe API (README.md lists where), except the one
// that makes no sense from Rust.
#[test]
fn every_header_function_is_called_by_the_safe_api() {
    let not_from_rust = ["metile_dlpack_capsule_destructor"]; // a CPython PyCapsule destructor
    let header = include_str!("../../../include/metile/metile.h");
    let src = [
        include_str!("../src/lib.rs"), include_str!("../src/error.rs"), include_str!("../src/element.rs"),
        include_str!("../src/device.rs"), include_str!("../src/buffer.rs"), include_str!("../src/dlpack.rs"),
        include_str!("../src/builder.rs"), include_str!("../src/program.rs"), include_str!("../src/kernel.rs"),
        include_str!("../src/launch.rs"), include_str!("../src/cache.rs"), include_str!("../src/event.rs"),
    ]
    .concat();
    let mut wrong = Vec::new();
    for chunk in header.split("METILE_API").skip(1) {
        let name = chunk.split('(').next().unwrap().split_whitespace().last().unwrap().trim_start_matches('*');
        if !name.starts_with("metile_") {
            continue; // the METILE_API definitions
        }
        let called = src.contains(&format!("sys::{name}("));
        if called == not_from_rust.contains(&name) {
            wrong.push(name.to_string());
        }
    }
    assert!(wrong.is_empty(), "not called (or called but listed as not from Rust): {wrong:?}");
}
