//! Namespace discovery (draft-19 §6): PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE, NAMESPACE and
//! NAMESPACE_DONE, and the index of known namespaces that answers them.

mod publish;
mod state;
mod subscribe;

pub use crate::index::{
    NamespaceEvent, NamespaceIndex, NamespaceRegistration, NamespaceWatch, PrefixTrie,
};
pub use publish::PublishedNamespace;
pub use subscribe::NamespaceSubscription;

pub(crate) use publish::{publish_namespace, serve_publish_namespace};
pub(crate) use state::NamespaceState;
pub(crate) use subscribe::{serve_subscribe_namespace, subscribe_namespace};
