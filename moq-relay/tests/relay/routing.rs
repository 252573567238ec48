//! Routing by namespace: discovery across versions and transports, prefix routing and fan-out,
//! ordering of groups written at once, two publishers of one namespace, every matching publisher
//! gets the SUBSCRIBE, GOAWAY (draft-19 §3.6, §6, §9.5).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moq_client::{Backoff, Client, NamespaceEvent, Publisher, Status, SubscribeOptions, Version};
use moq_core::codes::RequestErrorCode;
use moq_core::data::SubgroupId;
use moq_core::message::Parameters;
use moq_transport::track::{PublishOptions, SubscribeResponse, TrackEvent};

use crate::common::{case, read_objects};
use crate::support::{
    announce, client_with, connect, next_subscribe, ns, rejected, relay, relay_knows, timeout,
    track, transport_session, url,
};

#[tokio::test]
async fn discovery_across_versions_and_transports() {
    let relay = relay();
    let prefix = ns(&["meet"]);
    // Publishers over raw QUIC draft-19 and WebTransport draft-18; a subscriber on each.
    let (_a, _b, _ha, hb) = timeout(async {
        let a = client_with(&relay, Publisher::default(), Version::Draft19)
            .connect(&url(&relay, false))
            .await
            .unwrap();
        let b = client_with(&relay, Publisher::default(), Version::Draft18)
            .connect(&url(&relay, true))
            .await
            .unwrap();
        let ha = announce(&a, &prefix.child("a").unwrap()).await;
        let hb = announce(&b, &prefix.child("b").unwrap()).await;
        (a, b, ha, hb)
    })
    .await;
    for (webtransport, version) in [(false, Version::Draft18), (true, Version::Draft19)] {
        case(format!("webtransport {webtransport} {version:?}"), async {
            let s = client_with(&relay, Publisher::default(), version)
                .connect(&url(&relay, webtransport))
                .await
                .unwrap();
            let mut d = s
                .subscriber()
                .subscribe_namespace(prefix.clone())
                .await
                .unwrap();
            let mut got = BTreeSet::new();
            for _ in 0..2 {
                match d.next().await.unwrap().unwrap() {
                    NamespaceEvent::Added(n) => got.insert(n),
                    e => panic!("{e:?}"),
                };
            }
            assert_eq!(
                got,
                [prefix.child("a").unwrap(), prefix.child("b").unwrap()]
                    .into_iter()
                    .collect()
            );
        })
        .await;
    }
    timeout(async {
        // The relay indexes them; withdrawing removes them.
        assert!(relay.namespaces().contains(&prefix.child("b").unwrap()));
        let s = connect(&relay, false).await;
        let mut d = s
            .subscriber()
            .subscribe_namespace(prefix.clone())
            .await
            .unwrap();
        let _ = (d.next().await, d.next().await);
        drop(hb);
        assert_eq!(
            d.next().await.unwrap().unwrap(),
            NamespaceEvent::Removed(prefix.child("b").unwrap())
        );
    })
    .await;
}

