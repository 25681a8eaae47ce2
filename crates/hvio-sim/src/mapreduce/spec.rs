//! What a MapReduce job and its virtual cluster are: sizes, slots, buffers,
//! ratios and CPU costs, with the three benchmarks of paper 002 (§III.A.1)
//! as presets.
//!
//! Where the paper gives a value it is used: 2 map and 2 reduce slots and
//! 1 VCPU per VM, 1 GB of RAM, 512 MB of input per data node, 2 replicas, 4
//! nodes × 4 VMs, 1 Gb/s Ethernet, and the map output of wordcount without a
//! combiner at 1.7 × its input. Where it is silent, the value is Hadoop
//! 0.19's default, as 0.19.1's `conf/hadoop-default.xml` and sources have
//! it: `dfs.block.size` 64 MiB, `io.sort.mb` 100, `io.sort.record.percent`
//! 0.05 (`MapTask` keeps 16 bytes of it per record), `io.sort.spill.percent` 0.80,
//! `io.sort.factor` 10, `mapred.reduce.parallel.copies` 5,
//! `mapred.child.java.opts` -Xmx200m, `mapred.job.shuffle.input.buffer.percent`
//! 0.70, `mapred.job.shuffle.merge.percent` 0.66,
//! `mapred.job.reduce.input.buffer.percent` 0.0, reduces handed out from the
//! job's start (0.19 has no `mapred.reduce.slowstart.completed.maps`; 0.20
//! added it with 0.05), and `ReduceTask`'s
//! `MAX_SINGLE_SHUFFLE_SEGMENT_FRACTION` 0.25: a map output over a quarter
//! of the shuffle buffer goes straight to disk. The JobTracker in the loop
//! ([`Heartbeat`]) is Hadoop 0.19.0's too (its `MRConstants`,
//! `JobTracker.getNextHeartbeatInterval`, `JobQueueTaskScheduler`,
//! `TaskTracker.offerService` and `ReduceTask.ReduceCopier`). The rest is hvio's assumption and marked so below
//! (CPU costs, record sizes, the combiner's reduction, the I/O chunk): change
//! them per job.

use crate::error::{Result, SimError};
use hvio_core::time::{ms, Nanos};
use serde::{Deserialize, Serialize};

const MIB: u64 = 1 << 20;

/// The benchmarks of paper 002.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Benchmark {
    /// Stream sort: map output = input = job output ("heavy").
    Sort,
    /// Wordcount with its combiner: small map output ("light").
    Wordcount,
    /// Wordcount without a combiner: map output ≈ 1.7 × input ("moderate").
    WordcountNoCombiner,
}

impl Benchmark {
    /// Every benchmark.
    pub const ALL: [Benchmark; 3] = [Benchmark::Sort, Benchmark::Wordcount, Benchmark::WordcountNoCombiner];

    /// The name configs and tables use.
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Sort => "sort",
            Benchmark::Wordcount => "wordcount",
            Benchmark::WordcountNoCombiner => "wordcount-no-combiner",
        }
    }

    /// The benchmark called `name`.
    pub fn from_name(name: &str) -> Option<Benchmark> {
        Benchmark::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// The virtual cluster: physical nodes, VMs per node and the network.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSpec {
    /// Physical nodes.
    pub nodes: usize,
    /// VMs per node.
    pub vms_per_node: usize,
    /// Each node's NIC, each direction (bytes per second).
    pub network_bytes_per_s: u64,
    /// Guest RAM (for the guest model's page cache).
    pub vm_ram: u64,
}

impl Default for ClusterSpec {
    /// Paper 002's cluster: 4 nodes × 4 VMs, 1 GB each, 1 Gb/s Ethernet.
    fn default() -> Self {
        ClusterSpec {
            nodes: 4,
            vms_per_node: 4,
            network_bytes_per_s: 125_000_000,
            vm_ram: 1 << 30,
        }
    }
}

impl ClusterSpec {
    /// VMs in the cluster.
    pub fn vms(&self) -> usize {
        self.nodes * self.vms_per_node
    }
}

