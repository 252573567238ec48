//! Process CPU time and resident memory from `/proc` (Linux).

use std::sync::OnceLock;

use anyhow::{Context, Result, bail};

/// Clock ticks per second of the `utime` / `stime` fields (`getconf CLK_TCK`, 100 if that
/// cannot be run).
pub fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|t| *t > 0)
            .unwrap_or(100)
    })
}

/// User plus system CPU seconds a process has used (all its threads), from
/// `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    Ok(parse_cpu_ticks(&stat)? as f64 / clock_ticks() as f64)
}

/// `utime + stime` in clock ticks from the text of `/proc/<pid>/stat`.
pub fn parse_cpu_ticks(stat: &str) -> Result<u64> {
    // The command name (field 2) is in parentheses and may contain spaces: fields after the
    // last ')' start with field 3 (state); utime and stime are fields 14 and 15.
    let rest = stat
        .rfind(')')
        .and_then(|i| stat.get(i + 1..))
        .context("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> Result<u64> {
        fields
            .get(n - 3)
            .context("short /proc stat")?
            .parse::<u64>()
            .context("non-numeric /proc stat field")
    };
    Ok(field(14)? + field(15)?)
}

/// Resident memory of a process in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    parse_rss_kib(&status)
}

/// `VmRSS` in KiB from the text of `/proc/<pid>/status`.
pub fn parse_rss_kib(status: &str) -> Result<u64> {
    for line in status.lines() {
        if let Some(v) = line.strip_prefix("VmRSS:") {
            let kb = v.trim().trim_end_matches("kB").trim();
            return kb.parse().context("non-numeric VmRSS");
        }
    }
    bail!("no VmRSS line")
}

/// Resident memory of this process in KiB.
pub fn self_rss_kib() -> Result<u64> {
    rss_kib(std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_and_status() {
        let stat = "42 (moq relay) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 1 2 3";
        assert_eq!(parse_cpu_ticks(stat).ok(), Some(325));
        assert!(parse_cpu_ticks("garbage").is_err());
        let status = "Name:\tx\nVmPeak:\t 100 kB\nVmRSS:\t   2048 kB\n";
        assert_eq!(parse_rss_kib(status).ok(), Some(2048));
        assert!(parse_rss_kib("Name: x\n").is_err());
        assert!(cpu_seconds(std::process::id()).is_ok());
        assert!(self_rss_kib().is_ok_and(|r| r > 0));
    }
}
