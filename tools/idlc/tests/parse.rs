//! Parser and checker tests: accepted files and the exact position and wording of rejections.
use sawmill_idlc::ast::*;
use sawmill_idlc::parse;

fn err(src: &str) -> String {
    match parse("t.idl", src) {
        Ok(f) => panic!("accepted: {f:?}"),
        Err(d) => d.to_string(),
    }
}

#[test]
fn accepts_every_kind() {
    let src = "\
// comment
error E { A = 1, B = 0x20, }
[trusted]
interface fs raises E {
    fn read(off: u64, n: u32) -> (data: bytes<256>, eof: bool);
    fn map(d: dataspace, c: cap) -> () = 0x10;
    fn next(a: [u16; 3], b: [bool; 9]) -> (x: i8, y: i16, z: i32, w: i64);
    [oneway] fn log(v: u8);
    [trusted, oneway] fn bye();
}
interface other { }
";
    let f = parse("t.idl", src).unwrap();
    assert_eq!(f.errors.len(), 1);
    assert_eq!(
        f.errors[0].variants[1],
        Variant {
            name: "B".into(),
            code: 0x20,
            pos: Pos { line: 2, col: 18 }
        }
    );
    let fs = &f.interfaces[0];
    assert!(fs.attrs.trusted);
    assert_eq!(fs.raises.as_deref(), Some("E"));
    let ops: Vec<(String, u16)> = fs
        .methods
        .iter()
        .map(|m| (m.name.clone(), m.opcode))
        .collect();
    assert_eq!(
        ops,
        [
            ("read", 1),
            ("map", 0x10),
            ("next", 0x11),
            ("log", 0x12),
            ("bye", 0x13)
        ]
        .map(|(a, b)| (a.to_string(), b))
    );
    let read = &fs.methods[0];
    assert_eq!(read.pos, Pos { line: 5, col: 8 });
    assert_eq!(read.ins[1].ty, Type::Scalar(Scalar::U32));
    assert_eq!(read.outs[0].ty, Type::Bytes(256));
    assert_eq!(
        fs.methods[1].ins.iter().map(|p| p.ty).collect::<Vec<_>>(),
        [Type::Dataspace, Type::Cap]
    );
    assert_eq!(fs.methods[2].ins[1].ty, Type::Array(Scalar::Bool, 9));
    assert!(fs.methods[3].attrs.oneway && !fs.methods[3].attrs.trusted);
    assert!(fs.methods[4].attrs.oneway && fs.methods[4].attrs.trusted);
    assert!(f.interfaces[1].methods.is_empty());
}

