//! Value filters rendered as SQL predicates. Every literal is either a
//! finite float formatted by Rust or a quoted string, so no client text reaches SQL unquoted.

use crate::error::{Error, Result};
use dq_lake::quote;

/// `SignalFloatFilter`: leaves AND-ed, then `(base) OR (or1) OR …`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FloatFilter {
    /// `= v`
    pub eq: Option<f64>,
    /// `!= v`
    pub neq: Option<f64>,
    /// `> v`
    pub gt: Option<f64>,
    /// `< v`
    pub lt: Option<f64>,
    /// `>= v`
    pub gte: Option<f64>,
    /// `<= v`
    pub lte: Option<f64>,
    /// `NOT IN (…)` (ignored when empty)
    pub not_in: Vec<f64>,
    /// `IN (…)` (ignored when empty)
    pub in_: Vec<f64>,
    /// Alternatives OR-ed with the base.
    pub or: Vec<FloatFilter>,
}

/// A float literal DuckDB parses back to the same double (NaN/inf cannot come from GraphQL,
/// and are refused rather than rendered).
fn float_lit(v: f64) -> Result<String> {
    if v.is_finite() {
        Ok(format!("({v:?}::DOUBLE)"))
    } else {
        Err(Error::invalid("filter values must be finite"))
    }
}

fn list_lit(vs: &[f64]) -> Result<String> {
    let items = vs
        .iter()
        .map(|v| float_lit(*v))
        .collect::<Result<Vec<_>>>()?;
    Ok(items.join(", "))
}

/// Joins a base conjunction and rendered alternatives as `(base) OR (or…)`; `None` = no
/// restriction.
fn combine(base: Vec<String>, alternatives: Vec<Option<String>>) -> Option<String> {
    let mut parts = Vec::new();
    if !base.is_empty() {
        parts.push(format!("({})", base.join(" AND ")));
    }
    for alt in alternatives {
        // An empty alternative restricts nothing, so the whole disjunction is true.
        parts.push(alt?);
    }
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        // Parenthesized as a whole: callers AND it with other predicates.
        _ => Some(format!("({})", parts.join(" OR "))),
    }
}

impl FloatFilter {
    /// The predicate over `col`, or `None` when the filter restricts nothing.
    ///
    /// # Errors
    /// A non-finite value.
    pub fn sql(&self, col: &str) -> Result<Option<String>> {
        let mut base = Vec::new();
        for (op, v) in [
            ("=", self.eq),
            ("!=", self.neq),
            (">", self.gt),
            ("<", self.lt),
            (">=", self.gte),
            ("<=", self.lte),
        ] {
            if let Some(v) = v {
                base.push(format!("{col} {op} {}", float_lit(v)?));
            }
        }
        if !self.not_in.is_empty() {
            base.push(format!("{col} NOT IN ({})", list_lit(&self.not_in)?));
        }
        if !self.in_.is_empty() {
            base.push(format!("{col} IN ({})", list_lit(&self.in_)?));
        }
        let alts = self
            .or
            .iter()
            .map(|f| f.sql(col))
            .collect::<Result<Vec<_>>>()?;
        Ok(combine(base, alts))
    }
}

/// A point of a geofence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Degrees.
    pub latitude: f64,
    /// Degrees.
    pub longitude: f64,
}

/// `SignalLocationFilter`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LocationFilter {
    /// Polygon vertices (≥ 3), ring closed implicitly.
    pub in_polygon: Option<Vec<Point>>,
    /// `(center, radius_km)`; takes precedence over the polygon.
    pub in_circle: Option<(Point, f64)>,
}

/// Earth radius of the spatial extension's haversine helper, in metres.
pub const EARTH_RADIUS_M: f64 = 6_371_000.0;

fn check_point(p: &Point) -> Result<()> {
    let ok = p.latitude.is_finite()
        && p.longitude.is_finite()
        && (-90.0..=90.0).contains(&p.latitude)
        && (-180.0..=180.0).contains(&p.longitude);
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "invalid geofence point ({}, {}): latitude must be within [-90, 90] and longitude within [-180, 180]",
            p.latitude, p.longitude
        )))
    }
}

impl LocationFilter {
    /// Validates the geofence.
    ///
    /// # Errors
    /// BAD_REQUEST reasons.
    pub fn validate(&self) -> Result<()> {
        if let Some((center, radius)) = &self.in_circle {
            check_point(center)?;
            if !radius.is_finite() || *radius < 0.0 {
                return Err(Error::invalid(
                    "circle radius must be a finite, non-negative number",
                ));
            }
        }
        if let Some(poly) = &self.in_polygon {
            if !poly.is_empty() && poly.len() < 3 {
                return Err(Error::invalid("not enough points in geofence filter"));
            }
            poly.iter().try_for_each(check_point)?;
        }
        Ok(())
    }