/// A MapReduce job as every TaskTracker runs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Which job.
    pub benchmark: Benchmark,
    /// HDFS input stored on each data node (VM).
    pub input_per_vm: u64,
    /// `dfs.block.size`: one map task per block.
    pub block: u64,
    /// `dfs.replication` of the job output (the paper stores 2 replicas).
    pub replication: usize,
    /// `mapred.tasktracker.map.tasks.maximum`.
    pub map_slots: usize,
    /// `mapred.tasktracker.reduce.tasks.maximum`.
    pub reduce_slots: usize,
    /// Reduce tasks per VM (`mapred.reduce.tasks` / VMs). Assumed: one wave
    /// filling every reduce slot, as Hadoop's guidance (about the cluster's
    /// reduce capacity) suggests; the paper does not say.
    pub reduces_per_vm: usize,
    /// The share of maps done before the reducers start (Hadoop 0.20's
    /// `mapred.reduce.slowstart.completed.maps`; 0.19 starts them at once).
    pub reduce_slowstart: f64,
    /// Bytes the map collects per input byte (before any combiner).
    pub map_output_ratio: f64,
    /// Bytes a spill keeps per collected byte (the combiner's reduction; 1
    /// without a combiner). Assumed for wordcount: the paper says "small".
    pub combine_ratio: f64,
    /// Job output bytes per reduce input byte.
    pub reduce_output_ratio: f64,
    /// Mean map output record, for the record-accounting limit. Assumed.
    pub record_bytes: u64,
    /// Map CPU per MiB of input (read, map, sort, combine). Assumed.
    pub map_cpu_per_mib: Nanos,
    /// Reduce CPU per MiB of reduce input. Assumed.
    pub reduce_cpu_per_mib: Nanos,
    /// `io.sort.mb`.
    pub io_sort: u64,
    /// `io.sort.record.percent`.
    pub io_sort_record_percent: f64,
    /// `io.sort.spill.percent`.
    pub io_sort_spill_percent: f64,
    /// `io.sort.factor`: segments merged at once.
    pub io_sort_factor: usize,
    /// `mapred.reduce.parallel.copies`.
    pub parallel_copies: usize,
    /// The task JVM heap (`mapred.child.java.opts` -Xmx).
    pub task_heap: u64,
    /// `mapred.job.shuffle.input.buffer.percent`.
    pub shuffle_input_buffer_percent: f64,
    /// `mapred.job.shuffle.merge.percent`.
    pub shuffle_merge_percent: f64,
    /// The size of one file-level read or write the tasks issue (merges
    /// read this much from each segment in turn). Assumed.
    pub io_chunk: u64,
    /// Output chunks a reducer may have in flight to the other replicas
    /// before it waits (HDFS's packet window, 80 × 64 KiB, in chunks).
    pub replica_window: usize,
    /// How tasks and finished maps travel through the JobTracker; `None`:
    /// a task starts the moment its slot is free and a reducer learns of
    /// a finished map the moment it ends.
    pub heartbeat: Option<Heartbeat>,
}

/// Hadoop 0.19.0's JobTracker in the loop, from its sources:
///
/// - every TaskTracker heartbeats every `max(interval_min, 1 s ×
///   (TaskTrackers / cluster_increment + 1))` (`JobTracker.getNextHeartbeatInterval`
///   with `MRConstants.HEARTBEAT_INTERVAL_MIN` 5 s and `CLUSTER_INCREMENT`
///   50: 5 s up to 249 TaskTrackers), and at once when one of its tasks
///   finishes (`TaskTracker.reportTaskFinished` wakes `offerService`);
/// - each heartbeat's answer hands it at most one task, a map before a
///   reduce, and no more maps (reduces) than its slots or the job's
///   remaining maps (reduces) over the TaskTrackers, rounded up
///   (`JobQueueTaskScheduler.assignTasks`);
/// - the JobTracker knows a map is done at that heartbeat; a TaskTracker
///   asks it for map-completion events once per heartbeat interval (its
///   `MapEventsFetcherThread`); a reducer asks its TaskTracker at most once
///   per `reduce_poll` (`ReduceCopier.MIN_POLL_INTERVAL`, 1 s) and, when it
///   has nothing to fetch and nothing in flight, sleeps `reduce_idle`
///   (5 s) first.
///
/// The TaskTrackers' heartbeats and event fetches start spread evenly over
/// one interval (TaskTracker `v` of `n` at `v/n` of it): in Hadoop their
/// phase is wherever their start put them; hvio draws no random numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// `MRConstants.HEARTBEAT_INTERVAL_MIN`.
    pub interval_min: Nanos,
    /// `MRConstants.CLUSTER_INCREMENT`: a second more per this many TaskTrackers.
    pub cluster_increment: usize,
    /// `ReduceCopier.MIN_POLL_INTERVAL`.
    pub reduce_poll: Nanos,
    /// How long a reducer with nothing to fetch sleeps before it asks again.
    pub reduce_idle: Nanos,
}

impl Heartbeat {
    /// Hadoop 0.19.0's values.
    pub fn hadoop_0_19() -> Heartbeat {
        Heartbeat {
            interval_min: ms(5000),
            cluster_increment: 50,
            reduce_poll: ms(1000),
            reduce_idle: ms(5000),
        }
    }

