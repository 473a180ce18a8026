//! `./sawmill rootfs`: a root file-system image for the Linux system — Debian's static busybox
//! with a symbolic link per applet, a minimal `/etc`, `/tmp`, `/root`, `/dev` with the device
//! nodes Linux programs expect, plus any host trees the user names.
//!
//! Made without root: the tree is staged in a host directory, `mke2fs -d` copies it into a
//! fresh ext2 image (4 KiB blocks, so the PFS's cache pages map file blocks straight), and one
//! `debugfs -w -f SCRIPT` run makes every inode root's and adds the device nodes (a host
//! directory cannot hold device nodes unless we are root). Touches only the staging directory
//! and the output image.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's `busybox-static` package puts the binary.
pub const HOST_BUSYBOX: &str = "/bin/busybox";
/// Default image size; the busybox tree itself needs about 3 MiB.
pub const DEFAULT_SIZE_MB: u64 = 64;
/// ext2 block size: one cache page per block.
pub const BLOCK_SIZE: u32 = 4096;

/// `/etc/passwd` as a minimal Debian system has it (root and a few system users).
const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sys:x:3:3:sys:/dev:/usr/sbin/nologin
sync:x:4:65534:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/mail:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
";

const GROUP: &str = "root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
mail:x:8:
www-data:x:33:
users:x:100:
nogroup:x:65534:
";

/// `/etc/resolv.conf`: the name server of the network the Linux system gets, QEMU's user
/// network, whose DHCP announces 10.0.2.3 (netstack logs `DHCP name server`; docs/net.md,
/// "Names"). Linux programs' resolvers (musl's, glibc's) ask it over UDP.
const RESOLV_CONF: &str = "nameserver 10.0.2.3\n";

/// `/etc/profile`, read by login shells (`sh -l`, the shell `make run` starts): a prompt that
/// shows where you are, and the message of the day printed with builtins only (no process is
/// started for it).
const PROFILE: &str = "# /etc/profile: read by login shells.
export PS1='\\u@\\h:\\w\\$ '
if [ -r /etc/motd ]; then
    while IFS= read -r line; do echo \"$line\"; done < /etc/motd
fi
";

/// Device nodes: (name under /dev, major, minor, permissions).
pub const DEVICES: &[(&str, u32, u32, u32)] = &[
    ("null", 1, 3, 0o666),
    ("zero", 1, 5, 0o666),
    ("random", 1, 8, 0o666),
    ("urandom", 1, 9, 0o666),
    ("tty", 5, 0, 0o666),
    ("console", 5, 1, 0o600),
];

pub struct Options {
    /// Host trees copied into the image's root, in order (later ones win).
    pub trees: Vec<PathBuf>,
    pub output: PathBuf,
    pub size_mb: u64,
    pub busybox: PathBuf,
    /// `/etc/motd`, if the image gets one (the Linux system's: [`crate::linux::motd`]).
    pub motd: Option<String>,
}

/// The applet paths of `busybox --list-full` (relative, e.g. `usr/bin/awk`), checked to be
/// plain relative paths so a strange busybox cannot make us write outside the tree.
pub fn parse_applet_list(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let p = line.trim_start_matches('/');
        if p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(format!("busybox --list-full: odd applet path `{line}`"));
        }
        out.push(p.to_string());
    }
    if out.is_empty() {
        return Err("busybox --list-full listed no applets".into());
    }
    Ok(out)
}

fn io(p: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", p.display())
}

/// Runs a host command (the e2fsprogs tools), its output or a clear error.
pub(crate) fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{cmd:?}: {e} (install e2fsprogs)"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!("{cmd:?} failed ({}): {}", out.status, text.trim()));
    }
    Ok(text)
}

