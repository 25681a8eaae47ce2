//! The backing store: files or block devices, each VM a region of one.
//!
//! Each backing file is opened twice: buffered (always) and with O_DIRECT
//! (where the file system allows it). Aligned requests use the O_DIRECT
//! descriptor; unaligned ones, and any that O_DIRECT refuses with EINVAL, use
//! the buffered one. Linux keeps the two coherent (direct I/O writes back and
//! invalidates the cached range first).

use crate::buf::AlignedBuf;
use crate::config::Config;
use crate::io::{IoKind, IoResult};
use hvio_core::{ExtentMap, ImageMap, SECTOR_BYTES};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

/// Why the backing store could not be used.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("backing store {path}: {what}: {err}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// What the operating system said.
        err: std::io::Error,
    },
    /// Two backing stores are the same file.
    #[error("backing stores {a} and {b} are the same file: their VMs would overwrite each other's data")]
    SameFile {
        /// One.
        a: PathBuf,
        /// The other.
        b: PathBuf,
    },
    /// A backing file smaller than its VMs need.
    #[error("backing store {path}: is {have} bytes, VM `{vm}` needs {need} bytes (create = false or a block device)")]
    TooSmall {
        /// The file.
        path: PathBuf,
        /// The VM.
        vm: String,
        /// Its size.
        have: u64,
        /// The size needed.
        need: u64,
    },
}

/// One backing file or block device.
pub struct BackingFile {
    /// Its path.
    pub path: PathBuf,
    /// Opened for buffered I/O.
    pub buffered: File,
    /// Opened with O_DIRECT, where allowed.
    pub direct: Option<File>,
    /// O_DIRECT alignment (logical block size).
    pub align: u64,
    /// Size in bytes.
    pub size: u64,
    /// A block device (else a regular file).
    pub block_device: bool,
    /// Requests that fell back from O_DIRECT to buffered I/O after EINVAL.
    pub direct_fallbacks: AtomicU64,
}

/// A VM's disk: a byte range of one backing file.
#[derive(Debug, Clone)]
pub struct Disk {
    /// The VM's name.
    pub name: String,
    /// Its backing file (index in [`Store::files`]).
    pub file: usize,
    /// The guest-visible disk, bytes.
    pub size: u64,
    /// Bytes of the backing file the VM owns from its first byte: `size`,
    /// or the whole image file of a reshaped layout (whose jobs address
    /// the file).
    pub span: u64,
    /// Refuse writes.
    pub read_only: bool,
    /// Where the disk's bytes lie in the address space the scheduler sees
    /// (the backing files laid end to end), an [`ExtentMap`] in bytes: the
    /// scheduler's sectors ([`Disk::sectors`]) and the backing file's
    /// offsets ([`Disk::file_offset`]) both come from it, so the address a
    /// request is scheduled at is the one its bytes are written at.
    map: ExtentMap,
    /// Where the backing file starts in that address space.
    file_start: u64,
}

impl Disk {
    /// A disk of `size` bytes from byte `base` of backing file `file`, which
    /// starts at `file_start` in the scheduler's address space.
    fn new(name: String, file: usize, file_start: u64, base: u64, size: u64, span: u64, read_only: bool) -> Disk {
        Disk {
            name,
            file,
            size,
            span,
            read_only,
            map: ExtentMap::contiguous(file_start + base, span.max(size)),
            file_start,
        }
    }

    /// Byte `offset` of the disk in the scheduler's address space.
    #[inline]
    pub fn address(&self, offset: u64) -> u64 {
        self.map.map_sector(offset)
    }

    /// Byte `offset` of the disk in its backing file.
    #[inline]
    pub fn file_offset(&self, offset: u64) -> u64 {
        self.address(offset) - self.file_start
    }

    /// The sectors the scheduler sees for `len` bytes from `offset`: the
    /// first and how many (a flush: the disk's first sector, none).
    pub fn sectors(&self, kind: IoKind, offset: u64, len: u64) -> (u64, u32) {
        if kind == IoKind::Flush {
            return (self.address(0) / SECTOR_BYTES, 0);
        }
        let start = self.address(offset);
        let first = start / SECTOR_BYTES;
        let end = (start + len).div_ceil(SECTOR_BYTES);
        (first, (end - first).min(u32::MAX as u64) as u32)
    }

