//! `grpc.FetchService`: per call, the in-flight limit, the
//! deadline (the client's `grpc-timeout` up to the server's maximum, 30 s by default),
//! authentication, then per-RPC subject authorization before any query.

use crate::convert::{
    effective_options, event_to_proto, filter_from_advanced, grpc_code, index_from_proto,
    index_to_proto,
};
use dq_auth::{
    authorize_index_subjects, authorize_subject_filter, AuthError, DeviceLinks, GrpcAuthenticator,
    GrpcCredentials, Principal, SubjectScope, Surface, VerifiedIamCaller,
};
use dq_proto::grpc::fetch_service_server::FetchService;
use dq_proto::grpc::{
    AdvancedSearchOptions, GetLatestCloudEventRequest, GetLatestCloudEventResponse,
    GetLatestIndexRequest, GetLatestIndexResponse, ListCloudEventsFromKeysRequest,
    ListCloudEventsFromKeysResponse, ListCloudEventsRequest, ListCloudEventsResponse,
    ListIndexesRequest, ListIndexesResponse, SearchOptions, StringFilterOption,
};
use dq_rawquery::db::Db;
use dq_rawquery::error::{FetchError, ReadErrorCode, MAX_INDEXES};
use dq_rawquery::filter::{clamp_limit, Filter};
use dq_rawquery::payload::{valid_index_key, Payloads};
use dq_rawquery::search::{Event, Index};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tonic::{Code, Request, Response, Status};

/// The server's maximum deadline unless [`FetchApi::with_max_deadline`] sets another: the
/// deadline of a call whose client sent none, and the cap of a client's `grpc-timeout`.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);
/// How long a call waits for an in-flight slot before RESOURCE_EXHAUSTED.
pub const ADMISSION_WAIT: Duration = Duration::from_millis(100);

/// The caller ARN that API Gateway verified for an IAM-authorized route. Only the Lambda
/// adapter inserts it into the request extensions, from the request context (never from a
/// header), so a client cannot forge it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IamCaller(pub String);

/// The FetchService implementation.
#[derive(Clone)]
pub struct FetchApi {
    db: Arc<Db>,
    payloads: Payloads,
    auth: Arc<GrpcAuthenticator>,
    links: Option<Arc<dyn DeviceLinks>>,
    limiter: Option<Arc<Semaphore>>,
    max_deadline: Duration,
    observe: crate::observe::Observe,
}

impl std::fmt::Debug for FetchApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchApi")
            .field("payloads", &self.payloads)
            .field("auth", &self.auth)
            .field("max_deadline", &self.max_deadline)
            .finish_non_exhaustive()
    }
}

/// What an admitted, authenticated call carries through its RPC.
struct Call {
    caller: Option<Principal>,
    deadline: Instant,
    budget: Duration,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Call {
    /// Runs `work` within the call's deadline.
    async fn within<T>(&self, work: impl Future<Output = Result<T, Status>>) -> Result<T, Status> {
        tokio::time::timeout_at(self.deadline, work)
            .await
            .unwrap_or_else(|_| {
                let e = FetchError::Deadline(self.budget);
                Err(Status::new(grpc_code(e.code()), e.client_message()))
            })
    }
}

impl FetchApi {
    /// A service over `db`, resolving payloads with `payloads` and authenticating with `auth`.
    pub fn new(db: Arc<Db>, payloads: Payloads, auth: GrpcAuthenticator) -> FetchApi {
        FetchApi {
            db,
            payloads,
            auth: Arc::new(auth),
            links: None,
            limiter: None,
            max_deadline: DEFAULT_DEADLINE,
            observe: crate::observe::Observe::default(),
        }
    }

    /// Device → vehicle links for cross-subject access (identity-api).
    pub fn with_device_links(mut self, links: Arc<dyn DeviceLinks>) -> FetchApi {
        self.links = Some(links);
        self
    }

    /// At most `n` calls in flight (`MAX_CONCURRENT_REQUESTS`; 0 = unlimited).
    pub fn with_concurrency_limit(mut self, n: usize) -> FetchApi {
        self.limiter = (n > 0).then(|| Arc::new(Semaphore::new(n)));
        self
    }

    /// The server's maximum deadline (`FETCH_MAX_DEADLINE`): the deadline of calls
    /// that send no `grpc-timeout`, and the cap of those that do.
    pub fn with_max_deadline(mut self, d: Duration) -> FetchApi {
        self.max_deadline = d;
        self
    }

    /// Call metrics and X-Ray subsegments ([`crate::observe`]; default: neither), written by
    /// the router's middleware.
    pub fn with_observe(mut self, observe: crate::observe::Observe) -> FetchApi {
        self.observe = observe;
        self
    }

