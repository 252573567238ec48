//! Finished data streams the peer may not have acknowledged yet, held so that a caller can wait
//! until what was sent has arrived.
//!
//! Nothing watches them meanwhile: a watch per stream (a future polled on every
//! acknowledgement) cost a fifth of the throughput of one stream per 1 KiB object. The list is
//! pruned of acknowledged streams as it grows, and waited on only when asked. It is bounded by
//! the peer's stream credit: a stream the peer has not acknowledged it has not read either.

use futures::FutureExt;
use parking_lot::Mutex;

use crate::transport::BoxSendStream;

/// The list is pruned when it reaches twice its size after the last pruning, and not below
/// this.
const PRUNE_MIN: usize = 64;

#[derive(Default)]
pub(crate) struct Finished {
    streams: Mutex<Streams>,
    /// One wait at a time holds the streams it took out; the others queue here.
    turn: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Streams {
    list: Vec<BoxSendStream>,
    prune_at: usize,
}

impl Finished {
    /// Holds a finished stream until it is known to be acknowledged (or stopped, or reset).
    pub(crate) fn push(&self, stream: BoxSendStream) {
        let mut s = self.streams.lock();
        s.list.push(stream);
        if s.list.len() >= s.prune_at.max(PRUNE_MIN) {
            // Streams are mostly acknowledged in the order they were finished: the oldest
            // acknowledged ones go first, each asked once; the rest only if that freed little.
            let mut acked = 0;
            for st in s.list.iter_mut() {
                if st.stopped().now_or_never().is_none() {
                    break;
                }
                acked += 1;
            }
            s.list.drain(..acked);
            if s.list.len() >= s.prune_at.max(PRUNE_MIN) {
                s.list
                    .retain_mut(|st| st.stopped().now_or_never().is_none());
            }
            s.prune_at = s.list.len() * 2;
        }
    }

    /// Resolves once every stream pushed before the call is acknowledged, stopped by the
    /// peer, or failed with the connection.
    ///
    /// Cancel safe: the streams not answered yet go back to the list.
    pub(crate) async fn wait(&self) {
        let _turn = self.turn.lock().await;
        let mut taken = Taken {
            finished: self,
            list: std::mem::take(&mut self.streams.lock().list),
        };
        futures::future::join_all(taken.list.iter_mut().map(|s| s.stopped())).await;
        taken.list.clear();
    }
}

impl std::fmt::Debug for Finished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finished")
            .field("streams", &self.streams.lock().list.len())
            .finish()
    }
}

/// Streams taken out by a wait; returned to the list if the wait is dropped early.
struct Taken<'a> {
    finished: &'a Finished,
    list: Vec<BoxSendStream>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if !self.list.is_empty() {
            self.finished.streams.lock().list.append(&mut self.list);
        }
    }
}

#[cfg(test)]
#[cfg(feature = "memory")]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::transport::memory::{MemoryConnection, pair};
    use crate::transport::{Connection, TransportKind};

    async fn timed<F: std::future::Future>(f: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(10), f)
            .await
            .expect("timed out")
    }

    /// Opens `n` streams, writes a byte on each and finishes it, and holds them in `finished`.
    async fn finish_streams(client: &MemoryConnection, finished: &Finished, n: usize) {
        for _ in 0..n {
            let mut s = client.open_uni().await.unwrap();
            s.write_all(b"x").await.unwrap();
            s.finish().unwrap();
            finished.push(s);
        }
    }

    /// Reads `n` streams to their FIN.
    async fn read_streams(server: &MemoryConnection, n: usize) {
        for _ in 0..n {
            let mut r = server.accept_uni().await.unwrap();
            while r.read_chunk(64).await.unwrap().is_some() {}
        }
    }

    fn held(finished: &Finished) -> usize {
        finished.streams.lock().list.len()
    }

    #[tokio::test]
    async fn acknowledged_streams_are_pruned_as_the_list_grows() {
        timed(async {
            let (client, server) = pair("moqt-19", TransportKind::RawQuic);
            let finished = Finished::default();
            finish_streams(&client, &finished, PRUNE_MIN - 1).await;
            read_streams(&server, PRUNE_MIN - 1).await;
            assert_eq!(
                held(&finished),
                PRUNE_MIN - 1,
                "nothing pruned below the minimum"
            );
            finish_streams(&client, &finished, 1).await;
            assert_eq!(held(&finished), 1, "only the unread stream is left");
        })
        .await;
    }

    #[tokio::test]
    async fn a_wait_ends_when_the_peer_has_everything_and_gives_back_what_it_took_if_dropped() {
        timed(async {
            let (client, server) = pair("moqt-19", TransportKind::RawQuic);
            let finished = Finished::default();
            finish_streams(&client, &finished, 3).await;
            {
                let wait = finished.wait();
                tokio::pin!(wait);
                assert!(futures::poll!(wait.as_mut()).is_pending());
                assert_eq!(held(&finished), 0, "taken out by the wait");
            }
            assert_eq!(held(&finished), 3, "given back when the wait was dropped");
            let wait = finished.wait();
            tokio::pin!(wait);
            assert!(futures::poll!(wait.as_mut()).is_pending());
            read_streams(&server, 3).await;
            wait.await;
            assert_eq!(held(&finished), 0);
        })
        .await;
    }
}
