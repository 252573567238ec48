//! The scripted peer: the raw other end of the connection, acting as the input says.

use super::*;

/// The scripted peer: the raw other end of the connection.
pub(crate) struct Peer {
    pub(crate) conn: MemoryConnection,
    pub(crate) v: Version,
    /// Our session's role (the peer has the other).
    pub(crate) ours: Role,
    /// The peer's control stream (drafts 14-16: the send half of the one bidirectional one).
    pub(crate) control: Option<BoxSendStream>,
    /// Drafts 14-16: the receive half of the control stream.
    pub(crate) control_recv: Option<BoxRecvStream>,
    /// Request streams, opened by either side.
    pub(crate) requests: Vec<(BoxSendStream, BoxRecvStream)>,
    /// Data streams the peer opened, with the writer that frames their objects.
    pub(crate) data: Vec<(BoxSendStream, Option<SubgroupWriter>, Option<FetchWriter>)>,
    /// Unidirectional streams our session opened (its control stream, its data streams).
    pub(crate) incoming: Vec<BoxRecvStream>,
    /// The peer's next Request ID (its parity).
    pub(crate) next_id: u64,
}

impl Peer {
    pub(crate) fn pick<T>(u: &mut Unstructured<'_>, list: &mut [T]) -> Option<usize> {
        if list.is_empty() {
            None
        } else {
            u.choose_index(list.len()).ok()
        }
    }

    /// Writes on a send half, waiting at most `STEP`.
    pub(crate) async fn write(s: &mut BoxSendStream, b: &[u8]) {
        let _ = within(STEP, s.write_all(b)).await;
    }

    /// The SETUP exchange as the peer: valid, or as `mode` spoils it.
    pub(crate) async fn setup(&mut self, u: &mut Unstructured<'_>, mode: u8) {
        let v = self.v;
        let client = self.ours == Role::Server;
        let grant = small(u, 64);
        let options = setup_options(u, v, client);
        // Mode: 0-239 valid; then raw bytes, nothing, or a wrong version offered.
        let raw = (240..248).contains(&mode);
        let silent = (248..252).contains(&mode);
        let wrong = mode >= 252;
        if silent {
            return;
        }
        let bytes_ = if raw {
            bytes(u, 64)
        } else if v.single_control_stream() {
            let number = if wrong { 0xff00_0001 } else { v.setup_number() };
            let m: Message = if client {
                ClientSetup {
                    versions: if v.setup_has_versions() {
                        vec![number]
                    } else {
                        Vec::new()
                    },
                    max_request_id: Some(grant),
                    options,
                }
                .into()
            } else {
                ServerSetup {
                    version: v.setup_has_versions().then_some(number),
                    max_request_id: Some(grant),
                    options,
                }
                .into()
            };
            m.encode_to_vec(v).unwrap_or_default()
        } else {
            let mut options = options;
            if wrong {
                options.path = Some(Bytes::from_static(b"not a path"));
            }
            Message::from(Setup { options })
                .encode_to_vec(v)
                .unwrap_or_default()
        };
        if v.single_control_stream() {
            let pair = if client {
                self.conn.open_bi().await
            } else {
                match within(END, self.conn.accept_bi()).await {
                    Some(r) => r,
                    None => return,
                }
            };
            if let Ok((mut send, recv)) = pair {
                Self::write(&mut send, &bytes_).await;
                self.control = Some(send);
                self.control_recv = Some(recv);
            }
        } else if let Ok(mut send) = self.conn.open_uni().await {
            Self::write(&mut send, &bytes_).await;
            self.control = Some(send);
        }
    }

    /// Reads what is there on a receive half, without waiting past `STEP`.
    pub(crate) async fn drain(r: &mut BoxRecvStream) {
        for _ in 0..8 {
            match within(STEP, r.read_chunk(64 * 1024)).await {
                Some(Ok(Some(_))) => {}
                _ => break,
            }
        }
    }

