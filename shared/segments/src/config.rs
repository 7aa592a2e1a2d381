//! `SegmentConfig`: SDL defaults, default injection and range checks, as the Go service applies them.
//!
//! Two layers of defaults exist and a port must keep both:
//! - **SDL defaults** (300/240/10/1000/15): injected for every field the client omitted when it
//!   sent a `config` object at all ([`SegmentConfigInput::materialize`]);
//! - **detector defaults**: used when `config` is absent or a field is explicitly `null`
//!   ([`SegmentConfig`] field is `None`); REFUEL (30 %) and RECHARGE (60 s, 1 %) differ here.

use serde::{Deserialize, Serialize};

use crate::error::ValidationError;
use crate::model::Mechanism;

/// SDL default of `maxGapSeconds` and the detector default.
pub const DEFAULT_MAX_GAP_SECONDS: i32 = 300;
/// SDL default of `minSegmentDurationSeconds` and the default of every detector but RECHARGE.
pub const DEFAULT_MIN_SEGMENT_DURATION_SECONDS: i32 = 240;
/// SDL default of `signalCountThreshold` and the FREQUENCY_ANALYSIS default.
pub const DEFAULT_SIGNAL_COUNT_THRESHOLD: i32 = 10;
/// SDL default of `maxIdleRpm` and the IDLING default.
pub const DEFAULT_MAX_IDLE_RPM: i32 = 1000;
/// SDL default of `minIncreasePercent` (the detectors' own defaults differ: 30 and 1).
pub const DEFAULT_MIN_INCREASE_PERCENT: i32 = 15;

/// Accepted `maxGapSeconds` range, checked when the field is non-null.
pub const MAX_GAP_SECONDS_RANGE: (i32, i32) = (60, 3600);
/// Accepted `minSegmentDurationSeconds` range.
pub const MIN_SEGMENT_DURATION_SECONDS_RANGE: (i32, i32) = (60, 3600);
/// Accepted `signalCountThreshold` range.
pub const SIGNAL_COUNT_THRESHOLD_RANGE: (i32, i32) = (1, 3600);
/// Accepted `maxIdleRpm` range (checked for IDLING only).
pub const MAX_IDLE_RPM_RANGE: (i32, i32) = (300, 3000);
/// Accepted `minIncreasePercent` range (checked for REFUEL and RECHARGE only).
pub const MIN_INCREASE_PERCENT_RANGE: (i32, i32) = (1, 100);

/// The resolver-side `SegmentConfig`: `None` = field absent from the resolved input (explicit
/// `null`), so the detector's own default applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentConfig {
    /// Largest gap between readings/windows inside one segment, seconds.
    pub max_gap_seconds: Option<i32>,
    /// Shortest segment kept, seconds.
    pub min_segment_duration_seconds: Option<i32>,
    /// FREQUENCY_ANALYSIS: rows per 60 s window for the window to count as active.
    pub signal_count_threshold: Option<i32>,
    /// IDLING: highest engine speed still counted as idle.
    pub max_idle_rpm: Option<i32>,
    /// REFUEL/RECHARGE: minimum rise, percent.
    pub min_increase_percent: Option<i32>,
}

impl SegmentConfig {
    /// A config object with every field at its SDL default (what `config: {}` resolves to).
    pub const SDL_DEFAULTS: SegmentConfig = SegmentConfig {
        max_gap_seconds: Some(DEFAULT_MAX_GAP_SECONDS),
        min_segment_duration_seconds: Some(DEFAULT_MIN_SEGMENT_DURATION_SECONDS),
        signal_count_threshold: Some(DEFAULT_SIGNAL_COUNT_THRESHOLD),
        max_idle_rpm: Some(DEFAULT_MAX_IDLE_RPM),
        min_increase_percent: Some(DEFAULT_MIN_INCREASE_PERCENT),
    };

