//! Every registered scheduler's tunables are user input (`[host] params`,
//! `guest_params`, the Python API, `hvio serve`): a value outside the
//! declared range is an error naming the scheduler, the key and the value,
//! and every value inside it runs without a panic or arithmetic overflow
//! (tests run in a debug build, overflow checks on) under random workloads.

mod common;

use common::{arrival, ctx_with, drive_sched, Arrival, Stub};
use hvio_core::{Nanos, ParamSpec, ParamValues, SchedContext, StreamInfo};
use hvio_sched::Driver;
use proptest::prelude::*;

/// Waits longer than this (115 days) are treated as unbounded idling; the
/// largest time tunable (1e8 ms) is far below it.
const MAX_WAIT: Nanos = 10_000_000_000_000_000;

/// The interesting values of one tunable: its bounds, 0 and 1 where
/// allowed, its default, and points spread over the range.
fn probes(p: &ParamSpec) -> Vec<f64> {
    let mut v = vec![p.min, p.max, p.default];
    for x in [0.0, 1.0] {
        if p.min <= x && x <= p.max {
            v.push(x);
        }
    }
    for f in [0.001, 0.5, 0.999] {
        v.push(pick(p, f));
    }
    v.dedup();
    v
}

/// A value inside `p`'s range at fraction `f` of it: log-spaced when the
/// range spans orders of magnitude, rounded for integer tunables.
fn pick(p: &ParamSpec, f: f64) -> f64 {
    let x = if p.min > 0.0 && p.max / p.min > 100.0 {
        (p.min.ln() + f * (p.max.ln() - p.min.ln())).exp()
    } else if p.min == 0.0 && p.max > 100.0 {
        (f * (p.max + 1.0).ln()).exp() - 1.0
    } else {
        p.min + f * (p.max - p.min)
    };
    let x = if p.integer { x.round() } else { x };
    x.clamp(p.min, p.max)
}

/// One run: tunables, streams, device depth, workload, run-time stream changes.
fn run(
    name: &str,
    overrides: &ParamValues,
    ctx: &SchedContext,
    depth: usize,
    arrivals: &[Arrival],
    changes: &[(usize, StreamInfo)],
    service: Nanos,
) {
    let mut d = Driver::build(name, overrides, ctx.clone()).unwrap_or_else(|e| panic!("{name} {overrides:?}: {e}"));
    let stub = Stub {
        service,
        depth,
        max_wait: MAX_WAIT,
        steps_per_request: 200,
    };
    drive_sched(&format!("{name} {overrides:?}"), &mut d, arrivals, changes, &[], stub);
}

/// A fixed mixed workload: a burst, then sparse requests from every stream.
fn fixed_workload() -> Vec<Arrival> {
    (0..240u64)
        .map(|i| Arrival {
            gap_us: if i < 80 { 0 } else { (i * 997) % 30_000 },
            stream: (i % 5) as u32,
            sector: (i * 7919 * 8 + (i % 3) * 16) % (common::CAPACITY - 256),
            sectors: 1 + (i % 17) as u32 * 8,
            op: match i % 7 {
                0 | 3 => hvio_core::Op::Write,
                6 => hvio_core::Op::Flush,
                _ => hvio_core::Op::Read,
            },
        })
        .collect()
}

#[test]
fn out_of_range_values_are_errors_naming_scheduler_key_and_value() {
    let ctx = common::ctx(2);
    for spec in hvio_sched::SCHEDULERS {
        for p in spec.params {
            let mut bad = vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, p.max * 2.0 + 1.0, -1.0];
            if p.min > 0.0 {
                bad.push(p.min / 2.0);
            }
            if p.integer {
                bad.push(p.min + 0.5);
            }
            for value in bad {
                if value >= p.min && value <= p.max && !(p.integer && value.fract() != 0.0) {
                    continue;
                }
                let mut o = ParamValues::new();
                o.insert(p.name.into(), value);
                let err = hvio_sched::build(spec.name, &o, &ctx)
                    .err()
                    .unwrap_or_else(|| panic!("{}: {} = {value} accepted", spec.name, p.name))
                    .to_string();
                let shown = value.to_string();
                assert!(
                    err.contains(&format!("scheduler {}", spec.name)) && err.contains(p.name) && err.contains(&shown),
                    "{}: {} = {value}: {err}",
                    spec.name,
                    p.name
                );
            }
        }
    }
}

