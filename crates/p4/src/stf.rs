//! p4c's STF test scripts (issue 52, item 4: the measure): the text read into commands, and the
//! commands run against a program on a target, each expectation judged. A script is p4c's way
//! of saying what a program must do: table entries, multicast and mirroring set-up, frames in
//! (`packet PORT HEX`) and frames out (`expect PORT HEX`, `*` a don't-care nibble, `$` the end
//! of the frame), counter and register reads. The grammar and the judging follow p4c's BMv2
//! runner (`backends/bmv2/bmv2stf.py`, `tools/stf/`): outputs are compared per port, in order,
//! once every frame has gone in; a frame out may be longer than its expectation unless `$` ends
//! it; a port named only by `expect PORT` (no data) may send anything.
//!
//! This file reads; `stf/runner.rs` runs and judges. The runner uses only `run::Switch`'s control-plane API and P4Info's names, so the same script
//! drives the software target and the kernel's (`Target`): the target decides only what frames
//! leave. Names resolve as p4c's runner resolves them: a table or action by its control-plane
//! name, its `Block.name`, or a unique dotted suffix (`tbl` for `ingress.tbl`); a key field by
//! P4Info's name or a unique dotted suffix (`ipv4.dstAddr` for `hdr.ipv4.dstAddr`).

mod runner;

pub use runner::{load, ports, run, Check, Outcome, Sent, Software, Target, Verdict};

/// A script, as commands with the line each was written on (from 1).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Script {
    pub commands: Vec<(usize, Command)>,
}

/// A number as a script writes a key: its value, which of its bits were written as digits rather
/// than `*`, and how many bits its digits cover (p4c's runner derives a ternary mask and an LPM
/// prefix from those). A decimal covers no fixed number of bits: `bits` is None.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Number {
    pub value: u128,
    pub care: u128,
    pub bits: Option<u32>,
}

/// How one key field is written in `add`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyText {
    /// A number, perhaps with `*` digits.
    Value(Number),
    /// `value&&&mask`.
    Masked { value: u128, mask: u128 },
    /// `value/prefix`.
    Prefix { value: u128, len: u32 },
    /// `low->high`.
    Range { low: u128, high: u128 },
}

/// An expected frame: per nibble, its value or None (`*`), and whether `$` closed it (the frame
/// must end there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    pub nibbles: Vec<Option<u8>>,
    pub ends: bool,
}

/// The counter a `check_counter` reads: an index into an indirect counter, or the entry an `add`
/// named (`= ID`) for a direct one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CounterCell {
    Index(usize),
    Entry(String),
}

/// `check_counter`'s condition: packets or bytes, the comparison, the number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterCheck {
    pub bytes: bool,
    pub op: String,
    pub value: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    Add {
        table: String,
        priority: Option<i64>,
        keys: Vec<(String, KeyText)>,
        action: String,
        args: Vec<(String, u128)>,
        /// `= ID`: the name `check_counter` reads the entry's direct counter by.
        id: Option<String>,
    },
    SetDefault {
        table: String,
        action: String,
        args: Vec<(String, u128)>,
    },
    RemoveAll,
    Packet {
        port: u32,
        frame: Vec<u8>,
    },
    /// None: any frames may leave the port.
    Expect {
        port: u32,
        frame: Option<Expected>,
    },
    NoPacket,
    McGroupCreate {
        group: u32,
    },
    McNodeCreate {
        rid: u32,
        ports: Vec<u32>,
    },
    McNodeAssociate {
        group: u32,
        node: u32,
    },
    MirroringAdd {
        session: u32,
        port: u32,
    },
    MirroringAddMc {
        session: u32,
        group: u32,
    },
    MirroringGet {
        session: u32,
    },
    CheckCounter {
        name: String,
        cell: CounterCell,
        check: Option<CounterCheck>,
    },
    RegisterRead {
        name: String,
        index: usize,
    },
    RegisterWrite {
        name: String,
        index: usize,
        value: u128,
    },
    RegisterReset {
        name: String,
    },
    /// `meter_set_rates NAME INDEX RATE:BURST RATE:BURST` (index None: `meter_array_set_rates`,
    /// every cell). Rates are per microsecond, as BMv2 takes them.
    MeterSetRates {
        name: String,
        index: Option<usize>,
        rates: Vec<(f64, u64)>,
    },
    MeterGetRates {
        name: String,
        index: usize,
    },
    Wait,
}