    /// The disk's first sector and its size in sectors, as its scheduler
    /// stream's region.
    pub fn region(&self) -> (u64, u64) {
        (self.address(0) / SECTOR_BYTES, self.size / SECTOR_BYTES)
    }
}

/// The backing files and the VMs' disks on them.
pub struct Store {
    /// The backing files.
    pub files: Vec<BackingFile>,
    /// The VMs' disks.
    pub disks: Vec<Disk>,
    /// Crash-consistency test facility (`[store] volatile_test`).
    pub volatile: Option<crate::volatile::VolatileCache>,
    /// Directories and files this store created when it opened (removed
    /// again if the daemon fails to start).
    pub created: Vec<PathBuf>,
}

/// `create_dir_all(dir)`, appending the directories it made to `created` (outermost first).
pub fn create_dirs(dir: &Path, created: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    let missing: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(dir)?;
    created.extend(missing.into_iter().rev());
    Ok(())
}

/// Remove what a failed start created, newest first (directories only if empty).
pub fn remove_created(created: &[PathBuf]) {
    for p in created.iter().rev() {
        let _ = if p.is_dir() {
            std::fs::remove_dir(p)
        } else {
            std::fs::remove_file(p)
        };
    }
}

fn io_err<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |err| StoreError::Io {
        path: path.to_path_buf(),
        what,
        err,
    }
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn block_device_size(f: &File) -> std::io::Result<u64> {
    let mut size: u64 = 0;
    // BLKGETSIZE64 = _IOR(0x12, 114, size_t)
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    // SAFETY: the ioctl writes one u64 to `size`.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64 as _, &mut size as *mut u64) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(size)
}

fn pread_full(f: &File, buf: &mut [u8], mut off: u64) -> IoResult {
    let mut done = 0usize;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: rest is a valid writable slice.
        let n = unsafe {
            libc::pread(
                f.as_raw_fd(),
                rest.as_mut_ptr() as *mut _,
                rest.len(),
                off as libc::off_t,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(errno(&e));
        }
        if n == 0 {
            // Past the end of the file: a sparse tail reads as zeros.
            rest.fill(0);
            return Ok(());
        }
        done += n as usize;
        off += n as u64;
    }
    Ok(())
}

fn pwrite_full(f: &File, buf: &[u8], mut off: u64, dsync: bool) -> IoResult {
    let mut done = 0usize;
    let mut dsync_ok = dsync;
    while done < buf.len() {
        let rest = &buf[done..];
        let iov = libc::iovec {
            iov_base: rest.as_ptr() as *mut _,
            iov_len: rest.len(),
        };
        let flags = if dsync_ok { libc::RWF_DSYNC } else { 0 };
        // SAFETY: one valid iovec over `rest`.
        let n = unsafe { libc::pwritev2(f.as_raw_fd(), &iov, 1, off as libc::off_t, flags) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) if dsync_ok => {
                    dsync_ok = false;
                    continue;
                }
                _ => return Err(errno(&e)),
            }
        }
        done += n as usize;
        off += n as u64;
    }
    if dsync && !dsync_ok {
        datasync(f)?;
    }
    Ok(())
}

pub(crate) fn datasync(f: &File) -> IoResult {
    // SAFETY: plain syscall on an owned descriptor.
    if unsafe { libc::fdatasync(f.as_raw_fd()) } < 0 {
        return Err(errno(&std::io::Error::last_os_error()));
    }
    Ok(())
}

fn fallocate(f: &File, mode: i32, off: u64, len: u64) -> IoResult {
    loop {
        // SAFETY: plain syscall on an owned descriptor.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, off as libc::off_t, len as libc::off_t) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(errno(&e));
        }
    }
}

