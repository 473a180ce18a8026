//! The Linux system on the network (issue 15), with clients nobody here wrote: boots
//! `systems/linux.toml` with QEMU's user network forwarding a host port to the guest's port 80,
//! runs unmodified busybox `httpd -f -p 80 -h /www` as the first process (a small page and a
//! 1 MiB file put into a root image first), and fetches both with the host's `curl`:
//! - each body's sha256 equals its source's;
//! - 50 `curl`s at once (as issue 15 asks) all get the 1 MiB file whole (httpd forks a child per connection:
//!   the child holds its copy of the socket's capability).
//!
//! Readiness is a real HTTP reply, retried for a bounded time, never a bare connect (QEMU's
//! forwarder accepts a connection before anything in the guest listens). QEMU's forwarder takes
//! one pending connection at a time on the host, so the parallel `curl`s start staggered and
//! each retries boundedly (`--retry`).
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

mod common;
use common::{free_port, pseudo_random, repo, sha256, Guest};

/// Fetches `url` into `out` with curl; the HTTP status (0: no reply).
fn curl(url: &str, out: &Path, retries: u32) -> u32 {
    let r = Command::new("curl")
        .args(["-s", "-m", "120", "--retry", &retries.to_string()])
        .args(["--retry-delay", "1", "--retry-all-errors", "-o"])
        .arg(out)
        .args(["-w", "%{http_code}", url])
        .stdin(Stdio::null())
        .output()
        .expect("running curl (scripts/setup.sh installs it)");
    String::from_utf8_lossy(&r.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn host_curl_fetches_from_busybox_httpd_in_the_guest() {
    let dir = repo().join("target/test-logs/httpd");
    let _ = std::fs::remove_dir_all(&dir);
    let www = dir.join("tree/www");
    std::fs::create_dir_all(&www).unwrap();
    let page = b"<html><body><h1>sawmill</h1><p>served by busybox httpd</p></body></html>\n";
    std::fs::write(www.join("index.html"), page).unwrap();
    std::fs::write(www.join("big.bin"), pseudo_random(1 << 20, 0x1234_5678)).unwrap();
    let image = dir.join("root.img");
    let st = Command::new(repo().join("sawmill"))
        .arg("rootfs")
        .arg(dir.join("tree"))
        .arg("-o")
        .arg(&image)
        .status()
        .expect("running ./sawmill rootfs");
    assert!(st.success(), "./sawmill rootfs");

    let port = free_port();
    let log = dir.join("guest.log");
    let child = Command::new(repo().join("sawmill"))
        .args(["run", "linux", "--net", "--timeout", "500", "--root"])
        .arg(&image)
        .args(["--forward", &format!("tcp:{port}:80")])
        .args([
            "--",
            "/bin/busybox",
            "httpd",
            "-f",
            "-p",
            "80",
            "-h",
            "/www",
        ])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(dir.join("guest.err")).unwrap())
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("running ./sawmill");
    let mut g = Guest {
        child,
        log: dir.join("guest.err"),
    };
    let base = format!("http://127.0.0.1:{port}");

    // Ready when the page comes back (the build and boot may take minutes on a loaded host).
    let start = Instant::now();
    let small = dir.join("index.out");
    loop {
        if curl(&format!("{base}/index.html"), &small, 0) == 200 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no HTTP reply within 300 s; guest log:\n{}",
            g.log()
        );
        if let Ok(Some(st)) = g.child.try_wait() {
            panic!("the guest ended early ({st}); log:\n{}", g.log());
        }
        thread::sleep(Duration::from_secs(2));
    }
    assert_eq!(
        sha256(&small),
        sha256(&www.join("index.html")),
        "the small page"
    );

    let big = dir.join("big.out");
    assert_eq!(curl(&format!("{base}/big.bin"), &big, 3), 200, "1 MiB file");
    assert_eq!(sha256(&big), sha256(&www.join("big.bin")), "1 MiB file");

    // Several at once: started staggered (QEMU's forwarder takes one pending connection at a
    // time), each retried boundedly.
    let n = 50;
    let fetches: Vec<_> = (0..n)
        .map(|i| {
            let url = format!("{base}/big.bin");
            let out = dir.join(format!("par{i}.out"));
            thread::sleep(Duration::from_millis(100));
            thread::spawn(move || (curl(&url, &out, 5), out))
        })
        .collect();
    let want = sha256(&www.join("big.bin"));
    for (i, f) in fetches.into_iter().enumerate() {
        let (code, out) = f.join().unwrap();
        assert_eq!(code, 200, "parallel fetch {i}; guest log:\n{}", g.log());
        assert_eq!(sha256(&out), want, "parallel fetch {i}");
    }
    let _ = g.child.kill();
}
