//! SIGHUP: which differences between the running configuration and the one read again can be
//! applied while the switch runs, and why the others cannot. A configuration with any of the
//! others is refused whole: the running one stays, and the log says what to restart for.

use super::Settings;

/// What the switch-wide settings that only a restart changes are called, and whether they differ.
fn fixed(a: &Settings, b: &Settings) -> Vec<&'static str> {
    let mut differ = Vec::new();
    let mut check = |name, same: bool| {
        if !same {
            differ.push(name);
        }
    };
    check("dpid", a.dpid == b.dpid);
    check("fail_mode", a.fail_mode == b.fail_mode);
    check("tables", a.n_tables == b.n_tables);
    check("local_port", a.local_port == b.local_port);
    check("[tls]", a.tls == b.tls);
    check("datapath", a.fastpath == b.fastpath);
    check("fastpath_entries", a.fastpath_entries == b.fastpath_entries);
    check("keep_fastpath", a.keep_fastpath == b.keep_fastpath);
    check("kernel_compat", a.legacy_attach == b.legacy_attach);
    check("ring_frames", a.ring_frames == b.ring_frames);
    check("io", a.io == b.io && a.port_io == b.port_io);
    check("poll", a.poll == b.poll);
    check("egress_timing", a.timing == b.timing);
    check("egress_cpu", a.cpu == b.cpu);
    check("metrics", a.metrics == b.metrics);
    check("p4runtime", a.p4runtime == b.p4runtime && a.p4runtime_tls == b.p4runtime_tls);
    check("[[table]]", a.table_limits == b.table_limits);
    check("packet_in_rate", a.packet_in_rate == b.packet_in_rate);
    check("[[port]] mode", a.port_modes == b.port_modes);
    differ
}

/// Whether `next` can replace `running` live; if so, the mode's new configuration to hand it
/// (none when the mode's own part did not change). Ports, egress, controllers, listeners and
/// the channel limits always can.
pub fn live_change(running: &Settings, next: &Settings) -> Result<Option<forwarding::Reconfig>, String> {
    let fixed = fixed(running, next);
    if !fixed.is_empty() {
        return Err(format!("{} changed, which takes a restart", fixed.join(", ")));
    }
    if running.mode == next.mode {
        return Ok(None);
    }
    if running.mode.name() != next.mode.name() {
        return Err(format!("mode {} → {}, which takes a restart", running.mode.name(), next.mode.name()));
    }
    match &next.mode {
        #[cfg(feature = "afdx")]
        super::ModeSetting::Afdx { vls, mac_constant, network } => {
            Ok(Some(forwarding::Reconfig::Afdx { vls: vls.clone(), mac_constant: *mac_constant, network: *network }))
        }
        #[cfg(feature = "less")]
        super::ModeSetting::Less(cfg) => Ok(Some(forwarding::Reconfig::Less(cfg.clone()))),
        other => Err(format!("the {} mode's settings changed, which takes a restart", other.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn settings(src: &str) -> Settings {
        super::super::from_text(src, Path::new("t.toml")).unwrap()
    }

    #[test]
    fn ports_egress_and_controllers_change_live_and_the_rest_is_named() {
        let running = settings("controllers = [\"tcp:127.0.0.1:6653\"]\n[[port]]\nname = \"a\"\n");
        let more = settings("controllers = [\"tcp:127.0.0.1:6654\"]\n[[port]]\nname = \"a\"\n[[port]]\nname = \"b\"\nrate_mbps = 10.0\n");
        assert!(matches!(live_change(&running, &more), Ok(None)));
        let fixed = settings("datapath = \"tc\"\ntables = 8\n[[port]]\nname = \"a\"\n");
        assert_eq!(live_change(&running, &fixed).unwrap_err(), "tables, datapath changed, which takes a restart");
        let learning = settings("mode = \"learning\"\n[[port]]\nname = \"a\"\n");
        assert_eq!(live_change(&running, &learning).unwrap_err(), "mode openflow → learning, which takes a restart");
    }
}
