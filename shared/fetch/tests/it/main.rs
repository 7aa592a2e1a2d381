//! FetchService against a real lake (DuckDB + DuckLake, seeded by the din simulator):
//! - `search.rs`: the read semantics through [`dq_rawquery::Reader`] and [`dq_rawquery::Payloads`], on both
//!   catalog backends;
//! - `grpc.rs`: each RPC through a tonic client over HTTP/2, edge cases included;
//! - `grpc_web.rs`: the same service over HTTP/1.1 `application/grpc-web+proto`;
//! - `access.rs`: unauthenticated, expired, wrong-subject and IAM callers;
//! - `lambda.rs`: the sample API Gateway events in `events/` through the Lambda adapter;
//! - `blobs.rs`: externalized payloads on moto S3, sealed;
//! - `hostile.rs`: garbage bodies and injection strings for every RPC (issue 10);
//! - `or_filters.rs`: `or` alternatives on every advanced filter field (issue 18);
//! - `deadlines.rs`: client timeouts capped at the server's maximum (issue 18);
//! - `errors.rs`: client texts of failed reads, kept and generic (issue 18);
//! - `s3_logs.rs`: S3 failures logged on one line, against moto (issue 18);
//! - `trusted_networks.rs`: tokenless callers from trusted TCP peers (issue 22);
//! - `observe.rs`: call metrics by method and code, the call span in the logs (issue 22).
//!
//! One seeded lake and its servers are shared by the whole binary (read-only tests).
// Integration-test helpers fail their test by panicking, like the #[test] bodies clippy.toml exempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::panic, clippy::indexing_slicing)]

mod access;
mod blobs;
mod deadlines;
mod errors;
mod grpc;
mod grpc_web;
mod hostile;
mod lambda;
mod observe;
mod or_filters;
mod s3_logs;
mod search;
mod trusted_networks;

use base64::Engine as _;
use chrono::{DateTime, Duration, TimeZone, Utc};
use dq_auth::dev::{now_secs, DevClaims, DevSigner};
use dq_auth::{GrpcAuthenticator, Permission, ServiceAllowList};
use dq_blob::{BlobConfig, BlobStore};
use dq_fetch::FetchApi;
use dq_lake::testing::{Backend, TestLake};
use dq_lake::Lake;
use dq_proto::grpc::fetch_service_client::FetchServiceClient;
use dq_rawquery::{Db, Payloads};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use tonic::transport::Channel;

pub use dq_dinsim::testing::{event, subject, SOURCE, VEHICLE};
pub const OTHER_SOURCE: &str = "0x5e31bBc786D7bEd95216383787deA1ab0f1c1897";
pub const ATTESTER: &str = "0x07B584f6a7125491C991ca2a45ab9e641B1CeE1b";
/// DBE1 key (32 × 0x2a), also din's golden-vector key.
pub const BLOB_KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";
pub const ISSUER: &str = "https://issuer.test";
/// The IAM role allowed without a token (matches `events/fetch-*.json`).
pub const ALLOWED_ROLE: &str = "arn:aws:iam::123456789012:role/telemetry-api";

/// Fixed base time of the seeded events (within 400 days of the test clock for most tests).
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap()
}

pub fn at(secs: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(secs)
}

