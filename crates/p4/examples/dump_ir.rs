fn main() {
    let path = std::env::args().nth(1).expect("a P4 file");
    let text = std::fs::read_to_string(&path).unwrap();
    let (p, c) = p4::front_end_at(std::path::Path::new(&path), &text).unwrap_or_else(|e| panic!("{e}"));
    print!("{}", p4::midend::lower(&p, &c).unwrap_or_else(|e| panic!("{e}")));
}
