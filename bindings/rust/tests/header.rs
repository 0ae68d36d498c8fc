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
