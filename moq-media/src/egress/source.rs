//! Where egress gets its catalogs: the MSF `catalog` track, or another format adapted.

use moq_client::{FullTrackName, JoinFrom, SubscribeOptions, Subscriber, TrackNamespace};

use crate::MediaError;
use crate::catalog::{self, Catalog};

/// Where a subscriber's catalogs come from: the MSF `catalog` track ([`MsfCatalog`]), or
/// another catalog format adapted to [`Catalog`]. Each call yields the next complete catalog
/// (deltas already applied); `None` when the catalog track ended.
#[async_trait::async_trait]
pub trait CatalogSource: Send {
    /// The next catalog. Cancel safety is the implementation's to state.
    async fn next_catalog(&mut self) -> Option<Result<Catalog, MediaError>>;
}

/// The MSF catalog of a broadcast: the track `catalog`, joined at its current group (the
/// latest independent catalog: MSF asks for SUBSCRIBE with a Joining FETCH of offset 0,
/// which [`Subscriber::join`] with [`JoinFrom::CurrentGroup`] sends up to draft-19; from
/// draft-20, where Joining FETCH is gone, `join` asks for the subscription's fill from the
/// start of the current group), then its updates (new groups, and deltas within a group).
///
/// Dropping it cancels the catalog's subscription.
pub struct MsfCatalog {
    objects: moq_client::ObjectConsumer,
    current: Option<Catalog>,
    group: Option<u64>,
}

impl std::fmt::Debug for MsfCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsfCatalog")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl MsfCatalog {
    /// Joins the `catalog` track of `namespace` at its current group.
    ///
    /// Cancel safety: dropping the future before it resolves cancels the catalog's
    /// subscription; nothing else changes.
    pub async fn subscribe(
        subscriber: &Subscriber,
        namespace: TrackNamespace,
    ) -> Result<Self, MediaError> {
        let name = FullTrackName::new(namespace, catalog::CATALOG_TRACK)?;
        // draft-ietf-moq-msf §5: SUBSCRIBE with a Joining FETCH (offset 0) for the latest
        // complete catalog; a higher subscriber priority than the media's.
        let objects = subscriber
            .join(
                name,
                SubscribeOptions::default().priority(0),
                JoinFrom::CurrentGroup,
            )
            .await?;
        Ok(MsfCatalog {
            objects,
            current: None,
            group: None,
        })
    }

    /// Reads catalogs from objects already subscribed to (the `catalog` track, joined).
    pub fn from_objects(objects: moq_client::ObjectConsumer) -> Self {
        MsfCatalog {
            objects,
            current: None,
            group: None,
        }
    }
}

#[async_trait::async_trait]
impl CatalogSource for MsfCatalog {
    /// Cancel safe between objects (an object half-applied is never kept).
    async fn next_catalog(&mut self) -> Option<Result<Catalog, MediaError>> {
        loop {
            let object = match self.objects.next().await? {
                Ok(o) => o,
                Err(e) => return Some(Err(e.into())),
            };
            if object.payload.is_empty() {
                continue;
            }
            let (g, id) = (object.location.group, object.location.object);
            if id > 0 && self.group != Some(g) {
                // draft-ietf-moq-msf §5: updates before the first object of the latest
                // group MUST be ignored.
                continue;
            }
            let next = Catalog::from_object(self.current.as_ref(), id, &object.payload);
            return Some(next.inspect(|c| {
                self.group = Some(g);
                self.current = Some(c.clone());
            }));
        }
    }
}
