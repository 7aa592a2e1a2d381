//! A PostgreSQL connection of the process's own to the metadata catalog, for the one question
//! every read request asks first: the newest snapshot id ([`crate::snapshot`]).
//!
//! Asked through DuckDB, the question runs in `postgres_query`, which wraps it in a
//! `COPY … TO STDOUT` inside a transaction of its own: 1.0–1.2 ms on a local PostgreSQL, where
//! the same query over a plain client connection takes 0.05–0.07 ms (DuckDB 1.5.4, PostgreSQL
//! 15, medians of 300). Against RDS each of those extra round trips costs more. This connection
//! asks it in one round trip.
//!
//! The connection lives on a thread of its own with a current-thread runtime, so a request asks
//! from whatever thread it runs on (tokio's blocking pool, a test, an async init) without
//! entering a runtime inside another. Asks that queue while one is answered share the next
//! answer: a query that starts after an ask was made answers it.
//!
//! What the connection cannot do falls back to `postgres_query` ([`crate::snapshot::Newest`]):
//! a DSN tokio-postgres cannot read (libpq's `verify-ca` / `verify-full`, options it does not
//! know: [`CatalogConn::start`] says so once and returns `None`), a failed connect (not retried
//! for [`PAUSE_AFTER_FAILED_CONNECT`]), no answer within [`ASK_TIMEOUT`]. A lost connection is
//! reopened by the next ask.
//!
//! TLS follows the DSN's `sslmode` as libpq does for the DuckDB connection with the same DSN:
//! `disable` is plain; `prefer` (libpq's default) and `require` encrypt without authenticating
//! the server, which is all those modes promise. A catalog behind unix sockets only is plain.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::tls::TlsStream;
use tokio_postgres::{Client, Config, Connection, NoTls, SimpleQueryMessage, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::Redactor;

/// How long an ask waits for the connection's answer before the caller falls back.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// After a failed connect, asks fall back at once for this long instead of each trying again.
pub const PAUSE_AFTER_FAILED_CONNECT: Duration = Duration::from_secs(10);

/// The `application_name` the connection announces unless the DSN names one.
pub const APPLICATION_NAME: &str = "dq-newest-snapshot";

/// The question. Unqualified, like the `postgres_query` fallback: both resolve it on the
/// DSN's `search_path`, where DuckLake's tables are.
const NEWEST_SQL: &str = "SELECT max(snapshot_id) FROM ducklake_snapshot";

/// Where an ask's answer goes.
type Reply = mpsc::SyncSender<Result<i64, String>>;

/// The handle of the connection's thread; the thread ends when the handle is dropped.
#[derive(Debug)]
pub struct CatalogConn {
    asks: mpsc::Sender<Reply>,
}

impl CatalogConn {
    /// Starts the connection's thread for `dsn` (a libpq keyword or URL DSN), which connects at
    /// once so a new instance's first request finds it open. `None` when tokio-postgres cannot
    /// take the DSN or the thread cannot start: the caller asks through DuckDB instead.
    pub fn start(dsn: &str, redactor: Redactor) -> Option<CatalogConn> {
        let mut config = match dsn.parse::<Config>() {
            Ok(config) => config,
            Err(e) => {
                tracing::info!(
                    reason = %redactor.redact(&e.to_string()),
                    "the newest snapshot is asked through DuckDB: its own catalog connection \
                     cannot take this DSN"
                );
                return None;
            }
        };
        if config.get_application_name().is_none() {
            config.application_name(APPLICATION_NAME);
        }
        let (asks, queue) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("dq-catalog-conn".into())
            .spawn(move || serve(&config, &queue, &redactor));
        match spawned {
            Ok(_) => Some(CatalogConn { asks }),
            Err(e) => {
                tracing::warn!(error = %e, "the catalog connection's thread did not start");
                None
            }
        }
    }

    /// The newest snapshot id of the catalog, asked now.
    ///
    /// # Errors
    /// The connection could not answer (see the module docs); the text is redacted.
    pub fn newest(&self) -> Result<i64, String> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.asks
            .send(reply)
            .map_err(|_| "the catalog connection's thread has stopped".to_owned())?;
        answer.recv_timeout(ASK_TIMEOUT).map_err(|_| no_answer())?
    }
}

/// The error of an ask that waited [`ASK_TIMEOUT`] in vain.
fn no_answer() -> String {
    format!("no answer within {} s", ASK_TIMEOUT.as_secs())
}

/// The connection's thread: answers asks until every [`CatalogConn`] handle is gone.
fn serve(config: &Config, queue: &mpsc::Receiver<Reply>, redactor: &Redactor) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            // Dropping the queue makes every ask fail, so every request falls back.
            tracing::warn!(error = %e, "the catalog connection's runtime did not start");
            return;
        }
    };
    let mut conn = Conn {
        config,
        redactor,
        client: None,
        paused_until: None,
    };
    runtime.block_on(conn.open());
    while let Ok(first) = queue.recv() {
        let mut waiting = vec![first];
        waiting.extend(queue.try_iter());
        let answer = runtime.block_on(conn.newest());
        for reply in waiting {
            // The asker may have given up waiting: nobody to tell.
            let _ = reply.send(answer.clone());
        }
    }
}

