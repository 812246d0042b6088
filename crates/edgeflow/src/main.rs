//! `edgeflow`: an OpenFlow 1.3 switch for Linux edge devices.

mod stats;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use edgeflow::config::{self, Flags, ModeSetting, Settings};
use datapath::{Command, RingConfig, Switch, SwitchConfig};
use tracing::{error, info};

#[derive(Parser)]
#[command(name = "edgeflow", version, about = "An OpenFlow 1.3 switch for Linux edge devices", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the switch on real interfaces.
    ///
    /// Examples:
    ///   edgeflow run --port veth1 --port veth2                       (native: a learning switch)
    ///   edgeflow run --port eth1 --port eth2 --controller tcp:192.0.2.1:6653 --listen ptcp:6634:127.0.0.1
    ///   edgeflow run --config /etc/edgeflow.toml
    #[command(verbatim_doc_comment)]
    Run(Box<RunArgs>),
    /// Check a configuration file and print what it sets up.
    CheckConfig {
        /// TOML file.
        file: PathBuf,
    },
    /// AFDX tools: `edgeflow afdx compile CONFIG` prints the config's virtual-link table as an
    /// OpenFlow 1.3 program (an ovs-ofctl script) for any OF1.3 switch.
    #[cfg(feature = "afdx")]
    #[command(subcommand)]
    Afdx(AfdxCmd),
    /// Print a running switch's ports, queues, tables, fast-path counters and drop reasons.
    ///
    /// TARGET: the switch's dpid, a socket path, unix:PATH or tcp:IP:PORT (an OpenFlow listener).
    /// Without it, the only switch running (its socket in /run/edgeflow).
    Stats {
        target: Option<String>,
        /// JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
}

