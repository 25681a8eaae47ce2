//! `hvio serve`: command-line arguments and entry point.

use crate::config::Config;
use std::path::PathBuf;

/// Serve each VM's disk over NBD and/or FUSE through an hvio scheduler.
///
/// Runs in the foreground until SIGINT or SIGTERM, then drains in-flight
/// requests, flushes the store and closes the exports. See docs/serve.md
/// and examples/host.toml for the configuration.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The host configuration (TOML): store, scheduler, VMs, exports.
    pub config: PathBuf,
    // The text is `--help`'s, where `[log]` names the config's table.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// Log level: error, warn, info, debug, trace (default: [log] level; RUST_LOG overrides).
    #[arg(long)]
    pub log_level: Option<String>,
    /// Check the configuration and exit.
    #[arg(long)]
    pub check: bool,
}

/// Run `hvio serve` with `args`; errors are returned with their whole chain.
pub fn serve(args: &ServeArgs) -> Result<(), crate::ServeError> {
    let cfg = Config::load(&args.config)?;
    let level = args.log_level.clone().unwrap_or_else(|| cfg.log.level.clone());
    if !crate::config::LOG_LEVELS.contains(&level.as_str()) {
        return Err(crate::ServeError::Other(format!(
            "--log-level `{level}`: use one of {}",
            crate::config::LOG_LEVELS.join(", ")
        )));
    }
    crate::daemon::init_logging(&level);
    if args.check {
        let plan = cfg.plan().map_err(|e| crate::ServeError::Other(e.to_string()))?;
        // A plan step at time 0 is the scheduler the daemon starts on.
        let first = plan
            .first()
            .filter(|s| s.at == 0)
            .map_or(&cfg.scheduler.name, |s| &s.host);
        let switching = match (&cfg.online, plan.len()) {
            (Some(o), _) => format!(", online mode with {} classes", o.classes.len()),
            (None, 0) => String::new(),
            (None, n) => format!(", a plan of {n} steps"),
        };
        println!(
            "{}: configuration is valid ({} VMs, scheduler {first}{switching})",
            args.config.display(),
            cfg.vms.len(),
        );
        return Ok(());
    }
    crate::daemon::run(&cfg)
}
