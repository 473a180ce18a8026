//! Crash consistency, the logic (issue 16; `./sawmill crash` in `crashcmd` drives it): the
//! write log QEMU's `blklogwrites` driver keeps of a disk (the dm-log-writes format), the
//! workload's record of what it fsync'd (tests/crash/workload.c), the crash points to replay
//! and the rule that says which fsync'd states each must hold. Pure functions over bytes and
//! text, so everything here is tested with crafted logs; touches nothing.
//!
//! **The log** (dm-log-writes, as QEMU writes it, all little-endian): sector 0 is the super
//! (magic, version 1, entry count, sector size); entries follow from sector 1, each a header
//! sector (sector, sector count, flags, data length) followed by its data sectors (none for a
//! flush or a discard). QEMU appends an entry when the request has completed on the image, so
//! the log's order is the order of completion, and a flush entry comes after every write that
//! completed before the flush did.
//!
//! **Crash points.** A crash point is a prefix of the log: the image as it was before the run,
//! with the first `n` entries applied. At a flush: every entry up to and including flush `k`
//! (a crash right after that flush returned). Between flushes: some of the writes after flush
//! `k` (a crash while the next batch was being written).
//!
//! **The rule.** Before its fsync call number `N` (from 0) the workload writes one block
//! starting `SAWMILL-CRASH-FSYNC N` (its marks file); the PFS writes every dirty block back on
//! an fsync, then flushes the device (servers/ext2: `fsync` → the engine's `flush` → the
//! cache's `sync`: write back, then `blk.flush`; after a rename that replaced a file, a second
//! write-back and flush release it, fs/ext2 `Fs::flush`). So fsync `N` was acknowledged by the
//! first flush in the log after the write that carried mark `N` (of two, the earlier: where the
//! record's states already hold): found by content, nothing counted or
//! guessed (counting flushes cannot work: QEMU drops a flush that follows no write, and an fsync
//! with nothing to write is one). Were there a flush from elsewhere in between, the one found
//! would be earlier than the real one and the rule would demand the data earlier than due: a
//! false alarm, never a loss let through. An fsync that returned without its flush shows as two
//! marks before one flush, which is refused. A crash point after `c` flushes must hold every
//! record line of an fsync whose flush is among those `c`.
//!
//! **What "hold" means.** For each path, the latest required line is its state. A path with no
//! later line (nothing in flight for it) must match exactly: `LEN` bytes hashing to `HASH`, or
//! absent. A path with a later line may be anywhere between that state and the next one (the
//! change in flight is not acknowledged): its first `LEN` bytes hash to the required `HASH`
//! (an append in flight may have grown it), or it matches the next line the same way, or is
//! absent where a line says so. The workload keeps each in-place overwrite within one block,
//! which a crash leaves whole or untouched, so "the old bytes or the new" is all it can be.

use std::collections::BTreeMap;

/// dm-log-writes' magic and version (include/linux/dm-log-writes.h's values).
pub const LOG_MAGIC: u64 = 0x006a_7366_7773_6872;
pub const LOG_VERSION: u64 = 1;
/// Entry flags.
pub const FLAG_FLUSH: u64 = 1;
pub const FLAG_FUA: u64 = 1 << 1;
pub const FLAG_DISCARD: u64 = 1 << 2;
pub const FLAG_MARK: u64 = 1 << 3;
const KNOWN_FLAGS: u64 = FLAG_FLUSH | FLAG_FUA | FLAG_DISCARD | FLAG_MARK;
/// What the workload's mark block starts with, followed by the fsync's number and a newline
/// (tests/crash/workload.c).
pub const FSYNC_MARK: &[u8] = b"SAWMILL-CRASH-FSYNC ";
/// The prefix of the workload's record lines.
pub const RECORD_PREFIX: &str = "crash: ";

