//! The command line: its definition is the library's, so that the man page and the shell
//! completions (`crates/docgen`, `make install`) are generated from the parser the binary runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::Flags;

#[derive(Parser)]
#[command(name = "edgeflow", version, about = "An OpenFlow 1.3 switch for Linux edge devices", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Run the switch on real interfaces.
    ///
    /// Examples:
    ///   edgeflow run --port veth1 --port veth2                       (native: a learning switch)
    ///   edgeflow run --port eth1 --port eth2 --controller tcp:192.0.2.1:6653 --listen ptcp:6634:127.0.0.1
    ///   edgeflow run --config /etc/edgeflow.toml
    #[command(verbatim_doc_comment)]
    Run(Box<RunArgs>),
    /// Check a configuration file and print what the switch would run with: every key the file
    /// left to its default written out, every port numbered. Exit status 2 and the line at fault
    /// when it is refused.
    CheckConfig {
        /// TOML file.
        file: PathBuf,
        /// Print what the switch would run with as JSON (the file's keys, defaults written out,
        /// ports numbered) rather than as TOML.
        #[arg(long)]
        json: bool,
    },
    /// Render an OpenWrt UCI config (/etc/config/edgeflow) as the TOML `run --config` reads, after
    /// checking it as `check-config` does; the procd script runs it before each start and
    /// reload. Exit status 2 and the line at fault when it is refused.
    Uci {
        /// The UCI file.
        file: PathBuf,
    },
    /// AFDX tools: `edgeflow afdx compile CONFIG` prints the config's virtual-link table as an
    /// OpenFlow 1.3 program (an ovs-ofctl script) for any OF1.3 switch.
    #[cfg(feature = "afdx")]
    #[command(subcommand)]
    Afdx(AfdxCmd),
    /// Read and change a running P4 switch's tables (mode = "p4", docs/p4.md): keys and data are
    /// written as in [[p4.entry]] (42, 0x2a, 02:00:00:00:00:01, 10.0.0.1, 10.0.0.0/8,
    /// 0x10&&&0xf0, 1..5, _).
    #[cfg(feature = "p4")]
    P4 {
        /// The switch, as for `edgeflow stats` (for `stf`: user or kernel).
        #[arg(long, short = 't', value_name = "TARGET", global = true)]
        target: Option<String>,
        #[command(subcommand)]
        command: P4Cmd,
    },
    /// Print a running switch's ports, queues, tables, fast-path counters and drop reasons.
    ///
    /// TARGET: the switch's dpid, a socket path, unix:PATH or tcp:IP:PORT (an OpenFlow listener).
    /// Without it, the only switch running (its socket in $RUNTIME_DIRECTORY, else /run/edgeflow).
    Stats {
        target: Option<String>,
        /// JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print what a running switch's kernel fast path holds, read back from its maps (as Open
    /// vSwitch's `dpctl/dump-flows`): the megaflows with their match, actions and hits (`live`
    /// false: of an older generation, a miss to the kernel), the AFDX links, the LESS ports and
    /// label stacks. The OpenFlow tables are `ovs-ofctl -O OpenFlow13 dump-flows` on the same
    /// socket.
    DumpFlows {
        /// The switch, as for `edgeflow stats`.
        target: Option<String>,
        /// The kernel's flows (the only ones this command shows).
        #[arg(long, required = true)]
        kernel: bool,
        /// JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print every metric family `--metrics` can export (name, type, labels, help), as the
    /// Markdown table of docs/metrics.md. A family not listed here is never exported.
    MetricsFamilies,
    /// Stop a running switch (as SIGTERM does: a kernel fast path it keeps goes on forwarding,
    /// see `--keep-fastpath`). With --clean, also remove what it kept in the kernel (programs,
    /// maps, the upcall interface), after it stopped or if it is not running at all: then
    /// TARGET is its dpid, and without one every switch's kept state goes.
    Stop {
        /// The switch, as for `edgeflow stats` (a local one: it is sent a signal).
        target: Option<String>,
        /// Remove the kernel state it kept.
        #[arg(long)]
        clean: bool,
    },
    /// Make a running switch read its configuration again (as SIGHUP does) and wait for the
    /// outcome: print what changed and exit 0, or print why the new configuration was refused
    /// (the running one stays) and exit 1. The unit's `systemctl reload` runs this.
    Reload {
        /// The switch, as for `edgeflow stats` (a local one: it is sent a signal).
        target: Option<String>,
    },
    /// Print a running switch's log filter, or change it without a restart: a level (error, warn,
    /// info, debug, trace) or a target filter such as `info,agent=debug` (targets are crates:
    /// agent, datapath, forwarding, pipeline, netio, ebpf, edgeflow).
    LogLevel {
        /// The new filter; without it, the filter in force is printed.
        filter: Option<String>,
        /// The switch, as for `edgeflow stats`.
        #[arg(long, short = 't', value_name = "TARGET")]
        target: Option<String>,
    },
}

#[cfg(feature = "p4")]
#[derive(Subcommand)]
pub enum P4Cmd {
    /// The program's tables (`Block.table`).
    Tables,
    /// A table's entries, with the packets and bytes each matched.
    Entries { table: String },
    /// Adds an entry (or changes the action of one with the same matches and priority), e.g.
    /// `edgeflow p4 insert L2Ingress.dmac --match 0 02:00:00:00:00:02 --action forward --args 2`.
    Insert {
        table: String,
        /// One per key of the table.
        #[arg(long = "match", num_args = 1.., required = true, value_name = "KEY")]
        keys: Vec<String>,
        #[arg(long)]
        action: String,
        /// The action's data, in its parameters' order.
        #[arg(long, num_args = 0.., value_name = "VALUE")]
        args: Vec<String>,
        /// Orders ternary and range entries: higher first.
        #[arg(long, default_value_t = 0)]
        priority: i64,
    },
    /// Removes the entry with these matches and priority.
    Delete {
        table: String,
        #[arg(long = "match", num_args = 1.., required = true, value_name = "KEY")]
        keys: Vec<String>,
        #[arg(long, default_value_t = 0)]
        priority: i64,
    },
    /// What an indirect counter (`Block.counter`) counted at INDEX.
    Counter { name: String, index: u32 },
    /// Run one of p4c's STF test scripts against PROGRAM (docs/p4.md, "STF"): its entries,
    /// groups and frames, each expectation's result printed, then PASS, FAIL or REFUSED and why;
    /// exit status 0 only on PASS. `--target user` (the default) runs the software target,
    /// `--target kernel` the kernel back end through BPF_PROG_TEST_RUN (root and clang).
    #[cfg(feature = "p4-tools")]
    Stf { program: std::path::PathBuf, script: std::path::PathBuf },
    /// Generate PROGRAM's kernel back end (BPF C for TC and XDP, docs/p4.md) without a switch:
    /// to OUTPUT, or standard output; an OUTPUT ending in .o is compiled by clang for this
    /// machine's byte order. A program that does not fit the kernel is refused with the reason.
    Compile {
        program: std::path::PathBuf,
        #[arg(long, short = 'o')]
        output: Option<std::path::PathBuf>,
    },
    /// Print PROGRAM as the mid end lowers it (docs/p4.md, "Mid end"): its types, constants and
    /// instances, then every action, table and block as typed statements (`add.u16`,
    /// `sext.s16`, `65535:u16`), the one reading of the program the back ends are to share.
    #[cfg(feature = "p4-tools")]
    Ir { program: std::path::PathBuf },
}

#[cfg(feature = "afdx")]
#[derive(Subcommand)]
pub enum AfdxCmd {
    /// Print the [[afdx.vl]] table of CONFIG as OpenFlow 1.3 flows, meters and ALL groups: a
    /// shell script of ovs-ofctl commands that takes the switch (bridge or tcp:IP:PORT) as its
    /// argument. Frame sizes are not checked and meters are token buckets: see docs/afdx.md.
    Compile {
        config: PathBuf,
        /// The network of the switch it is for (a, b, or any): the interface id its flows accept
        /// in source MACs. Default: the config's `[afdx] network`, else any.
        #[arg(long)]
        network: Option<String>,
    },
}

#[derive(Args, Default)]
pub struct RunArgs {
    /// TOML configuration file (flags below add to or override it).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// An interface to switch; OpenFlow port numbers 1, 2, … in the order given.
    #[arg(long = "port", short = 'p', value_name = "IFNAME")]
    pub ports: Vec<String>,
    /// A controller: tcp:IP[:PORT], tls:IP[:PORT], unix:PATH, or ptcp:/ptls:/punix: to wait for one.
    #[arg(long = "controller", value_name = "TARGET")]
    pub controllers: Vec<String>,
    /// A management listener, e.g. ptcp:6634 (loopback unless an address follows: ptcp:6634:0.0.0.0)
    /// for ovs-ofctl, or punix:/run/edgeflow.sock.
    #[arg(long = "listen", value_name = "TARGET")]
    pub listen: Vec<String>,
    /// What to do without a controller: secure (keep flows, drop misses) or standalone (learn).
    #[arg(long, value_name = "MODE")]
    pub fail_mode: Option<String>,
    /// Datapath id, hex (default: from the first port's MAC address).
    #[arg(long, value_name = "HEX")]
    pub dpid: Option<String>,
    /// Number of flow tables (1-254, default 64).
    #[arg(long, value_name = "N")]
    pub tables: Option<u32>,
    /// Create a tap interface of this name as the LOCAL port.
    #[arg(long, value_name = "IFNAME")]
    pub local_port: Option<String>,
    /// Seconds of silence before probing a controller with an echo request.
    #[arg(long, value_name = "SECS")]
    pub probe_interval: Option<u64>,
    /// With --fail-mode standalone: seconds without a controller before the switch learns on its
    /// own [default: 3].
    #[arg(long, value_name = "SECS")]
    pub fail_open_delay: Option<u64>,
    /// Datapath: user (userspace, AF_PACKET rings), tc (kernel fast path at TC: keeps GSO, best for
    /// TCP) or xdp (kernel fast path at XDP: best for small frames).
    #[arg(long, value_name = "KIND")]
    pub datapath: Option<String>,
    /// How ports move their frames in userspace: af_packet (memory-mapped AF_PACKET rings, the
    /// default) or af_xdp (AF_XDP sockets fed by an XDP program on each port, zero-copy where the
    /// driver has it; only with --datapath user). `[[port]] io` sets one port's.
    #[arg(long, value_name = "KIND")]
    pub io: Option<String>,
    /// How the forwarding thread waits for frames: wait (sleeps until a port has some, the
    /// default) or busy (never sleeps: a frame waits for no wake-up, and a core stays busy; pin it
    /// with egress_cpu). For the userspace datapath's latency.
    #[arg(long, value_name = "HOW")]
    pub poll: Option<String>,
    /// How many translations the kernel fast path holds at most (tc, xdp; default 16384). Each
    /// costs about half a kilobyte of kernel memory while it exists; the rest stay in userspace.
    #[arg(long, value_name = "N")]
    pub fastpath_entries: Option<u32>,
    /// Leave the kernel fast path (tc, xdp) forwarding the flows it holds when the switch stops or
    /// is killed, pinned under /sys/fs/bpf/edgeflow/DPID; the next run of the same switch takes
    /// it over without a lost frame (`edgeflow stop --clean` removes it).
    #[arg(long)]
    pub keep_fastpath: bool,
    /// How programs are attached: auto (TCX and XDP links where the kernel has them, else the
    /// older ways) or legacy (clsact cls_bpf filters and netlink XDP, as before Linux 6.6 and
    /// 5.9, on any kernel). `edgeflow stats` says which each port got.
    #[arg(long, value_name = "MODE")]
    pub kernel_compat: Option<String>,
    /// Forwarding mode: openflow (default; controllers program it), learning (a MAC-learning
    /// switch without flow tables), portmap (fixed port pairs, see --portmap), afdx (ARINC 664
    /// virtual links, from the config file's [[afdx.vl]] table; see docs/afdx.md) or less
    /// (source-routed label switching; see docs/less.md).
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// For --mode portmap: frames received on port FROM leave on port TO (repeatable).
    #[arg(long, value_name = "FROM:TO")]
    pub portmap: Vec<String>,
    /// Packet-ins per second to all controllers together (0: unlimited; default 2000).
    #[arg(long, value_name = "N")]
    pub packet_in_rate: Option<u32>,
    /// Bytes a controller connection may have waiting to be written (default 16 MiB): a peer
    /// that stops reading is disconnected there, and counted.
    #[arg(long, value_name = "BYTES")]
    pub channel_output_limit: Option<u64>,
    /// Peers connected to each listener (ptcp:, ptls:, punix:) at once, handshakes included
    /// (default 64); more are closed on arrival, and counted.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<u64>,
    /// Of those, how many may be in their TLS handshake or before their hello at once (default
    /// 16): a crowd of slow handshakes cannot take every place.
    #[arg(long, value_name = "N")]
    pub max_handshakes: Option<u64>,
    /// The bytes a multipart request sent in parts may add up to (default 1 MiB); past it the
    /// request is refused with OFPBRC_MULTIPART_BUFFER_OVERFLOW, and counted.
    #[arg(long, value_name = "BYTES")]
    pub max_request_bytes: Option<u64>,
    /// Packet-ins per second to each controller (default 0: only --packet-in-rate, the
    /// switch's); what one controller's limit holds back is counted, the others still get it.
    #[arg(long, value_name = "N")]
    pub controller_packet_in_rate: Option<u64>,
    /// Receive frames each port's AF_PACKET ring holds (transmit: half as many), 2 KiB each: the
    /// most of the switch's resident memory. Default: sized for each port's link, 256 (0.75 MiB
    /// with the transmit half) up to 1 Gbit/s, 1024 (3 MiB) above or unknown (docs/deploy.md).
    #[arg(long, value_name = "N")]
    pub ring_frames: Option<u64>,
    /// TLS private key (PEM), for tls:/ptls: targets.
    #[arg(long, value_name = "FILE")]
    pub private_key: Option<PathBuf>,
    /// TLS certificate (PEM) signed by the CA.
    #[arg(long, value_name = "FILE")]
    pub certificate: Option<PathBuf>,
    /// CA certificate (PEM) the peer's certificate must be signed by.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Accept only the TLS peer whose certificate has this SHA-256 (64 hex digits, colons
    /// allowed, as `openssl x509 -noout -fingerprint -sha256` prints it), besides the CA's check.
    #[arg(long, value_name = "SHA256")]
    pub peer_cert_sha256: Option<String>,
    /// Accept only TLS peers whose certificate carries this name, as its subject's common name or
    /// a DNS or URI subject alternative name (repeatable: any one of them), besides the CA's
    /// check: with one CA for switches and controllers, another switch's certificate is not a
    /// controller's.
    #[arg(long = "peer-name", value_name = "NAME")]
    pub peer_names: Vec<String>,
    /// Serve Prometheus metrics on http://ADDR:PORT/metrics: PORT alone is loopback only
    /// (e.g. 9108, or 0.0.0.0:9108 for every address). Off by default.
    #[arg(long, value_name = "[ADDR:]PORT")]
    pub metrics: Option<String>,
    /// Serve P4Runtime (gRPC) on ADDR:PORT for the P4 program's tables (mode p4; P4Runtime's
    /// port is 9559): PORT alone is loopback only; `tls:` before it serves TLS with the switch's
    /// --private-key and --certificate, and takes only clients whose certificate --ca-cert signed
    /// (and --peer-name or --peer-cert-sha256 allow). Off by default.
    #[arg(long, value_name = "[tls:][ADDR:]PORT")]
    pub p4runtime: Option<String>,
    /// Log filter, e.g. info, debug, agent=debug (default: $RUST_LOG or info).
    #[arg(long, value_name = "FILTER")]
    pub log: Option<String>,
    /// Started as root, run as USER from the start, keeping only the capabilities the
    /// configuration needs (NET_RAW and NET_ADMIN; BPF and PERFMON for the fast path, SYS_ADMIN
    /// before Linux 5.8; SYS_NICE for egress_timing fifo): what procd, which starts services as
    /// root, cannot grant (docs/security.md). Under systemd the unit's User= does it.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
}

impl RunArgs {
    pub fn flags(&self) -> Flags {
        Flags {
            ports: self.ports.clone(),
            controllers: self.controllers.clone(),
            listen: self.listen.clone(),
            fail_mode: self.fail_mode.clone(),
            dpid: self.dpid.clone(),
            tables: self.tables,
            local_port: self.local_port.clone(),
            probe_interval: self.probe_interval,
            fail_open_delay: self.fail_open_delay,
            datapath: self.datapath.clone(),
            io: self.io.clone(),
            poll: self.poll.clone(),
            fastpath_entries: self.fastpath_entries,
            keep_fastpath: self.keep_fastpath,
            kernel_compat: self.kernel_compat.clone(),
            mode: self.mode.clone(),
            portmap: self.portmap.clone(),
            packet_in_rate: self.packet_in_rate,
            channel_output_limit: self.channel_output_limit,
            max_connections: self.max_connections,
            max_handshakes: self.max_handshakes,
            max_request_bytes: self.max_request_bytes,
            ring_frames: self.ring_frames,
            controller_packet_in_rate: self.controller_packet_in_rate,
            peer_cert_sha256: self.peer_cert_sha256.clone(),
            peer_names: self.peer_names.clone(),
            private_key: self.private_key.clone(),
            certificate: self.certificate.clone(),
            ca_cert: self.ca_cert.clone(),
            metrics: self.metrics.clone(),
            p4runtime: self.p4runtime.clone(),
        }
    }
}
