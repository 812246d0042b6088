//! A P4 program in the kernel (issue 36, item 2): the object `p4::backends::ebpf` generates for it,
//! compiled by clang when the switch starts, and its maps kept in step with the software
//! target's tables, groups and registers. Its `p4_tc` / `p4_xdp` programs take the ports in place
//! of the megaflow programs (the fast path's own object still gives the switch its port and
//! upcall bookkeeping); a frame the kernel cannot decide goes up as a miss does, and userspace
//! runs it through the same program.
//!
//! The software target stays the truth for what a control plane writes: every change moves its
//! generation, and the kernel's tables, defaults, groups and registers are written again from
//! it. The kernel is the truth for what its frames count: hits, counters, registers and the
//! ports' traffic come back at each harvest ([`forwarding::P4Counts`]). Accounts (AFDX policing)
//! live in the kernel only.
//!
//! About 730 lines, one concern: keeping the kernel object's maps (tables, groups, registers,
//! value sets, ports, an LPM table's multibit arrays) in step with the software target.

#[cfg(feature = "p4")]
mod imp {
    use std::collections::{BTreeMap, HashMap};
    use std::io;

    use forwarding::P4Counts;
    use p4::backends::ebpf::verdict::{DROP, FORWARD, MISFIT, NONE, NO_PORT, PARSER, PROGRAM, STATS, UP};
    use p4::backends::ebpf::{self as gen, stats_slot, Generated, KernelTable, LpmEntry, LpmWriter, TableKind};
    use p4::backends::software::Switch as Program;

    use crate::ebpf::{Map, MappedArray, Object};
    use crate::fastpath::grace::GraceBarrier;

    /// The drop reasons the switch reports, by the software target's names for them.
    const DROPS: [(&str, u32); 3] =
        [("parser_rejected", PARSER), ("program_dropped", PROGRAM), ("no_egress_port", NO_PORT)];

    /// The program's object and what was last written to, and read from, its maps.
    pub struct P4Kernel {
        obj: Object,
        gen: Generated,
        /// The software target's generation last written.
        written: Option<u64>,
        /// Per table, the (key, value) pairs last written: a table that did not change is not
        /// written again (and its hits keep their entries).
        tables: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
        defaults: Vec<Vec<u8>>,
        groups: BTreeMap<u32, Vec<u8>>,
        /// Port → interface the kernel sends on, and each group's broadcast set (XDP), as written.
        egress: BTreeMap<u32, u32>,
        /// The software target's generation the broadcast sets were computed at.
        egress_at: Option<u64>,
        fanouts: (BTreeMap<u32, u32>, Vec<Vec<u32>>),
        /// What the counting arrays held at the last harvest, by map and cell.
        seen: HashMap<String, Vec<[u64; 4]>>,
        /// What `p4_port_counts` held at the last harvest, by port.
        seen_ports: HashMap<u32, [u64; 4]>,
        /// Each register cell as the kernel and the software target last agreed on it: a cell
        /// the control plane changed since is written here, one the kernel's frames changed goes
        /// back.
        registers: HashMap<(String, usize), u128>,
        /// Each indirect meter cell's rates as last written (absent: zeros, not set).
        meter_rates: HashMap<(String, usize), Vec<u8>>,
        /// Per table with a direct meter, each entry's identity and its cell's rates as last
        /// written, by entry index.
        direct_meters: Vec<Vec<(String, Vec<u8>)>>,
        /// Per value set, its members' slots as last written.
        value_sets: Vec<Vec<Vec<u8>>>,
        write_failed: bool,
        held_for_ports: bool,
        /// What `p4_config[1]` holds, as last written.
        stale_written: Option<bool>,
        /// Ports whose traffic the kernel counts (`p4_port_counts` has their cells).
        counted_ports: Vec<u32>,
        /// Per table kept as multibit arrays (`TableKind::LpmArrays`), once written.
        lpm: Vec<Option<LpmArraysWritten>>,
        /// Proof that ids and blocks the arrays let go of are read by no frame any more.
        grace: Grace,
    }

