fn main() {
    // The foreign program gets a section of its own placed before all native code, so that one
    // range [foreign_end, 0x10000000) names exactly the native code.
    println!("cargo:rustc-link-arg-bin=test-foreign=--section-start=.foreign_text=0x900000");
}
