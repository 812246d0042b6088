//! The little HTTP the metrics endpoint reads: a request's head, and what it asks for. Kept apart
//! from the sockets so that the fuzz target `metrics_http` reads heads exactly as a scrape does.

/// The largest request head read; a scraper's is a few hundred bytes.
pub const MAX_REQUEST: usize = 8192;

/// What a request head asks of the metrics endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `GET /metrics` (query ignored); `head_only` for `HEAD`.
    Metrics { head_only: bool },
    /// `GET /`: a pointer to /metrics.
    Index,
    /// `GET` of any other path.
    NotFound,
    /// Any other method.
    NotAllowed,
    /// More than [`MAX_REQUEST`] bytes without the blank line that ends a head.
    TooLarge,
}

/// What the bytes read so far ask for; `None` while the head is not yet whole (and still within
/// [`MAX_REQUEST`]).
pub fn asked(received: &[u8]) -> Option<Asked> {
    let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (received.len() > MAX_REQUEST).then_some(Asked::TooLarge);
    };
    if end > MAX_REQUEST {
        return Some(Asked::TooLarge);
    }
    let head = &received[..end];
    let line = &head[..head.iter().position(|&b| b == b'\r').unwrap_or(head.len())];
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next().unwrap_or(b""), parts.next().unwrap_or(b""));
    let path = target.split(|&b| b == b'?').next().unwrap_or(b"");
    Some(match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => Asked::Metrics { head_only: method == b"HEAD" },
        (b"GET" | b"HEAD", b"/") => Asked::Index,
        (b"GET" | b"HEAD", _) => Asked::NotFound,
        _ => Asked::NotAllowed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_ask_for_what_their_request_line_says() {
        assert_eq!(asked(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"), None, "not yet whole");
        assert_eq!(asked(b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"), Some(Asked::Metrics { head_only: false }));
        assert_eq!(asked(b"HEAD /metrics HTTP/1.1\r\n\r\n"), Some(Asked::Metrics { head_only: true }));
        assert_eq!(asked(b"GET / HTTP/1.0\r\n\r\n"), Some(Asked::Index));
        assert_eq!(asked(b"GET /other HTTP/1.1\r\n\r\n"), Some(Asked::NotFound));
        assert_eq!(asked(b"POST /metrics HTTP/1.1\r\n\r\n"), Some(Asked::NotAllowed));
        assert_eq!(asked(b"\r\n\r\n"), Some(Asked::NotAllowed), "an empty request line");
        assert_eq!(asked(&[b'a'; MAX_REQUEST + 1]), Some(Asked::TooLarge));
        assert_eq!(asked(&[b'a'; MAX_REQUEST]), None);
        // Not UTF-8: read as bytes, refused as any unknown method is.
        assert_eq!(asked(b"\xff\xfe /metrics\r\n\r\n"), Some(Asked::NotAllowed));
    }
}