    pub(crate) async fn data_stream(&mut self, u: &mut Unstructured<'_>) {
        let v = self.v;
        let Ok(Ok(mut send)) = within(STEP, self.conn.open_uni()).await.ok_or(()) else {
            return;
        };
        let mut buf = Vec::new();
        let (mut sub, mut fetch) = (None, None);
        match small(u, 16) {
            0 => buf = bytes(u, 64),
            1 | 2 => {
                let _ = FetchHeader {
                    request_id: small(u, 16),
                }
                .encode(&mut buf, v);
                fetch = Some(FetchWriter::new(GroupOrder::Ascending, v));
            }
            _ => {
                let header = SubgroupHeader {
                    track_alias: small(u, 4),
                    group: small(u, 8),
                    subgroup: match small(u, 2) {
                        0 => SubgroupId::Zero,
                        1 => SubgroupId::FirstObject,
                        _ => SubgroupId::Explicit(small(u, 4)),
                    },
                    priority: flag(u).then(|| small(u, 255) as u8),
                    properties: flag(u),
                    end_of_group: flag(u),
                    first_object: flag(u),
                };
                let w = SubgroupWriter::new(header, v);
                let _ = w.encode_header(&mut buf);
                sub = Some(w);
            }
        }
        Self::objects(u, &mut buf, &mut sub, &mut fetch);
        Self::write(&mut send, &buf).await;
        self.data.push((send, sub, fetch));
    }

    /// Appends a few objects with the stream's writer (or raw bytes).
    pub(crate) fn objects(
        u: &mut Unstructured<'_>,
        buf: &mut Vec<u8>,
        sub: &mut Option<SubgroupWriter>,
        fetch: &mut Option<FetchWriter>,
    ) {
        for _ in 0..small(u, 3) {
            let payload = bytes(u, 16);
            let status = match small(u, 6) {
                0 => ObjectStatus::EndOfGroup,
                1 => ObjectStatus::EndOfTrack,
                _ => ObjectStatus::Normal,
            };
            if let Some(w) = sub.as_mut() {
                let id = small(u, 16);
                if w.encode_object(buf, id, &Properties::default(), status, &payload)
                    .is_err()
                {
                    buf.extend_from_slice(&payload);
                }
            } else if let Some(w) = fetch.as_mut() {
                let obj = FetchObject {
                    location: location(u),
                    subgroup: flag(u).then(|| small(u, 4)),
                    priority: small(u, 255) as u8,
                    properties: Properties::default(),
                    payload_len: payload.len() as u64,
                };
                if w.encode_object(buf, &obj).is_ok() {
                    buf.extend_from_slice(&payload);
                }
            } else {
                buf.extend_from_slice(&payload);
            }
        }
    }

    pub(crate) fn datagram(&self, u: &mut Unstructured<'_>) {
        let b = if u.ratio(1, 16).unwrap_or(false) {
            Bytes::from(bytes(u, 64))
        } else {
            let d = ObjectDatagram {
                track_alias: small(u, 4),
                group: small(u, 8),
                object: small(u, 8),
                priority: flag(u).then(|| small(u, 255) as u8),
                properties: Properties::default(),
                end_of_group: flag(u),
                body: if u.ratio(1, 5).unwrap_or(false) {
                    DatagramBody::Status(ObjectStatus::EndOfGroup)
                } else {
                    DatagramBody::Payload(Bytes::from(bytes(u, 32)))
                },
            };
            match d.encode_to_bytes(self.v) {
                Ok(b) => b,
                Err(_) => return,
            }
        };
        let _ = self.conn.send_datagram(b);
    }