    /// What the router's middleware writes to.
    pub(crate) fn observe(&self) -> &crate::observe::Observe {
        &self.observe
    }

    /// Admission, deadline and authentication of one call, in that order.
    async fn start<T>(
        &self,
        request: Request<T>,
        method: &'static str,
    ) -> Result<(Call, T), Status> {
        let slot = match &self.limiter {
            None => None,
            Some(sem) => Some(
                tokio::time::timeout(ADMISSION_WAIT, Arc::clone(sem).acquire_owned())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .ok_or_else(|| {
                        Status::resource_exhausted(
                            "server is at its concurrent-request limit; retry shortly",
                        )
                    })?,
            ),
        };
        // A client may send up to 99999999 hours: it gets at most the server's maximum.
        let budget = request
            .metadata()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_grpc_timeout)
            .map_or(self.max_deadline, |asked| asked.min(self.max_deadline));
        let deadline = Instant::now()
            .checked_add(budget)
            .unwrap_or_else(|| Instant::now() + DEFAULT_DEADLINE);
        let authorization = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let iam = request.extensions().get::<IamCaller>().cloned();
        let credentials = GrpcCredentials {
            authorization: authorization.as_deref(),
            iam_caller: iam.as_ref().map(|c| VerifiedIamCaller(&c.0)),
            // The accepted TCP connection's peer (tonic's connect info); none in Lambda.
            peer: request.remote_addr().map(|a| a.ip()),
        };
        let mut call = Call {
            caller: None,
            deadline,
            budget,
            _slot: slot,
        };
        call.caller = call
            .within(async {
                self.auth.authenticate(credentials).await.map_err(|e| {
                    tracing::warn!(method, error = %e, "fetch gRPC token validation failed");
                    auth_status(&e)
                })
            })
            .await?;
        Ok((call, request.into_inner()))
    }