/// Where p4c's STF corpus is read in place (never copied into the project): `P4C_STF_DIR`, else
/// `shared/p4c-stf` beside the repository.
pub fn corpus_dir() -> std::path::PathBuf {
    match std::env::var_os("P4C_STF_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        // crates/p4 -> the repository -> the directory that holds it and `shared/`
        None => std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/p4c-stf"),
    }
}

/// Reads a script; an error names `file` and the line.
pub fn parse(file: &str, text: &str) -> Result<Script, String> {
    let mut script = Script::default();
    for (at, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let command = parse_line(line).map_err(|e| format!("{file}:{}: {e}", at + 1))?;
        script.commands.push((at + 1, command));
    }
    Ok(script)
}

fn parse_line(line: &str) -> Result<Command, String> {
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let rest = rest.trim();
    let words: Vec<&str> = rest.split_whitespace().collect();
    let word = word.to_ascii_lowercase();
    let int = |i: usize, what: &str| -> Result<u32, String> {
        let w = words.get(i).ok_or_else(|| format!("{word}: {what} is missing"))?;
        w.parse().map_err(|_| format!("{word}: {what} '{w}' is not a decimal number"))
    };
    let count = |n: usize| -> Result<(), String> {
        if words.len() != n {
            return Err(format!("{word} takes {n} word(s), not {}: '{rest}'", words.len()));
        }
        Ok(())
    };
    Ok(match word.as_str() {
        "add" => parse_add(rest)?,
        "setdefault" => {
            let (table, action) = rest.split_once(char::is_whitespace).ok_or("setdefault TABLE ACTION(ARGS)")?;
            let (action, args, id) = parse_action(action.trim())?;
            if id.is_some() {
                return Err("setdefault names no entry (= ID)".into());
            }
            Command::SetDefault { table: table.to_string(), action, args }
        }
        "remove" if rest.eq_ignore_ascii_case("all") => Command::RemoveAll,
        "remove" => return Err("only 'remove all' removes entries".into()),
        "packet" => {
            let port = int(0, "the port")?;
            let hex: String = words[1..].concat();
            let mut nibbles = Vec::with_capacity(hex.len());
            for c in hex.chars() {
                nibbles.push(c.to_digit(16).ok_or_else(|| format!("packet: '{c}' is not a hex digit"))? as u8);
            }
            if nibbles.is_empty() || nibbles.len() % 2 == 1 {
                return Err(format!("packet: {} hex digits do not make whole bytes", nibbles.len()));
            }
            Command::Packet { port, frame: nibbles.chunks(2).map(|p| p[0] << 4 | p[1]).collect() }
        }
        "expect" => {
            let port = int(0, "the port")?;
            let text: String = words[1..].concat();
            if text.is_empty() {
                return Ok(Command::Expect { port, frame: None });
            }
            let (body, ends) = match text.strip_suffix('$') {
                Some(b) => (b, true),
                None => (text.as_str(), false),
            };
            let mut nibbles = Vec::with_capacity(body.len());
            for c in body.chars() {
                nibbles.push(match c {
                    '*' => None,
                    _ => Some(
                        c.to_digit(16).ok_or_else(|| format!("expect: '{c}' is not a hex digit, * or a final $"))?
                            as u8,
                    ),
                });
            }
            Command::Expect { port, frame: Some(Expected { nibbles, ends }) }
        }
        "no_packet" => Command::NoPacket,
        "mc_mgrp_create" => {
            count(1)?;
            Command::McGroupCreate { group: int(0, "the group")? }
        }
        "mc_node_create" => {
            let rid = int(0, "the replication id")?;
            let ports = (1..words.len()).map(|i| int(i, "a port")).collect::<Result<Vec<_>, _>>()?;
            Command::McNodeCreate { rid, ports }
        }
        "mc_node_associate" => {
            count(2)?;
            Command::McNodeAssociate { group: int(0, "the group")?, node: int(1, "the node handle")? }
        }
        "mirroring_add" => {
            count(2)?;
            Command::MirroringAdd { session: int(0, "the session")?, port: int(1, "the port")? }
        }
        "mirroring_add_mc" => {
            count(2)?;
            Command::MirroringAddMc { session: int(0, "the session")?, group: int(1, "the group")? }
        }
        "mirroring_get" => {
            count(1)?;
            Command::MirroringGet { session: int(0, "the session")? }
        }
        "check_counter" => parse_check_counter(rest)?,
        "register_read" => {
            count(2)?;
            Command::RegisterRead { name: words[0].to_string(), index: int(1, "the index")? as usize }
        }
        "register_write" => {
            count(3)?;
            let value = number(words[2])?;
            if value.care != all_ones(value.bits) {
                return Err("register_write: a value has no * digits".into());
            }
            Command::RegisterWrite {
                name: words[0].to_string(),
                index: int(1, "the index")? as usize,
                value: value.value,
            }
        }
        "register_reset" => {
            count(1)?;
            Command::RegisterReset { name: words[0].to_string() }
        }
        "meter_set_rates" | "meter_array_set_rates" => {
            let array = word == "meter_array_set_rates";
            let first = if array { 1 } else { 2 };
            count(first + 2)?;
            let index = if array { None } else { Some(int(1, "the index")? as usize) };
            let rates = words[first..].iter().map(|w| rate(w)).collect::<Result<Vec<_>, _>>()?;
            Command::MeterSetRates { name: words[0].to_string(), index, rates }
        }
        "meter_get_rates" => {
            count(2)?;
            Command::MeterGetRates { name: words[0].to_string(), index: int(1, "the index")? as usize }
        }
        "wait" => Command::Wait,
        _ => return Err(format!("'{word}' is not an STF command")),
    })
}

