use dq_segments::model::{ActiveWindow, LevelSample, StateChange, Ts};
use dq_segments::{segments, Error, Mechanism, SegmentsRequest, SignalSource, WindowSpec};

use crate::m;

#[derive(Debug, thiserror::Error)]
#[error("connection lost")]
struct Broken;

struct BrokenSource;

impl SignalSource for BrokenSource {
    type Error = Broken;
    fn windowed_signal_counts(
        &self,
        _: &str,
        _: Ts,
        _: Ts,
        _: WindowSpec,
    ) -> Result<Vec<ActiveWindow>, Broken> {
        Err(Broken)
    }
    fn level_samples(&self, _: &str, _: &str, _: Ts, _: Ts) -> Result<Vec<LevelSample>, Broken> {
        Err(Broken)
    }
    fn ignition_state_changes(&self, _: &str, _: Ts, _: Ts) -> Result<Vec<StateChange>, Broken> {
        Err(Broken)
    }
}

#[test]
fn source_errors_are_typed_and_keep_their_cause() {
    for mech in Mechanism::ALL {
        let req = SegmentsRequest::new("did", m(0), m(60), mech);
        let err = segments(&BrokenSource, &req, m(1000)).unwrap_err();
        assert!(matches!(err, Error::Source { .. }), "{mech}");
        assert!(err.as_validation().is_none());
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert_eq!(cause, "connection lost");
    }
}

#[test]
fn validation_runs_before_any_read() {
    let req = SegmentsRequest {
        limit: Some(0),
        ..SegmentsRequest::new("did", m(0), m(60), Mechanism::Refuel)
    };
    let err = segments(&BrokenSource, &req, m(1000)).unwrap_err();
    assert_eq!(
        err.as_validation(),
        Some(&dq_segments::ValidationError::Limit)
    );
}
