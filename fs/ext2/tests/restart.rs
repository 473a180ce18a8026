//! What a restarted PFS relies on (issue 16): `flush` is what makes data durable (a device that
//! keeps writes only once flushed loses everything since the last flush, and what was flushed
//! mounts, checks clean and reads back), a file system found dirty can be served read-only,
//! and inode generations continue from a seed, so a restarted server does not hand a reused
//! inode number the generation a client of the dead one still holds.
mod common;
use common::*;
use sawmill_ext2::{BlockDevice, DevError, Error, Fs, MemDevice};

/// A disk with a volatile write cache: writes are seen by reads at once but reach the medium
/// (`durable`) only at a flush, as a virtio disk's may. A crash keeps `durable`.
struct VolatileDevice {
    durable: Vec<u8>,
    pending: Vec<(u64, Vec<u8>)>,
    flushes: usize,
}

impl BlockDevice for VolatileDevice {
    fn size(&self) -> u64 {
        self.durable.len() as u64
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Result<(), DevError> {
        let img = self.current();
        let end = off as usize + buf.len();
        buf.copy_from_slice(img.get(off as usize..end).ok_or(DevError)?);
        Ok(())
    }
    fn write_at(&mut self, off: u64, buf: &[u8]) -> Result<(), DevError> {
        if off as usize + buf.len() > self.durable.len() {
            return Err(DevError);
        }
        self.pending.push((off, buf.to_vec()));
        Ok(())
    }
    fn flush(&mut self) -> Result<(), DevError> {
        for (off, data) in self.pending.drain(..) {
            self.durable[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        self.flushes += 1;
        Ok(())
    }
}

impl VolatileDevice {
    /// What a read sees: the medium with the writes not yet flushed laid over it.
    fn current(&self) -> Vec<u8> {
        let mut img = self.durable.clone();
        for (off, data) in &self.pending {
            img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
        }
        img
    }
}

fn fresh(tag: &str) -> (Scratch, Vec<u8>) {
    let s = Scratch::new(tag);
    let img = s.path("img");
    mkfs(&img, 2048, &["-b", "1024"], None);
    let bytes = std::fs::read(&img).unwrap();
    (s, bytes)
}

#[test]
fn flushed_data_survives_a_crash_and_unflushed_does_not() {
    let (s, base) = fresh("restart-flush");
    let mut fs = Fs::open(VolatileDevice {
        durable: base,
        pending: Vec::new(),
        flushes: 0,
    })
    .unwrap();
    let data: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
    let f = fs.create(2, b"kept", 0o644, 0, 0).unwrap();
    fs.write(f, 0, &data).unwrap();
    // fsync: the PFS's `file.fsync` is this (the cache's write-back, then the device flush).
    fs.flush().unwrap();
    assert_eq!(fs.device().flushes, 1, "flush must reach the device");
    let g = fs.create(2, b"lost", 0o644, 0, 0).unwrap();
    fs.write(g, 0, &data).unwrap();
    // The crash: only what reached the medium is left.
    let durable = fs.into_device().durable;
    let img = s.path("after");
    std::fs::write(&img, &durable).unwrap();
    assert_fsck_clean(&img, "the image as the last flush left it");
    let mut again = Fs::open(MemDevice(durable)).unwrap();
    assert!(again.check().unwrap().is_clean());
    let ino = again.lookup(2, b"kept").unwrap();
    assert_eq!(again.read_all(ino).unwrap(), data, "fsync'd data lost");
    assert_eq!(again.lookup(2, b"lost"), Err(Error::NotFound));
}

#[test]
fn a_file_system_made_read_only_refuses_changes() {
    let (_s, base) = fresh("restart-ro");
    let mut fs = Fs::open(MemDevice(base)).unwrap();
    let f = fs.create(2, b"a", 0o644, 0, 0).unwrap();
    fs.set_read_only();
    assert!(!fs.is_writable());
    assert_eq!(fs.create(2, b"b", 0o644, 0, 0), Err(Error::ReadOnly));
    assert_eq!(fs.write(f, 0, b"x"), Err(Error::ReadOnly));
    assert_eq!(fs.unlink(2, b"a"), Err(Error::ReadOnly));
    // Reading still works.
    assert_eq!(fs.lookup(2, b"a"), Ok(f));
}

#[test]
fn generations_continue_from_the_seed() {
    let (_s, base) = fresh("restart-gen");
    let mut fs = Fs::open(MemDevice(base)).unwrap();
    fs.seed_generation(0x1234_0000);
    let a = fs.create(2, b"a", 0o644, 0, 0).unwrap();
    assert_eq!(fs.stat_more(a).unwrap().generation, 0x1234_0001);
    // The number freed and taken again gets another generation.
    fs.unlink(2, b"a").unwrap();
    let b = fs.create(2, b"b", 0o644, 0, 0).unwrap();
    assert_eq!(b, a, "the freed inode number is reused");
    assert_ne!(fs.stat_more(b).unwrap().generation, 0x1234_0001);
    assert!(fs.is_file_inode(b) && fs.is_file_inode(2));
    assert!(!fs.is_file_inode(0) && !fs.is_file_inode(1) && !fs.is_file_inode(u32::MAX));
}
