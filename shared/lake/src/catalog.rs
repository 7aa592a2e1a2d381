//! Catalog DSN classification and the ATTACH targets derived from it. Both din and dq must derive
//! exactly the same strings: the `meta` side database is found by the same rule on both sides.

use std::path::{Path, PathBuf};

/// Where the DuckLake catalog lives.
#[derive(Clone, PartialEq, Eq)]
pub enum Catalog {
    /// A DuckDB file catalog; `meta` lives beside it in `<path>.progress.db`.
    File(PathBuf),
    /// A PostgreSQL catalog, as a raw libpq DSN with `connect_timeout` ensured.
    Postgres(String),
}

impl std::fmt::Debug for Catalog {
    // The PostgreSQL DSN may hold a password: never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Catalog::File(p) => write!(f, "File({})", p.display()),
            Catalog::Postgres(_) => write!(f, "Postgres(<dsn>)"),
        }
    }
}

/// The connect timeout (seconds) appended to a PostgreSQL DSN that has none, as din does.
pub const CONNECT_TIMEOUT_SECS: u32 = 10;

impl Catalog {
    /// Classifies a catalog DSN the way din does: `postgres://`, `postgresql://`, or any DSN
    /// containing `host=` or `dbname=` is PostgreSQL; anything else is a file path. An optional
    /// `ducklake:` / `ducklake:postgres:` prefix is accepted and stripped.
    pub fn parse(dsn: &str) -> Catalog {
        let dsn = dsn.trim();
        let dsn = dsn.strip_prefix("ducklake:").unwrap_or(dsn);
        let (dsn, forced_pg) = match dsn.strip_prefix("postgres:") {
            Some(rest) if !rest.starts_with("//") => (rest, true),
            _ => (dsn, false),
        };
        if forced_pg || is_postgres_dsn(dsn) {
            Catalog::Postgres(with_connect_timeout(dsn))
        } else {
            Catalog::File(PathBuf::from(dsn))
        }
    }

    /// True for a PostgreSQL catalog.
    pub fn is_postgres(&self) -> bool {
        matches!(self, Catalog::Postgres(_))
    }

    /// The DuckLake URI used in `ATTACH '<uri>' AS lake`.
    pub fn uri(&self) -> String {
        match self {
            Catalog::File(path) => format!("ducklake:{}", path.display()),
            Catalog::Postgres(dsn) => format!("ducklake:postgres:{dsn}"),
        }
    }

    /// The ATTACH target of the `meta` side database, and whether it is a PostgreSQL one.
    pub fn meta_target(&self) -> (String, bool) {
        match self {
            Catalog::File(path) => (format!("{}.progress.db", path.display()), false),
            Catalog::Postgres(dsn) => (dsn.clone(), true),
        }
    }

    /// The parent directory a file catalog needs (DuckDB will not create it).
    pub fn parent_dir(&self) -> Option<&Path> {
        match self {
            Catalog::File(path) => path.parent().filter(|p| !p.as_os_str().is_empty()),
            Catalog::Postgres(_) => None,
        }
    }

    /// The password inside a PostgreSQL DSN, so it can be registered for redaction.
    pub fn password(&self) -> Option<String> {
        match self {
            Catalog::File(_) => None,
            Catalog::Postgres(dsn) => dsn_password(dsn),
        }
    }
}

fn is_postgres_dsn(dsn: &str) -> bool {
    dsn.starts_with("postgres://")
        || dsn.starts_with("postgresql://")
        || dsn.contains("host=")
        || dsn.contains("dbname=")
}

/// Appends `connect_timeout=10` unless the DSN already sets one (`?`/`&` for the URL form, a
/// space for the keyword form).
pub fn with_connect_timeout(dsn: &str) -> String {
    if dsn.contains("connect_timeout") {
        return dsn.to_owned();
    }
    if dsn.starts_with("postgres://") || dsn.starts_with("postgresql://") {
        let sep = if dsn.contains('?') { '&' } else { '?' };
        format!("{dsn}{sep}connect_timeout={CONNECT_TIMEOUT_SECS}")
    } else {
        format!("{dsn} connect_timeout={CONNECT_TIMEOUT_SECS}")
    }
}

/// `dsn` with its host replaced by `host` (an RDS Proxy endpoint in front of the same database):
/// the `host` keyword (or URL host list, keeping the first entry's port) becomes `host`, and a
/// `hostaddr`, which would bypass the new name, is dropped. `host` must be a validated hostname
/// ([`crate::config::is_hostname`]): it is spliced in unquoted.
pub fn with_host(dsn: &str, host: &str) -> String {
    if let Some((scheme, rest)) = dsn
        .split_once("://")
        .filter(|_| dsn.starts_with("postgres://") || dsn.starts_with("postgresql://"))
    {
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let first = hosts.split(',').next().unwrap_or("");
        let port = match first.strip_prefix('[') {
            Some(v6) => v6.split_once("]:").map(|(_, port)| port),
            None => first.split_once(':').map(|(_, port)| port),
        };
        let mut out = format!("{scheme}://");
        if let Some(userinfo) = userinfo {
            out.push_str(userinfo);
            out.push('@');
        }
        out.push_str(host);
        if let Some(port) = port.filter(|p| !p.is_empty()) {
            out.push(':');
            out.push_str(port);
        }
        let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
        out.push_str(path);
        let params: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty() && !is_host_key(p.split('=').next().unwrap_or("")))
            .collect();
        if !params.is_empty() {
            out.push('?');
            out.push_str(&params.join("&"));
        }
        return out;
    }
    let mut parts = vec![format!("host={host}")];
    parts.extend(
        keyword_segments(dsn)
            .into_iter()
            .filter(|seg| !is_host_key(seg.split('=').next().unwrap_or("")))
            .map(str::to_owned),
    );
    parts.join(" ")
}

