//! Issue 18 item 5: a client's `grpc-timeout` (up to 99999999 hours on the wire) is capped at
//! the server's maximum deadline; a shorter one is honoured.

use crate::{fixture, options, plain, request};
use std::time::Duration;
use tonic::Code;

/// `ListIndexes` on a server whose maximum deadline is `max`, with `grpc-timeout` set to
/// `timeout` when given.
fn list(max: Duration, timeout: Option<&str>) -> Result<usize, tonic::Status> {
    let f = fixture();
    let mut c = f.client(f.serve(f.api(true).with_max_deadline(max)));
    let mut r = request(plain::list_indexes(options(1), 10), None);
    if let Some(t) = timeout {
        r.metadata_mut().insert("grpc-timeout", t.parse().unwrap());
    }
    f.rt.block_on(c.list_indexes(r))
        .map(|r| r.into_inner().indexes.len())
}

#[test]
fn client_timeouts_are_capped_at_the_server_maximum() {
    // The longest timeout the wire format can carry does not lift the server's deadline.
    for asked in ["99999999H", "99999999S", "3600S"] {
        let e = list(Duration::from_nanos(1), Some(asked)).unwrap_err();
        assert_eq!(e.code(), Code::DeadlineExceeded, "{asked}: {e:?}");
    }
    // A shorter client timeout still applies under a generous maximum (tonic's own timeout
    // layer may answer it first, with CANCELLED).
    let e = list(Duration::from_secs(30), Some("1n")).unwrap_err();
    assert!(
        matches!(e.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{e:?}"
    );
    // And a call within both is answered.
    assert_eq!(list(Duration::from_secs(30), Some("20S")).unwrap(), 9);
}