/// `RATE:BURST`, the rate a decimal fraction (units per microsecond).
fn rate(word: &str) -> Result<(f64, u64), String> {
    let bad = || format!("'{word}' is not RATE:BURST (units per microsecond, units)");
    let (r, b) = word.split_once(':').ok_or_else(bad)?;
    let r: f64 = r.parse().map_err(|_| bad())?;
    Ok((r.max(0.0), b.parse().map_err(|_| bad())?))
}

pub(crate) fn all_ones(bits: Option<u32>) -> u128 {
    match bits {
        None => u128::MAX,
        Some(b) if b >= 128 => u128::MAX,
        Some(b) => (1u128 << b) - 1,
    }
}

/// A number as keys and action data write it: decimal, or 0x / 0b / 0o digits of which `*`
/// ones (not in decimal) are don't-cares.
pub fn number(text: &str) -> Result<Number, String> {
    let (radix, digits) = match text.get(..2).map(str::to_ascii_lowercase).as_deref() {
        Some("0x") => (16u32, &text[2..]),
        Some("0b") => (2, &text[2..]),
        Some("0o") => (8, &text[2..]),
        _ => (10, text),
    };
    let digits = digits.replace('_', "");
    if digits.is_empty() {
        return Err(format!("'{text}' is not a number"));
    }
    if radix == 10 {
        let value = digits.parse::<u128>().map_err(|_| format!("'{text}' is not a number"))?;
        return Ok(Number { value, care: u128::MAX, bits: None });
    }
    let per = radix.trailing_zeros();
    if digits.len() as u32 * per > 128 {
        return Err(format!("'{text}' is wider than 128 bits"));
    }
    let (mut value, mut care) = (0u128, 0u128);
    for c in digits.chars() {
        value <<= per;
        care <<= per;
        if c == '*' {
            continue;
        }
        let d = c.to_digit(radix).ok_or_else(|| format!("'{text}': '{c}' is not a base-{radix} digit"))?;
        value |= d as u128;
        care |= (1 << per) - 1;
    }
    Ok(Number { value, care, bits: Some(digits.len() as u32 * per) })
}

fn whole(text: &str) -> Result<u128, String> {
    let n = number(text)?;
    if n.care != all_ones(n.bits) {
        return Err(format!("'{text}': * digits only in a key's value"));
    }
    Ok(n.value)
}