    /// One table's multibit arrays as written: their writer and the slots' mapping.
    struct LpmArraysWritten {
        writer: LpmWriter,
        slots: MappedArray,
    }

    /// The grace-period barrier (`grace.rs`), made when something first waits for one, and the
    /// ticket of the latest asked for.
    #[derive(Default)]
    struct Grace {
        barrier: Option<GraceBarrier>,
        ticket: u64,
    }

    impl Grace {
        /// Asks for a grace period that begins now.
        fn ask(&mut self) -> io::Result<()> {
            if self.barrier.is_none() {
                self.barrier = Some(GraceBarrier::new()?);
            }
            self.ticket = self.barrier.as_ref().unwrap().ask();
            Ok(())
        }

        /// Whether the latest asked for has passed; with `wait`, after waiting for it.
        fn passed(&self, wait: bool) -> bool {
            let Some(b) = &self.barrier else { return false };
            if wait {
                b.wait(self.ticket);
            }
            b.passed() >= self.ticket
        }
    }

    /// Takes table `t`'s multibit arrays to `entries` without a gap (`p4::backends::ebpf::LpmWriter`):
    /// the values of new ids, then the slots word by word; what was let go
    /// of waits for a grace period, and is waited for here only when the free ones run short.
    /// On an error the arrays are written whole again next time.
    fn write_lpm_arrays(
        obj: &Object,
        t: &KernelTable,
        written: &mut Option<LpmArraysWritten>,
        grace: &mut Grace,
        entries: &[LpmEntry],
    ) -> io::Result<()> {
        let shape = t.lpm_arrays.as_ref().expect("an LpmArrays table has its arrays");
        if written.is_none() {
            let slots = MappedArray::new(map(obj, &shape.slots_map)?)?;
            // Whatever an earlier writer left (it failed half way) goes; frames go up meanwhile.
            for b in 0..shape.blocks {
                for w in 0..gen::LPM_SLOTS as usize {
                    slots.store_u32(b, 4 * w, 0);
                }
            }
            *written = Some(LpmArraysWritten { writer: LpmWriter::new(shape.clone()), slots });
        }
        let w = written.as_mut().unwrap();
        if w.writer.holds() && grace.passed(w.writer.short_of_room(entries.len())) {
            w.writer.grace_passed();
        }
        let plan = w.writer.plan(entries);
        let done = plan.map_err(|e| io::Error::other(format!("{}: {e}", t.target))).and_then(|plan| {
            let values = map(obj, &t.map)?;
            for (id, value) in &plan.values {
                values.update(&id.to_ne_bytes(), value)?;
            }
            for &(block, slot, word) in &plan.stores {
                w.slots.store_u32(block, 4 * slot as usize, word);
            }
            Ok(())
        });
        if done.is_err() {
            *written = None;
            return done;
        }
        if w.writer.holds() {
            grace.ask()?;
        }
        Ok(())
    }

