//! NBD protocol constants and the transmission-phase request parser
//! (NetworkBlockDevice/nbd `doc/proto.md`). Pure code: no I/O, fuzzed.

use crate::faults::Fault;

/// `NBDMAGIC`: the server's first eight bytes.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the magic of an option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// The magic of an option reply.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// `NBD_REQUEST_MAGIC`.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// `NBD_SIMPLE_REPLY_MAGIC`.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

// Handshake flags (server) and client flags.
/// Handshake flag `NBD_FLAG_FIXED_NEWSTYLE`.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag `NBD_FLAG_NO_ZEROES`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag `NBD_FLAG_C_FIXED_NEWSTYLE`.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag `NBD_FLAG_C_NO_ZEROES`.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Options.
/// `NBD_OPT_EXPORT_NAME`.
pub const OPT_EXPORT_NAME: u32 = 1;
/// `NBD_OPT_ABORT`.
pub const OPT_ABORT: u32 = 2;
/// `NBD_OPT_LIST`.
pub const OPT_LIST: u32 = 3;
/// `NBD_OPT_STARTTLS`.
pub const OPT_STARTTLS: u32 = 5;
/// `NBD_OPT_INFO`.
pub const OPT_INFO: u32 = 6;
/// `NBD_OPT_GO`.
pub const OPT_GO: u32 = 7;

// Option replies.
/// `NBD_REP_ACK`.
pub const REP_ACK: u32 = 1;
/// `NBD_REP_SERVER`.
pub const REP_SERVER: u32 = 2;
/// `NBD_REP_INFO`.
pub const REP_INFO: u32 = 3;
/// `NBD_REP_ERR_UNSUP`.
pub const REP_ERR_UNSUP: u32 = 0x8000_0001;
/// `NBD_REP_ERR_POLICY`.
pub const REP_ERR_POLICY: u32 = 0x8000_0002;
/// `NBD_REP_ERR_INVALID`.
pub const REP_ERR_INVALID: u32 = 0x8000_0003;
/// `NBD_REP_ERR_UNKNOWN`.
pub const REP_ERR_UNKNOWN: u32 = 0x8000_0006;
/// `NBD_REP_ERR_SHUTDOWN`.
pub const REP_ERR_SHUTDOWN: u32 = 0x8000_0007;

// Information types.
/// `NBD_INFO_EXPORT`.
pub const INFO_EXPORT: u16 = 0;
/// `NBD_INFO_NAME`.
pub const INFO_NAME: u16 = 1;
/// `NBD_INFO_DESCRIPTION`.
pub const INFO_DESCRIPTION: u16 = 2;
/// `NBD_INFO_BLOCK_SIZE`.
pub const INFO_BLOCK_SIZE: u16 = 3;

// Transmission flags.
/// Transmission flag `NBD_FLAG_HAS_FLAGS`.
pub const TF_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag `NBD_FLAG_READ_ONLY`.
pub const TF_READ_ONLY: u16 = 1 << 1;
/// Transmission flag `NBD_FLAG_SEND_FLUSH`.
pub const TF_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag `NBD_FLAG_SEND_FUA`.
pub const TF_SEND_FUA: u16 = 1 << 3;
/// Transmission flag `NBD_FLAG_ROTATIONAL`.
pub const TF_ROTATIONAL: u16 = 1 << 4;
/// Transmission flag `NBD_FLAG_SEND_TRIM`.
pub const TF_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag `NBD_FLAG_SEND_WRITE_ZEROES`.
pub const TF_SEND_WRITE_ZEROES: u16 = 1 << 6;
/// Transmission flag `NBD_FLAG_CAN_MULTI_CONN`.
pub const TF_CAN_MULTI_CONN: u16 = 1 << 8;

// Command flags.
/// Command flag `NBD_CMD_FLAG_FUA`.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// Command flag `NBD_CMD_FLAG_NO_HOLE`.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

