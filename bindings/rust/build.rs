// Finds libmetile: $METILE_LIB_DIR, else pkg-config, else the repository's build/ directory.
// When none of them holds the library, a cargo:warning says where it looked and what to set.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_library(dir: &str) -> bool {
    ["libmetile.so", "libmetile.so.0", "libmetile.dylib"].iter().any(|n| Path::new(dir).join(n).exists())
}

fn main() {
    println!("cargo:rerun-if-env-changed=METILE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let mut looked = Vec::new();
    let from_env = env::var("METILE_LIB_DIR").ok().filter(|d| !d.is_empty());
    looked.push(format!("$METILE_LIB_DIR ({})", from_env.as_deref().unwrap_or("unset")));
    let from_pc = if from_env.is_some() {
        None
    } else {
        let out = Command::new("pkg-config").args(["--variable=libdir", "metile"]).output().ok();
        let dir = out.filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|d| !d.is_empty());
        looked.push(format!("pkg-config --variable=libdir metile ({})", dir.as_deref().unwrap_or("no metile.pc")));
        dir
    };
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let build_tree = manifest.join("../../build").to_string_lossy().into_owned();
    let dir = from_env.or(from_pc).unwrap_or_else(|| {
        looked.push(format!("the checkout's build tree ({build_tree})"));
        build_tree
    });
    if !has_library(&dir) {
        println!(
            "cargo:warning=metile: no libmetile in {dir}; looked at: {}. Build it (ninja -C build \
             metile), or set METILE_LIB_DIR=<libdir> or PKG_CONFIG_PATH=<prefix>/lib/pkgconfig. \
             Binaries of crates that depend on metile also need the library at run time: \
             LD_LIBRARY_PATH=<libdir>, or their own rpath (see bindings/rust/README.md).",
            looked.join(", ")
        );
    }
    println!("cargo:rustc-link-search=native={dir}");
    // This crate's own tests and examples run straight from the build tree. (An rpath set here
    // never reaches a dependent crate's binary: cargo passes link args to this package only.)
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
}