/// What one question came to: an answer or an error to give as it is, or a failed question
/// (its error text, unredacted) worth one more try on a new connection.
enum Asked {
    Done(Result<i64, String>),
    Failed(String),
}

/// The thread's connection state.
struct Conn<'a> {
    config: &'a Config,
    redactor: &'a Redactor,
    client: Option<Client>,
    paused_until: Option<Instant>,
}

impl Conn<'_> {
    /// The answer, reopening the connection and asking once more when a question failed (the
    /// server may have closed an idle connection).
    async fn newest(&mut self) -> Result<i64, String> {
        match self.ask_once().await {
            Asked::Failed(e) => {
                tracing::debug!(error = %self.redactor.redact(&e), "catalog question failed; reconnecting");
                match self.ask_once().await {
                    Asked::Failed(e) => Err(self.redactor.redact(&e)),
                    Asked::Done(answer) => answer,
                }
            }
            Asked::Done(answer) => answer,
        }
    }

    /// One question on the open connection, opened first if needed. A connection a question
    /// failed or hung on is not asked again.
    async fn ask_once(&mut self) -> Asked {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.open().await;
        }
        let Some(client) = &self.client else {
            return Asked::Done(Err("the catalog connection is not open".to_owned()));
        };
        match tokio::time::timeout(ASK_TIMEOUT, ask(client)).await {
            Ok(Ok(id)) => Asked::Done(Ok(id)),
            Ok(Err(e)) => {
                self.client = None;
                Asked::Failed(e)
            }
            Err(_) => {
                self.client = None;
                Asked::Done(Err(no_answer()))
            }
        }
    }

    /// Connects unless a connect failed less than [`PAUSE_AFTER_FAILED_CONNECT`] ago.
    async fn open(&mut self) {
        if self.paused_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        match connect(self.config).await {
            Ok(client) => {
                self.client = Some(client);
                self.paused_until = None;
            }
            Err(e) => {
                tracing::warn!(
                    error = %self.redactor.redact(&e),
                    "the catalog connection did not open; the newest snapshot is asked through \
                     DuckDB meanwhile"
                );
                self.paused_until = Some(Instant::now() + PAUSE_AFTER_FAILED_CONNECT);
            }
        }
    }
}

/// One round trip: the simple-query protocol sends the text and reads the row back.
async fn ask(client: &Client) -> Result<i64, String> {
    let messages = client
        .simple_query(NEWEST_SQL)
        .await
        .map_err(|e| e.to_string())?;
    messages
        .iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(row.get(0)),
            _ => None,
        })
        .flatten()
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| "the catalog holds no snapshot".to_owned())
}

/// Opens a connection and drives it on the thread's runtime (between asks it is not polled,
/// which only leaves the server's idle messages unread until the next ask).
async fn connect(config: &Config) -> Result<Client, String> {
    let unix_only = config
        .get_hosts()
        .iter()
        .all(|h| !matches!(h, Host::Tcp(_)));
    if config.get_ssl_mode() == SslMode::Disable || unix_only {
        driven(config.connect(NoTls).await)
    } else {
        driven(config.connect(MakeRustlsConnect::new(tls()?)).await)
    }
}

/// The client of a connect, its connection spawned on the thread's runtime to be driven there.
fn driven<S>(
    connected: Result<(Client, Connection<Socket, S>), tokio_postgres::Error>,
) -> Result<Client, String>
where
    S: TlsStream + Unpin + Send + 'static,
{
    let (client, connection) = connected.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(client)
}

/// TLS as libpq's `prefer` / `require`: encrypted, the server's certificate not checked.
fn tls() -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(
        rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unauthenticated(provider)))
            .with_no_client_auth(),
    )
}

/// Accepts any certificate, as libpq's `require`; handshake signatures are still checked, so
/// the session is encrypted with the key of the certificate shown.
#[derive(Debug)]
struct Unauthenticated(Arc<CryptoProvider>);

impl ServerCertVerifier for Unauthenticated {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dsn_it_cannot_take_is_left_to_duckdb() {
        for dsn in [
            "host=db dbname=dq sslmode=verify-full",
            "postgresql://u@db/dq?sslmode=verify-ca",
            "host=db dbname=dq sslrootcert=/ca.pem",
        ] {
            assert!(
                CatalogConn::start(dsn, Redactor::default()).is_none(),
                "{dsn}"
            );
        }
    }

    #[test]
    fn an_unreachable_catalog_is_an_error_not_a_wait() {
        // Port 1 on loopback refuses at once; the ask must come back (as an error), and the
        // next one too, paused rather than reconnecting.
        let conn = CatalogConn::start(
            "host=127.0.0.1 port=1 dbname=dq user=dq connect_timeout=2",
            Redactor::default(),
        )
        .unwrap();
        let started = Instant::now();
        for _ in 0..2 {
            conn.newest().unwrap_err();
        }
        assert!(started.elapsed() < ASK_TIMEOUT, "{:?}", started.elapsed());
    }
}
