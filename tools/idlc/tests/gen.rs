//! Structure of the generated code (that it compiles and works is `tests/e2e.rs`).
use sawmill_idlc::{compile_str, Options};

fn gen(src: &str) -> String {
    compile_str("t.idl", src, &Options::default()).unwrap()
}

#[test]
fn two_scalar_call_is_one_register_message() {
    let g = gen("interface calc { fn add(a: u64, b: u64) -> (sum: u64); }");
    assert!(g.contains("pub mod calc {"));
    assert!(g.contains("use crate::rpc as __rt;"));
    assert!(g.contains("pub const ADD: u16 = 1;"));
    assert!(g.contains("pub fn add(&self, a: u64, b: u64) -> Result<u64> {"));
    // Registers only: no UTCB access on either side.
    let client = &g[g.find("impl Client").unwrap()..g.find("pub trait Server").unwrap()];
    assert!(!client.contains("utcb()"), "{client}");
    assert!(client.contains("[__rt::Wire::enc(a), __rt::Wire::enc(b), 0, 0]"));
    // One masked compare checks error-free label 0, one word, no items.
    assert!(client.contains("(__m.err | (__m.tag.0 & __rt::SHAPE ^ (1 << 16 | 0 << 24))) != 0"));
    let server = &g[g.find("pub fn dispatch").unwrap()..];
    assert!(!server.contains("utcb()"), "{server}");
    assert!(
        server.contains(
            "fn add(&mut self, badge: u64, a: u64, b: u64) -> core::result::Result<u64, AppError>;"
        ) || g.contains(
            "fn add(&mut self, badge: u64, a: u64, b: u64) -> core::result::Result<u64, AppError>;"
        )
    );
    assert!(server.contains(
        "_ => __k.answer(__srv, __rt::reject(__m.err, __m.tag, __rt::proto::BAD_OPCODE))"
    ));
    assert!(g.contains("pub type AppError = core::convert::Infallible;"));
    assert!(g.contains("pub fn serve<S: Server + ?Sized>(ep: u64, srv: &mut S) -> !"));
    // The continuation gets the server back, so the loop's reply can use its post-reply list.
    assert!(g.contains("__k: K) -> K::Out {"));
    assert!(g.contains("pub fn handle<S: Server + __rt::Serve + ?Sized>(srv: &mut S, m: &__rt::IpcResult, next: __rt::Next) -> __rt::IpcResult {"));
    assert!(g.contains("dispatch_then(srv, m, next)"));
    // The generated serve is the runtime's loop.
    assert!(g.contains("__rt::serve(ep, &mut Only(&mut *srv))"));
}

#[test]
fn long_messages_use_the_utcb_and_oneway_uses_send() {
    let g = gen("error E { X = 5 }\ninterface t raises E {\n fn f(a: u8, b: u8, c: u8, d: u8, e: u8, x: cap) -> (y: bytes<9>);\n [oneway] fn g(v: bool);\n}");
    assert!(g.contains("pub enum E {\n    X = 5,\n}"));
    assert!(g.contains("pub type AppError = super::E;"));
    assert!(g.contains("__u.mr[4] = __rt::Wire::enc(e);"));
    assert!(g.contains("__u.caps_out[0] = x;"));
    // The received capability is deleted after the handler, from the slot it was decoded from.
    assert!(g.contains("let x: u64 = __u.caps_in[0];"));
    assert!(g.contains("let _ = __rt::cap_delete(x);"));
    assert!(g.contains("if __len_y > 9 {"));
    assert!(g.contains("__rt::send(self.ep"));
    assert!(g.contains("fn g(&mut self, badge: u64, v: bool);"));
    assert!(
        g.contains("None => { return __k.answer(__srv, __rt::reject(__m.err, __m.tag, __rt::proto::BAD_VALUE)); }")
    );
}