#[test]
fn every_tunable_at_its_bounds_runs() {
    let arrivals = fixed_workload();
    for spec in hvio_sched::SCHEDULERS {
        for p in spec.params {
            for value in probes(p) {
                let mut o = ParamValues::new();
                o.insert(p.name.into(), value);
                // Weights at the config's ends, and (a library caller's
                // StreamInfo is not checked) 0 and u32::MAX.
                for (rotational, depth, service, weights) in [
                    (true, 1, 3_000_000, [100, 1, 10_000, 500]),
                    (false, 4, 50_000, [100, 1, 10_000, 500]),
                    (true, 2, 1_000_000, [0, 1, u32::MAX, 0]),
                ] {
                    let mut ctx = ctx_with(&weights, rotational);
                    ctx.device.queue_depth = depth;
                    run(spec.name, &o, &ctx, depth, &arrivals, &[], service);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]
    /// All tunables at once drawn inside their ranges (bounds and 0 often),
    /// random weights (the config's 1..=10000), stream attributes (any
    /// number: bad ones fall back to the defaults), device kind and depth,
    /// and random arrivals: no panic, no overflow, the conformance
    /// invariants hold.
    #[test]
    fn tunables_inside_their_ranges_never_panic(
        choices in prop::collection::vec((0u8..8, 0.0f64..1.0), 32),
        weights in prop::collection::vec(prop_oneof![Just(1u32), Just(10_000u32), 1u32..=10_000], 1..5),
        attrs in prop::collection::vec(prop_oneof![
            Just(0.0), Just(1e-300), Just(1e-3), Just(1.0), Just(1e9), Just(1e300),
            Just(-1.0), Just(f64::NAN), Just(f64::INFINITY), 0.0f64..1e4,
        ], 16),
        rotational in any::<bool>(),
        depth in 1usize..5,
        arrivals in prop::collection::vec(arrival(), 1..200),
        service in 10_000u64..20_000_000,
        changes in prop::collection::vec((0usize..200, 0u32..6, prop_oneof![Just(1u32), Just(10_000u32), 1u32..=10_000]), 0..4),
    ) {
        for spec in hvio_sched::SCHEDULERS {
            let mut ctx = ctx_with(&weights, rotational);
            ctx.device.queue_depth = depth;
            // Stream attributes (`[[vm]] attrs`) the scheduler reads, on every stream.
            let names = spec.stream_attrs.iter().filter(|a| a.range.is_some()).map(|a| a.name);
            for (k, name) in names.enumerate() {
                for (i, st) in ctx.streams.iter_mut().enumerate() {
                    st.attrs.insert(name.into(), attrs[(k * 5 + i) % attrs.len()]);
                }
            }
            let mut o = ParamValues::new();
            for (p, &(c, f)) in spec.params.iter().zip(&choices) {
                let v = match c {
                    0 => p.min,
                    1 => p.max,
                    2 => p.default,
                    3 => p.min.max(0.0).min(p.max),
                    _ => pick(p, f),
                };
                o.insert(p.name.into(), v);
            }
            // Run-time changes (`hvio serve`'s PUT /vms/NAME): new weights
            // and attributes, streams 4 and 5 unknown until then.
            let changes: Vec<(usize, StreamInfo)> = changes
                .iter()
                .enumerate()
                .map(|(j, &(at, id, w))| {
                    let mut info = ctx
                        .streams
                        .iter()
                        .find(|s| s.id == id)
                        .cloned()
                        .unwrap_or_else(|| StreamInfo::new(id, format!("new{id}")));
                    info.weight = w;
                    for (name, v) in info.attrs.iter_mut() {
                        *v = attrs[(j + name.len()) % attrs.len()];
                    }
                    (at, info)
                })
                .collect();
            run(spec.name, &o, &ctx, depth, &arrivals, &changes, service);
        }
    }
}
