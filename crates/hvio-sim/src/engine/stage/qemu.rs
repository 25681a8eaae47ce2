//! QEMU's I/O path as a throughput cost: the event-loop thread that serves a
//! VM's virtqueue (paper 001 §II.A, "IO operations in KVM/QEMU"; its QEMU
//! 2.5 ran virtio-blk in the main loop, one thread per VM).
//!
//! A VM with `qemu_path` has [`IoThreads`] between its host-path stage and
//! the host scheduler. Guest requests reach the stage as before; what the
//! stage sends ([`PathCx::send`]) waits for a thread. When a pass begins the
//! stage hears of it first ([`HostPath::pass_begins`]: the reshaping stage
//! hands the guest requests the pass pops to the sequentializer as one
//! batch); then the thread takes everything waiting: the guest requests that
//! reached the host since the last pass began (QEMU pops every request the
//! virtqueue holds), and the stage's host requests, merged as
//! `virtio_blk_submit_multireq` merges them ([`multireq`]). The thread is busy for the pass's cost (per guest
//! request, per host request, per byte); at its end the host requests go
//! to the host scheduler together (QEMU's `blk_io_plug` / `blk_io_unplug`
//! around the pass: one `io_submit`). Work that arrives meanwhile waits
//! for the next pass, so the thread is a queue whose service rate caps the
//! VM's requests per second, and requests that wait together merge more.
//!
//! The completion side's work (`io_getevents`, the callback, the used-ring
//! push, the guest's notification) is charged in the pass that submits the
//! request: the same busy time per request, so the same ceiling on
//! throughput, but a completion itself is not delayed by a busy thread.

use super::*;
use crate::config::QemuPathConfig;

/// Requests `virtio_blk_submit_multireq` merges at most at once: QEMU's
/// `VIRTIO_BLK_MAX_MERGE_REQS`. A pass hands its reads and writes to the
/// merge in groups that end at this many, at a change of direction and at
/// a flush (`virtio_blk_handle_request`, `virtio_blk_handle_flush`).
pub(crate) const MULTIREQ_MAX: usize = 32;

/// `virtio_blk_submit_multireq` over a pass's host requests, in the order
/// the stage sent them: the guest's reads and writes (`guest(rq)`) in runs
/// of one direction, at most [`MULTIREQ_MAX`] long, each sorted by sector,
/// with contiguous neighbours joined (up to `u32::MAX` sectors); a flush or
/// a request of the stage's own ends a run and leaves alone. Returns the
/// host requests and, for each join, (the id of the request it joined, the
/// id of the request joined to it).
pub(crate) fn multireq(batch: Vec<Request>, guest: impl Fn(&Request) -> bool) -> (Vec<Request>, Vec<(u64, u64)>) {
    let mut out = Vec::with_capacity(batch.len());
    let mut joins = Vec::new();
    let mut run: Vec<Request> = Vec::new();
    let flush = |run: &mut Vec<Request>, out: &mut Vec<Request>, joins: &mut Vec<(u64, u64)>| {
        // QEMU's qsort by sector; hvio's sort is stable, so equal sectors keep their order.
        run.sort_by_key(|r| r.sector);
        let mut cur: Option<Request> = None;
        for rq in run.drain(..) {
            if let Some(c) = &mut cur {
                if c.sector + c.sectors as u64 == rq.sector && c.sectors.checked_add(rq.sectors).is_some() {
                    c.sectors += rq.sectors;
                    joins.push((c.id, rq.id));
                    continue;
                }
            }
            out.extend(cur.replace(rq));
        }
        out.extend(cur);
    };
    for rq in batch {
        let mergeable = guest(&rq) && matches!(rq.op, Op::Read | Op::Write);
        if !mergeable {
            flush(&mut run, &mut out, &mut joins);
            out.push(rq);
            continue;
        }
        if run.len() == MULTIREQ_MAX || run.first().is_some_and(|r| r.op != rq.op) {
            flush(&mut run, &mut out, &mut joins);
        }
        run.push(rq);
    }
    flush(&mut run, &mut out, &mut joins);
    (out, joins)
}

/// A pass in progress: when it ends, and the host requests it submits then.
struct Pass {
    end: Nanos,
    requests: Vec<Request>,
}

/// A VM's QEMU event-loop threads (`qemu_path`).
pub(crate) struct IoThreads {
    cfg: QemuPathConfig,
    /// Guest requests that reached the host since the last pass began.
    popped: u64,
    /// Host requests the stage sent since the last pass began, in order.
    waiting: Vec<Request>,
    /// Whether a pass is asked for at this instant ([`Ev::QemuPass`]).
    pass_due: bool,
    passes: Vec<Pass>,
    counts: Counts,
}

