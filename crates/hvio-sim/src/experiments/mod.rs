//! Paper reproductions runnable by name (`hvio reproduce NAME`,
//! `hvio.reproduce(name)` in Python) that are still written in Rust. Each
//! is a file here that builds its configs, runs them and returns a
//! [`Report`]: titled tables with the paper's numbers beside hvio's, notes,
//! and raw data for plots. The other experiments are studies
//! (`experiments/NAME.study.toml`) with their paper numbers beside them and
//! their analysis in the Python package (`hvio.analysis`); `hvio reproduce`
//! hands those to `python3 -m hvio reproduce`.

mod meta_paper002;

use crate::error::{Result, SimError};
use crate::report::Table;
use serde::Serialize;

/// Options every experiment accepts.
#[derive(Clone, Debug)]
pub struct ExpOptions {
    /// The seed of every run (default 1).
    pub seed: u64,
    /// A scaled-down run (for tests and quick looks); the default is the full run.
    pub quick: bool,
}

impl Default for ExpOptions {
    fn default() -> Self {
        ExpOptions { seed: 1, quick: false }
    }
}

/// What an experiment produced.
#[derive(Clone, Debug, Serialize, Default)]
pub struct Report {
    /// The experiment's name.
    pub name: String,
    /// What it reproduces.
    pub title: String,
    /// The paper it comes from.
    pub paper: String,
    /// The seed the experiment ran with (`ExpOptions::seed`): with `quick`,
    /// all a rerun needs to reproduce this report byte for byte.
    pub seed: u64,
    /// A scaled-down run (`ExpOptions::quick`).
    pub quick: bool,
    /// Its tables, the paper's numbers beside hvio's.
    pub tables: Vec<Table>,
    /// Notes: goals met or missed, and why.
    pub notes: Vec<String>,
    /// Raw data for figures (per-run results, series), free-form JSON.
    pub data: serde_json::Value,
}

impl Report {
    /// The tables and notes as plain text.
    pub fn render(&self) -> String {
        let mut s = format!(
            "{} — {}\n({})\nseed {}{}\n\n",
            self.name,
            self.title,
            self.paper,
            self.seed,
            if self.quick { ", quick run" } else { "" }
        );
        for t in &self.tables {
            s.push_str(&t.render());
            s.push('\n');
        }
        for n in &self.notes {
            s.push_str("note: ");
            s.push_str(n);
            s.push('\n');
        }
        s
    }
}

/// One runnable experiment.
pub struct Experiment {
    /// The name `hvio reproduce` takes.
    pub name: &'static str,
    /// What it reproduces.
    pub title: &'static str,
    /// The paper it comes from.
    pub paper: &'static str,
    /// Runs it.
    pub run: fn(&ExpOptions) -> Result<Report>,
}

/// Every experiment, by name.
pub static EXPERIMENTS: &[Experiment] = &[meta_paper002::ADAPTIVE, meta_paper002::FIG5, meta_paper002::FIG7];

/// The experiment called `name`, or an error listing them.
pub fn find(name: &str) -> Result<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name).ok_or_else(|| {
        SimError::Config(hvio_core::ConfigError::UnknownName {
            what: "experiment".into(),
            name: name.into(),
            known: EXPERIMENTS.iter().map(|e| e.name).collect::<Vec<_>>().join(", "),
        })
    })
}

/// Run experiment `name`.
pub fn run(name: &str, opts: &ExpOptions) -> Result<Report> {
    let e = find(name)?;
    let mut r = (e.run)(opts)?;
    r.name = e.name.into();
    r.seed = opts.seed;
    r.quick = opts.quick;
    if r.title.is_empty() {
        r.title = e.title.into();
    }
    if r.paper.is_empty() {
        r.paper = e.paper.into();
    }
    Ok(r)
}
