//! Compiles every `interfaces/*.idl` into `$OUT_DIR/interfaces.rs` (included by `src/lib.rs`).
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("interfaces.rs");
    println!("cargo:rerun-if-changed={}", dir.display());
    let opts = sawmill_idlc::Options {
        runtime: "crate::rpc".to_string(),
    };
    match sawmill_idlc::compile_dir(&dir, &opts) {
        Ok((code, files)) => {
            for f in files {
                println!("cargo:rerun-if-changed={}", f.display());
            }
            std::fs::write(&out, code).unwrap();
        }
        Err(e) => {
            // One line per diagnostic, in the `file:line:col: message` form editors understand.
            eprintln!("{e}");
            println!("cargo:warning={e}");
            std::process::exit(1);
        }
    }
}
