//! `./sawmill image`: manifest + guest binaries → one bootable file.

use crate::repo::{Repo, KERNEL_BIN, ROOT_BIN};
use crate::{archive, elfimage};
use sawmill_manifest::System;
use std::path::Path;

/// A manifest file as the tool sees it: the system, plus its `[test]` table if any.
pub struct ManifestFile {
    pub system: System,
    pub test: Option<toml::Table>,
}

/// Reads, parses and validates a manifest; errors are prefixed with the file name.
pub fn load(path: &Path) -> Result<ManifestFile, String> {
    let ctx = |e: String| format!("{}: {e}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| ctx(e.to_string()))?;
    let system = sawmill_manifest::from_toml_file(
        &path.display().to_string(),
        &text,
        &crate::configs::Servers,
    )?;
    sawmill_manifest::validate(&system).map_err(|e| {
        // Errors about one server point at its entry.
        let at = e
            .strip_prefix("server `")
            .and_then(|r| r.split_once('`'))
            .and_then(|(name, _)| sawmill_manifest::server_position(&text, name));
        match at {
            Some((line, col)) => format!("{}:{line}:{col}: {e}", path.display()),
            None => ctx(e),
        }
    })?;
    let top: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ctx(e.to_string()))?;
    let test = match top.get("test") {
        None => None,
        Some(toml::Value::Table(t)) => Some(t.clone()),
        Some(_) => return Err(ctx("`test` must be a table".into())),
    };
    Ok(ManifestFile { system, test })
}

/// The archive entries for a system: `manifest`, `root`, then each distinct module.
pub fn archive_entries(repo: &Repo, sys: &System) -> Result<Vec<(String, Vec<u8>)>, String> {
    let read = |name: &str| {
        let p = repo.guest_bin(name);
        std::fs::read(&p).map_err(|e| (p, e))
    };
    let mut entries = vec![("manifest".to_string(), sawmill_manifest::encode(sys))];
    let root = read(ROOT_BIN).map_err(|(p, e)| {
        format!(
            "root task binary {}: {e} (is there a guest crate with a bin `root`?)",
            p.display()
        )
    })?;
    entries.push((ROOT_BIN.to_string(), root));
    for m in sys.modules() {
        if m == ROOT_BIN {
            continue; // Already in the archive under that name.
        }
        if m == "manifest" {
            return Err("a module may not be called `manifest` (reserved archive entry)".into());
        }
        let server = sys
            .servers
            .iter()
            .find(|s| s.module == m)
            .map(|s| s.name.as_str());
        let data = read(m).map_err(|(p, e)| {
            format!(
                "server `{}`: module binary `{m}` not found at {} ({e}); is there a guest crate \
                 with a bin named `{m}`?",
                server.unwrap_or("?"),
                p.display()
            )
        })?;
        entries.push((m.to_string(), data));
    }
    Ok(entries)
}

/// What went into an image.
#[derive(Debug)]
pub struct ImageInfo {
    pub placement: elfimage::Placement,
    /// Archive entries: (name, size in bytes).
    pub entries: Vec<(String, u64)>,
}

/// Writes the bootable image for `sys` to `out` (guests must already be built).
pub fn write_image(repo: &Repo, sys: &System, out: &Path) -> Result<ImageInfo, String> {
    let kpath = repo.guest_bin(KERNEL_BIN);
    let kernel =
        std::fs::read(&kpath).map_err(|e| format!("kernel binary {}: {e}", kpath.display()))?;
    let arch = archive::build(&archive_entries(repo, sys)?)?;
    // Read our own output back: cheap insurance that what the kernel parses is what we meant.
    let entries = archive::list(&arch)?
        .into_iter()
        .map(|(n, _, size)| (n, size))
        .collect();
    let (img, placement) = elfimage::build_image(&kernel, &arch)?;
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    // Write then rename, so QEMU never boots a half-written image.
    let tmp = out.with_extension("img.tmp");
    std::fs::write(&tmp, &img).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(ImageInfo { placement, entries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elfimage::{tests::synthetic_kernel, DESCRIPTOR_MAGIC};

    /// A throwaway repository with a synthetic kernel and a few fake guest binaries.
    fn fake_repo(tag: &str) -> Repo {
        let root =
            std::env::temp_dir().join(format!("sawmill-image-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let repo = Repo { root };
        std::fs::create_dir_all(repo.guest_dir()).unwrap();
        std::fs::write(
            repo.guest_bin(KERNEL_BIN),
            synthetic_kernel(DESCRIPTOR_MAGIC, false),
        )
        .unwrap();
        std::fs::write(repo.guest_bin(ROOT_BIN), b"root-binary").unwrap();
        std::fs::write(repo.guest_bin("test-pong"), b"pong-binary").unwrap();
        std::fs::write(repo.guest_bin("test-ping"), b"ping-binary").unwrap();
        repo
    }

    const PINGPONG: &str = r#"
name = "pingpong"
[[server]]
name = "pong"
module = "test-pong"
provides = ["pong"]
[[server]]
name = "ping-a"
module = "test-ping"
uses = [{ endpoint = "pong", badge = 1 }]
[[server]]
name = "ping-b"
module = "test-ping"
uses = [{ endpoint = "pong", badge = 2 }]
[test]
expect = ["PASS"]
"#;

    #[test]
    fn image_carries_manifest_root_and_each_module_once() {
        let repo = fake_repo("ok");
        let mpath = repo.root.join("pingpong.toml");
        std::fs::write(&mpath, PINGPONG).unwrap();
        let mf = load(&mpath).unwrap();
        assert!(mf.test.is_some());
        let out = repo.target().join("images/pingpong.img");
        let info = write_image(&repo, &mf.system, &out).unwrap();
        let names: Vec<&str> = info.entries.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["manifest", "root", "test-pong", "test-ping"]);
        let img = std::fs::read(&out).unwrap();
        let off = info.placement.file_offset as usize;
        let arch = &img[off..off + info.placement.len as usize];
        let list = archive::list(arch).unwrap();
        let (_, moff, msize) = &list[0];
        let decoded =
            sawmill_manifest::decode(&arch[*moff as usize..(*moff + *msize) as usize]).unwrap();
        assert_eq!(decoded, mf.system);
        let (_, roff, rsize) = &list[1];
        assert_eq!(
            &arch[*roff as usize..(*roff + *rsize) as usize],
            b"root-binary"
        );
        let _ = std::fs::remove_dir_all(&repo.root);
    }

    #[test]
    fn missing_module_names_the_server() {
        let repo = fake_repo("missing");
        let mpath = repo.root.join("m.toml");
        std::fs::write(
            &mpath,
            PINGPONG.replace("module = \"test-pong\"", "module = \"nope\""),
        )
        .unwrap();
        let mf = load(&mpath).unwrap();
        let e = write_image(&repo, &mf.system, &repo.root.join("x.img")).unwrap_err();
        assert!(e.contains("server `pong`") && e.contains("`nope`"), "{e}");
        let bad = repo.root.join("bad.toml");
        std::fs::write(&bad, PINGPONG.replace("badge = 2", "badge = 2, extra = 1")).unwrap();
        let e = load(&bad).err().unwrap();
        assert!(e.contains("bad.toml") && e.contains("`extra`"), "{e}");
        let _ = std::fs::remove_dir_all(&repo.root);
    }
}
