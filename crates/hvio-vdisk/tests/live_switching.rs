//! The scheduler switched live on the emulated HDD: a `[[phase]]` plan by
//! time and by control-API call, with a workload that changes phase
//! (sequential writes, then random reads checked against what was written),
//! and the plan's bad input refused with the daemon serving on.

mod common;
use common::*;
use hvio_vdisk::engine::Control;
use hvio_vdisk::nbd::proto::*;
use serde_json::Value;
use std::io::Read;
use std::time::{Duration, Instant};

const BASE: &str = r#"
[store]
kind = "emulator"
path = "@DIR@/data.img"
[store.device]
model = "hdd"
[scheduler]
name = "noop"
[nbd]
unix = "@DIR@/nbd.sock"
[control]
http = "127.0.0.1:0"
[[vm]]
name = "vm1"
size = "256MiB"
"#;

const READ_FLAG: u64 = 1 << 63;

/// What [`phased`] did.
struct Done {
    written: u64,
    reads: u64,
    writes_at: Duration,
}

/// Keep `depth` requests in flight on vm1: sequential 4 KiB writes of
/// blocks 0, 1, 2, ... for `write_for`, then (once they are all answered)
/// random 4 KiB reads anywhere on the disk, each checked against what was
/// written there (zeros where nothing was), until `total` has passed.
/// Every request must succeed.
fn phased(sock: std::path::PathBuf, depth: usize, write_for: Duration, total: Duration) -> Done {
    let mut c = Client::connect(&sock, "vm1");
    let t0 = Instant::now();
    let (mut next, mut inflight, mut reads) = (0u64, 0usize, 0u64);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut writes_at = None;
    let blocks = c.size / 4096;
    loop {
        let writing = t0.elapsed() < write_for;
        let reading = !writing && t0.elapsed() < total && next > 0;
        if !writing && writes_at.is_none() && inflight == 0 {
            writes_at = Some(t0.elapsed());
        }
        while inflight < depth && (writing || (reading && writes_at.is_some())) {
            if writing {
                c.send(0, CMD_WRITE, next, next * 4096, 4096, &pattern(3, next));
                next += 1;
            } else {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let blk = (x >> 33) % blocks;
                c.send(0, CMD_READ, blk | READ_FLAG, blk * 4096, 4096, &[]);
            }
            inflight += 1;
        }
        if inflight == 0 {
            if writing || reading {
                continue;
            }
            break;
        }
        let (cookie, err) = c.reply();
        assert_eq!(err, 0, "request {cookie:#x} failed");
        if cookie & READ_FLAG != 0 {
            let blk = cookie & !READ_FLAG;
            let mut b = vec![0u8; 4096];
            c.s.read_exact(&mut b).unwrap();
            let want = if blk < next { pattern(3, blk) } else { vec![0; 4096] };
            assert!(b == want, "block {blk} read back wrong");
            reads += 1;
        }
        inflight -= 1;
    }
    c.disc();
    Done {
        written: next,
        reads,
        writes_at: writes_at.unwrap_or_default(),
    }
}

/// Every block written reads back as written.
fn check_all(sock: &std::path::Path, written: u64) {
    let mut c = Client::connect(sock, "vm1");
    for blk in 0..written {
        assert_eq!(c.read(blk * 4096, 4096).unwrap(), pattern(3, blk), "block {blk}");
    }
    c.disc();
}

/// [`BASE`] with a plan of (name, at_s, host, more keys) steps.
fn plan_conf(steps: &[(&str, f64, &str, &str)]) -> String {
    let mut conf = BASE.to_string();
    for (name, at_s, host, more) in steps {
        conf += &format!("[[phase]]\nname = \"{name}\"\nat_s = {at_s}\nhost = \"{host}\"\n{more}\n");
    }
    conf
}

/// The metric families of switching: plans, the online mode, switches.
const SWITCHING: &[&str] = &[
    "hvio_scheduler_switch",
    "hvio_scheduler_stat",
    "hvio_plan_",
    "hvio_online_",
];

