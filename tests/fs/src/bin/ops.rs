//! The file-system scenarios other than full reads, selected by the first argument:
//! - `write`: create, write, rename and delete a tree, then `sync` (the tool then runs e2fsck
//!   and compares an export with tests/fs/expected/write).
//! - `fsync`: write a file, fsync, print "fsync done" (the tool kills QEMU at once), then keep
//!   writing without fsync.
//! - `perm`: as an unprivileged uid, reading and writing files it may not is refused.
//! - `multi NAME`: several of these run at once on their own files and one shared file.
//! - `crash`: kill the PFS behind /data; /data then fails (no hang), / and the VFS still work.
//! - `corrupt`: every file of a crafted corrupt image gives an error or data, never a hang.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use sawmill_fsclient::{Error, Files, TimeSet, O_CREATE, O_READ, O_TRUNC, O_WRITE};
use sawmill_fstests::{check, files, ok, read_file};
use sawmill_rt::{env, println};

sawmill_rt::entry!(main);

fn write_file(f: &mut Files, path: &str, data: &[u8]) {
    let fd = ok(f.open(path, O_WRITE | O_CREATE | O_TRUNC, 0o644), path);
    check!(
        ok(f.write(fd, data), path) == data.len(),
        "{}: short write",
        path
    );
    ok(f.close(fd), path);
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 251) as u8).collect()
}

fn write_test(f: &mut Files) {
    ok(f.mkdir("/work", 0o755), "mkdir /work");
    ok(f.mkdir("/work/sub", 0o755), "mkdir /work/sub");
    let alpha: Vec<u8> = b"alpha\n".iter().copied().cycle().take(600).collect();
    write_file(f, "/work/a.txt", &alpha);
    write_file(f, "/work/sub/b.bin", &pattern(10000));
    ok(f.rename("/work/a.txt", "/work/sub/a-renamed.txt"), "rename");
    write_file(f, "/work/gone.txt", b"soon gone");
    ok(f.unlink("/work/gone.txt"), "unlink");
    ok(f.mkdir("/work/tmpdir", 0o700), "mkdir tmpdir");
    ok(f.rmdir("/work/tmpdir"), "rmdir");
    ok(f.symlink("sub/a-renamed.txt", "/work/link"), "symlink");
    check!(
        ok(f.readlink("/work/link"), "readlink") == b"sub/a-renamed.txt",
        "readlink text"
    );
    let fd = ok(f.open("/work/sub/b.bin", O_READ | O_WRITE, 0), "open b.bin");
    ok(f.ftruncate(fd, 5000), "ftruncate");
    check!(
        ok(f.pwrite(fd, b"MIDDLE", 1000), "pwrite") == 6,
        "pwrite count"
    );
    let mut buf = [0u8; 16];
    check!(ok(f.pread(fd, &mut buf, 998), "pread") == 16, "pread count");
    check!(
        &buf[2..8] == b"MIDDLE",
        "pread sees the write: {:?}",
        &buf[..]
    );
    check!(
        ok(f.lseek(fd, 0, 2), "lseek") == 5000,
        "size after truncate"
    );
    check!(ok(f.fstat(fd), "fstat").size == 5000, "fstat size");
    ok(f.close(fd), "close");
    // Reading through the symlink gives the renamed file.
    check!(
        ok(read_file(f, "/work/link"), "read link") == alpha,
        "content through the symlink"
    );
    ok(f.unlink("/hello.txt"), "unlink hello");
    check!(
        f.open("/hello.txt", O_READ, 0) == Err(Error::NotFound),
        "unlinked file still opens"
    );
    ok(f.chmod("/work/sub/a-renamed.txt", 0o600), "chmod");
    check!(
        ok(f.stat("/work/sub/a-renamed.txt"), "stat").mode & 0o777 == 0o600,
        "chmod took"
    );
    // Across mounts: `..` from /data leads back to /, and a symlink on / into /data works.
    write_file(f, "/data/x.txt", b"on the data disk\n");
    check!(
        ok(
            read_file(f, "/data/../work/sub/../link"),
            "dotdot across mounts"
        ) == alpha,
        "dotdot path"
    );
    ok(
        f.symlink("/data/x.txt", "/work/to-data"),
        "symlink across mounts",
    );
    check!(
        ok(read_file(f, "/work/to-data"), "read across mounts") == b"on the data disk\n",
        "cross-mount symlink"
    );
    // Relative symlinks that lead into the mount point: with protocol option 3 the walk starts
    // at the PFS of /, which must hand it to the VFS when it reaches the mount point (the disk
    // of / has no `data` directory, so a walk that went on there would fail).
    ok(
        f.symlink("../data/x.txt", "/work/rel-to-data"),
        "relative symlink across mounts",
    );
    ok(
        f.symlink("../data", "/work/rel-dir"),
        "relative symlink to a mount point",
    );
    for proto in [
        sawmill_fsclient::Protocol::Vfs,
        sawmill_fsclient::Protocol::Direct,
    ] {
        f.protocol = proto;
        check!(
            ok(read_file(f, "/work/rel-to-data"), "read relative link") == b"on the data disk\n",
            "relative cross-mount symlink"
        );
        check!(
            ok(
                read_file(f, "/work/rel-dir/x.txt"),
                "read through a link to a mount"
            ) == b"on the data disk\n",
            "symlink to a mount point"
        );
    }
    f.protocol = sawmill_fsclient::Protocol::Vfs;
    check!(
        f.rename("/work/sub/b.bin", "/data/b.bin") == Err(Error::Xdev),
        "rename across mounts refused"
    );
    check!(
        f.rmdir("/work") == Err(Error::NotEmpty),
        "rmdir of a non-empty directory"
    );
    // The bulk-write buffer refuses what it must: a read-only file, a write before the buffer
    // exists, a length past it. Long writes went through it above (a.txt, b.bin).
    {
        use sawmill_interfaces::{file, rpc, FsError};
        let fd = ok(
            f.open("/work/sub/a-renamed.txt", O_READ, 0),
            "open read-only",
        );
        let c = file::Client::new(ok(f.file_cap(fd), "file cap"));
        check!(
            c.write_buffer(0x1_9000_0000, [0x1_9000_0000, 16384])
                .map(|_| ())
                == Err(rpc::Error::App(FsError::BadFile)),
            "write buffer of a read-only file"
        );
        ok(f.close(fd), "close");
        let fd = ok(
            f.open("/work/bulk.tmp", O_READ | O_WRITE | O_CREATE, 0o644),
            "create bulk.tmp",
        );
        let c = file::Client::new(ok(f.file_cap(fd), "file cap"));
        check!(
            c.write_from_buffer(0, 10) == Err(rpc::Error::App(FsError::Invalid)),
            "write from a buffer never mapped"
        );
        let data = pattern(40000);
        check!(
            ok(f.pwrite(fd, &data, 0), "long pwrite") == data.len(),
            "long pwrite count"
        );
        check!(
            c.write_from_buffer(0, 16385) == Err(rpc::Error::App(FsError::Invalid)),
            "write past the buffer"
        );
        let mut back = alloc::vec![0u8; data.len()];
        check!(
            ok(f.pread(fd, &mut back, 0), "pread") == data.len() && back == data,
            "a 40000-byte write reads back"
        );
        ok(f.close(fd), "close");
        copy_path_test(f, data);
        ok(f.unlink("/work/bulk.tmp"), "unlink bulk.tmp");
        vfs_reopen_test(f);
    }
    ok(f.sync(), "sync");
    println!("ops: PASS write tree done and synced");
}