    /// Authorizes the search's subjects and, for a token, REPLACES the subject filter by
    /// exactly the authorized DIDs (client `not_in`/`or` on subject dropped); then builds the
    /// filter, answering a refusal in the RPC's `texts`.
    async fn scoped_filter(
        &self,
        call: &Call,
        options: Option<&SearchOptions>,
        advanced: Option<&AdvancedSearchOptions>,
        texts: &Texts,
    ) -> Result<Filter, Status> {
        let mut options = effective_options(options, advanced);
        let requested = options
            .subject
            .as_ref()
            .map(|s| s.r#in.clone())
            .unwrap_or_default();
        let scope =
            authorize_subject_filter(call.caller.as_ref(), &requested, self.links.as_deref())
                .await
                .map_err(|e| auth_status(&e))?;
        if let [subject] = requested.as_slice() {
            dq_metrics::record_vehicle(subject);
        }
        if let SubjectScope::Only(list) = scope {
            options.subject = Some(StringFilterOption {
                r#in: list.into_iter().map(|s| s.search).collect(),
                ..Default::default()
            });
        }
        filter_from_advanced(&options).map_err(|e| status(e, texts))
    }

    /// Up to `limit` (clamped) matches with their payloads, resolved; an empty result is
    /// NOT_FOUND. One statement reads the rows and their inline payloads.
    async fn search_events(
        &self,
        filter: Filter,
        limit: i64,
        texts: &Texts,
    ) -> Result<Vec<Event>, Status> {
        let limit = clamp_limit(limit);
        let rows = self
            .db
            .read(move |r| r.search_rows(&filter, limit, true))
            .await
            .map_err(|e| status(e, texts))?;
        if rows.is_empty() {
            return Err(status(FetchError::NotFound, texts));
        }
        self.payloads
            .events(rows)
            .await
            .map_err(|e| status(e, texts))
    }

    /// Up to `limit` (clamped) matches; an empty result is NOT_FOUND.
    async fn search(
        &self,
        filter: Filter,
        limit: i64,
        texts: &Texts,
    ) -> Result<Vec<Index>, Status> {
        let limit = clamp_limit(limit);
        let indexes = self
            .db
            .read(move |r| r.search(&filter, limit))
            .await
            .map_err(|e| status(e, texts))?;
        if indexes.is_empty() {
            return Err(status(FetchError::NotFound, texts));
        }
        Ok(indexes)
    }

    async fn resolve(&self, indexes: &[Index], texts: &Texts) -> Result<Vec<Event>, Status> {
        self.payloads
            .resolve(&self.db, indexes)
            .await
            .map_err(|e| status(e, texts))
    }

    async fn latest(&self, filter: Filter, texts: &Texts) -> Result<Index, Status> {
        self.db
            .read(move |r| r.latest(&filter))
            .await
            .map_err(|e| status(e, texts))
    }
}

fn auth_status(e: &AuthError) -> Status {
    Status::new(
        Code::from_i32(e.code().grpc_code()),
        e.message(Surface::Grpc),
    )
}

/// How one RPC words a failed read: the text of NOT_FOUND (a search miss) and the prefix of
/// INTERNAL. Every other code answers with the error's own client text.
struct Texts {
    not_found: fn(&FetchError) -> String,
    internal: &'static str,
}

const LATEST_INDEX: Texts = Texts {
    not_found: |e| format!("no index key Found: {e}"),
    internal: "failed to get latest index",
};
const LIST_INDEXES: Texts = Texts {
    not_found: |_| "no index keys found".into(),
    internal: "failed to list indexes",
};
const LATEST_EVENT: Texts = Texts {
    not_found: |e| format!("no cloud event found: {e}"),
    internal: "failed to get latest cloud event",
};
/// GetLatestCloudEvent past its search: resolving the found index's payload.
const LATEST_OBJECT: Texts = Texts {
    internal: "failed to get latest object",
    ..LATEST_EVENT
};
const OBJECTS: Texts = Texts {
    not_found: |_| "no cloud events found".into(),
    internal: "failed to get objects",
};

/// A failed read as every RPC answers it: [`grpc_code`] of [`FetchError::code`], with the RPC's
/// `texts` for NOT_FOUND and INTERNAL. The detail of an internal failure (catalog host, bucket,
/// key, S3's answer) goes to the log, already redacted, never to the client.
fn status(e: FetchError, texts: &Texts) -> Status {
    let code = e.code();
    let message = match code {
        ReadErrorCode::NotFound => (texts.not_found)(&e),
        ReadErrorCode::Internal => {
            if e.is_internal() {
                tracing::error!(context = texts.internal, error = %e, "FetchService call failed");
            }
            format!("{}: {}", texts.internal, e.client_message())
        }
        _ => e.client_message(),
    };
    Status::new(grpc_code(code), message)
}

/// Parses a `grpc-timeout` header: up to 8 digits and a unit (H, M, S, m, u, n).
fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    if !v.is_ascii() {
        return None;
    }
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[tonic::async_trait]
impl FetchService for FetchApi {
    async fn get_latest_index(
        &self,
        request: Request<GetLatestIndexRequest>,
    ) -> Result<Response<GetLatestIndexResponse>, Status> {
        let (call, req) = self.start(request, "GetLatestIndex").await?;
        call.within(async {
            let texts = &LATEST_INDEX;
            let (options, advanced) = (req.options.as_ref(), req.advanced_options.as_ref());
            let filter = self.scoped_filter(&call, options, advanced, texts).await?;
            let index = self.latest(filter, texts).await?;
            Ok(Response::new(GetLatestIndexResponse {
                index: Some(index_to_proto(&index)),
            }))
        })
        .await
    }

    async fn list_indexes(
        &self,
        request: Request<ListIndexesRequest>,
    ) -> Result<Response<ListIndexesResponse>, Status> {
        let (call, req) = self.start(request, "ListIndexes").await?;
        call.within(async {
            let texts = &LIST_INDEXES;
            let (options, advanced) = (req.options.as_ref(), req.advanced_options.as_ref());
            let filter = self.scoped_filter(&call, options, advanced, texts).await?;
            let indexes = self.search(filter, req.limit.into(), texts).await?;
            Ok(Response::new(ListIndexesResponse {
                indexes: indexes.iter().map(index_to_proto).collect(),
            }))
        })
        .await
    }

    async fn get_latest_cloud_event(
        &self,
        request: Request<GetLatestCloudEventRequest>,
    ) -> Result<Response<GetLatestCloudEventResponse>, Status> {
        let (call, req) = self.start(request, "GetLatestCloudEvent").await?;
        call.within(async {
            let texts = &LATEST_EVENT;
            let (options, advanced) = (req.options.as_ref(), req.advanced_options.as_ref());
            let filter = self.scoped_filter(&call, options, advanced, texts).await?;
            let row = self
                .db
                .read(move |r| r.latest_row(&filter, true))
                .await
                .map_err(|e| status(e, texts))?;
            // Any failure past the search is the payload's.
            let event = self
                .payloads
                .events(vec![row])
                .await
                .map_err(|e| status(e, &LATEST_OBJECT))?
                .pop()
                .ok_or_else(|| status(FetchError::MissingRow, &LATEST_OBJECT))?;
            Ok(Response::new(GetLatestCloudEventResponse {
                cloud_event: Some(event_to_proto(event)),
            }))
        })
        .await
    }

