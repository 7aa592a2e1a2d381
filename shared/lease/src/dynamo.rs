//! The DynamoDB backend: one item per lease, every change a single conditional write.
//!
//! Item (partition key [`KEY`]): `holder` (S, absent once released), `fence` (N), `expires_at`
//! (N, epoch seconds, also the table's TTL attribute), `acquired_at`, `renewed_at`,
//! `released_at` (N, epoch seconds), and while someone waits for the lease
//! `yield_requested_by` (S, the waiter's holder id) and `yield_requested_at` (N, epoch seconds).
//!
//! - acquire: one `UpdateItem` that takes the lease when nobody holds it or the holder's lease
//!   expired, bumping the fence and clearing any yield request (it was addressed to the previous
//!   holder); if the condition fails, the item as it was (returned with the failure) says who
//!   holds it. When that is us, a second `UpdateItem` extends our lease without a new fence.
//! - renew / release: `UpdateItem` conditioned on `holder = me AND fence = my fence`; renew
//!   returns the item, so the holder learns of a yield request at its next renewal.
//! - request / withdraw a yield: `UpdateItem` conditioned on someone else holding the lease /
//!   the request being ours. Neither touches the holder, fence or expiry.
//! - check: a strongly consistent `GetItem`.
//!
//! Expiry compares `expires_at` with the *caller's* clock, so the clocks of competing invocations
//! must agree to well within the TTL (Lambda hosts are NTP-synchronised; the TTL is minutes).
//!
//! TTL deletes an abandoned item, which would restart the fence; so a *fresh* item's fence is
//! seeded from the acquirer's clock in milliseconds, above every fence handed out before (each
//! earlier acquisition took at least a round trip, and the item outlived its `expires_at`).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, KeySchemaElement, KeyType, ReturnValue,
    ReturnValuesOnConditionCheckFailure, ScalarAttributeType, TableStatus, TimeToLiveSpecification,
    TimeToLiveStatus,
};
use aws_sdk_dynamodb::Client;

use crate::config::LeaseConfig;
use crate::{LeaseError, LeaseGuard, LostReason, Result, Term};

/// The partition key attribute (S).
pub const KEY: &str = "lease_id";
/// The expiry attribute (N, epoch seconds) and the table's TTL attribute.
pub const TTL_ATTRIBUTE: &str = "expires_at";

/// How many times acquire re-reads after the item changed between its two steps.
const ACQUIRE_ROUNDS: usize = 3;
/// How long [`DynamoBackend::create_table_if_missing`] waits for the table to become active.
const TABLE_ACTIVE_TIMEOUT: Duration = Duration::from_secs(120);
/// Per-attempt timeout of one DynamoDB call; the SDK makes up to [`MAX_ATTEMPTS`] attempts.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// SDK attempts per call (throttling, 5xx and network errors are retried with backoff).
const MAX_ATTEMPTS: u32 = 3;

/// Attribute names, used through `#name` placeholders so reserved words never matter.
const NAMES: [(&str, &str); 8] = [
    ("#holder", "holder"),
    ("#fence", "fence"),
    ("#expires_at", TTL_ATTRIBUTE),
    ("#acquired_at", "acquired_at"),
    ("#renewed_at", "renewed_at"),
    ("#released_at", "released_at"),
    ("#yield_by", "yield_requested_by"),
    ("#yield_at", "yield_requested_at"),
];

/// The lease item as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) holder: Option<String>,
    pub(crate) fence: u64,
    pub(crate) expires_at: i64,
    /// The holder id of an invocation waiting for the lease, if one asked the holder to yield.
    pub(crate) yield_requested_by: Option<String>,
}

/// A lease item in one table.
#[derive(Clone, Debug)]
pub(crate) struct DynamoBackend {
    client: Client,
    table: String,
    lease_id: String,
}

