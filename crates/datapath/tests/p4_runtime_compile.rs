//! The P4 program's compile at start against another user of the machine (issue 51, item 6).
//! The switch used to write the generated C to `TMPDIR/edgeflow-bpf-<pid>-<name>/<name>.c`,
//! have clang write `<name>.o` beside it, and read that back: a directory any user could make
//! first, knowing the switch's pid. Here that user makes it, in a TMPDIR standing for `/tmp`,
//! and the compile runs as the switch runs it. Needs clang, and root to load.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use datapath::fastpath::p4::P4Kernel;
use datapath::sys::PrivateDir;

/// Both tests set the process's environment (TMPDIR, EDGEFLOW_CLANG), which the compile reads:
/// they take turns.
static ENVIRONMENT: Mutex<()> = Mutex::new(());

/// Environment variables set until dropped, then put back as they were (a failed assertion
/// included).
struct Setting(Vec<(&'static str, Option<std::ffi::OsString>)>);

impl Setting {
    fn new(vars: &[(&'static str, &Path)]) -> Setting {
        let old = vars.iter().map(|(k, _)| (*k, std::env::var_os(k))).collect();
        for (k, v) in vars {
            std::env::set_var(k, v);
        }
        Setting(old)
    }
}

impl Drop for Setting {
    fn drop(&mut self) {
        for (k, v) in &self.0 {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
    }
}

/// Where the compile of `name` used to write: a name every user could foresee.
fn foreseeable(tmpdir: &Path, name: &str) -> PathBuf {
    tmpdir.join(format!("edgeflow-bpf-{}-{name}", std::process::id()))
}

fn example(name: &str) -> p4::backends::software::Switch {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/p4").join(name);
    let (program, checked) =
        p4::front_end(name, &std::fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{e}"));
    p4::backends::software::Switch::new(program, checked).unwrap()
}

fn generated(program: &p4::backends::software::Switch) -> p4::backends::ebpf::Generated {
    p4::backends::ebpf::generate_ir(program.ir()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_symlink_planted_where_the_compile_wrote_is_not_written_through() {
    let _turn = ENVIRONMENT.lock().unwrap_or_else(|p| p.into_inner());
    let shared_tmp = PrivateDir::new("ef-shared-tmp").unwrap();
    let elsewhere = PrivateDir::new("ef-victim").unwrap();
    let victim = elsewhere.path().join("shadow");
    std::fs::write(&victim, "root:secret\n").unwrap();
    // The other user's directory, at the name the compile of "planted" would use, with the
    // source and the object pointing at a file root can write and they cannot.
    let planted = foreseeable(shared_tmp.path(), "planted");
    std::fs::create_dir(&planted).unwrap();
    for file in ["planted.c", "planted.o"] {
        std::os::unix::fs::symlink(&victim, planted.join(file)).unwrap();
    }
    let gen = generated(&example("l2_switch.p4"));

    let compiled = {
        let _tmp = Setting::new(&[("TMPDIR", shared_tmp.path())]);
        ebpf::clang::compile("planted", &gen.c)
    };

    let elf = compiled.unwrap_or_else(|e| panic!("{e}"));
    datapath::fastpath::p4::check_fingerprint(&gen, &elf).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root:secret\n", "the compile wrote through the symlink");
    let mut left: Vec<_> = std::fs::read_dir(shared_tmp.path()).unwrap().map(|e| e.unwrap().path()).collect();
    left.extend(std::fs::read_dir(&planted).into_iter().flatten().map(|e| e.unwrap().path()));
    left.sort();
    assert_eq!(
        left,
        [planted.clone(), planted.join("planted.c"), planted.join("planted.o")],
        "the compile added to, or took from, the temporary directory"
    );
    for file in ["planted.c", "planted.o"] {
        assert_eq!(std::fs::read_link(planted.join(file)).unwrap(), victim);
    }
}

#[test]
fn an_object_swapped_once_clang_wrote_it_is_not_what_the_switch_loads() {
    if !ebpf::test_may_load_programs("an_object_swapped_once_clang_wrote_it_is_not_what_the_switch_loads") {
        return;
    }
    let _turn = ENVIRONMENT.lock().unwrap_or_else(|p| p.into_inner());
    let shared_tmp = PrivateDir::new("ef-shared-tmp").unwrap();
    let theirs = PrivateDir::new("ef-other-user").unwrap();
    // Their object: a program the verifier takes, with other maps (the router's).
    let router = generated(&example("ipv4_router.p4"));
    let their_object = theirs.path().join("router.o");
    std::fs::write(&their_object, ebpf::clang::compile("the router's C", &router.c).unwrap()).unwrap();
    // clang as the switch finds it, then the other user winning the race: once clang has
    // compiled, the object at the foreseeable path is theirs, before the switch reads it.
    let clang = ebpf::clang::find().expect("clang");
    let swapped = foreseeable(shared_tmp.path(), "p4").join("p4.o");
    let clang_then_swap = theirs.path().join("clang-then-swap");
    let swaps = theirs.path().join("swaps");
    std::fs::write(
        &clang_then_swap,
        format!(
            "#!/bin/sh\n'{clang}' \"$@\" || exit\ncase \" $* \" in *' -c '*) mkdir -p '{}' && cp '{}' '{}' && echo swapped >>'{}';; esac\n",
            swapped.parent().unwrap().display(),
            their_object.display(),
            swapped.display(),
            swaps.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&clang_then_swap, std::fs::Permissions::from_mode(0o700)).unwrap();
    let program = example("l2_switch.p4");
    let ours = generated(&program);

    let loaded = {
        let _env = Setting::new(&[("TMPDIR", shared_tmp.path()), ("EDGEFLOW_CLANG", &clang_then_swap)]);
        P4Kernel::build(&program)
    };

    assert_eq!(std::fs::read_to_string(&swaps).ok().as_deref(), Some("swapped\n"), "the swap was made once");
    let kernel = loaded.unwrap_or_else(|e| panic!("{e}"));
    let (our_table, their_table) = (&ours.tables[0].map, &router.tables[0].map);
    assert!(kernel.object().map(our_table).is_ok(), "the object loaded has no {our_table}: not the one compiled");
    assert!(kernel.object().map(their_table).is_err(), "the object loaded has {their_table}: the one swapped in");
}
