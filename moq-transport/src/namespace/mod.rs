//! Namespace discovery (draft-19 §6): PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE, NAMESPACE and
//! NAMESPACE_DONE, and the index of known namespaces that answers them.

mod index;
mod publish;
mod subscribe;
mod trie;

pub use index::{NamespaceEvent, NamespaceIndex, NamespaceRegistration, NamespaceWatch};
pub use publish::PublishedNamespace;
pub use subscribe::NamespaceSubscription;
pub use trie::PrefixTrie;

pub(crate) use publish::{publish_namespace, serve_publish_namespace};
pub(crate) use subscribe::{serve_subscribe_namespace, subscribe_namespace};
