//! The FUSE export: each VM's disk as a file `<mountpoint>/<vm name>`.
//!
//! Every read and write becomes one request to the scheduling core with its
//! own buffer (the write payload is copied out of the FUSE message before the
//! request is queued, and a read gets a fresh buffer), replied to from the
//! backend thread when it completes, so any number can be in flight and none
//! shares memory with another. `fallocate(PUNCH_HOLE)` and
//! `fallocate(ZERO_RANGE)` become write-zeroes (the range reads back as zeros);
//! `fsync` is a FLUSH. Files are opened with `FOPEN_DIRECT_IO`: the kernel page
//! cache never holds a VM's data, so every access reaches the scheduler.

use crate::buf::AlignedBuf;
use crate::config::FuseConfig;
use crate::daemon::ServeError;
use crate::engine::EngineHandle;
use crate::io::{IoJob, IoKind};
use crate::store::Store;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, KernelConfig, LockOwner, MountOption,
    OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    Request, WriteFlags,
};
use std::ffi::OsStr;
use std::time::{Duration, SystemTime};

const TTL: Duration = Duration::from_secs(1);

struct FuseDisk {
    name: String,
    vm: usize,
    size: u64,
    read_only: bool,
}

struct DiskFs {
    disks: Vec<FuseDisk>,
    engine: EngineHandle,
    started: SystemTime,
    /// Largest write the kernel sends (see [`max_write`]).
    max_write: u32,
}

/// The largest FUSE write: 1 MiB when every exported disk is O_DIRECT, the
/// FUSE default of 128 KiB when any goes through the host page cache. A
/// buffered write of n bytes makes the kernel cache that range in folios of
/// up to n bytes (Linux ≥ 6.16 gives ext4 large folios), and every later
/// 4 KiB write into such a folio walks all its blocks and dirties all of it:
/// after a disk was laid down by 1 MiB writes, 4 KiB random writes on the
/// FUSE path cost 27–35 µs of hvio's CPU each and ran at 24–32k IOPS; laid
/// down by 128 KiB writes, 15–17 µs and 43–45k (bench/serve-fuse-latency.sh).
fn max_write(any_buffered: bool) -> u32 {
    if any_buffered {
        128 << 10
    } else {
        1 << 20
    }
}

impl DiskFs {
    fn disk(&self, ino: INodeNo) -> Option<&FuseDisk> {
        let i = u64::from(ino).checked_sub(2)? as usize;
        self.disks.get(i)
    }

    fn attr(&self, ino: INodeNo) -> Option<FileAttr> {
        let t = self.started;
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        if ino == INodeNo::ROOT {
            return Some(FileAttr {
                ino,
                size: 0,
                blocks: 0,
                atime: t,
                mtime: t,
                ctime: t,
                crtime: t,
                kind: FileType::Directory,
                perm: 0o755,
                nlink: 2,
                uid,
                gid,
                rdev: 0,
                flags: 0,
                blksize: 4096,
            });
        }
        let d = self.disk(ino)?;
        Some(FileAttr {
            ino,
            size: d.size,
            blocks: d.size / 512,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind: FileType::RegularFile,
            perm: if d.read_only { 0o444 } else { 0o644 },
            nlink: 1,
            uid,
            gid,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        })
    }

    fn submit(&self, vm: usize, kind: IoKind, offset: u64, len: u64, buf: AlignedBuf, done: crate::io::DoneFn) {
        self.engine.submit(IoJob {
            vm,
            kind,
            offset,
            len,
            fua: false,
            buf,
            done,
        });
    }
}