/// The copy path (pages not mapped: the PFS copies into the open file's read buffer, which the
/// library maps read-only): `/work/bulk.tmp` holds `data` (40,000 bytes). Every read is compared
/// with what the file must hold: sequential records with the short one at the end, unaligned
/// reads across pages and past one buffer's 16 KiB, reads after another descriptor wrote into or
/// truncated the range the buffer holds; and the PFS refuses lying requests.
fn copy_path_test(f: &mut Files, mut data: Vec<u8>) {
    use sawmill_fsclient::O_NOMAP;
    use sawmill_interfaces::{file, rpc, FsError};
    let path = "/work/bulk.tmp";
    let fd = ok(f.open(path, O_READ | O_NOMAP, 0), "open O_NOMAP");
    let mut rec = alloc::vec![0u8; 4096];
    let mut got = Vec::new();
    loop {
        let n = ok(f.read(fd, &mut rec), "read record");
        if n == 0 {
            break;
        }
        check!(
            n == 4096 || got.len() + n == data.len(),
            "short record {} at {}",
            n,
            got.len()
        );
        got.extend_from_slice(&rec[..n]);
    }
    check!(got == data, "copy path: sequential 4 KiB records differ");
    let pread = |f: &mut Files, off: usize, len: usize| {
        let mut b = alloc::vec![0u8; len];
        let n = ok(f.pread(fd, &mut b, off as u64), "pread");
        b.truncate(n);
        b
    };
    for (off, len) in [
        (4095, 2),
        (100, 20000),
        (13, 16384),
        (39990, 100),
        (40000, 10),
        (0, 40000),
        (7, 1),
    ] {
        let want = &data[off.min(data.len())..(off + len).min(data.len())];
        check!(
            pread(f, off, len) == want,
            "copy path: pread({}, {}) differs",
            off,
            len
        );
    }
    // Another descriptor writes into the range the buffer holds (a sequential read just filled
    // it ahead): the next read sees the new bytes.
    pread(f, 8000, 1000);
    pread(f, 9000, 1000);
    let w = ok(f.open(path, O_WRITE, 0), "open for writing");
    ok(f.pwrite(w, b"XYZ", 10000), "small write");
    data[10000..10003].copy_from_slice(b"XYZ");
    let big: Vec<u8> = (0..5000).map(|i| (i % 13) as u8 + b'a').collect();
    ok(f.pwrite(w, &big, 12000), "long write");
    data[12000..17000].copy_from_slice(&big);
    check!(
        pread(f, 9500, 8000) == data[9500..17500],
        "copy path: a read after another descriptor's writes misses them"
    );
    // ... and truncates the file under it: the read is short.
    pread(f, 19000, 100);
    ok(f.ftruncate(w, 20000), "ftruncate");
    check!(
        pread(f, 19000, 4096) == data[19000..20000],
        "copy path: a read past a truncate is not short"
    );
    ok(f.close(w), "close writer");
    // Lies and misuse: a length past the buffer, a fill without one, a write-only file's buffer.
    let c = file::Client::new(ok(f.file_cap(fd), "file cap"));
    check!(
        c.read_to_buffer(0, 16385) == Err(rpc::Error::App(FsError::Invalid)),
        "read_to_buffer past the buffer"
    );
    check!(
        c.read_to_buffer(u64::MAX - 5, 16384) == Ok(0),
        "read_to_buffer far past the end"
    );
    ok(f.close(fd), "close O_NOMAP");
    let fd = ok(f.open(path, O_READ, 0), "open");
    let c = file::Client::new(ok(f.file_cap(fd), "file cap"));
    check!(
        c.read_to_buffer(0, 100) == Err(rpc::Error::App(FsError::Invalid)),
        "read_to_buffer without a buffer"
    );
    ok(f.close(fd), "close");
    let fd = ok(f.open(path, O_WRITE, 0), "open write-only");
    let c = file::Client::new(ok(f.file_cap(fd), "file cap"));
    check!(
        c.read_buffer(0x1_9000_0000, [0x1_9000_0000, 5 * 4096])
            .map(|_| ())
            == Err(rpc::Error::App(FsError::BadFile)),
        "read buffer of a write-only file"
    );
    ok(f.close(fd), "close");
    println!("ops: PASS copy path");
}