    fn map<'o>(obj: &'o Object, name: &str) -> io::Result<&'o Map> {
        obj.map(name).map_err(|e| io::Error::new(e.kind(), format!("the P4 program's map {name}: {e}")))
    }

    /// Interface `ifindex` of `obj` is switch port `no`, whose frames go up tagged `tag` (TC):
    /// in `p4_ports`, and in the interface's slot of `p4_port_slots` unless another interface
    /// holds it (that one keeps it; this one is then found by hashing).
    pub fn set_port(obj: &Object, ifindex: u32, no: u32, tag: u16) -> io::Result<()> {
        let v = [no.to_ne_bytes(), (tag as u32).to_ne_bytes()].concat();
        map(obj, "p4_ports")?.update(&ifindex.to_ne_bytes(), &v)?;
        let slots = map(obj, "p4_port_slots")?;
        let slot = (ifindex % gen::PORT_SLOTS).to_ne_bytes();
        let owner = slot_owner(slots, &slot);
        match gen::port_slot(ifindex, no, tag) {
            Some((_, word)) if owner.is_none() || owner == Some(ifindex) => slots.update(&slot, &word.to_ne_bytes()),
            // A port number past the slots' reach: the slot would say an old one.
            None if ifindex != 0 && owner == Some(ifindex) => slots.update(&slot, &0u64.to_ne_bytes()),
            _ => Ok(()),
        }
    }

    /// The interface whose port a slot of `p4_port_slots` holds, None when it is empty.
    fn slot_owner(slots: &Map, slot: &[u8]) -> Option<u32> {
        let word = slots.lookup(slot).ok()??;
        let word = u64::from_ne_bytes(word.get(..8)?.try_into().ok()?);
        (word != 0).then_some((word >> 32) as u32)
    }

    /// Where the kernel counts port `no`'s frames.
    fn port_counts_map(no: u32) -> &'static str {
        if no < gen::NEAR_PORTS {
            "p4_port_counts_near"
        } else {
            "p4_port_counts"
        }
    }

    fn sum<T: AsRef<[u8]>>(per_cpu: &[T]) -> [u64; 4] {
        let mut s = [0u64; 4];
        for cpu in per_cpu {
            for (i, n) in s.iter_mut().enumerate() {
                if let Some(b) = cpu.as_ref().get(8 * i..8 * i + 8) {
                    *n += u64::from_ne_bytes(b.try_into().unwrap());
                }
            }
        }
        s
    }

    /// Whether `elf` was compiled from `gen`'s C: the fingerprint `p4::backends::ebpf` put in it.
    pub fn check_fingerprint(gen: &Generated, elf: &[u8]) -> io::Result<()> {
        let again = "compile it again from this program with this edgeflow (edgeflow p4 compile PROGRAM -o OBJECT)";
        let Some(section) = crate::ebpf::section(elf, gen::FINGERPRINT_SECTION)? else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the object has no {} section: it was not made by edgeflow p4 compile; {again}",
                    gen::FINGERPRINT_SECTION
                ),
            ));
        };
        let theirs = String::from_utf8_lossy(section.split(|&b| b == 0).next().unwrap_or_default()).into_owned();
        if theirs != gen.fingerprint {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the object was compiled from another program, or by another version of edgeflow \
                     (its fingerprint {theirs}, this program's {}); {again}",
                    gen.fingerprint
                ),
            ));
        }
        Ok(())
    }

    impl P4Kernel {
        /// The program generated, compiled and loaded. InvalidInput where it does not fit the
        /// kernel back end (what does not, by name), NotFound where there is no clang. The
        /// object never touches a file (`ebpf::clang`): what is loaded is what clang wrote, and
        /// its fingerprint is checked as an object's from elsewhere is.
        pub fn build(program: &Program) -> io::Result<P4Kernel> {
            let gen = gen::generate_ir(program.ir())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("does not fit the kernel: {e}")))?;
            let elf = crate::ebpf::clang::compile("the P4 program's C", &gen.c)?;
            check_fingerprint(&gen, &elf)?;
            Ok(P4Kernel::with_object(Object::load(&elf)?, gen))
        }

        /// The program's object compiled elsewhere (`edgeflow p4 compile -o`, on a machine with
        /// clang), loaded here without one. InvalidData where the object is not this program's,
        /// as this edgeflow generates it: its maps would not be the ones the control plane
        /// writes.
        pub fn from_object(program: &Program, elf: &[u8]) -> io::Result<P4Kernel> {
            let gen = gen::generate_ir(program.ir())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("does not fit the kernel: {e}")))?;
            check_fingerprint(&gen, elf)?;
            Ok(P4Kernel::with_object(Object::load(elf)?, gen))
        }

        /// An object already loaded from `gen`'s C.
        pub fn with_object(obj: Object, gen: Generated) -> P4Kernel {
            P4Kernel {
                obj,
                gen,
                written: None,
                tables: Vec::new(),
                defaults: Vec::new(),
                groups: BTreeMap::new(),
                egress: BTreeMap::new(),
                egress_at: None,
                fanouts: Default::default(),
                seen: HashMap::new(),
                seen_ports: HashMap::new(),
                registers: HashMap::new(),
                meter_rates: HashMap::new(),
                direct_meters: Vec::new(),
                value_sets: Vec::new(),
                write_failed: false,
                held_for_ports: false,
                stale_written: None,
                counted_ports: Vec::new(),
                lpm: Vec::new(),
                grace: Grace::default(),
            }
        }

        pub fn object(&self) -> &Object {
            &self.obj
        }

        /// Interface `ifindex` is switch port `no`, whose frames go up tagged `tag` (TC).
        pub fn register_port(&mut self, no: u32, ifindex: u32, tag: u16) -> io::Result<()> {
            set_port(&self.obj, ifindex, no, tag)?;
            if !self.counted_ports.contains(&no) {
                let counts = map(&self.obj, port_counts_map(no))?;
                counts.update(&no.to_ne_bytes(), &vec![0u8; 32 * crate::ebpf::possible_cpus()?])?;
                self.counted_ports.push(no);
            }
            Ok(())
        }

        pub fn forget_interface(&self, ifindex: u32) {
            if let Ok(m) = map(&self.obj, "p4_ports") {
                let _ = m.delete(&ifindex.to_ne_bytes());
            }
            if let Ok(slots) = map(&self.obj, "p4_port_slots") {
                let slot = (ifindex % gen::PORT_SLOTS).to_ne_bytes();
                if ifindex != 0 && slot_owner(slots, &slot) == Some(ifindex) {
                    let _ = slots.update(&slot, &0u64.to_ne_bytes());
                }
            }
        }

        /// Where TC sends frames up (0: into the stack, as a test run leaves them).
        pub fn set_upcall(&self, ifindex: u32) -> io::Result<()> {
            map(&self.obj, "p4_config")?.update(&0u32.to_ne_bytes(), &(ifindex as u64).to_ne_bytes())
        }

        /// Whether every frame must go up: the tables here are not the control plane's (a write
        /// failed), or some port sends from userspace only (`hold_for_ports`). Written when it
        /// changes.
        pub fn apply_stale(&mut self) -> io::Result<()> {
            let stale = self.write_failed || self.held_for_ports;
            if self.stale_written != Some(stale) {
                map(&self.obj, "p4_config")?.update(&1u32.to_ne_bytes(), &(stale as u64).to_ne_bytes())?;
                self.stale_written = Some(stale);
            }
            Ok(())
        }

        /// Some ports (`left_out`) send from userspace only; true when that changed.
        pub fn hold_for_ports(&mut self, left_out: &[u32]) -> bool {
            let held = !left_out.is_empty();
            let changed = held != self.held_for_ports;
            self.held_for_ports = held;
            changed
        }

        /// Whether the software target changed since it was last written.
        pub fn behind(&self, program: &Program) -> bool {
            self.written != Some(program.generation())
        }

        /// The ports the kernel may send on (port → interface; the others' frames go up), and
        /// under XDP the groups' broadcast sets: each group of several ports, all of them in
        /// `egress`, gets one of `p4::backends::ebpf::FANOUTS` DEVMAPs (groups of the same interfaces share
        /// one); the others go up.
        pub fn set_egress(&mut self, program: &Program, egress: &BTreeMap<u32, u32>, xdp: bool) -> io::Result<()> {
            if self.egress_at == Some(program.generation()) && self.egress == *egress {
                return Ok(());
            }
            self.egress_at = Some(program.generation());
            let m = map(&self.obj, "p4_ifindex")?;
            let near = map(&self.obj, "p4_ifindex_near")?;
            for port in self.egress.keys().filter(|p| !egress.contains_key(p)) {
                m.delete(&port.to_ne_bytes())?;
                if *port < gen::NEAR_PORTS {
                    near.update(&port.to_ne_bytes(), &0u32.to_ne_bytes())?;
                }
            }
            for (port, ifindex) in egress {
                if self.egress.get(port) != Some(ifindex) {
                    m.update(&port.to_ne_bytes(), &ifindex.to_ne_bytes())?;
                    if *port < gen::NEAR_PORTS {
                        near.update(&port.to_ne_bytes(), &ifindex.to_ne_bytes())?;
                    }
                }
            }
            self.egress = egress.clone();
            let mut by_group = BTreeMap::new();
            let mut sets: Vec<Vec<u32>> = Vec::new();
            for id in program.group_ids() {
                let ports = program.group(id).unwrap_or_default();
                if !xdp || ports.len() < 2 || ports.len() > gen::GROUP_MAX {
                    continue;
                }
                let Some(mut set) = ports.iter().map(|p| egress.get(p).copied()).collect::<Option<Vec<u32>>>() else {
                    continue;
                };
                set.sort_unstable();
                let slot = match sets.iter().position(|s| *s == set) {
                    Some(at) => at,
                    None if sets.len() < gen::FANOUTS => {
                        sets.push(set);
                        sets.len() - 1
                    }
                    None => continue,
                };
                by_group.insert(id as u32, slot as u32 + 1);
            }
            if (&by_group, &sets) == (&self.fanouts.0, &self.fanouts.1) {
                return Ok(());
            }
            let groups = map(&self.obj, "p4_group_fanout")?;
            for id in self.fanouts.0.keys().filter(|g| !by_group.contains_key(g)) {
                groups.delete(&id.to_ne_bytes())?;
            }
            for (slot, set) in sets.iter().enumerate() {
                let devmap = map(&self.obj, &format!("p4_fanout_{slot}"))?;
                for i in 0..gen::GROUP_MAX as u32 {
                    match set.get(i as usize) {
                        Some(ifindex) => devmap.update(&i.to_ne_bytes(), &ifindex.to_ne_bytes())?,
                        None => {
                            devmap.delete(&i.to_ne_bytes())?;
                        }
                    }
                }
            }
            for (id, slot) in &by_group {
                groups.update(&id.to_ne_bytes(), &slot.to_ne_bytes())?;
            }
            self.fanouts = (by_group, sets);
            Ok(())
        }

        /// Writes what the software target holds: every table that changed (its entries' hits
        /// start again from zero, as the entries' indexes may have moved: harvest first), the
        /// default actions, the groups and the registers. A write that fails is not tried again
        /// until the next change.
        pub fn write(&mut self, program: &Program) -> io::Result<()> {
            self.written = Some(program.generation());
            let written = self.write_all(program);
            self.write_failed = written.is_err();
            written
        }

        fn write_all(&mut self, program: &Program) -> io::Result<()> {
            let g = &self.gen;
            self.tables.resize(g.tables.len(), Vec::new());
            self.defaults.resize(g.tables.len(), Vec::new());
            self.lpm.resize_with(g.tables.len(), || None);
            for (ti, t) in g.tables.iter().enumerate() {
                let entries = program.entries(&t.target).unwrap_or_default();
                let mut pairs = Vec::with_capacity(entries.len());
                let mut lpm_entries = Vec::new();
                for (i, e) in entries.iter().enumerate() {
                    let value = gen::table_value(t, &e.action, i as u32, &e.args, g.max_args).ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidInput, format!("{}: action {}", t.target, e.action))
                    })?;
                    let pair = match t.kind {
                        TableKind::Scan => {
                            ((i as u32).to_ne_bytes().to_vec(), gen::scan_entry(t, &e.keys, e.priority, &value))
                        }
                        TableKind::LpmArrays => {
                            let entry = gen::lpm_entry(t, &e.keys, e.priority, value.clone()).ok_or_else(|| {
                                io::Error::new(
                                    io::ErrorKind::InvalidInput,
                                    format!("{}: a key the kernel cannot hold", t.target),
                                )
                            })?;
                            let key = [entry.value.to_ne_bytes(), entry.len.to_ne_bytes()].concat();
                            lpm_entries.push(entry);
                            ([key, e.priority.to_ne_bytes().to_vec()].concat(), value)
                        }
                        _ => (
                            gen::table_key(t, &e.keys).ok_or_else(|| {
                                io::Error::new(
                                    io::ErrorKind::InvalidInput,
                                    format!("{}: a key the kernel cannot hold", t.target),
                                )
                            })?,
                            value,
                        ),
                    };
                    pairs.push(pair);
                }
                if pairs.len() > t.size {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{}: {} entries, the kernel holds {}", t.target, pairs.len(), t.size),
                    ));
                }
                if pairs != self.tables[ti] {
                    let m = map(&self.obj, &t.map)?;
                    if t.kind == TableKind::LpmArrays {
                        write_lpm_arrays(&self.obj, t, &mut self.lpm[ti], &mut self.grace, &lpm_entries)?;
                    }
                    for (key, _) in self.tables[ti].iter().filter(|_| t.kind != TableKind::LpmArrays) {
                        if t.kind == TableKind::Scan {
                            if !pairs.iter().any(|(k, _)| k == key) {
                                m.update(key, &vec![0u8; m.value_size as usize])?;
                            }
                        } else if !pairs.iter().any(|(k, _)| k == key) {
                            m.delete(key)?;
                        }
                    }
                    for (key, value) in pairs.iter().filter(|_| t.kind != TableKind::LpmArrays) {
                        m.update(key, value)?;
                    }
                    let hits = map(&self.obj, &t.hits_map)?;
                    let zero = vec![0u8; 16 * crate::ebpf::possible_cpus()?];
                    for i in 0..self.tables[ti].len().max(pairs.len()) as u32 {
                        hits.update(&i.to_ne_bytes(), &zero)?;
                    }
                    self.seen.remove(&t.hits_map);
                    self.tables[ti] = pairs;
                }
                if let Some((action, args)) = program.default_action(&t.target) {
                    let v = gen::table_value(t, action, 0, args, g.max_args).unwrap_or_default();
                    if v != self.defaults[ti] {
                        map(&self.obj, "p4_defaults")?.update(&t.number.to_ne_bytes(), &v)?;
                        self.defaults[ti] = v;
                    }
                }
            }
            self.write_meters(program)?;
            let mut groups = BTreeMap::new();
            for id in program.group_ids() {
                let ports = program.group(id).unwrap_or_default();
                // The whole count, even past GROUP_MAX: the program sends such a group up.
                let mut v = (ports.len() as u32).to_ne_bytes().to_vec();
                for i in 0..gen::GROUP_MAX {
                    v.extend_from_slice(&ports.get(i).copied().unwrap_or(0).to_ne_bytes());
                }
                groups.insert(id as u32, v);
            }
            let m = map(&self.obj, "p4_groups")?;
            for id in self.groups.keys().filter(|id| !groups.contains_key(id)) {
                m.delete(&id.to_ne_bytes())?;
            }
            for (id, v) in &groups {
                if self.groups.get(id) != Some(v) {
                    m.update(&id.to_ne_bytes(), v)?;
                }
            }
            self.groups = groups;
            self.write_value_sets(program)?;
            for (name, map_name, cells) in &self.gen.registers {
                let m = map(&self.obj, map_name)?;
                for i in 0..*cells {
                    let v = program.register(name, i).unwrap_or(0);
                    let agreed = self.registers.entry((name.clone(), i)).or_insert(0);
                    if *agreed != v {
                        m.update(&(i as u32).to_ne_bytes(), &(v as u64).to_ne_bytes())?;
                        *agreed = v;
                    }
                }
            }
            Ok(())
        }

        /// Each value set's members, a slot each from 0; the slots a set no longer fills are
        /// zeroed (not present). A set that did not change is not written.
        fn write_value_sets(&mut self, program: &Program) -> io::Result<()> {
            self.value_sets.resize(self.gen.value_sets.len(), Vec::new());
            for (v, written) in self.gen.value_sets.iter().zip(self.value_sets.iter_mut()) {
                let slots: Vec<Vec<u8>> =
                    program.value_set(&v.target).unwrap_or(&[]).iter().map(|m| gen::value_set_member(v, m)).collect();
                if slots == *written {
                    continue;
                }
                let m = map(&self.obj, &v.map)?;
                for i in 0..slots.len().max(written.len()).min(v.size) {
                    let empty = vec![0u8; m.value_size as usize];
                    m.update(&(i as u32).to_ne_bytes(), slots.get(i).unwrap_or(&empty))?;
                }
                *written = slots;
            }
            Ok(())
        }

        /// Meter cells whose rates the control plane set: their rates, and full buckets (as
        /// `p4::backends::software::Switch::set_meter` starts them). A table's direct meter cells follow their
        /// entries: one that kept its place or moved keeps its buckets, one that came or whose
        /// rates changed starts full.
        fn write_meters(&mut self, program: &Program) -> io::Result<()> {
            const FULL: [u8; 16] = [0; 16];
            for m in &self.gen.meters {
                let (rates_map, words_map) = (map(&self.obj, &m.rates_map)?, map(&self.obj, &m.words_map)?);
                for i in 0..m.cells {
                    let rates = gen::meter_rates(program.meter(&m.name, i).flatten());
                    let at = (m.name.clone(), i);
                    let unchanged = match self.meter_rates.get(&at) {
                        Some(old) => *old == rates,
                        None => rates.iter().all(|&b| b == 0),
                    };
                    if !unchanged {
                        rates_map.update(&(i as u32).to_ne_bytes(), &rates)?;
                        words_map.update(&(i as u32).to_ne_bytes(), &FULL)?;
                        self.meter_rates.insert(at, rates);
                    }
                }
            }
            self.direct_meters.resize(self.gen.tables.len(), Vec::new());
            for (ti, t) in self.gen.tables.iter().enumerate() {
                let Some(m) = &t.meter else { continue };
                let entries = program.entries(&t.target).unwrap_or_default();
                let cells: Vec<(String, Vec<u8>)> = entries
                    .iter()
                    .map(|e| {
                        let rates = program.entry_meter(&t.target, &e.keys, e.priority).flatten();
                        (format!("{:?}/{}", e.keys, e.priority), gen::meter_rates(rates))
                    })
                    .collect();
                if cells == self.direct_meters[ti] {
                    continue;
                }
                let (rates_map, words_map) = (map(&self.obj, &m.rates_map)?, map(&self.obj, &m.words_map)?);
                let old = &self.direct_meters[ti];
                let mut words = Vec::with_capacity(cells.len());
                for cell in &cells {
                    let kept = match old.iter().position(|o| o == cell) {
                        Some(j) => words_map.lookup(&(j as u32).to_ne_bytes())?.unwrap_or(FULL.to_vec()),
                        None => FULL.to_vec(),
                    };
                    words.push(kept);
                }
                for (i, ((_, rates), w)) in cells.iter().zip(&words).enumerate() {
                    rates_map.update(&(i as u32).to_ne_bytes(), rates)?;
                    words_map.update(&(i as u32).to_ne_bytes(), w)?;
                }
                for i in cells.len()..old.len() {
                    rates_map.update(&(i as u32).to_ne_bytes(), &[0u8; 32])?;
                }
                self.direct_meters[ti] = cells;
            }
            Ok(())
        }

        /// What the kernel counted since the last harvest, for the mode, and per port (rx
        /// packets, rx bytes, tx packets, tx bytes), for the ports' counters.
        pub fn harvest(&mut self, program: &Program) -> (P4Counts, Vec<(u32, [u64; 4])>) {
            let (obj, seen) = (&self.obj, &mut self.seen);
            // The growth of a per-CPU counting array's first `cells` cells since the last
            // harvest, read in one call (a batch) rather than a call per cell: a table of 4 000
            // entries is 4 000 cells a second.
            let mut growth = |map_name: &str, cells: usize| -> Vec<[u64; 4]> {
                let Ok(m) = map(obj, map_name) else { return vec![[0; 4]; cells] };
                let Ok(values) = m.lookup_cells(cells as u32, true) else { return vec![[0; 4]; cells] };
                let stride = (m.value_size as usize).next_multiple_of(8);
                let per_cell = values.len() / cells.max(1);
                let before = seen.entry(map_name.to_string()).or_default();
                before.resize(before.len().max(cells), [0; 4]);
                values
                    .chunks(per_cell.max(1))
                    .zip(before.iter_mut())
                    .map(|(cell, before)| {
                        let per_cpu: Vec<&[u8]> = cell.chunks(stride).map(|v| &v[..m.value_size as usize]).collect();
                        let now = sum(&per_cpu);
                        // Other CPUs count while they are read: never assume a cell went back.
                        let d = std::array::from_fn(|i| now[i].saturating_sub(before[i]));
                        *before = now;
                        d
                    })
                    .collect()
            };
            let mut c = P4Counts::default();
            for (t, written) in self.gen.tables.iter().zip(&self.tables) {
                for (i, [p, b, ..]) in growth(&t.hits_map, written.len()).into_iter().enumerate() {
                    if p > 0 {
                        c.entries.push((t.target.clone(), i, p, b));
                    }
                }
            }
            for (name, map_name, cells) in &self.gen.counters {
                for (i, [p, b, ..]) in growth(map_name, *cells).into_iter().enumerate() {
                    if p > 0 || b > 0 {
                        c.counters.push((name.clone(), i, p, b));
                    }
                }
            }
            let stats: Vec<u64> = growth("p4_stats", STATS as usize).iter().map(|d| d[0]).collect();
            let stat = |slot: u32| stats.get(slot as usize).copied().unwrap_or(0);
            c.forwarded = stat(stats_slot(FORWARD, NONE));
            c.dropped = DROPS.iter().map(|&(name, reason)| (name, stat(stats_slot(DROP, reason)))).collect();
            // By port number: a lookup per port the kernel sends on.
            let mut ports = Vec::new();
            for &no in &self.counted_ports {
                let Ok(per_cpu) = map(obj, port_counts_map(no)).and_then(|m| m.lookup_percpu(&no.to_ne_bytes())) else {
                    continue;
                };
                let now = sum(&per_cpu);
                let before = self.seen_ports.insert(no, now).unwrap_or_default();
                let d: [u64; 4] = std::array::from_fn(|i| now[i].saturating_sub(before[i]));
                c.copies += d[2];
                if d != [0; 4] {
                    ports.push((no, d));
                }
            }
            for (name, map_name, cells) in &self.gen.registers {
                let Ok(m) = map(&self.obj, map_name) else { continue };
                let Ok(values) = m.lookup_cells(*cells as u32, false) else { continue };
                for (i, v) in values.chunks(m.value_size as usize).enumerate() {
                    let agreed = self.registers.entry((name.clone(), i)).or_insert(0);
                    // A cell the control plane changed is the kernel's to take, not to give back.
                    if program.register(name, i).unwrap_or(0) != *agreed {
                        continue;
                    }
                    let v = u64::from_ne_bytes(v[..8].try_into().unwrap()) as u128;
                    if v != *agreed {
                        c.registers.push((name.clone(), i, v));
                        *agreed = v;
                    }
                }
            }
            (c, ports)
        }

        /// Frames the kernel sent up, by why: (the program's egress port has no interface the
        /// kernel sends on, the frame does not fit the kernel's program), since start.
        pub fn sent_up(&self) -> (u64, u64) {
            let read = |slot: u32| {
                map(&self.obj, "p4_stats").and_then(|m| m.lookup_percpu(&slot.to_ne_bytes())).map_or(0, |c| sum(&c)[0])
            };
            (read(stats_slot(UP, NONE)), read(stats_slot(UP, MISFIT)))
        }
    }
}

#[cfg(feature = "p4")]
pub use imp::{check_fingerprint, set_port, P4Kernel};

/// Without the `p4` feature there is no P4 program to put in the kernel.
#[cfg(not(feature = "p4"))]
pub enum P4Kernel {}

#[cfg(not(feature = "p4"))]
impl P4Kernel {
    pub fn object(&self) -> &crate::ebpf::Object {
        match *self {}
    }
    pub fn register_port(&mut self, _: u32, _: u32, _: u16) -> std::io::Result<()> {
        match *self {}
    }
    pub fn forget_interface(&self, _: u32) {
        match *self {}
    }
    pub fn set_upcall(&self, _: u32) -> std::io::Result<()> {
        match *self {}
    }
}
