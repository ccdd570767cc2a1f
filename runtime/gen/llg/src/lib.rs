//! The C interface of llguidance (its `ffi` module, declared in the crate's
//! llguidance.h) exported from one static library for inferd's runtime.
//! Nothing is added here: the `#[no_mangle]` functions of the dependency
//! are kept by linking it in.
pub use llguidance::ffi::*;