#[test]
fn trusted_skips_reply_shape_checks_only() {
    let g = gen("[trusted] interface t { fn f(a: u8) -> (b: u8); }");
    let client = &g[g.find("impl Client").unwrap()..g.find("pub trait Server").unwrap()];
    assert!(client.contains("(__m.err | __m.tag.0 & __rt::LABEL) != 0"));
    assert!(client.contains("dec_trusted(__m.w[0])"));
    let server = &g[g.find("pub fn dispatch").unwrap()..];
    assert!(
        server.contains("<u8 as __rt::Wire>::dec(__m.w[0])"),
        "servers never trust"
    );
}

#[test]
fn runtime_path_is_configurable() {
    let g = compile_str(
        "t.idl",
        "interface t { }",
        &Options {
            runtime: "::my::rt".into(),
        },
    )
    .unwrap();
    assert!(g.contains("use ::my::rt as __rt;"));
}

#[test]
fn typed_parameters_are_checked_before_the_handler() {
    let g = gen("flags F: u32 { A = 1, B = 4 }\nenum K: u8 { X = 1, Y = 7 }\n[trusted] interface t {\n const C: u64 = 0x10;\n fn f(a: F, k: K) -> (b: F, l: K);\n}");
    assert!(g.contains("pub struct F(u32);"));
    assert!(g.contains("pub const ALL: F = F(0x5);"));
    assert!(g.contains("pub enum K {\n    X = 0x1,\n    Y = 0x7,\n}"));
    assert!(g.contains("impl core::convert::TryFrom<u8> for K {"));
    assert!(g.contains("    pub const C: u64 = 0x10;"));
    let client = &g[g.find("impl Client").unwrap()..g.find("pub trait Server").unwrap()];
    assert!(client.contains("[__rt::Wire::enc(a.bits()), __rt::Wire::enc(k as u8), 0, 0]"));
    // A trusted reply may drop unknown flag bits, but an enum is checked whatever the trust.
    assert!(
        client.contains("super::F::from_bits_truncate(<u32 as __rt::Wire>::dec_trusted(__m.w[0]))")
    );
    assert!(client.contains("and_then(super::K::from_repr) { Some(v) => v, None => { return Err(__rt::Error::BadReply); } }"));
    let server = &g[g.find("pub fn dispatch").unwrap()..];
    assert!(server.contains("let a = match <u32 as __rt::Wire>::dec(__m.w[0]).and_then(super::F::from_bits) { Some(v) => v, None => { return __k.answer(__srv, __rt::reject(__m.err, __m.tag, __rt::proto::BAD_VALUE)); } };"));
    assert!(server.contains("and_then(super::K::from_repr) { Some(v) => v, None => { return __k.answer(__srv, __rt::reject(__m.err, __m.tag, __rt::proto::BAD_VALUE)); } };"));
    assert!(g.contains("fn f(&mut self, badge: u64, a: super::F, k: super::K) -> core::result::Result<FOut, AppError>;"));
}

#[test]
fn a_map_parameter_is_a_map_item_in_the_request() {
    let g =
        gen("interface t { fn share(r: map, n: u64) -> (); fn put(r: map, b: bytes<8>) -> (); }");
    let client = &g[g.find("impl Client").unwrap()..g.find("pub trait Server").unwrap()];
    assert!(client.contains("__u.map_items[0] = r.item();"));
    assert!(client.contains("op::SHARE as u64 | 4 << 16 | 0 << 24 | 1 << 27"));
    let server = &g[g.find("pub fn dispatch").unwrap()..];
    assert!(
        server.contains("const __T_SHARE: u64 = op::SHARE as u64 | 4 << 16 | 0 << 24 | 1 << 27;")
    );
    assert!(server.contains(
        "let r = __rt::Map { src: 0, dst: __m.w[0], pages: __m.w[1], flags: __m.w[2] };"
    ));
    assert!(server.contains("if __m.tag.0 & __rt::ITEMS != (0 << 24 | 1 << 27) {"));
}
