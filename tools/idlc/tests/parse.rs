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
        ("interface x {\n  fn a(b: u65);\n}", "t.idl:2:11: expected a type (u8..u64, i8..i64, bool, [T; N], bytes<N>, cap, dataspace, map), found `u65`"),
        ("interface x {\n  fn a(b u64);\n}", "t.idl:2:10: expected `:` and a type after the parameter name, found `u64`"),
        ("interface x {\n  fn a(b: u64 c: u8);\n}", "t.idl:2:15: expected `,` or `)` after the parameter, found `c`"),
        ("interfac x {}", "t.idl:1:1: expected `interface` or `error`, found `interfac`"),
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
        ("interface x {\n  fn a(m: map);\n}", "t.idl:2:6: the request of `a` has a `map` parameter; map items travel only in replies"),
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
        ("interface x {\n  fn a(b: [u8; 99999999999999999999]);\n}", "t.idl:2:16: expected a number (decimal or 0x hex, at most 2^64-1), found `99999999999999999999`"),
        ("interface x {\n  fn a();", "t.idl:2:10: expected `fn`, an attribute list or `}`, found end of file"),
        ("interface x {}\ninterface x {}", "t.idl:2:11: interface `x` declared twice"),
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
