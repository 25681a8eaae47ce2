//! A workload's phases (jobs with `phase`) and `[[phase]]` switch plans in
//! `hvio sim` configs: phases run one after another, a plan switches the
//! host's and the guests' schedulers at a phase's start or at a time, each
//! switch's cost is in the result, and a bad plan is an error naming the
//! step, key and value before the run.

use hvio_sim::{run, Config, SimResult};

/// Two VMs on the small test disk, each with a sequential `load` job and a
/// random `update` job, then `rest` (more jobs, plan steps).
fn config(rest: &str) -> String {
    let vm = |name: &str| {
        format!(
            r#"
[[vm]]
name = "{name}"
image_size = "1GiB"
guest_scheduler = "cfq"
[[vm.job]]
name = "load"
phase = "load"
rw = "read"
bs = "256k"
size = "32MiB"
[[vm.job]]
name = "update"
phase = "update"
rw = "randrw"
bs = "16k"
size = "64MiB"
iodepth = 4
requests = 300
"#
        )
    };
    format!(
        "seed = 2\n[disk]\nmodel = \"simple\"\n[host]\nscheduler = \"cfq\"\n{}{}{rest}",
        vm("a"),
        vm("b")
    )
}

fn sim(text: &str) -> SimResult {
    let r = run(&Config::from_toml_str(text, "phases.toml").unwrap()).unwrap();
    assert!(!r.truncated);
    assert!(r.jobs.iter().all(|j| j.finished));
    r
}

fn err(text: &str) -> String {
    match Config::from_toml_str(text, "phases.toml").and_then(|c| run(&c)) {
        Ok(_) => panic!("the config ran"),
        Err(e) => e.to_string(),
    }
}

fn job<'a>(r: &'a SimResult, vm: &str, name: &str) -> &'a hvio_sim::metrics::JobResult {
    r.jobs.iter().find(|j| j.vm == vm && j.job == name).unwrap()
}

#[test]
fn a_phase_starts_when_the_last_job_of_the_one_before_has_finished() {
    let r = sim(&config(""));
    assert_eq!(r.phases.len(), 2);
    let (load, update) = (&r.phases[0], &r.phases[1]);
    assert_eq!((load.name.as_str(), update.name.as_str()), ("load", "update"));
    let load_end = job(&r, "a", "load").end_s.max(job(&r, "b", "load").end_s);
    assert_eq!(load.start_s, 0.0);
    assert_eq!(load.end_s, load_end);
    assert_eq!(update.start_s, load_end);
    for vm in ["a", "b"] {
        assert_eq!(job(&r, vm, "update").start_s, load_end, "vm {vm}");
    }
    // The two VMs' loads did not end together: one VM's update waited.
    assert_ne!(job(&r, "a", "load").end_s, job(&r, "b", "load").end_s);
    let update_end = job(&r, "a", "update").end_s.max(job(&r, "b", "update").end_s);
    assert_eq!(update.end_s, update_end);
    assert!(r.switches.is_empty());
    assert_eq!((update.host.as_str(), update.guests[0].as_str()), ("cfq", "cfq"));
}

#[test]
fn a_job_without_a_phase_runs_from_the_start_beside_the_phases() {
    let background = r#"
[[vm]]
name = "bg"
image_size = "1GiB"
[[vm.job]]
name = "scan"
rw = "read"
bs = "64k"
size = "16MiB"
start_s = 0.5
"#;
    let r = sim(&config(background));
    assert_eq!(job(&r, "bg", "scan").start_s, 0.5);
    assert!(job(&r, "bg", "scan").start_s < r.phases[0].end_s);
    assert_eq!(r.phases.len(), 2);
}

#[test]
fn a_plan_switches_host_and_guests_when_a_phase_starts() {
    let plan = r#"
[[phase]]
at = "load"
host = "anticipatory"
guest = "noop"
[[phase]]
at = "update"
host = "deadline"
guest = "deadline"
policy = "freeze"
"#;
    let r = sim(&config(plan));
    // The first step sets the pair the run starts with: no switch.
    assert_eq!(r.phases[0].host, "anticipatory");
    assert_eq!(r.phases[0].guests, ["noop", "noop"]);
    assert_eq!(r.phases[1].host, "deadline");
    assert_eq!(r.phases[1].guests, ["deadline", "deadline"]);
    let at: Vec<&str> = r.switches.iter().map(|s| s.at.as_str()).collect();
    assert_eq!(at, ["host", "a", "b"]);
    for s in &r.switches {
        assert_eq!(s.requested_s, r.phases[1].start_s);
        assert_eq!(s.policy, "freeze");
        assert!(s.swapped_s >= s.requested_s);
    }
    assert_eq!(
        (r.switches[0].from.as_str(), r.switches[0].to.as_str()),
        ("anticipatory", "deadline")
    );
    assert_eq!(
        (r.switches[1].from.as_str(), r.switches[1].to.as_str()),
        ("noop", "deadline")
    );
    assert_eq!(r.scheduler, "deadline");
    // The same plan without its switch at `update` runs differently.
    let stay = sim(&config(
        "[[phase]]\nat = \"load\"\nhost = \"anticipatory\"\nguest = \"noop\"\n",
    ));
    assert_eq!(stay.phases[0].end_s, r.phases[0].end_s, "identical until the switch");
    assert_ne!(stay.phases[1].end_s, r.phases[1].end_s);
}