impl BackingFile {
    /// Open `path`; what this created (directories, then the file) is
    /// appended to `created`, so a failed start can remove it again.
    /// `writable` false (every VM on it is read-only): an existing file is
    /// opened read-only, so a read-only image or file system serves.
    fn open(
        path: &Path,
        need: u64,
        create: bool,
        writable: bool,
        want_direct: bool,
        created: &mut Vec<PathBuf>,
    ) -> Result<BackingFile, StoreError> {
        let meta = std::fs::metadata(path);
        let writable = writable || meta.is_err();
        let block_device = matches!(&meta, Ok(m) if m.file_type().is_block_device());
        let is_new = create && meta.is_err();
        if is_new {
            if let Some(dir) = path.parent() {
                create_dirs(dir, created).map_err(io_err(dir, "create directory"))?;
            }
        }
        let buffered = OpenOptions::new()
            .read(true)
            .write(writable)
            .create(create && writable && !block_device)
            .truncate(false)
            .open(path)
            .map_err(io_err(path, "open"))?;
        if is_new {
            created.push(path.to_path_buf());
        }
        let mut size = if block_device {
            block_device_size(&buffered).map_err(io_err(path, "BLKGETSIZE64"))?
        } else {
            buffered.metadata().map_err(io_err(path, "stat"))?.len()
        };
        if size < need && create && writable && !block_device {
            buffered.set_len(need).map_err(io_err(path, "extend"))?;
            size = need;
        }
        let direct = if want_direct {
            OpenOptions::new()
                .read(true)
                .write(writable)
                .custom_flags(libc::O_DIRECT)
                .open(path)
                .ok()
        } else {
            None
        };
        let mut bf = BackingFile {
            path: path.to_path_buf(),
            buffered,
            direct,
            align: 512,
            size,
            block_device,
            direct_fallbacks: AtomicU64::new(0),
        };
        bf.probe_direct();
        Ok(bf)
    }

    /// Find the O_DIRECT alignment by trying 512 then 4096; drop O_DIRECT if neither works.
    fn probe_direct(&mut self) {
        let Some(d) = &self.direct else { return };
        if self.size < 8192 {
            self.direct = None;
            return;
        }
        for align in [512u64, 4096] {
            let mut b = AlignedBuf::zeroed(align as usize);
            if pread_full(d, b.as_mut_slice(), align).is_ok() {
                self.align = align;
                return;
            }
        }
        tracing::warn!(path = %self.path.display(), "O_DIRECT reads fail here: using buffered I/O");
        self.direct = None;
    }

    /// The descriptor for a request at `off` of `len` bytes: O_DIRECT when aligned.
    fn fd_for(&self, off: u64, len: u64) -> (&File, bool) {
        match &self.direct {
            Some(d) if off.is_multiple_of(self.align) && len.is_multiple_of(self.align) => (d, true),
            _ => (&self.buffered, false),
        }
    }

    /// Raw descriptor for a request (O_DIRECT when aligned) and whether it is O_DIRECT.
    pub fn raw_fd_for(&self, off: u64, len: u64) -> (i32, bool) {
        let (f, direct) = self.fd_for(off, len);
        (f.as_raw_fd(), direct)
    }

    /// The buffered descriptor.
    pub fn raw_buffered_fd(&self) -> i32 {
        self.buffered.as_raw_fd()
    }

    fn read(&self, buf: &mut [u8], off: u64) -> IoResult {
        let (f, direct) = self.fd_for(off, buf.len() as u64);
        match pread_full(f, buf, off) {
            Err(libc::EINVAL) if direct => {
                self.direct_fallbacks.fetch_add(1, Ordering::Relaxed);
                pread_full(&self.buffered, buf, off)
            }
            r => r,
        }
    }

    fn write(&self, buf: &[u8], off: u64, fua: bool) -> IoResult {
        let (f, direct) = self.fd_for(off, buf.len() as u64);
        match pwrite_full(f, buf, off, fua) {
            Err(libc::EINVAL) if direct => {
                self.direct_fallbacks.fetch_add(1, Ordering::Relaxed);
                pwrite_full(&self.buffered, buf, off, fua)
            }
            r => r,
        }
    }

    /// Zero a range: deallocate it if allowed, else zero-range, else write zeros.
    fn zero(&self, off: u64, len: u64, punch: bool) -> IoResult {
        if punch
            && fallocate(
                &self.buffered,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                len,
            )
            .is_ok()
        {
            return Ok(());
        }
        if fallocate(
            &self.buffered,
            libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            len,
        )
        .is_ok()
        {
            return Ok(());
        }
        const CHUNK: u64 = 1 << 20;
        let zeros = AlignedBuf::zeroed(CHUNK.min(len) as usize);
        let mut pos = off;
        while pos < off + len {
            let n = CHUNK.min(off + len - pos);
            self.write(&zeros.as_slice()[..n as usize], pos, false)?;
            pos += n;
        }
        Ok(())
    }

