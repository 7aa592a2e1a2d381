//! Acceptance 2: every aggregation, the float filter, both geofences, the source filter, dedup
//! and the half-open window, on a seeded vehicle, against values computed here in Rust (never
//! by the SQL under test).

use crate::*;
use serde_json::json;

const MINUTES: i64 = 60;
/// Bucket width of the tests: 10 minutes, aligned to `from` = at(0) (not to the wall clock).
const INTERVAL: i64 = 600;
const TYPES: [&str; 3] = ["HYBRID", "ELECTRIC", "COMBUSTION"];

fn speed(k: i64) -> f64 {
    ((k * 37) % 23) as f64 + 0.5
}

fn ptype(k: i64) -> &'static str {
    match k % 4 {
        0 => TYPES[0],
        1 => TYPES[1],
        _ => TYPES[2],
    }
}

fn coord(k: i64) -> (f64, f64, f64) {
    (
        10.0 + k as f64 / 100.0,
        20.0 + k as f64 / 100.0,
        k as f64 / 10.0,
    )
}

/// One sample a minute from exactly `from`, plus: a sample at exactly `to` (excluded), a
/// duplicate of minute 0 with a higher cloud-event id (loses dedup), another source's speeds
/// at other instants, and a (0,0) location (never aggregated).
fn seed_events(subject: &str) -> Vec<RawEvent> {
    let mut events = Vec::new();
    for k in 0..=MINUTES {
        let t = at(k * 60);
        let (lat, lon, hdop) = coord(k);
        events.push(status(
            subject,
            SOURCE,
            &format!("a-{k:03}"),
            t,
            vec![
                item("speed", t, json!(speed(k))),
                item("powertrainType", t, json!(ptype(k))),
                item(
                    "currentLocationCoordinates",
                    t,
                    json!({"latitude": lat, "longitude": lon, "hdop": hdop}),
                ),
            ],
        ));
    }
    events.push(status(
        subject,
        SOURCE,
        "z-dup",
        at(0),
        vec![item("speed", at(0), json!(999.0))],
    ));
    for k in 0..10 {
        let t = at(k * 60 + 30);
        events.push(status(
            subject,
            OTHER_SOURCE,
            &format!("b-{k:03}"),
            t,
            vec![item("speed", t, json!(1000.0 + k as f64))],
        ));
    }
    events.push(status(
        subject,
        SOURCE,
        "a-zero",
        at(12),
        vec![item(
            "currentLocationCoordinates",
            at(12),
            json!({"latitude": 0.0, "longitude": 0.0, "hdop": 1.0}),
        )],
    ));
    events
}

/// Samples (minute index) of source SOURCE in bucket `b` of [from, to).
fn bucket_minutes(b: i64) -> Vec<i64> {
    (0..MINUTES).filter(|k| (k * 60) / INTERVAL == b).collect()
}

fn query_signals(subject: &str, fields: &str, extra: &str) -> String {
    format!(
        r#"{{ signals(subject: "{subject}", interval: "10m", from: "{}", to: "{}"{extra}) {{ timestamp {fields} }} }}"#,
        rfc(at(0)),
        rfc(at(MINUTES * 60))
    )
}

