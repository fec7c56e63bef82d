//! Counters for `/metrics`, in the Prometheus text format: sessions, children, requests by
//! method and status, and a latency histogram.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0];

/// The gauges read off the gateway's state when `/metrics` is asked for.
#[derive(Clone, Copy)]
pub struct Gauges {
    pub sessions: usize,
    pub spares: usize,
    pub pending_requests: usize,
}

#[derive(Default)]
pub struct Metrics {
    /// By method, then status (a method already seen is counted without an allocation).
    requests: Mutex<BTreeMap<String, BTreeMap<u16, u64>>>,
    /// Authentication decisions by outcome (a fixed, small label set).
    auth: Mutex<BTreeMap<&'static str, u64>>,
    /// Requests sent on to the replica that owns them, by outcome (a fixed label set).
    forwarded: Mutex<BTreeMap<&'static str, u64>>,
    /// Requests served for another replica (they carried a valid introduction).
    pub from_peers: AtomicU64,
    /// Requests refused because their replica-to-replica header did not verify.
    pub peer_refused: AtomicU64,
    /// Of those, the ones whose header was genuine but seen before (a replay).
    pub peer_replayed: AtomicU64,
    buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_us: AtomicU64,
    pub sessions_created: AtomicU64,
    pub children_exited: AtomicU64,
}

