//! The badges of the capabilities the stack grants clients through the network manager
//! (`socket.grant`, servers/netmgr): a client's id (its manifest badge, whose share of sockets it
//! counts against) and its rights, so the stack reads a caller's rights from the badge of the call
//! alone. A client may mint a sub-account of its own (`socket.grant_sub`: proc makes one per
//! Linux process): the sub-account's id sits in the badge's top bits, its rights are the
//! minting capability's, and its sockets count against both its own bound and its client's
//! ([`Shares`]). Plain arithmetic, host-tested; the stack (`servers/netstack`) is its one user.

use alloc::collections::BTreeMap;

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
/// A sub-account's id sits in bits 42 and up (bits 39-41 name sockets, channels and the
/// stack's notice): 22 bits, room for every Linux pid (below 4 Mi).
const SUB_SHIFT: u32 = 42;
/// The largest sub-account id (0 is no sub-account).
pub const SUB_MAX: u32 = (1 << (64 - SUB_SHIFT)) - 1;
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

/// The sub-account a call with `badge` counts against besides its client, if it has one.
pub fn sub_account(badge: u64) -> Option<u64> {
    (badge & GRANT_BIT != 0 && badge >> SUB_SHIFT != 0)
        .then_some(badge & !(GRANT_BIT | u64::from(RIGHTS_MASK) << RIGHTS_SHIFT))
}

/// Why a sub-account was not minted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubRefusal {
    /// The minting capability is itself a sub-account's (a process may not escape its bound
    /// by minting another), or its manifest badge does not fit a client id.
    Denied,
    /// `sub` is 0 or above [`SUB_MAX`].
    Invalid,
}

/// The badge of sub-account `sub` of the client a call with `badge` counts against, with that
/// call's rights and never more (`privileged` as for [`rights`]).
pub fn granted_sub(badge: u64, sub: u32, privileged: &[u64]) -> Result<u64, SubRefusal> {
    if sub == 0 || sub > SUB_MAX {
        return Err(SubRefusal::Invalid);
    }
    if sub_account(badge).is_some() {
        return Err(SubRefusal::Denied);
    }
    let client = u32::try_from(account(badge)).map_err(|_| SubRefusal::Denied)?;
    Ok(granted(client, rights(badge, privileged)) | u64::from(sub) << SUB_SHIFT)
}

/// Whose bound a socket more would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The sub-account's (`process_sockets`).
    Sub,
    /// The client's (`client_sockets`).
    Client,
}

/// Sockets held per client and per sub-account, against their bounds (`client_sockets`,
/// `process_sockets`).
#[derive(Debug, Default)]
pub struct Shares {
    held: BTreeMap<u64, usize>,
    sub_held: BTreeMap<u64, usize>,
}

impl Shares {
    /// May the owner `badge` hold `n` more sockets: its sub-account (if any) up to `sub_max`,
    /// its client up to `client_max`? The sub-account is looked at first, as Linux's
    /// per-process limit comes before the system's.
    pub fn room(
        &self,
        badge: u64,
        n: usize,
        client_max: usize,
        sub_max: usize,
    ) -> Result<(), Full> {
        let held = |m: &BTreeMap<u64, usize>, k| m.get(&k).copied().unwrap_or(0);
        if sub_account(badge).is_some_and(|s| held(&self.sub_held, s) + n > sub_max) {
            return Err(Full::Sub);
        }
        if held(&self.held, account(badge)) + n > client_max {
            return Err(Full::Client);
        }
        Ok(())
    }

    /// The owner `badge` holds `n` sockets more (or fewer); an account that holds none is
    /// forgotten.
    pub fn charge(&mut self, badge: u64, n: isize) {
        fn add(m: &mut BTreeMap<u64, usize>, k: u64, n: isize) {
            let c = m.entry(k).or_default();
            *c = c.saturating_add_signed(n);
            if *c == 0 {
                m.remove(&k);
            }
        }
        add(&mut self.held, account(badge), n);
        if let Some(s) = sub_account(badge) {
            add(&mut self.sub_held, s, n);
        }
    }

    /// Sockets the client of `badge` holds.
    pub fn held(&self, badge: u64) -> usize {
        self.held.get(&account(badge)).copied().unwrap_or(0)
    }
}

