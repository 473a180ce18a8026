//! The image boots through a real multiboot2 loader: GRUB (from Debian's grub-pc-bin, packed
//! by grub-mkrescue into an ISO) loads `sawmill image pingpong` and the guest must run the
//! scenario and shut down cleanly. QEMU `-kernel` (PVH) is what every other scenario uses.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::repo;

#[test]
fn grub_multiboot2_boots_the_image() {
    let root = repo();
    let dir = std::env::temp_dir().join(format!("sawmill-grub-{}", std::process::id()));
    let iso_root = dir.join("iso");
    std::fs::create_dir_all(iso_root.join("boot/grub")).unwrap();
    let img = iso_root.join("boot/sawmill.elf");
    let st = Command::new(root.join("sawmill"))
        .args(["image", "pingpong", "-o"])
        .arg(&img)
        .stdout(Stdio::null())
        .status()
        .expect("running ./sawmill image");
    assert!(st.success(), "./sawmill image pingpong failed");
    std::fs::write(
        iso_root.join("boot/grub/grub.cfg"),
        "set default=0\nset timeout_style=hidden\nset timeout=0\nserial --unit=0 --speed=115200\n\
         terminal_input serial\nterminal_output serial\n\
         menuentry \"sawmill\" {\n  multiboot2 /boot/sawmill.elf trace=rejected\n  boot\n}\n",
    )
    .unwrap();
    let iso = dir.join("sawmill.iso");
    let st = Command::new("grub-mkrescue")
        .arg("-o")
        .arg(&iso)
        .arg(&iso_root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect(
            "grub-mkrescue (Debian grub-pc-bin, xorriso, mtools; installed by scripts/setup.sh)",
        );
    assert!(st.success(), "grub-mkrescue failed");
    let serial = dir.join("serial.log");
    let mut child = Command::new("qemu-system-x86_64")
        .args([
            "-machine",
            "pc",
            "-cpu",
            "qemu64",
            "-m",
            "256M",
            "-display",
            "none",
            "-no-reboot",
            "-monitor",
            "none",
        ])
        .args([
            "-device",
            "isa-debug-exit,iobase=0xf4,iosize=0x04",
            "-accel",
            "tcg",
        ])
        .arg("-serial")
        .arg(format!("file:{}", serial.display()))
        .arg("-cdrom")
        .arg(&iso)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("qemu-system-x86_64");
    let start = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "GRUB boot timed out; serial log:\n{}",
                std::fs::read_to_string(&serial).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = std::fs::read_to_string(&serial).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        code,
        Some(33),
        "guest did not shut down with code 0; serial log:\n{log}"
    );
    assert!(
        log.contains("root: all done, success"),
        "serial log:\n{log}"
    );
    // The command line came through multiboot2's tag (the kernel reads it from there).
    assert!(
        log.contains("kernel: tracing rejected system calls"),
        "the multiboot2 command line was not read; serial log:\n{log}"
    );
}