#[test]
fn a_switch_during_io_costs_time_and_a_switch_during_a_switch_waits() {
    // No phases: one random job per VM and two host switches by time, the
    // second asked for while the first still drains.
    let text = r#"
seed = 1
[disk]
model = "simple"
[host]
scheduler = "cfq"
[[vm]]
name = "a"
image_size = "1GiB"
[[vm.job]]
rw = "randread"
bs = "16k"
size = "256MiB"
iodepth = 8
runtime_s = 3
[[phase]]
at_s = 1.0
host = "deadline"
[[phase]]
at_s = 1.001
host = "noop"
"#;
    let r = sim(text);
    assert!(r.phases.is_empty());
    assert_eq!(r.switches.len(), 2);
    let (first, second) = (&r.switches[0], &r.switches[1]);
    assert_eq!(first.requested_s, 1.0);
    // Requests were queued and in flight: the drain took them and ended on
    // the block layer's 10 ms tick.
    assert!(first.handed_over > 0, "{first:?}");
    assert!(first.switch_ms >= 10.0, "{first:?}");
    assert!(second.requested_s >= first.swapped_s, "{first:?} {second:?}");
    assert_eq!((second.from.as_str(), second.to.as_str()), ("deadline", "noop"));
    assert_eq!(r.scheduler, "noop");
}

#[test]
fn the_same_config_gives_the_same_result() {
    let text = config("[[phase]]\nat = \"update\"\nhost = \"noop\"\n");
    let a = serde_json::to_string(&sim(&text)).unwrap();
    let b = serde_json::to_string(&sim(&text)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_config_without_phases_has_none_in_its_result() {
    let text = "[disk]\nmodel = \"simple\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n[[vm.job]]\nrw = \"read\"\nsize = \"1MiB\"\n";
    let json = serde_json::to_string(&sim(text)).unwrap();
    assert!(!json.contains("\"phases\"") && !json.contains("\"switches\""));
}

#[test]
fn bad_plans_are_errors_naming_the_step_key_value_and_line() {
    let e = err(&config("[[phase]]\nat = \"update\"\nhost = \"fifo\"\n"));
    assert!(
        e.contains("phase 0") && e.contains("host") && e.contains("fifo") && e.contains("phases.toml:46:"),
        "{e}"
    );
    let e = err(&config("[[phase]]\nat = \"reduce\"\nguest = \"noop\"\n"));
    assert!(
        e.contains("at") && e.contains("reduce") && e.contains("load, update"),
        "{e}"
    );
    let e = err(&config(
        "[[phase]]\nat = \"update\"\nhost = \"noop\"\n[[phase]]\nat = \"load\"\nhost = \"cfq\"\n",
    ));
    assert!(
        e.contains("phase 1") && e.contains("load") && e.contains("order"),
        "{e}"
    );
    let e = err(&config(
        "[[phase]]\nat = \"update\"\nhost = \"noop\"\n[[phase]]\nat = \"update\"\nguest = \"noop\"\n",
    ));
    assert!(e.contains("phase 1") && e.contains("during the first"), "{e}");
    let e = err(&config(
        "[[phase]]\nat = \"update\"\nhost = \"noop\"\npolicy = \"later\"\n",
    ));
    assert!(e.contains("policy") && e.contains("later"), "{e}");
    // A workload without phases names none.
    let e = err("[disk]\nmodel = \"simple\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n[[vm.job]]\nrw = \"read\"\nsize = \"1MiB\"\n[[phase]]\nat = \"map\"\nhost = \"noop\"\n");
    assert!(
        e.contains("map") && e.contains("no job of the config has a `phase`"),
        "{e}"
    );
    let e = err(&config("").replace("phase = \"update\"", "phase = \" \""));
    assert!(e.contains("phase") && e.contains("needs a name"), "{e}");
}