/// Opens through the VFS (option 2) reuse the files the library closed and kept (`vfs.reopen`):
/// alternating files on two mounts read back what each holds, through a link too; a missing file
/// is `NotFound`; and the VFS refuses what it must (CREATE, a file named for another mount).
fn vfs_reopen_test(f: &mut Files) {
    use sawmill_interfaces::{rpc, vfs, FsError, OpenFlags};
    let alpha: Vec<u8> = b"alpha\n".iter().copied().cycle().take(600).collect();
    for i in 0..6 {
        for (path, want) in [
            ("/work/sub/a-renamed.txt", &alpha[..]),
            ("/data/x.txt", b"on the data disk\n"),
            ("/work/to-data", b"on the data disk\n"),
        ] {
            check!(
                ok(read_file(f, path), path) == want,
                "reopen round {}: {} reads other bytes",
                i,
                path
            );
        }
        check!(
            f.open("/work/no-such-file", O_READ, 0) == Err(Error::NotFound),
            "reopen of a missing file"
        );
    }
    let v = vfs::Client::new(env::cap("vfs").expect("vfs endpoint"));
    let rx = sawmill_rt::thread::alloc_slot();
    let o = ok(
        v.open(b"/data/x.txt", OpenFlags::READ, 0, rx)
            .map_err(|_| Error::Io),
        "vfs open",
    );
    let c = sawmill_interfaces::file::Client::new(o.file);
    ok(c.close().map_err(|_| Error::Io), "file close");
    check!(
        v.reopen(
            b"/work/sub/a-renamed.txt",
            OpenFlags::READ,
            0,
            o.mount,
            o.file
        ) == Err(rpc::Error::App(FsError::Xdev)),
        "vfs.reopen of a path on another mount than the file's"
    );
    check!(
        v.reopen(
            b"/data/x.txt",
            OpenFlags::READ | OpenFlags::CREATE,
            0o644,
            o.mount,
            o.file
        ) == Err(rpc::Error::App(FsError::Invalid)),
        "vfs.reopen with CREATE"
    );
    check!(
        v.reopen(b"/data/x.txt", OpenFlags::READ, 0, o.mount, o.file)
            .map(|r| r.size)
            == Ok(17),
        "vfs.reopen into a kept file"
    );
    let _ = sawmill_rt::sys::cap_delete(o.file);
    println!("ops: PASS open through the VFS reuses kept files");
}

