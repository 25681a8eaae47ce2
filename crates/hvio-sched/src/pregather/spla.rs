//! The SPLA heuristic of Pregather (paper 000, §4.1): timer arming after a
//! completion (Algorithm 1) and the dispatch-or-wait test (Algorithm 2).

use super::vnavigator::Unit;
use hvio_core::{Nanos, Sector};

/// An armed timer of Algorithm 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// Wait for a request with regional locality (from the served VM), up to
    /// `AvgT(VM_x)`; `avg_t` is that interval.
    Coarse {
        /// When the wait ends.
        until: Nanos,
        /// `AvgT(VM_x)`.
        avg_t: Nanos,
    },
    /// Wait for a request inside sub-region unit `unit`, up to `ST(U_i)`.
    Fine {
        /// When the wait ends (`ST(U_i)`).
        until: Nanos,
        /// The unit waited on.
        unit: Unit,
    },
}

impl Timer {
    /// When the wait ends.
    pub fn until(&self) -> Nanos {
        match *self {
            Timer::Coarse { until, .. } | Timer::Fine { until, .. } => until,
        }
    }
}

/// What Algorithm 1 looks at when a request `LR` of the served VM completes.
#[derive(Debug, Clone, Copy)]
pub struct ArmInput {
    /// When the request completed.
    pub now: Nanos,
    /// `Q(VM_x) != Null`.
    pub vm_pending: bool,
    /// `AvgD(VM_x)` in sectors, once known.
    pub avg_d: Option<f64>,
    /// `AvgT(VM_x)`, once known.
    pub avg_t: Option<Nanos>,
    /// `size(VM_x)` in sectors.
    pub image: Sector,
    /// `|P(neighbor(VM_x).PR) − P(LR)|`: distance to the closest pending
    /// request of another VM (None when no other VM has one). Read only
    /// when `vm_pending` is false: the caller need not search otherwise.
    pub neighbour_distance: Option<Sector>,
    /// The sub-region unit containing `P(LR)`, from the vNavigator.
    pub unit: Option<Unit>,
}

/// Algorithm 1: the timer to arm after a completion from the served VM, if any.
pub fn arm(i: &ArmInput) -> Option<Timer> {
    if !i.vm_pending {
        // Coarse: AvgD < size(VM_x) && AvgD < distance to the neighbour's PR.
        let d = i.avg_d?;
        let t = i.avg_t?;
        let closer = !matches!(i.neighbour_distance, Some(n) if d >= n as f64);
        (d < i.image as f64 && closer && t > 0).then_some(Timer::Coarse {
            until: i.now + t,
            avg_t: t,
        })
    } else {
        // Fine: P(LR) ∈ SR(U_i).
        let u = i.unit?;
        (u.interval > 0).then_some(Timer::Fine {
            until: i.now + u.interval,
            unit: u,
        })
    }
}

/// Algorithm 2's test of a candidate request against the armed timer: the
/// coarse timer accepts a request of the served VM or one whose estimated
/// seek is no longer than `AvgT`; the fine timer accepts a request inside the
/// unit or one whose estimated seek is no longer than `ST(U_i)`.
pub fn suitable(timer: &Timer, from_served_vm: bool, sector: Sector, seek: Nanos) -> bool {
    match *timer {
        Timer::Coarse { avg_t, .. } => from_served_vm || avg_t >= seek,
        Timer::Fine { unit, .. } => unit.contains(sector) || unit.interval >= seek,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hvio_core::ms;

    fn input() -> ArmInput {
        ArmInput {
            now: ms(100),
            vm_pending: false,
            avg_d: Some(5_000.0),
            avg_t: Some(ms(3)),
            image: 1_000_000,
            neighbour_distance: Some(2_000_000),
            unit: Some(Unit {
                start: 0,
                end: 4000,
                interval: ms(2),
            }),
        }
    }

    #[test]
    fn coarse_timer_arming_conditions() {
        let i = input();
        assert_eq!(
            arm(&i),
            Some(Timer::Coarse {
                until: ms(103),
                avg_t: ms(3)
            })
        );
        // No other VM pending: the neighbour condition holds.
        assert!(matches!(
            arm(&ArmInput {
                neighbour_distance: None,
                ..i
            }),
            Some(Timer::Coarse { .. })
        ));
        // AvgD not below the image size.
        assert_eq!(arm(&ArmInput { image: 5_000, ..i }), None);
        // AvgD not below the distance to the neighbour's pending request.
        assert_eq!(
            arm(&ArmInput {
                neighbour_distance: Some(5_000),
                ..i
            }),
            None
        );
        // Nothing known yet.
        assert_eq!(arm(&ArmInput { avg_t: None, ..i }), None);
    }

    #[test]
    fn fine_timer_arming_conditions() {
        let i = ArmInput {
            vm_pending: true,
            ..input()
        };
        let u = i.unit.unwrap();
        assert_eq!(
            arm(&i),
            Some(Timer::Fine {
                until: ms(102),
                unit: u
            })
        );
        // P(LR) in no unit: no timer, even though a coarse one would qualify.
        assert_eq!(arm(&ArmInput { unit: None, ..i }), None);
    }

    #[test]
    fn dispatch_conditions() {
        let c = Timer::Coarse {
            until: ms(5),
            avg_t: ms(3),
        };
        assert!(suitable(&c, true, 9_999_999, ms(14)));
        assert!(suitable(&c, false, 9_999_999, ms(3)));
        assert!(!suitable(&c, false, 9_999_999, ms(4)));
        let f = Timer::Fine {
            until: ms(5),
            unit: Unit {
                start: 2000,
                end: 6000,
                interval: ms(1),
            },
        };
        assert!(suitable(&f, true, 5999, ms(9)));
        assert!(!suitable(&f, true, 6000, ms(2)));
        assert!(suitable(&f, true, 6000, ms(1)));
    }
}