impl Metrics {
    /// Counts one MCP request: its JSON-RPC method (or the HTTP verb for GET and DELETE),
    /// the status it got, and how long that took.
    pub fn observe(&self, method: &str, status: u16, took: Duration) {
        // Methods are the client's words: keep the label set bounded.
        let method = if method.len() <= 64
            && method
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/_-.".contains(&b))
        {
            method
        } else {
            "other"
        };
        let mut requests = self.requests.lock().expect("metrics lock");
        match requests.get_mut(method) {
            Some(by_status) => *by_status.entry(status).or_default() += 1,
            None => {
                requests.insert(method.to_owned(), BTreeMap::from([(status, 1)]));
            }
        }
        drop(requests);
        let seconds = took.as_secs_f64();
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                self.buckets[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Counts one authentication decision.
    pub fn authenticated(&self, outcome: &'static str) {
        *self
            .auth
            .lock()
            .expect("metrics lock")
            .entry(outcome)
            .or_default() += 1;
    }

    /// Counts one forward to another replica: `answered`, or why it got no answer.
    pub fn forwarded(&self, outcome: &'static str) {
        *self
            .forwarded
            .lock()
            .expect("metrics lock")
            .entry(outcome)
            .or_default() += 1;
    }

    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        self.render_gauges(&mut out, gauges);
        self.render_counters(&mut out);
        self.render_by_label(&mut out);
        self.render_latency(&mut out);
        out
    }

    /// What is now: sessions, children, spares, requests waiting, live tasks.
    fn render_gauges(&self, out: &mut String, gauges: &Gauges) {
        let Gauges {
            sessions,
            spares,
            pending_requests,
        } = *gauges;
        let children = sessions + spares;
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_sessions Open sessions.\n# TYPE mcp_stdio_sessions gauge\nmcp_stdio_sessions {sessions}"
        );
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_children Running child processes.\n# TYPE mcp_stdio_children gauge\nmcp_stdio_children {children}"
        );
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_spare_children Children started and waiting for a session (--spare-children).\n# TYPE mcp_stdio_spare_children gauge\nmcp_stdio_spare_children {spares}"
        );
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_pending_requests Requests sent to children and not yet answered.\n# TYPE mcp_stdio_pending_requests gauge\nmcp_stdio_pending_requests {pending_requests}"
        );
        // Tokio's count of live tasks: a leak check (a request, stream or session that never
        // ends leaves its task behind), read by the fault suite's churn test.
        let tasks = tokio::runtime::Handle::try_current()
            .map(|runtime| runtime.metrics().num_alive_tasks())
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_tasks Live asynchronous tasks in the process.\n# TYPE mcp_stdio_tasks gauge\nmcp_stdio_tasks {tasks}"
        );
    }

    /// What has happened: sessions made, children gone, requests from and refused to other replicas.
    fn render_counters(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_sessions_created_total Sessions created.\n# TYPE mcp_stdio_sessions_created_total counter\nmcp_stdio_sessions_created_total {}",
            self.sessions_created.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_children_exited_total Child processes that exited on their own.\n# TYPE mcp_stdio_children_exited_total counter\nmcp_stdio_children_exited_total {}",
            self.children_exited.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_peer_requests_total Requests served for another replica.\n# TYPE mcp_stdio_peer_requests_total counter\nmcp_stdio_peer_requests_total {}",
            self.from_peers.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_peer_refused_total Requests whose replica-to-replica header did not verify.\n# TYPE mcp_stdio_peer_refused_total counter\nmcp_stdio_peer_refused_total {}",
            self.peer_refused.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_peer_replayed_total Requests refused because their replica-to-replica header was seen before (counted in peer_refused too).\n# TYPE mcp_stdio_peer_replayed_total counter\nmcp_stdio_peer_replayed_total {}",
            self.peer_replayed.load(Ordering::Relaxed)
        );
    }

    /// Requests by method and status, authentication by outcome, forwards by outcome.
    fn render_by_label(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_requests_total MCP requests by method and HTTP status.\n# TYPE mcp_stdio_requests_total counter"
        );
        let requests = self.requests.lock().expect("metrics lock");
        let by_method_and_status = requests.iter().flat_map(|(method, by_status)| {
            by_status
                .iter()
                .map(move |(status, n)| ((method, status), n))
        });
        for ((method, status), n) in by_method_and_status {
            let _ = writeln!(
                out,
                "mcp_stdio_requests_total{{method=\"{method}\",status=\"{status}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_auth_total Authentication decisions by outcome.\n# TYPE mcp_stdio_auth_total counter"
        );
        for (outcome, n) in self.auth.lock().expect("metrics lock").iter() {
            let _ = writeln!(out, "mcp_stdio_auth_total{{outcome=\"{outcome}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_forwarded_total Requests sent on to the replica that owns their session or parked call, by outcome (answered, owner_gone, timeout, busy, failed).\n# TYPE mcp_stdio_forwarded_total counter"
        );
        for (outcome, n) in self.forwarded.lock().expect("metrics lock").iter() {
            let _ = writeln!(
                out,
                "mcp_stdio_forwarded_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
    }

    /// The time to answer, as a histogram.
    fn render_latency(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP mcp_stdio_request_duration_seconds Time to answer (or to start streaming).\n# TYPE mcp_stdio_request_duration_seconds histogram"
        );
        for (i, bound) in BUCKETS.iter().enumerate() {
            let _ = writeln!(
                out,
                "mcp_stdio_request_duration_seconds_bucket{{le=\"{bound}\"}} {}",
                self.buckets[i].load(Ordering::Relaxed)
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "mcp_stdio_request_duration_seconds_bucket{{le=\"+Inf\"}} {count}\nmcp_stdio_request_duration_seconds_sum {}\nmcp_stdio_request_duration_seconds_count {count}",
            self.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
    }
}

/// Several renderings merged into one exposition, each sample labelled with the server it
/// came from: families stay together (HELP and TYPE once), as the text format requires.
pub fn labelled(parts: &[(String, String)]) -> String {
    // (family name, HELP/TYPE lines, samples), in the order families first appear.
    let mut families: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    for (server, text) in parts {
        let mut current: Option<usize> = None;
        for line in text.lines() {
            if let Some(rest) = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
            {
                let name = rest.split_whitespace().next().unwrap_or("").to_owned();
                let index = match families.iter().position(|(n, _, _)| *n == name) {
                    Some(index) => index,
                    None => {
                        families.push((name, Vec::new(), Vec::new()));
                        families.len() - 1
                    }
                };
                if !families[index].1.iter().any(|l| l == line) {
                    families[index].1.push(line.to_owned());
                }
                current = Some(index);
                continue;
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let label = format!("server=\"{server}\"");
            let sample = match line.find(['{', ' ']) {
                Some(at) if line.as_bytes()[at] == b'{' => {
                    let close = if line[at + 1..].starts_with('}') {
                        ""
                    } else {
                        ","
                    };
                    format!("{}{{{label}{close}{}", &line[..at], &line[at + 1..])
                }
                Some(at) => format!("{}{{{label}}}{}", &line[..at], &line[at..]),
                None => continue,
            };
            match current {
                Some(index) => families[index].2.push(sample),
                None => families.push((String::new(), Vec::new(), vec![sample])),
            }
        }
    }
    let mut out = String::new();
    for (_, headers, samples) in families {
        for line in headers.iter().chain(&samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_renderings_keep_families_together_and_label_each_sample() {
        let a = "# HELP x_total X.\n# TYPE x_total counter\nx_total{method=\"ping\"} 1\n# HELP g G.\n# TYPE g gauge\ng 2\n".to_owned();
        let b = "# HELP x_total X.\n# TYPE x_total counter\nx_total{method=\"ping\"} 5\n# HELP g G.\n# TYPE g gauge\ng 7\n".to_owned();
        let merged = labelled(&[("one".into(), a), ("two".into(), b)]);
        assert_eq!(
            merged,
            "# HELP x_total X.\n# TYPE x_total counter\nx_total{server=\"one\",method=\"ping\"} 1\nx_total{server=\"two\",method=\"ping\"} 5\n# HELP g G.\n# TYPE g gauge\ng{server=\"one\"} 2\ng{server=\"two\"} 7\n"
        );
    }

    #[test]
    fn renders_counters_and_a_histogram() {
        let metrics = Metrics::default();
        metrics.observe("tools/call", 200, Duration::from_millis(3));
        metrics.observe("bad\"label", 400, Duration::from_millis(30));
        let text = metrics.render(&Gauges {
            sessions: 2,
            spares: 0,
            pending_requests: 1,
        });
        assert!(text.contains("mcp_stdio_sessions 2"));
        assert!(text.contains("mcp_stdio_pending_requests 1"));
        assert!(text.contains(r#"mcp_stdio_requests_total{method="tools/call",status="200"} 1"#));
        assert!(text.contains(r#"mcp_stdio_requests_total{method="other",status="400"} 1"#));
        assert!(text.contains(r#"mcp_stdio_request_duration_seconds_bucket{le="0.005"} 1"#));
        assert!(text.contains(r#"mcp_stdio_request_duration_seconds_bucket{le="+Inf"} 2"#));
    }
}