/// Copies a host tree into `to`, keeping symbolic links as links and permission bits. Entries
/// are made in name order, so small (linear) directories list in that order on any copy.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    let md = std::fs::metadata(from).map_err(io(from))?;
    std::fs::set_permissions(to, md.permissions()).map_err(io(to))?;
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .map_err(io(from))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", from.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type().map_err(|e| e.to_string())?;
        if ft.is_dir() {
            copy_tree(&src, &dst)?;
        } else if ft.is_symlink() {
            let t = std::fs::read_link(&src).map_err(io(&src))?;
            let _ = std::fs::remove_file(&dst);
            std::os::unix::fs::symlink(t, &dst).map_err(io(&dst))?;
        } else if ft.is_file() {
            let _ = std::fs::remove_file(&dst);
            std::fs::copy(&src, &dst).map_err(io(&src))?;
        } else {
            return Err(format!(
                "{}: only files, directories and symbolic links can be copied",
                src.display()
            ));
        }
    }
    Ok(())
}

fn mkdir_mode(p: &Path, mode: u32) -> Result<(), String> {
    std::fs::create_dir_all(p).map_err(io(p))?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(io(p))
}

fn write_mode(p: &Path, text: &str, mode: u32) -> Result<(), String> {
    std::fs::write(p, text).map_err(io(p))?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(io(p))
}

/// Fills `stage` with the base system: busybox and its links, /etc, /tmp, /root, /dev.
pub fn stage_base(stage: &Path, busybox: &Path) -> Result<(), String> {
    if !busybox.is_file() {
        return Err(format!(
            "{} not found: the root image needs Debian's static busybox \
             (apt-get install busybox-static, or run scripts/setup.sh)",
            busybox.display()
        ));
    }
    let list = Command::new(busybox)
        .arg("--list-full")
        .output()
        .map_err(|e| format!("{} --list-full: {e}", busybox.display()))?;
    if !list.status.success() {
        return Err(format!(
            "{} --list-full failed ({}): is it busybox?",
            busybox.display(),
            list.status
        ));
    }
    let applets = parse_applet_list(&String::from_utf8_lossy(&list.stdout))?;
    for d in [
        "bin", "sbin", "usr/bin", "usr/sbin", "etc", "dev", "var", "proc",
    ] {
        mkdir_mode(&stage.join(d), 0o755)?;
    }
    mkdir_mode(&stage.join("root"), 0o700)?;
    mkdir_mode(&stage.join("tmp"), 0o1777)?;
    let bb = stage.join("bin/busybox");
    std::fs::copy(busybox, &bb).map_err(io(busybox))?;
    std::fs::set_permissions(&bb, std::fs::Permissions::from_mode(0o755)).map_err(io(&bb))?;
    for a in &applets {
        if a == "bin/busybox" {
            continue;
        }
        let p = stage.join(a);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink("/bin/busybox", &p).map_err(io(&p))?;
    }
    write_mode(&stage.join("etc/passwd"), PASSWD, 0o644)?;
    write_mode(&stage.join("etc/group"), GROUP, 0o644)?;
    write_mode(&stage.join("etc/hostname"), "sawmill\n", 0o644)?;
    write_mode(&stage.join("etc/resolv.conf"), RESOLV_CONF, 0o644)?;
    write_mode(&stage.join("etc/profile"), PROFILE, 0o644)?;
    Ok(())
}

/// Every path under `root` (relative, with a leading `/`), parents before children.
fn all_paths(root: &Path, rel: &str, out: &mut Vec<String>) -> Result<(), String> {
    let dir = root.join(rel.trim_start_matches('/'));
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .map_err(io(&dir))?
        .filter_map(|e| e.ok())
        .collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        let p = format!("{rel}/{}", e.file_name().to_string_lossy());
        out.push(p.clone());
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            all_paths(root, &p, out)?;
        }
    }
    Ok(())
}

/// The debugfs script that makes every staged inode root's and adds the device nodes.
pub fn debugfs_script(paths: &[String]) -> String {
    let mut s = String::new();
    for p in paths {
        // debugfs reads one command per line, words split at blanks: quote the path.
        let q = p.replace('"', "\\\"");
        s.push_str(&format!("sif \"{q}\" uid 0\nsif \"{q}\" gid 0\n"));
    }
    // mknod takes a name in the current directory, not a path.
    s.push_str("cd /dev\n");
    for (name, major, minor, perm) in DEVICES {
        s.push_str(&format!(
            "mknod {name} c {major} {minor}\nsif {name} mode 0{:o}\n\
             sif {name} uid 0\nsif {name} gid 0\n",
            0o20000 | perm
        ));
    }
    s.push_str("cd /\n");
    s
}

