//! The extent map against a per-sector model: any sequence of inserts and
//! removals leaves lookups equal to the model's, extents never overlap, and
//! what an insert or removal returns is exactly what the model held there.

use hvio_reshape::{ExtentMap, Target};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Insert {
        start: u64,
        sectors: u64,
        target: Option<u64>,
    },
    Remove {
        start: u64,
        sectors: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..200, 1u64..40, prop::option::weighted(0.9, 0u64..400)).prop_map(|(start, sectors, target)| {
            Op::Insert { start, sectors, target }
        }),
        1 => (0u64..200, 1u64..60).prop_map(|(start, sectors)| Op::Remove { start, sectors }),
    ]
}

fn per_sector(extents: impl Iterator<Item = hvio_reshape::Extent>) -> BTreeMap<u64, Target> {
    let mut out = BTreeMap::new();
    for e in extents {
        for k in 0..e.sectors {
            let t = match e.target {
                Target::At(t) => Target::At(t + k),
                Target::Zero => Target::Zero,
            };
            out.insert(e.start + k, t);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn extent_map_matches_a_per_sector_model(ops in prop::collection::vec(op(), 1..60)) {
        let mut m = ExtentMap::new();
        let mut model: BTreeMap<u64, Target> = BTreeMap::new();
        for op in ops {
            let (start, sectors, removed) = match op {
                Op::Insert { start, sectors, target } => {
                    let target = target.map_or(Target::Zero, Target::At);
                    let removed = m.insert(start, sectors, target);
                    let before = model.clone();
                    for k in 0..sectors {
                        model.insert(start + k, match target { Target::At(t) => Target::At(t + k), Target::Zero => Target::Zero });
                    }
                    (start, sectors, (removed, before))
                }
                Op::Remove { start, sectors } => {
                    let removed = m.remove(start, sectors);
                    let before = model.clone();
                    for k in 0..sectors {
                        model.remove(&(start + k));
                    }
                    (start, sectors, (removed, before))
                }
            };
            let (removed, before) = removed;
            let expected: BTreeMap<u64, Target> =
                before.range(start..start + sectors).map(|(&k, &v)| (k, v)).collect();
            prop_assert_eq!(per_sector(removed.into_iter()), expected);
            // No overlap, and the table equals the model.
            let mut last_end = 0;
            for e in m.iter() {
                prop_assert!(e.start >= last_end && e.sectors > 0);
                last_end = e.end();
            }
            prop_assert_eq!(per_sector(m.iter()), model.clone());
        }
        // Lookups cover the range exactly, pieces agree with the model.
        for start in (0..240).step_by(7) {
            let pieces = m.lookup(start, 13);
            let mut at = start;
            for p in &pieces {
                prop_assert_eq!(p.start, at);
                for k in 0..p.sectors {
                    let want = model.get(&(p.start + k)).copied();
                    let got = p.target.map(|t| match t { Target::At(t) => Target::At(t + k), Target::Zero => Target::Zero });
                    prop_assert_eq!(got, want);
                }
                at += p.sectors;
            }
            prop_assert_eq!(at, start + 13);
        }
    }
}
