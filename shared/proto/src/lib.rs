//! The FetchService wire contract: the `grpc` and `cloudevent` protobuf packages of fetch-api, with
//! every message and field number unchanged so existing clients keep working.

/// Package `cloudevent`: the event and its header.
pub mod cloudevent {
    tonic::include_proto!("cloudevent");
}

/// Package `grpc`: `grpc.FetchService` and its messages.
pub mod grpc {
    tonic::include_proto!("grpc");
}
