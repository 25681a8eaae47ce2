//! Fuzz the NBD server end to end: a real daemon (one 1 MiB export, noop)
//! runs in this process; each input is sent as a client's whole byte
//! stream (greeting flags, options, requests), the client's write side is
//! closed, and the replies are read until the server closes. No input may
//! panic the server (a panic on any of its threads aborts the process, so
//! libFuzzer reports it), hang it past the read timeout, or stop it from
//! serving the next client.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// The daemon's NBD socket; the daemon, its runtime and its directory live
/// as long as the process (they are leaked on purpose).
fn server() -> &'static PathBuf {
    static S: OnceLock<PathBuf> = OnceLock::new();
    S.get_or_init(|| {
        std::panic::set_hook(Box::new(|info| {
            eprintln!("panic: {info}");
            std::process::abort();
        }));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let text = format!(
            "[store]\npath = \"{d}/disk.img\"\n[scheduler]\nname = \"noop\"\n[nbd]\nunix = \"{d}/nbd.sock\"\nhandshake_timeout_s = 2\n[[vm]]\nname = \"vm1\"\nsize = \"1MiB\"\n"
        );
        let cfg = hvio_vdisk::Config::from_toml_str(&text, "fuzz.toml").unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let running = rt.block_on(hvio_vdisk::start(&cfg)).unwrap();
        let sock = dir.path().join("nbd.sock");
        std::mem::forget((rt, running, dir));
        sock
    })
}

fuzz_target!(|data: &[u8]| {
    let s = server();
    let mut c = UnixStream::connect(s).expect("the server accepts");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may close early (a bad magic): a failed write is fine.
    let _ = c.write_all(data);
    let _ = c.shutdown(std::net::Shutdown::Write);
    let mut sink = Vec::new();
    match c.read_to_end(&mut sink) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server neither answered nor closed: {e}"),
    }
});