// Commands.
/// Command `NBD_CMD_READ`.
pub const CMD_READ: u16 = 0;
/// Command `NBD_CMD_WRITE`.
pub const CMD_WRITE: u16 = 1;
/// Command `NBD_CMD_DISC`.
pub const CMD_DISC: u16 = 2;
/// Command `NBD_CMD_FLUSH`.
pub const CMD_FLUSH: u16 = 3;
/// Command `NBD_CMD_TRIM`.
pub const CMD_TRIM: u16 = 4;
/// Command `NBD_CMD_WRITE_ZEROES`.
pub const CMD_WRITE_ZEROES: u16 = 6;

// Errors.
/// `NBD_EPERM`: Operation not permitted.
pub const EPERM: u32 = 1;
/// `NBD_EIO`: Input/output error.
pub const EIO: u32 = 5;
/// `NBD_ENOMEM`: Out of memory.
pub const ENOMEM: u32 = 12;
/// `NBD_EINVAL`: Invalid argument.
pub const EINVAL: u32 = 22;
/// `NBD_ENOSPC`: No space left.
pub const ENOSPC: u32 = 28;
/// `NBD_EOVERFLOW`: Value too large (a request past the end of the export).
pub const EOVERFLOW: u32 = 75;
/// `NBD_ENOTSUP`: Not supported.
pub const ENOTSUP: u32 = 95;
/// `NBD_ESHUTDOWN`: The server is shutting down.
pub const ESHUTDOWN: u32 = 108;

/// Block sizes advertised in `NBD_INFO_BLOCK_SIZE`.
pub const MIN_BLOCK: u32 = 512;
/// Preferred block size advertised.
pub const PREFERRED_BLOCK: u32 = 4096;
/// Largest READ/WRITE payload (32 MiB).
pub const MAX_PAYLOAD: u32 = 32 << 20;

/// Size of a request header on the wire.
pub const REQUEST_LEN: usize = 28;

/// A request header as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRequest {
    /// Command flags (`NBD_CMD_FLAG_*`).
    pub flags: u16,
    /// The command (`NBD_CMD_*`).
    pub typ: u16,
    /// The client's handle, echoed in the reply.
    pub cookie: u64,
    /// Byte offset into the export.
    pub offset: u64,
    /// Length in bytes.
    pub length: u32,
}

/// Parse a request header; `None` if the magic is wrong (the stream cannot be
/// resynchronised: hard disconnect).
pub fn parse_header(b: &[u8; REQUEST_LEN]) -> Option<RawRequest> {
    let magic = u32::from_be_bytes(b[0..4].try_into().ok()?);
    if magic != REQUEST_MAGIC {
        return None;
    }
    Some(RawRequest {
        flags: u16::from_be_bytes(b[4..6].try_into().ok()?),
        typ: u16::from_be_bytes(b[6..8].try_into().ok()?),
        cookie: u64::from_be_bytes(b[8..16].try_into().ok()?),
        offset: u64::from_be_bytes(b[16..24].try_into().ok()?),
        length: u32::from_be_bytes(b[24..28].try_into().ok()?),
    })
}

/// A valid command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `NBD_CMD_READ`.
    Read {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        length: u32,
    },
    /// `NBD_CMD_WRITE`; its payload follows the header.
    Write {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        length: u32,
        /// Durable before the reply (`NBD_CMD_FLAG_FUA`).
        fua: bool,
    },
    /// `NBD_CMD_DISC`: the client disconnects.
    Disc,
    /// `NBD_CMD_FLUSH`.
    Flush,
    /// `NBD_CMD_TRIM`.
    Trim {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        length: u32,
        /// Durable before the reply.
        fua: bool,
    },
    /// `NBD_CMD_WRITE_ZEROES`.
    WriteZeroes {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        length: u32,
        /// Durable before the reply.
        fua: bool,
        /// Write the zeroes rather than punch a hole (`NBD_CMD_FLAG_NO_HOLE`).
        no_hole: bool,
    },
}

/// A request to answer with an error. `skip` payload bytes follow the
/// header and must be read and dropped to stay in step with the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reject {
    /// The NBD error code to answer with.
    pub error: u32,
    /// Payload bytes to read and drop.
    pub skip: u32,
    /// Why, for the rejection counters.
    pub fault: Fault,
}