    fn trim(&self, off: u64, len: u64) -> IoResult {
        match fallocate(
            &self.buffered,
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            len,
        ) {
            // A trim is advisory: a store that cannot discard ignores it.
            Err(libc::EOPNOTSUPP) | Err(libc::ENOSYS) | Err(libc::EINVAL) => Ok(()),
            r => r,
        }
    }

    /// `fdatasync` of the file.
    pub fn sync(&self) -> IoResult {
        datasync(&self.buffered)
    }

    /// What makes the file itself: (device, inode), or the device number of a block device.
    fn identity(&self) -> (u64, u64) {
        use std::os::unix::fs::MetadataExt;
        match self.buffered.metadata() {
            Ok(m) if self.block_device => (u64::MAX, m.rdev()),
            Ok(m) => (m.dev(), m.ino()),
            // Cannot stat an open descriptor: treat it as unique.
            Err(_) => (u64::MAX - 1, self.buffered.as_raw_fd() as u64),
        }
    }
}

impl Store {
    /// Open (and where allowed create) every backing file of `cfg`. On an
    /// error, whatever this call created is removed again.
    pub fn open(cfg: &Config) -> Result<Store, StoreError> {
        let mut created = Vec::new();
        let r = Store::open_files(cfg, &mut created);
        if r.is_err() {
            remove_created(&created);
        }
        r.map(|mut s| {
            s.created = created;
            s
        })
    }

    fn open_files(cfg: &Config, created: &mut Vec<PathBuf>) -> Result<Store, StoreError> {
        let paths = cfg.backing_files();
        let places = cfg.placements();
        let mut need = vec![0u64; paths.len()];
        let mut writable = vec![false; paths.len()];
        for (vm, p) in cfg.vms.iter().zip(&places) {
            // A reshaped image is sized by its superblock (made before this).
            if cfg.layout_of(vm) != crate::config::Layout::Reshaped {
                need[p.file] = need[p.file].max(p.base + vm.size.0);
            }
            writable[p.file] |= !vm.read_only;
        }
        let mut files = Vec::with_capacity(paths.len());
        for ((path, &n), &w) in paths.iter().zip(&need).zip(&writable) {
            // The emulator's real I/O is buffered: its timing comes from the model.
            let direct = cfg.store.direct && cfg.store.kind == crate::config::StoreKind::File;
            files.push(BackingFile::open(path, n, cfg.store.create, w, direct, created)?);
        }
        // Two names for one file (a symlink, a hard link, `a/../b`): the
        // configuration's own check only sees different spellings.
        let ids: Vec<(u64, u64)> = files.iter().map(BackingFile::identity).collect();
        for (i, id) in ids.iter().enumerate() {
            if let Some(j) = ids[..i].iter().position(|x| x == id) {
                return Err(StoreError::SameFile {
                    a: files[j].path.clone(),
                    b: files[i].path.clone(),
                });
            }
        }
        let mut file_phys = Vec::with_capacity(files.len());
        let mut acc = 0u64;
        for f in &files {
            file_phys.push(acc);
            acc += f.size.div_ceil(4096) * 4096;
        }
        let mut disks = Vec::new();
        for (vm, p) in cfg.vms.iter().zip(&places) {
            let f = &files[p.file];
            let reshaped = cfg.layout_of(vm) == crate::config::Layout::Reshaped;
            if f.size < p.base + vm.size.0 && !reshaped {
                return Err(StoreError::TooSmall {
                    path: f.path.clone(),
                    vm: vm.name.clone(),
                    have: f.size,
                    need: p.base + vm.size.0,
                });
            }
            disks.push(Disk::new(
                vm.name.clone(),
                p.file,
                file_phys[p.file],
                p.base,
                vm.size.0,
                if reshaped { f.size } else { vm.size.0 },
                vm.read_only,
            ));
        }
        for f in &files {
            tracing::info!(
                path = %f.path.display(),
                size = f.size,
                direct = f.direct.is_some(),
                align = f.align,
                block_device = f.block_device,
                "backing store opened"
            );
        }
        let volatile = cfg.store.volatile_test.clone().map(crate::volatile::VolatileCache::new);
        if volatile.is_some() {
            tracing::warn!("[store] volatile_test: plain writes are held in memory until FLUSH (crash tests only)");
        }
        Ok(Store {
            files,
            disks,
            volatile,
            created: Vec::new(),
        })
    }