    async fn list_cloud_events(
        &self,
        request: Request<ListCloudEventsRequest>,
    ) -> Result<Response<ListCloudEventsResponse>, Status> {
        let (call, req) = self.start(request, "ListCloudEvents").await?;
        call.within(async {
            let texts = &OBJECTS;
            let (options, advanced) = (req.options.as_ref(), req.advanced_options.as_ref());
            let filter = self.scoped_filter(&call, options, advanced, texts).await?;
            let events = self.search_events(filter, req.limit.into(), texts).await?;
            Ok(Response::new(ListCloudEventsResponse {
                cloud_events: events.into_iter().map(event_to_proto).collect(),
            }))
        })
        .await
    }

    async fn list_cloud_events_from_index(
        &self,
        request: Request<ListCloudEventsFromKeysRequest>,
    ) -> Result<Response<ListCloudEventsFromKeysResponse>, Status> {
        let (call, req) = self.start(request, "ListCloudEventsFromIndex").await?;
        call.within(async {
            let texts = &OBJECTS;
            if req.indexes.len() > MAX_INDEXES {
                return Err(status(FetchError::TooManyIndexes(req.indexes.len()), texts));
            }
            let mut indexes: Vec<Index> = req.indexes.iter().map(index_from_proto).collect();
            if indexes.iter().any(|i| !valid_index_key(&i.key)) {
                return Err(status(FetchError::InvalidIndexKey, texts));
            }
            let subjects: Vec<&str> = indexes.iter().map(|i| i.header.subject.as_str()).collect();
            let authorized =
                authorize_index_subjects(call.caller.as_ref(), &subjects, self.links.as_deref())
                    .await
                    .map_err(|e| auth_status(&e))?;
            // A device subject authorized through its vehicle is read under its normalized DID.
            for (index, a) in indexes.iter_mut().zip(authorized) {
                index.header.subject = a.search;
            }
            let events = self.resolve(&indexes, texts).await?;
            Ok(Response::new(ListCloudEventsFromKeysResponse {
                cloud_events: events.into_iter().map(event_to_proto).collect(),
            }))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One code per error whichever RPC answers it: a search miss is NOT_FOUND, a stale index
    /// (no row to resolve) INTERNAL, the payload budget RESOURCE_EXHAUSTED, in every RPC.
    #[test]
    fn every_rpc_answers_an_error_with_its_one_code() {
        let errors = || {
            [
                (FetchError::NotFound, Code::NotFound),
                (FetchError::MissingRow, Code::Internal),
                (FetchError::BudgetExceeded, Code::ResourceExhausted),
                (FetchError::InvalidFilter("x".into()), Code::InvalidArgument),
                (FetchError::TooManyIndexes(1001), Code::InvalidArgument),
                (FetchError::InvalidIndexKey, Code::InvalidArgument),
                (
                    FetchError::Deadline(Duration::from_secs(1)),
                    Code::DeadlineExceeded,
                ),
                (FetchError::Internal("panic".into()), Code::Internal),
            ]
        };
        for texts in [
            &LATEST_INDEX,
            &LIST_INDEXES,
            &LATEST_EVENT,
            &LATEST_OBJECT,
            &OBJECTS,
        ] {
            for (e, code) in errors() {
                assert_eq!(status(e, texts).code(), code, "{}", texts.internal);
            }
        }
        let message = |e, texts| status(e, texts).message().to_string();
        let no_rows = "cloud event not found: sql: no rows in result set";
        assert_eq!(
            message(FetchError::NotFound, &LATEST_EVENT),
            format!("no cloud event found: {no_rows}")
        );
        assert_eq!(
            message(FetchError::MissingRow, &LATEST_OBJECT),
            format!("failed to get latest object: {no_rows}")
        );
        assert_eq!(
            message(FetchError::MissingRow, &OBJECTS),
            format!("failed to get objects: {no_rows}")
        );
        assert_eq!(
            message(FetchError::BudgetExceeded, &LATEST_OBJECT),
            FetchError::BudgetExceeded.to_string()
        );
        assert_eq!(
            message(FetchError::Internal("panic".into()), &LIST_INDEXES),
            "failed to list indexes: internal error"
        );
    }

    #[test]
    fn grpc_timeouts_parse() {
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        for bad in ["", "S", "5", "5x", "123456789S", "-1S", "1.5S", "5é"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
    }
}