fn fsync_test(f: &mut Files) {
    let data = pattern(50000);
    let fd = ok(
        f.open("/durable.bin", O_WRITE | O_CREATE | O_TRUNC, 0o644),
        "open",
    );
    ok(f.write(fd, &data), "write");
    ok(f.fsync(fd), "fsync");
    println!("ops: fsync done");
    // Unsynced work after the acknowledged fsync; QEMU is killed meanwhile.
    let mut i = 0u64;
    loop {
        let _ = f.pwrite(fd, b"late", 60000 + (i % 1000) * 4);
        i += 1;
    }
}

fn perm_test(f: &mut Files) {
    // Set up by the disk's debugfs commands: /secret (0600, uid 0), /ro-dir (0755, uid 0),
    // /public.txt (0644, uid 0), /mine.txt (0600, uid 1000).
    check!(
        f.open("/secret", O_READ, 0) == Err(Error::Denied),
        "uid 1000 read a 0600 root file"
    );
    check!(
        f.open("/public.txt", O_WRITE, 0) == Err(Error::Denied),
        "uid 1000 wrote a 0644 root file"
    );
    check!(
        f.open("/ro-dir/new", O_WRITE | O_CREATE, 0o644) == Err(Error::Denied),
        "created in a root 0755 directory"
    );
    check!(
        f.unlink("/public.txt") == Err(Error::Denied),
        "unlinked in the root directory"
    );
    check!(
        f.chmod("/public.txt", 0o666) == Err(Error::NotPermitted),
        "chmod of another's file"
    );
    // Owners and times (Linux's rules: EPERM whatever the bits, EACCES for "now" without
    // write permission), by path and by open file.
    check!(
        f.chown("/public.txt", Some(1000), None, true) == Err(Error::NotPermitted),
        "chown of another's file"
    );
    check!(
        f.chown("/mine.txt", Some(0), None, true) == Err(Error::NotPermitted),
        "gave a file away"
    );
    ok(
        f.chown("/mine.txt", None, Some(1000), true),
        "chgrp to our group",
    );
    check!(
        f.chown("/mine.txt", None, Some(0), true) == Err(Error::NotPermitted),
        "chgrp to a group not ours"
    );
    check!(
        f.utimens("/public.txt", TimeSet::At(1), TimeSet::Omit, true) == Err(Error::NotPermitted),
        "explicit times on another's file"
    );
    check!(
        f.utimens("/public.txt", TimeSet::Now, TimeSet::Now, true) == Err(Error::Denied),
        "times set to now without write permission"
    );
    ok(
        f.utimens("/mine.txt", TimeSet::At(1), TimeSet::At(2), true),
        "times of our own file",
    );
    check!(
        f.link("/public.txt", "/ro-dir/l") == Err(Error::Denied),
        "linked into a root 0755 directory"
    );
    f.protocol = sawmill_fsclient::Protocol::Direct;
    let pubfd = ok(f.open("/public.txt", O_READ, 0), "open public");
    check!(
        f.fchmod(pubfd, 0o666) == Err(Error::NotPermitted),
        "fchmod of another's file"
    );
    check!(
        f.fchown(pubfd, Some(1000), None) == Err(Error::NotPermitted),
        "fchown of another's file"
    );
    ok(f.close(pubfd), "close public");
    let minefd = ok(f.open("/mine.txt", O_READ, 0), "open mine");
    ok(f.fchmod(minefd, 0o640), "fchmod of our own file");
    let st = ok(f.fstat(minefd), "fstat mine");
    check!(
        st.mode & 0o7777 == 0o640 && st.gid == 1000 && st.mtime.0 == 2,
        "our own file's attributes: {:o} gid {} mtime {}",
        st.mode,
        st.gid,
        st.mtime.0
    );
    ok(f.close(minefd), "close mine");
    f.protocol = sawmill_fsclient::Protocol::Vfs;
    check!(
        ok(read_file(f, "/public.txt"), "read public") == b"public\n",
        "public content"
    );
    check!(
        ok(read_file(f, "/mine.txt"), "read mine") == b"mine\n",
        "own file content"
    );
    // Option 3 opens at the PFS directly: the PFS's own checks must agree.
    f.protocol = sawmill_fsclient::Protocol::Direct;
    check!(
        f.open("/secret", O_READ, 0) == Err(Error::Denied),
        "direct open of /secret allowed"
    );
    // After direct closes the library reopens its kept files (`file.reopen`): each open must
    // still be checked with our credentials and name the file asked for.
    check!(
        f.open("/public.txt", O_WRITE, 0) == Err(Error::Denied),
        "direct write open of a 0644 root file allowed"
    );
    for _ in 0..3 {
        check!(
            ok(read_file(f, "/mine.txt"), "direct read mine") == b"mine\n",
            "own file content through a reopened file"
        );
        check!(
            ok(read_file(f, "/public.txt"), "direct read public") == b"public\n",
            "public content through a reopened file"
        );
    }
    f.protocol = sawmill_fsclient::Protocol::Vfs;
    println!("ops: PASS permissions enforced for uid 1000");
}

