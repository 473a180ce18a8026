// The library is linked at the bottom of its own zone (`src/layout.rs` LIB_IMAGE), above
// anything a Linux program maps, so that the two never overlap.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=--image-base=0x60000000");
        println!("cargo:rustc-link-arg-bins=-zmax-page-size=0x200000");
        println!("cargo:rustc-link-arg-bins=-znorelro");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
