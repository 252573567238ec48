//! Indexes keyed by namespace, with no session behind them: the field-wise prefix trie, and the
//! set of namespaces an endpoint knows with its watchers. Sessions are configured with them
//! ([`crate::SessionConfig`]); the discovery requests of [`crate::namespace`] read and fill them.

mod namespaces;
mod trie;

pub(crate) use namespaces::{Change, RegistrationKey};
pub use namespaces::{
    NamespaceEvent, NamespaceIndex, NamespaceRegistration, NamespaceRoute, NamespaceWatch,
};
pub use trie::PrefixTrie;
