//! Every family the metrics endpoint can export, declared once: name, type, help and label
//! names. The exposition writer takes only these (a [`Family`] cannot be made elsewhere), so a
//! family exists here or nowhere; docs/metrics.md holds the same list, and a test compares the
//! two. A report key gets a family only through `metrics.rs`'s mapping, never by its name.

/// A family's Prometheus type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// One metric family. Its fields are private to this module: the only families are the
/// statics below.
#[derive(Debug)]
pub struct Family {
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
}

impl Family {
    pub fn name(&self) -> &'static str {
        self.name
    }
    pub fn kind(&self) -> Kind {
        self.kind
    }
    /// The label names every sample of the family carries, in order.
    pub fn labels(&self) -> &'static [&'static str] {
        self.labels
    }
    pub fn help(&self) -> &'static str {
        self.help
    }
}

/// Declares each family as a static and lists them all in [`ALL`], in the order the exposition
/// writes them.
macro_rules! families {
    ($($id:ident = $kind:ident $name:literal [$($label:literal),*] $help:literal;)*) => {
        $(pub static $id: Family = Family { name: $name, kind: Kind::$kind, labels: &[$($label),*], help: $help };)*
        /// Every family, in the exposition's order.
        pub static ALL: &[&Family] = &[$(&$id),*];
    };
}

