//! Common structures: namespaces and names, locations, key-value pairs and properties,
//! authorization tokens, and filters (draft-19 §1.4, §2.4, §5.1).

pub(crate) mod fields;
pub(crate) mod filter;
pub(crate) mod kvp;
pub(crate) mod location;
pub(crate) mod namespace;
pub(crate) mod token;
