//! Replay overhead: the cost of reading and mapping a trace on top of the
//! replay simulation itself, in CPU time of this thread.
//! `cargo run --release -p hvio-cli --example replay_overhead [N]`
//! (figures in docs/traces.md).

use hvio_core::Op;
use hvio_sim::replay::{replay, ReplayMode, ReplayRequest};
use hvio_sim::Config;
use hvio_trace::{ReadOptions, TraceReader};
use std::io::Write;

fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn to_request(r: hvio_trace::TraceRecord) -> ReplayRequest {
    ReplayRequest {
        time: r.time,
        vm: r.device as usize,
        op: r.op,
        sector: r.sector % (1 << 24),
        sectors: r.sectors,
        sync: r.op == Op::Read,
        meta: false,
        fua: false,
    }
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let dir = std::env::temp_dir().join(format!("hvio-replay-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.csv");
    {
        // An Alibaba-format trace over 4 volumes, 2 ms apart, random 4-64 KiB.
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut x = 1u64;
        for i in 0..n {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = (x >> 33) % (1 << 24) * 512;
            let len = 4096 << ((x >> 20) % 5);
            writeln!(
                f,
                "{},{},{off},{len},{}",
                i % 4,
                if (x >> 40).is_multiple_of(3) { 'W' } else { 'R' },
                1_577_808_000_000_000 + i * 2000
            )
            .unwrap();
        }
    }
    let cfg = Config::from_toml_str(
        "[host]\nscheduler = \"deadline\"\n[[vm]]\nname = \"0\"\nimage_size = \"8GiB\"\n[[vm]]\nname = \"1\"\nimage_size = \"8GiB\"\n[[vm]]\nname = \"2\"\nimage_size = \"8GiB\"\n[[vm]]\nname = \"3\"\nimage_size = \"8GiB\"\n",
        "overhead",
    )
    .unwrap();
    let opts = ReadOptions::default();
    let mode = ReplayMode::Closed { depth: 4 };
    // 1. Reading alone.
    let t = cpu_ns();
    let records: Vec<_> = TraceReader::open(&path, &opts).unwrap().map(|r| r.unwrap()).collect();
    let read_ns = cpu_ns() - t;
    // 2. The replay from requests already in memory.
    let reqs: Vec<Result<ReplayRequest, String>> = records.iter().map(|r| Ok(to_request(*r))).collect();
    let t = cpu_ns();
    let a = replay(&cfg, reqs, mode).unwrap();
    let sim_ns = cpu_ns() - t;
    // 3. The replay streaming from the file.
    let t = cpu_ns();
    let stream = TraceReader::open(&path, &opts).unwrap().map(|r| r.map(to_request));
    let b = replay(&cfg, stream, mode).unwrap();
    let both_ns = cpu_ns() - t;
    // 4. The same with the parsing on a reader thread (what `hvio replay` does).
    let t = cpu_ns();
    let stream = TraceReader::open(&path, &opts)
        .unwrap()
        .prefetch(4096)
        .map(|r| r.map(to_request));
    let c = replay(&cfg, stream, mode).unwrap();
    let pre_ns = cpu_ns() - t;
    assert_eq!(a.host.requests, b.host.requests);
    assert_eq!(a.host.requests, c.host.requests);
    let per = |ns: u64| ns as f64 / n as f64;
    println!("requests                 {n}");
    println!(
        "read only                {:8.0} ns/request ({:.2} M/s)",
        per(read_ns),
        n as f64 / read_ns as f64 * 1e3
    );
    println!("replay from memory       {:8.0} ns/request", per(sim_ns));
    println!("replay streaming a file  {:8.0} ns/request", per(both_ns));
    println!(
        "overhead of reading      {:8.1} %",
        100.0 * (both_ns as f64 - sim_ns as f64) / sim_ns as f64
    );
    println!(
        "replay, reader thread    {:8.0} ns/request on the replay thread",
        per(pre_ns)
    );
    println!(
        "overhead, reader thread  {:8.1} %",
        100.0 * (pre_ns as f64 - sim_ns as f64) / sim_ns as f64
    );
    std::fs::remove_dir_all(&dir).ok();
}
