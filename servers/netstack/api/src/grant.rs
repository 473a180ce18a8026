//! The badges of the capabilities the stack grants clients through the network manager
//! (`socket.grant`, servers/netmgr): a client's id (its manifest badge, whose share of sockets it
//! counts against) and its rights, so the stack reads a caller's rights from the badge of the call
//! alone. Plain arithmetic, host-tested; the stack (`servers/netstack`) is its one user.

/// Set in every granted badge; manifest badges are small numbers and never have it, socket and
/// channel badges use bits 39 and up.
pub const GRANT_BIT: u64 = 1 << 38;
const RIGHTS_SHIFT: u32 = 32;
/// The rights bits a badge can carry (`interfaces/socket.idl`'s `RIGHT_*` are within it).
pub const RIGHTS_MASK: u32 = 0x3f;
/// `socket.idl`'s `RIGHT_PRIVILEGED_PORTS` (this crate builds on the host without the
/// interfaces crate; the stack and netmgr check they agree at compile time): may bind ports
/// below 1024.
pub const RIGHT_PRIVILEGED_PORTS: u32 = 1;
/// `socket.idl`'s `RIGHT_RAW`: may open raw sockets (no stack has them yet).
pub const RIGHT_RAW: u32 = 2;
/// The first port anyone may bind.
pub const FIRST_UNPRIVILEGED_PORT: u16 = 1024;

/// The badge of a capability granted to `client` with `rights` (unknown bits dropped).
pub fn granted(client: u32, rights: u32) -> u64 {
    GRANT_BIT | u64::from(rights & RIGHTS_MASK) << RIGHTS_SHIFT | u64::from(client)
}

/// The rights a call with `badge` carries: a granted badge's own; a manifest badge has
/// [`RIGHT_PRIVILEGED_PORTS`] if the configuration lists it as `privileged`.
pub fn rights(badge: u64, privileged: &[u64]) -> u32 {
    if badge & GRANT_BIT != 0 {
        (badge >> RIGHTS_SHIFT) as u32 & RIGHTS_MASK
    } else if privileged.contains(&badge) {
        RIGHT_PRIVILEGED_PORTS
    } else {
        0
    }
}

/// The client whose share of sockets a call with `badge` counts against: a granted badge
/// counts against the client it was granted to (so every capability granted to one client, with
/// whatever rights, shares one share, with the client's own manifest capability too).
pub fn account(badge: u64) -> u64 {
    if badge & GRANT_BIT != 0 {
        badge & u64::from(u32::MAX)
    } else {
        badge
    }
}

/// May a caller with `rights` bind `port` (0 asks for any free port)?
pub fn may_bind(rights: u32, port: u16) -> bool {
    port == 0 || port >= FIRST_UNPRIVILEGED_PORT || rights & RIGHT_PRIVILEGED_PORTS != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_badges_carry_rights_and_client() {
        let b = granted(7, RIGHT_PRIVILEGED_PORTS);
        assert_eq!(rights(b, &[]), RIGHT_PRIVILEGED_PORTS);
        assert_eq!(account(b), 7);
        let u = granted(7, 0);
        assert_eq!(
            rights(u, &[7]),
            0,
            "a grant's rights are its own, not its client's"
        );
        assert_eq!(account(u), 7);
        // Unknown rights bits never reach the client id or the marker.
        let x = granted(u32::MAX, u32::MAX);
        assert_eq!(rights(x, &[]), RIGHTS_MASK);
        assert_eq!(account(x), u64::from(u32::MAX));
        assert!(x & (1 << 39) == 0, "socket badge bits stay free");
    }

    #[test]
    fn manifest_badges_follow_the_configuration() {
        assert_eq!(rights(3, &[3]), RIGHT_PRIVILEGED_PORTS);
        assert_eq!(rights(4, &[3]), 0);
        assert_eq!(account(4), 4);
    }

    #[test]
    fn privileged_ports() {
        for (r, port, ok) in [
            (0, 80, false),
            (0, 1023, false),
            (0, 1024, true),
            (0, 0, true),
            (0, 65535, true),
            (RIGHT_PRIVILEGED_PORTS, 80, true),
            (RIGHT_PRIVILEGED_PORTS, 1, true),
        ] {
            assert_eq!(may_bind(r, port), ok, "rights {r} port {port}");
        }
    }
}
