//! Build the `hvio` binary of a git ref into a scratch directory, so a
//! benchmark can run the old code beside the new one in the same run and
//! print a before/after ratio that is not a different day's machine.
//!
//! The ref's tree is exported with `git archive` (no worktree is registered
//! in the repository) into `target/bench-ref/src-SHA` of the repository the
//! current directory is in, and built there as that ref's own `make release`
//! builds it: with its `scripts/release-build.sh` where it has one (the
//! profile-guided build), else with `cargo build --release`. Both build
//! into `target/bench-ref/target`, which every ref shares so dependencies
//! are built once. The binary is kept as `target/bench-ref/hvio-SHA`; a
//! second call for the same commit reuses it.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The scratch directory's name under the repository's `target/`.
const SCRATCH: &str = "bench-ref";

/// The `hvio` binary of `git_ref` (a commit, branch, tag or `HEAD~3`),
/// built if not built before. Progress goes to stderr.
pub fn hvio_binary(git_ref: &str) -> Result<PathBuf> {
    let repo = toplevel()?;
    let sha = resolve(&repo, git_ref)?;
    let short = &sha[..12];
    let scratch = repo.join("target").join(SCRATCH);
    let bin = scratch.join(format!("hvio-{short}"));
    if bin.is_file() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let src = scratch.join(format!("src-{short}"));
    if !src.is_dir() {
        export(&repo, &sha, &src)?;
    }
    let target = scratch.join("target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // A ref is measured as its own `make release` builds it, so a ratio
    // compares builds users get, not a plain build with a profile-guided one.
    let release_script = src.join("scripts").join("release-build.sh");
    let mut build = if release_script.is_file() {
        crate::common::errln!(
            "building {git_ref} ({short}) in {} with its scripts/release-build.sh ...",
            src.display()
        );
        let mut c = Command::new("bash");
        c.arg(&release_script).env("CARGO", &cargo);
        // Its training replays the DiskSim validation disks when they are
        // beside the repository, as this checkout's build did.
        let shared = repo.join("..").join("shared").join("data");
        if std::env::var_os("HVIO_SHARED_DATA").is_none() && shared.is_dir() {
            c.env("HVIO_SHARED_DATA", shared);
        }
        c
    } else {
        crate::common::errln!(
            "building {git_ref} ({short}) in {} with cargo build --release ...",
            src.display()
        );
        let mut c = Command::new(&cargo);
        c.args(["build", "--release", "-p", "hvio-cli", "--bin", "hvio"]);
        c
    };
    let status = build
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&src)
        .stdout(Stdio::null())
        .status()
        .context("running the build (are cargo and bash on PATH?)")?;
    if !status.success() {
        bail!("building {git_ref} ({short}) in {} failed ({status})", src.display());
    }
    let built = target.join("release").join("hvio");
    let partial = scratch.join(format!("hvio-{short}.partial"));
    std::fs::copy(&built, &partial).with_context(|| format!("copying {}", built.display()))?;
    std::fs::rename(&partial, &bin).with_context(|| format!("naming {}", bin.display()))?;
    Ok(bin)
}

/// The top of the git work tree the current directory is in.
fn toplevel() -> Result<PathBuf> {
    let top = git(Path::new("."), &["rev-parse", "--show-toplevel"])
        .context("building a git ref needs the current directory to be inside hvio's git repository")?;
    Ok(PathBuf::from(top))
}

/// The full commit id `git_ref` names in `repo`.
fn resolve(repo: &Path, git_ref: &str) -> Result<String> {
    if git_ref.starts_with('-') {
        bail!("git ref {git_ref:?} is not a commit (it starts with '-')");
    }
    git(
        repo,
        &["rev-parse", "--verify", "--quiet", &format!("{git_ref}^{{commit}}")],
    )
    .with_context(|| format!("git ref {git_ref:?} names no commit in {}", repo.display()))
}

/// The tree of commit `sha` written into `dest`, whole or not at all (it is
/// unpacked beside it and renamed).
fn export(repo: &Path, sha: &str, dest: &Path) -> Result<()> {
    let partial = dest.with_extension("partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial).with_context(|| format!("removing {}", partial.display()))?;
    }
    std::fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let mut archive = Command::new("git")
        .args(["archive", "--format=tar", sha])
        .current_dir(repo)
        .stdout(Stdio::piped())
        .spawn()
        .context("running git archive")?;
    let stdout = archive.stdout.take().expect("git archive's stdout is piped");
    let untar = Command::new("tar")
        .args(["-x", "-f", "-", "-C"])
        .arg(&partial)
        .stdin(stdout)
        .status()
        .context("running tar")?;
    let archived = archive.wait().context("waiting for git archive")?;
    if !archived.success() || !untar.success() {
        bail!(
            "exporting commit {sha} into {} failed (git archive {archived}, tar {untar})",
            partial.display()
        );
    }
    std::fs::rename(&partial, dest).with_context(|| format!("naming {}", dest.display()))?;
    Ok(())
}

/// `git ARGS` run in `dir`: its trimmed stdout, or an error with its stderr.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This crate's sources are inside hvio's repository unless they came
    /// from a tarball; then there is nothing to resolve.
    fn repo() -> Option<PathBuf> {
        toplevel().ok()
    }

    #[test]
    fn head_resolves_to_a_full_commit_id() {
        let Some(repo) = repo() else {
            eprintln!("skipped: not inside a git repository");
            return;
        };
        let sha = resolve(&repo, "HEAD").expect("HEAD is a commit");
        assert_eq!(sha.len(), 40, "{sha}");
        assert!(sha.bytes().all(|b| b.is_ascii_hexdigit()), "{sha}");
    }

    #[test]
    fn an_unknown_ref_is_an_error_naming_it() {
        let Some(repo) = repo() else {
            eprintln!("skipped: not inside a git repository");
            return;
        };
        for bad in ["no-such-branch-anywhere", "--output=x"] {
            let e = format!("{:#}", resolve(&repo, bad).unwrap_err());
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn export_writes_the_commits_tree() {
        let Some(repo) = repo() else {
            eprintln!("skipped: not inside a git repository");
            return;
        };
        let sha = resolve(&repo, "HEAD").unwrap();
        let dir = std::env::temp_dir().join(format!("hvio-gitref-test-{}", std::process::id()));
        let dest = dir.join("src");
        export(&repo, &sha, &dest).expect("HEAD exports");
        assert!(dest.join("Cargo.toml").is_file());
        assert!(dest.join("crates/hvio-cli/src/main.rs").is_file());
        assert!(!dest.with_extension("partial").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
