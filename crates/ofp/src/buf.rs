//! Bounds-checked big-endian reading and writing.
//!
//! Every read goes through [`Reader`], which never indexes past its slice: a short buffer becomes the
//! caller's chosen error instead of a panic. That is what lets `decode` promise it never panics.

use crate::error::{DecodeError, ErrorCode};

/// A cursor over a byte slice. Reads past the end return `Err(self.short)`.
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    short: ErrorCode,
}

impl<'a> Reader<'a> {
    /// `short` is the error reported when a read runs past the end (it depends on what is being parsed:
    /// a short action is `BAD_ACTION/BAD_LEN`, a short message `BAD_REQUEST/BAD_LEN`).
    pub fn new(buf: &'a [u8], short: ErrorCode) -> Self {
        Reader { buf, pos: 0, short }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    fn err(&self, what: &'static str) -> DecodeError {
        DecodeError::new(self.short, what)
    }

    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(self.err(what));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<(), DecodeError> {
        self.bytes(n, what).map(|_| ())
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.bytes(1, what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    /// Everything that is left.
    pub fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    /// Split off a sub-reader of `n` bytes that reports `short` when it runs out.
    pub fn sub(&mut self, n: usize, short: ErrorCode, what: &'static str) -> Result<Reader<'a>, DecodeError> {
        let bytes = self.bytes(n, what)?;
        Ok(Reader::new(bytes, short))
    }

    /// A fixed-width, NUL-padded string field.
    pub fn string(&mut self, n: usize, what: &'static str) -> Result<String, DecodeError> {
        let raw = self.bytes(n, what)?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        Ok(String::from_utf8_lossy(&raw[..end]).into_owned())
    }
}

/// Big-endian appends onto a `Vec<u8>`.
pub trait Writer {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_zeros(&mut self, n: usize);
    /// A fixed-width string field, truncated so that a terminating NUL always fits.
    fn put_string(&mut self, s: &str, n: usize);
    /// Overwrite a u16 already written at `at` (used for length fields known only at the end).
    fn patch_u16(&mut self, at: usize, v: u16);
    /// Pad with zeros up to a multiple of 8 counted from `start`.
    fn pad8_from(&mut self, start: usize);
}

impl Writer for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    fn put_string(&mut self, s: &str, n: usize) {
        let bytes = s.as_bytes();
        let mut take = bytes.len().min(n.saturating_sub(1));
        // Cut between characters: half a UTF-8 sequence on the wire is not text (fuzzing found it).
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.extend_from_slice(&bytes[..take]);
        self.put_zeros(n - take);
    }
    fn patch_u16(&mut self, at: usize, v: u16) {
        self[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    fn pad8_from(&mut self, start: usize) {
        let len = self.len() - start;
        self.put_zeros((8 - len % 8) % 8);
    }
}

/// Length rounded up to a multiple of 8.
pub fn pad8(len: usize) -> usize {
    len.div_ceil(8) * 8
}