    /// The heartbeat interval of a cluster of `trackers` TaskTrackers.
    pub fn interval(&self, trackers: usize) -> Nanos {
        let per_size = ms(1000) * (trackers / self.cluster_increment.max(1) + 1) as Nanos;
        self.interval_min.max(per_size)
    }
}

impl JobSpec {
    /// A benchmark with the paper's data size and Hadoop's defaults.
    pub fn preset(benchmark: Benchmark) -> JobSpec {
        let base = JobSpec {
            benchmark,
            input_per_vm: 512 * MIB,
            block: 64 * MIB,
            replication: 2,
            map_slots: 2,
            reduce_slots: 2,
            reduces_per_vm: 2,
            reduce_slowstart: 0.0,
            map_output_ratio: 1.0,
            combine_ratio: 1.0,
            reduce_output_ratio: 1.0,
            record_bytes: 100,
            map_cpu_per_mib: ms(20),
            reduce_cpu_per_mib: ms(15),
            io_sort: 100 * MIB,
            io_sort_record_percent: 0.05,
            io_sort_spill_percent: 0.80,
            io_sort_factor: 10,
            parallel_copies: 5,
            task_heap: 200 * MIB,
            shuffle_input_buffer_percent: 0.70,
            shuffle_merge_percent: 0.66,
            io_chunk: MIB,
            replica_window: 5,
            heartbeat: Some(Heartbeat::hadoop_0_19()),
        };
        match benchmark {
            Benchmark::Sort => base,
            // (word, 1) pairs: 1.7 × the input (the paper's figure for the
            // uncombined output), short records, more CPU per byte.
            Benchmark::WordcountNoCombiner => JobSpec {
                map_output_ratio: 1.7,
                record_bytes: 12,
                map_cpu_per_mib: ms(45),
                reduce_output_ratio: 0.05,
                ..base
            },
            Benchmark::Wordcount => JobSpec {
                map_output_ratio: 1.7,
                combine_ratio: 0.05,
                record_bytes: 12,
                map_cpu_per_mib: ms(50),
                reduce_output_ratio: 0.5,
                ..base
            },
        }
    }

    /// Map tasks per VM (the last block may be short).
    pub fn maps_per_vm(&self) -> u64 {
        self.input_per_vm.div_ceil(self.block)
    }

    /// Collected bytes at which a spill starts: the spill share of the data
    /// buffer or of the record accounting, whichever is reached first.
    pub fn spill_threshold(&self) -> u64 {
        let data = (self.io_sort as f64 * (1.0 - self.io_sort_record_percent)) * self.io_sort_spill_percent;
        let records = (self.io_sort as f64 * self.io_sort_record_percent / 16.0) * self.io_sort_spill_percent;
        (data.min(records * self.record_bytes as f64) as u64).max(1)
    }

    /// Collected bytes the sort buffer holds before the map blocks.
    pub fn buffer_capacity(&self) -> u64 {
        let data = self.io_sort as f64 * (1.0 - self.io_sort_record_percent);
        let records = self.io_sort as f64 * self.io_sort_record_percent / 16.0 * self.record_bytes as f64;
        (data.min(records) as u64).max(self.spill_threshold())
    }

    /// The reducer's in-memory shuffle buffer.
    pub fn shuffle_buffer(&self) -> u64 {
        (self.task_heap as f64 * self.shuffle_input_buffer_percent) as u64
    }

