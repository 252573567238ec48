//! What both ends share: the QUIC transport settings, the ALPN tokens offered, the UDP socket
//! buffers, and the QUIC DATAGRAM check.

use std::sync::Arc;
use std::time::Duration;

use moq_core::Version;
use moq_core::codes::SessionErrorCode;

use crate::error::Error;
use crate::transport::credit;

/// The ALPN token of HTTP/3, which carries WebTransport.
pub const H3_ALPN: &str = "h3";

/// QUIC transport settings for MOQT: datagrams on, room for many streams, keep-alive.
///
/// The peer's stream limits start at [`credit::INITIAL_BIDI_STREAMS`] and
/// [`credit::INITIAL_UNI_STREAMS`]; sessions raise them as streams are used, up to
/// [`credit::MAX_BIDI_STREAMS`] and [`credit::MAX_UNI_STREAMS`] (quinn allocates per-stream
/// state for the whole limit up front).
pub fn transport_config() -> quinn::TransportConfig {
    transport_config_with(&QuicSettings::default())
}

/// The QUIC settings of an endpoint's connections that applications choose.
///
/// A dead peer is noticed after `idle_timeout` without a packet from it; `keep_alive` makes
/// an idle but live connection send often enough that it never times out. QUIC uses the
/// smaller of the two sides' idle timeouts (RFC 9000 §10.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuicSettings {
    /// The congestion controller.
    pub congestion: Congestion,
    /// How often an otherwise idle connection sends a PING.
    pub keep_alive: Duration,
    /// How long a connection lives without hearing from the peer.
    pub idle_timeout: Duration,
    /// The QUIC ACK frequency extension (draft-ietf-quic-ack-frequency, as quinn implements
    /// it): how many ack-eliciting packets a peer may receive before it must ACK. `None`
    /// asks nothing (the peer ACKs every second packet, RFC 9000 §13.2.2). See
    /// [`DEFAULT_ACK_ELICITING_THRESHOLD`].
    pub ack_eliciting_threshold: Option<u32>,
}

impl QuicSettings {
    /// These settings with idle timeout `timeout`, and keep-alives at a third of it (at
    /// most as far apart as the default's) so a live connection never times out.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self.keep_alive = (timeout / 3).min(QuicSettings::default().keep_alive);
        self
    }
}

impl Default for QuicSettings {
    fn default() -> Self {
        QuicSettings {
            congestion: Congestion::default(),
            // A dead peer is noticed within 9 s; a live idle one sends a PING every 2 s.
            keep_alive: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(9),
            ack_eliciting_threshold: Some(DEFAULT_ACK_ELICITING_THRESHOLD),
        }
    }
}

/// [`QuicSettings::ack_eliciting_threshold`]'s default: a peer that supports the ACK
/// frequency extension (one that sends the `min_ack_delay` transport parameter: quinn always
/// does) ACKs after more than this many ack-eliciting packets, or after its max_ack_delay
/// (quinn asks for at most the larger of the RTT and 25 ms), or at once on reordering beyond
/// quinn's packet threshold. A fan-out relay sends one packet per object per subscriber, and
/// every ACK it gets back costs it a receive, a decrypt and a wake of that connection's
/// driver: fewer ACKs is less relay CPU per delivered object. Peers without the extension
/// ignore the request (it is never sent to them).
pub const DEFAULT_ACK_ELICITING_THRESHOLD: u32 = 9;

/// The congestion controller of an endpoint's connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Congestion {
    /// CUBIC (RFC 9438), quinn's default.
    #[default]
    Cubic,
    /// NewReno (RFC 9002).
    NewReno,
    /// BBR (quinn's experimental BBRv1).
    Bbr,
}

impl std::str::FromStr for Congestion {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "cubic" => Ok(Congestion::Cubic),
            "newreno" | "reno" => Ok(Congestion::NewReno),
            "bbr" => Ok(Congestion::Bbr),
            _ => Err(Error::Invalid(format!(
                "congestion control {s:?}: cubic, new-reno or bbr"
            ))),
        }
    }
}

/// [`transport_config`] with `settings`.
pub fn transport_config_with(settings: &QuicSettings) -> quinn::TransportConfig {
    use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};
    let mut t = quinn::TransportConfig::default();
    match settings.congestion {
        Congestion::Cubic => t.congestion_controller_factory(Arc::new(CubicConfig::default())),
        Congestion::NewReno => t.congestion_controller_factory(Arc::new(NewRenoConfig::default())),
        Congestion::Bbr => t.congestion_controller_factory(Arc::new(BbrConfig::default())),
    };
    t.max_concurrent_bidi_streams(credit::INITIAL_BIDI_STREAMS.into());
    t.max_concurrent_uni_streams(credit::INITIAL_UNI_STREAMS.into());
    t.keep_alive_interval(Some(settings.keep_alive));
    // An idle timeout beyond QUIC's varint range is no timeout at all.
    t.max_idle_timeout(settings.idle_timeout.try_into().ok());
    t.stream_receive_window((4u32 << 20).into());
    t.receive_window((32u32 << 20).into());
    t.send_window(32 << 20);
    t.datagram_receive_buffer_size(Some(1 << 20));
    t.datagram_send_buffer_size(1 << 20);
    // ACK frequency (issue 35: fewer ACKs from subscribers). quinn's reordering threshold
    // default (its packet threshold minus one) keeps loss detection as without it.
    if let Some(threshold) = settings.ack_eliciting_threshold {
        let mut ack = quinn::AckFrequencyConfig::default();
        ack.ack_eliciting_threshold(threshold.into());
        t.ack_frequency_config(Some(ack));
    }
    t
}

