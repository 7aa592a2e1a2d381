//! GraphiQL at `/` (and every other path the router does not name): one self-contained page with
//! GraphiQL 3, React 18 and their CSS inlined (`assets/graphiql/`, fetched and pinned by
//! `scripts/graphiql-assets.sh`), so it works offline, in a VPC without egress and under any stage
//! or custom-domain prefix without extra API Gateway routes.
//!
//! The page treats its own URL as the API root: it sends queries to `<page path>/query`, so `/`
//! talks to `/query` and `/prod` or `/prod/` to `/prod/query`. `?token=<jwt>` in the page URL
//! prefills the `Authorization` header (then leaves the address bar, so it is not kept in history
//! or bookmarks); the title and logo name the dialect.
//!
//! The page of a dialect is built once per process: its Content-Security-Policy names each inline
//! script by its SHA-256, and a gzip copy is served to clients that accept it.

use crate::Dialect;
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::sync::LazyLock;

const CSS: &str = include_str!("../assets/graphiql/graphiql.min.css");
const REACT: &str = include_str!("../assets/graphiql/react.production.min.js");
const REACT_DOM: &str = include_str!("../assets/graphiql/react-dom.production.min.js");
const GRAPHIQL: &str = include_str!("../assets/graphiql/graphiql.min.js");

/// The page's own script: endpoint, token prefill, default query, render.
const INIT: &str = include_str!("../assets/graphiql/init.js");

/// Styles the page needs around GraphiQL's own.
const PAGE_CSS: &str = "html,body,#graphiql{height:100%;margin:0;overflow:hidden}";

/// A dialect's page, built once.
struct Page {
    html: String,
    gzip: Vec<u8>,
    csp: HeaderValue,
    etag: HeaderValue,
}

static DQ: LazyLock<Page> = LazyLock::new(|| Page::build(Dialect::Dq));
static TELEMETRY: LazyLock<Page> = LazyLock::new(|| Page::build(Dialect::Telemetry));
static FETCH: LazyLock<Page> = LazyLock::new(|| Page::build(Dialect::Fetch));

fn page(dialect: Dialect) -> &'static Page {
    match dialect {
        Dialect::Dq => &DQ,
        Dialect::Telemetry => &TELEMETRY,
        Dialect::Fetch => &FETCH,
    }
}

fn sha256_b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()))
}

impl Page {
    fn build(dialect: Dialect) -> Page {
        let name = dialect.name();
        let scripts = [REACT, REACT_DOM, GRAPHIQL, INIT];
        let mut html = String::with_capacity(
            CSS.len() + scripts.iter().map(|s| s.len()).sum::<usize>() + 1024,
        );
        html.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        html.push_str(
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"referrer\" content=\"no-referrer\">\n",
        );
        // `name` is one of three fixed identifiers: nothing to escape.
        html.push_str(&format!("<title>GraphiQL · dq, {name} dialect</title>\n"));
        for css in [CSS, PAGE_CSS] {
            html.push_str("<style>");
            html.push_str(css);
            html.push_str("</style>\n");
        }
        html.push_str(&format!(
            "</head>\n<body>\n<div id=\"graphiql\" data-dialect=\"{name}\">Loading GraphiQL…</div>\n"
        ));
        for script in scripts {
            html.push_str("<script>");
            html.push_str(script);
            html.push_str("</script>\n");
        }
        html.push_str("</body>\n</html>\n");

        let script_hashes: Vec<String> = scripts
            .iter()
            .map(|s| format!("'sha256-{}'", sha256_b64(s)))
            .collect();
        // Scripts: exactly the four inline ones, by hash. Styles: 'unsafe-inline', because
        // GraphiQL's dialogs (react-remove-scroll) insert a <style> element whose text varies at
        // run time, which no hash can name; a style cannot run script. Fonts and images are the
        // CSS's data: URLs; the only request the page makes is to `/query` on its own origin.
        let csp = format!(
            "default-src 'none'; script-src {}; style-src 'self' 'unsafe-inline'; \
             img-src 'self' data:; font-src 'self' data:; connect-src 'self'; \
             base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            script_hashes.join(" ")
        );
        let etag = format!("\"{}\"", &sha256_b64(&html)[..27]);
        let mut encoder =
            flate2::write::GzEncoder::new(Vec::with_capacity(html.len() / 3), Default::default());
        // Writing into a Vec cannot fail.
        let gzip = encoder
            .write_all(html.as_bytes())
            .and_then(|()| encoder.finish())
            .unwrap_or_default();
        Page {
            html,
            gzip,
            csp: HeaderValue::from_str(&csp)
                .unwrap_or(HeaderValue::from_static("default-src 'none'")),
            etag: HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"graphiql\"")),
        }
    }
}

/// Whether `Accept-Encoding` admits gzip (listed, or `*`, without `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            (coding.eq_ignore_ascii_case("gzip") || coding == "*")
                && parts.all(|p| {
                    let p = p.trim();
                    let q = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q="));
                    q.is_none_or(|q| q.trim().parse::<f32>().is_ok_and(|q| q > 0.0))
                })
        })
}

/// Whether `If-None-Match` names the page's entity tag (or `*`).
fn not_modified(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    let etag = etag.as_bytes();
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t.as_bytes() == etag)
}