/// May a caller with `rights` bind `port` (0 asks for any free port)?
pub fn may_bind(rights: u32, port: u16) -> bool {
    port == 0 || port >= FIRST_UNPRIVILEGED_PORT || rights & RIGHT_PRIVILEGED_PORTS != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stack's socket, channel and notice badge bits (servers/netstack `SOCK_BIT`...).
    const SOCK_BITS: u64 = 7 << 39;

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
    fn sub_accounts_keep_their_clients_rights_and_no_more() {
        let user = granted(7, 0);
        let root = granted(7, RIGHT_PRIVILEGED_PORTS);
        let a = granted_sub(user, 42, &[]).unwrap();
        assert_eq!(rights(a, &[]), 0);
        assert_eq!(account(a), 7);
        assert!(a & (SOCK_BITS) == 0, "socket badge bits stay free");
        let b = granted_sub(root, 42, &[]).unwrap();
        assert_eq!(rights(b, &[]), RIGHT_PRIVILEGED_PORTS);
        assert_eq!(sub_account(a), sub_account(b), "one process, one share");
        assert_ne!(
            sub_account(a),
            sub_account(granted_sub(user, 43, &[]).unwrap())
        );
        // From a manifest badge: the configuration's rights.
        let m = granted_sub(3, 5, &[3]).unwrap();
        assert_eq!(rights(m, &[]), RIGHT_PRIVILEGED_PORTS);
        assert_eq!(account(m), 3);
        assert_eq!(rights(granted_sub(4, 5, &[3]).unwrap(), &[]), 0);
        assert_eq!(granted_sub(a, 9, &[]), Err(SubRefusal::Denied));
        assert_eq!(granted_sub(user, 0, &[]), Err(SubRefusal::Invalid));
        assert_eq!(
            granted_sub(user, SUB_MAX + 1, &[]),
            Err(SubRefusal::Invalid)
        );
        let top = granted_sub(granted(u32::MAX, RIGHTS_MASK), SUB_MAX, &[]).unwrap();
        assert_eq!(account(top), u64::from(u32::MAX));
        assert_eq!(rights(top, &[]), RIGHTS_MASK);
        assert_eq!(
            sub_account(top),
            Some(u64::from(u32::MAX) | u64::from(SUB_MAX) << SUB_SHIFT)
        );
        assert_eq!(granted_sub(1 << 32, 1, &[]), Err(SubRefusal::Denied));
        assert_eq!(sub_account(user), None);
        assert_eq!(sub_account(3), None);
    }

    #[test]
    fn shares_bound_both_the_process_and_its_client() {
        let mut s = Shares::default();
        let p1 = granted_sub(granted(7, 0), 1, &[]).unwrap();
        let p1_root = granted_sub(granted(7, 1), 1, &[]).unwrap();
        let p2 = granted_sub(granted(7, 0), 2, &[]).unwrap();
        let other = granted(8, 0);
        // Process 1 fills its share of 3 (with either capability); process 2 still has room.
        for b in [p1, p1_root, p1] {
            assert_eq!(Ok(()), s.room(b, 1, 5, 3));
            s.charge(b, 1);
        }
        assert_eq!(s.room(p1, 1, 5, 3), Err(Full::Sub));
        assert_eq!(s.room(p1_root, 1, 5, 3), Err(Full::Sub));
        assert_eq!(Ok(()), s.room(p2, 2, 5, 3));
        assert_eq!(s.room(p2, 4, 5, 3), Err(Full::Sub));
        assert_eq!(
            s.room(p2, 3, 5, 4),
            Err(Full::Client),
            "the client's bound holds too"
        );
        s.charge(p2, 2);
        assert_eq!(s.room(p2, 1, 5, 3), Err(Full::Client));
        assert_eq!(
            s.room(granted(7, 0), 1, 5, 3),
            Err(Full::Client),
            "the client itself is full"
        );
        assert_eq!(
            Ok(()),
            s.room(other, 5, 5, 3),
            "another client is untouched"
        );
        assert_eq!(s.held(p1), 5);
        // Closing gives room back to both.
        s.charge(p1_root, -1);
        assert_eq!(Ok(()), s.room(p1, 1, 5, 3));
        assert_eq!(s.room(p1, 2, 5, 3), Err(Full::Sub));
        s.charge(p1, -2);
        s.charge(p2, -2);
        assert_eq!(s.held(p1), 0);
        assert!(s.held.is_empty() && s.sub_held.is_empty());
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