impl DynamoBackend {
    pub(crate) fn new(client: Client, table: String, lease_id: String) -> Self {
        DynamoBackend {
            client,
            table,
            lease_id,
        }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn table(&self) -> &str {
        &self.table
    }

    pub(crate) fn lease_id(&self) -> &str {
        &self.lease_id
    }

    /// Takes the lease for `holder`, or extends it if `holder` already has it.
    pub(crate) async fn acquire(&self, holder: &str, term: Term) -> Result<LeaseGuard> {
        let Term {
            now_millis,
            now,
            expires_at,
        } = term;
        // The fence of a fresh item: `if_not_exists(fence, seed) + 1` = the clock in millis.
        let seed = now_millis.saturating_sub(1).max(0);
        let mut last_seen = None;
        for _ in 0..ACQUIRE_ROUNDS {
            let taken = self
                .update(
                    "SET #holder = :me, #fence = if_not_exists(#fence, :seed) + :one, \
                     #expires_at = :expires, #acquired_at = :now, #renewed_at = :now \
                     REMOVE #released_at, #yield_by, #yield_at",
                    "attribute_not_exists(#holder) OR (#expires_at <= :now AND #holder <> :me)",
                )
                .expression_attribute_values(":me", s(holder))
                .expression_attribute_values(":seed", n(seed))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":expires", n(expires_at))
                .expression_attribute_values(":now", n(now))
                .return_values(ReturnValue::AllNew)
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            let current = match taken {
                Ok(output) => {
                    let snapshot = self.snapshot(output.attributes())?;
                    return Ok(self.guard(holder, snapshot));
                }
                Err(error) => match self.condition_failure(error, "UpdateItem")? {
                    Some(old) => Some(self.snapshot(Some(&old))?),
                    // Not returned by this server: read it.
                    None => self.read().await?,
                },
            };
            let Some(current) = current else {
                // Deleted between the write and the read; try again.
                continue;
            };
            if current.holder.as_deref() == Some(holder) {
                if let Some(guard) = self.extend_mine(holder, &current, now, expires_at).await? {
                    return Ok(guard);
                }
                continue;
            }
            match &current.holder {
                Some(other) if current.expires_at > now => {
                    return Err(LeaseError::Held {
                        lease_id: self.lease_id.clone(),
                        holder: other.clone(),
                        expires_at: current.expires_at,
                    })
                }
                // Released or expired since the write was evaluated; try again.
                _ => last_seen = Some(current),
            }
        }
        let message = format!(
            "the lease item kept changing during {ACQUIRE_ROUNDS} acquisition rounds \
             (last seen: {last_seen:?})"
        );
        Err(LeaseError::Dynamo {
            operation: "UpdateItem",
            table: self.table.clone(),
            code: None,
            message,
            transient: true,
        })
    }

    /// Extends `holder`'s own lease, keeping its fence; `None` when the item changed meanwhile.
    async fn extend_mine(
        &self,
        holder: &str,
        current: &Snapshot,
        now: i64,
        expires_at: i64,
    ) -> Result<Option<LeaseGuard>> {
        let extended = self
            .update(
                "SET #expires_at = :expires, #renewed_at = :now",
                "#holder = :me AND #fence = :fence",
            )
            .expression_attribute_values(":me", s(holder))
            .expression_attribute_values(":fence", n(current.fence))
            .expression_attribute_values(":expires", n(expires_at))
            .expression_attribute_values(":now", n(now))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match extended {
            Ok(output) => Ok(Some(
                self.guard(holder, self.snapshot(output.attributes())?),
            )),
            Err(error) => self.condition_failure(error, "UpdateItem").map(|_| None),
        }
    }

    /// Extends `guard`'s lease to the end of `term` if it is still the holder with the same fence.
    pub(crate) async fn renew(&self, guard: &LeaseGuard, term: Term) -> Result<LeaseGuard> {
        let renewed = self
            .update(
                "SET #expires_at = :expires, #renewed_at = :now",
                "#holder = :me AND #fence = :fence",
            )
            .expression_attribute_values(":me", s(&guard.holder))
            .expression_attribute_values(":fence", n(guard.fence))
            .expression_attribute_values(":expires", n(term.expires_at))
            .expression_attribute_values(":now", n(term.now))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match renewed {
            Ok(output) => Ok(self.guard(&guard.holder, self.snapshot(output.attributes())?)),
            Err(error) => {
                let current = match self.condition_failure(error, "UpdateItem")? {
                    Some(old) => self.snapshot(Some(&old)).ok(),
                    None => self.read().await?,
                };
                Err(lost(guard, current.as_ref()))
            }
        }
    }

