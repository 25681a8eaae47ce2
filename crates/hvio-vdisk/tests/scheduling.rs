//! The scheduling core on real I/O: every registered scheduler, run-time
//! switching under load, weights, the control API, metrics, the request log.

mod common;
use common::*;
use hvio_sched::SwitchPolicy;
use hvio_vdisk::engine::Control;
use hvio_vdisk::nbd::proto::*;

fn conf(sched: &str, extra: &str) -> String {
    format!(
        r#"
[store]
path = "@DIR@/disk.img"
depth = 4
[scheduler]
name = "{sched}"
[nbd]
unix = "@DIR@/nbd.sock"
[control]
http = "127.0.0.1:0"
{extra}
[[vm]]
name = "vm1"
size = "4MiB"
weight = 800
[[vm]]
name = "vm2"
size = "4MiB"
weight = 200
"#
    )
}

/// `n` writes in flight (window `window`), a flush, then every block read back.
fn workload(sock: &std::path::Path, export: &str, tag: u64, n: u64, window: u64) {
    let mut c = Client::connect(sock, export);
    let mut sent = 0u64;
    let mut acked = 0u64;
    while acked < n {
        while sent < n && sent - acked < window {
            c.send(
                if sent.is_multiple_of(7) { CMD_FLAG_FUA } else { 0 },
                CMD_WRITE,
                sent,
                sent * 4096,
                4096,
                &pattern(tag, sent),
            );
            sent += 1;
        }
        let (_, err) = c.reply();
        assert_eq!(err, 0, "{export}: write failed");
        acked += 1;
    }
    assert_eq!(c.flush(), 0);
    for i in 0..n {
        assert_eq!(c.read(i * 4096, 4096).unwrap(), pattern(tag, i), "{export} block {i}");
    }
    c.disc();
}

