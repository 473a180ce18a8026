use super::*;
use alloc::string::ToString;
use alloc::vec;

fn sample() -> System {
    System {
        name: "pingpong".into(),
        servers: vec![
            Server {
                name: "pong".into(),
                module: "test-pong".into(),
                provides: vec!["pong".into()],
                kmem_kb: 64,
                ..Server::default()
            },
            Server {
                name: "ping-a".into(),
                module: "test-ping".into(),
                priority: 7,
                args: vec!["a".into(), "ünïcode".into()],
                wait: true,
                heap_kb: 1024,
                uses: vec![Use {
                    endpoint: "pong".into(),
                    badge: u64::MAX >> 1,
                }],
                irqs: vec![8, 15],
                ioports: vec![IoRange {
                    base: 0x70,
                    count: 2,
                }],
                pager: Some("pong".into()),
                ram_kb: 4096,
                huge_pages: 3,
                cap_slots: 2048,
                io_window: Some(IoRange {
                    base: 0xc000,
                    count: 0x4000,
                }),
                irq_lines: vec![10, 11],
                console: false,
                modules: vec!["linux-personality".into(), "test-pong".into()],
                ..Server::default()
            },
        ],
    }
}

#[test]
fn badges_pools_and_mem_clients() {
    invalid(|s| s.servers[1].uses[0].badge = 1 << 63, "bit 63");
    invalid(
        |s| s.servers[0].ram_kb = 8,
        "only one server may have a RAM pool",
    );
    invalid(|s| s.servers[1].ram_kb = 2 * 1024 * 1024, "above 1 GiB");
    invalid(|s| s.servers[1].huge_pages = 65, "above 64");
    invalid(|s| s.servers[1].cap_slots = 5000, "cap_slots");
    let mut s = sample();
    s.servers[0].provides.push("mem".into());
    s.servers[1].uses.push(Use {
        endpoint: "mem".into(),
        badge: 3,
    });
    s.servers.push(Server {
        name: "other".into(),
        module: "x".into(),
        uses: vec![Use {
            endpoint: "mem".into(),
            badge: 3,
        }],
        ..Server::default()
    });
    let e = validate(&s).unwrap_err();
    assert!(
        e.contains("badge 3 on `mem` is already used by server `ping-a`"),
        "{e}"
    );
    s.servers[2].uses[0].badge = 4;
    validate(&s).unwrap();
    // pci assigns devices by badge: two drivers may not share one.
    s.servers[0].provides.push("pci".into());
    s.servers[1].uses.push(Use {
        endpoint: "pci".into(),
        badge: 1,
    });
    s.servers[2].uses.push(Use {
        endpoint: "pci".into(),
        badge: 1,
    });
    let e = validate(&s).unwrap_err();
    assert!(
        e.contains("badge 1 on `pci` is already used by server `ping-a`"),
        "{e}"
    );
    s.servers[2].uses[1].badge = 2;
    validate(&s).unwrap();
    // The memory server is known by its RAM pool, whatever its endpoint is called.
    let mut s = sample();
    s.servers[1].provides.push("pool".into());
    s.servers[0].uses.push(Use {
        endpoint: "pool".into(),
        badge: 5,
    });
    s.servers.push(Server {
        name: "other".into(),
        module: "x".into(),
        uses: vec![Use {
            endpoint: "pool".into(),
            badge: 5,
        }],
        ..Server::default()
    });
    let e = validate(&s).unwrap_err();
    assert!(
        e.contains("badge 5 on `pool` is already used by server `pong`"),
        "{e}"
    );
    s.servers[1].provides.push("pool2".into());
    let e = validate(&s).unwrap_err();
    assert!(
        e.contains("server `ping-a`: a server with a RAM pool provides at most one endpoint"),
        "{e}"
    );
}