/// The big payload of event `big` (externalized above the 300-byte test threshold).
pub fn big_payload() -> String {
    format!(r#"{{"blob":"{}"}}"#, "z".repeat(400))
}

/// Binary payload of event `bin`.
pub fn binary_payload() -> Vec<u8> {
    (0..=255u8).collect()
}

/// Seeds the shared dataset (times relative to [`t0`]); ids name what each event tests:
/// - vehicle 1: `a1` 0 s, `a2` 10 s (redelivered 400 ms later in a second bundle: one event),
///   `a3` 20 s as `dimo.status` (tags x,y) AND `dimo.fingerprint` (same id), `v1` 40 s voided
///   by a tombstone at 5 s from another source, `bin` 50 s base64, `big` 60 s in a sealed blob,
///   `t1`/`t2` both 70 s (order ties on id), `old` 500 days before t0;
/// - vehicle 2: `b1` 15 s from another source.
pub fn seed(lake: &Lake, store: &BlobStore) {
    let rt = runtime();
    let writer = dq_dinsim::Writer::new(lake, Some(store)).with_threshold(300);
    let mut a3 = event(1, "a3", "dimo.status", at(20), r#"{"n":3}"#);
    a3.header.tags = vec!["x".into(), "y".into()];
    let a3f = event(1, "a3", "dimo.fingerprint", at(20), r#"{"vin":"X"}"#);
    let v1 = event(1, "v1", "dimo.status", at(40), r#"{"n":"voided"}"#);
    let tomb = dq_dinsim::tombstone(&v1, ATTESTER, "tomb-1", at(5), "test");
    let mut bin = event(1, "bin", "dimo.raw.image", at(50), "");
    bin.data = None;
    bin.data_base64 = Some(base64::engine::general_purpose::STANDARD.encode(binary_payload()));
    bin.header.data_content_type = "image/png".into();
    let mut b1 = event(2, "b1", "dimo.status", at(15), r#"{"n":"b"}"#);
    b1.header.source = OTHER_SOURCE.into();
    let first = vec![
        event(1, "a1", "dimo.status", at(0), r#"{"n":1}"#),
        event(1, "a2", "dimo.status", at(10), r#"{"n":2}"#),
        a3,
        a3f,
        v1,
        tomb,
        bin,
        event(1, "big", "dimo.status", at(60), &big_payload()),
        event(1, "t1", "dimo.status", at(70), r#"{"n":"t1"}"#),
        event(1, "t2", "dimo.status", at(70), r#"{"n":"t2"}"#),
        event(
            1,
            "old",
            "dimo.status",
            t0() - Duration::days(500),
            r#"{"n":"old"}"#,
        ),
        b1,
    ];
    rt.block_on(writer.write_bundle(&first)).unwrap();
    // Redelivery of a2 within the same second (a different row, the same dedup key).
    let mut again = event(1, "a2", "dimo.status", at(10), r#"{"n":2}"#);
    again.header.time += Duration::milliseconds(400);
    rt.block_on(writer.write_bundle(&[again])).unwrap();
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A seeded lake on `backend` with its sealed local blob store.
pub struct Seeded {
    pub test_lake: TestLake,
    pub db: Arc<Db>,
    pub store: Arc<BlobStore>,
}

pub fn seeded(backend: Backend) -> Seeded {
    seeded_on(TestLake::new(backend))
}

/// [`seed`]s the din lake at `test_lake`, with its sealed local blob store.
pub fn seeded_on(test_lake: TestLake) -> Seeded {
    let lake = dq_dinsim::testing::open_din_lake(&test_lake);
    let mut cfg = BlobConfig::local(test_lake.path("blobs"));
    cfg.encryption_key = Some(BLOB_KEY.into());
    let store = Arc::new(runtime().block_on(BlobStore::open(&cfg)).unwrap());
    seed(&lake, &store);
    Seeded {
        test_lake,
        db: Arc::new(Db::new(lake)),
        store,
    }
}

/// A fresh bucket of the shared moto server, named after `prefix`.
pub fn moto_bucket(prefix: &str) -> String {
    dq_testkit::shared_moto()
        .create_unique_bucket(prefix)
        .unwrap()
}

/// A blob store on `bucket` of the shared moto server, sealing with `key` when given.
pub fn moto_store(bucket: &str, key: Option<&str>) -> Arc<BlobStore> {
    let moto = dq_testkit::shared_moto();
    let cfg = BlobConfig {
        bucket: bucket.into(),
        prefix: dq_blob::DEFAULT_PREFIX.into(),
        encryption_key: key.map(str::to_string),
        s3: moto.s3_config(),
    };
    Arc::new(runtime().block_on(BlobStore::open(&cfg)).unwrap())
}

/// A din lake holding `events`, written in one bundle through `store` (payloads over 64 bytes
/// go to blobs), and its reader.
pub fn lake_through(
    store: &BlobStore,
    events: &[dq_cloudevent::event::RawEvent],
) -> (TestLake, Arc<Db>) {
    let (t, lake) = dq_dinsim::testing::din_lake(Backend::File);
    runtime()
        .block_on(
            dq_dinsim::Writer::new(&lake, Some(store))
                .with_threshold(64)
                .write_bundle(events),
        )
        .unwrap();
    (t, Arc::new(Db::new(lake)))
}

/// The binary-wide fixture: a seeded file-catalog lake, the signer, and a runtime that keeps
/// the servers alive across tests.
pub struct Fixture {
    pub seeded: Seeded,
    pub signer: DevSigner,
    pub rt: tokio::runtime::Runtime,
    /// Tokens only (no local trust), IAM allow-list [`ALLOWED_ROLE`].
    pub strict: SocketAddr,
    /// Local trust: callers without a token are served as a service.
    pub trusted: SocketAddr,
}

pub fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let seeded = seeded(Backend::File);
        let signer = DevSigner::generate(ISSUER).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut f = Fixture {
            seeded,
            signer,
            rt,
            strict: SocketAddr::from(([127, 0, 0, 1], 0)),
            trusted: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        f.strict = f.serve(f.api(false));
        f.trusted = f.serve(f.api(true));
        f
    })
}

impl Fixture {
    /// A service over the shared lake; `trust` serves token-less callers.
    pub fn api(&self, trust: bool) -> FetchApi {
        let auth = GrpcAuthenticator::new(Some(self.signer.validator().unwrap()), false)
            .with_allow_list(ServiceAllowList::from_arns([ALLOWED_ROLE]).unwrap())
            .trust_unauthenticated(trust);
        FetchApi::new(
            Arc::clone(&self.seeded.db),
            Payloads::new(Some(Arc::clone(&self.seeded.store))),
            auth,
        )
    }

    /// Serves `api` on a fresh local port for the rest of the test binary.
    pub fn serve(&self, api: FetchApi) -> SocketAddr {
        self.rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let router = dq_fetch::server::router(api);
            tokio::spawn(dq_fetch::server::serve(
                router,
                listener,
                std::future::pending(),
            ));
            addr
        })
    }

    /// A client of a server of its own over `db`, its payloads from `store`, serving callers
    /// without a token.
    pub fn client_over(&self, db: &Arc<Db>, store: Arc<BlobStore>) -> FetchServiceClient<Channel> {
        let api = FetchApi::new(
            Arc::clone(db),
            Payloads::new(Some(store)),
            GrpcAuthenticator::new(None, false).trust_unauthenticated(true),
        );
        self.client(self.serve(api))
    }

    /// A tonic client over HTTP/2.
    pub fn client(&self, addr: SocketAddr) -> FetchServiceClient<Channel> {
        self.rt.block_on(async {
            FetchServiceClient::connect(format!("http://{addr}"))
                .await
                .unwrap()
                .max_decoding_message_size(dq_fetch::server::MAX_MESSAGE_BYTES)
        })
    }

    /// `Bearer <token>` for vehicle `token` with `permissions`.
    pub fn bearer(&self, token: u32, permissions: &[Permission]) -> String {
        let claims = DevClaims::vehicle(subject(token), permissions);
        format!("Bearer {}", self.signer.mint(&claims).unwrap())
    }

    /// `Bearer <token>` with the raw-data permission for any `subject` string (hostile tests).
    pub fn bearer_for(&self, subject: &str) -> String {
        let claims = DevClaims::vehicle(subject, &[Permission::GetRawData]);
        format!("Bearer {}", self.signer.mint(&claims).unwrap())
    }

    /// A raw-data token for vehicle 1.
    pub fn owner(&self) -> String {
        self.bearer(1, &[Permission::GetRawData])
    }

    /// An expired raw-data token for vehicle 1.
    pub fn expired(&self) -> String {
        let mut claims = DevClaims::vehicle(subject(1), &[Permission::GetRawData]);
        claims.expires_at = now_secs() - 10;
        format!("Bearer {}", self.signer.mint(&claims).unwrap())
    }

    /// Calls every RPC through `c` with `authorization`, in the order GetLatestIndex,
    /// ListIndexes, GetLatestCloudEvent, ListCloudEvents (the list RPCs with `limit`), all on
    /// `search`, then ListCloudEventsFromIndex on `indexes`; returns each outcome, its answer
    /// dropped.
    pub fn every_rpc(
        &self,
        c: &FetchServiceClient<Channel>,
        search: &dq_proto::grpc::SearchOptions,
        limit: i32,
        indexes: Vec<dq_proto::grpc::CloudEventIndex>,
        authorization: Option<&str>,
    ) -> Vec<Result<(), tonic::Status>> {
        let mut c = c.clone();
        let s = || search.clone();
        let from_keys = dq_proto::grpc::ListCloudEventsFromKeysRequest { indexes };
        self.rt.block_on(async {
            vec![
                c.get_latest_index(request(plain::latest_index(s()), authorization))
                    .await
                    .map(drop),
                c.list_indexes(request(plain::list_indexes(s(), limit), authorization))
                    .await
                    .map(drop),
                c.get_latest_cloud_event(request(plain::latest_event(s()), authorization))
                    .await
                    .map(drop),
                c.list_cloud_events(request(plain::list_events(s(), limit), authorization))
                    .await
                    .map(drop),
                c.list_cloud_events_from_index(request(from_keys, authorization))
                    .await
                    .map(drop),
            ]
        })
    }
}

/// A tonic request carrying `authorization` when given.
pub fn request<T>(message: T, authorization: Option<&str>) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    if let Some(a) = authorization {
        r.metadata_mut().insert("authorization", a.parse().unwrap());
    }
    r
}

/// Ids of events, in order.
pub fn ids(events: &[dq_proto::cloudevent::CloudEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.header.as_ref().unwrap().id.clone())
        .collect()
}

/// The four search RPCs' requests on plain options alone (no advanced options).
pub mod plain {
    use dq_proto::grpc::{
        GetLatestCloudEventRequest, GetLatestIndexRequest, ListCloudEventsRequest,
        ListIndexesRequest, SearchOptions,
    };

    pub fn latest_index(options: SearchOptions) -> GetLatestIndexRequest {
        GetLatestIndexRequest {
            options: Some(options),
            advanced_options: None,
        }
    }

    pub fn list_indexes(options: SearchOptions, limit: i32) -> ListIndexesRequest {
        ListIndexesRequest {
            options: Some(options),
            limit,
            advanced_options: None,
        }
    }

    pub fn latest_event(options: SearchOptions) -> GetLatestCloudEventRequest {
        GetLatestCloudEventRequest {
            options: Some(options),
            advanced_options: None,
        }
    }

    pub fn list_events(options: SearchOptions, limit: i32) -> ListCloudEventsRequest {
        ListCloudEventsRequest {
            options: Some(options),
            limit,
            advanced_options: None,
        }
    }
}

/// Plain options scoped to vehicle `token`.
pub fn options(token: u32) -> dq_proto::grpc::SearchOptions {
    dq_proto::grpc::SearchOptions {
        subject: Some(subject(token)),
        ..Default::default()
    }
}

pub fn ts(t: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: t.timestamp(),
        nanos: t.timestamp_subsec_nanos() as i32,
    }
}