/// What a VM's threads did, for the run's counters.
#[derive(Default)]
struct Counts {
    passes: u64,
    guest_requests: u64,
    host_requests: u64,
    multireq_joins: u64,
    busy_ns: u64,
}

impl IoThreads {
    pub(crate) fn new(cfg: QemuPathConfig) -> IoThreads {
        IoThreads {
            cfg,
            popped: 0,
            waiting: Vec::new(),
            pass_due: false,
            passes: Vec::new(),
            counts: Counts::default(),
        }
    }

    /// A guest request reached the host; whether a pass must be asked for.
    pub(crate) fn guest_arrived(&mut self) -> bool {
        self.popped += 1;
        self.ask()
    }

    /// The stage sent host request `rq`; whether a pass must be asked for.
    pub(crate) fn sent(&mut self, rq: Request) -> bool {
        self.waiting.push(rq);
        self.ask()
    }

    /// Whether a pass must be asked for now: work waits, a thread is free
    /// and none is asked for yet.
    fn ask(&mut self) -> bool {
        let ask = !self.pass_due && self.has_work() && self.free();
        self.pass_due |= ask;
        ask
    }

    fn has_work(&self) -> bool {
        self.popped > 0 || !self.waiting.is_empty()
    }

    pub(crate) fn free(&self) -> bool {
        self.passes.len() < self.cfg.io_threads as usize
    }

    /// The CPU time of a pass over `guests` guest requests and host
    /// requests `requests`.
    pub(crate) fn cost(&self, guests: u64, requests: &[Request]) -> Nanos {
        let bytes: u64 = requests.iter().map(Request::bytes).sum();
        let ns = guests as f64 * self.cfg.guest_request_us * 1e3
            + requests.len() as f64 * self.cfg.request_us * 1e3
            + bytes as f64 * self.cfg.byte_ns;
        ns.round() as Nanos
    }

    /// A free thread takes everything waiting, at `now`: the end of its
    /// pass and the multireq joins made (see [`multireq`]), or `None` when
    /// no thread is free or nothing waits.
    pub(crate) fn begin_pass(
        &mut self,
        now: Nanos,
        guest: impl Fn(&Request) -> bool,
    ) -> Option<(Nanos, Vec<(u64, u64)>)> {
        self.pass_due = false;
        if !self.free() || !self.has_work() {
            return None;
        }
        let waiting = std::mem::take(&mut self.waiting);
        let (requests, joins) = if self.cfg.multireq {
            multireq(waiting, guest)
        } else {
            (waiting, Vec::new())
        };
        let guests = std::mem::take(&mut self.popped);
        let busy = self.cost(guests, &requests);
        let end = now + busy;
        let c = &mut self.counts;
        c.passes += 1;
        c.guest_requests += guests;
        c.host_requests += requests.len() as u64;
        c.multireq_joins += joins.len() as u64;
        c.busy_ns += busy;
        self.passes.push(Pass { end, requests });
        Some((end, joins))
    }

    /// The pass that ends at `now` ends: its host requests, to submit; and
    /// whether a pass must be asked for (work waited meanwhile).
    pub(crate) fn end_pass(&mut self, now: Nanos) -> (Vec<Request>, bool) {
        let requests = match self.passes.iter().position(|p| p.end == now) {
            Some(i) => self.passes.swap_remove(i).requests,
            None => Vec::new(),
        };
        (requests, self.ask())
    }

    /// Requests taken in but not yet submitted.
    pub(crate) fn held(&self) -> usize {
        self.waiting.len() + self.passes.iter().map(|p| p.requests.len()).sum::<usize>()
    }

    /// The path's counters (summed over the VMs by the engine).
    pub(crate) fn counters(&self) -> [(&'static str, f64); 5] {
        let c = &self.counts;
        [
            ("qemu_passes", c.passes as f64),
            ("qemu_guest_requests", c.guest_requests as f64),
            ("qemu_host_requests", c.host_requests as f64),
            ("qemu_multireq_joins", c.multireq_joins as f64),
            ("qemu_busy_s", c.busy_ns as f64 / 1e9),
        ]
    }
}

impl Engine {
    /// A pass of VM `vi`'s QEMU thread may begin ([`Ev::QemuPass`]): with a
    /// thread free, the stage hears of it first (what it sends then is
    /// part of the pass), then the thread takes everything waiting.
    pub(crate) fn qemu_pass(&mut self, vi: usize) -> Result<()> {
        if self.paths[vi].qemu.as_ref().is_some_and(IoThreads::free) {
            self.with_stage(vi, |stage, cx| stage.pass_begins(cx))?;
        }
        let Some(q) = &mut self.paths[vi].qemu else {
            return Ok(());
        };
        let requests = &self.requests;
        let guest = |rq: &Request| matches!(requests[slot_of(rq.id)].owner, Owner::Guest { .. });
        let Some((end, joins)) = q.begin_pass(self.now, guest) else {
            return Ok(());
        };
        for (head, joined) in joins {
            let tail = self.requests.chain_tail(slot_of(head));
            self.requests[tail].chain = slot_of(joined);
        }
        self.push(end, Ev::QemuSubmit { vm: vi as u16 });
        Ok(())
    }

