//! The closed loop both device benches drive (`mod common;` in each).

use hvio_core::{Device, Op, Request};

/// Closed loop at the device's depth: `n` requests from `next(i)`, from time
/// `start`; returns the time the last one completed.
pub fn drive(d: &mut dyn Device, start: u64, n: u64, mut next: impl FnMut(u64) -> (Op, u64, u32)) -> u64 {
    let mut out = Vec::with_capacity(64);
    let mut now = start;
    let mut id = 0;
    let mut done = 0;
    while done < n {
        while d.can_accept() && id < n {
            let (op, sector, len) = next(id);
            d.submit(Request::new(id, 0, op, sector, len, now), now);
            id += 1;
        }
        now = d.next_event().unwrap();
        out.clear();
        d.advance(now, &mut out);
        done += out.len() as u64;
    }
    now
}

pub fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}
