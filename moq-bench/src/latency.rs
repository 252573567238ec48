//! Timestamped payloads and latency statistics. Publisher and subscribers run in one process,
//! so a shared monotonic clock gives one-way delivery latency.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use std::time::Instant;

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The smallest payload that carries the header (timestamp, sequence, flag).
pub const HEADER: usize = 17;

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds on the process-wide monotonic clock.
pub fn now_ns() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A payload of `size` bytes (at least [`HEADER`]) carrying the send time, a sequence
/// number and whether it counts in the measurement.
pub fn payload(size: usize, seq: u64, measured: bool) -> Bytes {
    let mut b = BytesMut::with_capacity(size.max(HEADER));
    b.put_u64(now_ns());
    b.put_u64(seq);
    b.put_u8(u8::from(measured));
    b.resize(size.max(HEADER), 0);
    b.freeze()
}

/// What a received payload says: (send time ns, sequence, measured). `None` if it is too short.
pub fn parse(payload: &[u8]) -> Option<(u64, u64, bool)> {
    if payload.len() < HEADER {
        return None;
    }
    let mut b = payload;
    let ts = b.get_u64();
    let seq = b.get_u64();
    let flag = b.get_u8();
    Some((ts, seq, flag == 1))
}

/// Latencies of measured objects, recorded by many receivers.
#[derive(Debug, Default)]
pub struct Recorder {
    delivered: AtomicU64,
    warmup: AtomicU64,
    micros: Mutex<Vec<u32>>,
}

impl Recorder {
    /// Records one received payload.
    pub fn record(&self, payload: &[u8]) {
        let now = now_ns();
        let Some((ts, _, measured)) = parse(payload) else {
            return;
        };
        if !measured {
            self.warmup.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let us = u32::try_from(now.saturating_sub(ts) / 1000).unwrap_or(u32::MAX);
        self.micros.lock().push(us);
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// Measured objects received.
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// Warm-up objects received.
    pub fn warmup(&self) -> u64 {
        self.warmup.load(Ordering::Relaxed)
    }

    /// Takes the recorded latencies (µs).
    pub fn take(&self) -> Vec<u32> {
        std::mem::take(&mut *self.micros.lock())
    }
}

/// Percentiles of a set of latencies, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Percentiles {
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl Percentiles {
    /// From latencies in µs (sorted here).
    pub fn of(mut micros: Vec<u32>) -> Percentiles {
        micros.sort_unstable();
        let at = |q: usize| -> f64 {
            let i = (micros.len() * q / 100).min(micros.len().saturating_sub(1));
            micros.get(i).map_or(0.0, |v| f64::from(*v) / 1000.0)
        };
        Percentiles {
            p50_ms: at(50),
            p99_ms: at(99),
            max_ms: micros.last().map_or(0.0, |v| f64::from(*v) / 1000.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_short_ones_are_ignored() {
        let p = payload(1024, 7, true);
        assert_eq!(p.len(), 1024);
        let (ts, seq, measured) = parse(&p).unwrap_or_default();
        assert!(ts <= now_ns());
        assert_eq!((seq, measured), (7, true));
        assert_eq!(parse(p.get(..5).unwrap_or_default()), None);
        let r = Recorder::default();
        r.record(&p);
        r.record(&payload(10, 1, false));
        r.record(b"x");
        assert_eq!((r.delivered(), r.warmup()), (1, 1));
        let pc = Percentiles::of(vec![1000, 2000, 3000, 4000]);
        assert_eq!(pc.p50_ms, 3.0);
        assert_eq!(pc.max_ms, 4.0);
        assert_eq!(Percentiles::of(Vec::new()).p99_ms, 0.0);
    }
}