    /// A pass of VM `vi`'s QEMU thread ends: its host requests go to the
    /// host scheduler together ([`Ev::QemuSubmit`]), and the thread takes
    /// what waited meanwhile.
    pub(crate) fn qemu_submit(&mut self, vi: usize) -> Result<()> {
        let Some(q) = &mut self.paths[vi].qemu else {
            return Ok(());
        };
        let (batch, ask) = q.end_pass(self.now);
        self.with_stage(vi, |_, cx| {
            for rq in batch {
                cx.submit(rq)?;
            }
            cx.kick();
            Ok::<_, SimError>(())
        })?;
        if ask {
            self.qemu_pass(vi)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(id: u64, sector: u64) -> Request {
        Request::new(id, 0, Op::Write, sector, 8, 0)
    }

    fn threads(n: u32, guest_us: f64, request_us: f64) -> IoThreads {
        IoThreads::new(QemuPathConfig {
            io_threads: n,
            guest_request_us: guest_us,
            request_us,
            byte_ns: 0.0,
            multireq: true,
        })
    }

    #[test]
    fn multireq_joins_contiguous_requests_of_a_run_in_sector_order() {
        // 3 then 1 then 2: sorted, they are one 24-sector write.
        let (out, joins) = multireq(vec![write(0, 16), write(1, 0), write(2, 8)], |_| true);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].id, out[0].sector, out[0].sectors), (1, 0, 24));
        assert_eq!(joins, vec![(1, 2), (1, 0)]);
        // A gap, a read between, or the stage's own request: no join across.
        let (out, _) = multireq(vec![write(0, 0), write(1, 16)], |_| true);
        assert_eq!(out.len(), 2);
        let read = Request::new(1, 0, Op::Read, 8, 8, 0);
        let (out, _) = multireq(vec![write(0, 0), read, write(2, 16)], |_| true);
        assert_eq!(out.len(), 3);
        let (out, _) = multireq(vec![write(0, 0), write(1, 8)], |r| r.id != 1);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn multireq_runs_end_at_32_requests() {
        let batch: Vec<Request> = (0..40).map(|i| write(i, i * 8)).collect();
        let (out, joins) = multireq(batch, |_| true);
        assert_eq!(out.iter().map(|r| r.sectors).collect::<Vec<_>>(), vec![32 * 8, 8 * 8]);
        assert_eq!(joins.len(), 31 + 7);
    }

    #[test]
    fn one_thread_serves_passes_one_after_another() {
        // 5 µs a guest request, 3 µs a host request.
        let mut q = threads(1, 5.0, 3.0);
        assert!(q.guest_arrived());
        assert!(!q.sent(write(0, 0)), "one pass is asked for at a time");
        assert!(!q.guest_arrived());
        assert!(!q.sent(write(1, 64)));
        let (end, joins) = q.begin_pass(1_000, |_| true).unwrap();
        assert_eq!(end, 1_000 + 2 * 5_000 + 2 * 3_000);
        assert!(joins.is_empty());
        // Work arriving during the pass waits: the thread is busy.
        assert!(!q.guest_arrived());
        assert!(!q.sent(write(2, 128)));
        assert!(q.begin_pass(2_000, |_| true).is_none());
        assert_eq!(q.held(), 3);
        let (batch, ask) = q.end_pass(end);
        assert_eq!(batch.len(), 2);
        assert!(ask, "the waiting request is taken at once");
        let (end2, _) = q.begin_pass(end, |_| true).unwrap();
        assert_eq!(end2, end + 5_000 + 3_000);
        let (batch, ask) = q.end_pass(end2);
        assert_eq!((batch.len(), ask), (1, false));
        let c = q.counters();
        assert_eq!(c[0], ("qemu_passes", 2.0));
        assert_eq!(c[1], ("qemu_guest_requests", 3.0));
        assert_eq!(c[2], ("qemu_host_requests", 3.0));
        assert_eq!(c[4], ("qemu_busy_s", 24e-6));
    }