#[tokio::test]
async fn subscribe_routes_by_namespace_prefix_and_fans_out() {
    timeout(async {
        let relay = relay();
        let publisher = connect(&relay, false).await;
        // The publisher announces (live); the track lives deeper, in (live, sports).
        let _h = announce(&publisher, &ns(&["live"])).await;
        let name = track(&ns(&["live", "sports"]), "video");
        let producer = publisher.publisher().create_track(name.clone()).unwrap();

        // Three subscribers over both transports share one upstream subscription.
        let mut subs = Vec::new();
        for i in 0..3 {
            let s = connect(&relay, i % 2 == 1).await;
            let t = s
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            subs.push((s, t));
        }
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_upstream_subscriptions_active"),
            1,
            "one upstream per track"
        );
        assert_eq!(relay.metrics().value("moq_relay_subscriptions_active"), 3);
        for i in 0..4 {
            let mut g = producer.append_group().unwrap();
            g.write(format!("frame {i}")).unwrap();
            g.finish().unwrap();
        }
        for (_, t) in subs.iter_mut() {
            let mut got = read_objects(t, 4).await;
            got.sort();
            assert_eq!(
                got.iter().map(|(g, _)| *g).collect::<Vec<_>>(),
                vec![0, 1, 2, 3]
            );
        }
        assert!(relay.metrics().serve.objects.load(Ordering::Relaxed) >= 12);
        // A track nobody publishes: DOES_NOT_EXIST.
        let s = connect(&relay, false).await;
        assert_eq!(
            rejected(
                s.subscriber()
                    .subscribe(track(&ns(&["nobody"]), "x"), SubscribeOptions::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::DOES_NOT_EXIST
        );
    })
    .await;
}

/// Groups a publisher writes at once after a subscriber's SUBSCRIBE was answered all come
/// through the relay (draft-19 §10.7), in the order written: whether the publisher announced
/// the namespace (the relay SUBSCRIBEs upstream) or PUBLISHed the track. The publisher and the
/// relay open their subgroup streams in the track's order, and the relay stores the upstream's
/// subgroups in the order their streams came; both once took the order their tasks happened
/// to run in, and on a multi-threaded runtime (as the relay binary runs) the task spawned last
/// often runs first: the subscriber's first group was the last one written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_written_at_once_arrive_in_order() {
    for &version in Version::ALL {
        for pushed in [false, true] {
            timeout(async {
                let relay = relay();
                let n = ns(&["in-order"]);
                let name = track(&n, "t");
                let p = client_with(&relay, Publisher::default(), version)
                    .connect(&url(&relay, false))
                    .await
                    .unwrap();
                let producer = p.publisher().create_track(name.clone()).unwrap();
                let _announced = if pushed {
                    p.publish(&producer).await.unwrap();
                    None
                } else {
                    Some(announce(&p, &n).await)
                };
                let s = client_with(&relay, Publisher::default(), version)
                    .connect(&url(&relay, false))
                    .await
                    .unwrap();
                let mut sub = s
                    .subscriber()
                    .subscribe(name.clone(), SubscribeOptions::default())
                    .await
                    .unwrap();
                for g in 0..3 {
                    let mut w = producer.append_group().unwrap();
                    w.write(format!("{g}")).unwrap();
                    w.finish().unwrap();
                }
                let want: Vec<_> = (0..3).map(|g| (g, format!("{g}"))).collect();
                assert_eq!(
                    read_objects(&mut sub, 3).await,
                    want,
                    "{version}, pushed {pushed}"
                );
            })
            .await;
        }
    }
}

#[tokio::test]
async fn two_publishers_of_one_namespace() {
    timeout(async {
        let relay = relay();
        let n = ns(&["shared"]);
        let name = track(&n, "t");
        // Both announce the same namespace; both are asked for the track; objects from both
        // are merged without duplicates.
        let p1 = connect(&relay, false).await;
        let p2 = connect(&relay, true).await;
        let _h1 = announce(&p1, &n).await;
        let _h2 = announce(&p2, &n).await;
        let t1 = p1.publisher().create_track(name.clone()).unwrap();
        let t2 = p2.publisher().create_track(name.clone()).unwrap();
        let s = connect(&relay, false).await;
        let mut sub = s
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        // The same group from both publishers (a redundant origin): delivered once.
        for t in [&t1, &t2] {
            let mut g = t.create_group(7).unwrap();
            g.write("seven").unwrap();
            g.finish().unwrap();
        }
        let got = read_objects(&mut sub, 1).await;
        assert_eq!(got, vec![(7, "seven".to_string())]);
        let mut g = t2.create_group(8).unwrap();
        g.write("eight").unwrap();
        g.finish().unwrap();
        let got = read_objects(&mut sub, 1).await;
        assert_eq!(
            got,
            vec![(8, "eight".to_string())],
            "no duplicate of group 7 in between"
        );
    })
    .await;
}