/// One logged request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// First sector (log sector size) of a write or discard.
    pub sector: u64,
    pub sectors: u64,
    pub flags: u64,
    /// Byte offset of the data in the log (writes only).
    pub data_at: usize,
}

impl Entry {
    pub fn is_flush(&self) -> bool {
        self.flags & FLAG_FLUSH != 0
    }
    /// A request that changes the image (a write or a discard; a flush with data is both).
    pub fn changes(&self) -> bool {
        self.sectors != 0
    }
}

#[derive(Debug)]
pub struct Log {
    pub sector_size: u64,
    pub entries: Vec<Entry>,
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Parses a whole log. Every entry the super counts must be there in full, with known flags.
pub fn parse_log(log: &[u8]) -> Result<Log, String> {
    if log.len() < 28 {
        return Err(format!("log of {} bytes: no super block", log.len()));
    }
    if le64(log, 0) != LOG_MAGIC {
        return Err("log: bad magic (not a dm-log-writes log)".into());
    }
    if le64(log, 8) != LOG_VERSION {
        return Err(format!("log: version {} (want 1)", le64(log, 8)));
    }
    let count = le64(log, 16);
    let ss = u32::from_le_bytes(log[24..28].try_into().unwrap()) as u64;
    if !(ss.is_power_of_two() && (32..1 << 24).contains(&ss)) {
        return Err(format!("log: sector size {ss}"));
    }
    let mut entries = Vec::new();
    let mut at = ss;
    for i in 0..count {
        let head = at
            .checked_add(32)
            .filter(|&e| e <= log.len() as u64)
            .ok_or_else(|| format!("log: entry {i} of {count} past the end"))?;
        let h = &log[at as usize..head as usize];
        let (sector, sectors, flags) = (le64(h, 0), le64(h, 8), le64(h, 16));
        if flags & !KNOWN_FLAGS != 0 {
            return Err(format!("log: entry {i}: unknown flags {flags:#x}"));
        }
        let data_at = at + ss;
        // A discard's data is not logged.
        let data = if flags & FLAG_DISCARD != 0 {
            0
        } else {
            sectors
                .checked_mul(ss)
                .ok_or_else(|| format!("log: entry {i}: {sectors} sectors"))?
        };
        let end = data_at
            .checked_add(data)
            .filter(|&e| e <= log.len() as u64)
            .ok_or_else(|| format!("log: entry {i}: its {data} bytes of data run past the end"))?;
        entries.push(Entry {
            sector,
            sectors,
            flags,
            data_at: data_at as usize,
        });
        at = end;
    }
    Ok(Log {
        sector_size: ss,
        entries,
    })
}

impl Log {
    /// Applies entries `from..to` to `image` (a discard leaves zeroes: what it reads as).
    pub fn apply(
        &self,
        raw: &[u8],
        image: &mut [u8],
        range: std::ops::Range<usize>,
    ) -> Result<(), String> {
        for (i, e) in self.entries[range.clone()].iter().enumerate() {
            if !e.changes() {
                continue;
            }
            let (at, len) = (e.sector * self.sector_size, e.sectors * self.sector_size);
            let dst = image
                .get_mut(at as usize..(at + len) as usize)
                .ok_or_else(|| {
                    format!(
                        "log entry {}: {len} bytes at {at} lie outside the disk",
                        range.start + i
                    )
                })?;
            if e.flags & FLAG_DISCARD != 0 {
                dst.fill(0);
            } else {
                dst.copy_from_slice(&raw[e.data_at..e.data_at + len as usize]);
            }
        }
        Ok(())
    }

