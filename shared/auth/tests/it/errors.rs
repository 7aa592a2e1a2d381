//! One typed error, one code, every surface's text.

use dq_auth::{AuthError, Check, ErrorCode, Permission, Surface, TokenRejection};

#[test]
fn codes_map_once_to_every_transport() {
    let table = [
        (ErrorCode::Unauthenticated, "UNAUTHENTICATED", 401, 16),
        (ErrorCode::Forbidden, "FORBIDDEN", 403, 7),
        (
            ErrorCode::MalformedCredentials,
            "MALFORMED_CREDENTIALS",
            500,
            16,
        ),
        (ErrorCode::Unavailable, "UNAVAILABLE", 503, 14),
        (ErrorCode::Internal, "INTERNAL", 500, 13),
    ];
    for (code, name, http, grpc) in table {
        assert_eq!(
            (code.as_str(), code.http_status(), code.grpc_code()),
            (name, http, grpc)
        );
    }
}

#[test]
fn missing_credentials_texts() {
    let cases = [
        (Check::Directive, Surface::Dq, "unauthorized: jwt missing"),
        (
            Check::Directive,
            Surface::Telemetry,
            "unauthorized: jwt missing",
        ),
        (
            Check::SubjectAccess,
            Surface::Dq,
            "unauthorized: no token claims",
        ),
        (
            Check::SubjectAccess,
            Surface::Fetch,
            "unauthorized: no token claims",
        ),
        (Check::SubjectAccess, Surface::Grpc, "no token claims"),
        (Check::BearerRequired, Surface::Grpc, "missing bearer token"),
    ];
    for (check, surface, text) in cases {
        let e = AuthError::MissingCredentials { check };
        assert_eq!(e.message(surface), text, "{check:?} {surface:?}");
        assert_eq!(e.code(), ErrorCode::Unauthenticated);
    }
}

#[test]
fn attestation_grants_carry_unauthorized_code_in_telemetry_only() {
    let e = AuthError::GrantDenied;
    assert_eq!(e.message(Surface::Telemetry), "invalid claims");
    assert_eq!(
        e.graphql_extension_code(Surface::Telemetry),
        Some("UNAUTHORIZED")
    );
    let others = [
        AuthError::MissingPrivilege {
            missing: Permission::GetRawData,
        },
        AuthError::SubjectMismatch,
        AuthError::InvalidToken(TokenRejection::Expired),
    ];
    for e in others {
        for s in [Surface::Dq, Surface::Telemetry, Surface::Fetch] {
            assert_eq!(e.graphql_extension_code(s), None);
        }
    }
}

#[test]
fn display_is_lowercase_dq_text() {
    assert_eq!(
        AuthError::MissingRawDataAccess.to_string(),
        "unauthorized: token does not have required permission for this operation"
    );
    assert_eq!(
        AuthError::InvalidToken(TokenRejection::Audience).to_string(),
        "invalid token: wrong audience"
    );
}
