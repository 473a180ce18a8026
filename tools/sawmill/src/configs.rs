//! The configuration schemas of the servers this repository builds: module name → the `Config`
//! type of the server's `*-api` crate. The manifest parser deserializes each server's `config`
//! table with it, so a manifest is checked (unknown keys, wrong types, missing fields, peer names)
//! before an image is built, and the server decodes the very type it was checked against.

use sawmill_manifest::{schema, HostConfig, Schemas};
use serde::Deserializer;

/// Every schema, by module.
pub struct Servers;

impl Schemas for Servers {
    fn has(&self, module: &str) -> bool {
        matches!(
            module,
            "mem"
                | "pci"
                | "vfs"
                | "ext2-pfs"
                | "blk-virtio"
                | "console"
                | "proc"
                | "procfs"
                | "netstack"
                | "netmgr"
        )
    }

    fn decode<'de, D: Deserializer<'de>>(
        &self,
        module: &str,
        d: D,
    ) -> Result<Box<dyn HostConfig>, D::Error> {
        match module {
            "mem" => schema::<sawmill_mem_api::Config, D>(d),
            "pci" => schema::<sawmill_pci_api::Config, D>(d),
            "vfs" => schema::<sawmill_vfs_api::Config, D>(d),
            "ext2-pfs" => schema::<sawmill_ext2_api::Config, D>(d),
            "blk-virtio" => schema::<sawmill_blk_virtio_api::Config, D>(d),
            "console" => schema::<sawmill_console_api::Config, D>(d),
            "proc" => schema::<sawmill_proc_api::Config, D>(d),
            "procfs" => schema::<sawmill_procfs_api::Config, D>(d),
            "netstack" => {
                // The addresses are strings in the manifest: checked here, not at boot.
                let c = <sawmill_netstack_api::Config as serde::Deserialize>::deserialize(d)?;
                c.check().map_err(serde::de::Error::custom)?;
                Ok(Box::new(c))
            }
            "netmgr" => {
                let c = <sawmill_netmgr_api::Config as serde::Deserialize>::deserialize(d)?;
                c.check().map_err(serde::de::Error::custom)?;
                Ok(Box::new(c))
            }
            m => Err(serde::de::Error::custom(format!(
                "module `{m}` has no configuration schema"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sawmill_manifest::config::{Client, Endpoint};

    fn parse(text: &str) -> Result<sawmill_manifest::System, String> {
        let s = sawmill_manifest::from_toml_file("sys.toml", text, &Servers)?;
        sawmill_manifest::validate(&s).map_err(|e| format!("sys.toml: {e}"))?;
        Ok(s)
    }

    const FS: &str = r#"name = "fs"
[[server]]
name = "pci"
provides = ["pci"]
io_window = { base = 0xd000, count = 0x1000 }
config = { assign = [{ driver = "blk0", vendor = 0x1af4, device = 0x1001 }] }
[[server]]
name = "mem"
provides = ["mem"]
ram_kb = 4096
[server.config]
quota = [{ client = "pfs0", kb = 2048 }]
[[server]]
name = "blk0"
module = "blk-virtio"
provides = ["blk0"]
uses = ["pci", "mem"]
[[server]]
name = "pfs0"
module = "ext2-pfs"
provides = ["pfs0"]
uses = ["blk0", { endpoint = "mem", badge = 10 }]
config = { blk = "blk0", name = "root" }
[[server]]
name = "vfs"
provides = ["vfs"]
uses = ["pfs0"]
[server.config]
mounts = [{ path = "/", pfs = "pfs0" }]
creds = [{ client = "app", uid = 0, gid = 0 }, { client = "guest", uid = 1000, gid = 1000 }]
admins = ["app"]
[[server]]
name = "app"
uses = ["vfs"]
[[server]]
name = "guest"
uses = ["vfs"]
"#;

    fn config<T: serde::de::DeserializeOwned>(s: &sawmill_manifest::System, name: &str) -> T {
        let srv = s.servers.iter().find(|x| x.name == name).unwrap();
        postcard::from_bytes(&srv.config).unwrap()
    }

    #[test]
    fn configs_round_trip_with_badges_filled_in() {
        let s = parse(FS).unwrap();
        let pci: sawmill_pci_api::Config = config(&s, "pci");
        assert_eq!(pci.assign.len(), 1);
        assert_eq!(pci.assign[0].driver, Client::new("blk0", 1));
        assert_eq!(
            (
                pci.assign[0].vendor,
                pci.assign[0].device,
                pci.assign[0].index
            ),
            (0x1af4, 0x1001, 0)
        );
        let mem: sawmill_mem_api::Config = config(&s, "mem");
        assert_eq!(mem.quota[0].client, Client::new("pfs0", 10));
        assert_eq!(mem.default_quota_kb, None);
        let ext2: sawmill_ext2_api::Config = config(&s, "pfs0");
        assert_eq!(ext2.blk, Endpoint::new("blk0"));
        assert_eq!(ext2.cache_kb, sawmill_ext2_api::DEFAULT_CACHE_KB);
        let vfs: sawmill_vfs_api::Config = config(&s, "vfs");
        assert_eq!(vfs.mounts[0].pfs, Endpoint::new("pfs0"));
        // Bare `uses` get distinct badges, so the VFS tells `app` and `guest` apart.
        assert_eq!(vfs.creds[0].client, Client::new("app", 1));
        assert_eq!(vfs.creds[1].client, Client::new("guest", 2));
        assert_eq!(vfs.admins, vec![Client::new("app", 1)]);
        // The encoded manifest carries the configuration unchanged.
        let back = sawmill_manifest::decode(&sawmill_manifest::encode(&s)).unwrap();
        assert_eq!(back, s);
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err()
    }

    #[test]
    fn unknown_key_is_an_error_with_its_line() {
        let e = err(&FS.replace("name = \"root\" }", "name = \"root\", cache = 1 }"));
        assert!(e.starts_with("sys.toml:23:41:"), "{e}");
        assert!(
            e.contains("server `pfs0`: config: unknown field `cache`"),
            "{e}"
        );
        let e = err(&FS.replace("quota = [{ client", "quoat = [{ client"));
        assert!(
            e.starts_with("sys.toml:12:1:") && e.contains("unknown field `quoat`"),
            "{e}"
        );
    }

    #[test]
    fn wrong_type_and_missing_field_are_errors_with_their_line() {
        let e = err(&FS.replace("vendor = 0x1af4", "vendor = \"virtio\""));
        assert!(
            e.starts_with("sys.toml:6:") && e.contains("server `pci`: config:"),
            "{e}"
        );
        let e = err(&FS.replace("vendor = 0x1af4", "vendor = 0x11af4"));
        assert!(e.starts_with("sys.toml:6:") && e.contains("u16"), "{e}");
        let e = err(&FS.replace("config = { blk = \"blk0\", name = \"root\" }\n", ""));
        assert!(
            e.starts_with("sys.toml:19:") && e.contains("missing field `blk`"),
            "{e}"
        );
    }

    #[test]
    fn dangling_names_are_errors_with_their_line() {
        let e = err(&FS.replace("client = \"guest\"", "client = \"gust\""));
        assert!(e.starts_with("sys.toml:30:59:"), "{e}");
        assert!(
            e.contains("server `vfs`: config: `gust` is not a server of this system"),
            "{e}"
        );
        let e = err(&FS.replace("pfs = \"pfs0\"", "pfs = \"pfs1\""));
        assert!(e.starts_with("sys.toml:29:31:"), "{e}");
        assert!(
            e.contains("`pfs1` is not an endpoint this server `uses`"),
            "{e}"
        );
    }

    #[test]
    fn a_named_client_must_use_the_server() {
        let e = err(&FS.replace("driver = \"blk0\"", "driver = \"pfs0\""));
        assert!(e.starts_with("sys.toml:6:"), "{e}");
        assert!(
            e.contains("server `pfs0` does not use an endpoint of `pci`"),
            "{e}"
        );
        // Two clients on one badge cannot be told apart.
        let e2 = err(&FS.replace(
            "uses = [\"vfs\"]",
            "uses = [{ endpoint = \"vfs\", badge = 1 }]",
        ));
        assert!(
            e2.contains("server `app` shares badge 1 on `vfs` with server `guest`"),
            "{e2}"
        );
    }

    #[test]
    fn the_linux_system_and_procs_defaults() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../systems/linux.toml");
        let s = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let p: sawmill_proc_api::Config = config(&s, "proc");
        assert_eq!(p.init, vec!["/bin/sh".to_string()]);
        assert_eq!(p.cwd, "/");
        assert!(!p.trace);
        assert_eq!(p.personality, sawmill_proc_api::DEFAULT_PERSONALITY);
        let proc = s.servers.iter().find(|x| x.name == "proc").unwrap();
        // 200 processes at once (tests/linux/many.c): proc's kernel memory holds every
        // process's quota, its capability table their capabilities.
        assert!(p.max_procs >= 200);
        assert!(proc.kmem_kb as u64 >= p.max_procs as u64 * p.process_kmem_kb as u64);
        assert!(proc.cap_slots as u64 >= 10 * p.max_procs as u64);
        assert_eq!(proc.modules, vec!["linux-personality".to_string()]);
        assert!(s.modules().contains(&"linux-personality"));
        // A first command that does not fit proc's environment page is refused on the host.
        let long = std::fs::read_to_string(path).unwrap().replace(
            "init = [\"/bin/sh\"]",
            &format!("init = [\"{}\"]", "x".repeat(3000)),
        );
        assert!(parse(&long).unwrap_err().contains("above 2048"));
    }

    #[test]
    fn the_console_calls_proc_under_the_badge_proc_trusts() {
        // proc takes `tty_signal` (a typed Ctrl-C) only under this badge.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../systems/linux.toml");
        let s = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let console = s.servers.iter().find(|x| x.name == "console").unwrap();
        let u = console.uses.iter().find(|u| u.endpoint == "proc").unwrap();
        assert_eq!(u.badge, sawmill_proc_api::CONSOLE_BADGE);
        // No other client of proc holds it.
        for srv in s.servers.iter().filter(|x| x.name != "console") {
            assert!(srv
                .uses
                .iter()
                .all(|u| u.endpoint != "proc" || u.badge != sawmill_proc_api::CONSOLE_BADGE));
        }
    }

    #[test]
    fn procfs_lists_the_mounts_the_vfs_makes() {
        // /proc/mounts is procfs's config (procfs cannot ask the VFS, its client): it must name
        // the VFS's mount points, in the VFS's order.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../systems/linux.toml");
        let s = parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let vfs: sawmill_vfs_api::Config = config(&s, "vfs");
        let procfs: sawmill_procfs_api::Config = config(&s, "procfs");
        let a: Vec<&str> = vfs.mounts.iter().map(|m| m.path.as_str()).collect();
        let b: Vec<&str> = procfs.mounts.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(a, b);
        assert_eq!(a, ["/", "/proc"]);
    }

    #[test]
    fn modules_without_a_schema_take_no_config() {
        let e = err(&FS.replace(
            "name = \"app\"\nuses = [\"vfs\"]",
            "name = \"app\"\nuses = [\"vfs\"]\nconfig = { x = 1 }",
        ));
        assert!(e.starts_with("sys.toml:35:1:"), "{e}");
        assert!(
            e.contains("module `app` has no configuration schema"),
            "{e}"
        );
        // blk-virtio's table is checked against its schema.
        let e = err(&FS.replace(
            "uses = [\"pci\", \"mem\"]",
            "uses = [\"pci\", \"mem\"]\nconfig = { x = 1 }",
        ));
        assert!(e.contains("unknown field `x`"), "{e}");
    }

    const NET: &str = r#"name = "net"
[[server]]
name = "net0"
module = "net-virtio"
provides = ["net0"]
[[server]]
name = "netstack"
provides = ["socket"]
uses = ["net0"]
config = { driver = "net0", address = "10.0.2.15/24", gateway = "10.0.2.2", privileged = ["web"] }
[[server]]
name = "web"
uses = ["socket"]
"#;

    #[test]
    fn netstack_addresses_are_checked_on_the_host() {
        let s = parse(NET).unwrap();
        let c: sawmill_netstack_api::Config = config(&s, "netstack");
        assert_eq!(c.driver, Endpoint::new("net0"));
        assert_eq!(c.privileged, vec![Client::new("web", 1)]);
        let e = err(&NET.replace("10.0.2.15/24", "10.0.2.15/33"));
        assert!(e.contains("`address` is not a.b.c.d/prefix"), "{e}");
        let e = err(&NET.replace("\"10.0.2.2\"", "\"10.0.2\""));
        assert!(e.contains("`gateway` is not a.b.c.d"), "{e}");
        // The driver must be one of the stack's `uses`.
        let e = err(&NET.replace("uses = [\"net0\"]", "uses = []"));
        assert!(e.contains("net0"), "{e}");
    }

    const NETMGR: &str = r#"name = "net"
[[server]]
name = "net0"
module = "net-virtio"
provides = ["net0"]
[[server]]
name = "netstack"
provides = ["socket"]
uses = ["net0"]
config = { driver = "net0", manager = "netmgr" }
[[server]]
name = "netmgr"
provides = ["netmgr"]
uses = ["socket"]
config = { stacks = [{ stack = "socket", devices = ["net0"] }], rules = [{ client = "web", privileged_ports = true }] }
[[server]]
name = "web"
uses = ["netmgr"]
"#;

    #[test]
    fn netmgr_rules_name_clients_and_stacks() {
        let s = parse(NETMGR).unwrap();
        let m: sawmill_netmgr_api::Config = config(&s, "netmgr");
        assert_eq!(m.stacks[0].stack, Endpoint::new("socket"));
        let web = m.rules[0].client.badge;
        assert_ne!(web, 0);
        assert_eq!(m.allowed(web), sawmill_netmgr_api::RIGHT_PRIVILEGED_PORTS);
        let n: sawmill_netstack_api::Config = config(&s, "netstack");
        let mgr = n.manager.expect("the stack's manager");
        assert_eq!(mgr.name, "netmgr");
        assert_ne!(mgr.badge, 0);
        let e = err(&NETMGR.replace(
            "stacks = [{ stack = \"socket\", devices = [\"net0\"] }]",
            "stacks = []",
        ));
        assert!(e.contains("`stacks` is empty"), "{e}");
        // netmgr must use the stacks it names (and so be a client the stack can name).
        let e = err(&NETMGR.replace("uses = [\"socket\"]", "uses = []"));
        assert!(e.contains("does not use"), "{e}");
    }
}
