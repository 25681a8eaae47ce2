//! The meta-scheduler of paper 002 (§IV): a job is cut into phases, each
//! phase gets a (host, guest) scheduler pair, and a search picks the pairs.
//!
//! [`search`] holds the search itself — the paper's Algorithm 1 (§IV.C) and
//! the brute force over every assignment it is measured against — generic
//! over an evaluator that runs a plan and reports each phase's time and each
//! switch's cost, so the same search serves the simulator, a hand-made cost
//! table and (later) a live host.

pub mod search;

pub use search::{algorithm1, brute_force, compare, profile, Comparison, Found, Outcome, Plan, Profile, Space};
