//! A fault-injecting HTTP/1.1 proxy for loopback tests: put it in front of the moto server and
//! switch its [`Fault`] to make S3 or DynamoDB answer 5xx, throttle, or answer slowly, while the
//! code under test keeps its real SDK client. One request per connection (the proxy adds
//! `Connection: close`), so every request sees the fault in force when it arrives.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::{Error, Result};

/// What the proxy does with the next requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Forward untouched.
    Pass,
    /// Answer with this status, content type and body instead of forwarding.
    Answer {
        /// HTTP status.
        status: u16,
        /// `Content-Type` of the body.
        content_type: &'static str,
        /// The error document the service would send.
        body: String,
    },
    /// Wait, then forward.
    Delay(Duration),
}

impl Fault {
    /// DynamoDB's 500 `InternalServerError`.
    pub fn dynamo_5xx() -> Fault {
        Fault::Answer {
            status: 500,
            content_type: "application/x-amz-json-1.0",
            body: r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"injected"}"#.into(),
        }
    }

    /// DynamoDB's 400 `ThrottlingException`.
    pub fn dynamo_throttle() -> Fault {
        Fault::Answer {
            status: 400,
            content_type: "application/x-amz-json-1.0",
            body: r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}"#.into(),
        }
    }

    /// S3's 503 `SlowDown`.
    pub fn s3_slow_down() -> Fault {
        Fault::Answer {
            status: 503,
            content_type: "application/xml",
            body: "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>".into(),
        }
    }

    /// S3's 500 `InternalError`.
    pub fn s3_5xx() -> Fault {
        Fault::Answer {
            status: 500,
            content_type: "application/xml",
            body: "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InternalError</Code><Message>injected</Message></Error>".into(),
        }
    }
}

struct Shared {
    fault: Mutex<Fault>,
    requests: AtomicU64,
    injected: AtomicU64,
    stop: AtomicBool,
}

/// A running proxy; stops accepting when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port forwarding to `upstream` (`host:port`).
    pub fn start(upstream: SocketAddr) -> Result<FaultProxy> {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("bind the fault proxy", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("fault proxy address", e))?;
        let shared = Arc::new(Shared {
            fault: Mutex::new(Fault::Pass),
            requests: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    // A broken exchange only fails that request, which is what a client sees
                    // from a flaky network too.
                    let _ = serve(conn, upstream, &s);
                });
            }
        });
        Ok(FaultProxy { addr, shared })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Switches the fault for the requests that arrive from now on.
    pub fn set(&self, fault: Fault) {
        *self.shared.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }

    /// Requests seen so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Requests answered with an injected fault (delays included) so far.
    pub fn injected(&self) -> u64 {
        self.shared.injected.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Reads one request head (through the blank line) and its `Content-Length` body.
fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") {
            continue;
        }
        if line == "\r\n" {
            head.extend_from_slice(b"Connection: close\r\n\r\n");
            break;
        }
        head.extend_from_slice(line.as_bytes());
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    head.extend_from_slice(&body);
    Ok(head)
}

fn serve(conn: TcpStream, upstream: SocketAddr, s: &Shared) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let request = read_request(&mut reader)?;
    s.requests.fetch_add(1, Ordering::SeqCst);
    let fault = s.fault.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut client = conn;
    match fault {
        Fault::Answer {
            status,
            content_type,
            body,
        } => {
            s.injected.fetch_add(1, Ordering::SeqCst);
            write!(
                client,
                "HTTP/1.1 {status} Injected\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )?;
            client.flush()?;
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        Fault::Delay(d) => {
            s.injected.fetch_add(1, Ordering::SeqCst);
            thread::sleep(d);
        }
        Fault::Pass => {}
    }
    let mut up = TcpStream::connect(upstream)?;
    up.write_all(&request)?;
    up.flush()?;
    // The response head gets `Connection: close`; the rest is copied until moto closes.
    let mut up_reader = BufReader::new(up);
    loop {
        let mut line = String::new();
        if up_reader.read_line(&mut line)? == 0 {
            break;
        }
        if line.to_ascii_lowercase().starts_with("connection:") {
            continue;
        }
        if line == "\r\n" {
            client.write_all(b"Connection: close\r\n\r\n")?;
            break;
        }
        client.write_all(line.as_bytes())?;
    }
    std::io::copy(&mut up_reader, &mut client)?;
    client.flush()?;
    let _ = client.shutdown(Shutdown::Both);
    Ok(())
}