/// The version a WebTransport session runs when the CONNECT names none: one that negotiates
/// in CLIENT_SETUP (draft-14) if configured, else the most preferred.
pub(super) fn in_band_or_first(versions: &[Version]) -> Version {
    versions
        .iter()
        .copied()
        .find(|v| v.setup_has_versions())
        .or(versions.first().copied())
        .unwrap_or(Version::PREFERRED)
}

/// The first address of a URL's `host` (brackets of an IPv6 literal removed) at `port`.
pub(super) async fn resolve(host: &str, port: u16) -> Result<std::net::SocketAddr, Error> {
    let name = host.trim_start_matches('[').trim_end_matches(']');
    let failed = |reason: String| crate::error::ConnectError::Resolve {
        host: host.to_string(),
        reason,
    };
    let mut found = tokio::net::lookup_host((name, port))
        .await
        .map_err(|e| failed(e.to_string()))?;
    found
        .next()
        .ok_or_else(|| failed("no address".into()).into())
}

pub(super) fn alpns(versions: &[Version]) -> Vec<&'static str> {
    versions.iter().map(|v| v.alpn()).collect()
}

/// [`ServerConfig::udp_buffer`](crate::endpoint::ServerConfig::udp_buffer)'s and
/// [`ClientConfig::udp_buffer`](crate::endpoint::ClientConfig::udp_buffer)'s default: 4 MiB
/// each way.
pub const DEFAULT_UDP_BUFFER: usize = 4 << 20;

/// Asks for `bytes` of receive and send buffer on `socket`; returns what the kernel granted
/// (receive, send) if it granted less.
pub(super) fn size_udp_buffers(
    socket: &std::net::UdpSocket,
    bytes: usize,
) -> Option<(usize, usize)> {
    let sock = socket2::SockRef::from(socket);
    let _ = sock.set_recv_buffer_size(bytes);
    let _ = sock.set_send_buffer_size(bytes);
    let (receive, send) = (
        sock.recv_buffer_size().unwrap_or(0),
        sock.send_buffer_size().unwrap_or(0),
    );
    // Linux reports twice what was granted (its bookkeeping share): compare halves there.
    let granted = |reported: usize| match cfg!(target_os = "linux") {
        true => reported / 2,
        false => reported,
    };
    let (receive, send) = (granted(receive), granted(send));
    (receive < bytes || send < bytes).then_some((receive, send))
}

/// Refuses a raw QUIC connection whose peer did not negotiate the QUIC DATAGRAM extension
/// (draft-22 §6.2, draft-14 on: it "MUST be supported and negotiated in the QUIC connection
/// used for MOQT"): the connection is closed with PROTOCOL_VIOLATION before any MOQT stream
/// (the draft names no code for it). Ours always offers it (`transport_config`), so quinn
/// reports no datagram size only when the peer's transport parameters lack
/// max_datagram_frame_size.
pub(super) fn require_datagrams(conn: &quinn::Connection) -> Result<(), Error> {
    if conn.max_datagram_size().is_some() {
        return Ok(());
    }
    let code = SessionErrorCode::PROTOCOL_VIOLATION;
    let reason = "QUIC DATAGRAM extension not negotiated";
    conn.close(
        quinn::VarInt::from_u64(code.0).unwrap_or_default(),
        reason.as_bytes(),
    );
    Err(Error::protocol(reason))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// The socket gets the asked buffers, up to what the kernel allows an unprivileged
    /// SO_RCVBUF (`net.core.rmem_max` / `wmem_max` on Linux).
    #[test]
    fn udp_buffers_are_sized() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let asked = 1 << 20;
        let _capped = super::size_udp_buffers(&socket, asked);
        let sock = socket2::SockRef::from(&socket);
        let cap = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok())
                .unwrap_or(usize::MAX)
        };
        let default = cap("rmem_default").min(212_992);
        // Linux reports twice what it granted.
        let scale = if cfg!(target_os = "linux") { 2 } else { 1 };
        for (got, max) in [
            (sock.recv_buffer_size().unwrap(), cap("rmem_max")),
            (sock.send_buffer_size().unwrap(), cap("wmem_max")),
        ] {
            assert!(got >= scale * asked.min(max), "{got} < {}", asked.min(max));
            assert!(
                got > default || max <= default / scale,
                "{got}: still the default"
            );
        }
    }
}
