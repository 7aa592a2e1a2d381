//! dq's post-processing of decoded signals: the vehicle gate, future and
//! duplicate pruning, the latitude/longitude/HDOP merge, the finite filter and µs truncation.
//!
//! Every step is a pure function of its input (and an injected `now`), so each rule is tested
//! on its own below.

use crate::error::DecodeError;
use crate::model::{Signal, SignalValue};
use crate::modules::v2::vendor_names as vn;
use chrono::{DateTime, TimeDelta, Utc};
use dq_cloudevent::Erc721Did;

/// Signals further than this past the decode clock are dropped (din's default skew, which dq
/// hard-codes).
pub const ALLOWABLE_TIME_SKEW: TimeDelta = TimeDelta::minutes(5);

/// A lat/lon/HDOP triple spans at most this long from its first member.
pub const COORDINATE_WINDOW: TimeDelta = TimeDelta::milliseconds(500);

/// Which subjects' `dimo.status` rows are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VehicleGate {
    /// `DIMO_REGISTRY_CHAIN_ID` (137 in production).
    pub chain_id: u64,
    /// `VEHICLE_NFT_ADDRESS`; the zero address disables the gate (tests only).
    pub vehicle_contract: [u8; 20],
}

/// Why the gate refused a subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateRejection {
    /// The subject is not a `did:erc721` DID.
    NotAnNftDid,
    /// Another chain.
    WrongChain(u64),
    /// Another contract (a device NFT, a synthetic device, another registry).
    WrongContract,
}

impl GateRejection {
    /// A stable, machine-readable reason.
    pub fn reason(&self) -> &'static str {
        match self {
            GateRejection::NotAnNftDid => "not_an_nft_did",
            GateRejection::WrongChain(_) => "wrong_chain",
            GateRejection::WrongContract => "wrong_contract",
        }
    }
}

impl VehicleGate {
    /// A gate that lets everything through.
    pub const DISABLED: VehicleGate = VehicleGate {
        chain_id: 0,
        vehicle_contract: [0; 20],
    };

    /// Accepts `subject` only when it is `did:erc721:<chain_id>:<vehicle contract>:<token>`.
    /// The contract is compared as bytes, so its hex case does not matter.
    pub fn check(&self, subject: &str) -> Result<(), GateRejection> {
        if self.vehicle_contract == [0; 20] {
            return Ok(());
        }
        let (chain_id, contract) =
            Erc721Did::parse_chain_and_contract(subject).map_err(|_| GateRejection::NotAnNftDid)?;
        if chain_id != self.chain_id {
            return Err(GateRejection::WrongChain(chain_id));
        }
        if contract != self.vehicle_contract {
            return Err(GateRejection::WrongContract);
        }
        Ok(())
    }
}

/// Result of post-processing one event's signals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Processed {
    /// Signals to store, timestamps truncated to µs.
    pub signals: Vec<Signal>,
    /// Logged-only drops: future timestamps, invalid or unpaired coordinates.
    pub warnings: Vec<DecodeError>,
    /// Non-finite values; these mark the raw event as failed.
    pub non_finite: Vec<DecodeError>,
}

/// Runs prune → coordinate merge → finite filter → µs truncation.
pub fn process_signals(signals: Vec<Signal>, now: DateTime<Utc>) -> Processed {
    if signals.is_empty() {
        return Processed::default();
    }
    let (signals, mut warnings) = prune_future_and_duplicates(signals, now);
    let (signals, merge_warnings) = merge_coordinates(signals);
    warnings.extend(merge_warnings);
    let (mut signals, non_finite) = drop_non_finite(signals);
    for s in &mut signals {
        s.timestamp = truncate_micros(s.timestamp);
    }
    Processed {
        signals,
        warnings,
        non_finite,
    }
}

pub use dq_cloudevent::time::truncate_micros;

fn sort_by_time_then_name(signals: &mut [Signal]) {
    // Stable, so among equal (timestamp, name) the input order is kept.
    signals.sort_by(|a, b| {
        a.timestamp
            .cmp(&b.timestamp)
            .then_with(|| a.name.cmp(b.name))
    });
}