#[test]
fn restricted_device_authority() {
    // Window: non-empty, inside the port space, exclusive.
    invalid(
        |s| {
            s.servers[1].io_window = Some(IoRange {
                base: 0xc000,
                count: 0,
            })
        },
        "is empty",
    );
    invalid(
        |s| {
            s.servers[1].io_window = Some(IoRange {
                base: 0xfff0,
                count: 0x11,
            })
        },
        "past port 0xffff",
    );
    invalid(
        |s| {
            s.servers[0].ioports.push(IoRange {
                base: 0xd000,
                count: 0x80,
            })
        },
        "server `pong`: I/O ports 0xd000+128 overlap the I/O window of server `ping-a`",
    );
    invalid(
        |s| {
            s.servers[0].io_window = Some(IoRange {
                base: 0xbf00,
                count: 0x101,
            })
        },
        "overlap the I/O window",
    );
    // The server's own `ioports` may lie inside its own window; touching the edges is fine.
    let mut s = sample();
    s.servers[1].ioports.push(IoRange {
        base: 0xc000,
        count: 8,
    });
    s.servers[0].ioports.push(IoRange {
        base: 0xbff8,
        count: 8,
    });
    s.servers[0].io_window = Some(IoRange {
        base: 0x1000,
        count: 0x100,
    });
    validate(&s).unwrap();
    // Lines: valid ones only, each held by one server, directly or through an IRQ control.
    invalid(
        |s| s.servers[1].irq_lines.push(2),
        "server `ping-a`: IRQ 2 cannot be delegated",
    );
    invalid(|s| s.servers[1].irq_lines.push(0), "IRQ 0");
    invalid(|s| s.servers[1].irq_lines.push(16), "IRQ 16");
    invalid(|s| s.servers[1].irq_lines.push(10), "IRQ 10 listed twice");
    invalid(|s| s.servers[1].irq_lines.push(8), "IRQ 8 listed twice");
    invalid(
        |s| s.servers[0].irq_lines.push(11),
        "server `ping-a`: IRQ 11 is already given to server `pong`",
    );
    invalid(
        |s| s.servers[0].irqs.push(10),
        "IRQ 10 is already given to server `pong`",
    );
}

#[test]
fn round_trip() {
    let s = sample();
    assert_eq!(decode(&encode(&s)).unwrap(), s);
    let empty = System::default();
    assert_eq!(decode(&encode(&empty)).unwrap(), empty);
}

#[test]
fn restart_only_for_servers_that_can_come_back() {
    invalid(
        |s| {
            s.servers[1].restart = Restart::Restart;
            s.servers[1].wait = true;
        },
        "is not for the memory server or a `wait` server",
    );
}

#[test]
fn further_modules_are_checked() {
    invalid(
        |s| s.servers[1].modules.push("Bad".into()),
        "boot module `Bad`",
    );
    invalid(
        |s| s.servers[1].modules.push("manifest".into()),
        "`manifest`",
    );
    invalid(
        |s| s.servers[1].modules.push("linux-personality".into()),
        "listed twice",
    );
    invalid(
        |s| s.servers[1].modules.push("test-ping".into()),
        "own module",
    );
}

#[test]
fn sample_is_valid_and_lists_modules() {
    validate(&sample()).unwrap();
    // Further modules are carried too, each once.
    assert_eq!(
        sample().modules(),
        vec!["test-pong", "test-ping", "linux-personality"]
    );
    assert_eq!(sample().provider("pong").unwrap().name, "pong");
}

fn invalid(f: impl FnOnce(&mut System), needle: &str) {
    let mut s = sample();
    f(&mut s);
    let e = validate(&s).unwrap_err();
    assert!(e.contains(needle), "error {e:?} should contain {needle:?}");
}

