//! A tiny blocking HTTP/1.1 client for talking to local test services (moto).
//!
//! It speaks plain `http://` only, sends one request per connection (`Connection: close`) and
//! reads the whole response. That is all a test needs to poke moto's REST and JSON APIs without
//! pulling an HTTP stack or the AWS SDK into every crate's dev-dependencies.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::{Error, Result};

/// How long connecting, writing and reading may each take before the request fails.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A complete HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code, e.g. 200.
    pub status: u16,
    /// Header fields in the order received; names keep the server's spelling.
    pub headers: Vec<(String, String)>,
    /// Body with any chunked transfer coding removed.
    pub body: Vec<u8>,
}

impl Response {
    /// Returns the first header with this name, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// Returns the body as text, replacing invalid UTF-8.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Tells whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Sends one request to an `http://host:port/path` URL and returns the response.
///
/// `Host`, `Content-Length` and `Connection: close` are added; `headers` must not repeat them.
/// Any status is returned as `Ok`; only I/O failures and malformed responses are errors.
pub fn request(method: &str, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<Response> {
    let fail = |reason: String| Error::Http {
        method: method.to_owned(),
        url: url.to_owned(),
        reason,
    };
    let (authority, path) = split_url(url)
        .ok_or_else(|| fail("only http://host:port/path URLs are supported".into()))?;

    let address = authority
        .to_socket_addrs()
        .map_err(|e| fail(format!("cannot resolve {authority}: {e}")))?
        .next()
        .ok_or_else(|| fail(format!("{authority} resolves to no address")))?;
    let mut stream = TcpStream::connect_timeout(&address, IO_TIMEOUT)
        .map_err(|e| fail(format!("connect: {e}")))?;
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)))
        .map_err(|e| fail(format!("set timeouts: {e}")))?;

    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| fail(format!("send: {e}")))?;

    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| fail(format!("receive: {e}")))?;
    parse_response(&raw).map_err(|reason| fail(reason.to_owned()))
}

/// Splits `http://authority/path?query` into the authority and the request target.
fn split_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://")?;
    match rest.find('/') {
        Some(slash) if slash > 0 => Some((&rest[..slash], &rest[slash..])),
        None if !rest.is_empty() => Some((rest, "/")),
        _ => None,
    }
}

fn parse_response(raw: &[u8]) -> std::result::Result<Response, &'static str> {
    let head_end = find(raw, b"\r\n\r\n").ok_or("response has no end of headers")?;
    let head =
        std::str::from_utf8(&raw[..head_end]).map_err(|_| "response headers are not utf-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("empty response")?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or("malformed status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();

    let rest = &raw[head_end + 4..];
    let chunked = headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked {
        decode_chunked(rest)?
    } else {
        let length = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, value)| value.parse::<usize>().ok());
        match length {
            Some(length) if length <= rest.len() => rest[..length].to_vec(),
            Some(_) => return Err("response body shorter than its content-length"),
            None => rest.to_vec(),
        }
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn decode_chunked(mut data: &[u8]) -> std::result::Result<Vec<u8>, &'static str> {
    let mut body = Vec::new();
    loop {
        let line_end = find(data, b"\r\n").ok_or("truncated chunk size line")?;
        let size_text =
            std::str::from_utf8(&data[..line_end]).map_err(|_| "chunk size is not utf-8")?;
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| "malformed chunk size")?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if data.len() < size + 2 {
            return Err("truncated chunk");
        }
        body.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_urls() {
        assert_eq!(
            split_url("http://127.0.0.1:80/a/b?c=d"),
            Some(("127.0.0.1:80", "/a/b?c=d"))
        );
        assert_eq!(
            split_url("http://127.0.0.1:80"),
            Some(("127.0.0.1:80", "/"))
        );
        assert_eq!(split_url("https://x/"), None);
        assert_eq!(split_url("http:///x"), None);
    }

    #[test]
    fn parses_content_length_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
        let response = parse_response(raw).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.header("content-type"), Some("text/plain"));
        assert_eq!(response.text(), "hello");
    }

    #[test]
    fn parses_chunked_body() {
        let raw = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let response = parse_response(raw).unwrap();
        assert_eq!(response.status, 404);
        assert!(!response.is_success());
        assert_eq!(response.text(), "abcde");
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_response(b"nonsense").is_err());
        assert!(parse_response(b"HTTP/1.1 abc\r\n\r\n").is_err());
    }
}
