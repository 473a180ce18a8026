//! Crash ordering: replay a sequence of operations on a device that stops persisting writes
//! after N of them (a power cut), for many N. Every cut image must be repairable by
//! `e2fsck -fy` (afterwards `e2fsck -fn` is clean), and files the sequence did not touch
//! must survive intact.
mod common;
use common::*;
use sawmill_ext2::{BlockDevice, DevError, Fs, MemDevice};

struct CutDevice {
    inner: MemDevice,
    budget: usize,
    writes: usize,
}

impl BlockDevice for CutDevice {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Result<(), DevError> {
        self.inner.read_at(off, buf)
    }
    fn write_at(&mut self, off: u64, buf: &[u8]) -> Result<(), DevError> {
        self.writes += 1;
        if self.writes > self.budget {
            return Err(DevError);
        }
        self.inner.write_at(off, buf)
    }
}

/// The operations; stops at the first error (the "crash").
fn ops(fs: &mut Fs<CutDevice>) -> Result<(), sawmill_ext2::Error> {
    let d = fs.mkdir(2, b"d", 0o755, 0, 0)?;
    let f = fs.create(d, b"f", 0o644, 0, 0)?;
    fs.write(f, 0, &vec![0x42; 40 * 1024])?;
    fs.symlink(d, b"s", &[b'x'; 100], 0, 0)?;
    let e = fs.mkdir(2, b"e", 0o755, 0, 0)?;
    fs.rename(2, b"d", e, b"moved")?;
    fs.link(f, 2, b"hl")?;
    fs.truncate(f, 5000)?;
    fs.unlink(2, b"keep2")?;
    fs.rename(2, b"hl", e, b"moved2")?;
    fs.rmdir(2, b"emptied")?;
    Ok(())
}

#[test]
fn every_crash_point_is_repairable_by_e2fsck() {
    let s = Scratch::new("crash");
    let tree = s.path("tree");
    std::fs::create_dir_all(tree.join("emptied")).unwrap();
    std::fs::write(tree.join("keep"), vec![0x17; 30 * 1024]).unwrap();
    std::fs::write(tree.join("keep2"), b"to be removed").unwrap();
    let img = s.path("img");
    mkfs(&img, 4096, &["-b", "1024"], Some(&tree));
    let base = std::fs::read(&img).unwrap();
    // Count the writes of a complete run.
    let mut fs = Fs::open(CutDevice {
        inner: MemDevice(base.clone()),
        budget: usize::MAX,
        writes: 0,
    })
    .unwrap();
    ops(&mut fs).unwrap();
    let total = fs.device().writes;
    assert!(total > 20);
    let step = (total / 400).max(1);
    let mut points = 0;
    for budget in (0..total).step_by(step) {
        let mut fs = Fs::open(CutDevice {
            inner: MemDevice(base.clone()),
            budget,
            writes: 0,
        })
        .unwrap();
        assert!(
            ops(&mut fs).is_err(),
            "a cut after {budget} writes must surface as an error"
        );
        std::fs::write(&img, &fs.into_device().inner.0).unwrap();
        let out = std::process::Command::new("e2fsck")
            .arg("-fy")
            .arg(&img)
            .output()
            .unwrap();
        let code = out.status.code().unwrap_or(-1);
        assert!(
            code <= 1,
            "cut at write {budget}/{total}: e2fsck -fy exit {code}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_fsck_clean(
            &img,
            &format!("repairing the cut at write {budget}/{total}"),
        );
        let mut fs = load(&img);
        let keep = fs.resolve(b"/keep").unwrap();
        assert_eq!(
            fs.read_all(keep).unwrap(),
            vec![0x17; 30 * 1024],
            "untouched file damaged at cut {budget}"
        );
        points += 1;
    }
    println!("crash points checked: {points} of {total} writes");
}