    /// Check every value; the error names the key and the value.
    pub fn check(&self, cluster: &ClusterSpec) -> Result<()> {
        let ctx = "mapreduce";
        let positive = [
            ("input_per_vm", self.input_per_vm),
            ("block", self.block),
            ("replication", self.replication as u64),
            ("map_slots", self.map_slots as u64),
            ("reduce_slots", self.reduce_slots as u64),
            ("record_bytes", self.record_bytes),
            ("io_sort", self.io_sort),
            ("parallel_copies", self.parallel_copies as u64),
            ("task_heap", self.task_heap),
            ("io_chunk", self.io_chunk),
            ("replica_window", self.replica_window as u64),
            ("nodes", cluster.nodes as u64),
            ("vms_per_node", cluster.vms_per_node as u64),
            ("network_bytes_per_s", cluster.network_bytes_per_s),
        ];
        if let Some((key, value)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(SimError::invalid(ctx, key, value, "must be at least 1"));
        }
        if let Some(hb) = &self.heartbeat {
            let times = [
                ("heartbeat.interval_min", hb.interval_min),
                ("heartbeat.reduce_poll", hb.reduce_poll),
                ("heartbeat.reduce_idle", hb.reduce_idle),
                ("heartbeat.cluster_increment", hb.cluster_increment as u64),
            ];
            if let Some((key, value)) = times.iter().find(|(_, v)| *v == 0) {
                return Err(SimError::invalid(ctx, key, value, "must be at least 1"));
            }
        }
        if self.io_sort_factor < 2 {
            return Err(SimError::invalid(
                ctx,
                "io_sort_factor",
                self.io_sort_factor,
                "a merge needs at least 2 segments",
            ));
        }
        let fractions = [
            ("reduce_slowstart", self.reduce_slowstart),
            ("io_sort_record_percent", self.io_sort_record_percent),
            ("io_sort_spill_percent", self.io_sort_spill_percent),
            ("shuffle_input_buffer_percent", self.shuffle_input_buffer_percent),
            ("shuffle_merge_percent", self.shuffle_merge_percent),
            ("combine_ratio", self.combine_ratio),
        ];
        if let Some((key, value)) = fractions.iter().find(|(_, v)| !(0.0..=1.0).contains(v)) {
            return Err(SimError::invalid(ctx, key, value, "a share between 0 and 1"));
        }
        if self.io_sort_record_percent >= 1.0 || self.io_sort_spill_percent == 0.0 {
            return Err(SimError::invalid(
                ctx,
                "io_sort_spill_percent",
                self.io_sort_spill_percent,
                "the sort buffer needs room for data (record percent below 1, spill percent above 0)",
            ));
        }
        let ratios = [
            ("map_output_ratio", self.map_output_ratio),
            ("reduce_output_ratio", self.reduce_output_ratio),
        ];
        if let Some((key, value)) = ratios.iter().find(|(_, v)| !v.is_finite() || *v < 0.0 || *v > 1000.0) {
            return Err(SimError::invalid(
                ctx,
                key,
                value,
                "a ratio of bytes between 0 and 1000",
            ));
        }
        if self.replication > cluster.vms() {
            return Err(SimError::invalid(
                ctx,
                "replication",
                self.replication,
                format!("more replicas than the cluster's {} data nodes", cluster.vms()),
            ));
        }
        if self.reduces_per_vm > self.reduce_slots {
            return Err(SimError::invalid(
                ctx,
                "reduces_per_vm",
                self.reduces_per_vm,
                format!(
                    "more than the {} reduce slots of a VM (the model runs one wave of reduces)",
                    self.reduce_slots
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_follow_the_paper_and_hadoop_defaults() {
        let sort = JobSpec::preset(Benchmark::Sort);
        assert_eq!(sort.maps_per_vm(), 8);
        assert_eq!(sort.shuffle_buffer(), 140 * MIB);
        // 100-byte records: the record accounting (0.05 × 100 MiB / 16 B =
        // 327 680 records) fills before the 95 MiB data buffer does.
        assert_eq!(sort.spill_threshold(), (327_680.0 * 0.8 * 100.0) as u64);
        assert!(sort.spill_threshold() < sort.buffer_capacity());
        let wc = JobSpec::preset(Benchmark::WordcountNoCombiner);
        assert_eq!(wc.map_output_ratio, 1.7);
        assert_eq!(wc.combine_ratio, 1.0);
        assert!(JobSpec::preset(Benchmark::Wordcount).combine_ratio < 1.0);
        for b in Benchmark::ALL {
            assert_eq!(Benchmark::from_name(b.name()), Some(b));
            JobSpec::preset(b).check(&ClusterSpec::default()).unwrap();
        }
    }

    #[test]
    fn bad_values_are_named() {
        let cluster = ClusterSpec::default();
        let err = |spec: JobSpec| spec.check(&cluster).unwrap_err().to_string();
        let sort = JobSpec::preset(Benchmark::Sort);
        assert!(err(JobSpec {
            block: 0,
            ..sort.clone()
        })
        .contains("block"));
        assert!(err(JobSpec {
            io_sort_factor: 1,
            ..sort.clone()
        })
        .contains("io_sort_factor"));
        assert!(err(JobSpec {
            io_sort_spill_percent: 1.5,
            ..sort.clone()
        })
        .contains("io_sort_spill_percent"));
        assert!(err(JobSpec {
            replication: 17,
            ..sort.clone()
        })
        .contains("replication"));
        assert!(err(JobSpec {
            reduces_per_vm: 3,
            ..sort.clone()
        })
        .contains("reduces_per_vm"));
        assert!(err(JobSpec {
            map_output_ratio: f64::NAN,
            ..sort.clone()
        })
        .contains("map_output_ratio"));
        let none = ClusterSpec {
            nodes: 0,
            ..cluster.clone()
        };
        assert!(sort.check(&none).unwrap_err().to_string().contains("nodes"));
    }
}