/// Sorts by (timestamp, name), drops signals more than [`ALLOWABLE_TIME_SKEW`] after `now`, and
/// of several signals with the same name and instant keeps the LAST in input order.
///
/// Go sorts unstably here; for small batches its insertion sort keeps input order, which a
/// stable sort reproduces deterministically.
pub fn prune_future_and_duplicates(
    mut signals: Vec<Signal>,
    now: DateTime<Utc>,
) -> (Vec<Signal>, Vec<DecodeError>) {
    sort_by_time_then_name(&mut signals);
    let limit = now + ALLOWABLE_TIME_SKEW;
    let mut warnings = Vec::new();
    // In-place compaction: slot `kept` trails `i`, so `signals[i + 1]` is still the original
    // successor when `i` is judged.
    let mut kept = 0;
    for i in 0..signals.len() {
        let Some(s) = signals.get(i) else { break };
        let keep = if s.timestamp > limit {
            warnings.push(DecodeError::FutureTimestamp {
                name: s.name,
                timestamp: s.timestamp,
            });
            false
        } else {
            !signals
                .get(i + 1)
                .is_some_and(|next| next.name == s.name && next.timestamp == s.timestamp)
        };
        if keep {
            signals.swap(kept, i);
            kept += 1;
        }
    }
    signals.truncate(kept);
    (signals, warnings)
}

/// The open lat/lon/HDOP triple: indices into the sorted signal list.
#[derive(Default)]
struct Triple {
    lat: Option<usize>,
    lon: Option<usize>,
    hdop: Option<usize>,
    start: Option<DateTime<Utc>>,
}

/// A coordinate merge over the sorted signals: the open triple and what closed ones produced.
struct Merge<'a> {
    signals: &'a [Signal],
    open: Triple,
    /// Signals folded into a triple (dropped from the output).
    consumed: Vec<bool>,
    /// The locations closed triples made.
    created: Vec<Signal>,
    warnings: Vec<DecodeError>,
}

/// Folds AutoPi/HashDog `currentLocationLatitude`, `currentLocationLongitude` and
/// `dimoAftermarketHDOP` into `currentLocationCoordinates`.
///
/// A triple closes when a signal arrives [`COORDINATE_WINDOW`] or more after its first member,
/// when a slot it already holds arrives again, or at the end. On close, a valid lat/lon pair
/// (finite, in range, not (0,0)) becomes a location stamped with the triple's start, carrying
/// the HDOP if one was seen. Every member is consumed either way.
///
/// This follows din's D6 fix, not dq's Go port: HDOP alone, or HDOP with an invalid or
/// unpaired lat/lon, emits **no** location (dq's port writes a (0,0, hdop) row there).
/// Locations decoded directly by a module pass through untouched.
pub fn merge_coordinates(mut signals: Vec<Signal>) -> (Vec<Signal>, Vec<DecodeError>) {
    sort_by_time_then_name(&mut signals);
    let is_member = |s: &Signal| {
        matches!(
            s.name,
            vn::CURRENT_LOCATION_LATITUDE
                | vn::CURRENT_LOCATION_LONGITUDE
                | vn::DIMO_AFTERMARKET_HDOP
        )
    };
    if !signals.iter().any(is_member) {
        return (signals, Vec::new());
    }
    let mut merge = Merge {
        signals: &signals,
        open: Triple::default(),
        consumed: vec![false; signals.len()],
        created: Vec::new(),
        warnings: Vec::new(),
    };
    for (i, signal) in signals.iter().enumerate() {
        let ts = signal.timestamp;
        if merge
            .open
            .start
            .is_some_and(|start| ts - start >= COORDINATE_WINDOW)
        {
            merge.close();
        }
        let slot: fn(&mut Triple) -> &mut Option<usize> = match signal.name {
            vn::CURRENT_LOCATION_LATITUDE => |t: &mut Triple| &mut t.lat,
            vn::CURRENT_LOCATION_LONGITUDE => |t: &mut Triple| &mut t.lon,
            vn::DIMO_AFTERMARKET_HDOP => |t: &mut Triple| &mut t.hdop,
            _ => continue,
        };
        if slot(&mut merge.open).is_some() {
            merge.close();
        }
        *slot(&mut merge.open) = Some(i);
        merge.open.start.get_or_insert(ts);
    }
    merge.close();
    let Merge {
        consumed,
        created,
        warnings,
        ..
    } = merge;
    let mut gone = consumed.into_iter();
    signals.retain(|_| !gone.next().unwrap_or(false));
    signals.extend(created);
    (signals, warnings)
}

