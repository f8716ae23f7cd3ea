//! `opennrt`: the command-line tool (design.md §3). Subcommands arrive with the issues that
//! build what they show: `perf`, `lower`, `ctx-log`, `verify`.

fn usage() -> ! {
    eprintln!("usage: opennrt <command>\n\ncommands:\n  version    print the OpenNRT version");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("version") | Some("--version") => println!("opennrt {}", env!("CARGO_PKG_VERSION")),
        _ => usage(),
    }
}
