//! CPU pinning for sections 2 and 6: the relay under test on one core, the bench's publisher
//! and subscribers (this process, every thread) on another, so that a relay's figures are not
//! the bench's decryption competing with it for the same core.
//!
//! Affinity is per thread and inherited: a child started by a pinned thread starts pinned, and
//! a thread spawned by a pinned thread is pinned. So the relay is pinned by spawning it from a
//! thread that holds the relay's set for that moment ([`spawn_on`]), and this process by
//! setting the bench's set on every thread it has ([`Pinning::pin_bench`]).

use std::process::{Child, Command};

use anyhow::{Context, Result};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// Where the relay and the bench run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pinning {
    /// CPUs the relay may run on; empty = not pinned.
    pub relay: Vec<usize>,
    /// CPUs this process may run on; empty = not pinned.
    pub bench: Vec<usize>,
    /// Why nothing is pinned, when nothing is.
    pub off: Option<String>,
}

impl Pinning {
    /// No pinning, for `reason`.
    pub fn off(reason: impl Into<String>) -> Pinning {
        Pinning {
            relay: Vec::new(),
            bench: Vec::new(),
            off: Some(reason.into()),
        }
    }

    /// The relay on the first CPU this process may use, the bench on the second; off when
    /// `disabled` or fewer than two CPUs are usable.
    pub fn plan(disabled: bool) -> Pinning {
        if disabled {
            return Pinning::off("--no-pin");
        }
        match allowed_cpus() {
            Ok(cpus) => match cpus.as_slice() {
                [relay, bench, ..] => Pinning {
                    relay: vec![*relay],
                    bench: vec![*bench],
                    off: None,
                },
                _ => Pinning::off(format!(
                    "{} usable CPU(s): relay and bench share it",
                    cpus.len()
                )),
            },
            Err(e) => Pinning::off(format!("sched_getaffinity failed: {e:#}")),
        }
    }

    /// These CPUs with the relay allowed `relay` instead.
    pub fn with_relay(mut self, relay: Vec<usize>) -> Pinning {
        if self.off.is_none() {
            self.relay = relay;
        }
        self
    }

    /// A line for a report header.
    pub fn describe(&self) -> String {
        match &self.off {
            Some(why) => format!("not pinned ({why}): relay and bench share every CPU"),
            None => format!(
                "relay pinned to CPU {}, bench (publisher and subscribers) to CPU {} \
                 (sched_setaffinity)",
                list(&self.relay),
                list(&self.bench)
            ),
        }
    }

    /// Pins every thread of this process to the bench's CPUs until the guard drops, which
    /// restores the affinity each thread had. Does nothing when pinning is off.
    pub fn pin_bench(&self) -> Result<BenchPin> {
        if self.off.is_some() || self.bench.is_empty() {
            return Ok(BenchPin { before: None });
        }
        let before = sched_getaffinity(Pid::from_raw(0)).context("sched_getaffinity")?;
        set_all_threads(&cpu_set(&self.bench)?)?;
        Ok(BenchPin {
            before: Some(before),
        })
    }
}

/// Restores this process's threads to their earlier CPUs when dropped.
#[derive(Debug)]
pub struct BenchPin {
    before: Option<CpuSet>,
}

impl Drop for BenchPin {
    fn drop(&mut self) {
        if let Some(set) = &self.before
            && let Err(e) = set_all_threads(set)
        {
            eprintln!("  restoring the bench's CPU affinity: {e:#}");
        }
    }
}

/// Spawns `cmd` with its affinity set to `cpus` (none: inherited as is). The calling thread
/// takes `cpus` for the moment of the spawn and gets its own set back before returning.
pub fn spawn_on(cmd: &mut Command, cpus: &[usize]) -> Result<Child> {
    if cpus.is_empty() {
        return Ok(cmd.spawn()?);
    }
    let me = Pid::from_raw(0);
    let before = sched_getaffinity(me).context("sched_getaffinity")?;
    sched_setaffinity(me, &cpu_set(cpus)?).context("sched_setaffinity")?;
    let child = cmd.spawn();
    sched_setaffinity(me, &before).context("restoring sched_setaffinity")?;
    Ok(child?)
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0)).context("sched_getaffinity")?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

/// The CPUs process `pid` (its main thread) may run on.
pub fn cpus_of(pid: u32) -> Result<Vec<usize>> {
    let raw = i32::try_from(pid).context("pid")?;
    let set = sched_getaffinity(Pid::from_raw(raw)).context("sched_getaffinity")?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

fn cpu_set(cpus: &[usize]) -> Result<CpuSet> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c).with_context(|| format!("CPU {c}"))?;
    }
    Ok(set)
}

/// Sets `set` on every thread of this process (`/proc/self/task`). Threads created meanwhile
/// inherit it from the thread that creates them once that one is set, so a second pass
/// catches any created during the first.
fn set_all_threads(set: &CpuSet) -> Result<()> {
    for _ in 0..2 {
        for entry in std::fs::read_dir("/proc/self/task").context("/proc/self/task")? {
            let Some(tid) = entry?
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            // A thread may have exited since the listing: nothing to pin.
            let _ = sched_setaffinity(Pid::from_raw(tid), set);
        }
    }
    Ok(())
}

/// `0,1`.
pub(crate) fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn plan_pins_relay_and_bench_apart_or_says_why_not() {
        let p = Pinning::plan(false);
        if allowed_cpus().unwrap().len() >= 2 {
            assert!(p.off.is_none());
            assert_ne!(p.relay, p.bench);
            assert!(p.describe().starts_with("relay pinned to CPU"), "{p:?}");
        } else {
            assert!(p.describe().starts_with("not pinned"), "{p:?}");
        }
        assert_eq!(Pinning::plan(true).off.as_deref(), Some("--no-pin"));
    }

    #[test]
    fn bench_pin_applies_to_every_thread_and_is_restored_and_children_start_pinned() {
        let p = Pinning::plan(false);
        if p.off.is_some() {
            return;
        }
        let before = allowed_cpus().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let _ = rx.recv();
            allowed_cpus().unwrap()
        });
        {
            let _g = p.pin_bench().unwrap();
            assert_eq!(allowed_cpus().unwrap(), p.bench);
        }
        assert_eq!(allowed_cpus().unwrap(), before);
        tx.send(()).unwrap();
        assert_eq!(other.join().unwrap(), before);

        // A child spawned on the relay's CPUs runs there; the caller keeps its own. (One test:
        // pinning is process-wide and tests run in parallel.)
        let mut child = spawn_on(Command::new("sleep").arg("5"), &p.relay).unwrap();
        let pinned = cpus_of(child.id()).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(pinned, p.relay);
        assert_eq!(allowed_cpus().unwrap(), before);
    }
}
