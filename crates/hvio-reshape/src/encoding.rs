//! The on-disk encoding of log transactions and checkpoints (paper 001
//! §III.B.3, Fig. 4: TX start, remap entries, TX commit; and the persisted
//! table the paper keeps as a red-black tree file).
//!
//! Every number is little-endian. Every record carries a magic, a format
//! version ([`FORMAT_VERSION`]) and a CRC-32C (Castagnoli); a reader refuses a
//! newer version rather than guessing.
//!
//! A transaction occupies whole blocks of the log area:
//!
//! ```text
//! TX start   magic "HVTX" | version u16 | kind u16 = 1 | seq u64 | entries u32 | blocks u32   (24 bytes)
//! entry × n  start u64 | sectors u64 | target u64                                             (24 bytes each)
//! TX commit  magic "HVCM" | version u16 | kind u16 = 2 | seq u64 | crc32c u32 | 0 u32        (24 bytes)
//! zero padding to the end of the last block
//! ```
//!
//! The commit's CRC covers the start record, the entries and the commit
//! record itself (with its CRC field zero), so a commit is valid only if
//! everything before it reached the disk intact: the start, entries and
//! commit can be written in one I/O, as jbd2 does with checksummed commits.
//!
//! A checkpoint (one of two slots, written alternately) is:
//!
//! ```text
//! magic "HVCK" | version u16 | kind u16 = 3 | seq u64 | log_block u64 | entries u64 | crc32c u32 | 0 u32  (40 bytes)
//! entry × n    (as above)
//! zero padding to the end of the last block
//! ```
//!
//! `seq` is the last transaction the checkpoint includes; `log_block` is the
//! block of the log area where transaction `seq + 1` is (or will be) written.
//! The CRC covers the header (CRC field zero) and the entries.
//!
//! An entry's `target` is a transformed sector, or [`TARGET_ZERO`] (trimmed,
//! reads as zeroes), or [`TARGET_UNMAPPED`] (the mapping is removed).

use crate::extent_map::Target;
use hvio_core::Sector;
use thiserror::Error;

/// The version written; readers accept this one and older.
pub const FORMAT_VERSION: u16 = 1;
const TX_MAGIC: &[u8; 4] = b"HVTX";
const COMMIT_MAGIC: &[u8; 4] = b"HVCM";
const CHECKPOINT_MAGIC: &[u8; 4] = b"HVCK";
const KIND_START: u16 = 1;
const KIND_COMMIT: u16 = 2;
const KIND_CHECKPOINT: u16 = 3;
const RECORD_BYTES: usize = 24;
const CHECKPOINT_HEADER_BYTES: usize = 40;
/// `target` of a trimmed extent.
pub const TARGET_ZERO: u64 = u64::MAX;
/// `target` of a removed mapping.
pub const TARGET_UNMAPPED: u64 = u64::MAX - 1;

/// What an entry does to the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// Map the extent to this target.
    Map(Target),
    /// Remove the extent's mapping (back to the base image).
    Unmap,
}

/// One remap entry: original extent → mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// First original sector.
    pub start: Sector,
    /// Length in sectors.
    pub sectors: u64,
    /// What the entry does.
    pub mapping: Mapping,
}

