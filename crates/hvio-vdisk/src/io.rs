//! One I/O request as the exports hand it to the scheduling core.

use crate::buf::AlignedBuf;

/// What a request does to a VM's disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// Read into the job's buffer.
    Read,
    /// Write the job's buffer.
    Write,
    /// Make every completed write of this disk durable.
    Flush,
    /// Advisory discard: the range may read back as anything afterwards.
    Trim,
    /// The range must read back as zeros; `punch` allows deallocating it.
    WriteZeroes {
        /// Whether deallocating is allowed.
        punch: bool,
    },
}

impl IoKind {
    /// Whether it changes the disk's content.
    pub fn writes(self) -> bool {
        matches!(self, IoKind::Write | IoKind::Trim | IoKind::WriteZeroes { .. })
    }
    /// Its name in logs and metrics.
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Read => "read",
            IoKind::Write => "write",
            IoKind::Flush => "flush",
            IoKind::Trim => "trim",
            IoKind::WriteZeroes { .. } => "write_zeroes",
        }
    }
}

/// The result of a request: `Err(errno)` (a positive libc errno).
pub type IoResult = Result<(), i32>;

/// Called exactly once, from a backend thread, when the request is done.
/// Gets the buffer back (filled for reads).
pub type DoneFn = Box<dyn FnOnce(IoResult, AlignedBuf) + Send>;

/// A request from an export: which VM, what, where (bytes within the VM's
/// disk) and its own buffer.
pub struct IoJob {
    /// The VM (index in the configuration).
    pub vm: usize,
    /// What to do.
    pub kind: IoKind,
    /// Byte offset within the VM's disk.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Force unit access: answered only once durable.
    pub fua: bool,
    /// Write payload, or room for the read data (`len` bytes); empty otherwise.
    pub buf: AlignedBuf,
    /// Called once with the result.
    pub done: DoneFn,
}

impl std::fmt::Debug for IoJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoJob")
            .field("vm", &self.vm)
            .field("kind", &self.kind)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("fua", &self.fua)
            .finish()
    }
}

impl IoJob {
    /// Complete the job now with `result` (the buffer goes back to the caller).
    pub fn finish(self, result: IoResult) {
        (self.done)(result, self.buf)
    }
}
