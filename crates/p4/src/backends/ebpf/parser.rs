//! A parser's states as labelled C, each ending in a goto. A parser that loops (a stack filled
//! through `next`) is unrolled, since the verifier wants a bound it can see: the states are
//! printed once per pass, a transition back along a loop goes on to the next pass, and past the
//! last pass the frame goes up. There are as many passes as the largest stack has headers, plus
//! one: a loop that fills a stack meets `StackOutOfBounds` in the last.

use std::fmt::Write as _;

use super::printer::Printer;
use super::{ident, R};
use crate::midend::ir::{Keyset, Next, State, Transition};

fn next_of(t: &Transition) -> Vec<Next> {
    match t {
        Transition::Goto(n) => vec![n.clone()],
        Transition::Select { cases, .. } => cases.iter().map(|(_, n)| n.clone()).collect(),
    }
}

/// Depth first from `at`: a transition to a state on the path is a loop's way back.
fn visit(at: usize, states: &[State], path: &mut Vec<usize>, order: &mut Vec<usize>, back: &mut Vec<(usize, usize)>) {
    if order.contains(&at) {
        return;
    }
    path.push(at);
    for n in next_of(&states[at].transition) {
        let Next::State(n) = n else { continue };
        if path.contains(&n) {
            back.push((at, n));
        } else {
            visit(n, states, path, order, back);
        }
    }
    path.pop();
    order.push(at);
}

impl Printer<'_> {
    pub fn states(&mut self, states: &[State]) -> R<String> {
        let Some(start) = states.iter().position(|s| s.name == "start") else {
            return Ok("st_start:\n\tgoto st_accept;\n".into());
        };
        let (mut order, mut back) = (Vec::new(), Vec::new());
        visit(start, states, &mut Vec::new(), &mut order, &mut back);
        let passes = if back.is_empty() { 1 } else { self.largest_stack() + 1 };
        // The passes after the first hold the states a loop reaches, not the rest.
        let mut in_loops: Vec<usize> = back.iter().map(|(_, to)| *to).collect();
        let mut i = 0;
        while i < in_loops.len() {
            for n in next_of(&states[in_loops[i]].transition) {
                if let Next::State(n) = n {
                    if !in_loops.contains(&n) {
                        in_loops.push(n);
                    }
                }
            }
            i += 1;
        }
        // A P4 name does not start with a digit: the later passes' labels are apart.
        let label = |state: usize, pass: usize| match pass {
            0 => format!("st_{}", ident(&states[state].name)),
            p => format!("st_{p}_{}", ident(&states[state].name)),
        };
        let no_match = self.error_index("NoMatch");
        let mut s = String::new();
        if states[start].name != "start" || order.is_empty() {
            return Ok(s);
        }
        for pass in 0..passes {
            for (k, st) in states.iter().enumerate() {
                if !order.contains(&k) || (pass > 0 && !in_loops.contains(&k)) {
                    continue;
                }
                self.at = Some(st.pos);
                // Each state a C block of its own.
                let _ = writeln!(s, "{}: {{", label(k, pass));
                s += &self.stmts(&st.body)?;
                let target = |n: &Next| match n {
                    Next::Accept => "st_accept".to_string(),
                    // As the software target: a reject names no error of its own but NoMatch.
                    Next::Reject => "st_reject".to_string(),
                    Next::State(n) if back.contains(&(k, *n)) => {
                        if pass + 1 < passes {
                            label(*n, pass + 1)
                        } else {
                            "st_loop_up".to_string()
                        }
                    }
                    Next::State(n) => label(*n, pass),
                };
                match &st.transition {
                    Transition::Goto(n) => {
                        let _ = writeln!(s, "\tgoto {};", target(n));
                    }
                    Transition::Select { keys, cases } => {
                        let mut ks = Vec::new();
                        for (j, e) in keys.iter().enumerate() {
                            let v = self.expr(e)?;
                            let k = self.temp("key");
                            let _ = writeln!(s, "\t__u64 {k} = {v};");
                            ks.push((k, j));
                        }
                        for (sets, next) in cases {
                            if let [Keyset::ValueSet(n)] = sets.as_slice() {
                                let names: Vec<String> = ks.iter().map(|(k, _)| k.clone()).collect();
                                let hit = self.value_set_match(n, &names, &mut s)?;
                                let _ = writeln!(s, "\tif ({hit})\n\t\tgoto {};", target(next));
                                continue;
                            }
                            let any = sets.len() == 1 && matches!(sets[0], Keyset::Any);
                            let mut conds = Vec::new();
                            for ((k, _), key) in ks.iter().zip(sets) {
                                match key {
                                    _ if any => {}
                                    Keyset::Any => {}
                                    Keyset::Value(v) => conds.push(format!("{k} == {v:#x}ULL")),
                                    Keyset::Mask(v, m) => {
                                        conds.push(format!("({k} & {m:#x}ULL) == ({v:#x}ULL & {m:#x}ULL)"))
                                    }
                                    Keyset::Range(a, b) => conds.push(format!("{k} >= {a:#x}ULL && {k} <= {b:#x}ULL")),
                                    Keyset::ValueSet(n) => {
                                        return Err(super::no(format!("the value_set {n} beside other keysets")))
                                    }
                                }
                            }
                            let cond = if conds.is_empty() { "1".to_string() } else { conds.join(" && ") };
                            let _ = writeln!(s, "\tif ({cond})\n\t\tgoto {};", target(next));
                        }
                        let _ = writeln!(s, "\tr->sm.f_parser_error = {no_match};\n\tgoto reject;");
                    }
                }
                s += "}\n";
            }
        }
        let _ = writeln!(s, "st_reject:\n\tr->sm.f_parser_error = {no_match};\n\tgoto reject;");
        if !back.is_empty() {
            // Past the last pass: the software target decides (it stops at 256 states).
            s += "st_loop_up:\n\tr->misfit = 1;\n\tgoto reject;\n";
        }
        Ok(s)
    }
}
