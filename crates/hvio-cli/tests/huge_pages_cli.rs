//! `hvio` starts itself again with its heap on transparent huge pages
//! (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`): it says so, the programs it
//! runs see the environment the user gave it, and no result moves.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

fn hvio(args: &[&str], env: &[(&str, Option<&str>)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hvio"));
    c.args(args).env_remove("GLIBC_TUNABLES").env_remove("HVIO_HUGE_PAGES");
    for (k, v) in env {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.output().unwrap()
}

/// Whether hvio should put its heap on huge pages here: the kernel gives
/// them to memory that asks, and glibc (2.35 and later) knows the tunable.
fn huge_pages_here() -> bool {
    let kernel = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|m| m.contains("[always]") || m.contains("[madvise]"));
    let ldd = Command::new("ldd")
        .arg("--version")
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    let first = String::from_utf8_lossy(&ldd)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let version: Vec<u32> = first
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    kernel && first.contains("GLIBC") && version.len() >= 2 && (version[0], version[1]) >= (2, 35)
}

/// An empty directory of this test process's own.
fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hvio-cli-huge-pages-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn heap_line(o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    out.lines()
        .find(|l| l.starts_with("heap: "))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn bench_says_where_the_heap_is() {
    let bench = ["bench", "sim", "--requests", "40", "--disk", "simple"];
    let on = heap_line(&hvio(&bench, &[]));
    if huge_pages_here() {
        assert!(
            on.starts_with("heap: transparent huge pages (glibc.malloc.hugetlb=1, set by hvio"),
            "{on}"
        );
    } else {
        assert!(on.starts_with("heap: 4 KiB pages"), "{on}");
    }
    let off = heap_line(&hvio(&bench, &[("HVIO_HUGE_PAGES", Some("0"))]));
    assert!(off.starts_with("heap: 4 KiB pages"), "{off}");
    let users = heap_line(&hvio(&bench, &[("GLIBC_TUNABLES", Some("glibc.malloc.hugetlb=1"))]));
    assert!(
        users.starts_with("heap: transparent huge pages (glibc.malloc.hugetlb, set in GLIBC_TUNABLES)"),
        "{users}"
    );
    let users_off = heap_line(&hvio(&bench, &[("GLIBC_TUNABLES", Some("glibc.malloc.hugetlb=0"))]));
    assert!(users_off.starts_with("heap: 4 KiB pages"), "{users_off}");
}

#[test]
fn programs_hvio_runs_see_the_users_environment() {
    let dir = fresh_dir("env");
    // Stands in for another hvio build: prints what it was given and fails,
    // and `hvio bench sim --against-bin` quotes its error output.
    let script = dir.join("show-env.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"GLIBC_TUNABLES=${GLIBC_TUNABLES-unset} $(env | grep -c '^HVIO_GLIBC')\" >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let against = [
        "bench",
        "sim",
        "--requests",
        "40",
        "--disk",
        "simple",
        "--pairs",
        "1",
        "--against-bin",
    ];
    let args: Vec<&str> = against.iter().copied().chain([script.to_str().unwrap()]).collect();
    for (given, seen) in [
        (None, "GLIBC_TUNABLES=unset 0"),
        (Some(""), "GLIBC_TUNABLES= 0"),
        (
            Some("glibc.malloc.arena_max=2"),
            "GLIBC_TUNABLES=glibc.malloc.arena_max=2 0",
        ),
    ] {
        let o = hvio(&args, &[("GLIBC_TUNABLES", given)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.trim_end().ends_with(seen), "GLIBC_TUNABLES {given:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn results_do_not_depend_on_the_heap() {
    let dir = fresh_dir("sim");
    let config = dir.join("c.toml");
    std::fs::write(
        &config,
        "seed = 3\n[host]\nscheduler = \"deadline\"\n[[vm]]\nname = \"a\"\nimage_size = \"1GiB\"\n\
         [[vm.job]]\nrw = \"randrw\"\nbs = \"4k\"\nsize = \"64MiB\"\nnumjobs = 4\nrequests = 500\n",
    )
    .unwrap();
    let run = |huge: &str| {
        let json = dir.join("sim.json");
        let o = hvio(
            &["sim", config.to_str().unwrap(), "--json", json.to_str().unwrap()],
            &[("HVIO_HUGE_PAGES", Some(huge))],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8(o.stdout).unwrap();
        out + &std::fs::read_to_string(json).unwrap()
    };
    let (on, off) = (run("1"), run("0"));
    assert!(on == off, "with huge pages:\n{on}\nwithout:\n{off}");
    std::fs::remove_dir_all(&dir).unwrap();
}
