//! The online mode: the host scheduler chosen by the request mix, window
//! by window — paper 002's future work (§VII: "a fine-grained control
//! method to dynamically switch" the schedulers, "based on the status of
//! the VMs' I/O", instead of phases found from the job's progress).
//!
//! Each window (`window_ms`) the engine counts the requests that arrive
//! (reads and writes; flushes and discards are not part of the mix) and
//! measures three things: the **read share** (reads / (reads + writes), by
//! count), the **sequential share** (requests that start within
//! `seq_distance_kib` of where the same VM's previous request in the same
//! direction ended: BFQ's test, `BFQQ_SEEK_THR`, 800 sectors, by default),
//! and the **mean queue depth** (requests queued or in flight, averaged
//! over the window's time). The first `[[online.class]]`, in file order,
//! whose ranges all hold is the window's class; a window with fewer than
//! `min_requests` requests, or that no class takes, keeps the current one.
//! A new class must win `hold_windows` windows in a row before the daemon
//! switches to its scheduler (hysteresis: one odd window does not flap the
//! scheduler), and it does not switch while another switch drains.
//!
//! ```toml
//! [online]
//! window_ms = 1000
//! hold_windows = 3
//!
//! [[online.class]]
//! name = "map"             # sequential reads, spill writes
//! host = "anticipatory"
//! read_share = [0.5, 1.0]
//! sequential = [0.5, 1.0]
//!
//! [[online.class]]
//! name = "reduce"          # the output written
//! host = "deadline"
//! read_share = [0.0, 0.3]
//!
//! [[online.class]]
//! name = "shuffle"         # anything else: map outputs fetched, merged
//! host = "cfq"
//! ```

use hvio_core::{ConfigError, Nanos, Op, ParamValues, NS_PER_MS, SECTOR_BYTES};
use hvio_sched::SwitchPolicy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[online]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnlineConfig {
    /// Window length, ms (default 1000).
    #[serde(default = "default_window_ms")]
    pub window_ms: u64,
    /// Windows in a row a class must win before the switch (default 3).
    #[serde(default = "default_hold")]
    pub hold_windows: u32,
    /// Fewer requests in a window make it `idle` (default 20).
    #[serde(default = "default_min_requests")]
    pub min_requests: u64,
    /// A request within this distance of its VM's previous one of the same direction is sequential, KiB (default 400, BFQ's 800 sectors).
    #[serde(default = "default_seq_kib")]
    pub seq_distance_kib: u64,
    /// Switch policy (`drain` by default).
    pub policy: Option<String>,
    /// The classes, tried in order.
    #[serde(default, rename = "class")]
    pub classes: Vec<ClassTable>,
}

fn default_window_ms() -> u64 {
    1000
}
fn default_hold() -> u32 {
    3
}
fn default_min_requests() -> u64 {
    20
}
/// BFQ's `BFQQ_SEEK_THR`: 800 sectors of 512 bytes.
fn default_seq_kib() -> u64 {
    400
}

/// An `[[online.class]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassTable {
    /// The class's name (`map`, `shuffle`, `reduce`, ...).
    pub name: String,
    /// The host scheduler for it.
    pub host: String,
    /// Its tunables.
    #[serde(default)]
    pub params: ParamValues,
    /// `[min, max]` share of reads (default any).
    pub read_share: Option<[f64; 2]>,
    /// `[min, max]` share of sequential requests (default any).
    pub sequential: Option<[f64; 2]>,
    /// `[min, max]` mean requests outstanding (default any).
    pub queue_depth: Option<[f64; 2]>,
}

/// A checked class: where the mix must fall, and the scheduler for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Class {
    /// The class's name.
    pub name: String,
    /// The host scheduler for it.
    pub host: String,
    /// Its tunables.
    pub params: ParamValues,
    /// `[min, max]` share of reads.
    pub read_share: [f64; 2],
    /// `[min, max]` share of sequential requests.
    pub sequential: [f64; 2],
    /// `[min, max]` mean requests outstanding.
    pub queue_depth: [f64; 2],
}

impl Class {
    fn takes(&self, m: &Mix) -> bool {
        let within = |r: [f64; 2], v: f64| r[0] <= v && v <= r[1];
        within(self.read_share, m.read_share)
            && within(self.sequential, m.sequential)
            && within(self.queue_depth, m.queue_depth)
    }
}