    /// Indices of the flush entries, in order.
    pub fn flushes(&self) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| self.entries[i].is_flush())
            .collect()
    }

    /// For each of `count` fsyncs, the flush (its number among the flushes) that acknowledged
    /// it: the first flush after the first write of its mark (the rule in the module header).
    pub fn ack_flushes(&self, raw: &[u8], count: usize) -> Result<Vec<usize>, String> {
        let ss = self.sector_size as usize;
        let mut first_write: Vec<Option<usize>> = vec![None; count];
        for (i, e) in self.entries.iter().enumerate() {
            if e.flags & FLAG_DISCARD != 0 {
                continue;
            }
            for s in 0..e.sectors as usize {
                let sector = &raw[e.data_at + s * ss..e.data_at + (s + 1) * ss];
                let Some(rest) = sector.strip_prefix(FSYNC_MARK) else {
                    continue;
                };
                let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                let n = std::str::from_utf8(&rest[..digits])
                    .ok()
                    .and_then(|d| d.parse::<usize>().ok());
                if let Some(slot) = n.and_then(|n| first_write.get_mut(n)) {
                    slot.get_or_insert(i);
                }
            }
        }
        let flushes = self.flushes();
        let mut acks = Vec::with_capacity(count);
        for (n, w) in first_write.iter().enumerate() {
            let w = w.ok_or_else(|| format!("fsync {n}: its mark never reached the disk"))?;
            let f = flushes
                .iter()
                .position(|&f| f > w)
                .ok_or_else(|| format!("fsync {n}: no flush after its mark reached the disk"))?;
            if let Some(&prev) = acks.last() {
                if f <= prev {
                    return Err(format!(
                        "fsyncs {} and {n} both before flush {prev}: fsync {} returned before its \
                         flush",
                        n - 1,
                        n - 1
                    ));
                }
            }
            acks.push(f);
        }
        Ok(acks)
    }
}

/// A state the workload vouches for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Content { len: u64, hash: u64 },
    Absent,
}

/// One `durable` or `absent` line: after fsync `fsync` returned, `path` is in `state`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub fsync: usize,
    pub path: String,
    pub state: State,
}

/// The workload's record.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// Number of fsync calls that returned (`crash: done N`; checked against the `fsync` lines).
    pub fsyncs: usize,
    pub lines: Vec<Line>,
}

/// Parses the workload's output (other lines are ignored; an `error` line or a missing `done`
/// is an error).
pub fn parse_record(text: &str) -> Result<Record, String> {
    let mut r = Record::default();
    let mut seen = 0usize;
    let mut done = None;
    for raw in text.lines() {
        let Some(l) = raw.trim_end().strip_prefix(RECORD_PREFIX) else {
            continue;
        };
        let w: Vec<&str> = l.split_whitespace().collect();
        let num = |s: &str| -> Result<usize, String> {
            s.parse()
                .map_err(|_| format!("record: `{raw}`: bad number"))
        };
        match w.as_slice() {
            ["fsync", n, _path] => {
                if num(n)? != seen {
                    return Err(format!("record: `{raw}`: fsync {seen} expected"));
                }
                seen += 1;
            }
            ["durable", n, path, len, hash] => {
                let state = State::Content {
                    len: len
                        .parse()
                        .map_err(|_| format!("record: `{raw}`: bad length"))?,
                    hash: u64::from_str_radix(hash, 16)
                        .map_err(|_| format!("record: `{raw}`: bad hash"))?,
                };
                r.lines.push(Line {
                    fsync: num(n)?,
                    path: path.to_string(),
                    state,
                });
            }
            ["absent", n, path] => r.lines.push(Line {
                fsync: num(n)?,
                path: path.to_string(),
                state: State::Absent,
            }),
            ["done", n] => done = Some(num(n)?),
            ["error", ..] => return Err(format!("the workload failed: `{raw}`")),
            _ => return Err(format!("record: `{raw}`: not understood")),
        }
    }
    let n = done.ok_or("record: no `crash: done` line (the workload did not finish)")?;
    if n != seen {
        return Err(format!("record: done {n}, but {seen} fsync lines"));
    }
    if let Some(l) = r.lines.iter().find(|l| l.fsync >= n) {
        return Err(format!("record: {} names fsync {} of {n}", l.path, l.fsync));
    }
    r.fsyncs = n;
    Ok(r)
}