#[test]
fn rejects_with_exact_position() {
    let cases: &[(&str, &str)] = &[
        ("interface x {\n  fn a(b: u64) -> (c: u64)\n}", "t.idl:3:1: expected `;` after the method declaration, found `}`"),
        ("interface x {\n  fn a(b: u65);\n}", "t.idl:2:11: expected a type (u8..u64, i8..i64, bool, [T; N], bytes<N>, cap, dataspace, map, or a flags or enum name declared above), found `u65`"),
        ("interface x {\n  fn a(b u64);\n}", "t.idl:2:10: expected `:` and a type after the parameter name, found `u64`"),
        ("interface x {\n  fn a(b: u64 c: u8);\n}", "t.idl:2:15: expected `,` or `)` after the parameter, found `c`"),
        ("interfac x {}", "t.idl:1:1: expected `interface`, `error`, `const`, `flags` or `enum`, found `interfac`"),
        ("interface X {}", "t.idl:1:11: expected an interface name in snake_case, found `X`"),
        ("interface x {\n  [fast] fn a();\n}", "t.idl:2:4: expected attribute (`trusted` or `oneway`), found `fast`"),
        ("[oneway] interface x {}", "t.idl:1:2: expected attribute (`trusted`), found `oneway`"),
        ("interface x {\n  [oneway] fn a() -> (b: u8);\n}", "t.idl:2:19: expected `;` or `=`: oneway method `a` has no reply"),
        ("interface x {\n  fn a();\n  fn a();\n}", "t.idl:3:6: method `a` already declared at line 2"),
        ("interface x {\n  fn a() = 3;\n  fn b() = 3;\n}", "t.idl:3:6: opcode 3 of `b` already used by `a`"),
        ("interface x {\n  fn a() = 0;\n}", "t.idl:2:12: expected an opcode 1..=0xefff, found 0"),
        ("interface x {\n  fn a() = 0xf000;\n}", "t.idl:2:12: expected an opcode 1..=0xefff (at most 61439), found 61440"),
        ("interface x {\n  fn a(b: bytes<0>);\n}", "t.idl:2:17: expected a maximum byte count of at least 1, found 0"),
        ("interface x {\n  fn a(b: bytes 8);\n}", "t.idl:2:17: expected `<` and a maximum length after `bytes`, found number `8`"),
        ("interface x {\n  fn a(b: [u8, 3]);\n}", "t.idl:2:14: expected `;` and a length after the array element type, found `,`"),
        ("interface x {\n  fn a(b: [cap; 3]);\n}", "t.idl:2:12: expected an element type (u8..u64, i8..i64, bool), found `cap`"),
        ("interface x {\n  fn a(b: bytes<500>, c: bytes<500>);\n}", "t.idl:2:6: the request of `a` needs up to 130 words; a message holds at most 64"),
        ("interface x {\n  fn a() -> (b: [u64; 65]);\n}", "t.idl:2:6: the reply of `a` needs up to 65 words; a message holds at most 64"),
        ("interface x {\n  fn a(a: cap, b: cap, c: cap, d: dataspace, e: cap);\n}", "t.idl:2:6: the request of `a` carries 5 capabilities; a message holds at most 4"),
        ("interface x {\n  fn a(m: map, n: map);\n}", "t.idl:2:6: the request of `a` has 2 `map` parameters; a request has one receive window, so at most one"),
        ("interface x {\n  fn a() -> (m: map, n: map);\n}", "t.idl:2:6: the reply of `a` has 2 `map` results; a reply has one receive window, so at most one"),
        ("interface x raises E {}", "t.idl:1:11: interface `x` raises `E`, which is not declared in this file"),
        ("error E { A = 0 }", "t.idl:1:15: expected an error code 1..=0xefff, found 0 (0 means ok)"),
        ("error E { A = 1, B = 1 }", "t.idl:1:22: error code 1 already used by `A`"),
        ("error E { A = 1 A = 2 }", "t.idl:1:17: expected `,` or `}` after the error variant, found `A`"),
        ("error e { A = 1 }", "t.idl:1:7: expected an error type name in CamelCase, found `e`"),
        ("error E { }", "t.idl:1:7: error type `E` has no variants"),
        ("interface x {\n  fn a(type: u8);\n}", "t.idl:2:8: expected a parameter name or `)`, found reserved word `type`"),
        ("interface x {\n  fn a(badge: u8);\n}", "t.idl:2:8: expected a parameter name, found reserved name `badge`"),
        ("interface x {\n  fn a(__m: u8);\n}", "t.idl:2:8: expected a parameter name or `)`, found reserved word `__m`"),
        ("interface x {\n  fn a(b: u8, b: u8);\n}", "t.idl:2:15: parameter `b` declared twice"),
        ("interface x {\n  fn a(b: u8) $\n}", "t.idl:2:15: unexpected character `$`"),
        ("interface x {\n  fn a(b: [u8; 99999999999999999999]);\n}", "t.idl:2:16: expected a number (decimal, 0x hex or 0o octal, at most 2^64-1), found `99999999999999999999`"),
        ("const M: u32 = 0o8;", "t.idl:1:16: expected a number (decimal, 0x hex or 0o octal, at most 2^64-1), found `0o8`"),
        ("interface x {\n  fn a();", "t.idl:2:10: expected `fn`, `const`, an attribute list or `}`, found end of file"),
        ("interface x {}\ninterface x {}", "t.idl:2:11: interface `x` declared twice"),
    ];
    for (src, want) in cases {
        assert_eq!(&err(src), want, "source:\n{src}");
    }
}

