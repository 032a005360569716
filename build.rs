//! Build script: napi-rs's link setup for the addon, and the dynamic symbol table of the native
//! hook launcher (`src/bin/engram-hook.rs`), whose N-API stubs the addon binds to when it loads.

fn main() {
    napi_build::setup();
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=engram-hook=-Wl,--export-dynamic");
    }
}
