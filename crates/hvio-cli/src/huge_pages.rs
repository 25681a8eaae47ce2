//! hvio's heap on transparent huge pages.
//!
//! A scheduler's queue of 100,000 requests spreads its request slots and
//! index chunks over about 2,000 pages of 4 KiB, and each decision touches
//! a few of them at random: on a virtual machine a TLB miss there is a
//! nested page walk. glibc (2.35 and later) puts its heap on transparent
//! huge pages when the tunable `glibc.malloc.hugetlb=1` is set, which
//! takes 0.84–0.99× the time per decision at 100k queued
//! (docs/benchmarks.md, "hvio's heap on huge pages"). glibc reads its
//! tunables only when a program starts, from `GLIBC_TUNABLES`, so `hvio`
//! starts itself again with the tunable added, once, before it does
//! anything else, and gives the programs it runs the environment it was
//! given.
//!
//! Nothing is done when the user set the tunable (either way), when
//! `HVIO_HUGE_PAGES=0`, under Valgrind, on a C library that does not
//! know the tunable, when the kernel's transparent huge pages are `never`
//! or unknown, or when the new start fails (hvio then runs as it is).
//! Results do not depend on it: where memory lies changes no simulated
//! figure.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// glibc's tunable that puts `malloc`'s memory on transparent huge pages.
const TUNABLE: &str = "glibc.malloc.hugetlb=1";
/// Set in the second start only: empty if `GLIBC_TUNABLES` was unset,
/// else `=` and what it held.
const MARK: &str = "HVIO_GLIBC_TUNABLES_BEFORE";

/// Whether this process started again with the tunable added.
static ON_HUGE_PAGES: AtomicBool = AtomicBool::new(false);

/// Where this process's heap is, as `hvio bench` prints it.
pub fn heap_pages() -> &'static str {
    let tunables = std::env::var_os("GLIBC_TUNABLES");
    let by_user = users_hugetlb(tunables.as_deref()).is_some_and(|v| v != b"0");
    if ON_HUGE_PAGES.load(Ordering::Relaxed) {
        "heap: transparent huge pages (glibc.malloc.hugetlb=1, set by hvio; HVIO_HUGE_PAGES=0 to run without)"
    } else if by_user {
        "heap: transparent huge pages (glibc.malloc.hugetlb, set in GLIBC_TUNABLES)"
    } else {
        "heap: 4 KiB pages (HVIO_HUGE_PAGES=0, glibc.malloc.hugetlb=0 or the kernel's transparent huge pages off)"
    }
}

/// Starts hvio again with its heap on huge pages, or, in that second
/// start, gives `GLIBC_TUNABLES` back the value it had before. Call first
/// in `main`, while the process has one thread.
pub fn start_on_huge_pages() {
    if let Some(before) = std::env::var_os(MARK) {
        // The second start: glibc has read the tunable; children see the
        // user's environment.
        std::env::remove_var(MARK);
        match before.as_bytes().strip_prefix(b"=") {
            None => std::env::remove_var("GLIBC_TUNABLES"),
            Some(value) => std::env::set_var("GLIBC_TUNABLES", OsStr::from_bytes(value)),
        }
        ON_HUGE_PAGES.store(true, Ordering::Relaxed);
        return;
    }
    if std::env::var_os("HVIO_HUGE_PAGES").is_some_and(|v| v == "0") || under_valgrind() {
        return;
    }
    let before = std::env::var_os("GLIBC_TUNABLES");
    if !glibc_has_the_tunable() || !wanted(before.as_deref(), &thp_mode()) {
        return;
    }
    let mut args = std::env::args_os();
    let Some(argv0) = args.next() else { return };
    // The binary's own path rather than `/proc/self/exe`, whose name (`exe`)
    // the process would then go by in `ps`, `top` and `pgrep`.
    let Ok(exe) = std::env::current_exe() else { return };
    // On failure `exec` returns, and hvio goes on without huge pages.
    let _ = std::process::Command::new(exe)
        .arg0(argv0)
        .args(args)
        .env("GLIBC_TUNABLES", with_tunable(before.as_deref()))
        .env(MARK, marked(before.as_deref()))
        .exec();
}

/// Whether Valgrind runs this process: it would not follow the new start
/// (its tools count instructions, which huge pages do not change), so a
/// profile of hvio would come out empty.
fn under_valgrind() -> bool {
    preloads_valgrind(std::env::var_os("LD_PRELOAD").as_deref())
}

/// Whether an `LD_PRELOAD` value holds Valgrind's preloaded library.
fn preloads_valgrind(ld_preload: Option<&OsStr>) -> bool {
    const PRELOAD: &[u8] = b"vgpreload";
    ld_preload.is_some_and(|p| p.as_bytes().windows(PRELOAD.len()).any(|w| w == PRELOAD))
}