#[test]
fn validation_errors_name_the_server() {
    invalid(
        |s| s.servers[1].name = "pong".into(),
        "server `pong` is defined more than once",
    );
    invalid(|s| s.servers[1].priority = 0, "server `ping-a`: priority 0");
    invalid(
        |s| s.servers[1].priority = 255,
        "server `ping-a`: priority 255",
    );
    invalid(
        |s| s.servers[0].module = "Test".into(),
        "server `pong`: module name `Test`",
    );
    invalid(|s| s.servers[0].module = "a/b".into(), "module name");
    invalid(|s| s.servers[0].module = "x".repeat(48), "module name");
    invalid(
        |s| s.servers[1].uses[0].endpoint = "nope".into(),
        "server `ping-a`: uses endpoint `nope`",
    );
    invalid(
        |s| s.servers[1].provides.push("pong".into()),
        "already provided by server `pong`",
    );
    invalid(
        |s| s.servers[1].pager = Some("x".into()),
        "server `ping-a`: pager endpoint `x`",
    );
    invalid(|s| s.servers[1].irqs.push(0), "server `ping-a`: IRQ 0");
    invalid(|s| s.servers[1].irqs.push(2), "IRQ 2");
    invalid(|s| s.servers[1].irqs.push(16), "IRQ 16");
    invalid(
        |s| s.servers[0].irqs.push(8),
        "server `ping-a`: IRQ 8 is already given to server `pong`",
    );
    invalid(
        |s| {
            s.servers[1].ioports.push(IoRange {
                base: 0xfff0,
                count: 0x11,
            })
        },
        "past port 0xffff",
    );
    invalid(
        |s| {
            s.servers[1].ioports.push(IoRange {
                base: 0x80,
                count: 0,
            })
        },
        "is empty",
    );
    invalid(|s| s.servers.clear(), "no servers");
    invalid(
        |s| {
            s.servers[1].uses.push(Use {
                endpoint: "pong".into(),
                badge: 2,
            })
        },
        "twice",
    );
    // The top of the port space is reachable.
    let mut s = sample();
    s.servers[1].ioports.push(IoRange {
        base: 0xfff0,
        count: 0x10,
    });
    validate(&s).unwrap();
}

#[test]
fn decode_rejects_truncation_and_trailing_bytes() {
    let bytes = encode(&sample());
    for n in 0..bytes.len() {
        assert!(decode(&bytes[..n]).is_err(), "prefix of {n} bytes decoded");
    }
    let mut long = bytes.clone();
    long.push(0);
    assert!(decode(&long).is_err());
}

/// xorshift64*: a fixed-seed generator so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn decode_never_panics_on_garbage() {
    let good = encode(&sample());
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for round in 0..20_000 {
        let bytes: Vec<u8> = if round % 2 == 0 {
            // Mutations of a valid encoding reach deep into the decoder.
            let mut b = good.clone();
            for _ in 0..1 + rng.next() % 4 {
                let i = (rng.next() as usize) % b.len();
                b[i] = rng.next() as u8;
            }
            let cut = (rng.next() as usize) % (b.len() + 1);
            b.truncate(cut.max(b.len() / 2));
            b
        } else {
            let len = (rng.next() % 96) as usize;
            let mut b: Vec<u8> = MAGIC.to_vec();
            b.extend((0..len).map(|_| rng.next() as u8));
            b
        };
        let _ = decode(&bytes);
    }
    // A huge claimed count must not be allocated.
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        decode(&b).unwrap_err().what,
        "list count exceeds the remaining input"
    );
}

#[cfg(feature = "toml")]
mod toml_form {
    use super::*;

    const PINGPONG: &str = r#"
name = "pingpong"
[[server]]
name = "pong"
module = "test-pong"
priority = 100
kmem_kb = 64
provides = ["pong"]
[[server]]
name = "ping-a"
module = "test-ping"
priority = 7
uses = [{ endpoint = "pong", badge = 1 }]
args = ["a"]
wait = true
heap_kb = 1024
irqs = [8]
ioports = [{ base = 0x70, count = 2 }]
pager = "pong"
[[server]]
name = "idle"

[test]
timeout = 60
expect = ["x"]
"#;

