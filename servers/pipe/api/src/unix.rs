//! What local (AF_UNIX) sockets add to pipes, agreed by the pipe server and the Linux
//! personality: names, and the framing of datagrams in a ring. Plain logic; host-tested.
//!
//! A connected stream socket is two pipes, one per direction, and moves bytes exactly as a pipe
//! does. A datagram (or `SOCK_SEQPACKET`) socket frames every message in the ring as
//! [`HEADER`] bytes — the payload's length (u32) and the sender's name's length (u16), then the
//! name and the payload — written in one piece under the ring's write lock, so messages of
//! several senders never interleave. A reader bounds every length it finds against what the
//! ring holds (a peer may write garbage): a frame that does not fit is `Corrupt`.

/// The longest name (a `sun_path` is 108 bytes; the path a personality resolved it to may be
/// longer: it fits the interface's `bytes<120>`).
pub const MAX_NAME: usize = 120;
/// A frame's header: payload length (u32), name length (u16), two bytes of padding.
pub const HEADER: usize = 8;
/// The largest datagram payload (the ring must hold the whole frame).
pub const MAX_DATAGRAM: usize = crate::CAPACITY - HEADER - MAX_NAME;

/// Whether `name` is one the server takes: a path (starting with `/`) or an abstract name
/// (starting with 0), not longer than [`MAX_NAME`].
pub fn valid_name(name: &[u8]) -> bool {
    matches!(name.first(), Some(b'/') | Some(0)) && name.len() >= 2 && name.len() <= MAX_NAME
}

/// A frame's header for a payload of `len` bytes from a sender named `name_len` bytes.
pub fn header(len: usize, name_len: usize) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&(len as u32).to_le_bytes());
    h[4..6].copy_from_slice(&(name_len as u16).to_le_bytes());
    h
}

/// The payload and name lengths of a header, if they can be a frame within `held` bytes.
pub fn parse_header(h: &[u8; HEADER], held: usize) -> Option<(usize, usize)> {
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    let name = u16::from_le_bytes([h[4], h[5]]) as usize;
    (name <= MAX_NAME && len <= MAX_DATAGRAM && HEADER + name + len <= held).then_some((len, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name(b"/tmp/s"));
        assert!(valid_name(b"\0abs"));
        assert!(!valid_name(b""));
        assert!(!valid_name(b"/"));
        assert!(!valid_name(b"rel"));
        assert!(!valid_name(&[b'/'; MAX_NAME + 1]));
    }

    #[test]
    fn frames_are_bounded() {
        let h = header(10, 5);
        assert_eq!(parse_header(&h, HEADER + 15), Some((10, 5)));
        assert_eq!(parse_header(&h, HEADER + 14), None);
        let bad = header(usize::MAX >> 40, 0);
        assert_eq!(parse_header(&bad, crate::CAPACITY), None);
    }
}
