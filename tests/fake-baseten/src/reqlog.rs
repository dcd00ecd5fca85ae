//! The request log: one JSON object per request the fake answered (or
//! dropped), in arrival order. Kept in memory for tests and optionally
//! appended to a JSON-lines file. Header values are never recorded, so the
//! API key cannot leak through it.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What the fake understood of a GraphQL request.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct GraphqlInfo {
    /// `query` or `mutation`; absent when the document did not parse.
    pub operation_kind: Option<String>,
    pub operation_name: Option<String>,
    /// Root field names, in document order.
    pub root_fields: Vec<String>,
    /// Resolved arguments (variables substituted) per root field response key.
    pub arguments: Map<String, Value>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct LogEntry {
    pub seq: u64,
    /// Wall-clock time the request arrived (ISO 8601 UTC).
    pub time: String,
    /// Scenario time the request arrived.
    pub scenario_secs: f64,
    pub method: String,
    pub host: Option<String>,
    pub path: String,
    pub query: Option<String>,
    /// `graphql.<root field>`, `rest.get_deployment`, `s3.upload_part`,
    /// `inference.predict`, ...
    pub endpoint: String,
    /// HTTP status answered; `None` when the connection was dropped.
    pub status: Option<u16>,
    /// The fault injected, if any (`status 429`, `drop`, `delay 200ms`).
    pub fault: Option<String>,
    pub graphql: Option<GraphqlInfo>,
    /// A GraphQL mutation.
    pub mutation: bool,
    /// The `User-Agent` header as sent.
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The `Content-Length` header as sent (absent for a chunked or empty
    /// body without one).
    #[serde(default)]
    pub content_length: Option<String>,
    /// A REST request's JSON body, as sent (REST bodies hold ids and
    /// flags, never the key); `None` for no body or any other request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Where this exchange departs from the published REST API
    /// ([`crate::schema`]); empty when it matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
}

#[derive(Debug, Default)]
pub struct RequestLog {
    entries: Mutex<Vec<LogEntry>>,
    file: Option<Mutex<File>>,
}

impl RequestLog {
    pub fn new(file: Option<&Path>) -> std::io::Result<Self> {
        let file = match file {
            Some(p) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            )),
            None => None,
        };
        Ok(Self {
            entries: Mutex::new(Vec::new()),
            file,
        })
    }

    pub fn next_seq(&self) -> u64 {
        self.lock().len() as u64
    }

    pub fn push(&self, mut entry: LogEntry) {
        let line = {
            let mut entries = self.lock();
            entry.seq = entries.len() as u64;
            let line = serde_json::to_string(&entry).unwrap_or_default();
            entries.push(entry);
            line
        };
        if let Some(f) = &self.file {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            // A log write failure must not fail the request being served.
            let _ = writeln!(f, "{line}");
            let _ = f.flush();
        }
    }

    pub fn entries(&self) -> Vec<LogEntry> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<LogEntry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}