    /// Gives the lease up if `guard` still holds it: removes the holder and expires the item
    /// now (TTL deletes it later; the fence stays until then). A lost lease is left alone.
    pub(crate) async fn release(&self, guard: &LeaseGuard, now: i64) -> Result<bool> {
        let released = self
            .update(
                "REMOVE #holder SET #expires_at = :now, #released_at = :now",
                "#holder = :me AND #fence = :fence",
            )
            .expression_attribute_values(":me", s(&guard.holder))
            .expression_attribute_values(":fence", n(guard.fence))
            .expression_attribute_values(":now", n(now))
            .send()
            .await;
        match released {
            Ok(_) => Ok(true),
            Err(error) => self.condition_failure(error, "UpdateItem").map(|_| false),
        }
    }

    /// Asks the current holder to yield to `requester`. False when nobody else holds the lease
    /// (it is free, expired or ours): then there is nobody to ask, and acquiring is the next step.
    pub(crate) async fn request_yield(&self, requester: &str, now: i64) -> Result<bool> {
        let requested = self
            .update(
                "SET #yield_by = :me, #yield_at = :now",
                "attribute_exists(#holder) AND #holder <> :me AND #expires_at > :now",
            )
            .expression_attribute_values(":me", s(requester))
            .expression_attribute_values(":now", n(now))
            .send()
            .await;
        match requested {
            Ok(_) => Ok(true),
            Err(error) => self.condition_failure(error, "UpdateItem").map(|_| false),
        }
    }

    /// Withdraws `requester`'s yield request, if it is still the one recorded.
    pub(crate) async fn withdraw_yield(&self, requester: &str) -> Result<()> {
        let withdrawn = self
            .update("REMOVE #yield_by, #yield_at", "#yield_by = :me")
            .expression_attribute_values(":me", s(requester))
            .send()
            .await;
        match withdrawn {
            Ok(_) => Ok(()),
            Err(error) => self.condition_failure(error, "UpdateItem").map(|_| ()),
        }
    }

