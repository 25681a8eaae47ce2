//! Bad input never costs a user a file: every command refuses, before it
//! writes anything, an output that is one of its inputs (naming both); reads
//! are bounded; a failed command leaves no directory behind.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../hvio-device/tests/common/mod.rs"]
mod device_common;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hvio-bad-input-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs hvio in `cwd`: exit code and stderr.
fn hvio(cwd: &Path, args: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .current_dir(cwd)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const SIM: &str = "[disk]\nmodel = \"simple\"\n[[vm]]\nname = \"a\"\n[[vm.job]]\npreset = \"SR-S\"\n";
const TRACE: &str = "128166372000000000,host,0,Read,4096,4096,100\n128166372000100000,host,0,Read,8192,4096,100\n";

/// Runs `args` in `d`, expects exit 1 with `want` in the message and every
/// file in `keep` as it was.
fn refused(d: &Path, args: &[&str], want: &str, keep: &[(&str, &str)]) {
    let (code, err) = hvio(d, args);
    assert_eq!(code, 1, "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
    for (f, text) in keep {
        assert_eq!(
            std::fs::read_to_string(d.join(f)).unwrap(),
            *text,
            "{args:?} changed {f}"
        );
    }
}

#[test]
fn sim_compare_and_replay_refuse_to_write_over_an_input() {
    let d = dir("sim");
    std::fs::write(d.join("c.toml"), SIM).unwrap();
    std::fs::write(d.join("t.csv"), TRACE).unwrap();
    std::os::unix::fs::symlink("c.toml", d.join("link.toml")).unwrap();
    let keep = [("c.toml", SIM), ("t.csv", TRACE)];
    let same = "the output is the config c.toml; write elsewhere";
    refused(
        &d,
        &["sim", "c.toml", "--json", "c.toml"],
        &format!("--json c.toml: {same}"),
        &keep,
    );
    refused(&d, &["sim", "c.toml", "--json", "./link.toml"], same, &keep);
    refused(&d, &["sim", "c.toml", "--records", "c.toml"], same, &keep);
    refused(
        &d,
        &["sim", "c.toml", "--records", "r.csv", "--json", "r.csv"],
        "--json r.csv: the output is the records file",
        &keep,
    );
    refused(
        &d,
        &["compare", "c.toml", "--schedulers", "noop", "--json", "c.toml"],
        same,
        &keep,
    );
    refused(
        &d,
        &["replay", "t.csv", "--format", "msr", "--json", "t.csv"],
        "--json t.csv: the output is the trace t.csv",
        &keep,
    );
    refused(
        &d,
        &[
            "replay",
            "t.csv",
            "--format",
            "msr",
            "--config",
            "c.toml",
            "--json",
            "link.toml",
        ],
        "the output is the config c.toml",
        &keep,
    );
    // The config's own `[output] records` may not name the config either.
    let own = format!("{SIM}[output]\nrecords = \"o.toml\"\n");
    std::fs::write(d.join("o.toml"), &own).unwrap();
    refused(
        &d,
        &["sim", "o.toml", "--json", "r.json"],
        "the output is the config o.toml",
        &[("o.toml", &own)],
    );
    assert!(!d.join("r.json").exists() && !d.join("r.csv").exists());
    // A different file is fine.
    let (code, err) = hvio(&d, &["sim", "c.toml", "--json", "r.json"]);
    assert_eq!(code, 0, "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn trace_convert_and_validate_disk_refuse_to_write_over_an_input_and_leave_no_directory() {
    let d = dir("convert");
    std::fs::write(d.join("t.csv"), TRACE).unwrap();
    std::fs::hard_link(d.join("t.csv"), d.join("h.csv")).unwrap();
    refused(
        &d,
        &[
            "trace", "convert", "--format", "msr", "--to", "iolog3", "-o", "h.csv", "t.csv",
        ],
        "--output h.csv: the output is the input trace t.csv",
        &[("t.csv", TRACE)],
    );
    // A trace that fails on its second record: no a/, no a/b/.
    std::fs::write(
        d.join("bad.csv"),
        format!("{}x\n", &TRACE[..TRACE.find('\n').unwrap() + 1]),
    )
    .unwrap();
    let (code, err) = hvio(
        &d,
        &[
            "trace", "convert", "--format", "msr", "--to", "iolog3", "-o", "a/b/out", "bad.csv",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("bad.csv"), "{err}");
    assert!(!d.join("a").exists(), "a failed convert left its directories");

    // validate-disk: the CDF file may not be the trace; a failed write
    // names the file and leaves no directory. It needs the real-disk data.
    let Some(data) = device_common::hdd_validation() else {
        std::fs::remove_dir_all(&d).unwrap();
        return;
    };
    let data = data.display();
    let spec = format!("{data}/ibm18es.parv");
    std::fs::create_dir_all(d.join("vd")).unwrap();
    let trace = std::fs::read_to_string(format!("{data}/ibm18es.trace")).unwrap();
    std::fs::write(d.join("vd/cdf.csv"), &trace).unwrap();
    refused(
        &d,
        &["validate-disk", &spec, "vd/cdf.csv", "--out", "vd"],
        "--out vd/cdf.csv: the output is the trace vd/cdf.csv",
        &[("vd/cdf.csv", &trace)],
    );
    // ... nor a file the spec sources.
    let sd = d.join("sd");
    std::fs::create_dir_all(&sd).unwrap();
    for f in ["ibm18es.model", "ibm18es.seek"] {
        std::fs::copy(format!("{data}/{f}"), sd.join(f)).unwrap();
    }
    let specs = std::fs::read_to_string(format!("{data}/ibm18es.diskspecs")).unwrap();
    std::fs::write(sd.join("cdf.csv"), &specs).unwrap();
    let parv = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("source ibm18es.diskspecs", "source cdf.csv");
    std::fs::write(sd.join("d.parv"), parv).unwrap();
    std::fs::write(d.join("t.trace"), &trace).unwrap();
    refused(
        &d,
        &["validate-disk", "sd/d.parv", "t.trace", "--out", "sd"],
        "--out sd/cdf.csv: the output is the disk spec file sd/cdf.csv",
        &[("sd/cdf.csv", &specs)],
    );
    let disksim = SIM.replace("model = \"simple\"", "model = \"disksim\"\nspec = \"sd/d.parv\"");
    std::fs::write(d.join("ds.toml"), &disksim).unwrap();
    refused(
        &d,
        &["sim", "ds.toml", "--json", "sd/cdf.csv"],
        "--json sd/cdf.csv: the output is the [disk] spec's sourced file",
        &[("sd/cdf.csv", &specs)],
    );
    std::fs::write(d.join("file"), "").unwrap();
    let (code, err) = hvio(&d, &["validate-disk", &spec, "t.trace", "--out", "file/vd"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("file/vd/cdf.csv"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn serve_refuses_files_that_are_its_config_and_reads_a_bounded_config() {
    let d = dir("serve");
    let host = |extra: &str| format!("{extra}[[vm]]\nname = \"a\"\nsize = \"1MiB\"\nexports = []\n");
    for (extra, want) in [
        (
            "[store]\npath = \"h.toml\"\n",
            "[store] path h.toml: the output is the config h.toml; write elsewhere",
        ),
        (
            "[store]\npath = \"s.img\"\n[log]\nrequests = \"./h.toml\"\n",
            "[log] requests ./h.toml: the output is the config h.toml",
        ),
        (
            "[store]\npath = \"s.img\"\n[log]\nrequests = \"sub/../s.img\"\n",
            "[log] requests sub/../s.img: the output is the [store] path s.img",
        ),
    ] {
        let text = host(extra);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("h.toml"), &text).unwrap();
        refused(&d, &["serve", "--check", "h.toml"], want, &[("h.toml", &text)]);
    }
    let (code, err) = hvio(&d, &["serve", "--check", "/dev/zero"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("/dev/zero: larger than 64 MiB: not a config"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn unknown_names_get_a_did_you_mean_and_quotes_stay_short() {
    let d = dir("names");
    for (file, text, want) in [
        ("k.toml", "sede = 1\n", "unknown field `sede`"),
        (
            "s.toml",
            "[host]\nscheduler = \"fcq\"\n[[vm]]\nname = \"a\"\n",
            "s.toml:2: unknown scheduler `fcq`; did you mean `cfq`?",
        ),
        (
            "p.toml",
            "[host]\nscheduler = \"cfq\"\nparams = { slice_sycn = 3 }\n[[vm]]\nname = \"a\"\n",
            "unknown key `slice_sycn`; did you mean `slice_sync`?",
        ),
    ] {
        std::fs::write(d.join(file), text).unwrap();
        let (code, err) = hvio(&d, &["sim", file]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
    let (_, err) = hvio(&d, &["sim", "k.toml"]);
    assert!(err.contains("did you mean `seed`?"), "{err}");
    std::fs::write(
        d.join("g.toml"),
        SIM.replace("name = \"a\"", "name = \"a\"\nguest_scheduler = \"noopp\""),
    )
    .unwrap();
    let (_, err) = hvio(&d, &["sim", "g.toml"]);
    assert!(
        err.contains("g.toml:5: ") && err.contains("did you mean `noop`?"),
        "{err}"
    );
    // The daemon's config too.
    std::fs::write(d.join("h.toml"), "[stor]\npath = \"s.img\"\n").unwrap();
    let (code, err) = hvio(&d, &["serve", "--check", "h.toml"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("did you mean `store`?"), "{err}");
    std::fs::write(d.join("ok.toml"), SIM).unwrap();
    let (_, err) = hvio(&d, &["sim", "ok.toml", "--scheduler", "bfg"]);
    assert!(err.contains("unknown scheduler `bfg`; did you mean `bfq`?"), "{err}");
    // A deeply nested or huge value is quoted in at most ~200 bytes.
    for (file, text) in [
        ("deep.toml", format!("x = {}\n", "[".repeat(5000))),
        ("long.toml", format!("x = \"{}\n", "a".repeat(500_000))),
        (
            "name.toml",
            format!("[[vm]]\nname = \"{}\"\nweight = 0\n", "a".repeat(300_000)),
        ),
    ] {
        std::fs::write(d.join(file), text).unwrap();
        let (code, err) = hvio(&d, &["sim", file]);
        assert_eq!(code, 1, "{err}");
        assert!(err.len() < 800, "{file}: {} bytes of message", err.len());
        assert!(err.contains(file), "{err}");
    }
    // fio: a typo is fio's "Bad option" with its suggestion.
    std::fs::write(d.join("j.fio"), "[db]\nrw=randrw\niodpeth=8\n").unwrap();
    let (code, err) = hvio(&d, &["trace", "fio", "j.fio"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("j.fio:3: iodpeth: Bad option <iodpeth=8>") && err.contains("did you mean `iodepth`?"),
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn replay_map_takes_blkparse_devices_and_refuses_bad_entries() {
    let d = dir("map");
    let trace = format!("{}/../hvio-trace/tests/data/sda.blkparse", env!("CARGO_MANIFEST_DIR"));
    let (code, err) = hvio(&d, &["replay", &trace, "--map", "8,0=db,8,16=web"]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = hvio(&d, &["replay", &trace, "--map", "8,0=db", "--map", "8,16=web"]);
    assert_eq!(code, 0, "{err}");
    for (map, want) in [
        (vec!["===,"], "--map \"===\": names no device"),
        (vec!["8,0="], "--map \"8,0=\": names no VM"),
        (vec!["8,0=a=b"], "is not DEVICE=VM"),
        (
            vec!["8,99=a"],
            "has no device 8,99; did you mean `8,0`? (its devices: 8,0 8,16)",
        ),
        (
            vec!["8,0=a", "8,0=b"],
            "--map 8,0=b: device 8,0 is mapped twice (also to a)",
        ),
    ] {
        let mut args = vec!["replay", trace.as_str()];
        for m in &map {
            args.extend(["--map", m]);
        }
        let (code, err) = hvio(&d, &args);
        assert_eq!(code, 1, "{map:?}: {err}");
        assert!(err.contains(want), "{map:?}: {err}");
    }
    // Replay errors name the trace, not a config the user never wrote.
    let many: String = (0..1100)
        .map(|i| format!("{},h{i},0,Read,4096,4096,100\n", 128166372000000000u64 + i * 1000))
        .collect();
    std::fs::write(d.join("many.csv"), many).unwrap();
    let (code, err) = hvio(&d, &["replay", "many.csv", "--format", "msr"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("hvio: error: many.csv: its 1100 devices make 1100 VMs"),
        "{err}"
    );
    // So does an offset past the disk: no `image_size` the user never wrote.
    std::fs::write(
        d.join("big.csv"),
        "128166372000000000,host,0,Read,9000000000000000000,4096,100\n",
    )
    .unwrap();
    let (code, err) = hvio(&d, &["replay", "big.csv", "--format", "msr"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("hvio: error: big.csv: device host_0 needs an image of ") && !err.contains("image_size"),
        "{err}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bad_numbers_on_the_command_line_are_named_in_words() {
    let d = dir("args");
    std::fs::write(d.join("c.toml"), SIM).unwrap();
    for (args, want) in [
        (
            vec!["sim", "c.toml", "--seed", "-1"],
            "hvio: error: `--seed` must be a non-negative integer, got -1",
        ),
        (
            vec!["sim", "c.toml", "--seed=x"],
            "hvio: error: `--seed` must be a non-negative integer, got x",
        ),
        (
            vec!["reproduce", "x", "--seed", "-3"],
            "`--seed` must be a non-negative integer, got -3",
        ),
        (
            vec!["replay", "t", "--time-scale", "-1"],
            "`--time-scale` must be a positive number, got -1",
        ),
        (
            vec!["replay", "t", "--vms", "0"],
            "`--vms` must be a positive integer, got 0",
        ),
        (
            vec!["replay", "t", "--closed", "-2"],
            "`--closed` must be a positive integer, got -2",
        ),
        (
            vec!["validate-disk", "a", "b", "--bench", "-1"],
            "`--bench` must be a non-negative integer, got -1",
        ),
    ] {
        let (code, err) = hvio(&d, &args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.trim().starts_with("hvio: error: `") && err.trim().ends_with(want),
            "{args:?}: {err}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn store_device_errors_name_file_and_line() {
    let d = dir("device");
    let host = |device: &str| {
        format!("[store]\nkind = \"emulator\"\n[store.device]\nmodel = \"hdd\"\n{device}\n[[vm]]\nname = \"a\"\nsize = \"1MiB\"\nimage = \"a.img\"\nexports = []\n")
    };
    for (device, want) in [
        ("rpm = -5", "h.toml:5: [store.device]: invalid value -5 for `rpm`"),
        ("rmp = 5", "h.toml:5: [store.device]: invalid value 5 for `rmp`"),
    ] {
        std::fs::write(d.join("h.toml"), host(device)).unwrap();
        let (code, err) = hvio(&d, &["serve", "--check", "h.toml"]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
    let (_, err) = hvio(&d, &["serve", "--check", "h.toml"]);
    assert!(err.contains("did you mean `rpm`?"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_fifo_is_read_until_its_writer_closes_it() {
    // What docs/bad-input.md says of FIFOs: read as a stream, like
    // `hvio trace stats <(zcat t.gz)`; hvio adds no timeout of its own.
    let d = dir("fifo");
    let fifo = d.join("t.fifo");
    if !Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        return;
    }
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, TRACE).unwrap())
    };
    let o = Command::new(env!("CARGO_BIN_EXE_hvio"))
        .args(["trace", "stats", "--format", "msr", fifo.to_str().unwrap()])
        .output()
        .unwrap();
    writer.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("requests"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn trace_formats_and_presets_get_a_did_you_mean() {
    let d = dir("formats");
    std::fs::write(d.join("t.csv"), TRACE).unwrap();
    let (code, err) = hvio(&d, &["trace", "stats", "t.csv", "--format", "msrr"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("unknown trace format \"msrr\"; did you mean `msr`?"),
        "{err}"
    );
    let (code, err) = hvio(&d, &["trace", "convert", "t.csv", "--format", "msr", "--to", "iolgo3"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--to \"iolgo3\": unknown output format (blkparse or iolog3); did you mean `iolog3`?"),
        "{err}"
    );
    std::fs::write(d.join("p.toml"), SIM.replace("SR-S", "SR-N")).unwrap();
    let (code, err) = hvio(&d, &["sim", "p.toml"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown preset; did you mean `SR-M`?"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