impl Merge<'_> {
    /// Closes the open triple: its members are consumed, a valid lat/lon pair becomes a location.
    fn close(&mut self) {
        let triple = std::mem::take(&mut self.open);
        let Some(start) = triple.start else { return };
        let number = |i: usize| {
            self.signals
                .get(i)
                .and_then(Signal::as_number)
                .unwrap_or(f64::NAN)
        };
        for i in [triple.lat, triple.lon, triple.hdop].into_iter().flatten() {
            if let Some(c) = self.consumed.get_mut(i) {
                *c = true;
            }
        }
        match (triple.lat, triple.lon) {
            (Some(lat), Some(lon)) => {
                let (lat, lon) = (number(lat), number(lon));
                if valid_lat_lon(lat, lon) {
                    let hdop = triple.hdop.map_or(0.0, number);
                    self.created.push(Signal::location(start, lat, lon, hdop));
                } else {
                    self.warnings.push(DecodeError::InvalidCoordinates {
                        latitude: lat,
                        longitude: lon,
                        timestamp: start,
                    });
                }
            }
            (Some(_), None) => self.warnings.push(DecodeError::UnpairedCoordinate {
                name: vn::CURRENT_LOCATION_LATITUDE,
                timestamp: start,
            }),
            (None, Some(_)) => self.warnings.push(DecodeError::UnpairedCoordinate {
                name: vn::CURRENT_LOCATION_LONGITUDE,
                timestamp: start,
            }),
            // HDOP alone is consumed silently (din D6).
            (None, None) => {}
        }
    }
}

/// Finite, inside WGS-84 bounds (inclusive) and not the (0,0) "null island".
pub fn valid_lat_lon(lat: f64, lon: f64) -> bool {
    lat.is_finite()
        && lon.is_finite()
        && !(lat == 0.0 && lon == 0.0)
        && (-90.0..=90.0).contains(&lat)
        && (-180.0..=180.0).contains(&lon)
}

