//! Bad input: every error names the config file (and the line of the key
//! when it can), the key and the value; huge counts are refused before
//! anything is allocated for them; huge sizes and durations give errors,
//! not arithmetic overflow (these tests run with debug overflow checks).

use hvio_sim::{run, Config};

/// The error of running `text` as the config `name`.
fn error_of(text: &str, name: &str) -> String {
    let cfg = Config::from_toml_str(text, name).unwrap_or_else(|e| panic!("{name} does not parse: {e}"));
    match run(&cfg) {
        Ok(_) => panic!("{name} ran"),
        Err(e) => e.to_string(),
    }
}

fn assert_has(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "`{p}` missing from: {err}");
    }
}

/// One VM on the simple test disk with `vm` keys and one job with `job` keys.
/// (The image is 1 GiB and the job's `size` 16 MiB unless `vm` or `job` starts by setting them.)
fn one_vm(vm: &str, job: &str) -> String {
    let size = if job.starts_with("size =") {
        ""
    } else {
        "size = \"16MiB\""
    };
    let image = if vm.starts_with("image_size =") {
        ""
    } else {
        "image_size = \"1GiB\""
    };
    format!(
        "[disk]\nmodel = \"simple\"\n[[vm]]\nname = \"a\"\n{image}\n{vm}\n[[vm.job]]\nrw = \"randread\"\n{size}\nrequests = 10\n{job}\n"
    )
}