/// Builds an image from an already staged tree (owned by root inside the image, device nodes
/// added). Writes to a temporary name first, so a failed build leaves no half image.
pub fn image_from_stage(stage: &Path, output: &Path, size_mb: u64) -> Result<(), String> {
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    // The device nodes go into /dev, whatever the stage held.
    mkdir_mode(&stage.join("dev"), 0o755)?;
    let tmp = output.with_extension("img.part");
    let _ = std::fs::remove_file(&tmp);
    run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext2", "-b", &BLOCK_SIZE.to_string()])
        .args(["-E", "root_owner=0:0", "-d"])
        .arg(stage)
        .arg(&tmp)
        .arg(format!("{size_mb}M")))?;
    let mut paths = Vec::new();
    all_paths(stage, "", &mut paths)?;
    let script = tmp.with_extension("debugfs");
    std::fs::write(&script, debugfs_script(&paths)).map_err(io(&script))?;
    let out = run(Command::new("debugfs")
        .args(["-w", "-f"])
        .arg(&script)
        .arg(&tmp));
    let _ = std::fs::remove_file(&script);
    let out = out?;
    // debugfs reports failed commands on its output but still exits 0; besides its banner and
    // the echo of each command it only says which inode mknod took.
    let noise = |l: &str| {
        l.trim().is_empty() || l.starts_with("debugfs") || l.starts_with("Allocated inode:")
    };
    if let Some(bad) = out.lines().find(|l| !noise(l)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("debugfs on {}: {bad}", output.display()));
    }
    std::fs::rename(&tmp, output).map_err(io(output))
}

/// Replaces (or adds) file `path` of an existing image with `text` (mode 0644, owner root):
/// `debugfs -w`, no root rights needed.
pub fn replace_file(img: &Path, path: &str, text: &str) -> Result<(), String> {
    let (dir, name) = path.rsplit_once('/').ok_or("an absolute path expected")?;
    let src = img.with_extension("file.tmp");
    std::fs::write(&src, text).map_err(io(&src))?;
    let script = img.with_extension("debugfs.tmp");
    // One command per line, words split at blanks: every name quoted. `write` takes a name in
    // the current directory.
    let q = |p: &str| format!("\"{}\"", p.replace('"', "\\\""));
    let (d, n, f) = (
        q(if dir.is_empty() { "/" } else { dir }),
        q(name),
        q(&src.display().to_string()),
    );
    std::fs::write(
        &script,
        format!(
            "cd {d}\nrm {n}\nwrite {f} {n}\nsif {n} mode 0100644\nsif {n} uid 0\nsif {n} gid 0\n"
        ),
    )
    .map_err(io(&script))?;
    let r = run(Command::new("debugfs")
        .args(["-w", "-f"])
        .arg(&script)
        .arg(img));
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&script);
    r.map(|_| ())
}