fn multi_test(f: &mut Files) {
    let me = env::arg(1).unwrap_or("x");
    let id = me.bytes().next().unwrap_or(b'x');
    let own = alloc::format!("/data/{}.txt", me);
    let rec: Vec<u8> = (0..100).map(|i| id.wrapping_add(i as u8)).collect();
    let shared = ok(
        f.open("/data/shared", O_READ | O_WRITE | O_CREATE, 0o666),
        "open shared",
    );
    for round in 0..20u64 {
        write_file(f, &own, &rec);
        check!(
            ok(read_file(f, &own), "read own") == rec,
            "own file content, round {}",
            round
        );
        // Each client writes its own 100-byte records in the shared file (slot = id, round).
        let off = (round * 8 + (id - b'a') as u64) * 100;
        check!(
            ok(f.pwrite(shared, &rec, off), "pwrite shared") == 100,
            "shared write"
        );
        let mut back = [0u8; 100];
        check!(
            ok(f.pread(shared, &mut back, off), "pread shared") == 100,
            "shared read count"
        );
        check!(back[..] == rec[..], "shared record torn in round {}", round);
    }
    ok(f.close(shared), "close shared");
    println!("ops: PASS client {} done", me);
}

fn crash_test(f: &mut Files) {
    write_file(f, "/data/before.txt", b"x");
    let fd = ok(f.open("/data/before.txt", O_READ, 0), "open before crash");
    ok(f.crash_mount(1), "crash request");
    let mut b = [0u8; 8];
    let r = f.pread(fd, &mut b, 0);
    check!(r.is_err(), "read from a dead PFS succeeded");
    let _ = f.close(fd);
    check!(
        f.open("/data/before.txt", O_READ, 0) == Err(Error::Gone),
        "open on the dead mount"
    );
    f.protocol = sawmill_fsclient::Protocol::Direct;
    check!(
        f.open("/data/before.txt", O_READ, 0).is_err(),
        "direct open on the dead mount"
    );
    // The root mount and the VFS carry on.
    write_file(f, "/after-crash.txt", b"still here\n");
    check!(
        ok(read_file(f, "/after-crash.txt"), "read after crash") == b"still here\n",
        "root mount after the crash"
    );
    check!(
        ok(read_file(f, "/hello.txt"), "hello") == b"hello, sawmill\n",
        "old file after the crash"
    );
    println!("ops: PASS /data died alone; / and the VFS keep working");
}

fn corrupt_test(f: &mut Files) {
    // The disk at /data is damaged (see the scenario): every access ends in an answer.
    let mut errors = 0;
    for p in [
        "/data/hello.txt",
        "/data/docs/medium.bin",
        "/data/docs/odd-size.dat",
        "/data/docs/deep/er/leaf.txt",
    ] {
        match read_file(f, p) {
            Ok(d) => println!("ops: {} read {} bytes", p, d.len()),
            Err(e) => {
                println!("ops: {} -> {:?}", p, e);
                errors += 1;
            }
        }
    }
    let _ = f.readdir("/data/docs");
    check!(errors > 0, "no error from the corrupt image");
    check!(
        ok(read_file(f, "/hello.txt"), "root hello") == b"hello, sawmill\n",
        "root mount fine"
    );
    println!("ops: PASS corrupt image answered with errors");
}

fn main() {
    let mut f = files();
    f.protocol = sawmill_fsclient::Protocol::Vfs;
    match env::arg(0).unwrap_or("") {
        "write" => write_test(&mut f),
        "fsync" => fsync_test(&mut f),
        "perm" => perm_test(&mut f),
        "multi" => multi_test(&mut f),
        "crash" => crash_test(&mut f),
        "corrupt" => corrupt_test(&mut f),
        other => println!("ops: FAIL unknown mode `{}`", other),
    }
}