/// The checked `[online]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Online {
    /// Window length.
    pub window: Nanos,
    /// Windows in a row a class must win before the switch.
    pub hold_windows: u32,
    /// Fewer requests in a window make it idle.
    pub min_requests: u64,
    /// In sectors.
    pub seq_distance: u64,
    /// Switch policy.
    pub policy: SwitchPolicy,
    /// The classes, tried in order.
    pub classes: Vec<Class>,
}

/// Labels a window gets besides the classes' names.
const IDLE: &str = "idle";
const UNCLASSIFIED: &str = "unclassified";

impl OnlineConfig {
    /// Check every key; errors name `[online]` or `[[online.class]] #n`, the key and the value.
    pub fn check(&self) -> Result<Online, ConfigError> {
        let range = |key: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(ConfigError::invalid(
                    "[online]",
                    key,
                    v,
                    format!("must be between {lo} and {hi}"),
                ))
            }
        };
        range("window_ms", self.window_ms, 10, 3_600_000)?;
        range("hold_windows", self.hold_windows.into(), 1, 1000)?;
        range("min_requests", self.min_requests, 1, 1 << 32)?;
        range("seq_distance_kib", self.seq_distance_kib, 0, 1 << 30)?;
        let policy = match &self.policy {
            None => SwitchPolicy::Drain,
            Some(p) => p
                .parse()
                .map_err(|e: String| ConfigError::invalid("[online]", "policy", format!("\"{p}\""), e))?,
        };
        if self.classes.is_empty() {
            return Err(ConfigError::invalid(
                "[online]",
                "class",
                "(missing)",
                "give at least one [[online.class]]: a name, the host scheduler, and the mix it takes",
            ));
        }
        let mut classes: Vec<Class> = Vec::with_capacity(self.classes.len());
        for (i, c) in self.classes.iter().enumerate() {
            let ctx = format!("[[online.class]] #{}", i + 1);
            if c.name.is_empty()
                || c.name.len() > 64
                || !c
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
                || [IDLE, UNCLASSIFIED].contains(&c.name.as_str())
            {
                return Err(ConfigError::invalid(
                    &ctx,
                    "name",
                    format!("\"{}\"", c.name),
                    "use 1-64 characters of A-Z a-z 0-9 - _ . (not `idle` or `unclassified`: windows are counted under those)",
                ));
            }
            if classes.iter().any(|k| k.name == c.name) {
                return Err(ConfigError::invalid(
                    &ctx,
                    "name",
                    format!("\"{}\"", c.name),
                    "names two classes",
                ));
            }
            let spec = hvio_sched::spec(&c.host).map_err(|_| {
                ConfigError::invalid(
                    &ctx,
                    "host",
                    format!("\"{}\"", c.host),
                    format!("no such scheduler (known: {})", hvio_sched::names().join(", ")),
                )
            })?;
            hvio_core::Params::resolve(&format!("{ctx} params of `{}`", c.host), spec.params, &c.params)?;
            let share = |key: &str, r: Option<[f64; 2]>, max: f64| -> Result<[f64; 2], ConfigError> {
                let r = r.unwrap_or([0.0, max]);
                if r[0].is_finite() && r[0] >= 0.0 && r[0] <= r[1] && r[1] <= max {
                    Ok(r)
                } else {
                    Err(ConfigError::invalid(
                        &ctx,
                        key,
                        format!("[{}, {}]", r[0], r[1]),
                        if max == 1.0 {
                            "a range [low, high] within [0, 1]".to_string()
                        } else {
                            "a range [low, high] of 0 or more".to_string()
                        },
                    ))
                }
            };
            classes.push(Class {
                name: c.name.clone(),
                host: c.host.clone(),
                params: c.params.clone(),
                read_share: share("read_share", c.read_share, 1.0)?,
                sequential: share("sequential", c.sequential, 1.0)?,
                queue_depth: share("queue_depth", c.queue_depth, f64::MAX)?,
            });
        }
        Ok(Online {
            window: self.window_ms * NS_PER_MS,
            hold_windows: self.hold_windows,
            min_requests: self.min_requests,
            seq_distance: self.seq_distance_kib * 1024 / SECTOR_BYTES,
            policy,
            classes,
        })
    }
}

