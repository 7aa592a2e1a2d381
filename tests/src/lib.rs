//! End-to-end tests across crates live in `e2e/` (one test binary, a module per flow). This
//! library is empty: the package exists only to hold those tests.
