//! Reads every file listed in `/CHECKSUMS` (written by the host tool from the tree the disk was
//! made of) and compares size and FNV-1a checksum; also walks the tree with readdir and checks
//! every regular file found is listed. Argument `mount=/data` checks that mount's list too.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sawmill_fsclient::{fnv64, Files};
use sawmill_fstests::{check, files, read_file};
use sawmill_interfaces::EntryKind;
use sawmill_rt::{env, println};

sawmill_rt::entry!(main);

fn walk(f: &mut Files, dir: &str, out: &mut Vec<String>) {
    let ents = f.readdir(dir).unwrap_or_else(|e| {
        println!("readall: FAIL readdir {}: {:?}", dir, e);
        sawmill_rt::exit(1)
    });
    for e in ents {
        let name = core::str::from_utf8(&e.name).unwrap_or("?");
        if name == "." || name == ".." || name == "lost+found" {
            continue;
        }
        let p = if dir == "/" {
            alloc::format!("/{}", name)
        } else {
            alloc::format!("{}/{}", dir, name)
        };
        match e.kind {
            EntryKind::Dir => walk(f, &p, out),
            EntryKind::Regular => out.push(p),
            _ => {}
        }
    }
}

fn check_mount(f: &mut Files, prefix: &str) -> usize {
    let base = if prefix == "/" { "" } else { prefix };
    let list = read_file(f, &alloc::format!("{}/CHECKSUMS", base)).expect("CHECKSUMS");
    let text = core::str::from_utf8(&list).expect("utf8");
    let mut n = 0;
    let mut listed = Vec::new();
    for line in text.lines() {
        let mut it = line.splitn(3, ' ');
        let (Some(h), Some(size), Some(path)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let want = u64::from_str_radix(h, 16).unwrap();
        let size: usize = size.parse().unwrap();
        let full = alloc::format!("{}{}", base, path);
        let data = match read_file(f, &full) {
            Ok(d) => d,
            Err(e) => {
                println!("readall: FAIL {}: {:?}", full, e);
                sawmill_rt::exit(1)
            }
        };
        check!(
            data.len() == size,
            "{}: {} bytes, expected {}",
            full,
            data.len(),
            size
        );
        check!(
            fnv64(&data) == want,
            "{}: checksum {:016x}, expected {:016x}",
            full,
            fnv64(&data),
            want
        );
        listed.push(full);
        n += 1;
    }
    let mut found = Vec::new();
    walk(f, prefix, &mut found);
    for p in &found {
        if p.ends_with("/CHECKSUMS") {
            continue;
        }
        if p.starts_with("/data/") && prefix == "/" {
            continue;
        }
        check!(listed.contains(p), "{} found by readdir but not listed", p);
    }
    println!("readall: {} files under {} match the host tree", n, prefix);
    n
}

fn main() {
    let mut f = files();
    if env::args().any(|a| a == "vfs") {
        f.protocol = sawmill_fsclient::Protocol::Vfs;
    }
    let mut total = check_mount(&mut f, "/");
    for a in env::args() {
        if let Some(m) = a.strip_prefix("mount=") {
            total += check_mount(&mut f, m);
        }
    }
    // A second pass over the cached pages must give the same answer.
    check_mount(&mut f, "/");
    println!("readall: PASS {} files read and checked", total);
}