    /// Reads the item with a strongly consistent read.
    pub(crate) async fn read(&self) -> Result<Option<Snapshot>> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, s(&self.lease_id))
            .consistent_read(true)
            .send()
            .await
            .map_err(|error| sdk_error("GetItem", &self.table, error))?;
        match output.item() {
            None => Ok(None),
            Some(item) => self.snapshot(Some(item)).map(Some),
        }
    }

    /// Creates the table (on-demand billing, TTL on [`TTL_ATTRIBUTE`]) unless it exists, waits
    /// until it is active, and checks its key. For local and test stacks; SAM creates it in
    /// production.
    pub(crate) async fn create_table_if_missing(&self) -> Result<()> {
        let schema_error = |message: String| LeaseError::Schema {
            table: self.table.clone(),
            message,
        };
        let key_definition = AttributeDefinition::builder()
            .attribute_name(KEY)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(|e| schema_error(e.to_string()))?;
        let key_schema = KeySchemaElement::builder()
            .attribute_name(KEY)
            .key_type(KeyType::Hash)
            .build()
            .map_err(|e| schema_error(e.to_string()))?;
        let created = self
            .client
            .create_table()
            .table_name(&self.table)
            .attribute_definitions(key_definition)
            .key_schema(key_schema)
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await;
        match created {
            Ok(_) => tracing::info!(table = %self.table, "lease table created"),
            Err(error) if error.code() == Some("ResourceInUseException") => {}
            Err(error) => return Err(sdk_error("CreateTable", &self.table, error)),
        }
        self.wait_until_active().await?;
        self.ensure_ttl().await
    }

    async fn wait_until_active(&self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + TABLE_ACTIVE_TIMEOUT;
        loop {
            let described = self
                .client
                .describe_table()
                .table_name(&self.table)
                .send()
                .await
                .map_err(|error| sdk_error("DescribeTable", &self.table, error))?;
            let table = described.table();
            let key_ok = table.is_some_and(|t| {
                t.key_schema().len() == 1
                    && t.key_schema()
                        .iter()
                        .all(|k| k.attribute_name() == KEY && k.key_type() == &KeyType::Hash)
            });
            if !key_ok {
                return Err(LeaseError::Schema {
                    table: self.table.clone(),
                    message: format!("the key must be the single partition key `{KEY}` (S)"),
                });
            }
            if table.and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(LeaseError::Dynamo {
                    operation: "DescribeTable",
                    table: self.table.clone(),
                    code: None,
                    message: format!("table not active after {}s", TABLE_ACTIVE_TIMEOUT.as_secs()),
                    transient: true,
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn ensure_ttl(&self) -> Result<()> {
        let described = self
            .client
            .describe_time_to_live()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|error| sdk_error("DescribeTimeToLive", &self.table, error))?;
        let description = described.time_to_live_description();
        let status = description.and_then(|d| d.time_to_live_status());
        let attribute = description.and_then(|d| d.attribute_name());
        if matches!(
            status,
            Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
        ) {
            return match attribute {
                Some(TTL_ATTRIBUTE) | None => Ok(()),
                Some(other) => Err(LeaseError::Schema {
                    table: self.table.clone(),
                    message: format!("TTL is on `{other}`, not `{TTL_ATTRIBUTE}`"),
                }),
            };
        }
        let specification = TimeToLiveSpecification::builder()
            .enabled(true)
            .attribute_name(TTL_ATTRIBUTE)
            .build()
            .map_err(|e| LeaseError::Schema {
                table: self.table.clone(),
                message: e.to_string(),
            })?;
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(specification)
            .send()
            .await
            .map_err(|error| sdk_error("UpdateTimeToLive", &self.table, error))?;
        Ok(())
    }

    /// An `UpdateItem` on this lease's item with the two expressions and the attribute-name
    /// placeholders they use (DynamoDB rejects unused ones).
    fn update(
        &self,
        update: &str,
        condition: &str,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        let request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, s(&self.lease_id))
            .update_expression(update)
            .condition_expression(condition);
        NAMES
            .iter()
            .filter(|(placeholder, _)| {
                update.contains(placeholder) || condition.contains(placeholder)
            })
            .fold(request, |request, (placeholder, name)| {
                request.expression_attribute_names(*placeholder, *name)
            })
    }

    /// `Ok(old item, if the server returned it)` for a failed condition, else the error.
    fn condition_failure<E>(
        &self,
        error: SdkError<E>,
        operation: &'static str,
    ) -> Result<Option<HashMap<String, AttributeValue>>>
    where
        E: ConditionFailure + ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        match error
            .as_service_error()
            .and_then(ConditionFailure::condition_failed)
        {
            Some(old) => Ok(old.cloned()),
            None => Err(sdk_error(operation, &self.table, error)),
        }
    }

    fn snapshot(&self, item: Option<&HashMap<String, AttributeValue>>) -> Result<Snapshot> {
        let item = item.ok_or_else(|| self.bad_item("no attributes returned"))?;
        let number = |name: &str| -> Result<i64> {
            match item.get(name) {
                Some(AttributeValue::N(text)) => text
                    .parse::<i64>()
                    .map_err(|_| self.bad_item(&format!("`{name}` is not a whole number"))),
                _ => Err(self.bad_item(&format!("`{name}` is missing or not a number"))),
            }
        };
        let fence =
            u64::try_from(number("fence")?).map_err(|_| self.bad_item("`fence` is negative"))?;
        let holder = match item.get("holder") {
            None => None,
            Some(AttributeValue::S(holder)) => Some(holder.clone()),
            Some(_) => return Err(self.bad_item("`holder` is not a string")),
        };
        let yield_requested_by = match item.get("yield_requested_by") {
            Some(AttributeValue::S(requester)) => Some(requester.clone()),
            // Written only by this crate; anything else is no request a holder should act on.
            _ => None,
        };
        Ok(Snapshot {
            holder,
            fence,
            expires_at: number(TTL_ATTRIBUTE)?,
            yield_requested_by,
        })
    }

    fn bad_item(&self, message: &str) -> LeaseError {
        LeaseError::Schema {
            table: self.table.clone(),
            message: format!("lease item `{}`: {message}", self.lease_id),
        }
    }

    fn guard(&self, holder: &str, snapshot: Snapshot) -> LeaseGuard {
        LeaseGuard {
            lease_id: self.lease_id.clone(),
            holder: holder.to_owned(),
            fence: snapshot.fence,
            expires_at: snapshot.expires_at,
            yield_requested_by: snapshot
                .yield_requested_by
                .filter(|requester| requester != holder),
        }
    }
}

