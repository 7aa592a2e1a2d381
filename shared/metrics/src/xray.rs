//! X-Ray: the trace header, and one annotated subsegment per request sent to the X-Ray daemon
//! (`AWS_XRAY_DAEMON_ADDRESS`, which Lambda sets under active tracing) over UDP, so a trace can
//! be found by vehicle or request id. No SDK: the daemon protocol is a JSON header line and the
//! segment document in one datagram.

use serde_json::{json, Map, Value};
use std::net::{SocketAddr, UdpSocket};
use std::time::SystemTime;

/// The daemon address variable: `host:port`, or `udp:host:port tcp:host:port`.
pub const AWS_XRAY_DAEMON_ADDRESS: &str = "AWS_XRAY_DAEMON_ADDRESS";
/// The first line of every datagram.
const DAEMON_HEADER: &str = "{\"format\":\"json\",\"version\":1}";
/// The daemon's datagram limit.
const MAX_DATAGRAM: usize = 64 * 1024;

/// A parsed `X-Amzn-Trace-Id` (`Root=1-…;Parent=…;Sampled=1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeader {
    /// The trace id, `1-<8 hex>-<24 hex>`.
    pub root: String,
    /// The segment this request runs under (16 hex), if given.
    pub parent: Option<String>,
    /// The sampling decision, if given.
    pub sampled: Option<bool>,
}

impl TraceHeader {
    /// Parses a header value; `None` without a well-formed `Root`. Unknown keys are ignored.
    pub fn parse(value: &str) -> Option<TraceHeader> {
        let mut root = None;
        let mut parent = None;
        let mut sampled = None;
        for part in value.split(';') {
            let Some((k, v)) = part.trim().split_once('=') else {
                continue;
            };
            match k {
                "Root" if valid_root(v) => root = Some(v.to_string()),
                "Parent" if is_hex(v, 16) => parent = Some(v.to_string()),
                "Sampled" => {
                    sampled = match v {
                        "1" => Some(true),
                        "0" => Some(false),
                        _ => None,
                    }
                }
                _ => {}
            }
        }
        Some(TraceHeader {
            root: root?,
            parent,
            sampled,
        })
    }
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn valid_root(v: &str) -> bool {
    let mut parts = v.split('-');
    parts.next() == Some("1")
        && parts.next().is_some_and(|t| is_hex(t, 8))
        && parts.next().is_some_and(|r| is_hex(r, 24))
        && parts.next().is_none()
}

/// One request as an X-Ray subsegment of the function's segment.
#[derive(Debug, Clone)]
pub struct Subsegment {
    /// Its name in the trace map.
    pub name: String,
    /// When the request started.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// HTTP status of the answer (4xx marks an error, 5xx a fault).
    pub status: u16,
    /// Searchable annotations (`vehicle`, `request_id`, `dialect`, …); empty values are left out.
    pub annotations: Vec<(&'static str, String)>,
}

impl Subsegment {
    /// The segment document under `trace`; `None` when the trace has no parent or was not
    /// sampled (the daemon would drop it).
    pub fn document(&self, trace: &TraceHeader) -> Option<String> {
        let parent = trace.parent.as_ref()?;
        if trace.sampled != Some(true) {
            return None;
        }
        let secs = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        let annotations: Map<String, Value> = self
            .annotations
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| ((*k).to_string(), json!(v)))
            .collect();
        let id = uuid::Uuid::new_v4().simple().to_string();
        let doc = json!({
            "type": "subsegment",
            "name": self.name,
            "id": &id[..16],
            "trace_id": trace.root,
            "parent_id": parent,
            "start_time": secs(self.start),
            "end_time": secs(self.end),
            "http": {"response": {"status": self.status}},
            "error": (400..500).contains(&self.status),
            "fault": self.status >= 500,
            "annotations": annotations,
        });
        Some(doc.to_string())
    }
}

/// A client of the X-Ray daemon.
#[derive(Debug)]
pub struct Daemon {
    socket: UdpSocket,
    addr: SocketAddr,
}

impl Daemon {
    /// The daemon at `AWS_XRAY_DAEMON_ADDRESS`; `None` when unset (tracing off) or unusable
    /// (logged once, at start).
    pub fn from_env() -> Option<Daemon> {
        let value = std::env::var(AWS_XRAY_DAEMON_ADDRESS).ok()?;
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        match parse_address(value).and_then(|addr| Daemon::to(addr).map_err(|e| e.to_string())) {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::warn!(error = %e, "X-Ray daemon unusable; no request subsegments");
                None
            }
        }
    }

    /// A client sending to `addr`.
    ///
    /// # Errors
    /// No local UDP socket could be bound.
    pub fn to(addr: SocketAddr) -> std::io::Result<Daemon> {
        let local: SocketAddr = if addr.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(local)?;
        // A datagram send never waits on the daemon; a full buffer loses the subsegment.
        socket.set_nonblocking(true)?;
        Ok(Daemon { socket, addr })
    }

