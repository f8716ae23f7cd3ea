//! `nccom-test`: the vendor's collective benchmark front (docs/neff.md; being written).

fn main() {
    eprintln!("nccom-test: not implemented yet");
    std::process::exit(2);
}