/// The `Lost` error for `guard` given what the item looks like now.
pub(crate) fn lost(guard: &LeaseGuard, current: Option<&Snapshot>) -> LeaseError {
    let reason = match current {
        None => LostReason::Missing,
        Some(Snapshot { holder: None, .. }) => LostReason::Released,
        Some(Snapshot {
            holder: Some(holder),
            fence,
            ..
        }) => LostReason::TakenOver {
            holder: holder.clone(),
            fence: *fence,
        },
    };
    LeaseError::Lost {
        lease_id: guard.lease_id.clone(),
        fence: guard.fence,
        reason,
    }
}

/// Operation errors that can be a failed condition.
pub(crate) trait ConditionFailure {
    /// `Some(old item if returned)` when this is `ConditionalCheckFailedException`.
    fn condition_failed(&self) -> Option<Option<&HashMap<String, AttributeValue>>>;
}

impl ConditionFailure for aws_sdk_dynamodb::operation::update_item::UpdateItemError {
    fn condition_failed(&self) -> Option<Option<&HashMap<String, AttributeValue>>> {
        match self {
            Self::ConditionalCheckFailedException(failed) => Some(failed.item()),
            _ => None,
        }
    }
}

/// Error codes that mean "slow down" (also retried by the SDK before we see them).
const THROTTLING_CODES: [&str; 5] = [
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TransactionConflictException",
    "LimitExceededException",
];

/// A typed error from an SDK failure; network, timeout, throttling and 5xx are transient.
pub(crate) fn sdk_error<E>(operation: &'static str, table: &str, error: SdkError<E>) -> LeaseError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let code = error.code().map(str::to_owned);
    let server_error = error
        .raw_response()
        .is_some_and(|response| response.status().is_server_error());
    let transient = match &error {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(_) => {
            server_error
                || code.as_deref().is_some_and(|code| {
                    THROTTLING_CODES.contains(&code) || code == "InternalServerError"
                })
        }
        _ => false,
    };
    // A service answer has a short message; anything else (network, timeout) is described
    // with its whole source chain.
    let message = match (&error, error.message()) {
        (SdkError::ServiceError(_), Some(message)) => message.to_owned(),
        _ => DisplayErrorContext(&error).to_string(),
    };
    LeaseError::Dynamo {
        operation,
        table: table.to_owned(),
        code,
        message,
        transient,
    }
}

/// Builds the DynamoDB client for `cfg`: region, endpoint override, static credentials when
/// given (else the AWS credential chain), 3 attempts of at most 5 s each.
pub(crate) async fn client(cfg: &LeaseConfig) -> Client {
    use aws_config::retry::RetryConfig;
    use aws_config::timeout::TimeoutConfig;
    use aws_config::{BehaviorVersion, Region};
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(cfg.region.clone()))
        .retry_config(RetryConfig::standard().with_max_attempts(MAX_ATTEMPTS))
        .timeout_config(
            TimeoutConfig::builder()
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .build(),
        );
    if let (Some(id), Some(secret)) = (&cfg.access_key_id, &cfg.secret_access_key) {
        loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            id, secret, None, None, "static",
        ));
    }
    let shared = loader.load().await;
    let mut builder = aws_sdk_dynamodb::config::Builder::from(&shared);
    if let Some(endpoint) = &cfg.endpoint {
        builder = builder.endpoint_url(endpoint);
    }
    Client::from_conf(builder.build())
}

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> LeaseGuard {
        LeaseGuard {
            lease_id: "l".into(),
            holder: "me".into(),
            fence: 7,
            expires_at: 100,
            yield_requested_by: None,
        }
    }

    #[test]
    fn lost_reason_follows_the_current_item() {
        let reason = |current: Option<Snapshot>| match lost(&guard(), current.as_ref()) {
            LeaseError::Lost { reason, fence, .. } => {
                assert_eq!(fence, 7);
                reason
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(reason(None), LostReason::Missing);
        let released = Snapshot {
            holder: None,
            fence: 7,
            expires_at: 1,
            yield_requested_by: None,
        };
        assert_eq!(reason(Some(released)), LostReason::Released);
        let taken = Snapshot {
            holder: Some("peer".into()),
            fence: 8,
            expires_at: 1,
            yield_requested_by: None,
        };
        assert_eq!(
            reason(Some(taken)),
            LostReason::TakenOver {
                holder: "peer".into(),
                fence: 8
            }
        );
    }
}