    /// The predicate over `lat`/`lon` columns, or `None` when it restricts nothing.
    /// inCircle: haversine great-circle distance ≤ radius (inclusive). inPolygon: planar
    /// even-odd ring test in degrees (x = lon, y = lat) with boundary points excluded, as
    /// `ST_Contains` does.
    ///
    /// # Errors
    /// Invalid geofence (see [`LocationFilter::validate`]).
    pub fn sql(&self, lat: &str, lon: &str) -> Result<Option<String>> {
        self.validate()?;
        if let Some((c, radius_km)) = &self.in_circle {
            let (clat, clon) = (float_lit(c.latitude)?, float_lit(c.longitude)?);
            return Ok(Some(format!(
                "(2 * {EARTH_RADIUS_M:?} * asin(sqrt(pow(sin(radians({lat} - {clat}) / 2), 2) + \
                 cos(radians({clat})) * cos(radians({lat})) * pow(sin(radians({lon} - {clon}) / 2), 2))) \
                 <= {} * 1000)",
                float_lit(*radius_km)?
            )));
        }
        let Some(poly) = self.in_polygon.as_ref().filter(|p| p.len() >= 3) else {
            return Ok(None);
        };
        let mut crossings = Vec::new();
        let mut on_edge = Vec::new();
        for (i, a) in poly.iter().enumerate() {
            let b = poly.get((i + 1) % poly.len()).unwrap_or(a);
            let (xa, ya, xb, yb) = (
                float_lit(a.longitude)?,
                float_lit(a.latitude)?,
                float_lit(b.longitude)?,
                float_lit(b.latitude)?,
            );
            if a.latitude != b.latitude {
                crossings.push(format!(
                    "CASE WHEN (({ya} > {lat}) <> ({yb} > {lat})) AND \
                     ({lon} < ({xb} - {xa}) * ({lat} - {ya}) / ({yb} - {ya}) + {xa}) THEN 1 ELSE 0 END"
                ));
            }
            on_edge.push(format!(
                "(({xb} - {xa}) * ({lat} - {ya}) - ({yb} - {ya}) * ({lon} - {xa}) = 0 AND \
                 {lon} BETWEEN least({xa}, {xb}) AND greatest({xa}, {xb}) AND \
                 {lat} BETWEEN least({ya}, {yb}) AND greatest({ya}, {yb}))"
            ));
        }
        let inside = if crossings.is_empty() {
            "false".to_string()
        } else {
            format!("(({}) % 2 = 1)", crossings.join(" + "))
        };
        Ok(Some(format!(
            "({inside} AND NOT ({}))",
            on_edge.join(" OR ")
        )))
    }
}

/// `StringValueFilter` (events name/source).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StringFilter {
    /// `= v`
    pub eq: Option<String>,
    /// `!= v`
    pub neq: Option<String>,
    /// `NOT IN (…)`
    pub not_in: Vec<String>,
    /// `IN (…)`
    pub in_: Vec<String>,
    /// `LIKE '<prefix>%'`
    pub starts_with: Option<String>,
    /// Alternatives.
    pub or: Vec<StringFilter>,
}

fn str_list(vs: &[String]) -> String {
    vs.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", ")
}

impl StringFilter {
    /// The predicate over `col`, or `None`.
    pub fn sql(&self, col: &str) -> Option<String> {
        let mut base = Vec::new();
        if let Some(v) = &self.eq {
            base.push(format!("{col} = {}", quote(v)));
        }
        if let Some(v) = &self.neq {
            base.push(format!("{col} != {}", quote(v)));
        }
        if !self.not_in.is_empty() {
            base.push(format!("{col} NOT IN ({})", str_list(&self.not_in)));
        }
        if !self.in_.is_empty() {
            base.push(format!("{col} IN ({})", str_list(&self.in_)));
        }
        if let Some(p) = &self.starts_with {
            let escaped = p
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            base.push(format!(
                "{col} LIKE {} ESCAPE '\\'",
                quote(&format!("{escaped}%"))
            ));
        }
        combine(base, self.or.iter().map(|f| f.sql(col)).collect())
    }
}

/// `StringArrayFilter` over the events `tags` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayFilter {
    /// `list_has_any`
    pub contains_any: Vec<String>,
    /// `list_has_all`
    pub contains_all: Vec<String>,
    /// `NOT list_has_any`
    pub not_contains_any: Vec<String>,
    /// `NOT list_has_all`
    pub not_contains_all: Vec<String>,
    /// Alternatives.
    pub or: Vec<ArrayFilter>,
}

impl ArrayFilter {
    /// The predicate over the list column `col`, or `None`.
    pub fn sql(&self, col: &str) -> Option<String> {
        let mut base = Vec::new();
        let list = |vs: &[String]| format!("[{}]::VARCHAR[]", str_list(vs));
        for (neg, func, vs) in [
            ("", "list_has_any", &self.contains_any),
            ("", "list_has_all", &self.contains_all),
            ("NOT ", "list_has_any", &self.not_contains_any),
            ("NOT ", "list_has_all", &self.not_contains_all),
        ] {
            if !vs.is_empty() {
                base.push(format!("{neg}{func}({col}, {})", list(vs)));
            }
        }
        combine(base, self.or.iter().map(|f| f.sql(col)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_filter_or_semantics() {
        let f = FloatFilter {
            gt: Some(25.0),
            or: vec![FloatFilter {
                lt: Some(15.0),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            f.sql("v").unwrap().unwrap(),
            "((v > (25.0::DOUBLE)) OR (v < (15.0::DOUBLE)))"
        );
        assert_eq!(FloatFilter::default().sql("v").unwrap(), None);
    }

    #[test]
    fn starts_with_is_escaped() {
        let f = StringFilter {
            starts_with: Some("a_b%'".into()),
            ..Default::default()
        };
        assert_eq!(
            f.sql("name").unwrap(),
            "(name LIKE 'a\\_b\\%''%' ESCAPE '\\')"
        );
    }

    #[test]
    fn geofence_validation() {
        let two = LocationFilter {
            in_polygon: Some(vec![
                Point {
                    latitude: 0.0,
                    longitude: 0.0
                };
                2
            ]),
            in_circle: None,
        };
        assert_eq!(
            two.validate(),
            Err(Error::invalid("not enough points in geofence filter"))
        );
        let bad_radius = LocationFilter {
            in_polygon: None,
            in_circle: Some((
                Point {
                    latitude: 0.0,
                    longitude: 0.0,
                },
                -1.0,
            )),
        };
        assert!(bad_radius.validate().is_err());
    }
}
