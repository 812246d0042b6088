//! A 64-bit counter shared between threads, on every target the switch is built for. 32-bit MIPS
//! (OpenWrt's routers) has no 64-bit atomic instructions, so `std` offers no `AtomicU64` there;
//! these counters count sessions, refusals and drops on the control path, rare enough that a
//! lock costs nothing, and a 32-bit atomic would wrap where the others do not.

#[cfg(target_has_atomic = "64")]
pub use std::sync::atomic::AtomicU64;

#[cfg(not(target_has_atomic = "64"))]
pub use locked::AtomicU64;

#[cfg(not(target_has_atomic = "64"))]
mod locked {
    use std::sync::atomic::Ordering;
    use std::sync::Mutex;

    /// `std::sync::atomic::AtomicU64`'s operations the switch uses, behind a lock. The lock
    /// orders everything, which is at least what any `Ordering` asks for.
    #[derive(Debug, Default)]
    pub struct AtomicU64(Mutex<u64>);

    impl AtomicU64 {
        pub const fn new(v: u64) -> Self {
            AtomicU64(Mutex::new(v))
        }

        fn value(&self) -> std::sync::MutexGuard<'_, u64> {
            self.0.lock().unwrap_or_else(|p| p.into_inner())
        }

        pub fn load(&self, _: Ordering) -> u64 {
            *self.value()
        }

        pub fn store(&self, v: u64, _: Ordering) {
            *self.value() = v;
        }

        pub fn fetch_add(&self, v: u64, _: Ordering) -> u64 {
            let mut n = self.value();
            let old = *n;
            *n = old.wrapping_add(v);
            old
        }
    }
}
