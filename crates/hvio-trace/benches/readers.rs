//! Reader throughput: records per second per core, text and binary formats.
//! `cargo bench -p hvio-trace --bench readers`; figures in docs/traces.md.

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hvio_trace::formats::blktrace::{BlkIoTrace, MAGIC, TC_READ, TC_SHIFT, TC_WRITE};
use hvio_trace::{Format, ReadOptions, TraceReader};
use std::hint::black_box;
use std::io::Cursor;

const N: u64 = 200_000;

fn lcg(x: &mut u64) -> u64 {
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *x >> 33
}

fn text(format: Format) -> Vec<u8> {
    let mut s = String::new();
    let mut x = 1u64;
    for i in 0..N {
        let off = lcg(&mut x) % (1 << 30) * 512;
        let len = 512 << (lcg(&mut x) % 8);
        let w = lcg(&mut x).is_multiple_of(3);
        let line = match format {
            Format::Msr => format!(
                "{},src1,{},{},{off},{len},{}\n",
                128166372000000000 + i * 1000,
                i % 3,
                if w { "Write" } else { "Read" },
                1000 + i % 777
            ),
            Format::Alibaba => format!(
                "{},{},{off},{len},{}\n",
                i % 1000,
                if w { 'W' } else { 'R' },
                1577808000000000 + i * 10
            ),
            Format::Spc => format!(
                "{},{},{len},{},{}.{:06}\n",
                i % 24,
                off / 512,
                if w { 'w' } else { 'r' },
                i / 1000,
                i % 1000 * 1000
            ),
            Format::Blkparse => {
                let t = i * 12_345;
                format!(
                    "  8,0    {}  {:>7}  {:>5}.{:09}  4162  Q  {} {} + {} [fio]\n",
                    i % 4,
                    i,
                    t / 1_000_000_000,
                    t % 1_000_000_000,
                    if w { "WS" } else { "R" },
                    off / 512,
                    len / 512
                )
            }
            Format::Iolog3 => {
                if i == 0 {
                    s.push_str("fio version 3 iolog\n");
                }
                format!("{} /dev/sdb {} {off} {len}\n", i * 10, if w { "write" } else { "read" })
            }
            _ => unreachable!(),
        };
        s.push_str(&line);
    }
    s.into_bytes()
}

fn blktrace() -> Vec<u8> {
    let mut out = Vec::new();
    let mut x = 7u64;
    for i in 0..N {
        let w = lcg(&mut x).is_multiple_of(3);
        let t = BlkIoTrace {
            magic: MAGIC | 7,
            sequence: i as u32,
            time: i * 1000,
            sector: lcg(&mut x) % (1 << 30),
            bytes: 4096,
            action: 1 | ((if w { TC_WRITE } else { TC_READ }) << TC_SHIFT),
            pid: 1,
            device: 8 << 20,
            cpu: 0,
            error: 0,
            pdu_len: 0,
        };
        t.encode(false, &mut out);
    }
    out
}

fn vscsi2() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..N {
        out.extend_from_slice(&(if i.is_multiple_of(3) { 0x2au16 } else { 0x28 }).to_le_bytes());
        out.extend_from_slice(&0x0200u16.to_le_bytes());
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&4096u32.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&(i * 8).to_le_bytes());
        out.extend_from_slice(&(i * 10).to_le_bytes());
        out.extend_from_slice(&100u64.to_le_bytes());
    }
    out
}

/// CPU time of the benchmarking thread (from /proc/thread-self/schedstat, in
/// ns), so the figures are per core even on a loaded machine.
struct CpuTime;

fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat (Linux) is needed for CPU-time measurement")
}

struct NsFormatter;

impl ValueFormatter for NsFormatter {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "ns"
    }
    fn scale_throughputs(&self, _typical: f64, throughput: &Throughput, values: &mut [f64]) -> &'static str {
        match throughput {
            Throughput::Elements(n) => {
                for v in values.iter_mut() {
                    *v = *n as f64 * 1e9 / *v / 1e6;
                }
                "Melem/s (CPU)"
            }
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) => {
                for v in values.iter_mut() {
                    *v = *n as f64 * 1e9 / *v / 1e6;
                }
                "MB/s (CPU)"
            }
        }
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, i: u64) -> u64 {
        thread_cpu_ns().saturating_sub(i)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &NsFormatter
    }
}

fn bench(c: &mut Criterion<CpuTime>) {
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    let cases: Vec<(&str, Format, Vec<u8>)> = vec![
        ("msr", Format::Msr, text(Format::Msr)),
        ("alibaba", Format::Alibaba, text(Format::Alibaba)),
        ("spc", Format::Spc, text(Format::Spc)),
        ("blkparse", Format::Blkparse, text(Format::Blkparse)),
        ("iolog3", Format::Iolog3, text(Format::Iolog3)),
        ("blktrace", Format::Blktrace, blktrace()),
        ("vscsi2", Format::Vscsi2, vscsi2()),
    ];
    for (name, format, data) in cases {
        let o = ReadOptions {
            format: Some(format),
            allow_unsorted: true,
            ..Default::default()
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                let r = TraceReader::from_reader(name, Box::new(Cursor::new(data.clone())), &o).unwrap();
                let mut n = 0u64;
                for rec in r {
                    n += black_box(rec.unwrap()).sectors as u64;
                }
                n
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(CpuTime);
    targets = bench
}
criterion_main!(benches);