    #[test]
    fn parses_example_with_defaults() {
        let s = from_toml(PINGPONG).unwrap();
        validate(&s).unwrap();
        assert_eq!(s.name, "pingpong");
        assert_eq!(s.servers.len(), 3);
        let a = &s.servers[1];
        assert_eq!(a.module, "test-ping");
        assert_eq!(
            a.uses,
            vec![Use {
                endpoint: "pong".into(),
                badge: 1
            }]
        );
        assert_eq!(
            a.ioports,
            vec![IoRange {
                base: 0x70,
                count: 2
            }]
        );
        assert_eq!(a.irqs, vec![8]);
        assert!(a.wait);
        assert_eq!(a.pager.as_deref(), Some("pong"));
        let idle = &s.servers[2];
        assert_eq!(idle.module, "idle");
        assert_eq!(
            (idle.priority, idle.heap_kb, idle.kmem_kb, idle.wait),
            (100, 256, 0, false)
        );
        assert_eq!(decode(&encode(&s)).unwrap(), s);
    }

    #[test]
    fn restart_policy_keys() {
        assert!(from_toml(PINGPONG)
            .unwrap()
            .servers
            .iter()
            .all(|s| s.restart == Restart::Hold));
        let t = "name = \"x\"\n[[server]]\nname = \"blk\"\nrestart = \"restart\"\nmax_restarts = 5\nbackoff_ms = 20\n[[server]]\nname = \"t\"\nmay_kill = [\"blk\"]\n";
        let s = from_toml(t).unwrap();
        validate(&s).unwrap();
        assert_eq!(
            (
                s.servers[0].restart,
                s.servers[0].max_restarts,
                s.servers[0].backoff_ms
            ),
            (Restart::Restart, 5, 20)
        );
        assert_eq!(s.servers[1].may_kill, vec!["blk".to_string()]);
        assert_eq!(decode(&encode(&s)).unwrap(), s);
        let e = from_toml(&t.replace("\"restart\"\nmax", "\"again\"\nmax")).unwrap_err();
        assert!(e.contains("`restart` must be"), "{e}");
        let bad = from_toml(&t.replace("max_restarts = 5", "max_restarts = 0")).unwrap();
        assert!(validate(&bad).unwrap_err().contains("max_restarts = 0"));
        let bad = from_toml(&t.replace("[\"blk\"]", "[\"t\"]")).unwrap();
        assert!(validate(&bad).unwrap_err().contains("may_kill names `t`"));
        let inj = from_toml(&t.replace("may_kill", "may_inject")).unwrap();
        validate(&inj).unwrap();
        assert_eq!(inj.servers[1].may_inject, vec!["blk".to_string()]);
        assert_eq!(decode(&encode(&inj)).unwrap(), inj);
        let bad = from_toml(&t.replace("may_kill = [\"blk\"]", "may_inject = [\"t\"]")).unwrap();
        assert!(validate(&bad).unwrap_err().contains("may_inject names `t`"));
        let bad = from_toml(
            &t.replace("restart = \"restart\"", "ram_kb = 64")
                .replace("may_kill", "may_inject"),
        )
        .unwrap();
        assert!(validate(&bad).unwrap_err().contains("the memory server"));
        let bad = from_toml(&t.replace("backoff_ms = 20", "backoff_ms = 5000")).unwrap();
        assert!(validate(&bad).unwrap_err().contains("backoff_ms = 5000"));
    }

    #[test]
    fn hang_deadline_and_fault_log_keys() {
        let t = "name = \"x\"\n[[server]]\nname = \"slow\"\nprovides = [\"slow\"]\nhang_ms = 5000\n[[server]]\nname = \"reader\"\nfault_log = true\n";
        let s = from_toml(t).unwrap();
        validate(&s).unwrap();
        assert_eq!(
            (s.servers[0].hang_ms, s.servers[0].fault_log),
            (5000, false)
        );
        assert_eq!(
            (s.servers[1].hang_ms, s.servers[1].fault_log),
            (crate::DEFAULT_HANG_MS, true)
        );
        assert_eq!(decode(&encode(&s)).unwrap(), s);
        // 0 turns the watch off; anything else must lie in the range.
        validate(&from_toml(&t.replace("5000", "0")).unwrap()).unwrap();
        for v in ["50", "60001"] {
            let bad = from_toml(&t.replace("5000", v)).unwrap();
            let e = validate(&bad).unwrap_err();
            assert!(e.contains(&format!("server `slow`: hang_ms = {v}")), "{e}");
        }
        let e = from_toml(&t.replace("fault_log = true", "fault_log = 1")).unwrap_err();
        assert!(e.contains("`fault_log` must be true or false"), "{e}");
        // Root runs above every server, so a server's priority stays below root's.
        let e = validate(&from_toml(&t.replace("hang_ms = 5000", "priority = 200")).unwrap())
            .unwrap_err();
        assert!(
            e.contains("server `slow`: priority 200 is outside 1..=199"),
            "{e}"
        );
    }