#[test]
fn accepts_constants_flags_and_enums() {
    let src = "\
const MAX_NAME: u32 = 255;
const BIG: u64 = 0xffff_ffff_ffff_ffff;
const SMALL: i8 = 127;
const MODE: u32 = 0o170_000;
error E { A = 1, [invalid] Bad = 2 }
flags Open: u32 { READ = 1, WRITE = 2, RW = 3, }
enum Kind: u8 { File = 1, Dir = 2, Symlink = 7, Zero = 0 }
interface fs {
    const VFS_BADGE: u64 = 1;
    fn open(name: bytes<MAX_NAME>, f: Open) -> (k: Kind);
    const LATER: u16 = 0x10;
    fn share(r: map, a: [u8; MAX_NAME]) -> (m: map);
}
";
    let f = parse("t.idl", src).unwrap();
    assert_eq!(
        f.consts[0],
        Const {
            name: "MAX_NAME".into(),
            pos: Pos { line: 1, col: 7 },
            ty: Scalar::U32,
            value: 255
        }
    );
    assert_eq!(f.consts[1].value, u64::MAX);
    assert_eq!(f.consts[3].value, 0o170000);
    assert_eq!(f.errors[0].invalid, Some(1));
    assert_eq!(f.consts[2].ty, Scalar::I8);
    assert_eq!(f.flags[0].name, "Open");
    assert_eq!(f.flags[0].base, Scalar::U32);
    assert_eq!(f.flags[0].all(), 3);
    assert_eq!(f.flags[0].members[2].value, 3);
    let kinds: Vec<(String, u64)> = f.enums[0]
        .variants
        .iter()
        .map(|v| (v.name.clone(), v.value))
        .collect();
    assert_eq!(
        kinds,
        [("File", 1), ("Dir", 2), ("Symlink", 7), ("Zero", 0)].map(|(a, b)| (a.to_string(), b))
    );
    let it = &f.interfaces[0];
    assert_eq!(
        it.consts
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["VFS_BADGE", "LATER"]
    );
    let open = &it.methods[0];
    assert_eq!(open.ins[0].ty, Type::Bytes(255));
    assert_eq!(open.ins[1].ty, Type::Flags(Scalar::U32, 0));
    assert_eq!(open.outs[0].ty, Type::Enum(Scalar::U8, 0));
    let share = &it.methods[1];
    assert_eq!((share.name.as_str(), share.opcode), ("share", 2));
    assert_eq!(share.ins[0].ty, Type::Map);
    assert_eq!(share.ins[1].ty, Type::Array(Scalar::U8, 255));
    let code = sawmill_idlc::compile_str("t.idl", src, &Default::default()).unwrap();
    assert!(code.contains("pub const MAX_NAME: u32 = 0xff;"));
    assert!(code.contains("pub const VFS_BADGE: u64 = 0x1;"));
    assert!(code.contains("pub struct Open(u32);"));
    assert!(code.contains("#[repr(u8)]"));
}

