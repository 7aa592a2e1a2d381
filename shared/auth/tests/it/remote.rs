//! The HTTP JWKS fetcher: a body over the cap is refused, whether or not it declares its size,
//! without being read to its end.

use crate::signer;
use dq_auth::remote::{HttpJwks, MAX_JWKS_BYTES};
use dq_auth::{JwksFetcher, JwksLocation};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How the stand-in issuer sends its body.
#[derive(Clone, Copy)]
enum Framing {
    ContentLength,
    Chunked,
}

/// Serves `body` on every connection of a local listener; returns the JWKS URL.
async fn serve(body: Vec<u8>, framing: Framing) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                // Write errors are expected: the client hangs up once the cap is passed.
                match framing {
                    Framing::ContentLength => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                        let _ = sock.write_all(&body).await;
                    }
                    Framing::Chunked => {
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                        let _ = sock.write_all(head.as_bytes()).await;
                        for chunk in body.chunks(16 * 1024) {
                            let frame =
                                [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"]
                                    .concat();
                            if sock.write_all(&frame).await.is_err() {
                                return;
                            }
                        }
                        let _ = sock.write_all(b"0\r\n\r\n").await;
                    }
                }
                let _ = sock.shutdown().await;
            });
        }
    });
    url
}

fn fetcher(url: String) -> HttpJwks {
    HttpJwks::new(reqwest::Client::new(), JwksLocation::Url(url))
}

/// A JWKS document padded with whitespace to `len` bytes (still valid JSON).
fn padded_jwks(len: usize) -> Vec<u8> {
    let mut doc = signer().jwks_json().into_bytes();
    doc.resize(len, b' ');
    doc
}

#[tokio::test]
async fn a_jwks_body_over_the_cap_is_refused() {
    for framing in [Framing::ContentLength, Framing::Chunked] {
        let url = serve(padded_jwks(2 * MAX_JWKS_BYTES), framing).await;
        let e = match fetcher(url.clone()).fetch().await {
            Ok(body) => panic!("a {}-byte body was accepted", body.len()),
            Err(e) => e,
        };
        assert!(
            e.to_string()
                .contains(&format!("larger than {MAX_JWKS_BYTES} bytes")),
            "{e}"
        );
        assert!(e.to_string().contains(&url), "the error names the URL: {e}");
    }
}

#[tokio::test]
async fn a_jwks_body_within_the_cap_is_served() {
    for framing in [Framing::ContentLength, Framing::Chunked] {
        let url = serve(padded_jwks(MAX_JWKS_BYTES), framing).await;
        let body = fetcher(url).fetch().await.unwrap();
        assert_eq!(body.len(), MAX_JWKS_BYTES);
        assert!(dq_auth::KeySet::from_jwks_json(&body).is_ok());
    }
}