/// The lines of `text` (Prometheus text) about the families named by `prefixes`.
fn families(text: &str, prefixes: &[&str]) -> String {
    text.lines()
        .filter(|l| {
            let name = l
                .strip_prefix("# HELP ")
                .or_else(|| l.strip_prefix("# TYPE "))
                .unwrap_or(l);
            prefixes.iter().any(|p| name.starts_with(p))
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

fn status(d: &Daemon) -> Value {
    let (code, body) = http(d.control_addr(), "GET", "/status", "");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn step<'a>(st: &'a Value, name: &str) -> &'a Value {
    st["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {st}"))
}

#[test]
fn a_plan_switches_at_the_times_asked_and_loses_nothing() {
    let conf = plan_conf(&[
        ("write", 0.0, "deadline", ""),
        ("read", 1.0, "cfq", "params = { slice_idle = 0 }"),
        ("end", 2.0, "anticipatory", "policy = \"freeze\""),
    ]);
    let d = Daemon::start(&conf);
    // The step at 0 is the scheduler the daemon starts on, with no switch.
    let st = status(&d);
    assert_eq!(st["scheduler"], "deadline", "{st}");
    assert_eq!(st["plan"]["current"], "write");
    assert_eq!(st["plan"]["next"], "read");
    let sock = d.sock();
    let run = std::thread::spawn(move || phased(sock, 4, Duration::from_millis(700), Duration::from_millis(2600)));
    let done = run.join().unwrap();
    assert!(
        done.written > 50 && done.reads > 20,
        "{} written, {} read",
        done.written,
        done.reads
    );
    // Wait out the last step (a loaded machine may start the workload late).
    let t0 = Instant::now();
    while step(&status(&d), "end")["switch"].is_null() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = status(&d);
    assert_eq!(st["scheduler"], "anticipatory", "{st}");
    assert_eq!(st["plan"]["current"], "end");
    assert_eq!(st["plan"]["next"], Value::Null);
    assert_eq!(st["switches_by_reason"]["plan_time"], 2, "{st}");
    assert_eq!(st["switches"], 2);
    assert_eq!(step(&st, "write")["switch"], Value::Null);
    for (name, at, from, to) in [("read", 1.0, "deadline", "cfq"), ("end", 2.0, "cfq", "anticipatory")] {
        let sw = &step(&st, name)["switch"];
        let asked = sw["requested_s"].as_f64().unwrap();
        eprintln!(
            "step {name}: asked for at {at} s, requested at {asked:.4} s, swapped after {} µs",
            sw["drain_us"]
        );
        assert!(
            asked >= at && asked < at + 0.5,
            "step {name} at {at} s was taken at {asked} s: {sw}"
        );
        assert!(sw["swapped_s"].as_f64().unwrap() >= asked);
        assert_eq!((sw["from"].as_str(), sw["to"].as_str()), (Some(from), Some(to)), "{sw}");
        assert_eq!(sw["reason"], "plan_time");
    }
    assert_eq!(step(&st, "end")["switch"]["policy"], "freeze");
    assert_eq!(st["switch_log"].as_array().unwrap().len(), 2);
    let (_, m) = http(d.control_addr(), "GET", "/metrics", "");
    assert!(
        m.contains("hvio_scheduler_switches_by_reason_total{reason=\"plan_time\"} 2"),
        "{m}"
    );
    assert!(m.contains("hvio_plan_step{step=\"end\"} 1"), "{m}");
    assert!(
        m.contains("hvio_scheduler_stat{scheduler=\"anticipatory\",name=\"antic_started\"}"),
        "{m}"
    );
    promtool_accepts(&families(&m, SWITCHING));
    check_all(&d.sock(), done.written);
    d.stop();
}

#[test]
fn the_control_api_takes_steps_and_loads_plans() {
    let conf = plan_conf(&[
        ("write", 0.0, "noop", ""),
        ("read", 30.0, "deadline", ""),
        ("end", 60.0, "cfq", ""),
    ]);
    let d = Daemon::start(&conf);
    let addr = d.control_addr();
    let sock = d.sock();
    let run = std::thread::spawn(move || phased(sock, 4, Duration::from_millis(500), Duration::from_millis(1500)));
    std::thread::sleep(Duration::from_millis(200));
    // By name, long before its time, in the middle of the writes.
    let (code, body) = http(addr, "POST", "/phase", r#"{"name": "read"}"#);
    assert_eq!(code, 200, "{body}");
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (r["step"].as_str(), r["scheduler"].as_str(), r["from"].as_str()),
        (Some("read"), Some("deadline"), Some("noop")),
        "{r}"
    );
    let st = status(&d);
    assert_eq!(st["plan"]["current"], "read");
    assert_eq!(st["plan"]["next"], "end");
    assert_eq!(step(&st, "read")["switch"]["reason"], "plan_api");
    // The next step, whatever its time.
    let (code, body) = http(addr, "POST", "/phase", "");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"cfq\""), "{body}");
    // None left; an unknown name: errors naming it, the scheduler unchanged.
    let (code, body) = http(addr, "POST", "/phase", "{}");
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("no step left"), "{body}");
    let (code, body) = http(addr, "POST", "/phase", r#"{"name": "shuffle"}"#);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("shuffle") && body.contains("write, read, end"), "{body}");
    let (code, body) = http(addr, "POST", "/phase", r#"{"step": 1}"#);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("unknown key `step`"), "{body}");
    // Bad plans: refused, naming the step, the key and the value; nothing changes.
    for (plan, names) in [
        (
            r#"{"phase": [{"at_s": 0, "host": "noop"}, {"at_s": 1, "host": "fifo"}]}"#,
            vec!["[[phase]] #2", "host", "fifo"],
        ),
        (
            r#"{"phase": [{"at_s": 5, "host": "noop"}, {"at_s": 1, "host": "cfq"}]}"#,
            vec!["[[phase]] #2", "at_s", "time order"],
        ),
        (
            r#"{"phase": [{"at_s": 5, "host": "noop"}, {"at_s": 5, "host": "cfq"}]}"#,
            vec!["[[phase]] #2", "at_s", "during it"],
        ),
        (
            r#"{"phase": [{"at_s": 0, "host": "noop", "guest": "cfq"}]}"#,
            vec!["[[phase]] #1", "guest", "no guest schedulers"],
        ),
        (
            r#"{"phase": [{"at_s": 0, "hots": "noop"}]}"#,
            vec!["[[phase]] #1", "hots"],
        ),
        (r#"{"phases": []}"#, vec!["unknown key `phases`"]),
    ] {
        let (code, body) = http(addr, "PUT", "/plan", plan);
        assert_eq!(code, 400, "{plan}: {body}");
        for n in names {
            assert!(body.contains(n), "{plan}: {body} (missing {n})");
        }
    }
    let st = status(&d);
    assert_eq!(st["scheduler"], "cfq");
    assert_eq!(st["plan"]["current"], "end");
    // A good plan runs from its load: its step at 0 at once, the next 0.3 s later.
    let (code, body) = http(
        addr,
        "PUT",
        "/plan",
        r#"{"phase": [{"name": "a", "at_s": 0, "host": "deadline"}, {"name": "b", "at_s": 0.3, "host": "noop", "policy": "migrate"}]}"#,
    );
    assert_eq!(code, 200, "{body}");
    let loaded = serde_json::from_str::<Value>(&body).unwrap()["loaded_s"]
        .as_f64()
        .unwrap();
    let t0 = Instant::now();
    // A step is current from its switch's start; its record comes at the swap.
    while step(&status(&d), "b")["switch"].is_null() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let st = status(&d);
    assert_eq!(st["scheduler"], "noop", "{st}");
    let b = step(&st, "b")["switch"]["requested_s"].as_f64().unwrap();
    assert!(
        b >= loaded + 0.3 && b < loaded + 0.8,
        "loaded at {loaded}, b taken at {b}"
    );
    assert_eq!(step(&st, "a")["switch"]["reason"], "plan_api");
    let (code, body) = http(addr, "GET", "/plan", "");
    assert_eq!(code, 200);
    assert!(body.contains("\"migrate\""), "{body}");
    let done = run.join().unwrap();
    assert!(done.reads > 0 && done.writes_at > Duration::ZERO);
    check_all(&d.sock(), done.written);
    // An empty plan clears it.
    let (code, body) = http(addr, "PUT", "/plan", r#"{"phase": []}"#);
    assert_eq!(code, 200, "{body}");
    assert_eq!(status(&d)["plan"], Value::Null);
    let (code, _) = http(addr, "POST", "/phase", "{}");
    assert_eq!(code, 400);
    d.stop();
}

#[test]
fn a_step_during_another_switch_is_refused_and_the_old_scheduler_serves_on() {
    let conf = plan_conf(&[("first", 0.0, "cfq", ""), ("second", 600.0, "deadline", "")]);
    let d = Daemon::start(&conf);
    // Keep the depth-1 disk's queue full (32 random reads in flight), so a
    // `freeze` switch has a queue to drain before it swaps.
    let sock = d.sock();
    let writer = std::thread::spawn(move || phased(sock, 32, Duration::from_millis(300), Duration::from_millis(2500)));
    std::thread::sleep(Duration::from_millis(800));
    let engine = d.engine();
    let (tx1, rx1) = tokio::sync::oneshot::channel();
    let (tx2, rx2) = tokio::sync::oneshot::channel();
    // Both go down the one channel in order: the step comes while the switch drains.
    assert!(engine.control(Control::Switch {
        name: "noop".into(),
        params: Default::default(),
        policy: hvio_sched::SwitchPolicy::Freeze,
        reply: tx1,
    }));
    assert!(engine.control(Control::Phase {
        name: Some("second".into()),
        reply: tx2,
    }));
    let refused = rx2.blocking_recv().unwrap().unwrap_err();
    assert!(
        refused.contains("in progress") && refused.contains("`noop`") && refused.contains("`cfq` serves on"),
        "{refused}"
    );
    let report = rx1.blocking_recv().unwrap().unwrap();
    assert!(
        report.drain_time() > 0,
        "the switch had nothing to drain: the test did not test"
    );
    let st = status(&d);
    assert_eq!(st["scheduler"], "noop");
    assert_eq!(st["plan"]["current"], "first", "{st}");
    assert_eq!(st["switches_by_reason"]["api"], 1);
    assert_eq!(st["switches_by_reason"]["plan_api"], 0);
    let done = writer.join().unwrap();
    assert!(done.reads > 0);
    check_all(&d.sock(), done.written);
    d.stop();
}

#[test]
fn bad_plans_in_the_config_name_file_line_key_and_value() {
    for (extra, want) in [
        (
            "[[phase]]\nat_s = 0\nhost = \"noop\"\n[[phase]]\nat_s = 1\nhost = \"fifo\"\n",
            vec!["test.toml:", "[[phase]] #2", "host", "fifo"],
        ),
        (
            "[[phase]]\nat_s = 5\nhost = \"noop\"\n[[phase]]\nat_s = 2\nhost = \"cfq\"\n",
            vec!["[[phase]] #2", "at_s", "time order"],
        ),
        (
            "[[phase]]\nat_s = 5\nhost = \"noop\"\n[[phase]]\nat_s = 5\nhost = \"cfq\"\n",
            vec!["[[phase]] #2", "during it"],
        ),
        (
            "[[phase]]\nat_s = 0\nhost = \"noop\"\nguest = \"cfq\"\n",
            vec!["[[phase]] #1", "guest", "\"cfq\""],
        ),
    ] {
        let text = format!("{BASE}{extra}").replace("@DIR@", "/nonexistent");
        let e = hvio_vdisk::Config::from_toml_str(&text, "test.toml")
            .unwrap_err()
            .to_string();
        for w in want {
            assert!(e.contains(w), "{extra}\n→ {e}\n(missing {w})");
        }
        // The line is the key's (the key at fault is on the last lines).
        let line: usize = e
            .split(':')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("no line in {e}"));
        assert!(line > BASE.lines().count(), "{e}");
    }
}

/// [`BASE`] (noop to begin with) with an online mode of 200 ms windows:
/// writes → deadline, random reads → cfq.
fn online_conf() -> String {
    format!(
        "{BASE}
[online]
window_ms = 200
hold_windows = 2
min_requests = 10

[[online.class]]
name = \"writes\"
host = \"deadline\"
read_share = [0.0, 0.3]

[[online.class]]
name = \"random-reads\"
host = \"cfq\"
params = {{ slice_idle = 0 }}
read_share = [0.7, 1.0]
sequential = [0.0, 0.5]
"
    )
}

fn online_switches(st: &Value) -> Vec<(String, String, f64)> {
    st["switch_log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["reason"] == "online")
        .map(|r| {
            (
                r["class"].as_str().unwrap().to_string(),
                r["to"].as_str().unwrap().to_string(),
                r["requested_s"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_online_mode_switches_when_the_mix_changes_and_not_otherwise() {
    let d = Daemon::start(&online_conf());
    let sock = d.sock();
    let t0 = Instant::now();
    let done = phased(sock, 4, Duration::from_millis(1500), Duration::from_millis(3200));
    let reads_from = done.writes_at.as_secs_f64();
    // Two windows of the last phase to be sure its switch came, plus slack.
    std::thread::sleep(Duration::from_millis(300));
    let st = status(&d);
    let sw = online_switches(&st);
    eprintln!("online switches (class, scheduler, requested_s): {sw:?}; reads from {reads_from:.3} s of the client's {:.3} s; windows {}", t0.elapsed().as_secs_f64(), st["online"]["windows"]);
    // Once per phase: to deadline during the writes, to cfq once the reads came.
    assert_eq!(sw.len(), 2, "{}", st["switch_log"]);
    assert_eq!((sw[0].0.as_str(), sw[0].1.as_str()), ("writes", "deadline"));
    assert_eq!((sw[1].0.as_str(), sw[1].1.as_str()), ("random-reads", "cfq"));
    // Two 200 ms windows of writes must be seen first; the client started within the daemon's first second.
    assert!(sw[0].2 >= 0.4 && sw[0].2 < 2.0, "{sw:?}");
    assert!(sw[1].2 >= sw[0].2 + 0.4, "{sw:?}");
    // Not before the reads began (the client's clock starts after the
    // daemon's) and a window of them was whole.
    assert!(sw[1].2 >= reads_from + 0.2, "{sw:?}, reads from {reads_from}");
    assert_eq!(st["switches_by_reason"]["online"], 2);
    assert_eq!(st["scheduler"], "cfq");
    assert_eq!(st["online"]["class"], "random-reads");
    let windows = &st["online"]["windows"];
    assert!(windows["writes"].as_u64().unwrap() >= 5, "{windows}");
    assert!(windows["random-reads"].as_u64().unwrap() >= 5, "{windows}");
    let last = &st["online"]["last_window"];
    assert!(
        last["read_share"].as_f64().unwrap() == 0.0 || st["online"]["last_window_class"] != "writes",
        "{last}"
    );
    let (_, m) = http(d.control_addr(), "GET", "/metrics", "");
    assert!(m.contains("hvio_online_class{class=\"random-reads\"} 1"), "{m}");
    assert!(
        m.contains("hvio_scheduler_switches_by_reason_total{reason=\"online\"} 2"),
        "{m}"
    );
    assert!(m.contains("hvio_online_windows_total{class=\"writes\"}"), "{m}");
    promtool_accepts(&families(&m, SWITCHING));
    // A plan would fight the online mode: refused, nothing changes.
    let (code, body) = http(
        d.control_addr(),
        "PUT",
        "/plan",
        r#"{"phase": [{"at_s": 0, "host": "noop"}]}"#,
    );
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("online"), "{body}");
    assert_eq!(status(&d)["scheduler"], "cfq");
    assert!(done.reads > 20);
    check_all(&d.sock(), done.written);
    d.stop();
}

#[test]
fn a_steady_mix_switches_once_and_idle_windows_switch_nothing() {
    let d = Daemon::start(&online_conf());
    // Idle: nothing to classify, nothing switched.
    std::thread::sleep(Duration::from_millis(700));
    let st = status(&d);
    assert_eq!(st["switches"], 0, "{st}");
    assert!(
        st["online"]["windows"]["idle"].as_u64().unwrap() >= 2,
        "{}",
        st["online"]
    );
    assert_eq!(st["online"]["class"], Value::Null);
    // Writes only, for 2 s: one switch, to deadline, and no other.
    let done = phased(d.sock(), 4, Duration::from_millis(2000), Duration::from_millis(2000));
    let st = status(&d);
    let sw = online_switches(&st);
    assert_eq!(sw.len(), 1, "{}", st["switch_log"]);
    assert_eq!(sw[0].1, "deadline");
    assert!(
        st["online"]["windows"]["writes"].as_u64().unwrap() >= 6,
        "{}",
        st["online"]
    );
    check_all(&d.sock(), done.written);
    d.stop();
}

#[test]
fn bad_online_tables_name_file_line_key_and_value() {
    let conf = online_conf().replace("@DIR@", "/nonexistent");
    for (from, to, want) in [
        (
            "window_ms = 200",
            "window_ms = 2",
            vec!["test.toml:", "[online]", "window_ms", "2"],
        ),
        (
            "host = \"cfq\"",
            "host = \"cfqq\"",
            vec!["[[online.class]] #2", "host", "cfqq"],
        ),
        (
            "read_share = [0.7, 1.0]",
            "read_share = [0.7, 0.1]",
            vec!["[[online.class]] #2", "read_share"],
        ),
        ("hold_windows = 2", "hold_windows = 2\nwindow = 3", vec!["window"]),
    ] {
        let text = conf.replace(from, to);
        let e = hvio_vdisk::Config::from_toml_str(&text, "test.toml")
            .unwrap_err()
            .to_string();
        for w in want {
            assert!(e.contains(w), "{to}\n→ {e}\n(missing {w})");
        }
    }
    // The class's own line.
    let e = hvio_vdisk::Config::from_toml_str(&conf.replace("\"cfq\"", "\"cfqq\""), "test.toml")
        .unwrap_err()
        .to_string();
    let line: usize = e.split(':').nth(1).unwrap().parse().unwrap();
    assert_eq!(conf.lines().nth(line - 1).map(str::trim), Some("host = \"cfq\""), "{e}");
    // With a plan: one or the other.
    let both = format!("{conf}[[phase]]\nat_s = 0\nhost = \"noop\"\n");
    let e = hvio_vdisk::Config::from_toml_str(&both, "test.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("[online]") && e.contains("[[phase]]"), "{e}");
}

/// An idle daemon still takes its steps and closes its windows on time:
/// the plan's next step and the online window are deadlines of the
/// engine's wait, on the thread pool and in the io_uring engine's ring wait.
#[test]
fn an_idle_daemon_takes_its_steps_on_time_on_both_engines() {
    let file = "[store]\npath = \"@DIR@/disk.img\"\ndepth = 8\n[nbd]\nunix = \"@DIR@/nbd.sock\"\n[control]\nhttp = \"127.0.0.1:0\"\n[[vm]]\nname = \"vm1\"\nsize = \"16MiB\"\n[[phase]]\nname = \"a\"\nat_s = 0\nhost = \"noop\"\n[[phase]]\nname = \"b\"\nat_s = 0.5\nhost = \"deadline\"\n";
    let mut confs = vec![("threads", file.to_string())];
    if have_io_uring() {
        confs.push(("io_uring", over_io_uring(file)));
    }
    for (engine, conf) in confs {
        let d = Daemon::start(&conf);
        std::thread::sleep(Duration::from_millis(1000));
        let st = status(&d);
        assert_eq!(st["scheduler"], "deadline", "{engine}: {st}");
        let at = step(&st, "b")["switch"]["requested_s"].as_f64().unwrap();
        assert!(
            (0.5..0.9).contains(&at),
            "{engine}: step b at 0.5 s was taken at {at} s"
        );
        d.stop();
    }
}