fn key_text(text: &str) -> Result<KeyText, String> {
    if let Some((v, m)) = text.split_once("&&&") {
        return Ok(KeyText::Masked { value: whole(v)?, mask: whole(m)? });
    }
    if let Some((v, p)) = text.split_once('/') {
        let len = p.parse().map_err(|_| format!("'{text}': the prefix length '{p}' is not a decimal number"))?;
        return Ok(KeyText::Prefix { value: whole(v)?, len });
    }
    if let Some((l, h)) = text.split_once("->") {
        return Ok(KeyText::Range { low: whole(l)?, high: whole(h)? });
    }
    Ok(KeyText::Value(number(text)?))
}

/// An action as a script calls it: its name, its arguments by name, and the `= ID` after it.
type ActionCall = (String, Vec<(String, u128)>, Option<String>);

/// `ACTION(NAME:VALUE, ...)` and an optional `= ID` after it.
fn parse_action(text: &str) -> Result<ActionCall, String> {
    let (name, rest) = text.split_once('(').ok_or_else(|| format!("'{text}': an action is NAME(ARGS)"))?;
    let (inner, after) = rest.split_once(')').ok_or_else(|| format!("'{text}': the action's ')' is missing"))?;
    let mut args = Vec::new();
    for arg in inner.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let (n, v) = arg.split_once(':').ok_or_else(|| format!("'{arg}': an action argument is NAME:VALUE"))?;
        args.push((n.trim().to_string(), whole(v.trim())?));
    }
    let after = after.trim();
    let id = match after.strip_prefix('=') {
        Some(id) if !id.trim().is_empty() => Some(id.trim().to_string()),
        Some(_) => return Err("'=' names the entry: '= ID'".into()),
        None if after.is_empty() => None,
        None => return Err(format!("'{after}' after the action")),
    };
    Ok((name.trim().to_string(), args, id))
}

fn parse_add(rest: &str) -> Result<Command, String> {
    let usage = "add TABLE [PRIORITY] FIELD:VALUE ... ACTION(ARG:VALUE, ...)";
    let open = rest.find('(').ok_or_else(|| format!("no action: {usage}"))?;
    // The action is the word the '(' is in; everything before it is the table, priority, keys.
    let start = rest[..open].rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let (action, args, id) = parse_action(&rest[start..])?;
    let mut words = rest[..start].split_whitespace();
    let table = words.next().ok_or_else(|| format!("no table: {usage}"))?.to_string();
    let mut words = words.peekable();
    let priority = match words.peek() {
        Some(w) if w.bytes().all(|b| b.is_ascii_digit()) => {
            Some(words.next().unwrap().parse().map_err(|_| "the priority is too large".to_string())?)
        }
        _ => None,
    };
    let mut keys = Vec::new();
    for w in words {
        let (field, value) = w.split_once(':').ok_or_else(|| format!("'{w}': a key is FIELD:VALUE ({usage})"))?;
        keys.push((field.to_string(), key_text(value)?));
    }
    Ok(Command::Add { table, priority, keys, action, args, id })
}

fn parse_check_counter(rest: &str) -> Result<Command, String> {
    let usage = "check_counter NAME(INDEX) [packets|bytes OP VALUE]";
    let (name, after) = rest.split_once('(').ok_or_else(|| usage.to_string())?;
    let (cell, cond) = after.split_once(')').ok_or_else(|| usage.to_string())?;
    let cell = match cell.trim().strip_prefix('$') {
        Some(id) => CounterCell::Entry(id.to_string()),
        None => CounterCell::Index(whole(cell.trim())? as usize),
    };
    let words: Vec<&str> = cond.split_whitespace().collect();
    let check = match words.as_slice() {
        [] => None,
        [kind @ ("packets" | "bytes"), op @ ("==" | "!=" | "<=" | "<" | ">=" | ">"), v] => {
            Some(CounterCheck { bytes: *kind == "bytes", op: op.to_string(), value: whole(v)? as u64 })
        }
        _ => return Err(usage.to_string()),
    };
    Ok(Command::CheckCounter { name: name.trim().to_string(), cell, check })
}
