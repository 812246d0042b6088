//! A token bucket in exact integers, the policer AFDX's accounts and 802.1Qci's flow meters have
//! in common. Credit grows by `per_ns` units a nanosecond up to `cap`; a frame costs what its
//! owner says, in the same units. The units make the arithmetic exact: an AFDX account counts
//! bytes × BAG-ns (Smax a nanosecond; a frame costs its bytes × BAG), a meter bits ÷ 10⁹ (its
//! rate in bit/s a nanosecond; a frame costs 8 × 10⁹ × its bytes).

use crate::Nanos;

#[derive(Clone, Debug)]
pub struct TokenBucket {
    per_ns: u64,
    cap: u64,
    credit: u64,
    last: Option<Nanos>,
}

impl TokenBucket {
    /// Full until its first use.
    pub fn new(per_ns: u64, cap: u64) -> TokenBucket {
        TokenBucket { per_ns, cap, credit: cap, last: None }
    }

    pub fn cap(&self) -> u64 {
        self.cap
    }

    /// The credit at `now`.
    pub fn credit_at(&self, now: Nanos) -> u64 {
        match self.last {
            None => self.cap,
            Some(last) => {
                let grown = now.saturating_sub(last).saturating_mul(self.per_ns);
                self.credit.saturating_add(grown).min(self.cap)
            }
        }
    }

    /// Brings the credit to `now`; returns what grew past the cap (a coupled meter's overflow).
    /// Time never runs back: a `now` before the last one changes nothing.
    pub fn refill(&mut self, now: Nanos) -> u64 {
        let Some(last) = self.last else {
            self.last = Some(now);
            return 0;
        };
        let grown = now.saturating_sub(last).saturating_mul(self.per_ns);
        let total = self.credit.saturating_add(grown);
        self.credit = total.min(self.cap);
        self.last = Some(last.max(now));
        total - self.credit
    }

    /// Sets the credit as of `now` (another holder of the bucket had it).
    pub fn set(&mut self, credit: u64, now: Nanos) {
        self.credit = credit.min(self.cap);
        self.last = Some(now);
    }

    /// Adds to the credit, up to the cap.
    pub fn add(&mut self, units: u64) {
        self.credit = self.credit.saturating_add(units).min(self.cap);
    }

    /// Takes `cost` if the credit (as of the last refill) covers it.
    pub fn take(&mut self, cost: u64) -> bool {
        if self.credit >= cost {
            self.credit -= cost;
            true
        } else {
            false
        }
    }
}
