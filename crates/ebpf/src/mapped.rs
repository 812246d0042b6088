//! An array map created with `BPF_F_MMAPABLE`, mapped into this process: its 32-bit words stored
//! one at a time, each whole, so that a program reading the array at the same moment finds a
//! word old or new, never half of each (a `BPF_MAP_UPDATE_ELEM` copies the element, in no
//! promised width). The kernel lays the elements out one after another, each rounded up to 8
//! bytes, from the mapping's start (kernel/bpf/arraymap.c).

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::Map;

/// A mapping of one array map's elements, unmapped when dropped.
#[derive(Debug)]
pub struct MappedArray {
    base: *mut u8,
    len: usize,
    /// Bytes from one element to the next.
    stride: usize,
    value_size: usize,
}

// SAFETY: the mapping is plain shared memory; every access goes through atomics.
unsafe impl Send for MappedArray {}

impl MappedArray {
    /// The elements of `map`, an array made with `BPF_F_MMAPABLE`, mapped for writing.
    pub fn new(map: &Map) -> io::Result<MappedArray> {
        let stride = (map.value_size as usize).next_multiple_of(8);
        let len = stride * map.max_entries as usize;
        // SAFETY: a fresh shared mapping of the map's descriptor; the kernel checks its size.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, map.fd(), 0)
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MappedArray { base: base as *mut u8, len, stride, value_size: map.value_size as usize })
    }

    /// Stores `word` whole at byte `offset` (a multiple of 4) of element `index`, after every
    /// store made before it (release: a program that reads it reads those too).
    pub fn store_u32(&self, index: u32, offset: usize, word: u32) {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.value_size, "word at {offset} of an element");
        let at = index as usize * self.stride + offset;
        assert!(at + 4 <= self.len, "element {index} past the array");
        // SAFETY: in the mapping, 4-aligned (the mapping is page-aligned, the stride a multiple
        // of 8); other writers and the kernel only ever access it as words.
        let word_at = unsafe { &*(self.base.add(at) as *const AtomicU32) };
        word_at.store(word, Ordering::Release);
    }

    /// The word at byte `offset` of element `index`.
    pub fn load_u32(&self, index: u32, offset: usize) -> u32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.value_size, "word at {offset} of an element");
        let at = index as usize * self.stride + offset;
        assert!(at + 4 <= self.len, "element {index} past the array");
        // SAFETY: as in `store_u32`.
        let word_at = unsafe { &*(self.base.add(at) as *const AtomicU32) };
        word_at.load(Ordering::Acquire)
    }
}

impl Drop for MappedArray {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of this length.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