    /// Whether `path` is one of the backing files (by device and inode).
    pub fn is_backing_file(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::metadata(path) else {
            return false;
        };
        let id = if m.file_type().is_block_device() {
            (u64::MAX, m.rdev())
        } else {
            (m.dev(), m.ino())
        };
        self.files.iter().any(|f| f.identity() == id)
    }

    /// Bytes of the scheduler's address space (all backing files end to end).
    pub fn capacity(&self) -> u64 {
        self.files.iter().map(|f| f.size.div_ceil(4096) * 4096).sum()
    }

    /// Whether the first backing store is rotational, from sysfs.
    pub fn detect_rotational(&self) -> Option<bool> {
        let f = self.files.first()?;
        let meta = f.buffered.metadata().ok()?;
        use std::os::unix::fs::MetadataExt;
        let dev = if f.block_device { meta.rdev() } else { meta.dev() };
        let (maj, min) = (libc::major(dev), libc::minor(dev));
        for p in [
            format!("/sys/dev/block/{maj}:{min}/queue/rotational"),
            format!("/sys/dev/block/{maj}:{min}/../queue/rotational"),
        ] {
            if let Ok(s) = std::fs::read_to_string(&p) {
                return Some(s.trim() == "1");
            }
        }
        None
    }

    /// Carry out one request on VM `vm`'s disk. Bounds were checked by the export.
    pub fn execute(&self, vm: usize, kind: IoKind, offset: u64, len: u64, fua: bool, buf: &mut AlignedBuf) -> IoResult {
        let d = &self.disks[vm];
        if kind.writes() && d.read_only {
            return Err(libc::EPERM);
        }
        if kind != IoKind::Flush && offset.checked_add(len).is_none_or(|end| end > d.span) {
            return Err(libc::EINVAL);
        }
        let f = &self.files[d.file];
        let off = d.file_offset(offset);
        if let Some(v) = &self.volatile {
            let persist = |file: usize, at: u64, data: &[u8]| self.files[file].write(data, at, false);
            match kind {
                IoKind::Write if !fua => return v.write(d.file, off, buf.as_slice(), &persist),
                IoKind::Read => return v.read(d.file, off, buf.as_mut_slice(), |b| f.read(b, off)),
                IoKind::Flush => v.flush(&persist)?,
                _ => v.write_through(d.file, off, len),
            }
        }
        let r = match kind {
            IoKind::Read => f.read(buf.as_mut_slice(), off),
            IoKind::Write => f.write(buf.as_slice(), off, fua),
            IoKind::Flush => f.sync(),
            IoKind::Trim => f.trim(off, len),
            IoKind::WriteZeroes { punch } => f.zero(off, len, punch),
        };
        r?;
        if fua && matches!(kind, IoKind::Trim | IoKind::WriteZeroes { .. }) {
            f.sync()?;
        }
        Ok(())
    }

    /// Make everything written so far durable (shutdown).
    pub fn sync_all(&self) -> IoResult {
        if let Some(v) = &self.volatile {
            v.flush(&|file: usize, at: u64, data: &[u8]| self.files[file].write(data, at, false))?;
        }
        for f in &self.files {
            f.sync()?;
        }
        Ok(())
    }

