//! A MapReduce job's phases, from its progress (paper 002 §IV.A).
//!
//! - Ph1, `map`: from the job's start until the last map task is done (maps
//!   read, compute, sort and spill; the first reducers already fetch);
//! - Ph2, `shuffle`: until the last reducer has fetched all its map outputs
//!   (disk and network only);
//! - Ph3, `reduce`: until the job ends (merge, reduce, write to HDFS).
//!
//! Ph2 is the *non-concurrent* shuffle, the part not overlapped by maps; its
//! share of the job shrinks as the job has more waves of maps (Table II), and
//! when it is too short to pay for a switch the paper runs it with Ph3 as one
//! phase ([`Phases::planned`]).

use crate::error::{Result, SimError};
use hvio_core::time::{ns_to_s, Nanos};
use serde::Serialize;

/// What a job's progress says about its phases: when it started, when each
/// map task finished, when each reducer finished its shuffle (fetched every
/// map output), when it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProgressLog {
    /// When the job started.
    pub start: Nanos,
    /// When each map finished.
    pub maps_done: Vec<Nanos>,
    /// When each reducer finished its shuffle.
    pub shuffles_done: Vec<Nanos>,
    /// When the job ended.
    pub end: Nanos,
}

/// The kind of a phase; its name is what a plan calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseKind {
    /// Ph1: start to the last map done.
    Map,
    /// Ph2: to the last shuffle done.
    Shuffle,
    /// Ph3: to the end.
    Reduce,
    /// Ph2 and Ph3 run as one phase (a short shuffle merged into the reduce).
    ShuffleReduce,
}

impl PhaseKind {
    /// The phase's name in tables.
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::Map => "map",
            PhaseKind::Shuffle => "shuffle",
            PhaseKind::Reduce => "reduce",
            PhaseKind::ShuffleReduce => "shuffle-reduce",
        }
    }
}

/// One phase of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    /// Which phase.
    pub kind: PhaseKind,
    /// When it began.
    pub start: Nanos,
    /// When it ended.
    pub end: Nanos,
}

impl Span {
    /// Its length.
    pub fn duration(&self) -> Nanos {
        self.end - self.start
    }
}

/// A job's three phases: [map, shuffle, reduce], back to back from its start
/// to its end (the shuffle is empty when the job has no reducers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Phases {
    /// Ph1, Ph2 and Ph3.
    pub spans: [Span; 3],
}

fn bad(key: &str, value: impl ToString, reason: &str) -> SimError {
    SimError::invalid("progress log", key, value, reason)
}

impl Phases {
    /// The phases of a logged run; an inconsistent log (no map, a task done
    /// outside the job, a shuffle done before the last map) is an error
    /// naming the entry.
    pub fn from_log(log: &ProgressLog) -> Result<Phases> {
        if log.end < log.start {
            return Err(bad(
                "end",
                log.end,
                &format!("the job ends before it starts ({} ns)", log.start),
            ));
        }
        let outside = |t: &Nanos| *t < log.start || *t > log.end;
        if let Some(t) = log.maps_done.iter().chain(&log.shuffles_done).find(|t| outside(t)) {
            return Err(bad(
                "done",
                t,
                &format!("outside the job ({} to {} ns)", log.start, log.end),
            ));
        }
        let maps_done = *log
            .maps_done
            .iter()
            .max()
            .ok_or_else(|| bad("maps_done", "[]", "no map task finished"))?;
        if let Some(early) = log.shuffles_done.iter().find(|t| **t < maps_done) {
            return Err(bad(
                "shuffles_done",
                early,
                &format!("a shuffle cannot end before the last map ({maps_done} ns): it fetches every map's output"),
            ));
        }
        let shuffle_done = log.shuffles_done.iter().copied().max().unwrap_or(maps_done);
        Ok(Phases {
            spans: [
                Span {
                    kind: PhaseKind::Map,
                    start: log.start,
                    end: maps_done,
                },
                Span {
                    kind: PhaseKind::Shuffle,
                    start: maps_done,
                    end: shuffle_done,
                },
                Span {
                    kind: PhaseKind::Reduce,
                    start: shuffle_done,
                    end: log.end,
                },
            ],
        })
    }

    /// The job's length.
    pub fn job(&self) -> Nanos {
        self.spans[2].end - self.spans[0].start
    }

    /// The non-concurrent shuffle's share of the job in percent (Table II).
    pub fn non_concurrent_shuffle_pct(&self) -> f64 {
        let job = self.job();
        if job == 0 {
            return 0.0;
        }
        ns_to_s(self.spans[1].duration()) / ns_to_s(job) * 100.0
    }