#[cfg(feature = "afdx")]
#[derive(Subcommand)]
enum AfdxCmd {
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
struct RunArgs {
    /// TOML configuration file (flags below add to or override it).
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// An interface to switch; OpenFlow port numbers 1, 2, … in the order given.
    #[arg(long = "port", short = 'p', value_name = "IFNAME")]
    ports: Vec<String>,
    /// A controller: tcp:IP[:PORT], tls:IP[:PORT], unix:PATH, or ptcp:/ptls:/punix: to wait for one.
    #[arg(long = "controller", value_name = "TARGET")]
    controllers: Vec<String>,
    /// A management listener, e.g. ptcp:6634 (loopback unless an address follows: ptcp:6634:0.0.0.0)
    /// for ovs-ofctl, or punix:/run/edgeflow.sock.
    #[arg(long = "listen", value_name = "TARGET")]
    listen: Vec<String>,
    /// What to do without a controller: secure (keep flows, drop misses) or standalone (learn).
    #[arg(long, value_name = "MODE")]
    fail_mode: Option<String>,
    /// Datapath id, hex (default: from the first port's MAC address).
    #[arg(long, value_name = "HEX")]
    dpid: Option<String>,
    /// Number of flow tables (1-254, default 64).
    #[arg(long, value_name = "N")]
    tables: Option<u32>,
    /// Create a tap interface of this name as the LOCAL port.
    #[arg(long, value_name = "IFNAME")]
    local_port: Option<String>,
    /// Seconds of silence before probing a controller with an echo request.
    #[arg(long, value_name = "SECS")]
    probe_interval: Option<u64>,
    /// Datapath: user (userspace, AF_PACKET rings), tc (kernel fast path at TC: keeps GSO, best for
    /// TCP) or xdp (kernel fast path at XDP: best for small frames).
    #[arg(long, value_name = "KIND")]
    datapath: Option<String>,
    /// How many translations the kernel fast path holds at most (tc, xdp; default 16384). Each
    /// costs about half a kilobyte of kernel memory while it exists; the rest stay in userspace.
    #[arg(long, value_name = "N")]
    fastpath_entries: Option<u32>,
    /// How programs are attached: auto (TCX and XDP links where the kernel has them, else the
    /// older ways) or legacy (clsact cls_bpf filters and netlink XDP, as before Linux 6.6 and
    /// 5.9, on any kernel). `edgeflow stats` says which each port got.
    #[arg(long, value_name = "MODE")]
    kernel_compat: Option<String>,
    /// Forwarding mode: openflow (default; controllers program it), learning (a MAC-learning
    /// switch without flow tables), portmap (fixed port pairs, see --portmap), afdx (ARINC 664
    /// virtual links, from the config file's [[afdx.vl]] table; see docs/afdx.md) or less
    /// (source-routed label switching; see docs/less.md).
    #[arg(long, value_name = "MODE")]
    mode: Option<String>,
    /// For --mode portmap: frames received on port FROM leave on port TO (repeatable).
    #[arg(long, value_name = "FROM:TO")]
    portmap: Vec<String>,
    /// Packet-ins per second to all controllers together (0: unlimited; default 2000).
    #[arg(long, value_name = "N")]
    packet_in_rate: Option<u32>,
    /// Bytes a controller connection may have waiting to be written (default 16 MiB): a peer
    /// that stops reading is disconnected there, and counted.
    #[arg(long, value_name = "BYTES")]
    channel_output_limit: Option<u64>,
    /// Peers connected to each listener (ptcp:, ptls:, punix:) at once, handshakes included
    /// (default 64); more are closed on arrival, and counted.
    #[arg(long, value_name = "N")]
    max_connections: Option<u64>,
    /// Of those, how many may be in their TLS handshake or before their hello at once (default
    /// 16): a crowd of slow handshakes cannot take every place.
    #[arg(long, value_name = "N")]
    max_handshakes: Option<u64>,
    /// The bytes a multipart request sent in parts may add up to (default 1 MiB); past it the
    /// request is refused with OFPBRC_MULTIPART_BUFFER_OVERFLOW, and counted.
    #[arg(long, value_name = "BYTES")]
    max_request_bytes: Option<u64>,
    /// Packet-ins per second to each controller (default 0: only --packet-in-rate, the
    /// switch's); what one controller's limit holds back is counted, the others still get it.
    #[arg(long, value_name = "N")]
    controller_packet_in_rate: Option<u64>,
    /// Receive frames each port's AF_PACKET ring holds (transmit: half as many), 2 KiB each: the
    /// most of the switch's resident memory. Default: sized for each port's link, 256 (0.75 MiB
    /// with the transmit half) up to 1 Gbit/s, 1024 (3 MiB) above or unknown (docs/deploy.md).
    #[arg(long, value_name = "N")]
    ring_frames: Option<u64>,
    /// TLS private key (PEM), for tls:/ptls: targets.
    #[arg(long, value_name = "FILE")]
    private_key: Option<PathBuf>,
    /// TLS certificate (PEM) signed by the CA.
    #[arg(long, value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// CA certificate (PEM) the peer's certificate must be signed by.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// Accept only the TLS peer whose certificate has this SHA-256 (64 hex digits, colons
    /// allowed, as `openssl x509 -noout -fingerprint -sha256` prints it), besides the CA's check.
    #[arg(long, value_name = "SHA256")]
    peer_cert_sha256: Option<String>,
    /// Log filter, e.g. info, debug, agent=debug (default: $RUST_LOG or info).
    #[arg(long, value_name = "FILTER")]
    log: Option<String>,
}

impl RunArgs {
    fn flags(&self) -> Flags {
        Flags {
            ports: self.ports.clone(),
            controllers: self.controllers.clone(),
            listen: self.listen.clone(),
            fail_mode: self.fail_mode.clone(),
            dpid: self.dpid.clone(),
            tables: self.tables,
            local_port: self.local_port.clone(),
            probe_interval: self.probe_interval,
            datapath: self.datapath.clone(),
            fastpath_entries: self.fastpath_entries,
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
            private_key: self.private_key.clone(),
            certificate: self.certificate.clone(),
            ca_cert: self.ca_cert.clone(),
        }
    }
}

fn load(args: &RunArgs) -> Result<Settings, String> {
    match &args.config {
        Some(path) => {
            let (file, src) = config::load_file(path)?;
            config::settings(Some((&file, &src, path)), &args.flags())
        }
        None => config::settings(None, &args.flags()),
    }
}

fn init_logging(filter: Option<&str>) {
    let filter =
        filter.map(String::from).or_else(|| std::env::var("RUST_LOG").ok()).unwrap_or_else(|| "info".to_string());
    // Targets ("info", "agent=debug,info"): what RUST_LOG is used for here, without EnvFilter's
    // regex engine (180 KiB of an embedded image).
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let targets = filter.parse::<tracing_subscriber::filter::Targets>().unwrap_or_else(|e| {
        eprintln!("edgeflow: log filter '{filter}': {e}; logging at info");
        tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO)
    });
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .finish()
        .with(targets)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::CheckConfig { file } => {
            let args = RunArgs { config: Some(file), ..Default::default() };
            match load(&args) {
                Ok(s) => {
                    println!("{s:#?}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("edgeflow: {e}");
                    ExitCode::from(2)
                }
            }
        }
        #[cfg(feature = "afdx")]
        Cmd::Afdx(AfdxCmd::Compile { config, network }) => {
            use forwarding::afdx::compile::{compile, ovs_ofctl_script, Network};
            let flag = match network.as_deref() {
                None => None,
                Some("a") => Some(Network::A),
                Some("b") => Some(Network::B),
                Some("any") => Some(Network::Any),
                Some(other) => {
                    eprintln!("edgeflow: --network {other}: expected a, b or any");
                    return ExitCode::from(2);
                }
            };
            match config::load_afdx(&config) {
                Ok((vls, constant, configured)) => {
                    let network = flag.unwrap_or(match configured {
                        Some(forwarding::afdx::NETWORK_A) => Network::A,
                        Some(forwarding::afdx::NETWORK_B) => Network::B,
                        _ => Network::Any,
                    });
                    let title = format!("{} virtual links of {}", vls.len(), config.display());
                    print!("{}", ovs_ofctl_script(&compile(&vls, constant, network), &title));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("edgeflow: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Stats { target, json } => match stats::fetch(target.as_deref()) {
            Ok(report) if json => {
                println!("{report:#}");
                ExitCode::SUCCESS
            }
            Ok(report) => {
                print!("{}", stats::render(&report));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("edgeflow stats: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Run(args) => {
            let settings = match load(&args) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("edgeflow: {e}");
                    return ExitCode::from(2);
                }
            };
            init_logging(args.log.as_deref());
            match run(settings, move || load(&args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    error!("{e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// Runs the switch until SIGTERM or SIGINT. On SIGHUP, `reload` reads the configuration again
/// and the ports' egress settings (rates, schedulers, gates, limits, priority maps) are applied
/// without a restart and without dropping what is queued; a configuration with an error is
/// refused (logged with its line) and the running one stays.
fn run(mut s: Settings, reload: impl Fn() -> Result<Settings, String> + 'static) -> Result<(), String> {
    // Every switch can be reached by management tools (`edgeflow stats`, `ovs-ofctl`) through a
    // socket named after its dpid, as Open vSwitch offers `<bridge>.mgmt`.
    let mgmt = stats::mgmt_socket(s.dpid);
    // The directory may exist and belong to someone else (a switch run as an unprivileged user
    // without its own runtime directory): then the switch runs without this socket, and says so.
    let usable = std::fs::create_dir_all(stats::MGMT_DIR).and_then(|()| {
        let _ = std::fs::remove_file(&mgmt);
        std::os::unix::net::UnixListener::bind(&mgmt).map(drop)
    });
    match usable {
        Ok(()) => s.listen.push(agent::Target::PUnix(mgmt.clone())),
        Err(e) => tracing::warn!("no management socket in {}: {e}", stats::MGMT_DIR),
    }
    let (event_sink, events) = agent::event_channel();
    let native = s.controllers.is_empty();
    let mode = if s.port_modes.is_empty() {
        make_mode(&s.mode, &s, native)?
    } else {
        // Several modes share the switch: the switch's own takes the ports that named none.
        let named: Vec<u32> = s.port_modes.iter().flat_map(|(_, ports)| ports.iter().copied()).collect();
        let own: std::collections::BTreeSet<u32> =
            s.ports.iter().map(|(no, _)| *no).filter(|no| !named.contains(no)).collect();
        let mut parts = Vec::new();
        if !own.is_empty() {
            parts.push(forwarding::partition::Part { mode: make_mode(&s.mode, &s, native)?, ports: own });
        }
        for (setting, ports) in &s.port_modes {
            let ports = ports.iter().copied().collect();
            parts.push(forwarding::partition::Part { mode: make_mode(setting, &s, native)?, ports });
        }
        Box::new(forwarding::partition::Partitioned::new(parts))
    };
    let openflow_anywhere =
        s.mode == ModeSetting::OpenFlow || s.port_modes.iter().any(|(m, _)| *m == ModeSetting::OpenFlow);
    let switch_cfg = SwitchConfig {
        dpid: s.dpid,
        // Only the OpenFlow mode has flow tables to report.
        n_tables: if openflow_anywhere { s.n_tables } else { 0 },
        ports: s.ports.clone(),
        local_port: s.local_port.clone(),
        ring: s.ring_frames.map(RingConfig::with_frames),
        dp_desc: format!("edgeflow dpid {:016x}", s.dpid),
        fastpath: s.fastpath,
        fastpath_entries: s.fastpath_entries,
        egress: s.egress.clone(),
        timing: s.timing,
        cpu: s.cpu,
    };
    datapath::attach::force_legacy(s.legacy_attach);
    let (switch, handle) = Switch::new(switch_cfg, mode, event_sink).map_err(|e| e.to_string())?;
    let features = switch.features();
    info!(
        dpid = format!("{:016x}", s.dpid),
        ports = ?s.ports,
        controllers = ?s.controllers.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        listen = ?s.listen.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        mode = std::iter::once(&s.mode)
            .chain(s.port_modes.iter().map(|(m, _)| m))
            .map(|m| match m {
                ModeSetting::OpenFlow if native => "native",
                ModeSetting::OpenFlow if s.fail_mode == agent::FailMode::Standalone => "standalone",
                ModeSetting::OpenFlow => "secure",
                ModeSetting::Learning => "learning",
                ModeSetting::PortMap(_) => "portmap",
                #[cfg(feature = "afdx")]
                ModeSetting::Afdx { .. } => "afdx",
                #[cfg(feature = "less")]
                ModeSetting::Less(_) => "less",
                #[cfg(feature = "streams")]
                ModeSetting::Streams(_) => "streams",
            })
            .collect::<Vec<_>>()
            .join("+"),
        port_modes = ?s.port_modes.iter().map(|(_, ports)| ports).collect::<Vec<_>>(),
        "starting"
    );
    let forwarding = std::thread::Builder::new()
        .name("forwarding".into())
        .spawn(move || switch.run())
        .map_err(|e| format!("cannot start the forwarding thread: {e}"))?;

    let agent_cfg = agent::AgentConfig {
        controllers: s.controllers,
        listeners: s.listen,
        tls: s.tls,
        fail_mode: s.fail_mode,
        probe_interval: s.probe_interval,
        max_backoff: Duration::from_secs(8),
        features,
        output_limit: s.channel_output_limit,
        max_connections: s.max_connections,
        max_handshakes: s.max_handshakes,
        max_request_bytes: s.max_request_bytes,
        controller_packet_in_rate: s.controller_packet_in_rate,
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    let reloader = handle.clone();
    local.spawn_local(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else { return };
        while hup.recv().await.is_some() {
            match reload() {
                Ok(new) => {
                    info!(
                        "SIGHUP: configuration read again; applying the ports' egress settings (others need a restart)"
                    );
                    reloader.send(Command::SetEgress(new.egress));
                }
                Err(e) => tracing::warn!("SIGHUP: configuration refused, the running one stays: {e}"),
            }
        }
    });
    let result = local.block_on(&rt, agent::run(agent_cfg, handle.clone(), events, shutdown_signal()));
    handle.send(Command::Shutdown);
    let _ = forwarding.join();
    let _ = std::fs::remove_file(&mgmt);
    info!("stopped");
    result
}

/// The forwarding mode a setting names.
fn make_mode(setting: &ModeSetting, s: &Settings, native: bool) -> Result<Box<dyn forwarding::Mode>, String> {
    Ok(match setting {
        ModeSetting::OpenFlow => Box::new(forwarding::openflow::OpenFlowMode::new(&forwarding::openflow::Config {
            n_tables: s.n_tables,
            table_limits: s.table_limits.clone(),
            native,
            packet_in_rate: s.packet_in_rate,
        })),
        ModeSetting::Learning => Box::new(forwarding::learning::LearningMode::new()),
        ModeSetting::PortMap(pairs) => Box::new(forwarding::portmap::PortMapMode::new(pairs)),
        // The configuration has checked the table: this cannot refuse it.
        #[cfg(feature = "afdx")]
        ModeSetting::Afdx { vls, mac_constant, network } => Box::new(
            forwarding::afdx::AfdxMode::new(vls, *mac_constant).map_err(|e| e.to_string())?.on_network(*network),
        ),
        #[cfg(feature = "less")]
        ModeSetting::Less(cfg) => {
            Box::new(forwarding::less::LessMode::new(forwarding::less::Config { switch_id: s.dpid, ..cfg.clone() }))
        }
        #[cfg(feature = "streams")]
        ModeSetting::Streams(streams) => Box::new(forwarding::streams::StreamsMode::new(streams)),
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("SIGINT: shutting down"),
        _ = term.recv() => info!("SIGTERM: shutting down"),
    }
}
