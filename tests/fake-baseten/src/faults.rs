//! Fault injection: scripted 429s, 5xx, latency and dropped connections,
//! matched by endpoint name and counted per fault.

use std::sync::Mutex;

use crate::scenario::Fault;

#[derive(Debug, Default)]
pub struct Faults {
    /// Each fault with how many matching requests it has seen.
    book: Mutex<Vec<(Fault, u32)>>,
}

impl Faults {
    pub fn new(faults: &[Fault]) -> Self {
        Self {
            book: Mutex::new(faults.iter().map(|f| (f.clone(), 0)).collect()),
        }
    }

    pub fn add(&self, fault: Fault) {
        self.lock().push((fault, 0));
    }

    /// Counts this request against every fault for `endpoint` and returns
    /// the first one that fires.
    pub fn check(&self, endpoint: &str) -> Option<Fault> {
        let mut fired = None;
        for (fault, seen) in self.lock().iter_mut() {
            if !fault.matches_endpoint(endpoint) {
                continue;
            }
            let n = *seen;
            *seen = seen.saturating_add(1);
            if fired.is_none() && fault.fires_on(n) {
                fired = Some(fault.clone());
            }
        }
        fired
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Fault, u32)>> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How a fault is written in the request log.
pub fn describe(f: &Fault) -> String {
    let mut parts = Vec::new();
    if f.delay_ms > 0 {
        parts.push(format!("delay {}ms", f.delay_ms));
    }
    if f.drop {
        parts.push("drop".to_string());
    } else if let Some(s) = f.status {
        parts.push(format!("status {s}"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_count_their_own_matches() {
        let faults = Faults::new(&[
            Fault::status("rest.get_deployment", 429).times(2),
            Fault::drop_connection("inference.predict").after(1),
        ]);
        let seen: Vec<Option<u16>> = (0..3)
            .map(|_| faults.check("rest.get_deployment").and_then(|f| f.status))
            .collect();
        assert_eq!(seen, [Some(429), Some(429), None]);
        assert!(faults.check("inference.predict").is_none());
        assert!(faults.check("inference.predict").is_some_and(|f| f.drop));
        assert!(faults.check("inference.predict").is_none());
        assert!(faults.check("graphql.teams").is_none());
    }

    #[test]
    fn descriptions() {
        assert_eq!(describe(&Fault::status("x", 503)), "status 503");
        let mut f = Fault::drop_connection("x");
        f.delay_ms = 20;
        assert_eq!(describe(&f), "delay 20ms, drop");
    }
}