    /// Requests that fell back from O_DIRECT to buffered I/O.
    pub fn direct_fallbacks(&self) -> u64 {
        self.files
            .iter()
            .map(|f| f.direct_fallbacks.load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dir: &Path) -> Config {
        Config::from_toml_str(
            &format!(
                "[store]\npath = \"{}/new/dir/disk.img\"\n[[vm]]\nname = \"a\"\nsize = \"1MiB\"\n[[vm]]\nname = \"b\"\nsize = \"1MiB\"\n[[vm]]\nname = \"c\"\nsize = \"64KiB\"\nimage = \"{}/c.img\"\n",
                dir.display(),
                dir.display()
            ),
            "test",
        )
        .unwrap()
    }

    /// What a request is scheduled at and what the backend writes come
    /// from one map: the bytes written at a disk's offset are in its
    /// backing file where the scheduler's sector says, less the file's
    /// start in the scheduler's address space.
    #[test]
    fn the_scheduled_address_is_where_the_bytes_go() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&cfg(dir.path())).unwrap();
        let starts: Vec<u64> = (0..s.files.len())
            .map(|f| s.disks.iter().find(|d| d.file == f).unwrap().file_start)
            .collect();
        assert_eq!(starts[0], 0);
        assert_eq!(starts[1], (2u64 << 20).div_ceil(4096) * 4096);
        for (vm, d) in s.disks.iter().enumerate() {
            let (offset, marker) = (4096 * (vm as u64 + 1), 0x40 + vm as u8);
            let mut w = AlignedBuf::from_slice(&[marker; 4096]);
            s.execute(vm, IoKind::Write, offset, 4096, true, &mut w).unwrap();
            let (sector, sectors) = d.sectors(IoKind::Write, offset, 4096);
            assert_eq!(sectors, 8);
            let mut raw = vec![0u8; 4096];
            let at = sector * SECTOR_BYTES - starts[d.file];
            std::os::unix::fs::FileExt::read_exact_at(&s.files[d.file].buffered, &mut raw, at).unwrap();
            assert!(raw.iter().all(|&b| b == marker), "VM {}: sector {sector}", d.name);
            assert_eq!(d.region(), (sector - offset / SECTOR_BYTES, d.size / SECTOR_BYTES));
        }
        // The disks' regions do not overlap.
        let (a, b, c) = (s.disks[0].region(), s.disks[1].region(), s.disks[2].region());
        assert!(a.0 + a.1 <= b.0 && b.0 + b.1 <= c.0, "{a:?} {b:?} {c:?}");
        assert_eq!(s.disks[2].sectors(IoKind::Flush, 0, 0), (c.0, 0));
    }

    #[test]
    fn regions_are_separate_and_ops_work() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&cfg(dir.path())).unwrap();
        assert_eq!(s.disks[1].file_offset(0), 1 << 20);
        assert_eq!(s.disks[2].file, 1);
        let mut w = AlignedBuf::from_slice(&[0xab; 4096]);
        s.execute(1, IoKind::Write, 8192, 4096, true, &mut w).unwrap();
        // Unaligned write through the buffered path.
        let mut w2 = AlignedBuf::from_slice(&[0xcd; 100]);
        s.execute(1, IoKind::Write, 8193, 100, false, &mut w2).unwrap();
        let mut r = AlignedBuf::zeroed(4096);
        s.execute(1, IoKind::Read, 8192, 4096, false, &mut r).unwrap();
        assert_eq!(r.as_slice()[0], 0xab);
        assert_eq!(r.as_slice()[1], 0xcd);
        assert_eq!(r.as_slice()[101], 0xab);
        assert_eq!(r.as_slice()[102], 0xab);
        let mut r0 = AlignedBuf::zeroed(4096);
        s.execute(0, IoKind::Read, 8192, 4096, false, &mut r0).unwrap();
        assert!(r0.as_slice().iter().all(|&b| b == 0), "VM a sees VM b's data");
        for punch in [true, false] {
            let mut w = AlignedBuf::from_slice(&[0x11; 8192]);
            s.execute(2, IoKind::Write, 0, 8192, false, &mut w).unwrap();
            s.execute(
                2,
                IoKind::WriteZeroes { punch },
                0,
                8192,
                false,
                &mut AlignedBuf::empty(),
            )
            .unwrap();
            let mut r = AlignedBuf::zeroed(8192);
            s.execute(2, IoKind::Read, 0, 8192, false, &mut r).unwrap();
            assert!(r.as_slice().iter().all(|&b| b == 0));
        }
        s.execute(2, IoKind::Flush, 0, 0, false, &mut AlignedBuf::empty())
            .unwrap();
        let mut big = AlignedBuf::zeroed(4096);
        assert_eq!(
            s.execute(2, IoKind::Read, 64 * 1024 - 512, 4096, false, &mut big),
            Err(libc::EINVAL)
        );
    }
}