/// One window's request mix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Mix {
    /// Reads and writes that arrived.
    pub requests: u64,
    /// Reads over reads and writes.
    pub read_share: f64,
    /// Sequential requests over all.
    pub sequential: f64,
    /// Mean requests outstanding, time-weighted.
    pub queue_depth: f64,
}

/// The online mode at run time.
#[derive(Debug)]
pub struct Watcher {
    cfg: Online,
    window_start: Nanos,
    reads: u64,
    writes: u64,
    sequential: u64,
    /// Where each VM's last read and last write ended (sector).
    last_end: BTreeMap<(u32, bool), u64>,
    /// ∫ outstanding dt over the window, and the outstanding count since `depth_at`.
    depth_area: u128,
    depth: usize,
    depth_at: Nanos,
    /// The class whose scheduler runs (none until the first switch).
    current: Option<usize>,
    /// The class winning windows, and for how many in a row.
    candidate: Option<usize>,
    streak: u32,
    last: Option<(Mix, String)>,
    windows: BTreeMap<String, u64>,
}

/// `GET /status`'s `online`.
#[derive(Debug, Clone, Serialize)]
pub struct OnlineStatus {
    /// Window length, ms.
    pub window_ms: u64,
    /// Windows in a row a class must win.
    pub hold_windows: u32,
    /// Fewer requests make a window idle.
    pub min_requests: u64,
    /// Sequential distance, KiB.
    pub seq_distance_kib: u64,
    /// The class whose scheduler runs.
    pub class: Option<String>,
    /// The class winning windows and how many in a row.
    pub candidate: Option<String>,
    /// How many windows in a row it has won.
    pub streak: u32,
    /// The last whole window's mix and what it was counted as.
    pub last_window: Option<Mix>,
    /// What the last window was counted as.
    pub last_window_class: Option<String>,
    /// Windows by class (and `idle`, `unclassified`).
    pub windows: BTreeMap<String, u64>,
    /// The classes.
    pub classes: Vec<Class>,
}

