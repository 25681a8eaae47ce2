//! `hvio image crash-test`: the crash campaign of a reshaped image.
//!
//! Each round runs `hvio serve` (this binary) as a child on one reshaped
//! image, lets several NBD writers mix writes, FUA writes, FLUSH and TRIM on
//! it, and crashes it one of three ways, in turn: `kill -9` of the daemon
//! (the page cache survives, as after a process crash), a power cut (the
//! daemon runs with `[store] volatile_test`, a write-back cache in its own
//! memory that `kill -9` empties: held writes are lost, others reached the
//! file out of order), or a crash inside a checkpoint or a cleaning copy (the
//! daemon ends itself half-way through that write, under the same cache).
//! After each: `image::check` recovers the image (timed) and must find every
//! invariant intact; a fresh daemon serves it; every block must read back as
//! a version the writers' acknowledgements allow: every write acknowledged
//! before a completed FLUSH and every FUA write exactly, any other block as
//! one of the versions written to it since (or zeroes where it was trimmed
//! or never written), never another block's data or data never written. A
//! `--fault` (the negative controls) breaks the durability order on purpose;
//! the campaign must then find failures.

use anyhow::{bail, Context};
use clap::Args;
use hvio_vdisk::image;
use hvio_vdisk::nbd::proto::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Args, Clone)]
pub struct CrashTestArgs {
    /// Crashes to run.
    #[arg(long, default_value_t = 1000)]
    pub crashes: u64,
    /// Scratch directory for the image, the configuration and the socket (made if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// Seed of the crash times, the writers' choices and the write-back cache.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// NBD writers (each owns a range of the disk).
    #[arg(long, default_value_t = 4)]
    pub writers: u64,
    /// Negative control: commit-before-data, no-flush-sync or lost-checkpoint.
    #[arg(long)]
    pub fault: Option<String>,
}

/// What the campaign found.
#[derive(Debug, Default)]
pub struct Summary {
    pub crashes: u64,
    pub by_kind: [u64; 3],
    pub states_checked: u64,
    pub blocks_checked: u64,
    pub failures: Vec<String>,
    pub recovery_ms: Vec<f64>,
    pub writes_acked: u64,
    pub flushes_acked: u64,
}

const BLOCK: u64 = 4096;
const DISK_BLOCKS: u64 = 4096; // 16 MiB
const KINDS: [&str; 3] = ["kill -9", "power cut", "crash in checkpoint/cleaning"];

/// One version of a block: the id of the write that made it, or zeroes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    Zero,
    Write(u64),
}

/// A block's versions since the last check, oldest first; the ones from
/// `durable` on may be found after a crash.
#[derive(Clone, Debug)]
struct History {
    versions: Vec<Version>,
    durable: usize,
}

fn content(id: u64, block: u64) -> Vec<u8> {
    let mut v = vec![0u8; BLOCK as usize];
    for (i, c) in v.chunks_mut(16).enumerate() {
        c[0..8].copy_from_slice(&id.to_le_bytes());
        c[8..16].copy_from_slice(&(block * 256 + i as u64).to_le_bytes());
    }
    v
}

/// Which version `data` (block `block`'s contents) is, or why it is none.
fn identify(data: &[u8], block: u64) -> Result<Version, String> {
    if data.iter().all(|&b| b == 0) {
        return Ok(Version::Zero);
    }
    let id = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
    if data == content(id, block).as_slice() {
        Ok(Version::Write(id))
    } else {
        let owner = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes")) / 256;
        Err(format!(
            "holds data never written to it (first bytes say write {id} of block {owner})"
        ))
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A synchronous NBD client: one request at a time.
struct Nbd {
    s: UnixStream,
}

impl Nbd {
    fn connect(sock: &Path) -> std::io::Result<Nbd> {
        let mut s = UnixStream::connect(sock)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut g = [0u8; 18];
        s.read_exact(&mut g)?;
        s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())?;
        let name = b"vm1";
        let mut o = Vec::new();
        o.extend_from_slice(&IHAVEOPT.to_be_bytes());
        o.extend_from_slice(&OPT_EXPORT_NAME.to_be_bytes());
        o.extend_from_slice(&(name.len() as u32).to_be_bytes());
        o.extend_from_slice(name);
        s.write_all(&o)?;
        let mut r = [0u8; 10];
        s.read_exact(&mut r)?;
        Ok(Nbd { s })
    }

    /// Send a request and wait for its reply; `read` gets the data of a read.
    fn call(
        &mut self,
        flags: u16,
        typ: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
        read: Option<&mut [u8]>,
    ) -> std::io::Result<u32> {
        let mut b = Vec::with_capacity(28 + payload.len());
        b.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b.extend_from_slice(&flags.to_be_bytes());
        b.extend_from_slice(&typ.to_be_bytes());
        b.extend_from_slice(&1u64.to_be_bytes());
        b.extend_from_slice(&offset.to_be_bytes());
        b.extend_from_slice(&length.to_be_bytes());
        b.extend_from_slice(payload);
        self.s.write_all(&b)?;
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h)?;
        let err = u32::from_be_bytes(h[4..8].try_into().expect("4 bytes"));
        if err == 0 {
            if let Some(buf) = read {
                self.s.read_exact(buf)?;
            }
        }
        Ok(err)
    }
}

