//! `edgeflow-loadgen forward`: a bare XDP redirect from one interface to another, no switch. What
//! it adds to a frame's latency is the floor under any XDP switch on the same links, as `tc
//! mirred` is under a TC one.

use std::time::Duration;

use clap::Args;

#[derive(Args)]
pub struct ForwardArgs {
    /// Frames arriving on this interface…
    #[arg(long)]
    from: String,
    /// …leave by this one, unchanged (its peer must run NAPI: an XDP program or GRO on).
    #[arg(long)]
    to: String,
    /// Seconds to stay attached; killing the process detaches at once.
    #[arg(long, default_value_t = 3600.0)]
    duration: f64,
}

pub fn forward(a: ForwardArgs) -> Result<(), String> {
    let index = |name: &str| netio::sys::ifindex(name).map_err(|e| format!("{name}: {e}"));
    let (from, to) = (index(&a.from)?, index(&a.to)?);
    let obj = ebpf::Object::load(ebpf::objects::LOADGEN).map_err(|e| format!("loading the XDP forwarder: {e}"))?;
    let err = |e: std::io::Error| e.to_string();
    obj.map("loadgen_forward").map_err(err)?.update(&0u32.to_ne_bytes(), &to.to_ne_bytes()).map_err(err)?;
    let _link = obj
        .program("loadgen_forward_all")
        .map_err(err)?
        .attach_xdp(from)
        .map_err(|e| format!("attaching to {}: {e}", a.from))?;
    println!("{{\"from\": {from}, \"to\": {to}}}");
    std::thread::sleep(Duration::from_secs_f64(a.duration));
    Ok(())
}
