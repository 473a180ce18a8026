//! `./sawmill image linux --iso` boots to the shell: GRUB from the CD image loads the Linux
//! system, whose root file system is the second image beside the ISO on a virtio disk; the
//! login shell shows the message of the day and a prompt on the terminal (COM2), runs what is
//! typed, and its `exit` status ends the machine cleanly.
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::repo;

#[test]
fn the_linux_iso_boots_to_a_shell() {
    let root = repo();
    let dir = std::env::temp_dir().join(format!("sawmill-iso-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let iso = dir.join("sawmill.iso");
    let st = Command::new(root.join("sawmill"))
        .args(["image", "linux", "--iso", "-o"])
        .arg(&iso)
        .stdout(Stdio::null())
        .status()
        .expect("running ./sawmill image");
    assert!(st.success(), "./sawmill image linux --iso failed");
    let disk = dir.join("sawmill-root.img");
    assert!(disk.is_file(), "no root image beside the ISO");
    let (com1, com2) = (dir.join("com1.log"), dir.join("com2.log"));
    let mut child = Command::new("qemu-system-x86_64")
        // The Linux system's machine (systems/linux.toml `memory`): proc's kernel memory for
        // 256 processes needs the kernel pool of 1 GiB.
        .args(["-machine", "pc", "-cpu", "qemu64", "-m", "1G"])
        .args([
            "-display",
            "none",
            "-no-reboot",
            "-monitor",
            "none",
            "-nic",
            "none",
        ])
        .args([
            "-device",
            "isa-debug-exit,iobase=0xf4,iosize=0x04",
            "-accel",
            "tcg",
        ])
        .arg("-cdrom")
        .arg(&iso)
        .arg("-drive")
        .arg(format!("file={},if=virtio,format=raw", disk.display()))
        .arg("-serial")
        .arg(format!("file:{}", com1.display()))
        .args(["-serial", "stdio"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&com2).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("qemu-system-x86_64");
    let mut typed = false;
    let start = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        let screen = std::fs::read_to_string(&com2).unwrap_or_default();
        if !typed && screen.contains("root@sawmill:/# ") {
            // The prompt is there: type as a person would.
            let input = child.stdin.as_mut().unwrap();
            input.write_all(b"echo iso $((6*7))\nexit 7\n").unwrap();
            input.flush().unwrap();
            typed = true;
        }
        if start.elapsed() > Duration::from_secs(240) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the ISO did not boot to a shell that exits; terminal:\n{screen}\ndebug console:\n{}",
                std::fs::read_to_string(&com1).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let screen = std::fs::read_to_string(&com2).unwrap_or_default();
    let log = std::fs::read_to_string(&com1).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        screen.contains("proc "),
        "no server list in the motd:\n{screen}"
    );
    assert!(
        screen.contains("iso 42"),
        "the typed command did not run:\n{screen}"
    );
    assert!(
        log.contains("proc: init exited with status 7"),
        "debug console:\n{log}"
    );
    assert_eq!(code, Some(33), "no clean shutdown; debug console:\n{log}");
}