/// Why a record was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a record: the magic does not match.
    #[error("no record here (magic {found:?})")]
    Magic {
        /// The bytes found.
        found: [u8; 4],
    },
    /// Written by a newer hvio.
    #[error("format version {found} is newer than this hvio's ({FORMAT_VERSION})")]
    Version {
        /// The version found.
        found: u16,
    },
    /// A record of another kind than asked for.
    #[error("record kind {found}, expected {expected}")]
    Kind {
        /// The kind found.
        found: u16,
        /// The kind asked for.
        expected: u16,
    },
    /// Fewer bytes than the record needs.
    #[error("record is cut short: needs {needed} bytes, {available} available")]
    Truncated {
        /// Bytes it needs.
        needed: usize,
        /// Bytes there are.
        available: usize,
    },
    /// The bytes are not what was written.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The checksum in the record.
        stored: u32,
        /// The checksum of its bytes.
        computed: u32,
    },
    /// Out of sequence.
    #[error("sequence {found}, expected {expected}")]
    Sequence {
        /// The sequence number found.
        found: u64,
        /// The one expected.
        expected: u64,
    },
    /// A malformed entry.
    #[error("entry {index} is malformed ({reason})")]
    Entry {
        /// Its index in the record.
        index: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Blocks a transaction of `entries` entries takes.
pub fn tx_blocks_for(entries: usize, block: usize) -> usize {
    (2 * RECORD_BYTES + entries * RECORD_BYTES).div_ceil(block)
}

/// Bytes a checkpoint of `entries` entries takes, whole blocks.
pub fn checkpoint_bytes_for(entries: usize, block: usize) -> usize {
    (CHECKPOINT_HEADER_BYTES + entries * RECORD_BYTES).div_ceil(block) * block
}

fn put_entry(out: &mut Vec<u8>, e: &Entry) {
    let target = match e.mapping {
        Mapping::Map(Target::At(t)) => t,
        Mapping::Map(Target::Zero) => TARGET_ZERO,
        Mapping::Unmap => TARGET_UNMAPPED,
    };
    out.extend_from_slice(&e.start.to_le_bytes());
    out.extend_from_slice(&e.sectors.to_le_bytes());
    out.extend_from_slice(&target.to_le_bytes());
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn get_entry(b: &[u8], index: usize) -> Result<Entry, DecodeError> {
    let start = u64_at(b, 0);
    let sectors = u64_at(b, 8);
    let target = u64_at(b, 16);
    if sectors == 0 {
        return Err(DecodeError::Entry {
            index,
            reason: "zero length",
        });
    }
    if start.checked_add(sectors).is_none() {
        return Err(DecodeError::Entry {
            index,
            reason: "extent past the end of the address space",
        });
    }
    let mapping = match target {
        TARGET_ZERO => Mapping::Map(Target::Zero),
        TARGET_UNMAPPED => Mapping::Unmap,
        t => Mapping::Map(Target::At(t)),
    };
    Ok(Entry {
        start,
        sectors,
        mapping,
    })
}

fn header(magic: &[u8; 4], kind: u16, seq: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(magic);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
}

fn check_header(b: &[u8], magic: &[u8; 4], kind: u16) -> Result<u64, DecodeError> {
    if b.len() < 16 {
        return Err(DecodeError::Truncated {
            needed: 16,
            available: b.len(),
        });
    }
    if &b[0..4] != magic {
        return Err(DecodeError::Magic {
            found: b[0..4].try_into().expect("4 bytes"),
        });
    }
    let version = u16_at(b, 4);
    if version > FORMAT_VERSION || version == 0 {
        return Err(DecodeError::Version { found: version });
    }
    let found = u16_at(b, 6);
    if found != kind {
        return Err(DecodeError::Kind { found, expected: kind });
    }
    Ok(u64_at(b, 8))
}

/// Encode transaction `seq` with its entries, padded to whole blocks.
pub fn encode_tx(seq: u64, entries: &[Entry], block: usize) -> Vec<u8> {
    let blocks = tx_blocks_for(entries.len(), block);
    let mut out = Vec::with_capacity(blocks * block);
    header(TX_MAGIC, KIND_START, seq, &mut out);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&(blocks as u32).to_le_bytes());
    for e in entries {
        put_entry(&mut out, e);
    }
    let commit_at = out.len();
    header(COMMIT_MAGIC, KIND_COMMIT, seq, &mut out);
    out.extend_from_slice(&[0; 8]);
    let crc = crc32c::crc32c(&out);
    out[commit_at + 16..commit_at + 20].copy_from_slice(&crc.to_le_bytes());
    out.resize(blocks * block, 0);
    out
}

/// The number of blocks the transaction starting at `b` claims to take, if
/// `b` starts with a well-formed TX start record of sequence `seq`.
pub fn tx_blocks_at(b: &[u8], seq: u64) -> Result<usize, DecodeError> {
    let found = check_header(b, TX_MAGIC, KIND_START)?;
    if found != seq {
        return Err(DecodeError::Sequence { found, expected: seq });
    }
    if b.len() < RECORD_BYTES {
        return Err(DecodeError::Truncated {
            needed: RECORD_BYTES,
            available: b.len(),
        });
    }
    Ok(u32_at(b, 20) as usize)
}

/// Decode transaction `seq` from `b` (its blocks): its entries, if committed.
pub fn decode_tx(b: &[u8], seq: u64) -> Result<Vec<Entry>, DecodeError> {
    tx_blocks_at(b, seq)?;
    let n = u32_at(b, 16) as usize;
    let commit_at = RECORD_BYTES + n * RECORD_BYTES;
    let end = commit_at + RECORD_BYTES;
    if b.len() < end {
        return Err(DecodeError::Truncated {
            needed: end,
            available: b.len(),
        });
    }
    let commit_seq = check_header(&b[commit_at..], COMMIT_MAGIC, KIND_COMMIT)?;
    if commit_seq != seq {
        return Err(DecodeError::Sequence {
            found: commit_seq,
            expected: seq,
        });
    }
    let stored = u32_at(b, commit_at + 16);
    let mut digest = b[..end].to_vec();
    digest[commit_at + 16..commit_at + 20].fill(0);
    let computed = crc32c::crc32c(&digest);
    if stored != computed {
        return Err(DecodeError::Checksum { stored, computed });
    }
    (0..n)
        .map(|i| get_entry(&b[RECORD_BYTES * (i + 1)..RECORD_BYTES * (i + 2)], i))
        .collect()
}

/// A decoded checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The last transaction it includes.
    pub seq: u64,
    /// The log block replay resumes at.
    pub log_block: u64,
    /// The table's extents.
    pub entries: Vec<Entry>,
}