/// What the server knows about the export when checking a request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The export's size in bytes.
    pub size: u64,
    /// Whether writes are refused.
    pub read_only: bool,
    /// The client asked for `NBD_INFO_BLOCK_SIZE`, so it must honour
    /// `MIN_BLOCK` alignment (unaligned requests get EINVAL). Otherwise any
    /// alignment is served.
    pub enforce_alignment: bool,
}

fn in_bounds(offset: u64, length: u32, size: u64) -> bool {
    offset.checked_add(length as u64).is_some_and(|end| end <= size)
}

fn aligned(offset: u64, length: u32) -> bool {
    offset.is_multiple_of(MIN_BLOCK as u64) && length.is_multiple_of(MIN_BLOCK)
}

/// Check a request against the export: the spec's error for each fault.
pub fn check(r: &RawRequest, lim: &Limits) -> Result<Command, Reject> {
    let payload = if r.typ == CMD_WRITE { r.length } else { 0 };
    let reject = |error, fault| Reject {
        error,
        skip: payload,
        fault,
    };
    let fua = r.flags & CMD_FLAG_FUA != 0;
    // FUA is valid on every command; NO_HOLE only on WRITE_ZEROES; nothing else is negotiated.
    let allowed = match r.typ {
        CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
        _ => CMD_FLAG_FUA,
    };
    if r.flags & !allowed != 0 {
        return Err(reject(EINVAL, Fault::BadFlags));
    }
    let (offset, length) = (r.offset, r.length);
    let misaligned = lim.enforce_alignment && !aligned(offset, length);
    let in_range = in_bounds(offset, length, lim.size);
    match r.typ {
        CMD_READ => {
            if length > MAX_PAYLOAD {
                return Err(reject(EINVAL, Fault::Oversized));
            }
            if !in_range {
                return Err(reject(EINVAL, Fault::OutOfRange));
            }
            if misaligned {
                return Err(reject(EINVAL, Fault::Misaligned));
            }
            Ok(Command::Read { offset, length })
        }
        CMD_WRITE => {
            if length > MAX_PAYLOAD {
                return Err(reject(EINVAL, Fault::Oversized));
            }
            if lim.read_only {
                return Err(reject(EPERM, Fault::ReadOnly));
            }
            if !in_range {
                return Err(reject(ENOSPC, Fault::OutOfRange));
            }
            if misaligned {
                return Err(reject(EINVAL, Fault::Misaligned));
            }
            Ok(Command::Write { offset, length, fua })
        }
        CMD_DISC => Ok(Command::Disc),
        CMD_FLUSH => Ok(Command::Flush),
        CMD_TRIM => {
            if lim.read_only {
                return Err(reject(EPERM, Fault::ReadOnly));
            }
            if !in_range {
                return Err(reject(EINVAL, Fault::OutOfRange));
            }
            if misaligned {
                return Err(reject(EINVAL, Fault::Misaligned));
            }
            Ok(Command::Trim { offset, length, fua })
        }
        CMD_WRITE_ZEROES => {
            if lim.read_only {
                return Err(reject(EPERM, Fault::ReadOnly));
            }
            if !in_range {
                return Err(reject(ENOSPC, Fault::OutOfRange));
            }
            if misaligned {
                return Err(reject(EINVAL, Fault::Misaligned));
            }
            Ok(Command::WriteZeroes {
                offset,
                length,
                fua,
                no_hole: r.flags & CMD_FLAG_NO_HOLE != 0,
            })
        }
        // CACHE, BLOCK_STATUS (needs structured replies), RESIZE and unknown
        // commands: not advertised, so EINVAL.
        _ => Err(reject(EINVAL, Fault::UnknownCommand)),
    }
}

/// The NBD error for a backend errno.
pub fn nbd_error(errno: i32) -> u32 {
    match errno {
        libc::EPERM | libc::EROFS | libc::EACCES => EPERM,
        libc::ENOMEM => ENOMEM,
        libc::EINVAL => EINVAL,
        libc::ENOSPC | libc::EDQUOT | libc::EFBIG => ENOSPC,
        libc::EOVERFLOW => EOVERFLOW,
        libc::EOPNOTSUPP => ENOTSUP,
        libc::ESHUTDOWN => ESHUTDOWN,
        _ => EIO,
    }
}