families! {
    BUILD_INFO = Gauge "edgeflow_build_info" ["version", "mode", "datapath", "dpid"]
        "The running edgeflow: its version, forwarding mode and datapath (always 1).";
    UPTIME = Gauge "edgeflow_uptime_seconds" [] "Seconds since the switch started.";
    START_TIME = Gauge "edgeflow_start_time_seconds" []
        "When the switch started, in seconds since the Unix epoch.";
    CONFIG_RELOADS = Counter "edgeflow_config_reloads_total" ["result"]
        "Configurations read again (SIGHUP, `systemctl reload`), by whether they were applied or refused.";

    PORT_UP = Gauge "edgeflow_port_up" ["port", "name"] "1 while the port's link is up and the port is not blocked.";
    PORT_RING_FRAMES = Gauge "edgeflow_port_ring_frames" ["port", "name"] "Receive frames the port's AF_PACKET ring holds.";
    PORT_RATE = Gauge "edgeflow_port_rate_bits_per_second" ["port", "name"] "The rate the port is paced to (scheduled ports).";
    PORT_RX_PACKETS = Counter "edgeflow_port_receive_packets_total" ["port", "name"] "Frames received on the port.";
    PORT_SOCKET_RX_PACKETS = Counter "edgeflow_port_socket_receive_packets_total" ["port", "name"]
        "Frames the switch read from the port's own socket (with a kernel fast path: those it sent up).";
    PORT_RX_BYTES = Counter "edgeflow_port_receive_bytes_total" ["port", "name"] "Bytes received on the port.";
    PORT_RX_DROPPED = Counter "edgeflow_port_receive_dropped_total" ["port", "name"] "Received frames dropped on the port.";
    PORT_RX_ERRORS = Counter "edgeflow_port_receive_errors_total" ["port", "name"] "Receive errors on the port.";
    PORT_TX_PACKETS = Counter "edgeflow_port_transmit_packets_total" ["port", "name"] "Frames sent on the port.";
    PORT_TX_BYTES = Counter "edgeflow_port_transmit_bytes_total" ["port", "name"] "Bytes sent on the port.";
    PORT_TX_DROPPED = Counter "edgeflow_port_transmit_dropped_total" ["port", "name"] "Frames the port could not send.";
    PORT_LINK_CHANGES = Counter "edgeflow_port_link_changes_total" ["port", "name"] "Times the port's link went up or down.";
    PORT_GUARD_REATTACHED = Counter "edgeflow_port_guard_reattached_total" ["port", "name"]
        "Times the port guard was attached again.";

    QUEUE_TX_PACKETS = Counter "edgeflow_queue_transmit_packets_total" ["port", "name", "queue"]
        "Frames sent from the egress queue.";
    QUEUE_TX_BYTES = Counter "edgeflow_queue_transmit_bytes_total" ["port", "name", "queue"]
        "Bytes sent from the egress queue.";
    QUEUE_DROPPED = Counter "edgeflow_queue_dropped_total" ["port", "name", "queue"]
        "Frames the egress queue dropped (tail drop).";
    QUEUE_WAITING = Gauge "edgeflow_queue_waiting_frames" ["port", "name", "queue"] "Frames waiting in the egress queue.";

    TABLE_FLOWS = Gauge "edgeflow_table_flows" ["table"] "Flows in the OpenFlow table.";
    TABLE_LOOKUPS = Counter "edgeflow_table_lookups_total" ["table"] "Lookups in the OpenFlow table.";
    TABLE_MATCHED = Counter "edgeflow_table_matched_total" ["table"] "Lookups that matched a flow.";
    TABLE_FULL_REFUSALS = Counter "edgeflow_table_full_refusals_total" ["table"]
        "Flow-mods refused because the table was full.";
    TABLE_EVICTIONS = Counter "edgeflow_table_evictions_total" ["table"] "Flows evicted to make room.";

    FASTPATH_HITS = Counter "edgeflow_fastpath_hits_total" [] "Frames the kernel fast path forwarded itself.";
    FASTPATH_MISSES = Counter "edgeflow_fastpath_misses_total" [] "Frames the kernel fast path had no entry for.";
    FASTPATH_UPCALLS = Counter "edgeflow_fastpath_upcalls_total" [] "Frames the kernel handed to userspace.";
    FASTPATH_SLOW = Counter "edgeflow_fastpath_slow_total" [] "Frames an entry sent to userspace on purpose.";
    FASTPATH_ENTRIES = Gauge "edgeflow_fastpath_entries" [] "Translations the kernel holds.";
    FASTPATH_INSTALLED = Counter "edgeflow_fastpath_installed_total" [] "Translations written into the kernel.";
    FASTPATH_REFUSED = Counter "edgeflow_fastpath_refused_total" [] "Translations the kernel had no room for.";
    FASTPATH_RETIRED = Counter "edgeflow_fastpath_retired_total" [] "Translations removed from the kernel.";
    FASTPATH_EVICTED = Counter "edgeflow_fastpath_evicted_total" []
        "Idle translations removed from a full kernel map to make room.";
    FASTPATH_RETRIED = Counter "edgeflow_fastpath_retried_total" []
        "Translations the kernel took when offered again after it had no room.";
    FASTPATH_DROPPED = Counter "edgeflow_fastpath_dropped_total" ["reason"]
        "Frames the kernel fast path dropped, by reason.";
    FASTPATH_XDP_FALLBACK = Counter "edgeflow_fastpath_xdp_fallback_frames_total" ["port", "name", "reason"]
        "Frames XDP sent to a port through TC, as the kernel cannot redirect to it natively, by port and reason.";
    FASTPATH_PORTS_MARKED_DOWN = Counter "edgeflow_fastpath_ports_marked_down_total" []
        "Ports the carrier guard marked down in the kernel before the forwarding thread heard.";
    FASTPATH_LESS_FRAMES = Counter "edgeflow_fastpath_less_frames_total" ["action"]
        "LESS frames the kernel handled itself (on top of the LESS mode's own counts), by what it did.";
    FASTPATH_AFDX_LINKS = Gauge "edgeflow_fastpath_afdx_links" [] "AFDX virtual links the kernel decides.";
    FASTPATH_AFDX_LINKS_KEPT = Gauge "edgeflow_fastpath_afdx_links_kept_for_priority" []
        "AFDX virtual links left to userspace because a port they leave by needs priority.";
    FASTPATH_AFDX_FRAMES = Counter "edgeflow_fastpath_afdx_frames_total" []
        "AFDX frames the kernel decided (also in the per-link AFDX families).";
    FASTPATH_AFDX_SENT_UP = Counter "edgeflow_fastpath_afdx_sent_up_frames_total" []
        "AFDX frames of no link the kernel holds, sent to userspace.";
    FASTPATH_P4_SENT_UP = Counter "edgeflow_fastpath_p4_sent_up_frames_total" ["reason"]
        "Frames a P4 program in the kernel sent to userspace, by why.";

    DROPPED = Counter "edgeflow_dropped_total" ["reason"] "Frames the switch dropped in userspace, by reason.";

    MEGAFLOW_ENTRIES = Gauge "edgeflow_megaflow_cache_entries" [] "Entries in the OpenFlow mode's megaflow cache.";
    MEGAFLOW_REMOVED = Counter "edgeflow_megaflow_cache_removed_total" ["reason"]
        "Megaflow cache entries removed, by reason (retired, expired, evicted).";
    MEGAFLOW_FLUSHES = Counter "edgeflow_megaflow_cache_flushes_total" []
        "Times the whole megaflow cache was made stale (a new generation).";
    MAC_ADDRESSES = Gauge "edgeflow_mac_table_addresses" [] "Addresses the MAC learning table holds.";
    MAC_EVICTED = Counter "edgeflow_mac_table_evicted_total" ["reason"]
        "Addresses evicted from the MAC learning table: it was full, or their port held its share.";
    METER_PACKETS = Counter "edgeflow_meter_packets_total" ["meter"] "Frames the OpenFlow meter measured.";
    METER_BYTES = Counter "edgeflow_meter_bytes_total" ["meter"] "Bytes the OpenFlow meter measured.";
    METER_BAND_PACKETS = Counter "edgeflow_meter_band_packets_total" ["meter"] "Frames over the meter's band.";
    METER_BAND_BYTES = Counter "edgeflow_meter_band_bytes_total" ["meter"] "Bytes over the meter's band.";
    GROUP_PACKETS = Counter "edgeflow_group_packets_total" ["group"] "Frames the OpenFlow group processed.";
    GROUP_BYTES = Counter "edgeflow_group_bytes_total" ["group"] "Bytes the OpenFlow group processed.";

    PARTITIONS = Gauge "edgeflow_partitions" [] "Modes sharing the switch, each on its own ports.";
    PARTITION_FENCED = Counter "edgeflow_partition_fenced_frames_total" []
        "Copies a mode sent to another mode's port, dropped.";

    AFDX_DROPPED = Counter "edgeflow_afdx_dropped_frames_total" ["vl", "reason"]
        "AFDX frames dropped, by reason; vl is empty for frames of no known virtual link (bad_destination, unknown_vl).";
    AFDX_VL_RECEIVED_FRAMES = Counter "edgeflow_afdx_vl_received_frames_total" ["vl"]
        "Frames received on the AFDX virtual link.";
    AFDX_VL_RECEIVED_BYTES = Counter "edgeflow_afdx_vl_received_bytes_total" ["vl"]
        "Bytes received on the AFDX virtual link.";
    AFDX_VL_SENT_FRAMES = Counter "edgeflow_afdx_vl_sent_frames_total" ["vl"]
        "Frames of the AFDX virtual link sent on (once per frame, whatever the ports).";

    TSN_DROPPED = Counter "edgeflow_tsn_dropped_frames_total" ["stream", "reason"]
        "TSN frames dropped, by reason; stream is empty for frames of no stream (not_stream).";
    TSN_RECEIVED = Counter "edgeflow_tsn_stream_received_frames_total" ["stream"] "Frames of the TSN stream received.";
    TSN_METERED = Counter "edgeflow_tsn_stream_metered_frames_total" ["stream", "color"]
        "Frames of the TSN stream its flow meter marked, by color (green, yellow, red).";
    TSN_GENERATED = Counter "edgeflow_tsn_stream_generated_frames_total" ["stream"]
        "Frames of the TSN stream given a sequence number here (802.1CB generation).";
    TSN_RECOVERY_PASSED = Counter "edgeflow_tsn_recovery_passed_frames_total" ["stream"]
        "802.1CB recovery: frames passed on.";
    TSN_RECOVERY_DISCARDED = Counter "edgeflow_tsn_recovery_discarded_frames_total" ["stream"]
        "802.1CB recovery: duplicates discarded.";
    TSN_RECOVERY_OUT_OF_ORDER = Counter "edgeflow_tsn_recovery_out_of_order_frames_total" ["stream"]
        "802.1CB recovery: frames passed out of order.";
    TSN_RECOVERY_ROGUE = Counter "edgeflow_tsn_recovery_rogue_frames_total" ["stream"]
        "802.1CB recovery: frames outside the history window (rogue).";
    TSN_RECOVERY_LOST = Counter "edgeflow_tsn_recovery_lost_frames_total" ["stream"]
        "802.1CB recovery: sequence numbers never seen (lost).";
    TSN_RECOVERY_RESETS = Counter "edgeflow_tsn_recovery_resets_total" ["stream"]
        "802.1CB recovery: times the recovery function reset.";
    TSN_RECOVERY_TAGLESS = Counter "edgeflow_tsn_recovery_tagless_frames_total" ["stream"]
        "802.1CB recovery: frames without a sequence tag.";

    LESS_FORWARDED = Counter "edgeflow_less_forwarded_frames_total" ["action"]
        "LESS frames forwarded in userspace, by what was done (shifted, popped, delivered, pushed, local).";
    LESS_REROUTED = Counter "edgeflow_less_rerouted_frames_total" ["case"]
        "LESS frames sent around a down port, by case (docs/less.md section 4: local, neighbour, backtracked).";
    LESS_DROPPED = Counter "edgeflow_less_dropped_frames_total" ["reason"]
        "LESS frames dropped, by reason (a malformed label stack's reason, or why it could not be forwarded).";
    LESS_HELLOS_SENT = Counter "edgeflow_less_hellos_sent_total" [] "LESS HELLOs sent.";
    LESS_PROTOCOL_RECEIVED = Counter "edgeflow_less_protocol_received_frames_total" []
        "LESS protocol frames received.";
    LESS_PROTOCOL_REFUSED = Counter "edgeflow_less_protocol_refused_frames_total" ["reason"]
        "LESS protocol frames refused: malformed (bad), or heard on an edge port (edge_port).";
    LESS_OVER_LIMIT = Counter "edgeflow_less_over_limit_total" ["limit"]
        "What a LESS limit turned away (hosts_per_port, host_queries, query_origins; docs/security.md).";
    LESS_NEIGHBOUR_REPLIES = Counter "edgeflow_less_neighbour_replies_total" ["protocol"]
        "ARP replies and IPv6 neighbour advertisements sent for hosts elsewhere in the fabric.";
    LESS_ADDRESSES = Gauge "edgeflow_less_addresses" [] "Fabric addresses this LESS switch holds.";
    LESS_ROOT = Gauge "edgeflow_less_root" [] "1 while this switch is the LESS fabric's root.";
    LESS_NEIGHBOURS = Gauge "edgeflow_less_neighbours" [] "LESS neighbours heard.";
    LESS_NEIGHBOURS_SILENCED = Counter "edgeflow_less_neighbours_silenced_total" []
        "LESS neighbours given up for silence.";
    LESS_HOSTS = Gauge "edgeflow_less_hosts" [] "Hosts the LESS switch knows on its own ports.";
    LESS_ANNOUNCEMENT_FRAMES = Gauge "edgeflow_less_announcement_frames" []
        "Frames the switch's last announcement of its hosts took.";

    P4_FRAMES = Counter "edgeflow_p4_frames_total" [] "Frames the P4 program ran on in userspace.";
    P4_COPIES = Counter "edgeflow_p4_copies_total" [] "Copies the P4 program sent (multicast, clones).";
    P4_KERNEL_FRAMES = Counter "edgeflow_p4_kernel_frames_total" [] "Frames the P4 program ran on in the kernel.";
    P4_PACKET_INS = Counter "edgeflow_p4_packet_ins_total" [] "Frames the P4 program sent to the controller.";
    P4_PACKET_OUTS = Counter "edgeflow_p4_packet_outs_total" [] "Frames from the controller the P4 program ran on.";
    P4_DIGESTS = Counter "edgeflow_p4_digests_total" [] "Digests the P4 program sent.";
    P4_DROPPED = Counter "edgeflow_p4_dropped_frames_total" ["reason"] "Frames the P4 mode dropped, by reason.";

    CONTROLLER_CONNECTED = Gauge "edgeflow_controller_connected" ["target"]
        "1 while a session with the configured controller runs, else 0.";
    CONTROLLER_SESSIONS = Gauge "edgeflow_controller_sessions" []
        "OpenFlow sessions open now (controllers and management tools).";
    FAIL_OPEN = Gauge "edgeflow_fail_open" [] "1 while the switch learns on its own (standalone, no controller).";
    FAIL_OPEN_ENTERED = Counter "edgeflow_fail_open_entered_total" [] "Times the switch began learning on its own.";
    OPENFLOW_SESSIONS_STARTED = Counter "edgeflow_openflow_sessions_started_total" []
        "OpenFlow sessions started (the peer's hello received).";
    OPENFLOW_SESSIONS_ENDED = Counter "edgeflow_openflow_sessions_ended_total" [] "OpenFlow sessions ended.";
    OPENFLOW_CONNECTIONS_REFUSED = Counter "edgeflow_openflow_connections_refused_total" ["reason"]
        "Peers a listener turned away at once: too_many_connections, or too_many_handshakes.";
    OPENFLOW_HANDSHAKES_FAILED = Counter "edgeflow_openflow_handshakes_failed_total" []
        "Connections that never reached a session (TLS refused or timed out, no hello, another version).";
    OPENFLOW_MESSAGES_REFUSED = Counter "edgeflow_openflow_messages_refused_total" ["reason"]
        "OpenFlow messages answered with an error: malformed, or a multipart request over the limit (too_big).";
    OPENFLOW_PACKET_INS_LIMITED = Counter "edgeflow_openflow_packet_ins_limited_total" []
        "Packet-ins a controller's rate limit held back.";
    OPENFLOW_ASYNC_DROPPED = Counter "edgeflow_openflow_async_messages_dropped_total" ["kind"]
        "Asynchronous messages dropped: packet-ins while their connection's output was over its limit, flow-removed and port-status only with a connection closed for not reading.";
    OPENFLOW_SLOW_READERS = Counter "edgeflow_openflow_slow_readers_closed_total" []
        "OpenFlow connections closed because the peer stopped reading.";
    P4RUNTIME_STREAMS_REFUSED = Counter "edgeflow_p4runtime_streams_refused_total" []
        "P4Runtime stream channels refused past the server's limit.";
    P4RUNTIME_WRITES_REFUSED = Counter "edgeflow_p4runtime_writes_refused_total" []
        "P4Runtime writes and pipeline sets refused for not coming from the primary.";
    P4RUNTIME_SLOW_READERS = Counter "edgeflow_p4runtime_slow_readers_closed_total" []
        "P4Runtime clients dropped for not reading their stream.";
    P4RUNTIME_PACKET_INS_DROPPED = Counter "edgeflow_p4runtime_packet_ins_dropped_total" []
        "P4Runtime packet-ins no primary took (none, or its stream full).";
    P4RUNTIME_DIGESTS_DROPPED = Counter "edgeflow_p4runtime_digests_dropped_total" []
        "P4Runtime digests no DigestEntry asked for, or that found their queue full.";

    PROCESS_CPU = Counter "process_cpu_seconds_total" [] "User and system CPU time spent, in seconds.";
    PROCESS_START_TIME = Gauge "process_start_time_seconds" [] "Start time of the process since the Unix epoch, in seconds.";
    PROCESS_VIRTUAL_MEMORY = Gauge "process_virtual_memory_bytes" [] "Virtual memory size in bytes.";
    PROCESS_RESIDENT_MEMORY = Gauge "process_resident_memory_bytes" [] "Resident memory size in bytes.";
    PROCESS_OPEN_FDS = Gauge "process_open_fds" [] "Open file descriptors.";
    PROCESS_MAX_FDS = Gauge "process_max_fds" [] "The most file descriptors the process may open.";
}