    #[test]
    fn modules_key() {
        let t = "name = \"x\"\n[[server]]\nname = \"proc\"\nmodules = [\"linux-personality\"]\n";
        let s = from_toml(t).unwrap();
        assert_eq!(s.servers[0].modules, vec!["linux-personality".to_string()]);
        assert_eq!(s.modules(), vec!["proc", "linux-personality"]);
        assert_eq!(decode(&encode(&s)).unwrap(), s);
        let e = from_toml(&t.replace("[\"linux-personality\"]", "\"x\"")).unwrap_err();
        assert!(e.contains("`modules` must be an array"), "{e}");
    }

    #[test]
    fn console_defaults_on_and_can_be_withheld() {
        assert!(from_toml(PINGPONG)
            .unwrap()
            .servers
            .iter()
            .all(|s| s.console));
        let t = "name = \"x\"\n[[server]]\nname = \"mute\"\nconsole = false\n";
        let s = from_toml(t).unwrap();
        assert!(!s.servers[0].console);
        assert_eq!(decode(&encode(&s)).unwrap(), s);
        let e = from_toml(&t.replace("false", "0")).unwrap_err();
        assert!(e.contains("`console` must be true or false"), "{e}");
    }

    #[test]
    fn io_window_and_irq_lines() {
        let t = "name = \"x\"\n[[server]]\nname = \"pci\"\nio_window = { base = 0xc000, count = 0x4000 }\nirq_lines = [10, 11]\n";
        let s = from_toml(t).unwrap();
        validate(&s).unwrap();
        assert_eq!(
            s.servers[0].io_window,
            Some(IoRange {
                base: 0xc000,
                count: 0x4000
            })
        );
        assert_eq!(s.servers[0].irq_lines, vec![10, 11]);
        assert_eq!(decode(&encode(&s)).unwrap(), s);
        let e = from_toml(&t.replace("count = 0x4000", "size = 1")).unwrap_err();
        assert!(e.contains("`size`") && e.contains("io_window"), "{e}");
        let e = from_toml(&t.replace("count = 0x4000", "count = 0x10000")).unwrap_err();
        assert!(e.contains("io_window.count"), "{e}");
        let e = from_toml(&t.replace("[10, 11]", "10")).unwrap_err();
        assert!(e.contains("`irq_lines` must be an array"), "{e}");
        let e = from_toml(&t.replace("[10, 11]", "[2]"))
            .and_then(|s| validate(&s))
            .unwrap_err();
        assert!(e.contains("IRQ 2"), "{e}");
        assert_eq!(from_toml(PINGPONG).unwrap().servers[1].io_window, None);
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = from_toml("name = \"x\"\n[[server]]\nname = \"a\"\nprio = 3\n").unwrap_err();
        assert!(e.contains("server `a`") && e.contains("`prio`"), "{e}");
        let e = from_toml("name = \"x\"\nservers = []\n").unwrap_err();
        assert!(e.contains("`servers`"), "{e}");
        let e = from_toml(
            "name = \"x\"\n[[server]]\nname = \"a\"\nuses = [{ endpoint = \"p\", badg = 1 }]\n",
        )
        .unwrap_err();
        assert!(e.contains("`badg`"), "{e}");
    }

