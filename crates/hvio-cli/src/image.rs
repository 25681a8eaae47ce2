//! `hvio image`: create, inspect, check, repair and compact reshaped images
//! (the format of `[store] layout = "reshaped"`; see docs/reshaped-image.md).

use anyhow::bail;
use clap::{Args, Subcommand};
use hvio_reshape::{Region, ReshapeConfig};
use hvio_vdisk::image;
use std::path::PathBuf;

#[derive(Args)]
pub struct ImageArgs {
    #[command(subcommand)]
    command: ImageCommand,
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Create a reshaped image for a disk of `--size` (never overwrites a file).
    Create {
        path: PathBuf,
        /// The guest-visible disk: bytes, or with a unit (`8GiB`).
        #[arg(long)]
        size: String,
        /// A reshape key (`data_region_bytes=4294967296`, `victim=cost-benefit`); repeatable.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Print the layout, the clean flag, and the table's statistics.
    Info { path: PathBuf },
    /// Verify every invariant; exit status 1 if one is broken. Reads only.
    Check { path: PathBuf },
    /// Fix what recovery can: a torn superblock copy, a damaged log (its
    /// unreachable transactions are dropped, and said so); folds the log into a checkpoint.
    Repair { path: PathBuf },
    /// Rewrite the image offline with its live data in guest-address order.
    Compact { path: PathBuf },
    /// The crash campaign: `hvio serve` killed, power-cut and crashed inside
    /// checkpoints and cleaning under NBD writers; every acknowledged-durable
    /// write must read back and `image check` stay clean.
    CrashTest(crate::crash_test::CrashTestArgs),
}

pub fn image(a: ImageArgs) -> anyhow::Result<()> {
    match a.command {
        ImageCommand::Create { path, size, set } => create(path, &size, &set),
        ImageCommand::Info { path } => info(path),
        ImageCommand::Check { path } => check(path),
        ImageCommand::Repair { path } => {
            let r = image::repair(&path)?;
            if r.actions.is_empty() {
                println!(
                    "{}: nothing to repair; the log was folded into a checkpoint",
                    path.display()
                );
            }
            for a in &r.actions {
                println!("{}: {a}", path.display());
            }
            Ok(())
        }
        ImageCommand::CrashTest(a) => crate::crash_test::crash_test(a),
        ImageCommand::Compact { path } => {
            let r = image::compact(&path)?;
            println!(
                "{}: {} extents -> {}, {} bytes of live data copied",
                path.display(),
                r.extents_before,
                r.extents_after,
                r.bytes_copied
            );
            Ok(())
        }
    }
}

fn create(path: PathBuf, size: &str, set: &[String]) -> anyhow::Result<()> {
    let disk = hvio_vdisk::config::parse_size(size).map_err(|e| anyhow::anyhow!("`--size`: {e}"))?;
    let mut text = String::from("base = false\n");
    for kv in set {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("`--set {kv}`: expected KEY=VALUE");
        };
        let v = v.trim();
        let quoted = if v.parse::<f64>().is_ok() || v == "true" || v == "false" {
            v.to_string()
        } else {
            format!("{v:?}")
        };
        text.push_str(&format!("{} = {quoted}\n", k.trim()));
    }
    let config: ReshapeConfig = toml::from_str(&text).map_err(|e| anyhow::anyhow!("`--set`: {}", e.message()))?;
    let sb = image::create(&path, disk, config)?;
    println!(
        "{}: reshaped image for a disk of {disk} bytes, {} bytes",
        path.display(),
        sb.file_bytes()
    );
    Ok(())
}

fn info(path: PathBuf) -> anyhow::Result<()> {
    let (_, o) = image::open(&path)?;
    let sb = &o.superblock;
    let r = &o.reshaper;
    let l = sb.layout();
    println!("image        {}", path.display());
    println!("version      {}", sb.version);
    println!(
        "state        {}",
        if sb.clean {
            "clean"
        } else {
            "in use or not stopped cleanly"
        }
    );
    println!("generation   {}", sb.generation);
    println!("disk         {} bytes", sb.disk_bytes);
    println!(
        "block        {} bytes, segment {} bytes",
        sb.config.block_bytes, sb.config.segment_bytes
    );
    for (name, s, e) in image::areas(sb) {
        println!("{name:<18} bytes {s}..{e}");
    }
    let mapped = |reg: Region| -> u64 {
        r.table(reg)
            .iter()
            .filter(|e| matches!(e.target, hvio_reshape::Target::At(_)))
            .map(|e| e.sectors * 512)
            .sum()
    };
    let segs = |a: hvio_reshape::Area| a.sectors / l.segment_sectors;
    println!(
        "metadata     {} bytes mapped, {} of {} segments free",
        mapped(Region::Meta),
        r.free_segments(Region::Meta),
        segs(l.meta)
    );
    println!(
        "data         {} bytes mapped, {} of {} segments free",
        mapped(Region::Data),
        r.free_segments(Region::Data),
        segs(l.data)
    );
    println!(
        "table        {} extents ({} bytes in memory)",
        r.table_extents(),
        r.table_bytes()
    );
    println!(
        "checkpoints  slot 0: {}, slot 1: {}",
        o.checkpoint_seqs[0].map_or("none".into(), |s| format!("transaction {s}")),
        o.checkpoint_seqs[1].map_or("none".into(), |s| format!("transaction {s}"))
    );
    println!(
        "log          {} committed transactions ({} entries) after the checkpoint; ends: {}",
        o.report.transactions_replayed,
        o.report.entries_replayed,
        o.report.log_end.as_ref().map_or("-".into(), |e| e.to_string())
    );
    if let Some(d) = &o.damage {
        println!("damage       {d}");
    }
    println!(
        "recovery     {:.1} ms ({} bytes of log and checkpoints read)",
        o.took.as_secs_f64() * 1e3,
        o.bytes_read
    );
    Ok(())
}

fn check(path: PathBuf) -> anyhow::Result<()> {
    let rep = image::check(&path)?;
    if rep.problems.is_empty() {
        println!(
            "{}: clean ({} extents, {} transactions in the log, {})",
            path.display(),
            rep.opened.reshaper.table_extents(),
            rep.opened.report.transactions_replayed,
            if rep.opened.superblock.clean {
                "stopped cleanly"
            } else {
                "not stopped cleanly: recovery replays the log"
            }
        );
        return Ok(());
    }
    for p in &rep.problems {
        println!("{}: {p}", path.display());
    }
    bail!("image {}: {} problems found", path.display(), rep.problems.len())
}
