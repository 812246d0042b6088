//! The metrics endpoint's request reading (`edgeflow::http::asked`), on any bytes delivered in
//! any pieces: no panic; a head is judged once it is whole, the same however the bytes came,
//! and never needs more than MAX_REQUEST bytes to be judged.
#![no_main]
use edgeflow::http::{asked, MAX_REQUEST};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, stream)) = data.split_first() else { return };
    let whole = asked(stream);
    // As the endpoint reads it: the bytes so far, after each read of `cut` bytes, until judged.
    let mut received = Vec::new();
    let mut judged = None;
    for piece in stream.chunks(cut.max(1) as usize) {
        received.extend_from_slice(piece);
        if let Some(a) = asked(&received) {
            judged = Some(a);
            break;
        }
    }
    match judged {
        // Judged before the end: more bytes after the head change nothing, unless it was judged
        // too large (then the whole may hold a head that ends later, past the limit).
        Some(a) => assert!(whole == Some(a) || received.len() > MAX_REQUEST, "{a:?} in pieces, {whole:?} whole"),
        None => assert!(whole.is_none() && stream.len() <= MAX_REQUEST, "{whole:?} whole, nothing in pieces"),
    }
    if stream.len() > MAX_REQUEST + 3 {
        assert!(asked(&stream[..MAX_REQUEST + 4]).is_some(), "a head past the limit is left waiting");
    }
});