    #[test]
    fn type_and_range_errors() {
        let e = from_toml("name = \"x\"\n[[server]]\nname = \"a\"\npriority = 300\n").unwrap_err();
        assert!(e.contains("server `a`") && e.contains("priority"), "{e}");
        let e = from_toml("name = \"x\"\n[[server]]\nname = \"a\"\nwait = 1\n").unwrap_err();
        assert!(e.contains("wait"), "{e}");
        let e = from_toml("[[server]]\nname = \"a\"\n").unwrap_err();
        assert!(e.contains("name"), "{e}");
        assert!(from_toml("name = ").is_err());
        let e = from_toml("name = \"x\"\n[[server]]\nmodule = \"a\"\n").unwrap_err();
        assert!(e.contains("server #1"), "{e}");
        let _ = "".to_string();
    }

    #[test]
    fn bare_uses_get_distinct_badges_around_explicit_ones() {
        let t = "name = \"x\"\n[[server]]\nname = \"p\"\nprovides = [\"p\", \"q\"]\n\
                 [[server]]\nname = \"a\"\nuses = [\"p\", \"q\"]\n\
                 [[server]]\nname = \"b\"\nuses = [{ endpoint = \"p\", badge = 2 }]\n\
                 [[server]]\nname = \"c\"\nuses = [{ endpoint = \"p\" }, \"q\"]\n";
        let s = from_toml(t).unwrap();
        validate(&s).unwrap();
        let badges = |i: usize| {
            s.servers[i]
                .uses
                .iter()
                .map(|u| u.badge)
                .collect::<Vec<_>>()
        };
        assert_eq!(badges(1), vec![1, 1]);
        assert_eq!(badges(2), vec![2]);
        assert_eq!(badges(3), vec![3, 2]);
    }

    #[test]
    fn errors_give_line_and_column() {
        let e = from_toml("name = \"x\"\n[[server]]\nname = \"a\"\nprio = 3\n").unwrap_err();
        assert!(
            e.starts_with("4:1: server `a`: unknown key(s) `prio`"),
            "{e}"
        );
        let e = from_toml_file(
            "m.toml",
            "name = \"x\"\n[[server]]\nname = \"a\"\nwait = 1\n",
            &NoSchemas,
        )
        .unwrap_err();
        assert!(e.starts_with("m.toml:4:1: server `a`: `wait`"), "{e}");
        let e = from_toml("name = \"x\"\nservers = []\n").unwrap_err();
        assert!(e.starts_with("2:1: unknown top-level key `servers`"), "{e}");
        let e =
            from_toml("name = \"x\"\n[[server]]\nname = \"a\"\nconfig = { k = 1 }\n").unwrap_err();
        assert!(
            e.starts_with("4:1: server `a`: module `a` has no configuration schema"),
            "{e}"
        );
        let e = from_toml("name = \"x\"\nname = \"y\"\n").unwrap_err();
        assert!(e.starts_with("2:1: "), "{e}");
        let t = "name = \"x\"\n[[server]]\nname = \"a\"\n\n[[server]]\n  name = \"b\"\n";
        assert_eq!(server_position(t, "b"), Some((6, 3)));
        assert_eq!(server_position(t, "c"), None);
    }

    mod typed {
        use super::*;
        use crate::config::{Client, Endpoint, Peer, Peers};
        use serde::{Deserialize, Serialize};

        /// A schema of the kind a server's `*-api` crate defines.
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Cfg {
            size: u16,
            #[serde(default)]
            friends: Vec<Client>,
            via: Option<Endpoint>,
        }

        impl Peers for Cfg {
            fn peers(&mut self, f: &mut dyn FnMut(Peer<'_>)) {
                for c in &mut self.friends {
                    f(Peer::Client(c));
                }
                if let Some(e) = &self.via {
                    f(Peer::Endpoint(e));
                }
            }
        }