/// `./sawmill rootfs`: stage busybox + base + the given trees, then make the image.
pub fn build(opts: &Options) -> Result<(), String> {
    for t in &opts.trees {
        if !t.is_dir() {
            return Err(format!("{}: not a directory", t.display()));
        }
    }
    let stage = opts.output.with_extension("stage");
    let _ = std::fs::remove_dir_all(&stage);
    std::fs::create_dir_all(&stage).map_err(io(&stage))?;
    let r = (|| {
        stage_base(&stage, &opts.busybox)?;
        if let Some(m) = &opts.motd {
            write_mode(&stage.join("etc/motd"), m, 0o644)?;
        }
        for t in &opts.trees {
            copy_tree(t, &stage)?;
        }
        // The image's root directory is world-readable whatever the last tree said.
        std::fs::set_permissions(&stage, std::fs::Permissions::from_mode(0o755))
            .map_err(io(&stage))?;
        image_from_stage(&stage, &opts.output, opts.size_mb)
    })();
    let _ = std::fs::remove_dir_all(&stage);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applet_list_is_checked() {
        let l = parse_applet_list("/bin/ls\nusr/bin/awk\n\n").unwrap();
        assert_eq!(l, vec!["bin/ls", "usr/bin/awk"]);
        assert!(parse_applet_list("bin/../../etc/x\n").is_err());
        assert!(parse_applet_list("bin//x\n").is_err());
        assert!(parse_applet_list("\n").is_err());
    }

    #[test]
    fn script_owns_everything_and_makes_devices() {
        let s = debugfs_script(&["/bin".into(), "/a \"b\"".into()]);
        assert!(
            s.starts_with("sif \"/bin\" uid 0\nsif \"/bin\" gid 0\n"),
            "{s}"
        );
        assert!(s.contains("sif \"/a \\\"b\\\"\" uid 0"), "{s}");
        assert!(s.contains("cd /dev\nmknod null c 1 3\nsif null mode 020666\n"));
        assert!(s.contains("mknod console c 5 1\nsif console mode 020600\n"));
    }

    #[test]
    fn missing_busybox_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("sawmill-rootfs-{}", std::process::id()));
        let e = build(&Options {
            trees: Vec::new(),
            output: dir.join("x.img"),
            size_mb: 8,
            busybox: "/nonexistent/busybox".into(),
            motd: None,
        })
        .unwrap_err();
        assert!(e.contains("busybox-static"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn builds_a_clean_image_with_devices_when_busybox_is_here() {
        if !Path::new(HOST_BUSYBOX).is_file() || Command::new("mke2fs").arg("-V").output().is_err()
        {
            return; // Nothing to build from on this host.
        }
        let dir = std::env::temp_dir().join(format!("sawmill-rootfs-ok-{}", std::process::id()));
        let tree = dir.join("tree");
        std::fs::create_dir_all(tree.join("opt")).unwrap();
        std::fs::write(tree.join("opt/hello"), "hi\n").unwrap();
        let img = dir.join("root.img");
        build(&Options {
            trees: vec![tree],
            output: img.clone(),
            size_mb: 16,
            busybox: HOST_BUSYBOX.into(),
            motd: Some("hello from the motd\n".into()),
        })
        .unwrap();
        let fsck = Command::new("e2fsck")
            .arg("-fn")
            .arg(&img)
            .output()
            .unwrap();
        assert!(fsck.status.success(), "{fsck:?}");
        let st = run(Command::new("debugfs")
            .args(["-R", "stat /dev/null"])
            .arg(&img))
        .unwrap();
        assert!(st.contains("Type: character special"), "{st}");
        assert!(st.contains("Device major/minor number: 01:03"), "{st}");
        let st = run(Command::new("debugfs")
            .args(["-R", "stat /opt/hello"])
            .arg(&img))
        .unwrap();
        assert!(st.contains("User:     0   Group:     0"), "{st}");
        let st = run(Command::new("debugfs").args(["-R", "stat /tmp"]).arg(&img)).unwrap();
        assert!(st.contains("Mode:  01777"), "{st}");
        let ls = run(Command::new("debugfs")
            .args(["-R", "stat /usr/bin/awk"])
            .arg(&img))
        .unwrap();
        assert!(ls.contains("Fast link dest: \"/bin/busybox\""), "{ls}");
        let motd = run(Command::new("debugfs")
            .args(["-R", "cat /etc/motd"])
            .arg(&img))
        .unwrap();
        assert!(motd.contains("hello from the motd"), "{motd}");
        let profile = run(Command::new("debugfs")
            .args(["-R", "cat /etc/profile"])
            .arg(&img))
        .unwrap();
        assert!(profile.contains("/etc/motd"), "{profile}");
        replace_file(&img, "/etc/motd", "a new day\n").unwrap();
        let motd = run(Command::new("debugfs")
            .args(["-R", "cat /etc/motd"])
            .arg(&img))
        .unwrap();
        assert!(
            motd.contains("a new day") && !motd.contains("hello"),
            "{motd}"
        );
        let fsck = Command::new("e2fsck")
            .arg("-fn")
            .arg(&img)
            .output()
            .unwrap();
        assert!(fsck.status.success(), "{fsck:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