/// Encode a checkpoint, padded to whole blocks.
pub fn encode_checkpoint(seq: u64, log_block: u64, entries: &[Entry], block: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(checkpoint_bytes_for(entries.len(), block));
    header(CHECKPOINT_MAGIC, KIND_CHECKPOINT, seq, &mut out);
    out.extend_from_slice(&log_block.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    for e in entries {
        put_entry(&mut out, e);
    }
    let crc = crc32c::crc32c(&out);
    out[32..36].copy_from_slice(&crc.to_le_bytes());
    out.resize(checkpoint_bytes_for(entries.len(), block), 0);
    out
}

/// Decode a checkpoint slot.
pub fn decode_checkpoint(b: &[u8]) -> Result<Checkpoint, DecodeError> {
    let seq = check_header(b, CHECKPOINT_MAGIC, KIND_CHECKPOINT)?;
    if b.len() < CHECKPOINT_HEADER_BYTES {
        return Err(DecodeError::Truncated {
            needed: CHECKPOINT_HEADER_BYTES,
            available: b.len(),
        });
    }
    let log_block = u64_at(b, 16);
    let n = u64_at(b, 24);
    let end = (n as u128) * RECORD_BYTES as u128 + CHECKPOINT_HEADER_BYTES as u128;
    if end > b.len() as u128 {
        return Err(DecodeError::Truncated {
            needed: end.min(usize::MAX as u128) as usize,
            available: b.len(),
        });
    }
    let end = end as usize;
    let stored = u32_at(b, 32);
    let mut digest = b[..end].to_vec();
    digest[32..36].fill(0);
    let computed = crc32c::crc32c(&digest);
    if stored != computed {
        return Err(DecodeError::Checksum { stored, computed });
    }
    let entries = (0..n as usize)
        .map(|i| {
            let at = CHECKPOINT_HEADER_BYTES + i * RECORD_BYTES;
            get_entry(&b[at..at + RECORD_BYTES], i)
        })
        .collect::<Result<_, _>>()?;
    Ok(Checkpoint {
        seq,
        log_block,
        entries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<Entry> {
        vec![
            Entry {
                start: 24,
                sectors: 8,
                mapping: Mapping::Map(Target::At(12)),
            },
            Entry {
                start: 41,
                sectors: 8,
                mapping: Mapping::Map(Target::Zero),
            },
            Entry {
                start: 56,
                sectors: 16,
                mapping: Mapping::Unmap,
            },
        ]
    }

    #[test]
    fn tx_round_trips_and_is_whole_blocks() {
        let b = encode_tx(7, &entries(), 512);
        // 24 start + 3 × 24 entries + 24 commit = 120 bytes: one block.
        assert_eq!(b.len(), 512);
        assert_eq!(tx_blocks_at(&b, 7), Ok(1));
        assert_eq!(decode_tx(&b, 7).unwrap(), entries());
        assert_eq!(decode_tx(&b, 8), Err(DecodeError::Sequence { found: 7, expected: 8 }));
        // 21 entries → 24 + 504 + 24 = 552 bytes: two blocks of 512.
        let many = vec![entries()[0]; 21];
        assert_eq!(encode_tx(1, &many, 512).len(), 1024);
    }

    #[test]
    fn any_flipped_byte_of_a_tx_is_caught() {
        let good = encode_tx(3, &entries(), 512);
        for i in 0..120 {
            let mut b = good.clone();
            b[i] ^= 0x40;
            assert!(decode_tx(&b, 3).is_err(), "byte {i} flipped went unnoticed");
        }
    }

    #[test]
    fn a_missing_commit_means_not_committed() {
        let mut b = encode_tx(3, &entries(), 512);
        b[96..120].fill(0);
        assert!(matches!(decode_tx(&b, 3), Err(DecodeError::Magic { .. })));
    }

    #[test]
    fn checkpoint_round_trips_and_refuses_newer_versions() {
        let b = encode_checkpoint(9, 4, &entries(), 4096);
        assert_eq!(b.len(), 4096);
        let c = decode_checkpoint(&b).unwrap();
        assert_eq!((c.seq, c.log_block, c.entries), (9, 4, entries()));
        let mut newer = b.clone();
        newer[4] = 2;
        assert_eq!(decode_checkpoint(&newer), Err(DecodeError::Version { found: 2 }));
        let mut torn = b.clone();
        torn[60] ^= 1;
        assert!(matches!(decode_checkpoint(&torn), Err(DecodeError::Checksum { .. })));
        let mut huge = b;
        huge[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(decode_checkpoint(&huge), Err(DecodeError::Truncated { .. })));
    }
}