#[test]
fn errors_start_with_the_file_and_the_line_of_the_key() {
    let e = error_of("seed = 1\n\n[[vm]]\nname = \"a\"\nweight = 0\n", "w.toml");
    assert!(e.starts_with("w.toml:5: vm \"a\": invalid value 0 for `weight`"), "{e}");
    let e = error_of("seed = 1\n", "w.toml");
    assert!(e.starts_with("w.toml: "), "{e}");
    assert_has(&e, &["`vm`", "at least one [[vm]]"]);

    // A job's key: the line of that key in that job of that VM.
    let text = "[[vm]]\nname = \"a\"\n[[vm]]\nname = \"b\"\nimage_size = \"1GiB\"\n[[vm.job]]\nrw = \"read\"\n[[vm.job]]\nrw = \"read\"\nsize = 0\n";
    let e = error_of(text, "dir/jobs.toml");
    assert!(
        e.starts_with("dir/jobs.toml:10: vm \"b\" job 1: invalid value 0 for `size`"),
        "{e}"
    );

    // Host and guest scheduler parameters, an unknown guest scheduler, the disk.
    let text = "[host]\nscheduler = \"cfq\"\n[host.params]\nslice_idle = -5\n[[vm]]\nname = \"a\"\n";
    assert_has(&error_of(text, "h.toml"), &["h.toml:4: ", "slice_idle", "-5"]);
    let text = one_vm("guest_scheduler = \"cfq\"\n[vm.guest_params]\nquantum = 0", "");
    assert_has(
        &error_of(&text, "g.toml"),
        &["g.toml:8: ", "vm \"a\" guest_params (scheduler cfq)", "`quantum`"],
    );
    let text = one_vm("guest_scheduler = \"nope\"", "");
    assert_has(
        &error_of(&text, "g.toml"),
        &["g.toml:6: ", "`guest_scheduler`", "\"nope\""],
    );
    let text = "[disk]\nmodel = \"hdd\"\nrpm = 0\n[[vm]]\nname = \"a\"\n";
    assert_has(&error_of(text, "d.toml"), &["d.toml:3: ", "`rpm`", "invalid value 0"]);
    // SSD keys out of range, at their line: GC thresholds, the write buffer, preconditioning.
    for (disk, key, value) in [
        (
            "gc_threshold = 0.01\ngc_hard_threshold = 0.5",
            "gc_hard_threshold",
            "0.5",
        ),
        ("write_buffer_mib = -1.0", "write_buffer_mib", "-1"),
        ("precondition = { fill = 2.0 }", "precondition.fill", "2"),
        (
            "precondition = { workload = { window = 1 } }",
            "precondition.workload.window",
            "1",
        ),
        (
            "precondition = { tolerance = 0.1, workload = {} }",
            "precondition.tolerance",
            "0.1",
        ),
    ] {
        let text = format!("[disk]\nmodel = \"ssd\"\ncapacity_gib = 1\n{disk}\n[[vm]]\nname = \"a\"\n");
        let line = 3 + disk.lines().count();
        assert_has(
            &error_of(&text, "d.toml"),
            &[
                &format!("d.toml:{line}: "),
                &format!("`{key}`"),
                &format!("invalid value {value}"),
            ],
        );
    }
    // A [disk] key of the wrong type: named, at its line (was the [disk] line, no key).
    for (disk, line, key) in [
        ("model = \"hdd\"\nsurfaces = 4\nrpm = \"fast\"", 4, "rpm"),
        ("model = \"ssd\"\nchannels = -1", 3, "channels"),
        ("model = \"hdd\"\nbogus = 1", 3, "bogus"),
        ("model = \"disksim\"\nspec = 1", 3, "spec"),
        ("model = \"tape\"\nrpm = 1", 2, "model"),
    ] {
        let text = format!("[disk]\n{disk}\n[[vm]]\nname = \"a\"\n");
        let e = error_of(&text, "d.toml");
        assert_has(
            &e,
            &[&format!("d.toml:{line}: disk: invalid value"), &format!("`{key}`")],
        );
    }
    // A duplicate VM name: at its second use.
    let text = "[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n[[vm]]\nname = \"a\"\n";
    assert_has(&error_of(text, "n.toml"), &["n.toml:5: ", "duplicate VM name"]);
    // `hvio compare` and the Python API go through the same run.
    let cfg = Config::from_toml_str("[[vm]]\nname = \"a\"\nweight = 0\n", "c.toml").unwrap();
    let e = hvio_sim::compare::compare(&cfg, &["noop"]).unwrap_err().to_string();
    assert!(e.starts_with("c.toml:3: "), "{e}");
    let cfg = Config::from_json_str(r#"{"vm": [{"name": "a", "weight": 0}]}"#, "<dict>.json").unwrap();
    assert!(run(&cfg).unwrap_err().to_string().starts_with("<dict>.json: vm \"a\""));
}

#[test]
fn huge_counts_are_refused_before_anything_is_allocated_for_them() {
    // numjobs = 4e9 used to abort: "memory allocation of 288000000000 bytes failed".
    for (job, key, value) in [
        ("numjobs = 4000000000", "numjobs", "4000000000"),
        ("nrfiles = 4000000000", "nrfiles", "4000000000"),
        ("iodepth = 4000000000", "iodepth", "4000000000"),
        ("numjobs = 65536\niodepth = 16\nsharing = \"shared\"", "iodepth", "16"),
        ("bssplit = \"4k/4294967295:8k/1\"", "bssplit", "4294967295"),
    ] {
        let e = error_of(&one_vm("", job), "big.toml");
        assert_has(&e, &["big.toml:", "vm \"a\" job 0", &format!("`{key}`"), value]);
    }
    for (vm, key) in [
        ("virtio_depth = 4000000000", "virtio_depth"),
        ("fragments = 2147483648\nimage_size = \"1TiB\"", "fragments"),
    ] {
        let text = format!("[disk]\nmodel = \"simple\"\n[[vm]]\nname = \"a\"\n{vm}\n");
        assert_has(
            &error_of(&text, "big.toml"),
            &["big.toml:", "vm \"a\"", &format!("`{key}`")],
        );
    }
    let mut many = String::from("[disk]\nmodel = \"simple\"\n");
    for i in 0..1025 {
        many.push_str(&format!(
            "[[vm]]\nname = \"v{i}\"\nimage_size = \"1MiB\"\njournal_size = 0\n"
        ));
    }
    assert_has(
        &error_of(&many, "many.toml"),
        &["many.toml", "`vm`", "1025", "at most 1024"],
    );
    // Each same-file thread walks all of its job's files: 65536 × 65536 file
    // extents used to be allocated.
    let same = "numjobs = 65536\nnrfiles = 65536\nsharing = \"same-file\"";
    let text = one_vm("image_size = \"300GiB\"", &format!("size = \"256GiB\"\n{same}"));
    assert_has(
        &error_of(&text, "s.toml"),
        &["vm \"a\" job 0", "`nrfiles`", "65536", "same-file"],
    );
    // Counted over the whole config: 1024 VMs of 65536 fragments or 8192 files each.
    for (vm, job, key) in [
        (
            "fragments = 65536\nimage_size = \"32MiB\"\njournal_size = 0",
            "",
            "fragments",
        ),
        (
            "image_size = \"32MiB\"\njournal_size = 0",
            "[[vm.job]]\nrw = \"read\"\nsize = \"32MiB\"\nnrfiles = 8192\nrequests = 1",
            "nrfiles",
        ),
    ] {
        let mut many = String::from("[disk]\nmodel = \"simple\"\n");
        for i in 0..1024 {
            many.push_str(&format!("[[vm]]\nname = \"v{i}\"\n{vm}\n{job}\n"));
        }
        assert_has(
            &error_of(&many, "m.toml"),
            &["m.toml:", "vm \"v", &format!("`{key}`"), "in all"],
        );
    }
    // 65536 threads sharing 16 MiB: a slice of 256 bytes each (underflowed).
    let e = error_of(&one_vm("", "numjobs = 65536"), "p.toml");
    assert_has(
        &e,
        &[
            "p.toml:11: vm \"a\" job 0",
            "`numjobs`",
            "0 bytes",
            "less than one block",
        ],
    );
    // Buffered VMs' flushers count too: 16 VMs of 65536 write-backs in flight
    // would have hit the engine's request table (2^20) mid-run.
    let mut many = String::from("[disk]\nmodel = \"simple\"\n");
    for i in 0..16 {
        many.push_str(&format!(
            "[[vm]]\nname = \"v{i}\"\nimage_size = \"32MiB\"\njournal_size = 0\n[vm.page_cache]\nnr_requests = 65536\n[[vm.job]]\nrw = \"write\"\nsize = \"16MiB\"\ndirect = false\nrequests = 1\n"
        ));
    }
    assert_has(
        &error_of(&many, "f.toml"),
        &["f.toml:", "vm \"v7\"", "`page_cache.nr_requests`", "65536"],
    );
    // Σ numjobs over a VM's jobs.
    let jobs = "numjobs = 40000\nsharing = \"shared\"\n[[vm.job]]\nrw = \"read\"\nsize = \"16MiB\"\nnumjobs = 40000\nsharing = \"shared\"";
    assert_has(
        &error_of(&one_vm("", jobs), "t.toml"),
        &["vm \"a\" job 1", "`numjobs`", "80000 threads"],
    );
}

#[test]
fn huge_sizes_and_durations_are_errors_not_overflows() {
    // TOML integers stop at 2^63 - 1: a size string reaches u64's end.
    let huge = "\"16777215TiB\"";
    for (vm, job, key) in [
        (format!("journal_size = {huge}"), String::new(), "image_size"),
        (String::new(), format!("size = {huge}"), "image_size"),
        (
            String::new(),
            "thinktime_us = 9223372036854775807".into(),
            "thinktime_us",
        ),
        (
            "virt_latency_us = 9223372036854775807".into(),
            String::new(),
            "virt_latency_us",
        ),
        (format!("offset = {huge}"), String::new(), "image_size"),
        (
            "offset = \"16777215TiB\"\nfragments = 2\nfragment_gap = \"16777215TiB\"".into(),
            String::new(),
            "image_size",
        ),
        (String::new(), "start_s = 1e300".into(), "start_s"),
        (String::new(), "runtime_s = 1e300".into(), "runtime_s"),
        ("journal_commit_s = 1e300".into(), String::new(), "journal_commit_s"),
        // A commit every nanosecond: the run never got past its commits.
        ("journal_commit_s = 1e-9".into(), String::new(), "journal_commit_s"),
    ] {
        let e = error_of(&one_vm(&vm, &job), "h.toml");
        assert_has(&e, &["h.toml", "vm \"a\"", &format!("`{key}`")]);
    }
    // The page cache of a buffered job: a page copy of 2^63 ns used to overflow.
    for (cache, key) in [
        ("copy_ns_per_page = 9223372036854775807", "copy_ns_per_page"),
        ("read_ahead_kb = 4294967292", "read_ahead_kb"),
        ("max_sectors_kb = 4294967292", "max_sectors_kb"),
        ("nr_requests = 4294967295", "nr_requests"),
    ] {
        let text = one_vm(&format!("[vm.page_cache]\n{cache}"), "bs = \"16k\"\ndirect = false");
        assert_has(
            &error_of(&text, "p.toml"),
            &["p.toml:7: vm \"a\"", &format!("`page_cache.{key}`")],
        );
    }
    for (top, key) in [
        ("max_time_s = 1e300", "max_time_s"),
        ("[output]\ninterval_s = 1e-12", "interval_s"),
        ("max_time_s = 1e-9\n[output]\ninterval_s = 1e-12", "interval_s"),
        ("[host]\nfirst_image_offset = \"16777215TiB\"", "image_size"),
    ] {
        let e = error_of(&format!("{top}\n{}", one_vm("", "")), "t.toml");
        assert_has(&e, &["t.toml", &format!("`{key}`")]);
    }
    // A gap past the end of u64 between two images: the second one is refused.
    let text = format!(
        "[disk]\nmodel = \"simple\"\n[host]\nimage_gap = {huge}\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n[[vm]]\nname = \"b\"\nimage_size = \"1GiB\"\n"
    );
    assert_has(
        &error_of(&text, "g.toml"),
        &["g.toml:10: vm \"b\"", "past the end of the disk"],
    );
    // On a disk smaller than the default layout's start, the error says how to move the images.
    let text = "[disk]\nmodel = \"ssd\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n";
    assert_has(
        &error_of(text, "ssd.toml"),
        &["ssd.toml:5: ", "past the end of the disk", "first_image_offset"],
    );
    // A size string past u64 is a parse error naming it, not a silent 2^64 - 1.
    let e = Config::from_toml_str("[[vm]]\nname = \"a\"\nimage_size = \"16777216TiB\"\n", "s.toml").unwrap_err();
    assert_has(&e.to_string(), &["s.toml", "16777216TiB", "too large"]);
}

#[test]
fn stream_attributes_are_checked_against_every_scheduler_at_load() {
    // Were taken, then silently replaced by HTBS's defaults at run time
    // (counted in `invalid_stream_attrs`); a misspelt name was ignored.
    for (attrs, key, value, reason) in [
        (
            "rate_iops = 1e-300",
            "rate_iops",
            "1e-300",
            "scheduler htbs accepts 0.001..=1000000000",
        ),
        ("rate_iops = 0", "rate_iops", "0.0", "htbs"),
        ("burst = -5", "burst", "-5.0", "htbs"),
        ("latency_ms = 1e300", "latency_ms", "1e300", "htbs"),
        ("rate_iops = nan", "rate_iops", "NaN", "finite"),
        ("rate_iops = inf", "rate_iops", "inf", "finite"),
        (
            "rate_iop = 100",
            "rate_iop",
            "100.0",
            "no scheduler reads this attribute (known: rate_iops, burst, latency_ms)",
        ),
        ("weight = 5", "weight", "5.0", "the VM's `weight` key"),
    ] {
        for host in ["htbs", "noop"] {
            let text = format!(
                "[host]\nscheduler = \"{host}\"\n[disk]\nmodel = \"simple\"\n[[vm]]\nname = \"x\"\nimage_size = \"1GiB\"\nattrs = {{ {attrs} }}\n"
            );
            let e = error_of(&text, "a.toml");
            let start = format!("a.toml:8: vm \"x\": invalid value {value} for `attrs.{key}`: ");
            assert!(e.starts_with(&start) && e.contains(reason), "{host} {attrs}: {e}");
        }
    }
    // An attribute only HTBS reads, within its range, under every scheduler
    // (`hvio compare`): accepted.
    let text = one_vm("attrs = { rate_iops = 0.001, burst = 0, latency_ms = 1e7 }", "");
    let cfg = Config::from_toml_str(&text, "ok.toml").unwrap();
    let r = hvio_sim::compare::compare(&cfg, &hvio_sched::names()).unwrap();
    assert_eq!(r.len(), hvio_sched::SCHEDULERS.len());
}

#[test]
fn a_bad_guest_cpu_names_the_vm_the_key_and_the_value() {
    for (keys, key, value) in [
        ("vcpus = 0, request_us = 5", "guest_cpu.vcpus", "0"),
        ("vcpus = 4096, request_us = 5", "guest_cpu.vcpus", "4096"),
        ("vcpus = 8, request_us = -1.0", "guest_cpu.request_us", "-1.0"),
        ("vcpus = 8, request_us = nan", "guest_cpu.request_us", "NaN"),
        ("vcpus = 8, request_us = 1e300", "guest_cpu.request_us", "1e300"),
    ] {
        let text = one_vm(&format!("guest_cpu = {{ {keys} }}"), "");
        assert_has(
            &error_of(&text, "g.toml"),
            &["g.toml", "vm \"a\"", &format!("`{key}`"), value],
        );
    }
    // Both keys are needed, and an unknown one is named by the parser.
    for (keys, named) in [
        ("vcpus = 8", "request_us"),
        ("vcpus = 8, request_us = 5, cpus = 2", "cpus"),
    ] {
        let e = Config::from_toml_str(&one_vm(&format!("guest_cpu = {{ {keys} }}"), ""), "g.toml").unwrap_err();
        assert_has(&e.to_string(), &["g.toml", named]);
    }
}

#[test]
fn a_bad_qemu_path_names_the_vm_the_key_and_the_value() {
    for (keys, key, value) in [
        ("io_threads = 0", "qemu_path.io_threads", "0"),
        ("io_threads = 5000", "qemu_path.io_threads", "5000"),
        ("request_us = -1.0", "qemu_path.request_us", "-1.0"),
        ("request_us = nan", "qemu_path.request_us", "NaN"),
        ("guest_request_us = 1e300", "qemu_path.guest_request_us", "1e300"),
        ("byte_ns = inf", "qemu_path.byte_ns", "inf"),
        ("byte_ns = 5000.0", "qemu_path.byte_ns", "5000.0"),
    ] {
        let text = one_vm(&format!("qemu_path = {{ {keys} }}"), "");
        assert_has(
            &error_of(&text, "q.toml"),
            &["q.toml", "vm \"a\"", &format!("`{key}`"), value],
        );
    }
    // An unknown key is named by the parser.
    let e = Config::from_toml_str(&one_vm("qemu_path = { request = 5 }", ""), "q.toml").unwrap_err();
    assert_has(&e.to_string(), &["q.toml", "request"]);
    // QEMU's path and Xen's blktap are two hosts, not one.
    let text = format!("[host.blktap]\n{}", one_vm("qemu_path = { request_us = 5 }", ""));
    assert_has(
        &error_of(&text, "q.toml"),
        &["q.toml", "vm \"a\"", "`qemu_path`", "blktap"],
    );
}
