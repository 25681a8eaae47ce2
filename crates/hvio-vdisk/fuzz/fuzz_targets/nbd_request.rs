//! Fuzz the NBD transmission request parser and checker, and the
//! NBD_OPT_INFO/GO option parser: no input may panic, and every accepted
//! request must lie inside the export and within the payload limit.
#![no_main]

use hvio_vdisk::nbd::proto::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < REQUEST_LEN + 10 {
        let _ = parse_go(data);
        return;
    }
    let (hdr, rest) = data.split_at(REQUEST_LEN);
    let size = u64::from_le_bytes(rest[0..8].try_into().unwrap());
    let lim = Limits {
        size,
        read_only: rest[8] & 1 != 0,
        enforce_alignment: rest[8] & 2 != 0,
    };
    let _ = parse_go(&rest[9..]);
    let Some(raw) = parse_header(hdr.try_into().unwrap()) else { return };
    match check(&raw, &lim) {
        Ok(Command::Read { offset, length }) | Ok(Command::Write { offset, length, .. }) => {
            assert!(length <= MAX_PAYLOAD);
            assert!(offset.checked_add(length as u64).is_some_and(|e| e <= size));
        }
        Ok(Command::Trim { offset, length, .. }) | Ok(Command::WriteZeroes { offset, length, .. }) => {
            assert!(!lim.read_only);
            assert!(offset.checked_add(length as u64).is_some_and(|e| e <= size));
        }
        Ok(Command::Flush) | Ok(Command::Disc) => {}
        Err(rej) => {
            assert_eq!(rej.skip, if raw.typ == CMD_WRITE { raw.length } else { 0 });
            assert!([EPERM, EINVAL, ENOSPC].contains(&rej.error));
        }
    }
});