/// Where a crash point lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Right after a flush returned.
    AtFlush,
    /// Some of the writes after the last flush (or before the first) are on the disk.
    Between,
}

/// A crash point: the first `entries` log entries applied, `flushes` of them flushes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    pub entries: usize,
    pub flushes: usize,
    pub kind: Kind,
}

/// Every flush, and between each pair of flushes (and after the last) up to `samples` points
/// spread over the writes, or after every write if the batch has no more (a point after all of
/// a batch's writes is the next flush's state, and one before any is the last flush's, so
/// neither is repeated).
pub fn crash_points(log: &Log, samples: usize) -> Vec<Point> {
    let mut pts = Vec::new();
    let mut done = 0usize;
    let mut batch: Vec<usize> = Vec::new(); // entry indices of writes since the last flush
    let between = |batch: &[usize], done: usize, last: bool, pts: &mut Vec<Point>| {
        // After j of the batch's w writes, j in 1..w (and w itself after the last flush).
        let w = batch.len();
        let top = if last { w } else { w.saturating_sub(1) };
        let mut js: Vec<usize> = if samples >= w {
            (1..=top).collect()
        } else {
            (1..=samples)
                .map(|s| (s * w).div_ceil(samples + 1))
                .filter(|&j| j >= 1 && j <= top)
                .collect()
        };
        if last && top >= 1 && !js.contains(&top) {
            js.push(top);
        }
        js.dedup();
        for j in js {
            pts.push(Point {
                entries: batch[j - 1] + 1,
                flushes: done,
                kind: Kind::Between,
            });
        }
    };
    for (i, e) in log.entries.iter().enumerate() {
        if e.changes() {
            batch.push(i);
        }
        if e.is_flush() {
            between(&batch, done, false, &mut pts);
            batch.clear();
            done += 1;
            pts.push(Point {
                entries: i + 1,
                flushes: done,
                kind: Kind::AtFlush,
            });
        }
    }
    between(&batch, done, true, &mut pts);
    pts
}

/// What one path must look like at a crash point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expect {
    pub path: String,
    /// The latest acknowledged state.
    pub state: State,
    /// The next state if a change is in flight (not yet acknowledged): the path may be in it.
    pub next: Option<State>,
}

/// The expectations at a crash point after `flushes` flushes, fsync `N` acknowledged by flush
/// number `acks[N]` (0-based): the rule in the module header. Paths with nothing acknowledged
/// yet are not checked.
pub fn expectations(record: &Record, acks: &[usize], flushes: usize) -> Vec<Expect> {
    let acked = |n: usize| acks[n] < flushes;
    let mut by_path: BTreeMap<&str, Vec<&Line>> = BTreeMap::new();
    for l in &record.lines {
        by_path.entry(l.path.as_str()).or_default().push(l);
    }
    let mut out = Vec::new();
    for (path, lines) in by_path {
        // Lines of one path are in fsync order (the workload prints them as it goes).
        let Some(last) = lines.iter().rposition(|l| acked(l.fsync)) else {
            continue;
        };
        out.push(Expect {
            path: path.to_string(),
            state: lines[last].state.clone(),
            next: lines.get(last + 1).map(|l| l.state.clone()),
        });
    }
    out
}

/// Whether a file's observed contents (`None`: absent) satisfy `e`.
pub fn satisfies(e: &Expect, found: Option<&[u8]>) -> bool {
    let exact = e.next.is_none();
    let fits = |s: &State| match (s, found) {
        (State::Absent, None) => true,
        (State::Content { len, hash }, Some(b)) => {
            let len = *len as usize;
            (b.len() == len || (!exact && b.len() > len))
                && crate::scenario::disk::fnv64(&b[..len]) == *hash
        }
        _ => false,
    };
    fits(&e.state) || e.next.as_ref().is_some_and(fits)
}

