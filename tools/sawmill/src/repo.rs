//! Where things are: the repository root, its target directory, guest binaries and manifests.

use std::path::{Path, PathBuf};

pub const GUEST_TARGET: &str = "x86_64-unknown-none";
pub const KERNEL_BIN: &str = "sawmill-kernel";
pub const ROOT_BIN: &str = "root";

#[derive(Debug, Clone)]
pub struct Repo {
    pub root: PathBuf,
}

impl Repo {
    /// The wrapper script exports SAWMILL_ROOT; otherwise search upwards from the current
    /// directory, and as a last resort use the checkout this binary was built from.
    pub fn find() -> Result<Repo, String> {
        if let Some(r) = std::env::var_os("SAWMILL_ROOT") {
            let root = PathBuf::from(r);
            if is_root(&root) {
                return Ok(Repo { root });
            }
            return Err(format!(
                "SAWMILL_ROOT={} is not a sawmill checkout",
                root.display()
            ));
        }
        if let Ok(mut dir) = std::env::current_dir() {
            loop {
                if is_root(&dir) {
                    return Ok(Repo { root: dir });
                }
                if !dir.pop() {
                    break;
                }
            }
        }
        let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        if is_root(&built) {
            return Ok(Repo {
                root: built.canonicalize().unwrap_or(built),
            });
        }
        Err("cannot find the sawmill repository (run from inside it, or set SAWMILL_ROOT)".into())
    }

    /// Always the repository's own target/: images and guest binaries live at fixed places.
    pub fn target(&self) -> PathBuf {
        self.root.join("target")
    }

    pub fn guest_dir(&self) -> PathBuf {
        self.target().join(GUEST_TARGET).join("release")
    }

    pub fn guest_bin(&self, name: &str) -> PathBuf {
        self.guest_dir().join(name)
    }

    /// A system named on the command line: an existing path, else `systems/NAME.toml`, else
    /// `systems/tests/NAME.toml`.
    pub fn resolve_system(&self, spec: &str) -> Result<PathBuf, String> {
        let p = Path::new(spec);
        if (spec.contains('/') || spec.ends_with(".toml")) && p.is_file() {
            return Ok(p.to_path_buf());
        }
        for dir in ["systems", "systems/tests"] {
            let c = self.root.join(dir).join(format!("{spec}.toml"));
            if c.is_file() {
                return Ok(c);
            }
        }
        let mut known = self.list_systems("systems");
        known.extend(self.list_systems("systems/tests"));
        Err(format!(
            "no system `{spec}` (looked for systems/{spec}.toml and systems/tests/{spec}.toml); known: {}",
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        ))
    }

    /// Names (file stems) of the `*.toml` files in a directory of the repository, sorted.
    pub fn list_systems(&self, dir: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
            .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect();
        v.sort();
        v
    }
}

fn is_root(dir: &Path) -> bool {
    dir.join("Cargo.toml").is_file() && dir.join("tools/sawmill").is_dir()
}

/// The stem of a manifest path, used to name images and logs.
pub fn system_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "system".into())
}
