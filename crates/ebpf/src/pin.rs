//! Maps and links that outlive the process: pinned in the BPF filesystem (`/sys/fs/bpf`), found
//! there again by the next one, and a pinned link given a new program in one step. What a switch
//! needs to keep the kernel forwarding while its daemon restarts (issue 35, item 6).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{bpf, bpf_fd, rd_u32, Attr, Link, Map, Program};

const OBJ_PIN: i32 = 6;
const OBJ_GET: i32 = 7;
const LINK_UPDATE: i32 = 29;
const OBJ_GET_INFO_BY_FD: i32 = 15;

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other(format!("{}: a NUL in the path", path.display())))
}

fn named(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Pins the BPF object `fd` at `path` (in a BPF filesystem; its directory must exist).
fn pin_fd(fd: i32, path: &Path) -> io::Result<()> {
    let p = c_path(path)?;
    let mut a = Attr::new().u64(0, p.as_ptr() as u64).u32(8, fd as u32);
    bpf(OBJ_PIN, &mut a).map(|_| ()).map_err(named(path))
}

/// The object pinned at `path`.
fn get_fd(path: &Path) -> io::Result<OwnedFd> {
    let p = c_path(path)?;
    let mut a = Attr::new().u64(0, p.as_ptr() as u64);
    bpf_fd(OBJ_GET, &mut a).map_err(named(path))
}

impl Map {
    pub fn pin(&self, path: &Path) -> io::Result<()> {
        pin_fd(self.fd(), path)
    }

    /// The map pinned at `path`, with its type and sizes as the kernel has them: (map, type).
    pub fn from_pinned(path: &Path) -> io::Result<(Map, u32)> {
        let fd = get_fd(path)?;
        // struct bpf_map_info { u32 type, id, key_size, value_size, max_entries, map_flags; … }
        let mut info = [0u8; 80];
        let mut a =
            Attr::new().u32(0, fd.as_raw_fd() as u32).u32(4, info.len() as u32).u64(8, info.as_mut_ptr() as u64);
        bpf(OBJ_GET_INFO_BY_FD, &mut a).map_err(named(path))?;
        let map = Map { fd, key_size: rd_u32(&info, 8), value_size: rd_u32(&info, 12), max_entries: rd_u32(&info, 16) };
        Ok((map, rd_u32(&info, 0)))
    }
}

impl Link {
    pub fn pin(&self, path: &Path) -> io::Result<()> {
        pin_fd(self.0.as_raw_fd(), path)
    }

    /// The link pinned at `path`: attached still, whatever process made it, as long as the pin
    /// (or any descriptor) holds it.
    pub fn from_pinned(path: &Path) -> io::Result<Link> {
        get_fd(path).map(Link)
    }

    /// Runs `program` in place of the link's, atomically: no frame meets neither.
    pub fn update(&self, program: &Program) -> io::Result<()> {
        let mut a = Attr::new().u32(0, self.0.as_raw_fd() as u32).u32(4, program.fd() as u32);
        bpf(LINK_UPDATE, &mut a).map(|_| ())
    }

    /// The id of the program the link runs now.
    pub fn program_id(&self) -> io::Result<u32> {
        Ok(rd_u32(&self.info()?, 8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own under /sys/fs/bpf, removed with what is pinned in it.
    struct PinDir(std::path::PathBuf);

    impl Drop for PinDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
            if let Some(parent) = self.0.parent() {
                let _ = std::fs::remove_dir(parent); // only if no other test's is left in it
            }
        }
    }

    /// A fresh directory under /sys/fs/bpf/edgeflow-test, if this test may load programs and
    /// the BPF filesystem is mounted.
    fn pin_dir(test: &str) -> Option<PinDir> {
        if !crate::test_may_load_programs(test) {
            return None;
        }
        let root = Path::new("/sys/fs/bpf/edgeflow-test");
        if std::fs::create_dir_all(root).is_err() {
            eprintln!("skipped: no BPF filesystem at /sys/fs/bpf");
            return None;
        }
        let dir = PinDir(root.join(format!("{test}-{}", std::process::id())));
        std::fs::create_dir_all(&dir.0).ok()?;
        Some(dir)
    }

    #[test]
    fn a_pinned_map_is_the_same_map_to_whoever_opens_it_next() {
        let Some(dir) = pin_dir("a_pinned_map_is_the_same_map_to_whoever_opens_it_next") else { return };
        const ARRAY: u32 = 2;
        let map = Map::create("pin_test", ARRAY, 4, 8, 4, 0).unwrap();
        map.update(&1u32.to_ne_bytes(), &42u64.to_ne_bytes()).unwrap();
        let path = dir.0.join("m");
        map.pin(&path).unwrap();
        drop(map);
        let (again, kind) = Map::from_pinned(&path).unwrap();
        assert_eq!((kind, again.key_size, again.value_size, again.max_entries), (ARRAY, 4, 8, 4));
        assert_eq!(again.lookup(&1u32.to_ne_bytes()).unwrap(), Some(42u64.to_ne_bytes().to_vec()));
        assert!(Map::from_pinned(&dir.0.join("none")).unwrap_err().to_string().contains("/none"));
    }

    #[test]
    fn an_object_loaded_pinned_again_finds_its_maps_as_they_were() {
        let Some(dir) = pin_dir("an_object_loaded_pinned_again") else { return };
        let fastpath = crate::objects::FASTPATH;
        let first = crate::Object::load_pinned(fastpath, &[], &[], &dir.0).unwrap();
        assert!(first.reused.is_empty());
        first.map("ef_config").unwrap().update(&0u32.to_ne_bytes(), &7u64.to_ne_bytes()).unwrap();
        drop(first);
        // A second process, as it were: every map is found, holding what the first wrote; one
        // asked for at another size is made anew.
        let second = crate::Object::load_pinned(fastpath, &[("ef_megaflows", 64)], &[], &dir.0).unwrap();
        assert!(
            second.reused.contains(&"ef_config".to_string()) && !second.reused.contains(&"ef_megaflows".to_string())
        );
        assert_eq!(second.reused.len(), second.maps.len() - 1, "{:?}", second.reused);
        let value = second.map("ef_config").unwrap().lookup(&0u32.to_ne_bytes()).unwrap();
        assert_eq!(value, Some(7u64.to_ne_bytes().to_vec()));
        assert_eq!(second.map("ef_megaflows").unwrap().max_entries, 64);
    }
}