    /// The range checks, in Go's order; only non-null fields are checked, and
    /// `maxIdleRpm` / `minIncreasePercent` only for the mechanisms that use them.
    pub fn validate(&self, mechanism: Mechanism) -> Result<(), ValidationError> {
        check("maxGapSeconds", self.max_gap_seconds, MAX_GAP_SECONDS_RANGE)?;
        check(
            "minSegmentDurationSeconds",
            self.min_segment_duration_seconds,
            MIN_SEGMENT_DURATION_SECONDS_RANGE,
        )?;
        check(
            "signalCountThreshold",
            self.signal_count_threshold,
            SIGNAL_COUNT_THRESHOLD_RANGE,
        )?;
        if mechanism == Mechanism::Idling {
            check("maxIdleRpm", self.max_idle_rpm, MAX_IDLE_RPM_RANGE)?;
        }
        if matches!(mechanism, Mechanism::Refuel | Mechanism::Recharge) {
            check(
                "minIncreasePercent",
                self.min_increase_percent,
                MIN_INCREASE_PERCENT_RANGE,
            )?;
        }
        Ok(())
    }
}

fn check(
    field: &'static str,
    value: Option<i32>,
    (min, max): (i32, i32),
) -> Result<(), ValidationError> {
    match value {
        Some(v) if v < min || v > max => Err(ValidationError::OutOfRange { field, min, max }),
        _ => Ok(()),
    }
}

/// A GraphQL input field as the wire has it: omitted, explicitly `null`, or a value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InputValue<T> {
    /// The field was not sent: the SDL default is injected.
    #[default]
    Absent,
    /// The field was sent as `null`: no default, the detector's own default applies.
    Null,
    /// The field was sent with a value.
    Value(T),
}

impl<T> InputValue<T> {
    fn or_sdl_default(self, default: T) -> Option<T> {
        match self {
            InputValue::Absent => Some(default),
            InputValue::Null => None,
            InputValue::Value(v) => Some(v),
        }
    }
}

/// A `SegmentConfig` object exactly as sent. The GraphQL layer builds this only when the
/// `config` argument is present (a missing or `null` `config` is `Option::None` upstream).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentConfigInput {
    /// `maxGapSeconds`.
    pub max_gap_seconds: InputValue<i32>,
    /// `minSegmentDurationSeconds`.
    pub min_segment_duration_seconds: InputValue<i32>,
    /// `signalCountThreshold`.
    pub signal_count_threshold: InputValue<i32>,
    /// `maxIdleRpm`.
    pub max_idle_rpm: InputValue<i32>,
    /// `minIncreasePercent`.
    pub min_increase_percent: InputValue<i32>,
}

impl SegmentConfigInput {
    /// gqlgen's default injection: omitted fields take their SDL default, explicit
    /// `null`s stay unset.
    pub fn materialize(self) -> SegmentConfig {
        SegmentConfig {
            max_gap_seconds: self.max_gap_seconds.or_sdl_default(DEFAULT_MAX_GAP_SECONDS),
            min_segment_duration_seconds: self
                .min_segment_duration_seconds
                .or_sdl_default(DEFAULT_MIN_SEGMENT_DURATION_SECONDS),
            signal_count_threshold: self
                .signal_count_threshold
                .or_sdl_default(DEFAULT_SIGNAL_COUNT_THRESHOLD),
            max_idle_rpm: self.max_idle_rpm.or_sdl_default(DEFAULT_MAX_IDLE_RPM),
            min_increase_percent: self
                .min_increase_percent
                .or_sdl_default(DEFAULT_MIN_INCREASE_PERCENT),
        }
    }
}

/// `maxGapSeconds` / `minSegmentDurationSeconds` under the detectors' own defaults (used when
/// `config` is absent or the field is `null`): 300 s / 240 s, RECHARGE's minimum duration 60 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseConfig {
    /// Largest gap inside one segment, seconds (`maxGapSeconds ?? 300`).
    pub max_gap_seconds: i64,
    /// Shortest segment kept, seconds (`minSegmentDurationSeconds ??` the mechanism's default).
    pub min_duration_seconds: i64,
}

