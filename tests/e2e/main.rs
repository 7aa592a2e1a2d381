//! End-to-end flows across crates. One module per flow:
//! - `raw_contract`: what the din simulator stores is what the decoders accept.

mod raw_contract;