        struct One;
        impl Schemas for One {
            fn has(&self, m: &str) -> bool {
                m == "srv"
            }
            fn decode<'de, D: serde::Deserializer<'de>>(
                &self,
                _: &str,
                d: D,
            ) -> Result<alloc::boxed::Box<dyn HostConfig>, D::Error> {
                schema::<Cfg, D>(d)
            }
        }

        const SYS: &str = "name = \"x\"
[[server]]
name = \"srv\"
provides = [\"srv\"]
uses = [\"other\"]
[server.config]
size = 7
friends = [\"a\", \"b\"]
via = \"other\"
[[server]]
name = \"other\"
provides = [\"other\"]
[[server]]
name = \"a\"
uses = [\"srv\"]
[[server]]
name = \"b\"
uses = [{ endpoint = \"srv\", badge = 9 }]
";

        fn parse(t: &str) -> Result<System, String> {
            from_toml_file("t.toml", t, &One)
        }

        #[test]
        fn round_trip_with_resolved_badges() {
            let s = parse(SYS).unwrap();
            validate(&s).unwrap();
            let c: Cfg = postcard::from_bytes(&s.servers[0].config).unwrap();
            assert_eq!(
                c,
                Cfg {
                    size: 7,
                    friends: vec![Client::new("a", 1), Client::new("b", 9)],
                    via: Some(Endpoint::new("other")),
                }
            );
            assert!(s.servers[1].config.is_empty());
            assert_eq!(decode(&encode(&s)).unwrap(), s);
        }

        #[test]
        fn bad_configs_name_file_and_line() {
            let e = parse(&SYS.replace("size = 7", "size = 7\nsise = 8")).unwrap_err();
            assert!(
                e.starts_with("t.toml:8:1: server `srv`: config: unknown field `sise`"),
                "{e}"
            );
            let e = parse(&SYS.replace("size = 7", "size = \"7\"")).unwrap_err();
            assert!(
                e.starts_with("t.toml:7:8: server `srv`: config: invalid type"),
                "{e}"
            );
            let e = parse(&SYS.replace("size = 7", "size = 70000")).unwrap_err();
            assert!(e.starts_with("t.toml:7:8:"), "{e}");
            let e = parse(&SYS.replace("size = 7\n", "")).unwrap_err();
            assert!(
                e.contains("t.toml:") && e.contains("missing field `size`"),
                "{e}"
            );
            let e = parse(&SYS.replace("[\"a\", \"b\"]", "[\"a\", \"c\"]")).unwrap_err();
            assert!(
                e.starts_with(
                    "t.toml:8:17: server `srv`: config: `c` is not a server of this system"
                ),
                "{e}"
            );
            let e = parse(&SYS.replace("[\"a\", \"b\"]", "[\"a\", \"other\"]")).unwrap_err();
            assert!(
                e.starts_with("t.toml:8:17: ")
                    && e.contains("server `other` does not use an endpoint of `srv`"),
                "{e}"
            );
            let e = parse(&SYS.replace("via = \"other\"", "via = \"a\"")).unwrap_err();
            assert!(
                e.starts_with("t.toml:9:7: ")
                    && e.contains("`a` is not an endpoint this server `uses`"),
                "{e}"
            );
            // A server of a module with a schema but no `config` is checked against the schema.
            let e = parse(&SYS.replace(
                "[server.config]\nsize = 7\nfriends = [\"a\", \"b\"]\nvia = \"other\"\n",
                "",
            ))
            .unwrap_err();
            assert!(
                e.starts_with("t.toml:3:1: server `srv`: config: missing field `size`"),
                "{e}"
            );
        }
    }
}

#[test]
fn kill_request_names_travel_in_four_words() {
    let mut buf = [0u8; 32];
    let w = crate::name_words("blk0");
    assert_eq!(crate::words_name(&w, &mut buf), Some("blk0"));
    let long = "a-server-name-of-exactly-32-byte";
    assert_eq!(long.len(), 32);
    assert_eq!(
        crate::words_name(&crate::name_words(long), &mut buf),
        Some(long)
    );
    assert_eq!(crate::words_name(&[u64::MAX; 4], &mut buf), None);
}