/// The `signals` buckets of `fields`, from SOURCE's readings only.
async fn signals_from_source(fx: &Fixture, subject: &str, fields: &str) -> Value {
    let source = format!(r#", filter: {{source: "{SOURCE_DID}"}}"#);
    fx.data(subject, &query_signals(subject, fields, &source))
        .await
}

fn avg(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[tokio::test]
async fn aggregations_filters_and_geofences() {
    let subject = vehicle(7);
    let fx = fixture(&seed_events(&subject)).await;

    // ---- floats, strings, locations, aligned buckets, half-open window, source filter ----
    let fields = "avg: speed(agg: AVG) med: speed(agg: MED) max: speed(agg: MAX) min: speed(agg: MIN) \
        first: speed(agg: FIRST) last: speed(agg: LAST) rand: speed(agg: RAND) \
        top: powertrainType(agg: TOP) uniq: powertrainType(agg: UNIQUE) \
        sfirst: powertrainType(agg: FIRST) slast: powertrainType(agg: LAST) srand: powertrainType(agg: RAND) \
        lavg: currentLocationCoordinates(agg: AVG) { latitude longitude hdop } \
        lfirst: currentLocationCoordinates(agg: FIRST) { latitude longitude hdop } \
        llast: currentLocationCoordinates(agg: LAST) { latitude longitude hdop } \
        lrand: currentLocationCoordinates(agg: RAND) { latitude longitude hdop }";
    let data = signals_from_source(&fx, &subject, fields).await;
    let rows = data["signals"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "{data}");
    for (b, row) in rows.iter().enumerate() {
        let b = b as i64;
        assert_eq!(
            row["timestamp"],
            rfc(at(b * INTERVAL)),
            "buckets align to from"
        );
        let ks = bucket_minutes(b);
        let speeds: Vec<f64> = ks.iter().map(|k| speed(*k)).collect();
        assert!(close(f(&row["avg"]), avg(&speeds)), "bucket {b} avg {row}");
        assert!(close(f(&row["med"]), median(&speeds)));
        assert_eq!(
            f(&row["max"]),
            speeds.iter().cloned().fold(f64::MIN, f64::max)
        );
        assert_eq!(
            f(&row["min"]),
            speeds.iter().cloned().fold(f64::MAX, f64::min)
        );
        assert_eq!(
            f(&row["first"]),
            speeds[0],
            "dedup: the lower cloud-event id wins"
        );
        assert_eq!(f(&row["last"]), *speeds.last().unwrap());
        assert!(speeds.contains(&f(&row["rand"])));

        let types: Vec<&str> = ks.iter().map(|k| ptype(*k)).collect();
        let count = |t: &str| types.iter().filter(|x| **x == t).count();
        let top = TYPES.iter().max_by_key(|t| count(t)).unwrap();
        assert_eq!(row["top"], *top);
        let mut uniq: Vec<&str> = types.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(row["uniq"], uniq.join(","));
        assert_eq!(row["sfirst"], types[0]);
        assert_eq!(row["slast"], *types.last().unwrap());
        assert!(types.contains(&row["srand"].as_str().unwrap()));

        let coords: Vec<(f64, f64, f64)> = ks.iter().map(|k| coord(*k)).collect();
        let lavg = &row["lavg"];
        assert!(close(
            f(&lavg["latitude"]),
            avg(&coords.iter().map(|c| c.0).collect::<Vec<_>>())
        ));
        assert!(close(
            f(&lavg["longitude"]),
            avg(&coords.iter().map(|c| c.1).collect::<Vec<_>>())
        ));
        assert!(close(
            f(&lavg["hdop"]),
            avg(&coords.iter().map(|c| c.2).collect::<Vec<_>>())
        ));
        assert_eq!(
            f(&row["lfirst"]["latitude"]),
            coords[0].0,
            "(0,0) fixes never aggregate"
        );
        assert_eq!(f(&row["llast"]["longitude"]), coords.last().unwrap().1);
        let rand = (
            f(&row["lrand"]["latitude"]),
            f(&row["lrand"]["longitude"]),
            f(&row["lrand"]["hdop"]),
        );
        assert!(
            coords.contains(&rand),
            "RAND takes one row for all components"
        );
    }

    // ---- no source filter: the other source's readings count too ----
    let data = fx
        .data(
            &subject,
            &query_signals(&subject, "max: speed(agg: MAX)", ""),
        )
        .await;
    assert_eq!(f(&data["signals"][0]["max"]), 1009.0);
    assert_eq!(data["signals"].as_array().unwrap().len(), 6);

    // ---- float filter: (base) OR (or…), in / notIn / eq ----
    let fields = "orf: speed(agg: AVG, filter: {gt: 15, or: [{lt: 3}]}) \
        inf: speed(agg: MAX, filter: {in: [0.5, 1.5, 2.5]}) \
        notin: speed(agg: MIN, filter: {notIn: [0.5, 1.5], lte: 10}) \
        eqf: speed(agg: LAST, filter: {eq: 12.5})";
    let data = signals_from_source(&fx, &subject, fields).await;
    for row in data["signals"].as_array().unwrap() {
        let b = (chrono::DateTime::parse_from_rfc3339(row["timestamp"].as_str().unwrap())
            .unwrap()
            .timestamp()
            - at(0).timestamp())
            / INTERVAL;
        let speeds: Vec<f64> = bucket_minutes(b).iter().map(|k| speed(*k)).collect();
        let pick =
            |p: &dyn Fn(f64) -> bool| speeds.iter().cloned().filter(|v| p(*v)).collect::<Vec<_>>();
        let orf = pick(&|v| !(3.0..=15.0).contains(&v));
        match orf.is_empty() {
            true => assert!(row["orf"].is_null()),
            false => assert!(close(f(&row["orf"]), avg(&orf)), "{row}"),
        }
        let inf = pick(&|v| [0.5, 1.5, 2.5].contains(&v));
        assert_eq!(
            row["inf"].as_f64(),
            inf.iter().cloned().reduce(f64::max),
            "{row}"
        );
        let notin = pick(&|v| ![0.5, 1.5].contains(&v) && v <= 10.0);
        assert_eq!(
            row["notin"].as_f64(),
            notin.iter().cloned().reduce(f64::min),
            "{row}"
        );
        let eqf = pick(&|v| v == 12.5);
        assert_eq!(row["eqf"].as_f64(), eqf.last().copied(), "{row}");
    }

    // ---- geofences over the whole hour in one bucket ----
    let one_bucket = |fields: &str| {
        format!(
            r#"{{ signals(subject: "{subject}", interval: "1h", from: "{}", to: "{}") {{ {fields} }} }}"#,
            rfc(at(0)),
            rfc(at(MINUTES * 60))
        )
    };
    let all: Vec<(f64, f64, f64)> = (0..MINUTES).map(coord).collect();
    // Circle: haversine on a 6 371 km sphere, inclusive; the radius is exactly the distance
    // to minute 20's fix, which must be included.
    let (clat, clon) = (10.3, 20.3);
    let radius_km = haversine_m(clat, clon, coord(20).0, coord(20).1) / 1000.0;
    let inside: Vec<_> = all
        .iter()
        .filter(|c| haversine_m(clat, clon, c.0, c.1) <= radius_km * 1000.0)
        .cloned()
        .collect();
    assert!(
        inside.contains(&coord(20)) && inside.contains(&coord(40)) && !inside.contains(&coord(19))
    );
    // Polygon: a square whose corners are minute 10 and minute 30 fixes: those lie on the
    // boundary and are excluded; minutes 11..=29 are inside.
    let (lo, hi) = (coord(10), coord(30));
    let square = [(lo.0, lo.1), (lo.0, hi.1), (hi.0, hi.1), (hi.0, lo.1)];
    let in_square: Vec<_> = all
        .iter()
        .filter(|c| point_in_ring(c.0, c.1, &square))
        .cloned()
        .collect();
    assert_eq!(in_square.first(), Some(&coord(11)));
    assert_eq!(in_square.last(), Some(&coord(29)));
    let poly: Vec<String> = square
        .iter()
        .map(|(la, lo)| format!("{{latitude: {la:?}, longitude: {lo:?}}}"))
        .collect();
    let fields = format!(
        "circle: currentLocationCoordinates(agg: AVG, filter: {{inCircle: {{center: {{latitude: {clat:?}, longitude: {clon:?}}}, radius: {radius_km:?}}}}}) {{ latitude longitude }} \
         cfirst: currentLocationCoordinates(agg: FIRST, filter: {{inCircle: {{center: {{latitude: {clat:?}, longitude: {clon:?}}}, radius: {radius_km:?}}}}}) {{ latitude }} \
         poly: currentLocationCoordinates(agg: AVG, filter: {{inPolygon: [{p}]}}) {{ latitude longitude }} \
         pfirst: currentLocationCoordinates(agg: FIRST, filter: {{inPolygon: [{p}]}}) {{ latitude }} \
         plast: currentLocationCoordinates(agg: LAST, filter: {{inPolygon: [{p}]}}) {{ latitude }} \
         both: currentLocationCoordinates(agg: FIRST, filter: {{inPolygon: [{p}], inCircle: {{center: {{latitude: {clat:?}, longitude: {clon:?}}}, radius: {radius_km:?}}}}}) {{ latitude }}",
        p = poly.join(", ")
    );
    let data = fx.data(&subject, &one_bucket(&fields)).await;
    let row = &data["signals"][0];
    assert!(close(
        f(&row["circle"]["latitude"]),
        avg(&inside.iter().map(|c| c.0).collect::<Vec<_>>())
    ));
    assert!(close(
        f(&row["circle"]["longitude"]),
        avg(&inside.iter().map(|c| c.1).collect::<Vec<_>>())
    ));
    assert_eq!(
        f(&row["cfirst"]["latitude"]),
        inside[0].0,
        "boundary point included"
    );
    assert!(close(
        f(&row["poly"]["latitude"]),
        avg(&in_square.iter().map(|c| c.0).collect::<Vec<_>>())
    ));
    assert_eq!(
        f(&row["pfirst"]["latitude"]),
        coord(11).0,
        "boundary vertex excluded"
    );
    assert_eq!(f(&row["plast"]["latitude"]), coord(29).0);
    assert_eq!(
        f(&row["both"]["latitude"]),
        inside[0].0,
        "inCircle takes precedence"
    );

    // ---- approximate location: H3 res-6 centre of the aggregate ----
    let data = fx
        .data(
            &subject,
            &one_bucket(
                "currentLocationApproximateCoordinates(agg: FIRST) { latitude longitude hdop }",
            ),
        )
        .await;
    let approx = &data["signals"][0]["currentLocationApproximateCoordinates"];
    assert_eq!(f(&approx["hdop"]), coord(0).2);
    assert!((f(&approx["latitude"]) - coord(0).0).abs() < 0.1);
    assert_ne!(f(&approx["latitude"]), coord(0).0);

    // ---- null vs empty: no rows → null; nothing aggregated selected → null ----
    let data = fx
        .data(
            &vehicle(8),
            &query_signals(&vehicle(8), "speed(agg: AVG)", ""),
        )
        .await;
    assert!(data["signals"].is_null());
    let data = fx.data(&subject, &query_signals(&subject, "", "")).await;
    assert!(data["signals"].is_null());

    // ---- validation: BAD_REQUEST shapes, interval parse error ----
    let token = fx.token(&subject, &ALL);
    let q = format!(
        r#"{{ signals(subject: "{subject}", interval: "1us", from: "{}", to: "{}") {{ speed(agg: AVG) }} }}"#,
        rfc(at(0)),
        rfc(at(MINUTES * 60))
    );
    let (_, body) = fx.gql(Some(&token), &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "invalid argument: interval too small for the requested window (exceeds the aggregation bucket limit)"
    );
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_REQUEST");
    assert_eq!(
        body["errors"][0]["extensions"]["reason"],
        "Internal Server Error"
    );
    let q = q.replace("1us", "1d");
    let (_, body) = fx.gql(Some(&token), &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "failed parsing interval: time: unknown unit \"d\" in duration \"1d\""
    );
    let q = query_signals(
        &subject,
        "speed(agg: AVG)",
        r#", filter: {source: "0xabc"}"#,
    );
    let (_, body) = fx.gql(Some(&token), &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "invalid argument: source '0xabc' is not a valid ethr DID"
    );
    let q = one_bucket("currentLocationCoordinates(agg: AVG, filter: {inPolygon: [{latitude: 1, longitude: 1}, {latitude: 2, longitude: 2}]}) { latitude }");
    let (_, body) = fx.gql(Some(&token), &q).await;
    assert_eq!(
        body["errors"][0]["message"],
        "invalid argument: not enough points in geofence filter"
    );
}

/// Great-circle distance in metres on a 6 371 km sphere (the spatial extension's helper).
fn haversine_m(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = (lat2 - lat1).to_radians();
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * 6_371_000.0 * a.sqrt().asin()
}

/// Planar even-odd test (x = lon, y = lat), boundary excluded (`ST_Contains`).
fn point_in_ring(lat: f64, lon: f64, ring: &[(f64, f64)]) -> bool {
    let n = ring.len();
    let mut inside = false;
    for i in 0..n {
        let (ya, xa) = ring[i];
        let (yb, xb) = ring[(i + 1) % n];
        let cross = (xb - xa) * (lat - ya) - (yb - ya) * (lon - xa);
        let within =
            lon >= xa.min(xb) && lon <= xa.max(xb) && lat >= ya.min(yb) && lat <= ya.max(yb);
        if cross == 0.0 && within {
            return false;
        }
        if (ya > lat) != (yb > lat) && lon < (xb - xa) * (lat - ya) / (yb - ya) + xa {
            inside = !inside;
        }
    }
    inside
}
