// Finds libmetile: $METILE_LIB_DIR, else pkg-config, else the repository's build/ directory.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=METILE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let dir = env::var("METILE_LIB_DIR").ok().filter(|d| !d.is_empty()).or_else(|| {
        let out = Command::new("pkg-config").args(["--variable=libdir", "metile"]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
    });
    let dir = dir.unwrap_or_else(|| {
        let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
        manifest.join("../../build").to_string_lossy().into_owned()
    });
    println!("cargo:rustc-link-search=native={dir}");
    // Tests and examples run straight from the build tree without installing.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
}
