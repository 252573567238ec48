//! Namespace discovery (draft-19 §6): PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE, NAMESPACE and
//! NAMESPACE_DONE, and the index of known namespaces that answers them.

mod cluster;
mod publish;
mod state;
mod subscribe;

pub use crate::index::{
    NamespaceEvent, NamespaceIndex, NamespaceRegistration, NamespaceRoute, NamespaceWatch,
    PrefixTrie,
};
pub use publish::PublishedNamespace;
pub use subscribe::{Advertised, NamespaceSubscription};

pub(crate) use publish::{publish_namespace, serve_publish_namespace};
pub(crate) use state::NamespaceState;
pub(crate) use subscribe::{serve_subscribe_namespace, subscribe_namespace};