impl BaseConfig {
    /// Resolves `config` under the detector defaults of `mechanism`.
    pub fn resolve(mechanism: Mechanism, config: Option<&SegmentConfig>) -> Self {
        let default_min_duration = match mechanism {
            Mechanism::Recharge => crate::detect::recharge::DEFAULT_MIN_DURATION_SECONDS,
            _ => i64::from(DEFAULT_MIN_SEGMENT_DURATION_SECONDS),
        };
        BaseConfig {
            max_gap_seconds: i64::from(
                config
                    .and_then(|c| c.max_gap_seconds)
                    .unwrap_or(DEFAULT_MAX_GAP_SECONDS),
            ),
            min_duration_seconds: config
                .and_then(|c| c.min_segment_duration_seconds)
                .map_or(default_min_duration, i64::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_gets_every_sdl_default() {
        assert_eq!(
            SegmentConfigInput::default().materialize(),
            SegmentConfig::SDL_DEFAULTS
        );
    }

    #[test]
    fn explicit_null_skips_the_sdl_default() {
        let input = SegmentConfigInput {
            min_increase_percent: InputValue::Null,
            max_gap_seconds: InputValue::Value(120),
            ..Default::default()
        };
        let c = input.materialize();
        assert_eq!(c.min_increase_percent, None);
        assert_eq!(c.max_gap_seconds, Some(120));
        assert_eq!(c.min_segment_duration_seconds, Some(240));
    }

    #[test]
    fn base_config_defaults_and_overrides() {
        assert_eq!(
            BaseConfig::resolve(Mechanism::Idling, None),
            BaseConfig {
                max_gap_seconds: 300,
                min_duration_seconds: 240
            }
        );
        assert_eq!(
            BaseConfig::resolve(Mechanism::Recharge, None),
            BaseConfig {
                max_gap_seconds: 300,
                min_duration_seconds: 60
            }
        );
        let c = SegmentConfig {
            max_gap_seconds: Some(120),
            min_segment_duration_seconds: Some(60),
            ..Default::default()
        };
        assert_eq!(
            BaseConfig::resolve(Mechanism::Refuel, Some(&c)),
            BaseConfig {
                max_gap_seconds: 120,
                min_duration_seconds: 60
            }
        );
    }

    #[test]
    fn range_checks_follow_the_mechanism() {
        let rpm = SegmentConfig {
            max_idle_rpm: Some(100),
            ..Default::default()
        };
        assert!(rpm.validate(Mechanism::FrequencyAnalysis).is_ok());
        assert_eq!(
            rpm.validate(Mechanism::Idling).unwrap_err().to_string(),
            "maxIdleRpm must be between 300 and 3000"
        );
        let pct = SegmentConfig {
            min_increase_percent: Some(0),
            ..Default::default()
        };
        assert!(pct.validate(Mechanism::Idling).is_ok());
        assert_eq!(
            pct.validate(Mechanism::Recharge).unwrap_err().to_string(),
            "minIncreasePercent must be between 1 and 100"
        );
        let gap = SegmentConfig {
            max_gap_seconds: Some(59),
            ..Default::default()
        };
        assert_eq!(
            gap.validate(Mechanism::IgnitionDetection)
                .unwrap_err()
                .to_string(),
            "maxGapSeconds must be between 60 and 3600"
        );
        for (field, c) in [
            (
                "minSegmentDurationSeconds",
                SegmentConfig {
                    min_segment_duration_seconds: Some(3601),
                    ..Default::default()
                },
            ),
            (
                "signalCountThreshold",
                SegmentConfig {
                    signal_count_threshold: Some(0),
                    ..Default::default()
                },
            ),
        ] {
            assert!(c
                .validate(Mechanism::IgnitionDetection)
                .unwrap_err()
                .to_string()
                .starts_with(field));
        }
        assert!(SegmentConfig::SDL_DEFAULTS
            .validate(Mechanism::Idling)
            .is_ok());
        assert!(SegmentConfig::SDL_DEFAULTS
            .validate(Mechanism::Refuel)
            .is_ok());
    }
}