/// The engine's status once nothing is queued or in flight (clients see a
/// reply a moment before the engine counts the completion).
fn status(d: &Daemon) -> hvio_vdisk::stats::Status {
    let t0 = std::time::Instant::now();
    loop {
        let (tx, rx) = tokio::sync::oneshot::channel();
        assert!(d.engine().control(Control::Status(tx)));
        let st = rx.blocking_recv().unwrap();
        if (st.queued == 0 && st.inflight == 0) || t0.elapsed().as_secs() > 10 {
            return st;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn every_registered_scheduler_serves_real_io() {
    every_scheduler_serves_real_io("rotational = false\n");
}

/// The same on the io_uring engine (the engine thread sleeps in the ring),
/// told the store is rotational so the idling schedulers' `WaitUntil`
/// timers are served by the ring's timeout.
#[test]
fn every_registered_scheduler_serves_real_io_over_io_uring_with_timers() {
    if !have_io_uring() {
        return;
    }
    every_scheduler_serves_real_io("engine = \"io_uring\"\nrotational = true\n");
}

fn every_scheduler_serves_real_io(store: &str) {
    for name in hvio_sched::names() {
        let d = Daemon::start(&conf(name, "").replacen("depth = 4\n", &format!("depth = 4\n{store}"), 1));
        let s1 = d.sock();
        let s2 = d.sock();
        let a = std::thread::spawn(move || workload(&s1, "vm1", 1, 200, 24));
        let b = std::thread::spawn(move || workload(&s2, "vm2", 2, 200, 24));
        a.join()
            .unwrap_or_else(|_| panic!("scheduler {name}: vm1 workload failed"));
        b.join()
            .unwrap_or_else(|_| panic!("scheduler {name}: vm2 workload failed"));
        let st = status(&d);
        // The idling schedulers wait on a rotational device only: there
        // their WaitUntil timers ran; where a seek costs nothing (the seek
        // curve hvio gives a non-rotational store is zero) Pregather's
        // Algorithm 2 always finds the pending request worth its seek.
        let rotational = store.contains("rotational = true");
        let counter = |k: &str| st.counters.iter().find(|(n, _)| n == k).map_or(0.0, |c| c.1);
        match name {
            "cfq" => assert_eq!(counter("idle_armed") > 0.0, rotational, "cfq: {:?}", st.counters),
            "pregather" => assert_eq!(
                counter("waits_started") > 0.0,
                rotational,
                "pregather: {:?}",
                st.counters
            ),
            _ => {}
        }
        assert_eq!(st.scheduler, name);
        assert_eq!((st.queued, st.inflight), (0, 0), "scheduler {name}");
        for v in &st.vms {
            assert_eq!(v.writes, 200, "scheduler {name} {}", v.name);
            assert_eq!(v.reads, 200, "scheduler {name} {}", v.name);
            assert_eq!(v.errors, 0);
        }
        d.stop();
    }
}

#[test]
fn switch_scheduler_under_load_and_change_weights() {
    let d = Daemon::start(&conf("noop", ""));
    let s1 = d.sock();
    let s2 = d.sock();
    let a = std::thread::spawn(move || workload(&s1, "vm1", 3, 800, 32));
    let b = std::thread::spawn(move || workload(&s2, "vm2", 4, 800, 32));
    let names = hvio_sched::names();
    let mut switched = 0;
    for i in 0..6 {
        let name = names[i % names.len()].to_string();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let policy = SwitchPolicy::ALL[i % SwitchPolicy::ALL.len()];
        assert!(d.engine().control(Control::Switch {
            name: name.clone(),
            params: Default::default(),
            policy,
            reply: tx
        }));
        let report = rx
            .blocking_recv()
            .unwrap()
            .unwrap_or_else(|e| panic!("switch to {name}: {e}"));
        assert_eq!((report.to, report.policy), (names[i % names.len()], policy));
        switched += 1;
        let (tx, rx) = tokio::sync::oneshot::channel();
        assert!(d.engine().control(Control::SetStream {
            vm: "vm2".into(),
            weight: Some(100 + i as u32),
            attrs: Default::default(),
            reply: tx
        }));
        assert_eq!(rx.blocking_recv().unwrap(), Ok(()));
    }
    a.join().unwrap();
    b.join().unwrap();
    let st = status(&d);
    assert_eq!(st.switches, switched);
    assert_eq!(st.vms[1].weight, 105);
    // Bad switches leave the running scheduler alone.
    let (tx, rx) = tokio::sync::oneshot::channel();
    d.engine().control(Control::Switch {
        name: "nope".into(),
        params: Default::default(),
        policy: SwitchPolicy::Freeze,
        reply: tx,
    });
    assert!(rx.blocking_recv().unwrap().unwrap_err().contains("nope"));
    let (tx, rx) = tokio::sync::oneshot::channel();
    d.engine().control(Control::SetStream {
        vm: "vm9".into(),
        weight: Some(1),
        attrs: Default::default(),
        reply: tx,
    });
    assert!(rx.blocking_recv().unwrap().unwrap_err().contains("vm9"));
    d.stop();
}

#[test]
fn control_api_metrics_and_request_log() {
    let d = Daemon::start(&conf("deadline", "[log]\nrequests = \"@DIR@/requests.iolog\""));
    workload(&d.sock(), "vm1", 5, 50, 8);
    status(&d);
    let addr = d.control_addr();
    let (code, m) = http(addr, "GET", "/metrics", "");
    assert_eq!(code, 200);
    assert!(m.contains("hvio_requests_total{vm=\"vm1\",op=\"write\"} 50"), "{m}");
    assert!(m.contains("hvio_bytes_total{vm=\"vm1\",op=\"read\"} 204800"), "{m}");
    assert!(
        m.contains("hvio_request_latency_seconds_count{vm=\"vm1\",op=\"read\"} 50"),
        "{m}"
    );
    assert!(
        m.contains("hvio_request_latency_seconds_bucket{vm=\"vm2\",op=\"write\",le=\"+Inf\"} 0"),
        "{m}"
    );
    assert!(m.contains("hvio_scheduler_info{scheduler=\"deadline\"} 1"), "{m}");
    assert!(m.contains("# TYPE hvio_request_latency_seconds histogram"));
    let (code, vms) = http(addr, "GET", "/vms", "");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&vms).unwrap();
    assert_eq!(v[0]["name"], "vm1");
    assert_eq!(v[0]["writes"], 50);
    assert_eq!(v[1]["weight"], 200);
    let (code, _) = http(
        addr,
        "PUT",
        "/vms/vm2",
        r#"{"weight": 600, "attrs": {"rate_iops": 50}}"#,
    );
    assert_eq!(code, 200);
    let (_, st) = http(addr, "GET", "/status", "");
    let st: serde_json::Value = serde_json::from_str(&st).unwrap();
    assert_eq!(st["vms"][1]["weight"], 600);
    assert_eq!(st["vms"][1]["attrs"]["rate_iops"], 50.0);
    let (code, body) = http(addr, "PUT", "/vms/vm2", r#"{"weight": 0}"#);
    assert_eq!(code, 400, "{body}");
    let (code, _) = http(addr, "PUT", "/vms/nobody", r#"{"weight": 5}"#);
    assert_eq!(code, 404);
    let (code, body) = http(addr, "PUT", "/scheduler", r#"{"name": "noop"}"#);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""policy": "freeze""#), "{body}");
    for policy in ["drain", "migrate"] {
        let (code, body) = http(
            addr,
            "PUT",
            "/scheduler",
            &format!(r#"{{"name": "deadline", "policy": "{policy}"}}"#),
        );
        assert_eq!(code, 200, "{body}");
        assert!(body.contains(&format!(r#""policy": "{policy}""#)), "{body}");
    }
    let (code, body) = http(
        addr,
        "PUT",
        "/scheduler",
        r#"{"name": "deadline", "params": {"fifo_bach": 1}}"#,
    );
    assert_eq!(code, 400);
    assert!(body.contains("fifo_bach"), "{body}");
    let (code, body) = http(addr, "PUT", "/scheduler", r#"{"nam": "noop"}"#);
    assert_eq!(code, 400, "{body}");
    let (_, list) = http(addr, "GET", "/schedulers", "");
    assert!(list.contains("\"deadline\""));
    assert_eq!(http(addr, "GET", "/nothing", "").0, 404);
    let log = d.path("requests.iolog");
    let _dir = d.stop();
    // hvio's trace reader (what `hvio replay` uses) reads it back.
    let recs: Vec<_> = hvio_trace::TraceReader::open(&log, &hvio_trace::ReadOptions::default())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(recs.len(), 101);
    assert_eq!(
        recs.iter()
            .filter(|r| r.op == hvio_core::Op::Write && r.sectors == 8)
            .count(),
        50
    );
    let text = std::fs::read_to_string(log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "fio version 3 iolog");
    assert!(lines.contains(&"0 vm1 add") && lines.contains(&"0 vm1 open"));
    let writes = lines
        .iter()
        .filter(|l| l.ends_with(" 4096") && l.contains(" vm1 write "))
        .count();
    let reads = lines.iter().filter(|l| l.contains(" vm1 read ")).count();
    let syncs = lines.iter().filter(|l| l.contains(" vm1 sync 0 0")).count();
    assert_eq!((writes, reads, syncs), (50, 50, 1));
    assert!(lines.last().unwrap().ends_with("vm1 close"));
    let mut last = 0u64;
    for l in &lines[1..] {
        let t: u64 = l.split(' ').next().unwrap().parse().unwrap();
        assert!(t >= last, "timestamps go back: {l}");
        last = t;
    }
}

/// The engine thread's CPU time so far (clock ticks), read from /proc.
/// The ids of this process's threads named `hvio-sched` (every daemon that
/// a test of this binary runs has one; tests run in parallel).
fn sched_threads() -> std::collections::BTreeSet<u64> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .unwrap_or_default()
                .trim()
                == "hvio-sched"
        })
        .filter_map(|t| t.file_name().to_str()?.parse().ok())
        .collect()
}

/// User + system clock ticks thread `tid` has used (None once it is gone).
fn thread_cpu_ticks(tid: u64) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime: fields 14 and 15, i.e. 11 and 12 after the command.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Busy-polling on the io_uring engine: under load the spins find work and
/// the counters show it (control API and /metrics); idle, the engine sleeps
/// and costs no CPU; with `poll_max_us = 0` it never spins.
#[test]
fn io_uring_engine_busy_polls_under_load_and_sleeps_when_idle() {
    if !have_io_uring() {
        return;
    }
    for (max, polling) in [(2000, true), (0, false)] {
        let before = sched_threads();
        let d = Daemon::start(&conf("noop", "").replacen(
            "depth = 4\n",
            &format!("depth = 4\nengine = \"io_uring\"\npoll_max_us = {max}\n"),
            1,
        ));
        // This daemon's engine thread, unless another test started one at
        // the same moment (then only the poll counters are checked).
        let new: Vec<u64> = sched_threads().difference(&before).copied().collect();
        let engine = if new.len() == 1 { Some(new[0]) } else { None };
        workload(&d.sock(), "vm1", 7, 400, 8);
        let st = status(&d);
        let p = st.poll;
        assert_eq!(p.max_us, max as f64);
        assert!(p.waits > 0 && p.sleeps > 0, "{p:?}");
        if polling {
            assert!(p.polls > 0 && p.poll_hits > 0 && p.poll_s > 0.0, "{p:?}");
            assert!(p.window_us <= 2000.0, "{p:?}");
            let (code, m) = http(d.control_addr(), "GET", "/metrics", "");
            assert_eq!(code, 200);
            assert!(m.contains("hvio_poll_max_seconds 0.002"), "{m}");
            assert!(m.contains("# TYPE hvio_polls_total counter"), "{m}");
            let hits: u64 = m
                .lines()
                .find_map(|l| l.strip_prefix("hvio_poll_hits_total "))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            assert!(hits >= p.poll_hits, "{m}");
        } else {
            assert_eq!((p.polls, p.poll_hits, p.poll_s, p.window_us), (0, 0, 0.0, 0.0), "{p:?}");
        }
        // Idle (a connected client sending nothing, another gone): the
        // engine sleeps in the ring.
        let idle = Client::connect(&d.sock(), "vm2");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let c0 = engine.and_then(thread_cpu_ticks);
        let s0 = status(&d).poll;
        std::thread::sleep(std::time::Duration::from_secs(1));
        let c1 = engine.and_then(thread_cpu_ticks);
        let s1 = status(&d).poll;
        if let (Some(c0), Some(c1)) = (c0, c1) {
            let used = c1.saturating_sub(c0);
            let tick = 1.0 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
            assert!(used as f64 * tick < 0.1, "idle engine used {used} ticks in 1 s");
        }
        assert!(s1.poll_s - s0.poll_s < 0.01, "idle engine spun: {s0:?} -> {s1:?}");
        idle.disc();
        d.stop();
    }
}