fn config(dir: &Path, kind: usize, round: u64, a: &CrashTestArgs, rng: &mut Rng) -> String {
    let mut volatile = String::new();
    if kind > 0 || a.fault.is_some() {
        let mut keys = format!(
            "persist_probability = 0.3, seed = {}",
            a.seed.wrapping_mul(1_000_003) + round
        );
        if let Some(f) = &a.fault {
            keys.push_str(&format!(", image_fault = \"{f}\""));
        }
        if kind == 2 {
            let point = if rng.below(2) == 0 { "checkpoint" } else { "clean" };
            keys.push_str(&format!(", crash_in = \"{point}\", crash_after = {}", 1 + rng.below(3)));
        }
        volatile = format!("volatile_test = {{ {keys} }}\n");
    }
    format!(
        r#"[store]
engine = "threads"
depth = 16
layout = "reshaped"
reshape = {{ base = false, meta_region_bytes = 3145728, data_region_bytes = 20971520, segment_bytes = 262144, log_bytes = 1048576, commit_entries = 64, clean_start = 0.1, clean_hard = 0.05 }}
{volatile}[scheduler]
name = "deadline"
[nbd]
unix = "{dir}/nbd.sock"
[log]
level = "error"
[[vm]]
name = "vm1"
size = "{size}"
image = "{dir}/vm1.rsi"
"#,
        dir = dir.display(),
        size = DISK_BLOCKS * BLOCK,
    )
}