/// What a run found, over all its crash points.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Figures {
    pub at_flush: usize,
    pub between: usize,
    /// Points where `e2fsck -fy` changed something (exit 1), and how many of them were at a
    /// flush (where a PFS that orders its writes leaves nothing to repair).
    pub repaired: usize,
    pub repaired_at_flush: usize,
    /// Points where an acknowledged state was not there after the repair.
    pub lost: usize,
    /// Points `e2fsck -fy` could not repair (exit > 1) or that `-fn` found dirty afterwards.
    pub unrepairable: usize,
}

impl Figures {
    /// The one summary line.
    pub fn summary(&self) -> String {
        format!(
            "crash: {} points checked ({} at flushes, {} between), {} needed repair ({} at a \
             flush), {} lost, {} unrepairable",
            self.at_flush + self.between,
            self.at_flush,
            self.between,
            self.repaired,
            self.repaired_at_flush,
            self.lost,
            self.unrepairable
        )
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            State::Content { len, hash } => write!(f, "{len} bytes, hash {hash:016x}"),
            State::Absent => f.write_str("no such file"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::disk::fnv64;

    const SS: usize = 512;

    /// A crafted log: the super, then (sector, data sectors, flags) entries.
    fn log_of(entries: &[(u64, Vec<u8>, u64)]) -> Vec<u8> {
        let mut b = vec![0u8; SS];
        b[0..8].copy_from_slice(&LOG_MAGIC.to_le_bytes());
        b[8..16].copy_from_slice(&LOG_VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&(entries.len() as u64).to_le_bytes());
        b[24..28].copy_from_slice(&(SS as u32).to_le_bytes());
        for (sector, data, flags) in entries {
            let mut h = vec![0u8; SS];
            h[0..8].copy_from_slice(&sector.to_le_bytes());
            h[8..16].copy_from_slice(&((data.len() / SS) as u64).to_le_bytes());
            h[16..24].copy_from_slice(&flags.to_le_bytes());
            b.extend(h);
            b.extend(data);
        }
        b
    }

    fn sectors(n: usize, byte: u8) -> Vec<u8> {
        vec![byte; n * SS]
    }

    #[test]
    fn parses_and_replays_writes_flushes_and_discards() {
        let raw = log_of(&[
            (2, sectors(1, 0xaa), 0),
            (0, Vec::new(), FLAG_FLUSH),
            (4, sectors(2, 0xbb), FLAG_FUA),
            (2, Vec::new(), FLAG_DISCARD),
            (0, Vec::new(), FLAG_FLUSH),
        ]);
        // A discard's header says how many sectors, but it carries no data.
        let mut raw2 = raw.clone();
        let disc = SS + 2 * SS + SS + 3 * SS;
        raw2[disc + 8..disc + 16].copy_from_slice(&1u64.to_le_bytes());
        let log = parse_log(&raw2).unwrap();
        assert_eq!(log.entries.len(), 5);
        assert_eq!(log.flushes(), vec![1, 4]);
        assert_eq!(log.entries[2].data_at, SS * 5);
        let mut img = vec![0x11u8; 8 * SS];
        log.apply(&raw2, &mut img, 0..3).unwrap();
        assert!(img[2 * SS..3 * SS].iter().all(|&b| b == 0xaa));
        assert!(img[4 * SS..6 * SS].iter().all(|&b| b == 0xbb));
        assert!(img[..2 * SS].iter().all(|&b| b == 0x11));
        log.apply(&raw2, &mut img, 3..5).unwrap();
        assert!(img[2 * SS..3 * SS].iter().all(|&b| b == 0));
    }

    #[test]
    fn refuses_bad_logs() {
        let raw = log_of(&[(0, sectors(2, 1), 0)]);
        assert!(parse_log(&raw[..raw.len() - 1])
            .unwrap_err()
            .contains("past the end"));
        let mut bad = raw.clone();
        bad[0] ^= 1;
        assert!(parse_log(&bad).unwrap_err().contains("magic"));
        let mut flags = raw.clone();
        flags[SS + 16] = 0x40;
        assert!(parse_log(&flags).unwrap_err().contains("flags"));
        let log = parse_log(&raw).unwrap();
        let mut small = vec![0u8; SS];
        assert!(log.apply(&raw, &mut small, 0..1).is_err());
        assert!(parse_log(&[0u8; 10]).is_err());
    }

    fn mark(n: usize, blocks: usize, at: usize) -> Vec<u8> {
        let mut d = sectors(blocks, 0);
        let m = format!("SAWMILL-CRASH-FSYNC {n}\n");
        d[at * SS..at * SS + m.len()].copy_from_slice(m.as_bytes());
        d
    }

    #[test]
    fn finds_the_flush_of_each_fsync_by_its_mark() {
        let raw = log_of(&[
            (0, Vec::new(), FLAG_FLUSH), // boot
            (9, sectors(1, 3), 0),
            (7, mark(0, 2, 1), 0),
            (1, sectors(1, 3), 0),
            (0, Vec::new(), FLAG_FLUSH), // fsync 0
            (7, mark(1, 1, 0), 0),
            (0, Vec::new(), FLAG_FLUSH), // fsync 1
            (7, mark(12, 1, 0), 0),      // not one of ours: ignored
            (7, mark(1, 1, 0), 0),       // a mark written again: the first counts
            (7, mark(2, 1, 0), 0),
            (0, Vec::new(), FLAG_FLUSH), // fsync 2
        ]);
        let log = parse_log(&raw).unwrap();
        assert_eq!(log.ack_flushes(&raw, 3), Ok(vec![1, 2, 3]));
        assert!(log.ack_flushes(&raw, 4).unwrap_err().contains("fsync 3"));
        // fsync 0 returned before its flush: marks 0 and 1 precede the same flush.
        let early = log_of(&[
            (7, mark(0, 1, 0), 0),
            (7, mark(1, 1, 0), 0),
            (0, Vec::new(), FLAG_FLUSH),
        ]);
        let log = parse_log(&early).unwrap();
        let err = log.ack_flushes(&early, 2).unwrap_err();
        assert!(err.contains("fsync 0 returned before its flush"), "{err}");
        // A mark after the last flush was never acknowledged.
        let late = log_of(&[(0, Vec::new(), FLAG_FLUSH), (7, mark(0, 1, 0), 0)]);
        let log = parse_log(&late).unwrap();
        assert!(log.ack_flushes(&late, 1).is_err());
    }

    #[test]
    fn points_at_every_flush_and_between() {
        // w0 w1 w2 F w3 F F w4 w5
        let raw = log_of(&[
            (0, sectors(1, 1), 0),
            (1, sectors(1, 1), 0),
            (2, sectors(1, 1), 0),
            (0, Vec::new(), FLAG_FLUSH),
            (3, sectors(1, 1), 0),
            (0, Vec::new(), FLAG_FLUSH),
            (0, Vec::new(), FLAG_FLUSH),
            (4, sectors(1, 1), 0),
            (5, sectors(1, 1), 0),
        ]);
        let log = parse_log(&raw).unwrap();
        let p = crash_points(&log, 2);
        let b = |entries, flushes| Point {
            entries,
            flushes,
            kind: Kind::Between,
        };
        let f = |entries, flushes| Point {
            entries,
            flushes,
            kind: Kind::AtFlush,
        };
        assert_eq!(
            p,
            vec![
                b(1, 0),
                b(2, 0),
                f(4, 1),
                f(6, 2),
                f(7, 3),
                b(8, 3),
                b(9, 3)
            ]
        );
        // With room for every write, every write; one sample per batch: its middle.
        assert_eq!(crash_points(&log, usize::MAX), p);
        assert_eq!(
            crash_points(&log, 1),
            vec![b(2, 0), f(4, 1), f(6, 2), f(7, 3), b(8, 3), b(9, 3)]
        );
    }

    fn content(b: &[u8]) -> State {
        State::Content {
            len: b.len() as u64,
            hash: fnv64(b),
        }
    }

    #[test]
    fn parses_the_record() {
        let text =
            "boot noise\r\ncrash: fsync 0 /d/x\r\ncrash: durable 0 /d/x 3 00000000000000ff\n\
                    crash: fsync 1 /d\ncrash: absent 1 /d/y\ncrash: done 2\n";
        let r = parse_record(text).unwrap();
        assert_eq!(r.fsyncs, 2);
        assert_eq!(
            r.lines,
            vec![
                Line {
                    fsync: 0,
                    path: "/d/x".into(),
                    state: State::Content { len: 3, hash: 255 }
                },
                Line {
                    fsync: 1,
                    path: "/d/y".into(),
                    state: State::Absent
                }
            ]
        );
        assert!(parse_record("crash: fsync 0 /x\n").is_err());
        assert!(parse_record("crash: fsync 1 /x\ncrash: done 1\n").is_err());
        assert!(parse_record("crash: error open /x: EIO\ncrash: done 0\n").is_err());
        assert!(parse_record("crash: absent 3 /x\ncrash: done 0\n").is_err());
    }

    #[test]
    fn the_fsync_to_flush_rule() {
        let (v1, v2) = (b"hello".to_vec(), b"hello, world".to_vec());
        let r = Record {
            fsyncs: 4,
            lines: vec![
                Line {
                    fsync: 0,
                    path: "/a".into(),
                    state: content(&v1),
                },
                Line {
                    fsync: 2,
                    path: "/a".into(),
                    state: content(&v2),
                },
                Line {
                    fsync: 3,
                    path: "/b".into(),
                    state: State::Absent,
                },
            ],
        };
        // fsync N acknowledged by flush acks[N]: nothing is due before flush 5 returned.
        let acks = [5, 6, 7, 9];
        assert!(expectations(&r, &acks, 5).is_empty());
        let e = expectations(&r, &acks, 6);
        assert_eq!(
            e,
            vec![Expect {
                path: "/a".into(),
                state: content(&v1),
                next: Some(content(&v2))
            }]
        );
        // In flight: the old bytes, the old bytes grown, or the new; never less than the old.
        assert!(satisfies(&e[0], Some(&v1)));
        assert!(satisfies(&e[0], Some(b"hello\0\0\0")));
        assert!(satisfies(&e[0], Some(&v2)));
        assert!(!satisfies(&e[0], Some(b"hell")));
        assert!(!satisfies(&e[0], Some(b"jello")));
        assert!(!satisfies(&e[0], None));
        // After fsync 2's flush nothing is in flight for /a: exactly the new bytes.
        let e = expectations(&r, &acks, 8);
        assert_eq!(e[0].next, None);
        assert!(satisfies(&e[0], Some(&v2)));
        assert!(!satisfies(&e[0], Some(b"hello, world!")));
        assert!(!satisfies(&e[0], Some(&v1)));
        let e = expectations(&r, &acks, 10);
        assert_eq!(e[1].state, State::Absent);
        assert!(satisfies(&e[1], None));
        assert!(!satisfies(&e[1], Some(b"")));
    }

    #[test]
    fn summary_line() {
        let f = Figures {
            at_flush: 40,
            between: 90,
            repaired: 12,
            repaired_at_flush: 1,
            lost: 0,
            unrepairable: 0,
        };
        assert_eq!(
            f.summary(),
            "crash: 130 points checked (40 at flushes, 90 between), 12 needed repair (1 at a \
             flush), 0 lost, 0 unrepairable"
        );
        assert_eq!(State::Absent.to_string(), "no such file");
        assert_eq!(
            State::Content { len: 3, hash: 255 }.to_string(),
            "3 bytes, hash 00000000000000ff"
        );
    }
}