#[test]
fn rejects_bad_constants_flags_and_enums() {
    let cases: &[(&str, &str)] = &[
        ("const max: u32 = 1;", "t.idl:1:7: expected a constant name in UPPER_SNAKE_CASE, found `max`"),
        ("const M: u8 = 256;", "t.idl:1:15: expected a value of type u8 (at most 255), found 256"),
        ("const M: i16 = 0x8000;", "t.idl:1:16: expected a value of type i16 (at most 32767), found 32768"),
        ("const M: bool = 1;", "t.idl:1:7: expected a constant type (u8..u64, i8..i64), found `bool`"),
        ("const M: u8 = 1", "t.idl:1:16: expected `;` after the constant, found end of file"),
        ("const M: u8 = 1;\nconst M: u8 = 2;", "t.idl:2:7: `M` already declared at line 1"),
        ("error E { A = 1 }\nflags E: u8 { A = 1 }", "t.idl:2:7: `E` already declared at line 1"),
        ("[trusted] const M: u8 = 1;", "t.idl:1:1: attributes are not allowed on `const`"),
        ("flags f: u8 { A = 1 }", "t.idl:1:7: expected a flags type name in CamelCase, found `f`"),
        ("flags F: i8 { A = 1 }", "t.idl:1:10: expected a base type (u8, u16, u32, u64), found `i8`"),
        ("flags F: u8 { a = 1 }", "t.idl:1:15: expected a flag name in UPPER_SNAKE_CASE, found `a`"),
        ("flags F: u8 { ALL = 1 }", "t.idl:1:15: expected a flag name, found reserved name `ALL`"),
        ("flags F: u8 { A = 0 }", "t.idl:1:19: expected a flag value with at least one bit set, found 0"),
        ("flags F: u8 { A = 0x100 }", "t.idl:1:19: expected a value of type u8 (at most 255), found 256"),
        ("flags F: u8 { A = 1, A = 2 }", "t.idl:1:22: member `A` declared twice"),
        ("flags F: u8 { }", "t.idl:1:7: flag set `F` has no flags"),
        ("flags F: u8 { A = 1 B = 2 }", "t.idl:1:21: expected `,` or `}` after the flags member, found `B`"),
        ("enum K: u8 { a = 1 }", "t.idl:1:14: expected a variant name in CamelCase, found `a`"),
        ("enum K: u8 { A = 1, B = 1 }", "t.idl:1:25: value 1 already used by `A`"),
        ("enum K: u16 { A = 0x10000 }", "t.idl:1:19: expected a value of type u16 (at most 65535), found 65536"),
        ("enum K: u8 { }", "t.idl:1:6: enum `K` has no variants"),
        ("enum K u8 { A = 1 }", "t.idl:1:8: expected `:` and a base type after the enum name, found `u8`"),
        ("interface x {\n  fn a(k: Kind);\n}\nenum Kind: u8 { A = 1 }", "t.idl:2:11: expected a type (u8..u64, i8..i64, bool, [T; N], bytes<N>, cap, dataspace, map, or a flags or enum name declared above), found `Kind`"),
        ("interface x {\n  fn a(b: bytes<N>);\n}", "t.idl:2:17: expected a maximum byte count (a number or a constant declared above), found `N`"),
        ("const N: u32 = 600;\ninterface x {\n  fn a(b: [u8; N]);\n}", "t.idl:3:16: expected an array length (at most 512), found `N` = 600"),
        ("flags F: u8 { A = 1 }\ninterface x {\n  fn a(b: [F; 2]);\n}", "t.idl:3:12: expected an element type (u8..u64, i8..i64, bool), found `F`"),
        ("error E { [invalid] A = 1, [invalid] B = 2 }", "t.idl:1:28: `A` is already the `invalid` variant of `E`"),
        ("error E { [trusted] A = 1 }", "t.idl:1:12: expected attribute (`invalid`), found `trusted`"),
        ("interface x {\n  const NAME: u8 = 1;\n}", "t.idl:2:9: expected a constant name, found reserved name `NAME`"),
        ("interface x {\n  const A: u8 = 1;\n  const A: u8 = 1;\n}", "t.idl:3:9: `A` already declared at line 2"),
    ];
    for (src, want) in cases {
        assert_eq!(&err(src), want, "source:\n{src}");
    }
}

#[test]
fn layout_limits_are_exact() {
    // 4 words before the data, 60 data words: exactly 64.
    assert!(parse("t.idl", "interface x { fn a(b: bytes<480>); }").is_ok());
    assert!(parse("t.idl", "interface x { fn a(b: bytes<481>); }").is_err());
    assert!(parse("t.idl", "interface x { fn a(b: [u8; 512]); }").is_ok());
    assert!(parse("t.idl", "interface x { fn a(b: [u16; 256], c: u8); }").is_err());
    assert!(parse(
        "t.idl",
        "interface x { fn a(a: cap, b: cap, c: cap, d: dataspace); }"
    )
    .is_ok());
}

#[test]
fn the_repository_interfaces_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../interfaces");
    let (code, files) = sawmill_idlc::compile_dir(&dir, &Default::default()).unwrap();
    assert!(!files.is_empty());
    assert!(code.contains("pub mod idltest"));
}

#[test]
fn a_name_is_declared_in_one_file_only() {
    let dir = std::env::temp_dir().join(format!("idlc-dup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.idl"), "flags F: u8 { A = 1 }\n").unwrap();
    std::fs::write(
        dir.join("b.idl"),
        "// b\nconst X: u8 = 1;\nenum F: u8 { A = 1 }\n",
    )
    .unwrap();
    let e = sawmill_idlc::compile_dir(&dir, &Default::default()).unwrap_err();
    let a = dir.join("a.idl").display().to_string();
    let b = dir.join("b.idl").display().to_string();
    assert_eq!(e, format!("{b}:3:6: `F` is already declared in {a}"));
    std::fs::write(dir.join("b.idl"), "enum G: u8 { A = 1 }\n").unwrap();
    assert!(sawmill_idlc::compile_dir(&dir, &Default::default()).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}