    /// Sends `segment` under `trace` when the trace is sampled and has a parent. Failures are
    /// logged at debug level: tracing must never fail a request.
    pub fn send(&self, trace: &TraceHeader, segment: &Subsegment) {
        let Some(doc) = segment.document(trace) else {
            return;
        };
        let datagram = format!("{DAEMON_HEADER}\n{doc}");
        if datagram.len() > MAX_DATAGRAM {
            tracing::debug!(
                bytes = datagram.len(),
                "X-Ray subsegment too large; not sent"
            );
            return;
        }
        if let Err(e) = self.socket.send_to(datagram.as_bytes(), self.addr) {
            tracing::debug!(error = %e, "X-Ray subsegment not sent");
        }
    }
}

/// The UDP address of `AWS_XRAY_DAEMON_ADDRESS` (`127.0.0.1:2000` or
/// `udp:127.0.0.1:2000 tcp:127.0.0.1:2000`); an IP address, as Lambda sets it.
fn parse_address(value: &str) -> Result<SocketAddr, String> {
    let udp = value
        .split_whitespace()
        .find_map(|part| part.strip_prefix("udp:"))
        .unwrap_or(value);
    udp.parse().map_err(|_| {
        format!("{AWS_XRAY_DAEMON_ADDRESS} must be ip:port or udp:ip:port tcp:ip:port")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const SAMPLED: &str =
        "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1";

    #[test]
    fn trace_headers() {
        let t = TraceHeader::parse(SAMPLED).unwrap();
        assert_eq!(t.root, "1-5759e988-bd862e3fe1be46a994272793");
        assert_eq!(t.parent.as_deref(), Some("53995c3f42cd8ad8"));
        assert_eq!(t.sampled, Some(true));
        let t = TraceHeader::parse("Root=1-5759e988-bd862e3fe1be46a994272793;Lineage=a:1").unwrap();
        assert_eq!((t.parent, t.sampled), (None, None));
        for bad in [
            "",
            "Parent=53995c3f42cd8ad8",
            "Root=2-5759e988-bd862e3fe1be46a994272793",
            "Root=1-xyz-abc",
        ] {
            assert_eq!(TraceHeader::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn addresses() {
        assert_eq!(
            parse_address("169.254.79.129:2000"),
            Ok("169.254.79.129:2000".parse().unwrap())
        );
        assert_eq!(
            parse_address("tcp:127.0.0.1:2001 udp:127.0.0.1:2000"),
            Ok("127.0.0.1:2000".parse().unwrap())
        );
        assert!(parse_address("xray.local:2000").is_err());
    }

    #[test]
    fn subsegment_reaches_the_daemon() {
        let daemon = UdpSocket::bind("127.0.0.1:0").unwrap();
        daemon
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let client = Daemon::to(daemon.local_addr().unwrap()).unwrap();
        let start = SystemTime::UNIX_EPOCH + Duration::from_millis(1_750_000_000_250);
        let segment = Subsegment {
            name: "dq-graphql".into(),
            start,
            end: start + Duration::from_millis(30),
            status: 200,
            annotations: vec![
                ("vehicle", "did:erc721:137:0xabc:1".into()),
                ("request_id", "req-1".into()),
                ("dialect", "dq".into()),
                ("empty", String::new()),
            ],
        };
        // Unsampled: nothing is sent.
        let unsampled = TraceHeader::parse(&SAMPLED.replace("Sampled=1", "Sampled=0")).unwrap();
        client.send(&unsampled, &segment);
        client.send(&TraceHeader::parse(SAMPLED).unwrap(), &segment);
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let n = daemon.recv(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..n]).unwrap();
        let (header, body) = text.split_once('\n').unwrap();
        assert_eq!(header, DAEMON_HEADER);
        let doc: Value = serde_json::from_str(body).unwrap();
        assert_eq!(doc["type"], "subsegment");
        assert_eq!(doc["trace_id"], "1-5759e988-bd862e3fe1be46a994272793");
        assert_eq!(doc["parent_id"], "53995c3f42cd8ad8");
        assert_eq!(doc["id"].as_str().unwrap().len(), 16);
        let secs = |k: &str| doc[k].as_f64().unwrap();
        assert!((secs("start_time") - 1_750_000_000.25).abs() < 1e-3);
        assert!((secs("end_time") - 1_750_000_000.28).abs() < 1e-3);
        assert_eq!(
            doc["annotations"],
            json!({"vehicle": "did:erc721:137:0xabc:1", "request_id": "req-1", "dialect": "dq"})
        );
        assert_eq!(
            (&doc["error"], &doc["fault"]),
            (&json!(false), &json!(false))
        );
        // The unsampled one was never sent: the next datagram does not exist.
        daemon
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        assert!(daemon.recv(&mut buf).is_err());
    }
}