    /// One peer action.
    pub(crate) async fn act(&mut self, u: &mut Unstructured<'_>) {
        let v = self.v;
        let mut choice = small(u, 19);
        // After SETUP, later drafts' control streams carry GOAWAY only: open a request
        // stream instead, mostly.
        if choice <= 1 && !v.single_control_stream() && u.ratio(3, 4).unwrap_or(true) {
            choice = 2;
        }
        if trace() {
            eprintln!("  peer action {choice}");
        }
        match choice {
            0 | 1 => {
                let b = message_bytes(u, v, Place::Control, &mut self.next_id);
                if let Some(c) = self.control.as_mut() {
                    Self::write(c, &b).await;
                }
            }
            2..=4 => {
                // A request stream of the peer's (drafts 14-16: mostly the control stream,
                // which carries their requests).
                let b = message_bytes(u, v, Place::Opening, &mut self.next_id);
                if v.single_control_stream() && u.ratio(3, 4).unwrap_or(false) {
                    if let Some(c) = self.control.as_mut() {
                        Self::write(c, &b).await;
                    }
                } else if let Some(Ok((mut send, recv))) = within(STEP, self.conn.open_bi()).await {
                    Self::write(&mut send, &b).await;
                    if u.ratio(1, 8).unwrap_or(false) {
                        let _ = send.finish();
                    }
                    self.requests.push((send, recv));
                }
            }
            5 => {
                // Our session's request stream, accepted.
                if let Some(Ok(pair)) = within(STEP, self.conn.accept_bi()).await {
                    self.requests.push(pair);
                }
            }
            6 | 7 => {
                // A message (an answer, mostly) on a request stream.
                let b = message_bytes(u, v, Place::Request, &mut self.next_id);
                if let Some((s, _)) =
                    Self::pick(u, &mut self.requests).and_then(|i| self.requests.get_mut(i))
                {
                    Self::write(s, &b).await;
                }
            }
            8 => {
                if let Some(i) = Self::pick(u, &mut self.requests) {
                    let how = small(u, 4);
                    let code = small(u, 0x20);
                    match how {
                        0 => {
                            if let Some((s, _)) = self.requests.get_mut(i) {
                                let _ = s.finish();
                            }
                        }
                        1 => {
                            if let Some((s, _)) = self.requests.get_mut(i) {
                                s.reset(code);
                            }
                        }
                        2 => {
                            if let Some((_, r)) = self.requests.get_mut(i) {
                                r.stop(code);
                            }
                        }
                        3 => {
                            if let Some((_, r)) = self.requests.get_mut(i) {
                                Self::drain(r).await;
                            }
                        }
                        _ => {
                            self.requests.swap_remove(i);
                        }
                    }
                }
            }
            9..=11 => self.data_stream(u).await,
            12 => {
                if let Some(i) = Self::pick(u, &mut self.data) {
                    let mut buf = Vec::new();
                    if let Some((s, sub, fetch)) = self.data.get_mut(i) {
                        Self::objects(u, &mut buf, sub, fetch);
                        Self::write(s, &buf).await;
                    }
                }
            }
            13 => {
                if let Some(i) = Self::pick(u, &mut self.data) {
                    let how = small(u, 2);
                    let code = small(u, 0x20);
                    if let Some((s, _, _)) = self.data.get_mut(i) {
                        match how {
                            0 => {
                                let _ = s.finish();
                            }
                            1 => s.reset(code),
                            _ => {}
                        }
                    }
                    if how == 2 {
                        self.data.swap_remove(i);
                    }
                }
            }
            14 | 15 => self.datagram(u),
            16 => {
                // Our session's unidirectional streams: accept, read, stop.
                if u.ratio(1, 2).unwrap_or(false) {
                    if let Some(Ok(r)) = within(STEP, self.conn.accept_uni()).await {
                        self.incoming.push(r);
                    }
                } else if let Some(i) = Self::pick(u, &mut self.incoming) {
                    let stop = flag(u);
                    if let Some(r) = self.incoming.get_mut(i) {
                        if stop {
                            r.stop(small(u, 0x10));
                        } else {
                            Self::drain(r).await;
                        }
                    }
                }
            }
            17 => {
                if let Some(r) = self.control_recv.as_mut() {
                    Self::drain(r).await;
                }
            }
            18 => {
                // Closing or resetting the control stream is a violation: rarely.
                let finish = flag(u);
                let code = small(u, 8);
                if let Some(c) = self
                    .control
                    .as_mut()
                    .filter(|_| u.ratio(1, 16).unwrap_or(false))
                {
                    if finish {
                        let _ = c.finish();
                    } else {
                        c.reset(code);
                    }
                }
            }
            _ => settle(Duration::from_millis(small(u, 20_000))).await,
        }
    }
}
