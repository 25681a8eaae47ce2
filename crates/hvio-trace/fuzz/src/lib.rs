//! Shared body of the fuzz targets: read everything, never panic.

use hvio_trace::{Format, ReadOptions, TraceReader};
use std::io::Cursor;

/// Reads `data` as `format` (detected when `None`), once stopping at the first
/// bad record and once skipping bad records, with at most 100,000 records.
pub fn read(format: Option<Format>, data: &[u8]) {
    for skip_bad in [false, true] {
        let o = ReadOptions { format, skip_bad, allow_unsorted: skip_bad, ..Default::default() };
        if let Ok(r) = TraceReader::from_reader("fuzz", Box::new(Cursor::new(data.to_vec())), &o) {
            for rec in r.take(100_000) {
                let _ = rec;
            }
        }
    }
}
