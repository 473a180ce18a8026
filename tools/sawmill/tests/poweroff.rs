//! `poweroff` from the login shell stops the Linux system cleanly: busybox's `poweroff` (a
//! signal to pid 1, which the library turns into the machine's power-off as an init would) and
//! `poweroff -f` (the `reboot(2)` call) both end the run with status 0, nothing typed after
//! them runs, and what was written before is on the root image, which `e2fsck -fn` finds clean.
use std::process::Command;

mod common;
use common::repo;

fn tool(args: &[&str]) -> std::process::Output {
    Command::new(repo().join("sawmill"))
        .args(args)
        .output()
        .expect("running ./sawmill")
}

#[test]
fn poweroff_syncs_and_stops_the_machine() {
    let dir = std::env::temp_dir().join(format!("sawmill-poweroff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let img = dir.join("root.img");
    let out = tool(&["rootfs", "-o", img.to_str().unwrap()]);
    assert!(out.status.success(), "rootfs: {out:?}");
    for (n, how) in ["poweroff", "poweroff -f"].iter().enumerate() {
        let typed = dir.join("typed.txt");
        std::fs::write(
            &typed,
            format!("echo kept {n} > /root/kept{n}\n{how}\nsleep 3\necho not reached\n"),
        )
        .unwrap();
        let out = tool(&[
            "run",
            "linux",
            "--quiet",
            "--root",
            img.to_str().unwrap(),
            "--stdin",
            typed.to_str().unwrap(),
            "--timeout",
            "120",
        ]);
        let screen = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "`{how}`: {out:?}");
        assert!(
            !screen.contains("not reached"),
            "`{how}` did not stop:\n{screen}"
        );
        let cat = Command::new("debugfs")
            .args(["-R", &format!("cat /root/kept{n}")])
            .arg(&img)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&cat.stdout),
            format!("kept {n}\n"),
            "`{how}`: the file written before is not on the image"
        );
        let fsck = Command::new("e2fsck")
            .arg("-fn")
            .arg(&img)
            .output()
            .unwrap();
        assert!(fsck.status.success(), "`{how}`: e2fsck: {fsck:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
