//! Building the guest crates (kernel, root task, servers, test programs) in one cargo call.
//!
//! A crate is a guest when its Cargo.toml says `[package.metadata.sawmill] guest = true`; that
//! way adding a server needs no change to this tool.

use crate::repo::{Repo, GUEST_TARGET};
use std::process::Command;

/// Names of the workspace packages marked as guests, sorted for a stable command line.
pub fn guest_packages(repo: &Repo) -> Result<Vec<String>, String> {
    let out = Command::new("cargo")
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(&repo.root)
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed:\n{}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        ));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cannot parse cargo metadata output: {e}"))?;
    parse_guests(&meta)
}

fn parse_guests(meta: &serde_json::Value) -> Result<Vec<String>, String> {
    let pkgs = meta["packages"]
        .as_array()
        .ok_or("cargo metadata has no `packages`")?;
    let mut names: Vec<String> = pkgs
        .iter()
        .filter(|p| p["metadata"]["sawmill"]["guest"].as_bool() == Some(true))
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    Ok(names)
}

/// `cargo build --release --target x86_64-unknown-none -p A -p B ...`, output to the terminal
/// (stderr) so compile errors are seen as cargo prints them.
///
/// `SAWMILL_NO_BUILD=1` skips this and uses whatever binaries are in target/ (for iterating on
/// images or scenarios without cargo, and for testing the tool against hand-made kernels).
pub fn build(repo: &Repo) -> Result<(), String> {
    if std::env::var_os("SAWMILL_NO_BUILD").is_some_and(|v| v == "1") {
        return Ok(());
    }
    let pkgs = guest_packages(repo)?;
    if pkgs.is_empty() {
        return Err(
            "no guest crates: no workspace member has `[package.metadata.sawmill] guest = true`"
                .into(),
        );
    }
    let mut cmd = Command::new("cargo");
    cmd.args(["build", "--release", "--target", GUEST_TARGET])
        .arg("--target-dir")
        .arg(repo.target())
        .current_dir(&repo.root);
    for p in &pkgs {
        cmd.args(["-p", p]);
    }
    // Guest build output belongs on stderr: stdout carries the tool's own results.
    let status = cmd
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("guest build failed ({})", pkgs.join(", ")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_marked_packages() {
        let meta = serde_json::json!({ "packages": [
            { "name": "sawmill-kernel", "metadata": { "sawmill": { "guest": true } } },
            { "name": "sawmill-tool", "metadata": null },
            { "name": "root", "metadata": { "sawmill": { "guest": true } } },
            { "name": "odd", "metadata": { "sawmill": { "guest": "yes" } } },
        ]});
        assert_eq!(
            super::parse_guests(&meta).unwrap(),
            vec!["root", "sawmill-kernel"]
        );
    }
}