    /// The phases a plan switches between: the three, or — when the shuffle
    /// is shorter than `min_shuffle` (too short to repay a switch) — the map
    /// and one `shuffle-reduce` phase from the last map to the end.
    pub fn planned(&self, min_shuffle: Nanos) -> Vec<Span> {
        let [map, shuffle, reduce] = self.spans;
        if shuffle.duration() < min_shuffle {
            vec![
                map,
                Span {
                    kind: PhaseKind::ShuffleReduce,
                    start: shuffle.start,
                    end: reduce.end,
                },
            ]
        } else {
            self.spans.to_vec()
        }
    }
}

/// The number of map waves (Table II's definition): data blocks over the
/// map slots of the whole cluster.
pub fn waves(blocks: u64, data_nodes: u64, slots_per_node: u64) -> f64 {
    let slots = data_nodes * slots_per_node;
    if slots == 0 {
        return 0.0;
    }
    blocks as f64 / slots as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::time::s;

    fn log() -> ProgressLog {
        ProgressLog {
            start: s(10),
            maps_done: vec![s(50), s(110), s(90)],
            shuffles_done: vec![s(130), s(125)],
            end: s(210),
        }
    }

    #[test]
    fn three_phases_from_the_last_map_and_the_last_shuffle() {
        let phases = Phases::from_log(&log()).unwrap();
        let bounds: Vec<_> = phases.spans.iter().map(|sp| (sp.kind, sp.start, sp.end)).collect();
        assert_eq!(
            bounds,
            vec![
                (PhaseKind::Map, s(10), s(110)),
                (PhaseKind::Shuffle, s(110), s(130)),
                (PhaseKind::Reduce, s(130), s(210)),
            ]
        );
        assert_eq!(phases.job(), s(200));
        assert!((phases.non_concurrent_shuffle_pct() - 10.0).abs() < 1e-12);
    }

    #[test]
    fn a_short_shuffle_is_merged_into_the_reduce() {
        let phases = Phases::from_log(&log()).unwrap();
        // The 20 s shuffle stays a phase of its own against a 20 s minimum...
        assert_eq!(phases.planned(s(20)).len(), 3);
        // ...and is merged against a 21 s one.
        let merged = phases.planned(s(21));
        assert_eq!(merged.len(), 2);
        assert_eq!(
            merged[1],
            Span {
                kind: PhaseKind::ShuffleReduce,
                start: s(110),
                end: s(210)
            }
        );
        assert_eq!(merged[1].kind.name(), "shuffle-reduce");
    }

    #[test]
    fn a_job_without_reducers_has_an_empty_shuffle() {
        let log = ProgressLog {
            start: 0,
            maps_done: vec![s(5)],
            shuffles_done: vec![],
            end: s(6),
        };
        let phases = Phases::from_log(&log).unwrap();
        assert_eq!(phases.spans[1].duration(), 0);
        assert_eq!(
            phases.spans[2],
            Span {
                kind: PhaseKind::Reduce,
                start: s(5),
                end: s(6)
            }
        );
        assert_eq!(phases.non_concurrent_shuffle_pct(), 0.0);
    }

    #[test]
    fn an_inconsistent_log_is_an_error_naming_the_entry() {
        let mut early = log();
        early.shuffles_done.push(s(100));
        let err = Phases::from_log(&early).unwrap_err().to_string();
        assert!(err.contains("shuffles_done") && err.contains("100000000000"), "{err}");

        let none = ProgressLog {
            maps_done: vec![],
            ..log()
        };
        assert!(Phases::from_log(&none)
            .unwrap_err()
            .to_string()
            .contains("no map task finished"));

        let late = ProgressLog {
            maps_done: vec![s(300)],
            ..log()
        };
        assert!(Phases::from_log(&late)
            .unwrap_err()
            .to_string()
            .contains("outside the job"));

        let backwards = ProgressLog { end: s(5), ..log() };
        assert!(Phases::from_log(&backwards)
            .unwrap_err()
            .to_string()
            .contains("ends before it starts"));
    }

    #[test]
    fn waves_are_blocks_over_the_cluster_s_map_slots() {
        // Paper 002's cluster: 16 data nodes (VMs) with 2 map slots, 512 MB
        // of 64 MB blocks each: 128 blocks, 4 waves.
        assert_eq!(waves(128, 16, 2), 4.0);
        assert_eq!(waves(48, 16, 2), 1.5);
        assert_eq!(waves(1, 0, 2), 0.0);
    }
}
