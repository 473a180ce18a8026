//! net-rights: a native client of the network manager (servers/netmgr) checking its access rule
//! end to end (scenario `netmgr`). With argument `privileged` (a client netmgr's rules give the
//! privileged-ports right): a stack capability with that right binds port 80. Otherwise (a
//! client without a rule): asking for the right is refused by netmgr, and the plain capability
//! it does get binds port 8080 but not port 80 (`Denied` from the stack). Either way the granted
//! capability cannot itself grant (only netmgr's may). A sub-account it mints (`grant_sub`, as
//! proc does per Linux process) keeps exactly its rights, cannot mint another, and is refused
//! its socket past the scenario's `process_sockets` (4) with `ProcessFull` while a second
//! sub-account of the same client still gets sockets.
#![no_std]
#![no_main]

use sawmill_interfaces::rpc::Error;
use sawmill_interfaces::{netmgr, sock, socket, NetmgrError, SockError, SockKind};
use sawmill_interfaces::{RIGHT_PRIVILEGED_PORTS, RIGHT_RAW};
use sawmill_rt::{env, println, thread};

sawmill_rt::entry!(main);

fn main() {
    let privileged = env::arg(0) == Some("privileged");
    let who = if privileged { "privileged" } else { "plain" };
    match run(privileged) {
        Ok(()) => println!("net-rights: PASS {} client", who),
        Err(e) => println!("net-rights: FAIL {} client: {}", who, e),
    }
}

fn run(privileged: bool) -> Result<(), &'static str> {
    let mgr = netmgr::Client::new(env::cap(netmgr::NAME).ok_or("no `netmgr` capability")?);
    let info = mgr.info().map_err(|_| "info")?;
    let expect = if privileged {
        RIGHT_PRIVILEGED_PORTS
    } else {
        0
    };
    if info.stacks != 1 || info.rights != expect {
        return Err("info: wrong stack count or rights");
    }
    if !matches!(
        mgr.open(1, 0, thread::alloc_slot()),
        Err(Error::App(NetmgrError::NoStack))
    ) {
        return Err("a stack that does not exist was opened");
    }
    if !matches!(
        mgr.open(0, RIGHT_RAW, thread::alloc_slot()),
        Err(Error::App(NetmgrError::Denied))
    ) {
        return Err("raw sockets were granted without a rule");
    }
    let asked = mgr.open(0, RIGHT_PRIVILEGED_PORTS, thread::alloc_slot());
    let stack = match (privileged, asked) {
        (true, Ok(c)) => c,
        (false, Err(Error::App(NetmgrError::Denied))) => mgr
            .open(0, 0, thread::alloc_slot())
            .map_err(|_| "a plain stack capability was refused")?,
        (true, Err(_)) => return Err("the privileged-ports right was refused"),
        (false, _) => return Err("the privileged-ports right was granted without a rule"),
    };
    let sk = socket::Client::new(stack);
    if !matches!(
        sk.grant(0, RIGHT_PRIVILEGED_PORTS, thread::alloc_slot()),
        Err(Error::App(SockError::Denied))
    ) {
        return Err("a granted capability could grant");
    }
    let tcp = |sk: &socket::Client, port| {
        let s = sock::Client::new(
            sk.create(SockKind::Tcp, thread::alloc_slot())
                .map_err(|_| "create")?,
        );
        Ok::<_, &'static str>(s.bind(0, port))
    };
    sub_accounts(&sk, privileged, tcp)?;
    match (privileged, tcp(&sk, 80)?) {
        (true, Ok(())) => {}
        (false, Err(Error::App(SockError::Denied))) => {
            println!("net-rights: port 80 refused to the plain client (Denied)")
        }
        (true, Err(_)) => return Err("the privileged client could not bind port 80"),
        (false, _) => return Err("the plain client bound port 80"),
    }
    if tcp(&sk, if privileged { 8081 } else { 8080 })?.is_err() {
        return Err("a port above 1023 was refused");
    }
    Ok(())
}

/// The sub-accounts of `sk` (see the header); `tcp` binds a new TCP socket of a capability's.
fn sub_accounts(
    sk: &socket::Client,
    privileged: bool,
    tcp: impl Fn(&socket::Client, u16) -> Result<Result<(), Error<SockError>>, &'static str>,
) -> Result<(), &'static str> {
    let sub = |n| {
        sk.grant_sub(n, thread::alloc_slot())
            .map(socket::Client::new)
            .map_err(|_| "a sub-account was refused")
    };
    let (a, b) = (sub(5)?, sub(6)?);
    if !matches!(
        a.grant_sub(7, thread::alloc_slot()),
        Err(Error::App(SockError::Denied))
    ) {
        return Err("a sub-account minted another");
    }
    if !matches!(
        sk.grant_sub(0, thread::alloc_slot()),
        Err(Error::App(SockError::Invalid))
    ) {
        return Err("sub-account 0 was minted");
    }
    // Its first socket: the rights are the minting capability's.
    match (privileged, tcp(&a, 81)?) {
        (true, Ok(())) | (false, Err(Error::App(SockError::Denied))) => {}
        _ => return Err("a sub-account's rights differ from its client's"),
    }
    for _ in 1..4 {
        a.create(SockKind::Udp, thread::alloc_slot())
            .map_err(|_| "a sub-account's socket within its share was refused")?;
    }
    if !matches!(
        a.create(SockKind::Udp, thread::alloc_slot()),
        Err(Error::App(SockError::ProcessFull))
    ) {
        return Err("a sub-account's 5th socket was not refused");
    }
    for _ in 0..4 {
        b.create(SockKind::Udp, thread::alloc_slot())
            .map_err(|_| "a full sub-account denied its sibling a socket")?;
    }
    println!("net-rights: a sub-account's 5th socket refused (ProcessFull), its sibling served");
    Ok(())
}