/// The page of `dialect` for a request with `headers`.
pub fn response(dialect: Dialect, headers: &HeaderMap) -> Response {
    let page = page(dialect);
    let gzip = accepts_gzip(headers) && !page.gzip.is_empty();
    let (status, body) = if not_modified(headers, &page.etag) {
        (StatusCode::NOT_MODIFIED, Body::empty())
    } else if gzip {
        (StatusCode::OK, Body::from(page.gzip.as_slice()))
    } else {
        (StatusCode::OK, Body::from(page.html.as_str()))
    };
    let mut response = (status, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CONTENT_SECURITY_POLICY, page.csp.clone());
    h.insert(header::ETAG, page.etag.clone());
    // Revalidate every time: a deploy changes the page under the same URL.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if gzip && status == StatusCode::OK {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn committed_assets_match_the_lock() {
        let lock = include_str!("../assets/graphiql/assets.lock");
        let files: [(&str, &str); 4] = [
            ("graphiql.min.css", CSS),
            ("react.production.min.js", REACT),
            ("react-dom.production.min.js", REACT_DOM),
            ("graphiql.min.js", GRAPHIQL),
        ];
        for (file, text) in files {
            let want = lock
                .lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .find(|f| f.len() == 6 && f[4] == file)
                .map(|f| f[5].to_string())
                .unwrap_or_else(|| panic!("{file} is not in assets.lock"));
            let got: String = Sha256::digest(text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(got, want, "{file} differs from assets.lock");
        }
    }

    /// An asset must not end its element early: no `</script` in a script, no `</style` in a
    /// style, and no `<!--` that a `<script` follows before `-->` (HTML's double-escaped state,
    /// where `</script>` no longer closes).
    #[test]
    fn assets_can_be_inlined() {
        for (name, text) in [
            ("react", REACT),
            ("react-dom", REACT_DOM),
            ("graphiql", GRAPHIQL),
            ("init", INIT),
        ] {
            let lower = text.to_ascii_lowercase();
            assert!(!lower.contains("</script"), "{name} contains </script");
            let mut rest = lower.as_str();
            while let Some(at) = rest.find("<!--") {
                rest = &rest[at + 4..];
                let end = rest.find("-->").unwrap_or(rest.len());
                assert!(
                    !rest[..end].contains("<script"),
                    "{name}: <script after <!--"
                );
            }
        }
        for css in [CSS, PAGE_CSS] {
            assert!(!css.to_ascii_lowercase().contains("</style"));
        }
    }

    #[test]
    fn page_names_the_dialect_and_hashes_every_script() {
        for dialect in Dialect::ALL {
            let page = page(dialect);
            let title = format!("<title>GraphiQL · dq, {} dialect</title>", dialect.name());
            assert!(page.html.contains(&title), "{title}");
            let csp = page.csp.to_str().unwrap();
            // Every inline script of the served HTML, as the browser delimits it (up to the next
            // `</script`), is allowed.
            let mut scripts = 0;
            let mut rest = page.html.as_str();
            while let Some(start) = rest.find("<script>") {
                let body = &rest[start + "<script>".len()..];
                let end = body.find("</script>").expect("a closed script");
                let hash = format!("'sha256-{}'", sha256_b64(&body[..end]));
                assert!(csp.contains(&hash), "script {scripts} not in the CSP");
                scripts += 1;
                rest = &body[end..];
            }
            assert_eq!(scripts, 4);
            assert_eq!(csp.matches("'sha256-").count(), 4, "{csp}");
            assert!(!csp.contains("unsafe-eval") && csp.contains("connect-src 'self'"));
            // Nothing loads from elsewhere: no external script, stylesheet or import.
            assert!(!page.html.contains("<script src") && !page.html.contains("<link"));
            assert!(!CSS.contains("@import"));
            let mut unzipped = String::new();
            flate2::read::GzDecoder::new(page.gzip.as_slice())
                .read_to_string(&mut unzipped)
                .unwrap();
            assert_eq!(unzipped, page.html);
        }
    }

    #[test]
    fn gzip_only_when_accepted() {
        for (accept, want) in [
            (None, false),
            (Some("gzip"), true),
            (Some("br, gzip;q=0.5"), true),
            (Some("GZIP"), true),
            (Some("*"), true),
            (Some("gzip;q=0"), false),
            (Some("gzip; q=0.000, br"), false),
            (Some("identity"), false),
            (Some("deflate, br"), false),
        ] {
            let h = match accept {
                Some(v) => headers(&[("accept-encoding", v)]),
                None => HeaderMap::new(),
            };
            assert_eq!(accepts_gzip(&h), want, "{accept:?}");
        }
    }

    #[test]
    fn response_headers_and_revalidation() {
        let plain = response(Dialect::Telemetry, &HeaderMap::new());
        assert_eq!(plain.status(), StatusCode::OK);
        let h = plain.headers();
        assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert!(h.get(header::CONTENT_ENCODING).is_none());
        assert!(h[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .starts_with("default-src 'none'; script-src 'sha256-"));
        let etag = h[header::ETAG].to_str().unwrap().to_string();

        let zipped = response(Dialect::Telemetry, &headers(&[("accept-encoding", "gzip")]));
        assert_eq!(zipped.headers()[header::CONTENT_ENCODING], "gzip");

        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, HeaderValue::from_str(&etag).unwrap());
        assert_eq!(
            response(Dialect::Telemetry, &again).status(),
            StatusCode::NOT_MODIFIED
        );
        let other = headers(&[("if-none-match", "\"something-else\"")]);
        assert_eq!(
            response(Dialect::Telemetry, &other).status(),
            StatusCode::OK
        );
        // Each dialect's page is its own entity.
        assert_ne!(
            response(Dialect::Dq, &HeaderMap::new()).headers()[header::ETAG],
            etag.as_str()
        );
    }
}
