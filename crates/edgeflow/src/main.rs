//! `edgeflow`: an OpenFlow 1.3 switch for Linux edge devices.
//!
//! About 700 lines, one concern: the binary's commands, each dispatched here to the library
//! or the running switch, and `run`, which wires the switch, its agent and its servers together.

mod logging;
mod metrics;
mod privileges;
mod running;
mod service;
mod stats;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use datapath::{Command, RingConfig, Switch, SwitchConfig};
#[cfg(feature = "afdx")]
use edgeflow::cli::AfdxCmd;
use edgeflow::cli::{Cli, Cmd, RunArgs};
use edgeflow::config::{self, ModeSetting, Settings};
use tracing::{error, info};

/// Set to 1 when the switch starts, it arms the request that panics the forwarding thread
/// (`datapath::switch::TEST_PANIC`), so that the release binary the tests run can show that a
/// panic ends the process. An environment variable, not a build feature: the tests run the
/// binary that ships, and a feature would need a second build of it. Not a request open to every
/// switch: only whoever sets the environment the switch starts in, who controls it anyway, can
/// give controllers this off switch (docs/security.md).
const TEST_PANIC_VARIABLE: &str = "EDGEFLOW_TEST_PANIC";

fn load(args: &RunArgs) -> Result<Settings, String> {
    match &args.config {
        Some(path) => {
            let (file, src) = config::load_file(path)?;
            config::settings(Some((&file, &src, path)), &args.flags())
        }
        None => config::settings(None, &args.flags()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::CheckConfig { file, json } => {
            let args = RunArgs { config: Some(file.clone()), ..Default::default() };
            match load(&args) {
                Ok(s) => {
                    let src = std::fs::read_to_string(&file).unwrap_or_default();
                    let effective = config::effective(&s, &src);
                    if json {
                        println!("{effective:#}");
                    } else {
                        println!("# {}: accepted. What the switch runs with:\n", file.display());
                        print!("{}", config::as_toml(&effective));
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("edgeflow: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Uci { file } => {
            let rendered =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display())).and_then(|src| {
                    config::uci::checked(&src, &file.display().to_string(), |path| {
                        std::fs::read_to_string(path).map_err(|e| e.to_string())
                    })
                });
            match rendered {
                Ok(toml) => {
                    print!("{toml}");
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
        Cmd::DumpFlows { target, kernel: _, json } => {
            match stats::request(target.as_deref(), datapath::switch::KERNEL_DUMP, Vec::new()) {
                Ok(dump) if dump["error"].is_string() => {
                    eprintln!("edgeflow dump-flows: {}", dump["error"].as_str().unwrap_or(""));
                    ExitCode::FAILURE
                }
                Ok(dump) => {
                    if json {
                        println!("{dump:#}");
                    } else {
                        print!("{}", stats::render_kernel(&dump));
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("edgeflow dump-flows: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        #[cfg(feature = "p4-tools")]
        Cmd::P4 { target, command: edgeflow::cli::P4Cmd::Stf { program, script } } => {
            edgeflow::p4_stf::main(&program, &script, target.as_deref())
        }
        #[cfg(feature = "p4")]
        Cmd::P4 { command: edgeflow::cli::P4Cmd::Compile { program, output }, .. } => {
            match p4_compile(&program, output.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("edgeflow p4 compile: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        #[cfg(feature = "p4-tools")]
        Cmd::P4 { command: edgeflow::cli::P4Cmd::Ir { program }, .. } => {
            let lowered = std::fs::read_to_string(&program)
                .map_err(|e| format!("{}: {e}", program.display()))
                .and_then(|text| p4::front_end_at(&program, &text))
                .and_then(|(p, c)| p4::midend::lower::lower_file(&program.display().to_string(), &p, &c));
            match lowered {
                Ok(ir) => {
                    print!("{ir}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("edgeflow p4 ir: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        #[cfg(feature = "p4")]
        Cmd::P4 { target, command } => {
            let answer = p4_request(&command)
                .and_then(|req| stats::request(target.as_deref(), datapath::switch::MODE_CONTROL, req.into_bytes()));
            match answer {
                Ok(a) if a["ok"].is_string() => {
                    let text = a["ok"].as_str().unwrap_or("");
                    if !text.is_empty() {
                        println!("{text}");
                    }
                    ExitCode::SUCCESS
                }
                Ok(a) => {
                    eprintln!("edgeflow p4: {}", a["error"].as_str().unwrap_or("the switch gave no answer"));
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("edgeflow p4: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::MetricsFamilies => {
            print!("{}", metrics::markdown_table());
            ExitCode::SUCCESS
        }
        Cmd::Stop { target, clean } => match running::stop(target.as_deref(), clean) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("edgeflow stop: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::Reload { target } => match running::reload(target.as_deref()) {
            Ok(what) => {
                println!("configuration applied: {what}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("edgeflow reload: {e}");
                ExitCode::FAILURE
            }
        },
        Cmd::LogLevel { filter, target } => {
            let data = filter.unwrap_or_default().into_bytes();
            match stats::request(target.as_deref(), datapath::switch::LOG_FILTER, data) {
                Ok(answer) => match (answer["filter"].as_str(), answer["error"].as_str()) {
                    (Some(filter), _) => {
                        println!("{filter}");
                        ExitCode::SUCCESS
                    }
                    (None, error) => {
                        eprintln!("edgeflow log-level: {}", error.unwrap_or("the switch gave no answer"));
                        ExitCode::FAILURE
                    }
                },
                Err(e) => {
                    eprintln!("edgeflow log-level: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Run(args) => {
            let settings = match load(&args) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("edgeflow: {e}");
                    return ExitCode::from(2);
                }
            };
            logging::init(args.log.as_deref());
            service::end_process_on_panic(logging::stderr_is_journal());
            if std::env::var_os(TEST_PANIC_VARIABLE).is_some_and(|v| v == "1") {
                tracing::warn!(
                    "{TEST_PANIC_VARIABLE}=1: a controller (master or equal) can crash this switch with one request, \
                     for the test that a panic ends the process; never set it for a service"
                );
                datapath::switch::arm_test_panic();
            }
            if let Some(user) = &args.user {
                // AF_XDP ports load and attach an XDP program of their own: the fast path's
                // capabilities.
                let af_xdp = std::iter::once(settings.io)
                    .chain(settings.port_io.iter().map(|(_, io)| *io))
                    .any(|io| io == datapath::PortIo::AfXdp);
                let needs = privileges::Needs {
                    fast_path: settings.fastpath.is_some() || af_xdp,
                    realtime: settings.timing == datapath::switch::Timing::Fifo,
                    pinned_memory: af_xdp,
                };
                match privileges::become_user(user, needs) {
                    Ok(kept) => info!("running as {kept}"),
                    Err(e) => {
                        error!("{e}");
                        return ExitCode::from(2);
                    }
                }
            }
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

/// Runs the switch until SIGTERM or SIGINT; on SIGHUP, `reload` reads the configuration again
/// ([`reload_on_hangup`]).
fn run(mut s: Settings, reload: impl Fn() -> Result<Settings, String> + 'static) -> Result<(), String> {
    // SIGHUP's default is to end the process: one that came while the switch starts (a reload
    // right after `systemctl start`) killed it. Ignored until the reload handler takes it below.
    // SAFETY: setting a signal's disposition to ignore, before any thread is started.
    unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
    // Every switch can be reached by management tools (`edgeflow stats`, `ovs-ofctl`) through a
    // socket named after its dpid, as Open vSwitch offers `<bridge>.mgmt`.
    let mgmt = stats::mgmt_socket(s.dpid);
    let runtime = service::runtime_dir();
    // The directory may exist and belong to someone else (a switch run as an unprivileged user
    // without its own runtime directory): then the switch runs without this socket, and says so.
    let usable = std::fs::create_dir_all(&runtime).and_then(|()| {
        let _ = std::fs::remove_file(&mgmt);
        std::os::unix::net::UnixListener::bind(&mgmt).map(drop)
    });
    let own_listener = match usable {
        Ok(()) => Some(agent::Target::PUnix(mgmt.clone())),
        Err(e) => {
            tracing::warn!("no management socket in {}: {e}", runtime.display());
            None
        }
    };
    s.listen.extend(own_listener.clone());
    let notifier = std::rc::Rc::new(service::Notifier::from_env());
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
        io: s.io,
        port_io: s.port_io.clone(),
        dp_desc: format!("edgeflow dpid {:016x}", s.dpid),
        fastpath: s.fastpath,
        fastpath_entries: s.fastpath_entries,
        egress: s.egress.clone(),
        timing: s.timing,
        poll: s.poll,
        cpu: s.cpu,
        keep_fastpath: s.keep_fastpath,
        awaits_controller: openflow_anywhere && !s.controllers.is_empty(),
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
                other => other.name(),
            })
            .collect::<Vec<_>>()
            .join("+"),
        port_modes = ?s.port_modes.iter().map(|(_, ports)| ports).collect::<Vec<_>>(),
        keep_fastpath = s.keep_fastpath && s.fastpath.is_some(),
        "starting"
    );
    let forwarding = std::thread::Builder::new()
        .name("forwarding".into())
        .spawn(move || switch.run())
        .map_err(|e| format!("cannot start the forwarding thread: {e}"))?;

    let agent_cfg = agent_config(&s, features.clone());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    // Taken now, not when the reload task first runs: from here a SIGHUP is a reload, before
    // READY=1 tells the service manager that reloads may come.
    let hangups = {
        let _in_runtime = rt.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).map_err(|e| format!("SIGHUP: {e}"))?
    };
    let local = tokio::task::LocalSet::new();
    let (agent_updates, updates) = tokio::sync::mpsc::unbounded_channel();
    let reloading = reload_on_hangup(
        hangups,
        s.clone(),
        own_listener,
        reload,
        handle.clone(),
        agent_updates,
        notifier.clone(),
        features,
    );
    local.spawn_local(reloading);
    if let Some(every) = notifier.watchdog_interval() {
        local.spawn_local(watchdog(notifier.clone(), handle.clone(), every));
    }
    // Ready once the ports are open, the fast path is loaded (both in Switch::new) and every
    // listener is bound.
    let status = format!(
        "READY=1\nSTATUS=switching {} ports, datapath {}",
        s.ports.len(),
        datapath::fastpath::datapath_name(s.fastpath)
    );
    let ready = {
        let notifier = notifier.clone();
        move || notifier.notify(&status)
    };
    let stopping = {
        let notifier = notifier.clone();
        async move {
            shutdown_signal().await;
            notifier.notify("STOPPING=1");
        }
    };
    let handle_for_agent = handle.clone();
    let metrics_addr = s.metrics;
    let metrics_switch = handle.clone();
    #[cfg(feature = "p4runtime")]
    let p4runtime = match s.p4runtime {
        Some(addr) => Some((addr, p4runtime_service(&s, handle.clone()), p4runtime_tls(&s)?)),
        None => None,
    };
    let result = local.block_on(&rt, async move {
        if let Some(addr) = metrics_addr {
            metrics::serve(addr, metrics_switch).await?;
        }
        #[cfg(feature = "p4runtime")]
        if let Some((addr, service, tls)) = p4runtime {
            let secure = tls.is_some();
            p4runtime::serve(addr, service, tls).await?;
            info!(%addr, tls = secure, "P4Runtime listening");
        }
        agent::run(agent_cfg, handle_for_agent, events, updates, ready, stopping).await
    });
    handle.send(Command::Shutdown);
    let _ = forwarding.join();
    let _ = std::fs::remove_file(&mgmt);
    info!("stopped");
    result
}

/// P4Runtime's TLS, where its address is `tls:`: the OpenFlow channel's certificate and rules.
#[cfg(feature = "p4runtime")]
fn p4runtime_tls(s: &Settings) -> Result<Option<p4runtime::tls::Tls>, String> {
    if !s.p4runtime_tls {
        return Ok(None);
    }
    let files = s.tls.as_ref().ok_or("P4Runtime over TLS needs the switch's certificate")?;
    let config = agent::tls::server_config(files).map_err(|e| format!("P4Runtime TLS: {e}"))?;
    #[cfg(feature = "tls")]
    return Ok(Some(p4runtime::tls::Tls::new(&config)));
    #[cfg(not(feature = "tls"))]
    match *config {}
}

/// P4Runtime for the switch's P4 program: device id the dpid, the program named after its file.
#[cfg(feature = "p4runtime")]
fn p4runtime_service(s: &Settings, handle: datapath::SwitchHandle) -> p4runtime::server::Service {
    /// The switch's P4 program, reached on the forwarding thread; whether it runs in userspace
    /// only (no kernel datapath, whose object is built from the program at start).
    struct Program(datapath::SwitchHandle, bool, bool);
    impl Program {
        /// Runs `job` on the P4 mode between two frames (not at all if the switch runs none).
        fn on_mode(&self, job: impl FnOnce(&mut forwarding::p4::P4Mode) -> datapath::Deliver + Send + 'static) {
            self.0.send(Command::WithMode(Box::new(move |mode| {
                let p4 = mode.as_any_mut().and_then(|m| m.downcast_mut::<forwarding::p4::P4Mode>());
                match p4 {
                    Some(p4) => job(p4),
                    None => Box::new(|| ()),
                }
            })));
        }
    }
    impl p4runtime::Device for Program {
        fn run(&self, job: p4runtime::Job) {
            // Dropped unrun without a P4 mode: the request fails as UNAVAILABLE.
            self.on_mode(move |p4| job(p4.switch_mut()));
        }

        fn to_controller(&self, mut to: p4runtime::server::ToServer) {
            use forwarding::p4::ToController;
            use p4runtime::server::FromSwitch;
            self.on_mode(move |p4| {
                p4.set_controller(Some(Box::new(move |what| {
                    to(match what {
                        ToController::PacketIn(info, frame) => FromSwitch::PacketIn(info, frame),
                        ToController::Digest(info, d) => FromSwitch::Digest(info, d),
                    })
                })));
                Box::new(|| ())
            });
        }

        fn has_cpu_port(&self) -> bool {
            self.2
        }

        fn packet_out(&self, frame: Vec<u8>) {
            self.on_mode(move |p4| {
                if let Err(e) = p4.packet_out(frame) {
                    tracing::debug!("P4Runtime packet-out dropped: {e}");
                }
                Box::new(|| ())
            });
        }

        fn kernel_runs_program(&self) -> bool {
            !self.1
        }

        fn refused(&self, what: p4runtime::server::Refusal) {
            use p4runtime::server::Refusal;
            let c = &self.0.channel;
            datapath::ChannelCounters::bump(match what {
                Refusal::Stream => &c.p4runtime_streams_refused,
                Refusal::Write => &c.p4runtime_writes_refused,
                Refusal::SlowReader => &c.p4runtime_slow_readers_dropped,
                Refusal::PacketIn => &c.p4runtime_packet_ins_dropped,
                Refusal::Digest => &c.p4runtime_digests_dropped,
            });
        }
    }
    let p4 = std::iter::once(&s.mode).chain(s.port_modes.iter().map(|(m, _)| m)).find_map(|m| match m {
        ModeSetting::P4(c) => Some(c),
        _ => None,
    });
    let name = p4
        .and_then(|c| std::path::Path::new(&c.file).file_stem().map(|f| f.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let cpu_port = p4.is_some_and(|c| c.cpu_port.is_some());
    p4runtime::server::Service::new(s.dpid, name, std::sync::Arc::new(Program(handle, s.fastpath.is_none(), cpu_port)))
}

/// The control protocol's request (`forwarding::p4`) for an `edgeflow p4` command: keys and
/// data as an operator writes them, turned into the protocol's hex.
#[cfg(feature = "p4")]
fn p4_request(cmd: &edgeflow::cli::P4Cmd) -> Result<String, String> {
    use edgeflow::cli::P4Cmd;
    use forwarding::p4::match_text;
    let keys = |keys: &[String]| -> Result<String, String> {
        let m = keys.iter().map(|k| config::parse_key(k).map(|m| match_text(&m))).collect::<Result<Vec<_>, _>>()?;
        Ok(m.join(" "))
    };
    Ok(match cmd {
        P4Cmd::Tables => "tables".into(),
        P4Cmd::Entries { table } => format!("entries {table}"),
        P4Cmd::Counter { name, index } => format!("counter {name} {index}"),
        P4Cmd::Insert { table, keys: k, action, args, priority } => {
            let data =
                args.iter().map(|a| config::parse_value(a).map(|v| format!("{v:x}"))).collect::<Result<Vec<_>, _>>()?;
            format!("insert {table} {action} {priority} {} -- {}", keys(k)?, data.join(" "))
        }
        P4Cmd::Delete { table, keys: k, priority } => format!("delete {table} - {priority} {}", keys(k)?),
        P4Cmd::Compile { .. } => return Err("this command runs here, not on a switch".into()),
        #[cfg(feature = "p4-tools")]
        P4Cmd::Stf { .. } | P4Cmd::Ir { .. } => return Err("this command runs here, not on a switch".into()),
    })
}

/// `edgeflow p4 compile`: the kernel back end's C for `program`, or its object when `output`
/// ends in .o (clang, as the fast path is built: bpf in this machine's byte order).
#[cfg(feature = "p4")]
fn p4_compile(program: &std::path::Path, output: Option<&std::path::Path>) -> Result<(), String> {
    let text = std::fs::read_to_string(program).map_err(|e| format!("{}: {e}", program.display()))?;
    let (p, c) = p4::front_end_at(program, &text)?;
    let generated = p4::backends::ebpf::generate_in(&program.display().to_string(), &p, &c)?;
    let Some(out) = output else {
        print!("{}", generated.c);
        return Ok(());
    };
    if out.extension().is_none_or(|e| e != "o") {
        return std::fs::write(out, &generated.c).map_err(|e| format!("{}: {e}", out.display()));
    }
    let what = format!("{}'s C", program.display());
    let elf = datapath::ebpf::clang::compile(&what, &generated.c).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{e}: write the C (-o prog.c) and compile it where clang is"),
        _ => e.to_string(),
    })?;
    std::fs::write(out, elf).map_err(|e| format!("{}: {e}", out.display()))
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
        // The configuration has compiled the program and checked its entries.
        #[cfg(feature = "p4")]
        ModeSetting::P4(cfg) => {
            let mode = forwarding::p4::P4Mode::new(cfg).map_err(|e| format!("{e:?}"))?;
            info!("P4 program compiled for the software target");
            Box::new(mode)
        }
    })
}

/// The agent's half of the settings.
fn agent_config(s: &Settings, features: ofp::message::SwitchFeatures) -> agent::AgentConfig {
    agent::AgentConfig {
        controllers: s.controllers.clone(),
        listeners: s.listen.clone(),
        tls: s.tls.clone(),
        fail_mode: s.fail_mode,
        probe_interval: s.probe_interval,
        fail_open_delay: s.fail_open_delay,
        max_backoff: Duration::from_secs(8),
        features,
        output_limit: s.channel_output_limit,
        max_connections: s.max_connections,
        max_handshakes: s.max_handshakes,
        max_request_bytes: s.max_request_bytes,
        controller_packet_in_rate: s.controller_packet_in_rate,
    }
}

/// SIGHUP: the configuration is read again and applied without a restart where it can be
/// (`config::reload::live_change`): ports join and leave, egress settings, the AFDX table and
/// LESS settings change, controllers and listeners come and go; installed flows and the frames
/// of ports that stay are kept. A configuration with an error, or with a change only a restart
/// can make, is refused whole (logged with the line or the setting) and the running one stays.
#[allow(clippy::too_many_arguments)]
async fn reload_on_hangup(
    mut hup: tokio::signal::unix::Signal,
    mut running: Settings,
    own_listener: Option<agent::Target>,
    reload: impl Fn() -> Result<Settings, String>,
    switch: datapath::SwitchHandle,
    agent: tokio::sync::mpsc::UnboundedSender<agent::AgentConfig>,
    notifier: std::rc::Rc<service::Notifier>,
    features: ofp::message::SwitchFeatures,
) {
    while hup.recv().await.is_some() {
        notifier.notify(&service::reloading_message());
        let checked = reload().and_then(|mut next| {
            // The management socket is the switch's own, not the file's.
            next.listen.extend(own_listener.iter().cloned());
            config::reload::live_change(&running, &next).map(|mode| (next, mode))
        });
        let outcome = match checked {
            Err(e) => Err(e),
            Ok((next, mode)) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                switch.send(Command::Reconfigure {
                    ports: next.ports.clone(),
                    egress: next.egress.clone(),
                    mode,
                    done: Box::new(move |r| {
                        let _ = tx.send(r);
                    }),
                });
                match rx.await {
                    Ok(Ok(what)) => {
                        let _ = agent.send(agent_config(&next, features.clone()));
                        running = next;
                        Ok(what)
                    }
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err("the forwarding thread did not answer".to_string()),
                }
            }
        };
        match &outcome {
            Ok(what) => info!("SIGHUP: configuration applied: {what}"),
            Err(e) => tracing::warn!("SIGHUP: configuration refused, the running one stays: {e}"),
        }
        // After the switch took it (or not): `edgeflow reload`, waiting on the report, then
        // reads an outcome whose effects are in force.
        let (applied, message) = match outcome {
            Ok(what) => (true, what),
            Err(e) => (false, e),
        };
        switch.send(Command::Reloaded { applied, message });
        notifier.notify("READY=1");
    }
}

/// Pings the service manager's watchdog as long as the forwarding thread answers: a thread stuck
/// in a loop or a syscall goes unanswered, and the manager restarts the switch.
async fn watchdog(notifier: std::rc::Rc<service::Notifier>, switch: datapath::SwitchHandle, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let (tx, rx) = tokio::sync::oneshot::channel();
        switch.send(Command::Heartbeat(Box::new(move || {
            let _ = tx.send(());
        })));
        match tokio::time::timeout(every, rx).await {
            Ok(Ok(())) => notifier.notify("WATCHDOG=1"),
            _ => tracing::warn!("the forwarding thread did not answer within {every:?}: the watchdog is not told"),
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => info!("SIGINT: shutting down"),
        _ = term.recv() => info!("SIGTERM: shutting down"),
    }
}
