//! Messages encoded by real peers (os-ken's parser, ovs-ofctl) decode, and re-encode to the same
//! bytes. Regenerate the vectors with `.venv/bin/python -m testbed.tools.capture_vectors`.

use ofp::message::Message;

fn vectors(file: &str) -> Vec<(String, Vec<u8>)> {
    let path = format!("{}/tests/vectors/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, hex) = l.split_once(' ').unwrap();
            let bytes = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            (name.to_string(), bytes)
        })
        .collect()
}

fn check(file: &str, min: usize) {
    let all = vectors(file);
    assert!(all.len() >= min, "{file}: only {} vectors", all.len());
    for (name, bytes) in all {
        let (header, msg) = Message::decode(&bytes).unwrap_or_else(|e| panic!("{file} {name}: {e}"));
        assert_eq!(msg.encode(header.xid), bytes, "{file} {name}: re-encoding differs ({msg:?})");
    }
}

#[test]
fn osken_messages_round_trip_byte_for_byte() {
    check("osken.txt", 30);
}

#[test]
fn ovs_ofctl_messages_round_trip_byte_for_byte() {
    check("ovs-ofctl.txt", 12);
}