#[tokio::test]
async fn goaway_moves_a_reconnecting_client() {
    timeout(async {
        let old = relay();
        let new = relay();
        let n = ns(&["moving"]);
        // A reconnecting client pinned to both relays' certificates.
        let client = Client::builder()
            .fingerprint(&old.fingerprint())
            .unwrap()
            .fingerprint(&new.fingerprint())
            .unwrap()
            .build()
            .unwrap();
        let r = client.reconnecting(&url(&old, false), Backoff::default());
        r.connected().await.unwrap();
        let _h = r.publisher().publish_namespace(n.clone()).unwrap();
        for _ in 0..200 {
            if old.namespaces().contains(&n) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(old.namespaces().contains(&n));
        old.goaway(&url(&new, false), Duration::from_secs(5)).await;
        let mut status = r;
        loop {
            match status.next_status().await.unwrap() {
                Status::Connected(u) if u == url(&new, false) => break,
                _ => {}
            }
        }
        for _ in 0..200 {
            if new.namespaces().contains(&n) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            new.namespaces().contains(&n),
            "namespaces re-published after GOAWAY"
        );
    })
    .await;
}

/// draft-19 §9.5: a SUBSCRIBE goes to every publisher whose PUBLISH_NAMESPACE is the track's
/// namespace or a prefix of it (fields matched whole: (ab) is no prefix of (a, b)), each with
/// Forward=1; a PUBLISHed track does not make its publisher a route for its namespace (an
/// explicit PUBLISH_NAMESPACE is needed), though the track itself is served.
#[tokio::test]
async fn subscribe_goes_to_every_matching_publisher_only() {
    timeout(async {
        let relay = relay();
        let (p1, p2, p3, p4) = (
            transport_session(&relay, false).await,
            transport_session(&relay, true).await,
            transport_session(&relay, false).await,
            transport_session(&relay, true).await,
        );
        let _a1 = p1.publish_namespace(ns(&["a"])).await.unwrap();
        let _a2 = p2.publish_namespace(ns(&["a", "b"])).await.unwrap();
        let _a3 = p3.publish_namespace(ns(&["ab"])).await.unwrap();
        for n in [ns(&["a"]), ns(&["a", "b"]), ns(&["ab"])] {
            relay_knows(&relay, &n).await;
        }
        let subscriber = transport_session(&relay, false).await;
        let name = track(&ns(&["a", "b"]), "t");
        let pending = {
            let s = subscriber.clone();
            let name = name.clone();
            tokio::spawn(async move { s.subscribe(name, Parameters::default()).await })
        };
        let mut writers = Vec::new();
        for p in [&p1, &p2] {
            let upstream = next_subscribe(p).await;
            assert_eq!(upstream.track(), &name);
            assert_ne!(upstream.params().forward, Some(false));
            writers.push(upstream.accept(SubscribeResponse::default()).await.unwrap());
        }
        let mut sub = pending.await.unwrap().unwrap();
        // Objects from either publisher reach the subscriber (draft-19 §9.3).
        for (g, w) in writers.iter().enumerate() {
            let mut s = w
                .open_subgroup(g as u64, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            s.write_object(0, bytes::Bytes::from(format!("from p{}", g + 1)))
                .await
                .unwrap();
            s.finish();
        }
        let mut from = BTreeSet::new();
        while from.len() < 2 {
            let TrackEvent::Subgroup(mut s) = sub.next().await.unwrap().unwrap() else {
                panic!("datagram")
            };
            let o = s.next_object().await.unwrap().unwrap();
            from.insert(String::from_utf8(o.payload.to_vec()).unwrap());
        }
        assert_eq!(from, BTreeSet::from(["from p1".into(), "from p2".into()]));
        // p3's (ab) did not match: the first SUBSCRIBE it sees is one for its own namespace.
        let other = {
            let s = subscriber.clone();
            tokio::spawn(async move {
                s.subscribe(track(&ns(&["ab"]), "t"), Parameters::default())
                    .await
            })
        };
        let upstream = next_subscribe(&p3).await;
        assert_eq!(upstream.track(), &track(&ns(&["ab"]), "t"));
        let _w3 = upstream.accept(SubscribeResponse::default()).await.unwrap();
        let _ = other.await.unwrap().unwrap();

        // p4 PUBLISHes (solo)/t1 without PUBLISH_NAMESPACE: (solo)/t1 is served, (solo)/t2 is
        // not routed to p4.
        let published = p4
            .publish(track(&ns(&["solo"]), "t1"), PublishOptions::default())
            .await
            .unwrap();
        published.accepted().await.unwrap();
        let err = subscriber
            .subscribe(track(&ns(&["solo"]), "t2"), Parameters::default())
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::DOES_NOT_EXIST);
        let _ = subscriber
            .subscribe(track(&ns(&["solo"]), "t1"), Parameters::default())
            .await
            .unwrap();
        // A namespace route appears only with the explicit PUBLISH_NAMESPACE.
        assert!(!relay.namespaces().contains(&ns(&["solo"])));
    })
    .await;
}