/// Whether this process runs on a glibc that knows `glibc.malloc.hugetlb` (2.35 and later).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_has_the_tunable() -> bool {
    // SAFETY: glibc returns a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    version_at_least(&version.to_string_lossy(), (2, 35))
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_has_the_tunable() -> bool {
    false
}

/// Whether a `MAJOR.MINOR[.PATCH]` version is at least `want`.
fn version_at_least(version: &str, want: (u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= want,
        _ => false,
    }
}

/// The kernel's transparent huge page mode line (`always [madvise] never`), empty if unreadable.
fn thp_mode() -> String {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default()
}

/// Whether to start again: the user has not set the tunable, and the
/// kernel gives huge pages to memory that asks for them.
fn wanted(tunables: Option<&OsStr>, thp_mode: &str) -> bool {
    users_hugetlb(tunables).is_none() && (thp_mode.contains("[always]") || thp_mode.contains("[madvise]"))
}

/// The value `GLIBC_TUNABLES` gives `glibc.malloc.hugetlb`, if it names it.
fn users_hugetlb(tunables: Option<&OsStr>) -> Option<&[u8]> {
    tunables?
        .as_bytes()
        .split(|&c| c == b':')
        .find_map(|kv| kv.strip_prefix(b"glibc.malloc.hugetlb="))
}

/// What [`MARK`] holds for `GLIBC_TUNABLES`'s value before.
fn marked(tunables: Option<&OsStr>) -> OsString {
    let mut v = Vec::new();
    if let Some(t) = tunables {
        v.push(b'=');
        v.extend_from_slice(t.as_bytes());
    }
    OsString::from_vec(v)
}

/// `GLIBC_TUNABLES` with the huge-page tunable added to what it held.
fn with_tunable(tunables: Option<&OsStr>) -> OsString {
    match tunables {
        Some(t) if !t.is_empty() => {
            let mut v = t.as_bytes().to_vec();
            v.push(b':');
            v.extend_from_slice(TUNABLE.as_bytes());
            OsString::from_vec(v)
        }
        _ => TUNABLE.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_again_only_where_the_kernel_has_huge_pages_and_the_user_chose_nothing() {
        let madvise = "always [madvise] never\n";
        assert!(wanted(None, madvise));
        assert!(wanted(None, "[always] madvise never\n"));
        assert!(!wanted(None, "always madvise [never]\n"));
        assert!(!wanted(None, ""));
        assert!(wanted(Some(OsStr::new("glibc.malloc.tcache_count=0")), madvise));
        assert!(!wanted(Some(OsStr::new("glibc.malloc.hugetlb=0")), madvise));
        assert!(!wanted(
            Some(OsStr::new("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2")),
            madvise
        ));
    }

    #[test]
    fn valgrind_is_told_by_its_preloaded_library() {
        let core = "/usr/libexec/valgrind/vgpreload_core-amd64-linux.so";
        assert!(preloads_valgrind(Some(OsStr::new(core))));
        assert!(preloads_valgrind(Some(OsStr::new(&format!("/lib/libfoo.so:{core}")))));
        assert!(!preloads_valgrind(Some(OsStr::new("/usr/lib/libjemalloc.so"))));
        assert!(!preloads_valgrind(None));
    }

    #[test]
    fn only_a_glibc_that_knows_the_tunable_is_asked() {
        assert!(version_at_least("2.36", (2, 35)));
        assert!(version_at_least("2.35", (2, 35)));
        assert!(version_at_least("3.0", (2, 35)));
        assert!(!version_at_least("2.34", (2, 35)));
        assert!(!version_at_least("2.31.1", (2, 35)));
        assert!(!version_at_least("", (2, 35)));
        assert!(glibc_has_the_tunable() == version_at_least(&glibc_version(), (2, 35)));
    }

    /// This process's glibc version, as `ldd --version` says it.
    fn glibc_version() -> String {
        let out = std::process::Command::new("ldd").arg("--version").output().unwrap();
        let first = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string();
        first.rsplit(' ').next().unwrap_or_default().to_string()
    }

    #[test]
    fn adds_the_tunable_to_the_users_own() {
        assert_eq!(with_tunable(None), "glibc.malloc.hugetlb=1");
        assert_eq!(with_tunable(Some(OsStr::new(""))), "glibc.malloc.hugetlb=1");
        assert_eq!(
            with_tunable(Some(OsStr::new("glibc.malloc.arena_max=2"))),
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
        );
    }
}
