//! The meta-scheduler of paper 002 (§IV): a job is cut into phases, each
//! phase gets a (host, guest) scheduler pair, and a search picks the pairs.
//!
//! - [`search`]: the paper's Algorithm 1 (§IV.C) and the brute force over
//!   every assignment it is measured against, generic over an evaluator that
//!   runs a plan and reports each phase's time and each switch's cost;
//! - [`switch_cost`]: the cost of each ordered switch, measured as §IV.B
//!   does, generic over a runner of the benchmark;
//! - [`plan`]: `[[phase]]` switch plans as a config gives them, checked
//!   before a run;
//! - [`workload`]: `hvio tune`, the search over an `hvio sim` config's own
//!   phases, and the plan it finds written back as a config.

pub mod plan;
pub mod search;
pub mod switch_cost;
pub mod workload;

pub use plan::{PhaseConfig, PhasePlan, Step, When};
pub use search::{
    algorithm1, algorithm1_walk, brute_force, compare, profile, Comparison, Found, Outcome, Plan, Profile, Space,
    Walked,
};
pub use switch_cost::{measure, CostRun, SwitchCosts};
