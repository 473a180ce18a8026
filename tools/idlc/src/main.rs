//! `idlc FILE.idl [--runtime PATH]`: print the Rust code generated for one interface file.
fn main() {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut opts = sawmill_idlc::Options::default();
    while let Some(a) = args.next() {
        if a == "--runtime" {
            match args.next() {
                Some(p) => opts.runtime = p,
                None => usage(),
            }
        } else if a.starts_with('-') || file.is_some() {
            usage();
        } else {
            file = Some(a);
        }
    }
    let Some(file) = file else { usage() };
    let src = match std::fs::read_to_string(&file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("idlc: {file}: {e}");
            std::process::exit(1);
        }
    };
    match sawmill_idlc::compile_str(&file, &src, &opts) {
        Ok(code) => print!("{code}"),
        Err(d) => {
            eprintln!("{d}");
            std::process::exit(1);
        }
    }
}

fn usage() -> ! {
    eprintln!("usage: idlc FILE.idl [--runtime RUST_PATH]");
    std::process::exit(2);
}