impl Watcher {
    /// A watcher starting its first window at `now`.
    pub fn new(cfg: Online, now: Nanos) -> Watcher {
        let mut windows: BTreeMap<String, u64> = cfg.classes.iter().map(|c| (c.name.clone(), 0)).collect();
        windows.insert(IDLE.into(), 0);
        windows.insert(UNCLASSIFIED.into(), 0);
        Watcher {
            cfg,
            window_start: now,
            reads: 0,
            writes: 0,
            sequential: 0,
            last_end: BTreeMap::new(),
            depth_area: 0,
            depth: 0,
            depth_at: now,
            current: None,
            candidate: None,
            streak: 0,
            last: None,
            windows,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &Online {
        &self.cfg
    }

    /// Class `i`.
    pub fn class(&self, i: usize) -> &Class {
        &self.cfg.classes[i]
    }

    /// A request of `vm` arrived.
    pub fn arrival(&mut self, vm: u32, op: Op, sector: u64, sectors: u32) {
        let read = match op {
            Op::Read => true,
            Op::Write => false,
            _ => return,
        };
        if read {
            self.reads += 1;
        } else {
            self.writes += 1;
        }
        let end = self.last_end.insert((vm, read), sector + u64::from(sectors));
        if end.is_some_and(|e| e.abs_diff(sector) <= self.cfg.seq_distance) {
            self.sequential += 1;
        }
    }

    /// Requests queued or in flight are `outstanding` from `now` on.
    pub fn outstanding(&mut self, now: Nanos, outstanding: usize) {
        self.depth_area += u128::from(now.saturating_sub(self.depth_at)) * self.depth as u128;
        self.depth = outstanding;
        self.depth_at = now;
    }

    /// When the current window closes.
    pub fn window_end(&self) -> Nanos {
        self.window_start + self.cfg.window
    }

    /// Close the window if `now` is past it; the class to switch to, if
    /// one has won `hold_windows` windows in a row and is not the current one.
    pub fn roll(&mut self, now: Nanos) -> Option<usize> {
        if now < self.window_end() {
            return None;
        }
        let end = self.window_end();
        self.outstanding(end.min(now), self.depth);
        let requests = self.reads + self.writes;
        let mix = Mix {
            requests,
            read_share: if requests > 0 {
                self.reads as f64 / requests as f64
            } else {
                0.0
            },
            sequential: if requests > 0 {
                self.sequential as f64 / requests as f64
            } else {
                0.0
            },
            queue_depth: self.depth_area as f64 / self.cfg.window as f64,
        };
        let class = if requests < self.cfg.min_requests {
            None
        } else {
            self.cfg.classes.iter().position(|c| c.takes(&mix))
        };
        let label = match class {
            Some(i) => self.cfg.classes[i].name.clone(),
            None if requests < self.cfg.min_requests => IDLE.into(),
            None => UNCLASSIFIED.into(),
        };
        *self.windows.entry(label.clone()).or_default() += 1;
        self.last = Some((mix, label));
        // Windows with nothing in them (the engine slept through them) are idle too.
        let skipped = (now - end) / self.cfg.window;
        *self.windows.entry(IDLE.into()).or_default() += skipped;
        self.window_start = end + skipped * self.cfg.window;
        self.reads = 0;
        self.writes = 0;
        self.sequential = 0;
        self.depth_area = 0;
        self.depth_at = self.depth_at.max(self.window_start);
        match class {
            // An idle or unclassified window neither confirms nor breaks a streak.
            None => {}
            Some(c) if Some(c) == self.current => {
                self.candidate = None;
                self.streak = 0;
            }
            Some(c) if Some(c) == self.candidate => self.streak += 1,
            Some(c) => {
                self.candidate = Some(c);
                self.streak = 1;
            }
        }
        self.due()
    }

    /// The class the hysteresis has let through and not yet switched to.
    pub fn due(&self) -> Option<usize> {
        self.candidate.filter(|_| self.streak >= self.cfg.hold_windows)
    }

    /// The daemon switched to class `i`'s scheduler (or already ran it).
    pub fn switched(&mut self, i: usize) {
        self.current = Some(i);
        self.candidate = None;
        self.streak = 0;
    }

    /// What `GET /status` shows.
    pub fn status(&self) -> OnlineStatus {
        let name = |i: Option<usize>| i.map(|i| self.cfg.classes[i].name.clone());
        OnlineStatus {
            window_ms: self.cfg.window / NS_PER_MS,
            hold_windows: self.cfg.hold_windows,
            min_requests: self.cfg.min_requests,
            seq_distance_kib: self.cfg.seq_distance * SECTOR_BYTES / 1024,
            class: name(self.current),
            candidate: name(self.candidate),
            streak: self.streak,
            last_window: self.last.as_ref().map(|l| l.0),
            last_window_class: self.last.as_ref().map(|l| l.1.clone()),
            windows: self.windows.clone(),
            classes: self.cfg.classes.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLASSES: &str = r#"
        window_ms = 100
        hold_windows = 2
        min_requests = 4
        [[class]]
        name = "map"
        host = "anticipatory"
        read_share = [0.5, 1.0]
        sequential = [0.5, 1.0]
        [[class]]
        name = "reduce"
        host = "deadline"
        read_share = [0.0, 0.3]
        [[class]]
        name = "shuffle"
        host = "cfq"
        queue_depth = [2.0, 1e9]
    "#;

    fn online(text: &str) -> Result<Online, ConfigError> {
        toml::from_str::<OnlineConfig>(text).unwrap().check()
    }

    const W: Nanos = 100 * NS_PER_MS;

    /// `n` requests of `op` in one window of `w`: sequential or 1 GiB apart.
    fn feed(w: &mut Watcher, op: Op, n: u64, seq: bool) {
        for i in 0..n {
            let sector = if seq { i * 8 } else { i * (1 << 21) + 7 };
            w.arrival(0, op, sector, 8);
        }
    }

    #[test]
    fn windows_are_classified_by_the_first_class_that_takes_them() {
        let mut w = Watcher::new(online(CLASSES).unwrap(), 0);
        feed(&mut w, Op::Read, 20, true);
        assert_eq!(w.roll(W - 1), None, "the window is still open");
        assert_eq!(w.roll(W), None, "one window is not enough (hold_windows = 2)");
        assert_eq!(w.status().last_window_class.as_deref(), Some("map"));
        let mix = w.status().last_window.unwrap();
        assert_eq!((mix.requests, mix.read_share), (20, 1.0));
        assert!(mix.sequential > 0.9, "{mix:?}");
        feed(&mut w, Op::Read, 20, true);
        assert_eq!(w.roll(2 * W), Some(0));
        w.switched(0);
        // Writes: reduce. Random reads at depth 0: no class takes them.
        feed(&mut w, Op::Write, 20, true);
        w.roll(3 * W);
        assert_eq!(w.status().last_window_class.as_deref(), Some("reduce"));
        feed(&mut w, Op::Read, 20, false);
        assert_eq!(w.roll(4 * W), None);
        assert_eq!(w.status().last_window_class.as_deref(), Some("unclassified"));
        // Random reads with 4 outstanding over the whole window: shuffle.
        w.outstanding(4 * W, 4);
        feed(&mut w, Op::Read, 20, false);
        w.roll(5 * W);
        let st = w.status();
        assert_eq!(st.last_window_class.as_deref(), Some("shuffle"));
        assert!((st.last_window.unwrap().queue_depth - 4.0).abs() < 1e-9, "{st:?}");
        assert_eq!(st.windows["map"], 2);
    }

    #[test]
    fn hysteresis_needs_windows_in_a_row_and_idle_windows_do_not_count() {
        let mut w = Watcher::new(online(CLASSES).unwrap(), 0);
        w.switched(0);
        // One reduce window, one map window: the streak breaks, no switch.
        feed(&mut w, Op::Write, 20, true);
        assert_eq!(w.roll(W), None);
        feed(&mut w, Op::Read, 20, true);
        assert_eq!(w.roll(2 * W), None);
        assert_eq!(w.status().candidate, None);
        // Reduce, an idle window (3 requests < min_requests), reduce: switch.
        feed(&mut w, Op::Write, 20, true);
        assert_eq!(w.roll(3 * W), None);
        feed(&mut w, Op::Write, 3, true);
        assert_eq!(w.roll(4 * W), None);
        feed(&mut w, Op::Write, 20, true);
        assert_eq!(w.roll(5 * W), Some(1));
        // Windows slept through count as idle; the next window starts on the grid.
        w.switched(1);
        assert_eq!(w.roll(9 * W + 5), None);
        assert_eq!(w.status().windows["idle"], 1 + 4);
        assert_eq!(w.window_end(), 10 * W);
    }

    #[test]
    fn bad_values_name_the_key_and_value() {
        for (text, want) in [
            (
                "window_ms = 5\n[[class]]\nname = \"a\"\nhost = \"cfq\"",
                vec!["[online]", "window_ms", "5"],
            ),
            (
                "hold_windows = 0\n[[class]]\nname = \"a\"\nhost = \"cfq\"",
                vec!["hold_windows", "0"],
            ),
            (
                "policy = \"wait\"\n[[class]]\nname = \"a\"\nhost = \"cfq\"",
                vec!["policy", "wait"],
            ),
            ("window_ms = 100", vec!["class", "missing"]),
            (
                "[[class]]\nname = \"a\"\nhost = \"fifo\"",
                vec!["[[online.class]] #1", "host", "fifo", "deadline"],
            ),
            (
                "[[class]]\nname = \"a\"\nhost = \"cfq\"\nread_share = [0.8, 0.2]",
                vec!["#1", "read_share", "[0.8, 0.2]"],
            ),
            (
                "[[class]]\nname = \"a\"\nhost = \"cfq\"\nsequential = [0, 1.5]",
                vec!["sequential", "1.5"],
            ),
            (
                "[[class]]\nname = \"a\"\nhost = \"cfq\"\n[[class]]\nname = \"a\"\nhost = \"noop\"",
                vec!["#2", "name", "\"a\""],
            ),
            ("[[class]]\nname = \"idle\"\nhost = \"cfq\"", vec!["#1", "name", "idle"]),
            (
                "[[class]]\nname = \"a\"\nhost = \"cfq\"\nparams = { quantum = 0 }",
                vec!["[[online.class]] #1 params of `cfq`", "quantum"],
            ),
        ] {
            let e = online(text).unwrap_err().to_string();
            for s in want {
                assert!(e.contains(s), "{text}\n→ {e}\n(missing {s})");
            }
        }
    }
}
