//! End-to-end host test: generate code for `interfaces/idltest.idl` and `tests/e2e/extra.idl`,
//! build it in a scratch crate against the real runtime (`interfaces/src/rpc/wire.rs` and the
//! server loop `serve.rs`) and a loop-back mock kernel (`tests/e2e/mock.rs`), and run
//! `tests/e2e/tests.rs` there.
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn generated_code_builds_and_works() {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("../..").canonicalize().unwrap();
    let scratch = std::env::temp_dir().join(format!("idlc-e2e-{}", std::process::id()));
    let src = scratch.join("src");
    std::fs::create_dir_all(src.join("rpc")).unwrap();
    let opts = sawmill_idlc::Options::default();
    let mut gen = String::new();
    for f in [
        root.join("interfaces/idltest.idl"),
        here.join("tests/e2e/extra.idl"),
    ] {
        let text = std::fs::read_to_string(&f).unwrap();
        gen += &sawmill_idlc::compile_str(&f.display().to_string(), &text, &opts)
            .unwrap_or_else(|d| panic!("{d}"));
    }
    let cp = |from: &Path, to: &str| std::fs::copy(from, src.join(to)).unwrap();
    cp(&root.join("interfaces/src/rpc/wire.rs"), "rpc/wire.rs");
    cp(&root.join("interfaces/src/rpc/serve.rs"), "rpc/serve.rs");
    cp(&here.join("tests/e2e/mock.rs"), "rpc/mod.rs");
    cp(&here.join("tests/e2e/tests.rs"), "tests.rs");
    std::fs::write(src.join("generated.rs"), gen).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "#![deny(warnings)]\npub mod rpc;\ninclude!(\"generated.rs\");\n#[cfg(test)]\nmod tests;\n",
    )
    .unwrap();
    std::fs::write(
        scratch.join("Cargo.toml"),
        format!(
            "[package]\nname = \"idlc-e2e\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[dependencies]\nsawmill-abi = {{ path = {:?} }}\n\n[workspace]\n",
            root.join("abi").display().to_string()
        ),
    )
    .unwrap();
    let target = std::env::temp_dir().join("idlc-e2e-target");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["test", "--offline", "--quiet", "--manifest-path"])
        .arg(scratch.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo");
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        out.status.success(),
        "scratch crate failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