/// Encode a simple reply header.
pub fn simple_reply(cookie: u64, error: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    h[4..8].copy_from_slice(&error.to_be_bytes());
    h[8..16].copy_from_slice(&cookie.to_be_bytes());
    h
}

/// The body of `NBD_OPT_INFO` / `NBD_OPT_GO`: export name and info requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoRequest {
    /// The export asked for.
    pub name: String,
    /// The `NBD_INFO_*` items asked for.
    pub infos: Vec<u16>,
}

/// Parse the data of `NBD_OPT_INFO` / `NBD_OPT_GO`; `None` if malformed
/// (lengths that disagree, a name that is not UTF-8 or contains NUL).
pub fn parse_go(data: &[u8]) -> Option<GoRequest> {
    let name_len = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    let name_end = 4usize.checked_add(name_len)?;
    let name = std::str::from_utf8(data.get(4..name_end)?).ok()?;
    if name.contains('\0') || name_len > 4096 {
        return None;
    }
    let n = u16::from_be_bytes(data.get(name_end..name_end + 2)?.try_into().ok()?) as usize;
    let rest = &data[name_end + 2..];
    if rest.len() != 2 * n {
        return None;
    }
    let infos = rest.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
    Some(GoRequest {
        name: name.to_string(),
        infos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(flags: u16, typ: u16, offset: u64, length: u32) -> [u8; 28] {
        let mut b = [0u8; 28];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&flags.to_be_bytes());
        b[6..8].copy_from_slice(&typ.to_be_bytes());
        b[8..16].copy_from_slice(&7u64.to_be_bytes());
        b[16..24].copy_from_slice(&offset.to_be_bytes());
        b[24..28].copy_from_slice(&length.to_be_bytes());
        b
    }

    const LIM: Limits = Limits {
        size: 1 << 20,
        read_only: false,
        enforce_alignment: true,
    };

    fn chk(flags: u16, typ: u16, offset: u64, length: u32) -> Result<Command, Reject> {
        check(&parse_header(&hdr(flags, typ, offset, length)).unwrap(), &LIM)
    }

    #[test]
    fn rejections_name_their_fault() {
        let fault = |flags, typ, offset, length| chk(flags, typ, offset, length).unwrap_err().fault;
        assert_eq!(fault(0, CMD_READ, 1 << 20, 512), Fault::OutOfRange);
        assert_eq!(fault(0, CMD_WRITE, u64::MAX - 10, 512), Fault::OutOfRange);
        assert_eq!(fault(0, CMD_TRIM, (1 << 20) - 512, 1024), Fault::OutOfRange);
        assert_eq!(fault(0, CMD_READ, 0, MAX_PAYLOAD + 1), Fault::Oversized);
        assert_eq!(fault(0, CMD_WRITE, 0, MAX_PAYLOAD + 1), Fault::Oversized);
        assert_eq!(fault(0, CMD_READ, 1, 512), Fault::Misaligned);
        assert_eq!(fault(1 << 4, CMD_WRITE_ZEROES, 0, 512), Fault::BadFlags);
        assert_eq!(fault(0, 99, 0, 0), Fault::UnknownCommand);
        let ro = Limits { read_only: true, ..LIM };
        let r = parse_header(&hdr(0, CMD_WRITE, 0, 512)).unwrap();
        assert_eq!(check(&r, &ro).unwrap_err().fault, Fault::ReadOnly);
    }

    #[test]
    fn errors_per_spec() {
        assert_eq!(
            chk(0, CMD_READ, 0, 4096),
            Ok(Command::Read {
                offset: 0,
                length: 4096
            })
        );
        assert_eq!(chk(0, CMD_READ, (1 << 20) - 512, 1024).unwrap_err().error, EINVAL);
        assert_eq!(
            chk(0, CMD_WRITE, (1 << 20) - 512, 1024),
            Err(Reject {
                error: ENOSPC,
                skip: 1024,
                fault: Fault::OutOfRange
            })
        );
        assert_eq!(
            chk(0, CMD_WRITE_ZEROES, 1 << 20, 512).unwrap_err(),
            Reject {
                error: ENOSPC,
                skip: 0,
                fault: Fault::OutOfRange
            }
        );
        assert_eq!(chk(0, CMD_TRIM, 1 << 20, 512).unwrap_err().error, EINVAL);
        assert_eq!(chk(0, CMD_READ, 0, MAX_PAYLOAD + 1).unwrap_err().error, EINVAL);
        assert_eq!(chk(0, CMD_WRITE, 0, MAX_PAYLOAD + 1).unwrap_err().skip, MAX_PAYLOAD + 1);
        assert_eq!(chk(0, CMD_READ, u64::MAX - 10, 512).unwrap_err().error, EINVAL);
        assert_eq!(chk(0, CMD_READ, 1, 512).unwrap_err().error, EINVAL);
        assert_eq!(chk(CMD_FLAG_NO_HOLE, CMD_WRITE, 0, 512).unwrap_err().error, EINVAL);
        assert_eq!(chk(1 << 4, CMD_WRITE_ZEROES, 0, 512).unwrap_err().error, EINVAL);
        assert_eq!(chk(0, 99, 0, 0).unwrap_err().error, EINVAL);
        assert!(matches!(
            chk(CMD_FLAG_FUA, CMD_WRITE, 0, 512),
            Ok(Command::Write { fua: true, .. })
        ));
        assert!(matches!(chk(CMD_FLAG_FUA, CMD_FLUSH, 0, 0), Ok(Command::Flush)));
        let ro = Limits { read_only: true, ..LIM };
        assert_eq!(
            check(&parse_header(&hdr(0, CMD_WRITE, 0, 512)).unwrap(), &ro)
                .unwrap_err()
                .error,
            EPERM
        );
        let lax = Limits {
            enforce_alignment: false,
            ..LIM
        };
        assert!(check(&parse_header(&hdr(0, CMD_READ, 1, 3)).unwrap(), &lax).is_ok());
        let mut bad = hdr(0, CMD_READ, 0, 512);
        bad[0] = 0;
        assert!(parse_header(&bad).is_none());
    }

    #[test]
    fn go_parsing() {
        let mut d = Vec::new();
        d.extend_from_slice(&3u32.to_be_bytes());
        d.extend_from_slice(b"vm1");
        d.extend_from_slice(&1u16.to_be_bytes());
        d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        assert_eq!(
            parse_go(&d),
            Some(GoRequest {
                name: "vm1".into(),
                infos: vec![INFO_BLOCK_SIZE]
            })
        );
        assert_eq!(parse_go(&d[..d.len() - 1]), None);
        let mut long = d.clone();
        long[3] = 200;
        assert_eq!(parse_go(&long), None);
        assert_eq!(parse_go(&[]), None);
    }

    proptest::proptest! {
        /// The fuzz target's invariants, on random headers: no panic, every
        /// accepted request inside the export, payload skipped on rejection.
        #[test]
        fn random_requests_never_escape_the_export(
            flags in proptest::prelude::any::<u16>(),
            typ in 0u16..10,
            offset in proptest::prelude::any::<u64>(),
            length in proptest::prelude::any::<u32>(),
            size in 0u64..(1 << 40),
            ro in proptest::prelude::any::<bool>(),
            enforce in proptest::prelude::any::<bool>(),
        ) {
            let raw = parse_header(&hdr(flags, typ, offset, length)).unwrap();
            let lim = Limits { size, read_only: ro, enforce_alignment: enforce };
            match check(&raw, &lim) {
                Ok(Command::Read { offset, length }) | Ok(Command::Write { offset, length, .. }) => {
                    proptest::prop_assert!(length <= MAX_PAYLOAD);
                    proptest::prop_assert!(offset + length as u64 <= size);
                }
                Ok(Command::Trim { offset, length, .. }) | Ok(Command::WriteZeroes { offset, length, .. }) => {
                    proptest::prop_assert!(!ro && offset + length as u64 <= size);
                }
                Ok(_) => {}
                Err(rej) => {
                    proptest::prop_assert_eq!(rej.skip, if typ == CMD_WRITE { length } else { 0 });
                }
            }
        }
    }
}