fn start(dir: &Path, conf: &str) -> anyhow::Result<Child> {
    let path = dir.join("host.toml");
    std::fs::write(&path, conf)?;
    let sock = dir.join("nbd.sock");
    let _ = std::fs::remove_file(&sock);
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("serve")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("start hvio serve")?;
    let t0 = Instant::now();
    while UnixStream::connect(&sock).is_err() {
        if let Some(st) = child.try_wait()? {
            bail!("hvio serve exited at start ({st})");
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            bail!("hvio serve did not listen within 30 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(child)
}

/// Read every block and compare it with what the histories allow; then the
/// histories start again from what was read (the recovered state is what the
/// file holds). `false`: the daemon died first (a crash point reached by the
/// cleaner, which recovery can start); the blocks not read keep their histories.
fn verify(sock: &Path, hist: &mut [History], round: u64, s: &mut Summary) -> anyhow::Result<bool> {
    let Ok(mut c) = Nbd::connect(sock) else {
        return Ok(false);
    };
    const CHUNK: u64 = 32;
    let mut buf = vec![0u8; (CHUNK * BLOCK) as usize];
    for first in (0..DISK_BLOCKS).step_by(CHUNK as usize) {
        let Ok(err) = c.call(0, CMD_READ, first * BLOCK, (CHUNK * BLOCK) as u32, &[], Some(&mut buf)) else {
            return Ok(false);
        };
        if err != 0 {
            bail!("read of blocks {first}.. failed with error {err}");
        }
        for i in 0..CHUNK {
            let b = first + i;
            let data = &buf[(i * BLOCK) as usize..((i + 1) * BLOCK) as usize];
            let h = &mut hist[b as usize];
            s.blocks_checked += 1;
            match identify(data, b) {
                Err(why) => s.failures.push(format!("round {round}: block {b} {why}")),
                Ok(v) => {
                    if !h.versions[h.durable..].contains(&v) {
                        let lost = h.versions[h.durable];
                        s.failures.push(format!(
                            "round {round}: block {b} reads {v:?}; {lost:?} was durable (allowed: {:?})",
                            &h.versions[h.durable..]
                        ));
                    }
                    *h = History {
                        versions: vec![v],
                        durable: 0,
                    };
                }
            }
        }
    }
    s.states_checked += 1;
    let _ = c.call(0, CMD_DISC, 0, 0, &[], None);
    Ok(true)
}

/// One writer: random writes (some FUA), FLUSH and TRIM on its own blocks until `go` clears or the daemon dies.
fn writer(
    sock: PathBuf,
    first: u64,
    blocks: u64,
    seed: u64,
    next_id: Arc<Mutex<u64>>,
    hist: Arc<Mutex<Vec<History>>>,
    go: Arc<AtomicBool>,
) -> (u64, u64) {
    let Ok(mut c) = Nbd::connect(&sock) else { return (0, 0) };
    let mut rng = Rng(seed);
    let mut since_flush: Vec<u64> = Vec::new();
    let (mut acked, mut flushes) = (0, 0);
    while go.load(Ordering::Relaxed) {
        let r = rng.below(100);
        let b = first + rng.below(blocks);
        if r < 8 {
            // FLUSH: every write acknowledged before it is durable once it completes.
            match c.call(0, CMD_FLUSH, 0, 0, &[], None) {
                Ok(0) => {
                    flushes += 1;
                    let mut h = hist.lock().unwrap_or_else(|p| p.into_inner());
                    for &blk in &since_flush {
                        let e = &mut h[blk as usize];
                        e.durable = e.versions.len() - 1;
                    }
                    since_flush.clear();
                }
                _ => return (acked, flushes),
            }
            continue;
        }
        let (version, typ, flags, payload) = if r < 14 {
            (Version::Zero, CMD_TRIM, 0, Vec::new())
        } else {
            let id = {
                let mut n = next_id.lock().unwrap_or_else(|p| p.into_inner());
                *n += 1;
                *n
            };
            let fua = r < 24;
            (
                Version::Write(id),
                CMD_WRITE,
                if fua { CMD_FLAG_FUA } else { 0 },
                content(id, b),
            )
        };
        // In flight: it may be found after a crash whether or not it is acknowledged.
        hist.lock().unwrap_or_else(|p| p.into_inner())[b as usize]
            .versions
            .push(version);
        match c.call(flags, typ, b * BLOCK, BLOCK as u32, &payload, None) {
            Ok(0) => {
                acked += 1;
                let mut h = hist.lock().unwrap_or_else(|p| p.into_inner());
                let e = &mut h[b as usize];
                if flags & CMD_FLAG_FUA != 0 {
                    e.durable = e.versions.len() - 1;
                } else {
                    since_flush.push(b);
                }
            }
            _ => return (acked, flushes),
        }
    }
    (acked, flushes)
}

/// Run the campaign; progress goes to stderr.
pub fn campaign(a: &CrashTestArgs) -> anyhow::Result<Summary> {
    std::fs::create_dir_all(&a.dir).with_context(|| format!("create {}", a.dir.display()))?;
    let img = a.dir.join("vm1.rsi");
    let _ = std::fs::remove_file(&img);
    let sock = a.dir.join("nbd.sock");
    let mut rng = Rng(a.seed);
    let mut s = Summary::default();
    let hist = Arc::new(Mutex::new(vec![
        History {
            versions: vec![Version::Zero],
            durable: 0,
        };
        DISK_BLOCKS as usize
    ]));
    let next_id = Arc::new(Mutex::new(a.seed << 40));
    let t0 = Instant::now();
    for round in 0..a.crashes {
        let kind = if a.fault.is_some() { 1 } else { (round % 3) as usize };
        let conf = config(&a.dir, kind, round, a, &mut rng);
        let mut child = match start(&a.dir, &conf) {
            Ok(c) => c,
            Err(e) => {
                // Recovery refused the crashed image: a failure, and the end.
                s.failures.push(format!(
                    "round {round}: the daemon did not start on the crashed image: {e:#}"
                ));
                return Ok(s);
            }
        };
        // The state the last crash left, recovered by this daemon.
        let verified = verify(
            &sock,
            &mut hist.lock().unwrap_or_else(|p| p.into_inner()),
            round,
            &mut s,
        )?;
        let go = Arc::new(AtomicBool::new(verified));
        let per = DISK_BLOCKS / a.writers;
        let writers: Vec<_> = (0..a.writers)
            .map(|w| {
                let (sock, hist, go, ids) = (sock.clone(), hist.clone(), go.clone(), next_id.clone());
                let seed = rng.next();
                std::thread::spawn(move || writer(sock, w * per, per, seed, ids, hist, go))
            })
            .collect();
        let run_ms = if verified { 100 + rng.below(400) } else { 0 };
        let deadline = Instant::now() + Duration::from_millis(run_ms);
        while Instant::now() < deadline {
            if child.try_wait()?.is_some() {
                break; // a crash point ended it
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        go.store(false, Ordering::Relaxed);
        for w in writers {
            let (acked, flushes) = w.join().unwrap_or((0, 0));
            s.writes_acked += acked;
            s.flushes_acked += flushes;
        }
        s.crashes += 1;
        s.by_kind[kind] += 1;
        match image::check(&img) {
            Ok(rep) => {
                s.recovery_ms.push(rep.opened.took.as_secs_f64() * 1e3);
                for p in rep.problems {
                    s.failures.push(format!("round {round}: image check: {p}"));
                }
            }
            Err(e) => s.failures.push(format!("round {round}: {e}")),
        }
        if (round + 1) % 50 == 0 {
            eprintln!(
                "hvio image crash-test: {} crashes, {} failures, {:.0} s",
                round + 1,
                s.failures.len(),
                t0.elapsed().as_secs_f64()
            );
        }
        if s.failures.len() > 1000 {
            break;
        }
    }
    // The last crash's state, recovered and checked.
    let mut child = match start(&a.dir, &config(&a.dir, 0, a.crashes, a, &mut rng)) {
        Ok(c) => c,
        Err(e) => {
            s.failures
                .push(format!("the daemon did not start on the crashed image: {e:#}"));
            return Ok(s);
        }
    };
    let r = verify(
        &sock,
        &mut hist.lock().unwrap_or_else(|p| p.into_inner()),
        a.crashes,
        &mut s,
    );
    let _ = child.kill();
    let _ = child.wait();
    if !r? {
        s.failures.push("the daemon died while the last state was read".into());
    }
    Ok(s)
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

pub fn crash_test(a: CrashTestArgs) -> anyhow::Result<()> {
    if let Some(f) = &a.fault {
        if !["commit-before-data", "no-flush-sync", "lost-checkpoint"].contains(&f.as_str()) {
            bail!("`--fault {f}`: use commit-before-data, no-flush-sync or lost-checkpoint");
        }
    }
    if a.writers == 0 || a.writers > 64 {
        bail!("`--writers {}`: must be between 1 and 64", a.writers);
    }
    let t0 = Instant::now();
    let s = campaign(&a)?;
    println!(
        "crashes          {} ({})",
        s.crashes,
        KINDS
            .iter()
            .zip(s.by_kind)
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "states checked   {} ({} blocks read back)",
        s.states_checked, s.blocks_checked
    );
    println!("writes acked     {} ({} FLUSHes)", s.writes_acked, s.flushes_acked);
    println!(
        "recovery         p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (image check's recovery: log and checkpoints read, table rebuilt)",
        quantile(&s.recovery_ms, 0.5),
        quantile(&s.recovery_ms, 0.99),
        quantile(&s.recovery_ms, 1.0)
    );
    println!("failures         {}", s.failures.len());
    for f in s.failures.iter().take(20) {
        println!("  {f}");
    }
    println!("took             {:.0} s", t0.elapsed().as_secs_f64());
    if !s.failures.is_empty() && a.fault.is_none() {
        bail!("{} failures", s.failures.len());
    }
    if s.failures.is_empty() && a.fault.is_some() {
        bail!("the fault `{}` went unnoticed", a.fault.as_deref().unwrap_or_default());
    }
    Ok(())
}