/// Drops signals whose number or location parts are NaN or ±Inf (they cannot be stored).
pub fn drop_non_finite(mut signals: Vec<Signal>) -> (Vec<Signal>, Vec<DecodeError>) {
    let mut errors = Vec::new();
    signals.retain(|s| {
        let finite = match &s.value {
            SignalValue::Number(v) => v.is_finite(),
            SignalValue::String(_) => true,
            SignalValue::Location(l) => [l.latitude, l.longitude, l.hdop, l.heading]
                .iter()
                .all(|v| v.is_finite()),
        };
        if !finite {
            errors.push(DecodeError::NonFinite { name: s.name });
        }
        finite
    });
    (signals, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Location;
    use dq_cloudevent::time::parse_rfc3339;
    use dq_signals::names as n;

    fn t(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_713_460_846_000 + ms).unwrap()
    }

    fn num(name: &'static str, ms: i64, v: f64) -> Signal {
        Signal::number(name, t(ms), v)
    }

    fn lat(ms: i64, v: f64) -> Signal {
        num(vn::CURRENT_LOCATION_LATITUDE, ms, v)
    }

    fn lon(ms: i64, v: f64) -> Signal {
        num(vn::CURRENT_LOCATION_LONGITUDE, ms, v)
    }

    fn hdop(ms: i64, v: f64) -> Signal {
        num(vn::DIMO_AFTERMARKET_HDOP, ms, v)
    }

    fn locations(signals: &[Signal]) -> Vec<(DateTime<Utc>, Location)> {
        signals
            .iter()
            .filter_map(|s| match s.value {
                SignalValue::Location(l) => Some((s.timestamp, l)),
                _ => None,
            })
            .collect()
    }

    fn loc(latitude: f64, longitude: f64, hdop: f64) -> Location {
        Location {
            latitude,
            longitude,
            hdop,
            heading: 0.0,
        }
    }

    const VEHICLE: &str = "0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF";

    fn gate() -> VehicleGate {
        VehicleGate {
            chain_id: 137,
            vehicle_contract: dq_cloudevent::did::parse_address(VEHICLE).unwrap(),
        }
    }

    #[test]
    fn gate_accepts_vehicles_on_the_configured_chain_any_case() {
        assert_eq!(gate().check(&format!("did:erc721:137:{VEHICLE}:1")), Ok(()));
        assert_eq!(
            gate().check(&format!("did:erc721:137:{}:1", VEHICLE.to_lowercase())),
            Ok(())
        );
    }

    #[test]
    fn gate_rejections() {
        assert_eq!(
            gate().check(&format!("did:erc721:80002:{VEHICLE}:1")),
            Err(GateRejection::WrongChain(80002))
        );
        assert_eq!(
            gate().check("did:erc721:137:0x9c94C395cBcBDe662235E0A9d3bB87Ad708561BA:1"),
            Err(GateRejection::WrongContract)
        );
        for malformed in [
            "",
            "did:erc721:137:0xbA57:1",
            &format!("did:nft:137:{VEHICLE}_1"),
            "vehicle",
        ] {
            assert_eq!(
                gate().check(malformed),
                Err(GateRejection::NotAnNftDid),
                "{malformed}"
            );
        }
        assert_eq!(VehicleGate::DISABLED.check("anything"), Ok(()));
        assert_eq!(GateRejection::WrongChain(1).reason(), "wrong_chain");
    }

    #[test]
    fn future_signals_are_dropped_relative_to_now() {
        let now = t(0);
        let (kept, warnings) = prune_future_and_duplicates(
            vec![
                num(n::SPEED, 300_000, 1.0),
                num(n::SPEED, 300_001, 2.0),
                num(n::SPEED, -86_400_000, 3.0),
            ],
            now,
        );
        assert_eq!(
            kept.iter().map(|s| s.as_number()).collect::<Vec<_>>(),
            [Some(3.0), Some(1.0)]
        );
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].reason(), "future_timestamp");
    }

    #[test]
    fn duplicates_keep_the_last_in_input_order() {
        let (kept, _) = prune_future_and_duplicates(
            vec![
                num(n::SPEED, 0, 1.0),
                num(n::POWERTRAIN_RANGE, 0, 9.0),
                num(n::SPEED, 0, 2.0),
                num(n::SPEED, 1, 3.0),
            ],
            t(0),
        );
        let got: Vec<_> = kept.iter().map(|s| (s.name, s.as_number())).collect();
        assert_eq!(
            got,
            [
                (n::POWERTRAIN_RANGE, Some(9.0)),
                (n::SPEED, Some(2.0)),
                (n::SPEED, Some(3.0))
            ]
        );
    }

    #[test]
    fn merge_full_triple() {
        let (out, warnings) = merge_coordinates(vec![
            hdop(0, 1.4),
            lat(0, 56.27),
            lon(0, -56.5),
            num(n::SPEED, 0, 39.0),
        ]);
        assert!(warnings.is_empty());
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].name, n::SPEED);
        assert_eq!(locations(&out), [(t(0), loc(56.27, -56.5, 1.4))]);
    }

    #[test]
    fn merge_triple_split_at_500ms() {
        // 499 ms after the first member still joins; exactly 500 ms starts a new triple.
        let (out, _) = merge_coordinates(vec![lat(0, 10.0), lon(499, 20.0), hdop(499, 1.0)]);
        assert_eq!(locations(&out), [(t(0), loc(10.0, 20.0, 1.0))]);
        let (out, warnings) = merge_coordinates(vec![lat(0, 10.0), lon(200, 20.0), hdop(500, 1.0)]);
        assert_eq!(locations(&out), [(t(0), loc(10.0, 20.0, 0.0))]);
        assert!(warnings.is_empty(), "the HDOP-only second triple is silent");
        let (out, warnings) = merge_coordinates(vec![lat(0, 10.0), lon(500, 20.0)]);
        assert!(locations(&out).is_empty());
        assert_eq!(
            warnings.iter().map(DecodeError::reason).collect::<Vec<_>>(),
            ["unpaired_coordinate"; 2]
        );
        // An unrelated signal arriving late also closes the window.
        let (out, _) =
            merge_coordinates(vec![lat(0, 10.0), num(n::SPEED, 600, 1.0), lon(601, 20.0)]);
        assert!(locations(&out).is_empty());
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn merge_second_lat_while_pending() {
        let (out, warnings) = merge_coordinates(vec![lat(0, 10.0), lat(100, 11.0), lon(100, 21.0)]);
        assert_eq!(locations(&out), [(t(100), loc(11.0, 21.0, 0.0))]);
        assert_eq!(warnings.len(), 1, "the first latitude is unpaired");
        assert!(out
            .iter()
            .all(|s| s.name == n::CURRENT_LOCATION_COORDINATES));
    }

    #[test]
    fn merge_invalid_pairs_emit_nothing() {
        for (la, lo) in [
            (0.0, 0.0),
            (90.001, 1.0),
            (1.0, -180.001),
            (f64::NAN, 1.0),
            (1.0, f64::INFINITY),
        ] {
            let (out, warnings) = merge_coordinates(vec![lat(0, la), lon(0, lo), hdop(0, 2.0)]);
            assert!(out.is_empty(), "({la},{lo}) consumed without a location");
            assert_eq!(warnings[0].reason(), "invalid_coordinates");
        }
        let (out, _) = merge_coordinates(vec![lat(0, 90.0), lon(0, -180.0)]);
        assert_eq!(
            locations(&out),
            [(t(0), loc(90.0, -180.0, 0.0))],
            "bounds are inclusive"
        );
    }

    #[test]
    fn merge_hdop_only_emits_no_location() {
        let (out, warnings) = merge_coordinates(vec![hdop(0, 1.5), num(n::SPEED, 0, 1.0)]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name, n::SPEED);
        assert!(warnings.is_empty());
    }

    #[test]
    fn direct_locations_pass_through() {
        let direct = Signal::location(t(0), 0.0, 0.0, 0.0);
        let (out, warnings) = merge_coordinates(vec![direct.clone()]);
        assert_eq!((out, warnings), (vec![direct], vec![]));
    }

    #[test]
    fn non_finite_values_are_dropped() {
        let (kept, errors) = drop_non_finite(vec![
            num(n::SPEED, 0, f64::NAN),
            num(n::SPEED, 1, f64::NEG_INFINITY),
            Signal::location(t(0), 1.0, f64::INFINITY, 0.0),
            num(n::SPEED, 2, 1.0),
            Signal::string(n::POWERTRAIN_TYPE, t(0), "NaN"),
        ]);
        assert_eq!(kept.len(), 2);
        assert_eq!(errors.len(), 3);
        assert!(errors.iter().all(|e| e.reason() == "non_finite_value"));
    }

    #[test]
    fn process_truncates_to_micros() {
        let ts = parse_rfc3339("2025-03-03T22:22:59.138863102Z").unwrap();
        let p = process_signals(vec![Signal::location(ts, 1.0, 2.0, 0.0)], ts);
        assert_eq!(
            p.signals[0].timestamp,
            parse_rfc3339("2025-03-03T22:22:59.138863Z").unwrap()
        );
    }
}