    #[test]
    fn a_second_thread_takes_what_waits_while_the_first_is_busy() {
        let mut q = threads(2, 0.0, 10.0);
        assert!(q.sent(write(0, 0)));
        let (end1, _) = q.begin_pass(0, |_| true).unwrap();
        assert!(q.sent(write(1, 64)), "a free thread is asked for");
        let (end2, _) = q.begin_pass(4_000, |_| true).unwrap();
        assert_eq!((end1, end2), (10_000, 14_000));
        assert!(!q.sent(write(2, 128)), "both busy");
        let (b, ask) = q.end_pass(end1);
        assert_eq!((b[0].id, ask), (0, true));
    }

    #[test]
    fn merged_requests_cost_one_host_request() {
        let mut q = threads(1, 1.0, 10.0);
        for i in 0..4 {
            q.guest_arrived();
            q.sent(write(i, i * 8));
        }
        let (end, joins) = q.begin_pass(0, |_| true).unwrap();
        assert_eq!(joins.len(), 3);
        assert_eq!(end, 4 * 1_000 + 10_000);
    }

    #[test]
    fn bytes_cost_by_the_byte() {
        let q = IoThreads::new(QemuPathConfig {
            io_threads: 1,
            guest_request_us: 0.0,
            request_us: 0.0,
            byte_ns: 0.25,
            multireq: false,
        });
        assert_eq!(q.cost(0, &[write(0, 0), write(1, 100)]), 2 * 4096 / 4);
    }

    /// A run of 1000 sequential 4 KiB writes, 16 in flight, on a disk that
    /// writes one in 40 µs wherever it is, with `qemu` as the VM's `qemu_path` (none
    /// when empty): its simulated seconds and the host's counters.
    fn run(qemu: &str) -> (f64, Vec<(String, f64)>) {
        let path = if qemu.is_empty() {
            String::new()
        } else {
            format!("qemu_path = {{ {qemu} }}\n")
        };
        let text = format!(
            "seed = 1\n[host]\nscheduler = \"noop\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\njournal_commit_s = 0\n{path}\
             [[vm.job]]\nrw = \"write\"\nbs = \"4k\"\nsize = \"64MiB\"\niodepth = 16\nrequests = 1000\n"
        );
        let cfg = crate::config::Config::from_toml_str(&text, "test.toml").unwrap();
        // No seeks: requests the threads submit out of order cost the same.
        let mut disk = crate::testing::SimpleDisk::new(2_000_000_000);
        (disk.ns_per_sector_seek, disk.max_seek, disk.rotation) = (0.0, 0, 0);
        let r = Engine::new(&cfg, Box::new(disk)).unwrap().run().unwrap();
        (r.sim_time_s, r.host.counters)
    }

    fn counter(c: &[(String, f64)], name: &str) -> f64 {
        c.iter().find(|(k, _)| k == name).map(|c| c.1).unwrap()
    }

    #[test]
    fn a_busy_thread_caps_the_vms_requests_per_second() {
        let (free, c) = run("");
        assert!(c.iter().all(|(k, _)| !k.starts_with("qemu_")));
        assert!((0.04..0.041).contains(&free), "the disk's 40 µs a write: {free} s");
        // 100 µs a request on one thread: 1000 requests take 0.1 s at least.
        let (one, c) = run("request_us = 100, multireq = false");
        assert_eq!(counter(&c, "qemu_host_requests"), 1000.0);
        assert_eq!(counter(&c, "qemu_guest_requests"), 1000.0);
        assert!((0.1..0.101).contains(&counter(&c, "qemu_busy_s")));
        assert!((0.1..0.101).contains(&one), "{one} s");
        // Two threads halve it; four leave the disk the limit.
        let (two, _) = run("request_us = 100, multireq = false, io_threads = 2");
        assert!((0.05..0.053).contains(&two), "{two} s");
        let (four, _) = run("request_us = 100, multireq = false, io_threads = 4");
        assert!((free..free * 1.1).contains(&four), "{four} s against {free} s");
    }

    #[test]
    fn sequential_requests_waiting_together_leave_merged() {
        let (alone, _) = run("request_us = 100, multireq = false");
        let (merged, c) = run("request_us = 100");
        let host = counter(&c, "qemu_host_requests");
        assert_eq!(counter(&c, "qemu_multireq_joins") + host, 1000.0);
        assert!(host < 200.0, "{host} host requests");
        assert!(merged < 0.6 * alone, "{merged} s merged, {alone} s not");
    }
}
