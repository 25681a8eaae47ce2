//! Result files written whole or not at all.
//!
//! Every file hvio writes as a result (JSON results, per-request records,
//! converted traces, validation CDFs) goes through [`AtomicFile`]: the bytes
//! go to a temporary file beside the target, renamed over it by
//! [`AtomicFile::commit`]. A run that fails (or an `AtomicFile` dropped
//! before its commit) leaves no temporary file and the previous result, if
//! any, as it was. A target that is not a regular file (`/dev/null`, a FIFO,
//! a terminal) is written in place: renaming over it would replace the
//! device node with a regular file.
//!
//! [`check_outputs`] is the one rule every command applies before it writes
//! anything: an output that is one of its inputs (or another of its outputs)
//! is refused, naming both.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// An output file being written; see the module doc.
pub struct AtomicFile {
    path: PathBuf,
    /// The temporary file, renamed to `path` by `commit` (None: in place).
    tmp: Option<PathBuf>,
    /// The parent directories `create` made, deepest first: removed again
    /// (when still empty) if the file is never committed.
    made_dirs: Vec<PathBuf>,
    file: File,
}

impl AtomicFile {
    /// Opens `path` for writing, creating its missing parent directories.
    /// A directory is refused (`io::ErrorKind::IsADirectory`), and so is a
    /// path that can only name one: empty (a relative path resolved
    /// against nothing, the current directory) or ending in `/`. Errors are
    /// about `path`, never about the temporary file.
    pub fn create(path: &Path) -> io::Result<AtomicFile> {
        let names_a_dir = path.as_os_str().is_empty() || path.as_os_str().as_encoded_bytes().ends_with(b"/");
        let meta = std::fs::metadata(path).ok();
        if names_a_dir || meta.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory, not a file to write",
            ));
        }
        if let Some(meta) = meta {
            if !meta.is_file() {
                let file = std::fs::OpenOptions::new().write(true).open(path)?;
                return Ok(AtomicFile {
                    path: path.to_path_buf(),
                    tmp: None,
                    made_dirs: Vec::new(),
                    file,
                });
            }
        }
        let made_dirs: Vec<PathBuf> = path
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty())
            .take_while(|d| std::fs::symlink_metadata(d).is_err())
            .map(Path::to_path_buf)
            .collect();
        let remove_made = |made: &[PathBuf]| made.iter().for_each(|d| drop(std::fs::remove_dir(d)));
        if let Some(dir) = made_dirs.first() {
            if let Err(e) = std::fs::create_dir_all(dir) {
                remove_made(&made_dirs);
                return Err(e);
            }
        }
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".tmp~");
        let tmp = path.with_file_name(name);
        let file = match File::create(&tmp) {
            Ok(f) => f,
            Err(e) => {
                remove_made(&made_dirs);
                return Err(e);
            }
        };
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp: Some(tmp),
            made_dirs,
            file,
        })
    }

    /// The file as it will be named once committed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and renames the temporary file over the target.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        if let Some(tmp) = self.tmp.take() {
            if let Err(e) = std::fs::rename(&tmp, &self.path) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        }
        self.made_dirs.clear();
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for AtomicFile {
    /// Not committed: no temporary file is left behind, nor a directory
    /// `create` made for it.
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
        for d in &self.made_dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}

/// A file a command reads or writes, with the words that name it in errors
/// (`"config"`, `"--json"`, `"[log] requests"`).
pub type Named<'a> = (&'a str, &'a Path);

/// An output that is one of the command's inputs, or another of its outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SameFile {
    /// The output's words (`--json`, ...).
    pub output: String,
    /// The output's path.
    pub output_path: PathBuf,
    /// The other file's words.
    pub other: String,
    /// The other file's path.
    pub other_path: PathBuf,
}

impl std::fmt::Display for SameFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: the output is the {} {}; write elsewhere",
            self.output,
            self.output_path.display(),
            self.other,
            self.other_path.display()
        )
    }
}

impl std::error::Error for SameFile {}

