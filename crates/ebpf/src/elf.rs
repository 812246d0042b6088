//! Reading an eBPF object's ELF, without the kernel: sections, symbols, classic map definitions,
//! programs and the relocations their instructions need, in either byte order (the target's:
//! clang's `bpfel` or `bpfeb`). What the loader then does with them is `lib.rs`.

use std::collections::HashMap;
use std::io;

use crate::{bad, cstr, objects, prog_type};

/// The byte order of an object's ELF headers and instructions: clang's `bpfel` or `bpfeb`, the
/// target's. The kernel takes only its own, so a load checks it; reading either lets the parser be
/// tested on both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

impl ByteOrder {
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "big") { ByteOrder::Big } else { ByteOrder::Little };

    pub(crate) fn u16(self, b: &[u8], at: usize) -> u16 {
        let v = b[at..at + 2].try_into().unwrap();
        if self == ByteOrder::Big {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        }
    }
    pub(crate) fn u32(self, b: &[u8], at: usize) -> u32 {
        let v = b[at..at + 4].try_into().unwrap();
        if self == ByteOrder::Big {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        }
    }
    pub(crate) fn u64(self, b: &[u8], at: usize) -> u64 {
        let v = b[at..at + 8].try_into().unwrap();
        if self == ByteOrder::Big {
            u64::from_be_bytes(v)
        } else {
            u64::from_le_bytes(v)
        }
    }
    pub(crate) fn put_u16(self, b: &mut [u8], v: u16) {
        b.copy_from_slice(&if self == ByteOrder::Big { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    pub(crate) fn put_u32(self, b: &mut [u8], v: u32) {
        b.copy_from_slice(&if self == ByteOrder::Big { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    /// An instruction's second byte holds two 4-bit register fields, `dst_reg` first as C lays
    /// out bitfields: the low nibble on a little-endian target, the high one on a big-endian one.
    pub(crate) fn regs(self, dst: u8, src: u8) -> u8 {
        if self == ByteOrder::Big {
            (dst << 4) | (src & 0xf)
        } else {
            (src << 4) | (dst & 0xf)
        }
    }
    pub(crate) fn src_reg(self, regs: u8) -> u8 {
        if self == ByteOrder::Big {
            regs & 0xf
        } else {
            regs >> 4
        }
    }
    pub(crate) fn dst_reg(self, regs: u8) -> u8 {
        if self == ByteOrder::Big {
            regs >> 4
        } else {
            regs & 0xf
        }
    }
}

const SHT_SYMTAB: u32 = 2;
const SHT_REL: u32 = 9;
const SHF_EXECINSTR: u64 = 4;

/// Program type from the section name, as clang/libbpf conventions spell it.
fn section_prog_type(name: &str) -> Option<u32> {
    if name == "xdp" || name.starts_with("xdp/") || frags_section(name) {
        Some(prog_type::XDP)
    } else if name == "tc" || name.starts_with("tc/") || name.starts_with("classifier") {
        Some(prog_type::SCHED_CLS)
    } else {
        None
    }
}

/// An XDP program that takes frames spread over several buffers (`xdp.frags`, libbpf's name): it
/// is loaded with `BPF_F_XDP_HAS_FRAGS`, which an interface with an MTU above a page needs.
fn frags_section(name: &str) -> bool {
    name == "xdp.frags" || name.starts_with("xdp.frags/")
}

/// What an object holds, read from its ELF without touching the kernel.
#[derive(Debug)]
pub(crate) struct Parsed<'a> {
    pub order: ByteOrder,
    pub maps: Vec<MapDef>,
    pub programs: Vec<ProgramSection<'a>>,
    pub license: Vec<u8>,
}

/// A classic map definition: five u32s (type, key size, value size, max entries, flags).
#[derive(Debug, PartialEq)]
pub(crate) struct MapDef {
    pub name: String,
    pub typ: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
}

/// An executable section of a known program type, its functions (name, start, size in bytes) and
/// the instructions its relocations patch (byte offset, what they refer to).
#[derive(Debug)]
pub(crate) struct ProgramSection<'a> {
    pub prog_type: u32,
    /// Takes multi-buffer frames (`xdp.frags`).
    pub frags: bool,
    pub code: &'a [u8],
    pub functions: Vec<(String, usize, usize)>,
    pub relocations: Vec<(usize, Relocation)>,
}

#[derive(Debug, PartialEq)]
pub(crate) enum Relocation {
    Map(String),
    Kfunc(String),
}

struct Section<'a> {
    name: String,
    typ: u32,
    flags: u64,
    data: &'a [u8],
    link: u32,
    info: u32,
}

/// The bytes of the section called `name` in the object `elf`, if it has one: what a tool that
/// made the object left in it beside the programs (`edgeflow p4 compile`'s fingerprint).
pub fn section(elf: &[u8], name: &str) -> io::Result<Option<Vec<u8>>> {
    let (_, sections) = sections(elf)?;
    Ok(sections.iter().find(|s| s.name == name).map(|s| s.data.to_vec()))
}

fn sections(elf: &[u8]) -> io::Result<(ByteOrder, Vec<Section<'_>>)> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 {
        return Err(bad("not an ELF64 object".into()));
    }
    let order = match elf[5] {
        1 => ByteOrder::Little,
        2 => ByteOrder::Big,
        other => return Err(bad(format!("ELF byte order {other} is neither little (1) nor big (2)"))),
    };
    let shoff = order.u64(elf, 0x28) as usize;
    let shentsize = order.u16(elf, 0x3a) as usize;
    let shnum = order.u16(elf, 0x3c) as usize;
    let shstrndx = order.u16(elf, 0x3e) as usize;
    let header = |i: usize| -> io::Result<(u32, u32, u64, usize, usize, u32, u32)> {
        let at = shoff + i * shentsize;
        if at + 64 > elf.len() {
            return Err(bad("section header out of range".into()));
        }
        Ok((
            order.u32(elf, at),
            order.u32(elf, at + 4),
            order.u64(elf, at + 8),
            order.u64(elf, at + 24) as usize,
            order.u64(elf, at + 32) as usize,
            order.u32(elf, at + 40),
            order.u32(elf, at + 44),
        ))
    };
    let (_, _, _, stroff, strsize, _, _) = header(shstrndx)?;
    let shstr = elf.get(stroff..stroff + strsize).ok_or_else(|| bad("bad string table".into()))?;
    let mut sections = Vec::with_capacity(shnum);
    for i in 0..shnum {
        let (name, typ, flags, off, size, link, info) = header(i)?;
        let data = if typ == 8 {
            &[][..]
        } else {
            elf.get(off..off + size).ok_or_else(|| bad("section data out of range".into()))?
        };
        sections.push(Section { name: cstr(shstr, name as usize), typ, flags, data, link, info });
    }
    Ok((order, sections))
}

impl<'a> Parsed<'a> {
    pub(crate) fn read(elf: &'a [u8]) -> io::Result<Parsed<'a>> {
        if elf.is_empty() && !objects::BUILT {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this edgeflow was built without its eBPF objects (cargo feature `fastpath`): \
                 no kernel fast path",
            ));
        }
        let (order, sections) = sections(elf)?;
        let symtab = sections.iter().find(|s| s.typ == SHT_SYMTAB).ok_or_else(|| bad("no symbol table".into()))?;
        let strtab = sections.get(symtab.link as usize).ok_or_else(|| bad("no string table".into()))?.data;
        // (name, section index, value, size, is a function)
        let symbols: Vec<(String, usize, u64, u64, bool)> = symtab
            .data
            .chunks_exact(24)
            .map(|s| {
                (
                    cstr(strtab, order.u32(s, 0) as usize),
                    order.u16(s, 6) as usize,
                    order.u64(s, 8),
                    order.u64(s, 16),
                    s[4] & 0xf == 2,
                )
            })
            .collect();
        let license =
            sections.iter().find(|s| s.name == "license").map(|s| s.data.to_vec()).unwrap_or_else(|| b"GPL\0".to_vec());

        // Maps: 20-byte definitions at each symbol's offset in "maps".
        let maps_idx = sections.iter().position(|s| s.name == "maps");
        let mut maps = Vec::new();
        let mut map_at: HashMap<usize, String> = HashMap::new();
        if let Some(mi) = maps_idx {
            for (name, _, value, _, _) in symbols.iter().filter(|s| s.1 == mi && !s.0.is_empty()) {
                let d = sections[mi].data;
                let v = *value as usize;
                if v + 20 > d.len() {
                    return Err(bad(format!("map {name}: definition out of range")));
                }
                maps.push(MapDef {
                    name: name.clone(),
                    typ: order.u32(d, v),
                    key_size: order.u32(d, v + 4),
                    value_size: order.u32(d, v + 8),
                    max_entries: order.u32(d, v + 12),
                    flags: order.u32(d, v + 16),
                });
                map_at.insert(v, name.clone());
            }
        }
        // Programs: each function in an executable section of a known type; relocations point at
        // maps or at kernel functions.
        let mut programs = Vec::new();
        for (idx, s) in sections.iter().enumerate() {
            let Some(prog_type) = section_prog_type(&s.name) else { continue };
            if s.flags & SHF_EXECINSTR == 0 || s.data.is_empty() {
                continue;
            }
            let mut relocations = Vec::new();
            for rel in sections.iter().filter(|r| r.typ == SHT_REL && r.info as usize == idx) {
                for r in rel.data.chunks_exact(16) {
                    let offset = order.u64(r, 0) as usize;
                    let sym = (order.u64(r, 8) >> 32) as usize;
                    let (sname, shndx, value, _, _) =
                        symbols.get(sym).ok_or_else(|| bad("relocation symbol out of range".into()))?;
                    if offset + 8 > s.data.len() {
                        return Err(bad(format!("{}: relocation past its section", s.name)));
                    }
                    if *shndx == 0 && s.data[offset] == 0x85 {
                        relocations.push((offset, Relocation::Kfunc(sname.clone())));
                    } else if Some(*shndx) == maps_idx {
                        if s.data[offset] != 0x18 {
                            return Err(bad(format!("{}: relocation not on a 64-bit load", s.name)));
                        }
                        let map = map_at.get(&(*value as usize)).unwrap_or(sname);
                        relocations.push((offset, Relocation::Map(map.clone())));
                    } else {
                        return Err(bad(format!("{}: relocation to {sname}, which is not a map", s.name)));
                    }
                }
            }
            let functions = symbols
                .iter()
                .filter(|f| f.4 && f.1 == idx)
                .map(|(name, _, start, size, _)| (name.clone(), *start as usize, *size as usize))
                .collect();
            programs.push(ProgramSection { prog_type, frags: frags_section(&s.name), code: s.data, functions, relocations });
        }
        Ok(Parsed { order, maps, programs, license })
    }
}