/// The list docs/metrics.md carries between its markers: one table row a family.
pub fn markdown_table() -> String {
    let mut out = String::from("| Family | Type | Labels | Help |\n|---|---|---|---|\n");
    for f in ALL {
        let labels = f.labels.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ");
        out += &format!("| `{}` | {} | {} | {} |\n", f.name, f.kind.name(), labels, f.help.replace('|', "\\|"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_named_as_prometheus_asks() {
        let mut seen = std::collections::BTreeSet::new();
        for f in ALL {
            assert!(seen.insert(f.name), "{} declared twice", f.name);
            assert!(f.name.starts_with("edgeflow_") || f.name.starts_with("process_"), "{}", f.name);
            assert!(f.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'), "{}", f.name);
            // Counters end in _total, and nothing else does.
            assert_eq!(f.name.ends_with("_total"), f.kind == Kind::Counter, "{}", f.name);
            assert!(!f.help.is_empty() && !f.help.contains('\n'), "{}", f.name);
            let mut labels = f.labels.to_vec();
            labels.sort();
            labels.dedup();
            assert_eq!(labels.len(), f.labels.len(), "{}: a label twice", f.name);
        }
    }

    /// docs/metrics.md lists exactly the families declared here: a family added without its
    /// line, or a line left for a family gone, fails here. `edgeflow metrics-families` prints
    /// the table to paste.
    #[test]
    fn the_metrics_page_lists_every_family_and_no_other() {
        let page = include_str!("../../../../docs/metrics.md");
        let (begin, end) = ("<!-- families: begin -->\n", "<!-- families: end -->");
        let start = page.find(begin).expect("the page's begin marker") + begin.len();
        let stop = page.find(end).expect("the page's end marker");
        let documented: Vec<&str> =
            page[start..stop].lines().filter_map(|l| l.strip_prefix("| `")?.split('`').next()).collect();
        let declared: Vec<&str> = ALL.iter().map(|f| f.name).collect();
        for name in &declared {
            assert!(documented.contains(name), "{name} is exported but docs/metrics.md does not list it");
        }
        for name in &documented {
            assert!(declared.contains(name), "docs/metrics.md lists {name}, which is not exported");
        }
        assert_eq!(&page[start..stop], markdown_table(), "regenerate with `edgeflow metrics-families`");
    }
}