/// `path` made absolute and resolved as far as it exists: symbolic links,
/// `.` and `..` of its existing part are followed, the rest is joined
/// lexically (an output that does not exist yet has a resolved path too).
pub fn resolve(path: &Path) -> PathBuf {
    let abs = std::env::current_dir().unwrap_or_default().join(path);
    if let Ok(p) = abs.canonicalize() {
        return p;
    }
    let mut rest = Vec::new();
    let mut head = abs.as_path();
    while let (Some(parent), Some(name)) = (head.parent(), head.file_name()) {
        rest.push(name.to_os_string());
        head = parent;
        if let Ok(p) = head.canonicalize() {
            let mut out = p;
            for n in rest.iter().rev() {
                out.push(n);
            }
            return out;
        }
    }
    abs.components().collect()
}

/// Whether `a` and `b` name one file: the same device and inode when both
/// exist, else the same path once [resolved](resolve).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return (x.dev(), x.ino()) == (y.dev(), y.ino());
    }
    resolve(a) == resolve(b)
}

/// The rule for outputs: refuses an output that is the same file as an
/// input or as an earlier output, naming both. Call it before writing
/// anything. Special files (`/dev/null`, `/dev/stdout`, a FIFO) may be
/// named twice: nothing is stored in them.
pub fn check_outputs(outputs: &[Named<'_>], inputs: &[Named<'_>]) -> Result<(), SameFile> {
    let special = |p: &Path| std::fs::metadata(p).is_ok_and(|m| !m.is_file() && !m.is_dir());
    for (i, &(role, path)) in outputs.iter().enumerate() {
        let earlier = outputs[..i].iter().filter(|(_, p)| !special(p));
        for &(other, other_path) in inputs.iter().chain(earlier) {
            if same_file(path, other_path) {
                return Err(SameFile {
                    output: role.to_string(),
                    output_path: path.to_path_buf(),
                    other: other.to_string(),
                    other_path: other_path.to_path_buf(),
                });
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` whole or not at all ([`AtomicFile`]).
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_replaces_dropped_leaves_the_old_file_and_no_temporary() {
        let dir = std::env::temp_dir().join(format!("hvio-atomic-{}", std::process::id()));
        let path = dir.join("sub").join("r.csv");
        write_whole(&path, b"one").unwrap();
        let mut f = AtomicFile::create(&path).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        write_whole(&path, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(
            std::fs::read_dir(dir.join("sub")).unwrap().count(),
            1,
            "a temporary file was left"
        );
        for d in [dir.clone(), dir.join("new/"), PathBuf::new()] {
            let e = AtomicFile::create(&d).err().expect("a directory");
            assert_eq!(e.kind(), io::ErrorKind::IsADirectory, "{}", d.display());
        }
        assert!(!dir.join("new").exists());
        // Directories made for a file never committed are removed again.
        let deep = dir.join("a/b/out");
        let mut f = AtomicFile::create(&deep).unwrap();
        f.write_all(b"half").unwrap();
        drop(f);
        assert!(!dir.join("a").exists(), "a directory was left");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_output_that_is_an_input_or_another_output_is_refused() {
        let dir = std::env::temp_dir().join(format!("hvio-same-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let input = dir.join("c.toml");
        std::fs::write(&input, "x").unwrap();
        let link = dir.join("link.toml");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let hard = dir.join("hard.toml");
        std::fs::hard_link(&input, &hard).unwrap();
        let inputs = [("config", input.as_path())];
        for same in [
            input.clone(),
            link,
            hard,
            dir.join("sub/../c.toml"),
            dir.join("./c.toml"),
        ] {
            let e = check_outputs(&[("--json", &same)], &inputs).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "--json {}: the output is the config {}; write elsewhere",
                    same.display(),
                    input.display()
                )
            );
        }
        let new = dir.join("new/r.json");
        check_outputs(&[("--json", &new)], &inputs).unwrap();
        let twice = check_outputs(&[("--json", &new), ("--records", &dir.join("new/./r.json"))], &inputs);
        assert_eq!(twice.unwrap_err().other, "--json");
        let null = Path::new("/dev/null");
        check_outputs(&[("--json", null), ("--records", null)], &inputs).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