fn is_host_key(key: &str) -> bool {
    let key = key.trim();
    key.eq_ignore_ascii_case("host") || key.eq_ignore_ascii_case("hostaddr")
}

/// The `key=value` segments of a libpq keyword DSN, each as written (spaces around `=` and
/// single-quoted values with backslash escapes kept).
fn keyword_segments(dsn: &str) -> Vec<&str> {
    let b = dsn.as_bytes();
    let ws = |i: usize| b.get(i).is_some_and(u8::is_ascii_whitespace);
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while ws(i) {
            i += 1;
        }
        if i >= b.len() {
            return out;
        }
        let start = i;
        while b
            .get(i)
            .is_some_and(|&c| !c.is_ascii_whitespace() && c != b'=')
        {
            i += 1;
        }
        let mut j = i;
        while ws(j) {
            j += 1;
        }
        if b.get(j) == Some(&b'=') {
            i = j + 1;
            while ws(i) {
                i += 1;
            }
            if b.get(i) == Some(&b'\'') {
                i += 1;
                while let Some(&c) = b.get(i) {
                    match c {
                        b'\\' => i += 2,
                        b'\'' => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
            } else {
                while i < b.len() && !ws(i) {
                    i += 1;
                }
            }
        }
        i = i.min(b.len());
        out.push(&dsn[start..i]);
    }
}

/// Extracts the password of a keyword or URL DSN (best effort; used only for redaction).
fn dsn_password(dsn: &str) -> Option<String> {
    if let Some(rest) = dsn.split("://").nth(1) {
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            if let Some((_, pass)) = userinfo.split_once(':') {
                return Some(pass.to_owned()).filter(|p| !p.is_empty());
            }
        }
        return None;
    }
    dsn.split_whitespace()
        .find_map(|kv| kv.strip_prefix("password="))
        .map(|p| p.trim_matches('\'').to_owned())
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_like_din() {
        assert!(Catalog::parse("postgres://u@h/db").is_postgres());
        assert!(Catalog::parse("postgresql://u@h/db").is_postgres());
        assert!(Catalog::parse("host=h user=u").is_postgres());
        assert!(Catalog::parse("dbname=x").is_postgres());
        assert!(Catalog::parse("ducklake:postgres:host=h").is_postgres());
        assert_eq!(
            Catalog::parse("/tmp/x/lake.ducklake"),
            Catalog::File("/tmp/x/lake.ducklake".into())
        );
        assert_eq!(
            Catalog::parse("ducklake:/tmp/x/lake.ducklake"),
            Catalog::File("/tmp/x/lake.ducklake".into())
        );
    }

    #[test]
    fn appends_connect_timeout_once() {
        assert_eq!(
            with_connect_timeout("postgres://h/db"),
            "postgres://h/db?connect_timeout=10"
        );
        assert_eq!(
            with_connect_timeout("postgres://h/db?sslmode=disable"),
            "postgres://h/db?sslmode=disable&connect_timeout=10"
        );
        assert_eq!(with_connect_timeout("host=h"), "host=h connect_timeout=10");
        assert_eq!(
            with_connect_timeout("host=h connect_timeout=3"),
            "host=h connect_timeout=3"
        );
    }

    #[test]
    fn replaces_the_host_of_a_keyword_dsn() {
        assert_eq!(
            with_host(
                "host=db.internal port=5432 dbname=x password='a b\\' host=c'",
                "proxy.rds"
            ),
            "host=proxy.rds port=5432 dbname=x password='a b\\' host=c'"
        );
        assert_eq!(
            with_host("dbname=x hostaddr=10.0.0.1 host = old user=u", "p"),
            "host=p dbname=x user=u"
        );
        assert_eq!(with_host("dbname=x", "p"), "host=p dbname=x");
    }

    #[test]
    fn replaces_the_host_of_a_url_dsn() {
        assert_eq!(
            with_host(
                "postgresql://u:p%40ss@db:6543/dq?sslmode=require",
                "proxy.rds"
            ),
            "postgresql://u:p%40ss@proxy.rds:6543/dq?sslmode=require"
        );
        assert_eq!(
            with_host("postgres://a:5432,b:5433/dq?host=c&sslmode=disable", "p"),
            "postgres://p:5432/dq?sslmode=disable"
        );
        assert_eq!(
            with_host("postgres://u@[::1]:7/d", "p"),
            "postgres://u@p:7/d"
        );
        assert_eq!(with_host("postgresql://db", "p"), "postgresql://p");
    }

    #[test]
    fn derives_attach_targets() {
        let file = Catalog::parse("/d/lake.ducklake");
        assert_eq!(file.uri(), "ducklake:/d/lake.ducklake");
        assert_eq!(
            file.meta_target(),
            ("/d/lake.ducklake.progress.db".into(), false)
        );
        assert_eq!(file.parent_dir(), Some(Path::new("/d")));
        let pg = Catalog::parse("host=h password=pw");
        assert_eq!(
            pg.uri(),
            "ducklake:postgres:host=h password=pw connect_timeout=10"
        );
        assert_eq!(
            pg.meta_target(),
            ("host=h password=pw connect_timeout=10".into(), true)
        );
        assert_eq!(pg.password().as_deref(), Some("pw"));
        assert_eq!(
            Catalog::parse("postgresql://u:p%40ss@h:1/db")
                .password()
                .as_deref(),
            Some("p%40ss")
        );
        assert_eq!(format!("{pg:?}"), "Postgres(<dsn>)");
    }
}
