//! A peer's bytes read as a connection reads them, without a socket or a switch: the framer
//! (whole messages however the stream is cut; a length below 8 ends it) and the first steps of
//! dispatch, which answer a message before the switch sees it (a slave's barred request, a
//! message that does not decode). For the fuzz target `agent_framing`; what dispatch does next
//! needs the forwarding thread's handle, which only a running switch makes.

use super::*;

/// What the connection made of one framed message.
#[derive(Debug)]
pub enum Read {
    /// Decoded: what dispatch goes on with (`bytes` as framed).
    Message { bytes: Vec<u8>, msg: Message },
    /// Answered at once with `reply` (an OFPT_ERROR).
    Refused { bytes: Vec<u8>, reply: Vec<u8> },
    /// A header whose length is below 8: answered with `reply`, and the connection closes.
    Broken { head: Vec<u8>, reply: Vec<u8> },
}

/// Reads `stream`, delivered in pieces of `cut` bytes (at least 1), on a connection whose role is
/// slave if `slave`: each whole message, in order, until a broken header or the stream's end
/// (a message cut short by the end is not read).
pub fn read_stream(stream: &[u8], cut: usize, slave: bool) -> Vec<Read> {
    let mut framer = Framer::new(Pieces { rest: stream, cut: cut.max(1) });
    let mut out = Vec::new();
    loop {
        match ready(framer.next()) {
            Ok(Some(Frame::Message(bytes))) => {
                let xid = Header::peek(&bytes).map_or(0, |h| h.xid);
                if slave && barred_to_slaves(&bytes) {
                    let reply = error_reply(xid, ErrorCode::BadRequest(BadRequest::IsSlave), &bytes);
                    out.push(Read::Refused { bytes, reply });
                    continue;
                }
                match Message::decode(&bytes) {
                    Ok((_, msg)) => out.push(Read::Message { bytes, msg }),
                    Err(e) => {
                        let reply = error_reply(xid, e.code, &bytes);
                        out.push(Read::Refused { bytes, reply });
                    }
                }
            }
            Ok(Some(Frame::Broken(head))) => {
                let xid = Header::peek(&head).map_or(0, |h| h.xid);
                let reply = error_reply(xid, ErrorCode::BadRequest(BadRequest::BadLen), &head);
                out.push(Read::Broken { head, reply });
                return out;
            }
            Ok(None) | Err(_) => return out,
        }
    }
}

/// A stream that gives `cut` bytes a read: a peer's segments.
struct Pieces<'a> {
    rest: &'a [u8],
    cut: usize,
}

impl tokio::io::AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = self.cut.min(self.rest.len()).min(buf.remaining());
        let (now, later) = self.rest.split_at(n);
        buf.put_slice(now);
        self.rest = later;
        std::task::Poll::Ready(Ok(()))
    }
}

/// The value of a future that never waits (its reads are all ready).
fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("an in-memory read waited"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_cut_anywhere_reads_as_the_same_messages_and_ends_at_a_broken_header() {
        let echo = Message::EchoRequest(b"ping".to_vec()).encode(7);
        let flow_mod_cut = [OFP_VERSION, ofp::message::msg_type::FLOW_MOD, 0, 8, 0, 0, 0, 9];
        let broken = [OFP_VERSION, 2, 0, 4, 0, 0, 0, 3];
        let stream = [&echo[..], &flow_mod_cut, &broken, &echo].concat();
        for cut in [1, 3, 8, 1000] {
            let read = read_stream(&stream, cut, true);
            assert!(matches!(&read[0], Read::Message { msg: Message::EchoRequest(d), .. } if d == b"ping"), "{read:?}");
            // A slave's flow-mod is refused as a slave's before it is decoded.
            let Read::Refused { reply, .. } = &read[1] else { panic!("{read:?}") };
            let (h, Message::Error(e)) = Message::decode(reply).unwrap() else { panic!("{reply:?}") };
            assert_eq!((h.xid, e.code), (9, ErrorCode::BadRequest(BadRequest::IsSlave)));
            let Read::Broken { reply, .. } = &read[2] else { panic!("{read:?}") };
            assert_eq!(Message::decode(reply).unwrap().0.xid, 3);
            assert_eq!(read.len(), 3, "nothing is read past a broken header");
        }
        let read = read_stream(&[&echo[..], &flow_mod_cut].concat(), 5, false);
        let Read::Refused { reply, .. } = &read[1] else { panic!("{read:?}") };
        let (_, Message::Error(e)) = Message::decode(reply).unwrap() else { panic!() };
        assert_ne!(e.code, ErrorCode::BadRequest(BadRequest::IsSlave), "a master's is decoded, and fails as malformed");
        assert_eq!(read_stream(&echo[..echo.len() - 1], 4, false).len(), 0, "a message cut short is not read");
    }
}
