//! Only the budget (src/budget.rs) reads the clock.

use std::time::Instant as I;

pub fn read(d: std::time::Duration) {
    let _ = I::now(); // fires
    let _ = std::time::SystemTime::now(); // fires
    let _ = tokio::time::Instant::now(); // fires
    let _ = I::elapsed(&I::checked_add(&started(), d).unwrap()); // fires
    let _ = started().checked_add(d); // fires
    let _ = tokio::time::timeout_at(tokio::time::Instant::from_std(started()), async {}); // fires
}

fn started() -> I {
    unimplemented!()
}