impl Filesystem for DiskFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Let the kernel keep many requests in flight: loop devices issue async
        // direct I/O, which FUSE serialises unless FUSE_ASYNC_DIO is granted.
        if let Err(missing) = config.add_capabilities(fuser::InitFlags::FUSE_ASYNC_DIO) {
            tracing::warn!(
                ?missing,
                "FUSE: kernel lacks async direct I/O; O_DIRECT requests will be serialised"
            );
        }
        // Up to 128 background (async) requests before the kernel throttles
        // the loop device's submissions; congestion only near that limit.
        let _ = config.set_max_background(128);
        let _ = config.set_congestion_threshold(120);
        let _ = config.set_max_write(self.max_write);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent != INodeNo::ROOT {
            return reply.error(Errno::ENOENT);
        }
        match self.disks.iter().position(|d| OsStr::new(&d.name) == name) {
            Some(i) => {
                let ino = INodeNo(i as u64 + 2);
                let attr = self.attr(ino).expect("disk inode exists");
                reply.entry(&TTL, &attr, fuser::Generation(0));
            }
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let Some(attr) = self.attr(ino) else {
            return reply.error(Errno::ENOENT);
        };
        // A disk has a fixed size: only a no-op truncate is accepted. Times and modes are not kept.
        match size {
            Some(s) if s != attr.size => reply.error(Errno::EPERM),
            _ => reply.attr(&TTL, &attr),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let Some(d) = self.disk(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let acc = flags.0 & libc::O_ACCMODE;
        if d.read_only && acc != libc::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        // Direct I/O (no page cache), and parallel direct writes (kernel ≥ 6.2):
        // concurrent writes to the file do not serialise on its inode lock in
        // the kernel; each is an independent request with its own buffer here.
        reply.opened(
            FileHandle(0),
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES,
        );
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let Some(d) = self.disk(ino) else {
            return reply.error(Errno::ENOENT);
        };
        if offset >= d.size || size == 0 {
            return reply.data(&[]);
        }
        let len = (size as u64).min(d.size - offset);
        self.submit(
            d.vm,
            IoKind::Read,
            offset,
            len,
            AlignedBuf::zeroed(len as usize),
            Box::new(move |r, buf| match r {
                Ok(()) => reply.data(buf.as_slice()),
                Err(e) => reply.error(Errno::from_i32(e)),
            }),
        );
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(d) = self.disk(ino) else {
            return reply.error(Errno::ENOENT);
        };
        if d.read_only {
            return reply.error(Errno::EROFS);
        }
        if offset.checked_add(data.len() as u64).is_none_or(|end| end > d.size) {
            return reply.error(Errno::ENOSPC);
        }
        let n = data.len() as u32;
        // The payload is copied into this request's own buffer before anything else runs.
        self.submit(
            d.vm,
            IoKind::Write,
            offset,
            data.len() as u64,
            AlignedBuf::from_slice(data),
            Box::new(move |r, _| match r {
                Ok(()) => reply.written(n),
                Err(e) => reply.error(Errno::from_i32(e)),
            }),
        );
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        // close(2): nothing is cached here; durability is fsync's job.
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let Some(d) = self.disk(ino) else {
            return reply.error(Errno::ENOENT);
        };
        self.submit(
            d.vm,
            IoKind::Flush,
            0,
            0,
            AlignedBuf::empty(),
            Box::new(move |r, _| match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(Errno::from_i32(e)),
            }),
        );
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let mut entries: Vec<(INodeNo, FileType, String)> = vec![
            (INodeNo::ROOT, FileType::Directory, ".".into()),
            (INodeNo::ROOT, FileType::Directory, "..".into()),
        ];
        for (i, d) in self.disks.iter().enumerate() {
            entries.push((INodeNo(i as u64 + 2), FileType::RegularFile, d.name.clone()));
        }
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(ino, (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let blocks: u64 = self.disks.iter().map(|d| d.size / 4096).sum();
        reply.statfs(blocks, 0, 0, self.disks.len() as u64 + 1, 0, 4096, 255, 4096);
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let Some(d) = self.disk(ino) else {
            return reply.error(Errno::ENOENT);
        };
        if d.read_only {
            return reply.error(Errno::EROFS);
        }
        let Some(end) = offset.checked_add(length) else {
            return reply.error(Errno::EINVAL);
        };
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        let zero = libc::FALLOC_FL_ZERO_RANGE;
        let kind = if mode == punch {
            IoKind::WriteZeroes { punch: true }
        } else if mode & !libc::FALLOC_FL_KEEP_SIZE == zero {
            IoKind::WriteZeroes { punch: false }
        } else if mode & !libc::FALLOC_FL_KEEP_SIZE == 0 {
            // Plain allocation: every byte of a disk exists already.
            return if end <= d.size {
                reply.ok()
            } else {
                reply.error(Errno::ENOSPC)
            };
        } else {
            return reply.error(Errno::EOPNOTSUPP);
        };
        if end > d.size {
            return reply.error(Errno::ENOSPC);
        }
        if length == 0 {
            return reply.ok();
        }
        self.submit(
            d.vm,
            kind,
            offset,
            length,
            AlignedBuf::empty(),
            Box::new(move |r, _| match r {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(Errno::from_i32(e)),
            }),
        );
    }
}

/// Mount the disks `vms` under `cfg.mountpoint`; returns the unmount action.
pub fn mount(
    cfg: &FuseConfig,
    store: &Store,
    vms: &[usize],
    engine: EngineHandle,
) -> Result<Box<dyn FnOnce() + Send>, ServeError> {
    std::fs::create_dir_all(&cfg.mountpoint).map_err(|err| ServeError::Io {
        what: "create FUSE mountpoint",
        path: cfg.mountpoint.display().to_string(),
        err,
    })?;
    let fs = DiskFs {
        disks: vms
            .iter()
            .map(|&i| {
                let d = &store.disks[i];
                FuseDisk {
                    name: d.name.clone(),
                    vm: i,
                    size: d.size,
                    read_only: d.read_only,
                }
            })
            .collect(),
        engine,
        started: SystemTime::now(),
        max_write: max_write(vms.iter().any(|&i| store.files[store.disks[i].file].direct.is_none())),
    };
    let mut fc = fuser::Config::default();
    fc.mount_options = vec![
        MountOption::FSName("hvio".into()),
        MountOption::Subtype("hvio".into()),
        MountOption::NoAtime,
    ];
    if cfg.allow_other {
        fc.acl = fuser::SessionACL::All;
    }
    fc.n_threads = Some(2);
    fc.clone_fd = true;
    let session = fuser::spawn_mount(fs, &cfg.mountpoint, &fc).map_err(|err| ServeError::Io {
        what: "mount FUSE export at",
        path: cfg.mountpoint.display().to_string(),
        err,
    })?;
    tracing::info!(mountpoint = %cfg.mountpoint.display(), disks = vms.len(), "FUSE export mounted");
    let mp = cfg.mountpoint.clone();
    Ok(Box::new(move || {
        if let Err(e) = session.umount_and_join() {
            tracing::warn!(
                mountpoint = %mp.display(),
                error = %e,
                "FUSE unmount failed (a disk file still in use, e.g. by a loop device?): the mount is left \
                 disconnected; detach its users, then `umount -l` it"
            );
        } else {
            tracing::info!(mountpoint = %mp.display(), "FUSE export unmounted");
        }
    }))
}
