//! Small shared pieces for schedulers: a sector-sorted queue with a FIFO of
//! deadlines beside it (the "sort_list + fifo_list" pair of Linux's
//! deadline, CFQ and AS).

use hvio_core::{Nanos, Request, RequestId, Sector};
use std::collections::{BTreeMap, VecDeque};

/// Key of a request in sector order; ties broken by id (arrival order).
pub type SortKey = (Sector, RequestId);

/// A [`SortKey`] as one integer with the same order (one comparison, 16 bytes).
type Packed = u128;

#[inline]
fn pack(k: SortKey) -> Packed {
    ((k.0 as u128) << 64) | k.1 as u128
}

#[inline]
fn unpack(p: Packed) -> SortKey {
    ((p >> 64) as u64, p as u64)
}

/// Most keys in one chunk of a [`SortedIndex`] (split in halves beyond).
const CHUNK: usize = 64;

/// Up to this many request slots (4 KB, a queue that never held more than
/// one chunk's worth) stay in the first-level cache between decisions, so a
/// removal asks for none of them ahead.
const SLOTS_IN_CACHE: usize = CHUNK;

/// Emptied chunks kept for reuse by one index.
const SPARE_CHUNKS: usize = 16;

/// With more chunks than this (≈ 32 KB of offsets and slots, a first-level
/// cache's size) a chunk's offset lines are prefetched before a search.
const COLD_CHUNKS: usize = 64;

/// One sorted run of entries in fixed arrays: their sectors side by side,
/// each as its 32-bit offset from the chunk's base ([`SortedIndex::bases`]:
/// 4 bytes each, so a binary search, a prefetch and a `memmove` cover 4
/// lines for 64 entries where 8-byte sectors took 8), their slots apart.
/// The tie-break of equal sectors, the request id, is not stored:
/// the index reads it from the request's slot, only when sectors are equal
/// (see [`SortedIndex`]). Its length is kept by the index only
/// ([`SortedIndex::lens`]): a length in the chunk would sit in a line of its
/// own, read before every shift, and in a big queue be a miss of its own.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
struct Chunk {
    offsets: [u32; CHUNK],
    slots: [u32; CHUNK],
}

impl Chunk {
    fn empty() -> Box<Chunk> {
        Box::new(Chunk {
            offsets: [0; CHUNK],
            slots: [0; CHUNK],
        })
    }

    /// Asks for all the offset lines at once: a binary search reads them one
    /// after another, and in a big queue each would be a cache miss.
    #[inline]
    fn prefetch_offsets(&self, len: usize) {
        for i in (0..len).step_by(16) {
            prefetch(&self.offsets[i]);
        }
    }

    /// Asks for the slot lines as well: an insertion or removal moves the
    /// slots after its position, which would otherwise be fetched only once
    /// the search over the offsets is done (a second miss after the first).
    #[inline]
    fn prefetch_slots(&self, len: usize) {
        for i in (0..len).step_by(16) {
            prefetch(&self.slots[i]);
        }
    }

    /// Puts an entry at `pos` of the first `n`, moving those after it on.
    fn insert_at(&mut self, pos: usize, n: usize, offset: u32, slot: u32) {
        self.offsets.copy_within(pos..n, pos + 1);
        self.slots.copy_within(pos..n, pos + 1);
        self.offsets[pos] = offset;
        self.slots[pos] = slot;
    }

    /// Takes the entry at `pos` of the first `n` out; returns its slot.
    fn remove_at(&mut self, pos: usize, n: usize) -> u32 {
        let slot = self.slots[pos];
        self.offsets.copy_within(pos + 1..n, pos);
        self.slots.copy_within(pos + 1..n, pos);
        slot
    }

    /// Appends `other`'s first `m` entries after the first `n`, their
    /// offsets moved by `delta` (`other`'s base less this chunk's, modulo
    /// 2^32; the caller checked that they fit).
    fn append(&mut self, n: usize, other: &Chunk, m: usize, delta: u32) {
        for (to, &from) in self.offsets[n..n + m].iter_mut().zip(&other.offsets[..m]) {
            *to = from.wrapping_add(delta);
        }
        self.slots[n..n + m].copy_from_slice(&other.slots[..m]);
    }

    /// Moves the first `n` offsets to a base `delta` higher (modulo 2^32;
    /// the caller checked that every sector is at or after the new base and
    /// within `u32::MAX` of it).
    fn rebase(&mut self, n: usize, delta: u32) {
        for o in &mut self.offsets[..n] {
            *o = o.wrapping_sub(delta);
        }
    }
}

/// The position of the first of the sorted `keys` at or after `k`
/// (`partition_point(|x| x < k)`), without branches on the keys: the
/// comparisons are unpredictable, a mispredicted branch per step costs
/// more than the step.
#[inline]
fn lower_bound<T: Copy + Ord>(keys: &[T], k: T) -> usize {
    if keys.is_empty() {
        return 0;
    }
    let (mut base, mut size) = (0, keys.len());
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        // `black_box` keeps LLVM from turning this back into a branch.
        base += half * std::hint::black_box((keys[mid] < k) as usize);
        size -= half;
    }
    base + (keys[base] < k) as usize
}

/// [`lower_bound`] for at most `2^STEPS` keys: a fixed number of steps,
/// which LLVM unrolls, and unrolled it keeps the conditional moves (in a
/// loop it turns them into branches, or needs `black_box`, which adds a
/// store and a load to every step).
#[inline]
fn lower_bound_steps<const STEPS: u32, T: Copy + Ord>(keys: &[T], k: T) -> usize {
    debug_assert!(keys.len() <= 1 << STEPS);
    if keys.is_empty() {
        return 0;
    }
    let (mut base, mut size) = (0, keys.len());
    for _ in 0..STEPS {
        if size > 1 {
            let half = size / 2;
            let mid = base + half;
            base = if keys[mid] < k { mid } else { base };
            size -= half;
        }
    }
    base + (keys[base] < k) as usize
}

/// Hint the processor to fetch `p`'s cache line (no effect on results).
#[inline(always)]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing architecturally; `p` is a valid reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The request id of a slot, which a [`SortedIndex`] reads to order equal
/// sectors (its owner's slot table).
trait IdOf: Fn(u32) -> RequestId + Copy {}
impl<F: Fn(u32) -> RequestId + Copy> IdOf for F {}

/// Sort keys in order, each with a slot number: a list of sorted chunks of
/// at most [`CHUNK`] entries with the largest key of each chunk beside it. A
/// lookup is two binary searches (chunk, then position), an insertion or
/// removal moves at most a chunk's worth of 8-byte entries: cheaper and
/// more cache friendly than a B-tree both for the few dozen requests a
/// queue usually holds (one chunk: a sorted array) and for 100,000.
///
/// A chunk holds sectors only (as offsets from its base); the whole key's second half, the request
/// id, is read from the slot (`id_of`, the owner's table) when two sectors
/// are equal, and by the queries that answer with a whole key. The chunk
/// list keeps each chunk's last sector, and its last id is read the same
/// way when that sector is a searched key's, so equal sectors across a
/// chunk boundary stay in order.
// Chunks are boxed on purpose: splitting or dropping one shifts 8-byte
// pointers in `chunks`, not 512-byte chunks.
#[allow(clippy::vec_box)]
#[derive(Debug, Default, Clone)]
struct SortedIndex {
    chunks: Vec<Box<Chunk>>,
    /// `max_sectors[i]`: the sector of the last key of `chunks[i]` (chunks
    /// are never empty). Sectors only, half the size of whole keys: a
    /// chunk search runs over this list, and in a big queue its later
    /// steps are first-level cache misses, one after another. A tie with a
    /// searched sector reads the chunk's last id from its slot.
    max_sectors: Vec<Sector>,
    /// `lens[i]`: the length of `chunks[i]` (the only copy: a length in the
    /// chunk would be a line of its own, and in a big queue a search, its
    /// prefetches and every shift would wait for its miss).
    lens: Vec<u8>,
    /// `bases[i]`: at or below every sector of `chunks[i]` and within
    /// `u32::MAX` of each, which the chunk stores as its offset from it (a
    /// 32-bit offset: half the lines of a sector). Kept beside the chunk
    /// list for the reason `lens` is. A key too far from a chunk's base
    /// moves the base or goes into a chunk of its own (rare: keys within
    /// 2^32 sectors of each other, 2 TiB, never need a chunk of their own).
    bases: Vec<Sector>,
    /// Emptied chunks, for the next ones needed (a queue that empties and
    /// refills allocates nothing).
    spare: Vec<Box<Chunk>>,
    /// Where the key after the last one removed probably is (chunk,
    /// position): an elevator's next removal is usually that key, found
    /// without a search. Checked before use: a stale hint costs a search.
    hint: (usize, usize),
    /// The chunk the last chunk search found: the next search is often
    /// for the same place (AS's alias check, then its insertion; the
    /// prefetch of a FIFO head's chunk, then its removal), and a chunk is
    /// the answer for `key` exactly when its last key is at or after `key`
    /// and the one before it is not: two comparisons instead of a search
    /// over every chunk's last key.
    last_chunk: std::cell::Cell<usize>,
}

/// Where a key of a [`SortedIndex`] is: (chunk, position).
type Place = (usize, usize);

/// Where the key at `hint` is once chunk `split` has split in halves (its
/// second half is chunk `split + 1` and the chunks after it move one on).
#[inline]
fn hint_after_split((hc, hp): Place, split: usize) -> Place {
    if hc > split {
        (hc + 1, hp)
    } else if hc == split && hp >= CHUNK / 2 {
        (hc + 1, hp - CHUNK / 2)
    } else {
        (hc, hp)
    }
}

/// The largest distance of a sector from its chunk's base.
const MAX_OFFSET: u64 = u32::MAX as u64;

impl SortedIndex {
    /// The chunk holding the first key at or after `key` (`chunks.len()` if none).
    #[inline(always)]
    fn chunk_at_or_after(&self, key: Packed, id_of: impl IdOf) -> usize {
        let n = self.max_sectors.len();
        let ci = self.last_chunk.get();
        if ci < n && !self.max_before(ci, key, id_of) && (ci == 0 || self.max_before(ci - 1, key, id_of)) {
            return ci;
        }
        let sector = unpack(key).0;
        let mut ci = if n <= 1 << 16 {
            lower_bound_steps::<16, Sector>(&self.max_sectors, sector)
        } else {
            lower_bound(&self.max_sectors, sector)
        };
        // Chunks ending at `key`'s sector with a smaller id come before it.
        while ci < n && self.max_sectors[ci] == sector && self.max_before(ci, key, id_of) {
            ci += 1;
        }
        self.last_chunk.set(ci);
        ci
    }

    /// Whether the last key of chunk `ci` comes before `key` (its id is
    /// read only when its sector is `key`'s and `key`'s id is not 0).
    #[inline(always)]
    fn max_before(&self, ci: usize, key: Packed, id_of: impl IdOf) -> bool {
        let (sector, id) = unpack(key);
        let max = self.max_sectors[ci];
        max < sector || (max == sector && id > 0 && self.last_id(ci, id_of) < id)
    }

    /// The id of chunk `ci`'s last key (a tie of sectors: rare).
    #[cold]
    #[inline(never)]
    fn last_id(&self, ci: usize, id_of: impl IdOf) -> RequestId {
        id_of(self.chunks[ci].slots[self.len(ci) - 1])
    }

    /// The whole key at `(ci, pos)`.
    #[inline]
    fn key_at(&self, (ci, pos): Place, id_of: impl IdOf) -> Packed {
        pack((self.sector_at((ci, pos)), id_of(self.chunks[ci].slots[pos])))
    }

    /// The sector at `(ci, pos)`.
    #[inline(always)]
    fn sector_at(&self, (ci, pos): Place) -> Sector {
        self.bases[ci] + self.chunks[ci].offsets[pos] as Sector
    }

    /// The sector and slot at `(ci, pos)`.
    #[inline(always)]
    fn entry_at(&self, (ci, pos): Place) -> (Sector, u32) {
        (self.sector_at((ci, pos)), self.chunks[ci].slots[pos])
    }

    /// Whether the entry at `(ci, pos)` comes before `key`; its id is read
    /// only when its sector is `key`'s and `key`'s id is not 0 (a probe
    /// `(sector, 0)` is at or before every key with that sector).
    #[inline]
    fn less_at(&self, (ci, pos): Place, key: Packed, id_of: impl IdOf) -> bool {
        let (sector, id) = unpack(key);
        let at = self.sector_at((ci, pos));
        at < sector || (at == sector && id > 0 && id_of(self.chunks[ci].slots[pos]) < id)
    }

    /// Whether the entry at `(ci, pos)` is `key`.
    #[inline]
    fn is_at(&self, (ci, pos): Place, key: Packed, id_of: impl IdOf) -> bool {
        let (sector, id) = unpack(key);
        self.sector_at((ci, pos)) == sector && id_of(self.chunks[ci].slots[pos]) == id
    }

    /// The position in chunk `ci` of the first key at or after `key`: a
    /// search over the offsets, then past the equal sectors with smaller ids.
    #[inline]
    fn pos(&self, ci: usize, key: Packed, id_of: impl IdOf) -> usize {
        let (c, len) = (&self.chunks[ci], self.lens[ci] as usize);
        if self.chunks.len() > COLD_CHUNKS {
            c.prefetch_offsets(len);
        }
        let (sector, id) = unpack(key);
        // Beyond the chunk's range (below its base or over `MAX_OFFSET`
        // above it), `rel` is over `MAX_OFFSET` and matches no entry.
        let rel = sector.wrapping_sub(self.bases[ci]);
        let pos = if rel <= MAX_OFFSET {
            lower_bound_steps::<{ CHUNK.ilog2() }, u32>(&c.offsets[..len], rel as u32)
        } else if sector < self.bases[ci] {
            0
        } else {
            len
        };
        if id == 0 || pos == len || c.offsets[pos] as Sector != rel {
            return pos;
        }
        // A run of equal sectors: bisect it by the ids in the slots (a
        // queue may hold many requests at one sector).
        let run = c.offsets[pos..len].partition_point(|&o| o as Sector == rel);
        pos + c.slots[pos..pos + run].partition_point(|&slot| id_of(slot) < id)
    }

    /// The length of chunk `ci`.
    #[inline(always)]
    fn len(&self, ci: usize) -> usize {
        self.lens[ci] as usize
    }

    fn new_chunk(&mut self) -> Box<Chunk> {
        self.spare.pop().unwrap_or_else(Chunk::empty)
    }

    /// Keeps an emptied chunk for reuse, up to [`SPARE_CHUNKS`] (a queue
    /// that once held 100,000 requests does not hold their memory).
    fn keep_spare(&mut self, c: Box<Chunk>) {
        if self.spare.len() < SPARE_CHUNKS {
            self.spare.push(c);
        }
    }

    /// Adds `key` with slot `slot`; false (and nothing changed) if `key` is
    /// present. `id_of` need not know `slot` yet.
    #[inline(always)]
    fn insert(&mut self, key: Packed, slot: u32, id_of: impl IdOf) -> bool {
        let sector = unpack(key).0;
        if self.chunks.is_empty() {
            let mut c = self.new_chunk();
            c.insert_at(0, 0, 0, slot);
            self.chunks.push(c);
            self.max_sectors.push(sector);
            self.bases.push(sector);
            self.lens.push(1);
            return true;
        }
        let ci = self.chunk_at_or_after(key, id_of).min(self.chunks.len() - 1);
        if self.chunks.len() > COLD_CHUNKS {
            self.chunks[ci].prefetch_slots(self.len(ci));
        }
        let pos = self.pos(ci, key, id_of);
        if pos < self.len(ci) && self.is_at((ci, pos), key, id_of) {
            return false;
        }
        self.insert_at((ci, pos), sector, slot);
        true
    }

    /// The place a key with `sector` goes to when no queued key has that
    /// sector, given `at`, the place of the first key at or after
    /// `(sector, 0)` (None: after every key). None if the index is empty.
    fn place_for_new_sector(&self, at: Option<Place>) -> Option<Place> {
        at.or_else(|| {
            let ci = self.chunks.len().checked_sub(1)?;
            Some((ci, self.len(ci)))
        })
    }

    /// Puts `sector` with slot `slot` at `(ci, pos)`, the place of the
    /// first key after it (or the end of the last chunk), splitting a full
    /// chunk.
    #[inline(always)]
    fn insert_at(&mut self, (mut ci, mut pos): Place, sector: Sector, slot: u32) {
        if self.len(ci) == CHUNK {
            self.split(ci);
            if pos >= CHUNK / 2 {
                ci += 1;
                pos -= CHUNK / 2;
            }
        }
        let rel = sector.wrapping_sub(self.bases[ci]);
        if rel > MAX_OFFSET {
            return self.insert_out_of_range((ci, pos), sector, slot);
        }
        let n = self.len(ci);
        self.chunks[ci].insert_at(pos, n, rel as u32, slot);
        if pos == n {
            self.max_sectors[ci] = sector;
        }
        self.lens[ci] = (n + 1) as u8;
        // The hinted key moved one place on: follow it, so that the
        // elevator's next removal (deadline's `next_rq`, found by
        // `find`) still finds it without a search when a request arrived
        // before it in its chunk.
        if self.hint.0 == ci && pos <= self.hint.1 {
            self.hint.1 += 1;
        }
    }

    /// Splits the full chunk `ci` in halves; the second half, chunk
    /// `ci + 1`, keeps its base (its sectors are at or after it, and within
    /// `MAX_OFFSET` of it).
    #[inline(always)]
    fn split(&mut self, ci: usize) {
        let mut tail = self.new_chunk();
        let c = &mut self.chunks[ci];
        tail.offsets[..CHUNK / 2].copy_from_slice(&c.offsets[CHUNK / 2..]);
        tail.slots[..CHUNK / 2].copy_from_slice(&c.slots[CHUNK / 2..]);
        // The tail keeps the full chunk's largest key.
        let max = self.max_sectors[ci];
        self.max_sectors[ci] = self.bases[ci] + c.offsets[CHUNK / 2 - 1] as Sector;
        self.chunks.insert(ci + 1, tail);
        self.max_sectors.insert(ci + 1, max);
        self.bases.insert(ci + 1, self.bases[ci]);
        self.lens.insert(ci + 1, (CHUNK / 2) as u8);
        self.lens[ci] = (CHUNK / 2) as u8;
        self.hint = hint_after_split(self.hint, ci);
    }

    /// Moves chunk `ci`'s base to `base` (at or below its sectors, each
    /// within `MAX_OFFSET` of it).
    fn rebase(&mut self, ci: usize, base: Sector) {
        let n = self.len(ci);
        self.chunks[ci].rebase(n, base.wrapping_sub(self.bases[ci]) as u32);
        self.bases[ci] = base;
    }

    /// [`Self::insert_at`] for a sector below chunk `ci`'s base or more than
    /// `MAX_OFFSET` above it (`ci` not full). Such a sector is before the
    /// chunk's first or after its last (between them it would be within the
    /// chunk's span, which fits). The base moves to the lower of the first
    /// sector and `sector` if the span with `sector` fits; otherwise
    /// `sector` goes into a chunk of its own before or after chunk `ci`.
    #[cold]
    #[inline(never)]
    fn insert_out_of_range(&mut self, (ci, pos): Place, sector: Sector, slot: u32) {
        debug_assert!(pos == 0 || pos == self.len(ci));
        let low = sector.min(self.sector_at((ci, 0)));
        if sector.max(self.max_sectors[ci]) - low <= MAX_OFFSET {
            self.rebase(ci, low);
            return self.insert_at((ci, pos), sector, slot);
        }
        let at = if pos == 0 { ci } else { ci + 1 };
        let mut c = self.new_chunk();
        c.insert_at(0, 0, 0, slot);
        self.chunks.insert(at, c);
        self.max_sectors.insert(at, sector);
        self.bases.insert(at, sector);
        self.lens.insert(at, 1);
        if self.hint.0 >= at {
            self.hint.0 += 1;
        }
    }

    /// Asks for the lines of the chunk that holds or would hold `key` (its
    /// offset and slot lines), for a removal or insertion soon after.
    fn prefetch_place(&self, key: Packed, id_of: impl IdOf) {
        let ci = self.chunk_at_or_after(key, id_of);
        if let Some(c) = self.chunks.get(ci) {
            c.prefetch_offsets(self.len(ci));
            c.prefetch_slots(self.len(ci));
        }
    }

    /// Where `key` is: (chunk, position).
    #[inline(always)]
    fn find(&self, key: Packed, id_of: impl IdOf) -> Option<Place> {
        let (hc, hp) = self.hint;
        if self.lens.get(hc).is_some_and(|&n| hp < n as usize) && self.is_at((hc, hp), key, id_of) {
            return Some((hc, hp));
        }
        let ci = self.chunk_at_or_after(key, id_of);
        self.chunks.get(ci)?;
        let pos = self.pos(ci, key, id_of);
        self.is_at((ci, pos), key, id_of).then_some((ci, pos))
    }

    /// Removes `key`; returns its slot and the next entry's sector and
    /// slot (its id is left to a caller that wants it: reading it would be
    /// a miss in a big queue).
    #[cfg(test)]
    fn remove(&mut self, key: Packed, id_of: impl IdOf) -> Option<(u32, Option<(Sector, u32)>)> {
        let at = self.find(key, id_of)?;
        Some(self.remove_at(at))
    }

    /// Removes the entry at `(ci, pos)` (a place [`SortedIndex::find`]
    /// returned); returns its slot and the next entry's sector and slot.
    #[inline]
    fn remove_at(&mut self, (ci, pos): Place) -> (u32, Option<(Sector, u32)>) {
        let n = self.len(ci) - 1;
        let c = &mut self.chunks[ci];
        let slot = c.remove_at(pos, n + 1);
        self.lens[ci] = n as u8;
        let next = if pos < n {
            Some((self.bases[ci] + c.offsets[pos] as Sector, c.slots[pos]))
        } else {
            self.chunks
                .get(ci + 1)
                .map(|d| (self.bases[ci + 1] + d.offsets[0] as Sector, d.slots[0]))
        };
        self.hint = (ci + (pos == n) as usize, 0);
        if n == 0 {
            let c = self.chunks.remove(ci);
            self.max_sectors.remove(ci);
            self.bases.remove(ci);
            self.lens.remove(ci);
            self.keep_spare(c);
            self.hint = (ci, 0);
        } else {
            if pos < n {
                self.hint = (ci, pos);
            }
            if pos == n {
                self.max_sectors[ci] = self.sector_at((ci, n - 1));
            }
            // Keep chunks from thinning out: merge a small one into its
            // successor when both fit (in length and in offsets from its base).
            if n < CHUNK / 8
                && self.lens.get(ci + 1).is_some_and(|&m| n + m as usize <= CHUNK / 2)
                && self.max_sectors[ci + 1] - self.bases[ci] <= MAX_OFFSET
            {
                let m = self.len(ci + 1);
                let next = self.chunks.remove(ci + 1);
                let max = self.max_sectors.remove(ci + 1);
                let delta = self.bases.remove(ci + 1).wrapping_sub(self.bases[ci]) as u32;
                self.lens.remove(ci + 1);
                self.chunks[ci].append(n, &next, m, delta);
                self.lens[ci] = (n + m) as u8;
                self.max_sectors[ci] = max;
                self.keep_spare(next);
                self.hint = (ci, pos);
            }
        }
        (slot, next)
    }

    /// The slot of the key `ahead` places after the hinted one, if it is in
    /// the same chunk.
    #[inline]
    fn slot_after_hint(&self, ahead: usize) -> Option<u32> {
        let (hc, hp) = self.hint;
        let c = self.chunks.get(hc)?;
        (hp + ahead < self.len(hc)).then(|| c.slots[hp + ahead])
    }

    fn get(&self, key: Packed, id_of: impl IdOf) -> Option<u32> {
        self.find(key, id_of).map(|(ci, pos)| self.chunks[ci].slots[pos])
    }

    /// The hinted place, if it holds the first key at or after `key` (the
    /// key there is at or after `key` and the one before it is not): an
    /// elevator asks for the request after the one it just removed, which
    /// the hint already points at, and is answered without a search.
    #[inline]
    fn hinted_lower_bound(&self, key: Packed, id_of: impl IdOf) -> Option<Place> {
        let (hc, hp) = self.hint;
        if hp >= *self.lens.get(hc)? as usize || self.less_at((hc, hp), key, id_of) {
            return None;
        }
        let before_is_less = if hp > 0 {
            self.less_at((hc, hp - 1), key, id_of)
        } else {
            hc == 0 || self.max_before(hc - 1, key, id_of)
        };
        before_is_less.then_some((hc, hp))
    }

    /// Where the first key at or after `key` is, from the hint or one
    /// search ([`Self::searched_place`]'s `for_insertion`).
    #[inline]
    fn place_at_or_after(&self, key: Packed, id_of: impl IdOf, for_insertion: bool) -> Option<Place> {
        if let Some(at) = self.hinted_lower_bound(key, id_of) {
            return Some(at);
        }
        self.searched_place(key, id_of, for_insertion)
    }

    /// Where the first key at or after `key` is, from one search. With
    /// `for_insertion`, a big queue's chunk has its slot lines asked for
    /// with its sector lines: an insertion there moves them, and would
    /// otherwise wait for them after the search's own wait.
    #[inline(always)]
    fn searched_place(&self, key: Packed, id_of: impl IdOf, for_insertion: bool) -> Option<Place> {
        let ci = self.chunk_at_or_after(key, id_of);
        let c = self.chunks.get(ci)?;
        if for_insertion && self.chunks.len() > COLD_CHUNKS {
            c.prefetch_slots(self.len(ci));
        }
        Some((ci, self.pos(ci, key, id_of)))
    }

    /// The sector of the first key at or after `key` (no slot read when
    /// `key`'s id is 0).
    fn sector_at_or_after(&self, key: Packed, id_of: impl IdOf) -> Option<Sector> {
        self.place_at_or_after(key, id_of, false).map(|at| self.sector_at(at))
    }

    fn at_or_after(&self, key: Packed, id_of: impl IdOf) -> Option<u32> {
        self.place_at_or_after(key, id_of, false)
            .map(|(ci, pos)| self.chunks[ci].slots[pos])
    }

    /// Where the last key before `key` and the first at or after it are,
    /// from the hint or one search.
    #[inline]
    fn around(&self, key: Packed, id_of: impl IdOf) -> (Option<Place>, Option<Place>) {
        if let Some(at) = self.hinted_lower_bound(key, id_of) {
            return (self.place_before(at), Some(at));
        }
        let ci = self.chunk_at_or_after(key, id_of);
        match self.chunks.get(ci) {
            // Chunk `ci`'s last key is at or after `key`, so the position is inside the chunk.
            Some(_) => {
                let at = (ci, self.pos(ci, key, id_of));
                (self.place_before(at), Some(at))
            }
            None => (ci.checked_sub(1).and_then(|c| self.last_place(c)), None),
        }
    }

    /// Where the key before the one at `(ci, pos)` is.
    #[inline(always)]
    fn place_before(&self, (ci, pos): Place) -> Option<Place> {
        if pos > 0 {
            Some((ci, pos - 1))
        } else {
            ci.checked_sub(1).and_then(|c| self.last_place(c))
        }
    }

    /// Where chunk `ci`'s last key is.
    #[inline(always)]
    fn last_place(&self, ci: usize) -> Option<Place> {
        self.lens.get(ci).map(|&n| (ci, n as usize - 1))
    }

    fn after(&self, key: Packed, id_of: impl IdOf) -> Option<u32> {
        // Keys are distinct integers: strictly after `key` is at or after `key + 1`.
        self.at_or_after(key.checked_add(1)?, id_of)
    }

    fn before(&self, key: Packed, id_of: impl IdOf) -> Option<u32> {
        self.around(key, id_of).0.map(|(ci, pos)| self.chunks[ci].slots[pos])
    }

    fn first(&self) -> Option<u32> {
        self.chunks.first().map(|c| c.slots[0])
    }

    /// Sectors and slots in key order.
    fn iter(&self) -> impl Iterator<Item = (Sector, u32)> + '_ {
        self.chunks
            .iter()
            .zip(&self.lens)
            .zip(&self.bases)
            .flat_map(|((c, &n), &base)| {
                let n = n as usize;
                c.offsets[..n]
                    .iter()
                    .map(move |&o| base + o as Sector)
                    .zip(c.slots[..n].iter().copied())
            })
    }
}

/// A queued request: its deadline and its deque sequence number (`LATE`
/// if it is in `late`). One cache line each.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct Slot {
    rq: Request,
    deadline: Nanos,
    seq: u64,
}

/// Where a queued request of a [`SortedFifo`] is: its sector and its slot,
/// so that a scheduler can compare sectors now and read the request later
/// ([`SortedFifo::request_at`]), once a prefetch of its slot has arrived.
/// It names that request only while the request stays queued: the slot is
/// reused after it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// The request's first sector.
    pub sector: Sector,
    slot: u32,
}

/// Requests kept both in sector order and in FIFO (deadline) order.
///
/// The requests live in a slab of slots (reused, so no allocation per
/// request once warm) and the sector order is a `SortedIndex` of their
/// keys, at every size (a B-tree of 100,000 requests costs several cache
/// misses per level; the index's top level stays in cache and a lookup
/// touches one chunk). The FIFO is a few deques ("lanes"), each sorted by
/// deadline: deadlines are arrival time plus a fixed expiry per kind, so a
/// queue mixing sync and async expiries keeps each kind in order in a lane
/// of its own, insertion is an O(1) push, and each request remembers its
/// lane and place, so removal marks it in O(1) in the lane's bitmap;
/// marked places are dropped when they reach a lane's front. A deadline earlier than the last one of
/// every lane goes to a small B-tree beside them; the FIFO head is the
/// earliest of the fronts.
#[derive(Debug, Default, Clone)]
pub struct SortedFifo {
    slots: Vec<Slot>,
    /// Slots not in use.
    free: Vec<u32>,
    by_sector: SortedIndex,
    len: usize,
    /// Deadline-ordered deques (one per expiry in use, for the usual two).
    lanes: [Lane; LANES],
    /// Out-of-order entries: (deadline, id) → slot.
    late: BTreeMap<(Nanos, RequestId), u32>,
}

/// Deadline-ordered deques a [`SortedFifo`] keeps: sync and async expiries.
const LANES: usize = 2;

/// One deadline-ordered deque of a [`SortedFifo`].
#[derive(Debug, Default, Clone)]
struct Lane {
    /// Deque entry `seq − base`: the slot of the request pushed `seq`-th
    /// (read at the front and written at the back only).
    fifo: VecDeque<u32>,
    /// One bit per entry, set once the request has left the queue: bit
    /// `seq % 64` of word `seq / 64 − base / 64`. A removal in the middle
    /// sets a bit in this map, an eighth of a byte an entry, which stays in
    /// cache where a random place in `fifo` would be a miss in a big queue.
    removed: VecDeque<u64>,
    base: u64,
    /// The largest (deadline, id) pushed since the lane was last empty.
    last: Option<(Nanos, RequestId)>,
}

impl Lane {
    /// Appends `slot`; returns its sequence number.
    fn push(&mut self, slot: u32) -> u64 {
        let seq = self.base + self.fifo.len() as u64;
        if (seq / 64 - self.base / 64) as usize == self.removed.len() {
            self.removed.push_back(0);
        }
        self.fifo.push_back(slot);
        seq
    }

    /// The sequence number the next [`Lane::push`] returns.
    fn next_seq(&self) -> u64 {
        self.base + self.fifo.len() as u64
    }

    /// The slot of the first entry after the front that has not left the
    /// queue: the next front once the front leaves. Removed entries stay in
    /// the deque until they reach the front, and in a queue that also
    /// loses requests in sector order most of those just behind the front
    /// are removed ones (their slots reused by other requests).
    /// Looks at most two bitmap words ahead (a prefetch may give up).
    #[inline]
    fn second_live(&self) -> Option<u32> {
        let end = self.next_seq();
        let mut seq = self.base + 1;
        for _ in 0..2 {
            if seq >= end {
                return None;
            }
            let word = (seq / 64 - self.base / 64) as usize;
            // The removed entries from `seq` on, up to the word's end.
            let removed_run = (!(self.removed[word] >> (seq % 64))).trailing_zeros() as u64;
            if seq % 64 + removed_run < 64 {
                let live = seq + removed_run;
                return (live < end).then(|| self.fifo[(live - self.base) as usize]);
            }
            seq += 64 - seq % 64;
        }
        None
    }

    /// Marks the entry `seq` removed and drops the removed ones at the front.
    #[inline]
    fn blank(&mut self, seq: u64) {
        let word = (seq / 64 - self.base / 64) as usize;
        self.removed[word] |= 1 << (seq % 64);
        // The front is never a removed entry, so only the front's removal
        // lets entries go (and can empty the lane).
        if seq != self.base {
            return;
        }
        while self.removed[0] & (1 << (self.base % 64)) != 0 {
            self.fifo.pop_front();
            self.base += 1;
            if self.base.is_multiple_of(64) {
                self.removed.pop_front();
                if self.removed.is_empty() {
                    break;
                }
            }
        }
        if self.fifo.is_empty() {
            self.last = None;
        }
    }
}

/// The ids of the requests in `slots`, for a [`SortedIndex`] to order equal sectors.
#[inline]
fn id_of(slots: &[Slot]) -> impl IdOf + '_ {
    move |s: u32| slots[s as usize].rq.id
}

/// `Slot::seq` of an entry in `late`.
const LATE: u64 = u64::MAX;
/// `Slot::seq`'s lane bit: the lane is `seq >> LANE_SHIFT`.
const LANE_SHIFT: u32 = 63;

impl SortedFifo {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn rq(&self, slot: u32) -> &Request {
        &self.slots[slot as usize].rq
    }

    /// Add `rq` with FIFO expiry time `deadline` (a request with the key of
    /// one already queued replaces it).
    pub fn insert(&mut self, rq: Request, deadline: Nanos) {
        self.insert_in(rq, deadline, None);
    }

    /// Inserts `rq` with FIFO expiry time `deadline` unless a queued request
    /// has its sector and `is_alias` accepts the first of those: then
    /// nothing changes and a copy of that request is returned (AS's
    /// `as_add_arq_rb`). The search for the queued sector is also the
    /// insertion's: with no queued request at that sector, its place is
    /// where `rq` goes.
    pub fn insert_unless_alias(
        &mut self,
        rq: Request,
        deadline: Nanos,
        is_alias: impl FnOnce(&Request) -> bool,
    ) -> Option<Request> {
        let (probe, ids) = (pack((rq.sector, 0)), id_of(&self.slots));
        let at = self.by_sector.place_at_or_after(probe, ids, true);
        match at {
            Some((ci, pos)) if self.by_sector.sector_at((ci, pos)) == rq.sector => {
                let queued = self.rq(self.by_sector.chunks[ci].slots[pos]);
                if is_alias(queued) {
                    return Some(*queued);
                }
                // Equal sectors are ordered by id: the full search places it.
                self.insert(rq, deadline);
            }
            _ => {
                let place = self.by_sector.place_for_new_sector(at);
                self.insert_in(rq, deadline, place);
            }
        }
        None
    }

    /// [`SortedFifo::insert`], at `place` in the index when it is known
    /// (the place of the first key after `rq`'s, no queued key having its
    /// sector), else after a search. In line, so that each caller's
    /// `place` is a constant: `insert` has no branch on it.
    #[inline(always)]
    fn insert_in(&mut self, rq: Request, deadline: Nanos, place: Option<Place>) {
        let key = (rq.sector, rq.id);
        let order = (deadline, rq.id);
        // The lane whose last entry is the latest not after `order`, else an empty one.
        let fits = (0..LANES).filter_map(|i| self.lanes[i].last.filter(|&l| l <= order).map(|l| (l, i)));
        let lane = fits
            .max()
            .map(|(_, i)| i)
            .or_else(|| self.lanes.iter().position(|l| l.last.is_none()));
        let seq = match lane {
            Some(i) => ((i as u64) << LANE_SHIFT) | self.lanes[i].next_seq(),
            None => LATE,
        };
        let entry = Slot { rq, deadline, seq };
        let slot = self.free.last().copied().unwrap_or(self.slots.len() as u32);
        let inserted = match place {
            Some(at) => {
                self.by_sector.insert_at(at, rq.sector, slot);
                true
            }
            None => self.by_sector.insert(pack(key), slot, id_of(&self.slots)),
        };
        if !inserted {
            self.remove(key);
            return self.insert(rq, deadline);
        }
        if self.free.pop().is_some() {
            self.slots[slot as usize] = entry;
        } else {
            self.slots.push(entry);
        }
        match lane {
            Some(i) => {
                let pushed = self.lanes[i].push(slot);
                debug_assert_eq!(((i as u64) << LANE_SHIFT) | pushed, seq);
                self.lanes[i].last = Some(order);
            }
            None => {
                self.late.insert(order, slot);
            }
        }
        self.len += 1;
    }

    /// Remove the request with sort key `key`.
    pub fn remove(&mut self, key: SortKey) -> Option<Request> {
        self.take(key).map(|(rq, _)| rq)
    }

    /// Remove the request with sort key `key`; also returns the key of the
    /// request after it in sector order (as [`SortedFifo::after`] would).
    pub fn remove_next(&mut self, key: SortKey) -> Option<(Request, Option<SortKey>)> {
        let (rq, next) = self.take(key)?;
        Some((rq, next.map(|(sector, s)| (sector, self.slots[s as usize].rq.id))))
    }

    /// Removes the request with sort key `key`; also returns where the
    /// requests before and after it in sector order are (those
    /// [`SortedFifo::before`] and [`SortedFifo::after`] answer for `key`),
    /// found at the removal's own place rather than by a search each, and
    /// without reading either request: the successor's slot has only just
    /// been asked for, and reading it now would wait for it.
    pub fn remove_between(&mut self, key: SortKey) -> Option<(Option<Queued>, Request, Option<Queued>)> {
        let at = self.by_sector.find(pack(key), id_of(&self.slots))?;
        let before = self.by_sector.place_before(at).map(|at| self.queued_at(at));
        let (rq, next) = self.take_at(at);
        Some((before, rq, next.map(|(sector, slot)| Queued { sector, slot })))
    }

    /// The queued request at `at` (a place this queue returned, whose
    /// request has not left it since).
    pub fn request_at(&self, at: Queued) -> &Request {
        let rq = self.rq(at.slot);
        debug_assert_eq!(rq.sector, at.sector, "a place whose request left the queue");
        rq
    }

    /// In a big queue, asks for the slot of the request at `at`, which the
    /// caller will read soon (a removal asks for its successor's itself).
    pub fn prefetch_request(&self, at: Queued) {
        if self.slots.len() > SLOTS_IN_CACHE {
            prefetch(&self.slots[at.slot as usize]);
        }
    }

    /// Where the first request in sector order is.
    pub fn first_queued(&self) -> Option<Queued> {
        self.by_sector.chunks.first()?;
        Some(self.queued_at((0, 0)))
    }

    /// The request at index place `at`, as a [`Queued`].
    fn queued_at(&self, at: Place) -> Queued {
        let (sector, slot) = self.by_sector.entry_at(at);
        Queued { sector, slot }
    }

    /// Removes the request with sort key `key` if `take` agrees, having
    /// seen it: one search where a look followed by a removal makes two.
    /// None (and nothing changed) if it is not queued or `take` refuses.
    pub fn remove_if(&mut self, key: SortKey, take: impl FnOnce(&Request) -> bool) -> Option<Request> {
        let at = self.by_sector.find(pack(key), id_of(&self.slots))?;
        let slot = self.by_sector.chunks[at.0].slots[at.1];
        if !take(self.rq(slot)) {
            return None;
        }
        Some(self.take_at(at).0)
    }

    /// Removes the request with sort key `key`; returns it and the sector
    /// and slot of the request after it in sector order.
    fn take(&mut self, key: SortKey) -> Option<(Request, Option<(Sector, u32)>)> {
        let at = self.by_sector.find(pack(key), id_of(&self.slots))?;
        Some(self.take_at(at))
    }

    /// Removes the request at `at`, a place in the index.
    #[inline]
    fn take_at(&mut self, at: Place) -> (Request, Option<(Sector, u32)>) {
        let (slot, next) = self.by_sector.remove_at(at);
        self.free.push(slot);
        let Slot { rq, deadline, seq } = self.slots[slot as usize];
        if let Some((_, s)) = next.filter(|_| self.slots.len() > SLOTS_IN_CACHE) {
            // Deadline's next dispatch, CFQ's and AS's next look: fetch it now,
            // and the two after it (an elevator's next dispatches), so that
            // a slot whose fetch takes longer than a decision or two is
            // still in time (docs/benchmarks.md, "How the sorted queue is
            // built": in a big queue the third still gains).
            prefetch(&self.slots[s as usize]);
            for ahead in 1..=2 {
                if let Some(t) = self.by_sector.slot_after_hint(ahead) {
                    prefetch(&self.slots[t as usize]);
                }
            }
        }
        self.len -= 1;
        if seq == LATE {
            self.late.remove(&(deadline, rq.id));
        } else {
            let (lane, seq) = ((seq >> LANE_SHIFT) as usize, seq & !(1 << LANE_SHIFT));
            let was_front = self.lanes[lane].base == seq;
            self.lanes[lane].blank(seq);
            if was_front && self.by_sector.chunks.len() > COLD_CHUNKS {
                self.prefetch_next_fifo_heads(lane);
            }
        }
        (rq, next)
    }

    /// After the front of `lane` left, asks for what the removal of the
    /// new front will read: its place in the index (its slot was asked
    /// for when it became second, so reading its key costs little), and
    /// the slot of the request after it. A big queue whose FIFO heads have
    /// expired (a deadline scheduler's batch start, iShare's dispatch)
    /// removes requests in arrival order, each at a random place: without
    /// this, its slot and then its chunk would be two misses one after
    /// the other at every such removal.
    fn prefetch_next_fifo_heads(&self, lane: usize) {
        let l = &self.lanes[lane];
        if let Some(&s) = l.fifo.front() {
            let rq = &self.slots[s as usize].rq;
            self.by_sector.prefetch_place(pack(key(rq)), id_of(&self.slots));
        }
        if let Some(t) = l.second_live() {
            prefetch(&self.slots[t as usize]);
        }
    }

    /// The FIFO head: the request with the earliest deadline, and that deadline.
    pub fn fifo_head(&self) -> Option<(Nanos, &Request)> {
        // A lane's front is never removed (removed entries are dropped as they reach it).
        let fronts = self.lanes.iter().filter_map(|l| {
            l.fifo.front().map(|&s| {
                let e = &self.slots[s as usize];
                ((e.deadline, e.rq.id), s)
            })
        });
        let late = self.late.iter().next().map(|(&o, &s)| (o, s));
        let (o, s) = fronts.chain(late).min()?;
        Some((o.0, self.rq(s)))
    }

    /// The FIFO deadline of the queued request with sort key `key`.
    pub fn deadline(&self, key: SortKey) -> Option<Nanos> {
        self.by_sector
            .get(pack(key), id_of(&self.slots))
            .map(|s| self.slots[s as usize].deadline)
    }

    /// The sort keys of the last request before `key` and of the first at
    /// or after it, from one search of the index (the ids are read from
    /// the two requests' slots; [`SortedFifo::around_sectors`] reads none).
    pub fn around_keys(&self, key: SortKey) -> (Option<SortKey>, Option<SortKey>) {
        let (b, a) = self.by_sector.around(pack(key), id_of(&self.slots));
        let k = |at: Place| unpack(self.by_sector.key_at(at, id_of(&self.slots)));
        (b.map(k), a.map(k))
    }

    /// The sectors of the last request before `(sector, 0)` and of the
    /// first at or after it, from one search of the index alone (no request
    /// slot is touched: in a big queue each would be a cache miss).
    #[inline]
    pub fn around_sectors(&self, sector: Sector) -> (Option<Sector>, Option<Sector>) {
        let (b, a) = self.by_sector.around(pack((sector, 0)), id_of(&self.slots));
        let s = |at: Place| self.by_sector.sector_at(at);
        (b.map(s), a.map(s))
    }

    /// The sector of the first request at or after `(sector, 0)` in sector
    /// order, from the index alone (as [`SortedFifo::around_sectors`]): a
    /// caller that only compares sectors reads no request slot, which in a
    /// big queue would be a cache miss.
    pub fn sector_at_or_after(&self, sector: Sector) -> Option<Sector> {
        self.by_sector.sector_at_or_after(pack((sector, 0)), id_of(&self.slots))
    }

    /// The sort key of the first request in sector order.
    pub fn first_key(&self) -> Option<SortKey> {
        self.by_sector.first().map(|s| key(self.rq(s)))
    }

    /// The first request at or after `key` in sector order.
    pub fn at_or_after(&self, key: SortKey) -> Option<&Request> {
        self.by_sector
            .at_or_after(pack(key), id_of(&self.slots))
            .map(|s| self.rq(s))
    }

    /// The first request strictly after `key` in sector order.
    pub fn after(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.after(pack(key), id_of(&self.slots)).map(|s| self.rq(s))
    }

    /// The last request strictly before `key` in sector order.
    pub fn before(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.before(pack(key), id_of(&self.slots)).map(|s| self.rq(s))
    }

    /// The request with the lowest sector.
    pub fn first(&self) -> Option<&Request> {
        self.by_sector.first().map(|s| self.rq(s))
    }

    /// The request with key `key`.
    pub fn get(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.get(pack(key), id_of(&self.slots)).map(|s| self.rq(s))
    }

    /// Whether a request with key `key` is queued.
    pub fn contains(&self, key: SortKey) -> bool {
        self.get(key).is_some()
    }

    fn get_mut(&mut self, key: SortKey) -> Option<&mut Request> {
        let s = self.by_sector.get(pack(key), id_of(&self.slots))?;
        Some(&mut self.slots[s as usize].rq)
    }

    /// The block layer's back merge into this queue (see
    /// [`hvio_core::Scheduler::back_merge`]): the queued request nearest
    /// below `rq` grows by `rq.sectors` when [`back_mergeable`] allows it.
    /// It keeps its sort key and FIFO deadline. Returns its id.
    pub fn back_merge(&mut self, rq: &Request, max_sectors: u32) -> Option<RequestId> {
        let prev = *self.before((rq.sector, 0))?;
        if !back_mergeable(&prev, rq, max_sectors) {
            return None;
        }
        let q = self.get_mut(key(&prev))?;
        q.sectors += rq.sectors;
        Some(q.id)
    }

    /// Requests in sector order.
    pub fn iter(&self) -> impl Iterator<Item = &Request> + '_ {
        self.by_sector.iter().map(|(_, s)| self.rq(s))
    }

    /// Remove every request, in sector order ([`Scheduler::take_queued`]).
    ///
    /// [`Scheduler::take_queued`]: hvio_core::Scheduler::take_queued
    pub fn take_all(&mut self) -> Vec<Request> {
        let all = self.iter().copied().collect();
        *self = SortedFifo::new();
        all
    }
}

/// Whether `rq` may be appended to the queued request `prev`
/// (`elv_rq_merge_ok` and `ll_back_merge_fn`): both reads or both writes
/// (not flushes or discards), the same sync flag (CFQ's
/// `cfq_allow_merge`), neither FUA, `prev` ends where `rq` starts, and the
/// sum fits `max_sectors` (the queue's `max_sectors_kb`).
pub fn back_mergeable(prev: &Request, rq: &Request, max_sectors: u32) -> bool {
    matches!(rq.op, hvio_core::Op::Read | hvio_core::Op::Write)
        && prev.op == rq.op
        && prev.sync == rq.sync
        && !prev.fua
        && !rq.fua
        && rq.sectors > 0
        && prev.end() == rq.sector
        && prev.sectors as u64 + rq.sectors as u64 <= max_sectors as u64
}

/// The sort key of a request.
pub fn key(rq: &Request) -> SortKey {
    (rq.sector, rq.id)
}

/// The think-time estimate CFQ, AS and BFQ share: a fixed-point EWMA with
/// weight 7/8 on history (`samples = (7s+256)/8`, `total = (7t+256x)/8`,
/// `mean = (total+128)/samples`), the gap between the end of a stream's last
/// request and the arrival of its next one, each sample clamped to `cap`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThinkTime {
    /// When the stream's last request completed.
    pub last_end: Nanos,
    /// The decayed sample count (fixed point, 256 = one sample).
    pub samples: u64,
    /// The decayed sum of samples (fixed point).
    pub total: u64,
    /// The mean think time, ns.
    pub mean: Nanos,
}

impl ThinkTime {
    /// No history, the last request ending at `now`.
    pub fn new(now: Nanos) -> Self {
        ThinkTime {
            last_end: now,
            ..Self::default()
        }
    }

    /// A request arrives at `now`: record the think time since `last_end`.
    pub fn sample(&mut self, now: Nanos, cap: Nanos) {
        self.add(now.saturating_sub(self.last_end).min(cap));
    }

    /// Fold one think-time sample into the average.
    pub fn add(&mut self, elapsed: Nanos) {
        self.samples = (7 * self.samples + 256) / 8;
        self.total = (7 * self.total + 256 * elapsed) / 8;
        self.mean = (self.total + 128) / self.samples;
    }

    /// Linux's `sample_valid`: enough history to trust the mean (> 80, i.e.
    /// after three samples).
    pub fn valid(&self) -> bool {
        self.samples > 80
    }
}

/// The last 32 requests' seekiness as a bitmap (CFQ's and BFQ's
/// `seek_history`): a request is a seek when it starts farther than
/// `threshold` sectors from where the stream's previous request ended (on a
/// non-rotational device: when it is smaller than `small` sectors).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeekHistory {
    /// One bit per request, the newest lowest; set for a seek.
    pub bits: u32,
    /// End of the previous request (0 = none yet, as in Linux).
    pub last_pos: Sector,
}

impl SeekHistory {
    /// Records request `rq`: a seek or not, by the rules above.
    pub fn record(&mut self, rq: &Request, rotational: bool, threshold: Sector, small: u32) {
        let dist = if self.last_pos != 0 {
            self.last_pos.abs_diff(rq.sector)
        } else {
            0
        };
        let seek = if rotational {
            dist > threshold
        } else {
            rq.sectors < small
        };
        self.bits = (self.bits << 1) | seek as u32;
        self.last_pos = rq.end();
    }

    /// More than 4 of the last 32 requests were seeks.
    pub fn seeky(&self) -> bool {
        self.bits.count_ones() > 32 / 8
    }
}

/// `a · b / c` computed in 128 bits, saturating at `u64::MAX`: tunables are
/// user input (up to 1e7 ms = 1e13 ns) and weights up to 10000, so their
/// products can exceed 64 bits where Linux's own u64 arithmetic would wrap.
/// Equal to `a * b / c` whenever that does not overflow. `c` must be positive.
pub fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    u64::try_from(a as u128 * b as u128 / c.max(1) as u128).unwrap_or(u64::MAX)
}

/// A wake-up time for `Dispatch::WaitUntil`: `t` if it is in the future,
/// else `now + fallback` (at least 1 ns later). Used when a scheduler waits
/// for in-flight requests to complete and has no timer of its own: the
/// driver calls it again on the completion anyway.
pub fn wake_at(now: Nanos, t: Option<Nanos>, fallback: Nanos) -> Nanos {
    match t {
        Some(t) if t > now => t,
        _ => now + fallback.max(1),
    }
}

/// The one-way elevator with short, penalised backward seeks that AS's and
/// CFQ's `choose_req` implement: from `last` (where the previous request of
/// this queue ended), take the nearest request ahead, unless one behind by at
/// most `back_max` sectors costs less at `penalty`× its distance; when every
/// request lies further behind, wrap to the lowest sector. `prefer` may
/// decide between the forward and the backward candidate first
/// (`Some(true)` = forward), as CFQ prefers sync and metadata requests.
pub fn elevator_next(
    q: &SortedFifo,
    last: Sector,
    back_max: Sector,
    penalty: u64,
    prefer: impl Fn(&Request, &Request) -> Option<bool>,
) -> Option<&Request> {
    let fwd = q.at_or_after((last, 0));
    let back = q.before((last, 0)).filter(|r| r.sector + back_max >= last);
    match (fwd, back) {
        (Some(f), Some(b)) => {
            let forward = prefer(f, b).unwrap_or_else(|| (last - b.sector) * penalty >= f.sector - last);
            Some(if forward { f } else { b })
        }
        (Some(f), None) => Some(f),
        (None, Some(b)) => Some(b),
        (None, None) => q.first(),
    }
}

#[cfg(test)]
mod sorted_fifo_tests {
    use super::*;
    use hvio_core::Op;
    use proptest::prelude::*;

    proptest! {
        /// Against a plain model: any mix of inserts (deadlines in or out of
        /// order) and removals keeps the FIFO head the earliest (deadline, id)
        /// and the sector order intact.
        #[test]
        fn matches_a_model(ops in prop::collection::vec((any::<bool>(), 0u64..64, 0u64..1000, any::<prop::sample::Index>()), 1..200)) {
            let mut q = SortedFifo::new();
            let mut model: Vec<(Nanos, RequestId, Sector)> = Vec::new();
            for (id, (ins, sector, dl, pick)) in ops.into_iter().enumerate() {
                let id = id as u64;
                if ins || model.is_empty() {
                    q.insert(Request::new(id, 0, Op::Read, sector, 8, 0), dl);
                    model.push((dl, id, sector));
                } else {
                    let (_, rid, sec) = model.remove(pick.index(model.len()));
                    prop_assert_eq!(q.remove((sec, rid)).map(|r| r.id), Some(rid));
                }
                let want = model.iter().min_by_key(|m| (m.0, m.1)).map(|m| (m.0, m.1));
                prop_assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), want);
                prop_assert_eq!(q.len(), model.len());
                let first = model.iter().min_by_key(|m| (m.2, m.1)).map(|m| m.1);
                prop_assert_eq!(q.first().map(|r| r.id), first);
            }
        }
    }

    /// A queue that grows to thousands of requests (many chunks split) and
    /// shrinks again (chunks merged and emptied) answers every query as the
    /// model does throughout, twice over (spare chunks reused).
    #[test]
    fn big_queue_grows_and_shrinks() {
        let mut q = SortedFifo::new();
        let mut model: BTreeMap<SortKey, Nanos> = BTreeMap::new();
        let mut rng = 12345u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let check = |q: &SortedFifo, model: &BTreeMap<SortKey, Nanos>, probe: SortKey| {
            assert_eq!(q.len(), model.len());
            if probe.0.is_multiple_of(16) {
                let head = model.iter().map(|(k, &d)| (d, k.1)).min();
                assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), head);
            }
            assert_eq!(q.at_or_after(probe).map(key), model.range(probe..).next().map(|e| *e.0));
            assert_eq!(
                q.sector_at_or_after(probe.0),
                model.range(probe..).next().map(|e| e.0 .0)
            );
            assert_eq!(q.before(probe).map(key), model.range(..probe).next_back().map(|e| *e.0));
            assert_eq!(q.first().map(key), model.keys().next().copied());
            let around = (q.before(probe).map(key), q.at_or_after(probe).map(key));
            assert_eq!(q.around_keys(probe), around);
            assert_eq!(
                q.around_sectors(probe.0),
                (around.0.map(|k| k.0), around.1.map(|k| k.0))
            );
            assert_eq!(q.first_key(), q.first().map(key));
        };
        let mut id = 0;
        for round in 0..2 {
            while model.len() < 5000 {
                let r = next();
                let (sector, dl) = (r % 100_000, (id + r % 3 * 1000) / 4);
                q.insert(Request::new(id, 0, Op::Read, sector, 8, 0), dl);
                model.insert((sector, id), dl);
                id += 1;
                check(&q, &model, (next() % 100_000, 0));
            }
            assert!(q.by_sector.chunks.len() > 5000 / CHUNK, "round {round}");
            while model.len() > 500 {
                let probe = (next() % 100_000, 0);
                let k = *model.range(probe..).next().or(model.iter().next()).unwrap().0;
                let want_next = model
                    .range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded))
                    .next()
                    .map(|e| *e.0);
                if probe.0 % 2 == 0 {
                    assert_eq!(q.remove_next(k).map(|(r, n)| (r.id, n)), Some((k.1, want_next)));
                } else {
                    let want_before = model.range(..k).next_back().map(|e| *e.0);
                    let got = q.remove_between(k).map(|(b, r, n)| {
                        let key_of = |at: Queued| key(q.request_at(at));
                        (b.map(key_of), r.id, n.map(key_of))
                    });
                    assert_eq!(got, Some((want_before, k.1, want_next)));
                }
                model.remove(&k);
                check(&q, &model, probe);
            }
            assert!(q.by_sector.chunks.len() <= 500 / (CHUNK / 8) + 1, "round {round}");
        }
    }

    proptest! {
        /// `insert_unless_alias` against a model: with sectors from a small
        /// range (many aliases), ids out of order and queues of up to
        /// thousands of requests (many chunks, searches from the hint, the
        /// last chunk and the chunk list), it returns the first queued
        /// request at the new one's sector when `is_alias` accepts it and
        /// changes nothing, else inserts as `insert` does.
        #[test]
        fn insert_unless_alias_matches_a_model(
            ops in prop::collection::vec((0u64..3000, any::<bool>(), 0u8..4), 1..3000),
            span in prop::sample::select(vec![64u64, 4096, 1 << 40]),
        ) {
            let mut q = SortedFifo::new();
            let mut model: BTreeMap<SortKey, Nanos> = BTreeMap::new();
            for (n, (r, accept, what)) in ops.into_iter().enumerate() {
                let n = n as u64;
                let sector = r * span / 3000;
                match what {
                    0 if !model.is_empty() => {
                        // An elevator's removal: the first key at or after the sector.
                        let k = *model.range((sector, 0)..).next().or(model.iter().next()).unwrap().0;
                        prop_assert_eq!(q.remove(k).map(|r| r.id), Some(k.1));
                        model.remove(&k);
                    }
                    _ => {
                        // Ids mostly rising, every fourth one below all before it.
                        let id = if n % 4 == 3 { 1_000_000 - n } else { 1_000_000 + n };
                        let got = q.insert_unless_alias(Request::new(id, 0, Op::Read, sector, 8, 0), n, |_| accept);
                        let first_there = model.range((sector, 0)..(sector + 1, 0)).next().map(|e| *e.0);
                        match first_there.filter(|_| accept) {
                            Some(k) => prop_assert_eq!(got.map(|r| key(&r)), Some(k)),
                            None => {
                                prop_assert!(got.is_none());
                                model.insert((sector, id), n);
                            }
                        }
                    }
                }
                prop_assert_eq!(q.len(), model.len());
            }
            prop_assert_eq!(q.iter().map(key).collect::<Vec<_>>(), model.keys().copied().collect::<Vec<_>>());
            let head = model.iter().map(|(k, &d)| (d, k.1)).min();
            prop_assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), head);
        }
    }

    /// Hundreds of requests at one sector, arriving out of id order, span
    /// several chunks: the index orders them by id (read from their slots)
    /// across chunk boundaries, and every query with an id inside the run
    /// finds its place, as a B-tree of whole keys does.
    #[test]
    fn a_long_run_of_equal_sectors_keeps_id_order() {
        let mut q = SortedFifo::new();
        let mut model: BTreeMap<SortKey, ()> = BTreeMap::new();
        for n in 0..600u64 {
            let id = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_003;
            let sector = if n % 4 == 3 { n } else { 500 };
            q.insert(Request::new(id, 0, Op::Read, sector, 8, 0), n);
            model.insert((sector, id), ());
        }
        assert!(q.by_sector.chunks.len() > 4);
        assert_eq!(
            q.iter().map(key).collect::<Vec<_>>(),
            model.keys().copied().collect::<Vec<_>>()
        );
        for probe in (0..1_000_010).step_by(9_973).map(|id| (500, id)) {
            assert_eq!(q.at_or_after(probe).map(key), model.range(probe..).next().map(|e| *e.0));
            assert_eq!(q.before(probe).map(key), model.range(..probe).next_back().map(|e| *e.0));
            assert_eq!(q.around_keys(probe).1, model.range(probe..).next().map(|e| *e.0));
        }
        // Remove every other request of the run (first come, first served), then all.
        let run: Vec<SortKey> = model.keys().filter(|k| k.0 == 500).copied().collect();
        for k in run.iter().step_by(2) {
            let want_next = model
                .range((std::ops::Bound::Excluded(*k), std::ops::Bound::Unbounded))
                .next()
                .map(|e| *e.0);
            assert_eq!(q.remove_next(*k).map(|(r, n)| (key(&r), n)), Some((*k, want_next)));
            model.remove(k);
            assert!(!q.contains(*k));
        }
        assert_eq!(
            q.iter().map(key).collect::<Vec<_>>(),
            model.keys().copied().collect::<Vec<_>>()
        );
        for k in model.keys() {
            assert_eq!(q.get(*k).map(key), Some(*k));
        }
    }

    /// Sync and async requests (two fixed expiries, arriving interleaved)
    /// each keep to a lane of their own: nothing goes to the out-of-order
    /// tree, and the FIFO head is the earliest deadline throughout.
    #[test]
    fn two_expiries_keep_to_their_lanes() {
        let mut q = SortedFifo::new();
        let mut model: BTreeMap<(Nanos, RequestId), SortKey> = BTreeMap::new();
        for id in 0..3000u64 {
            let now = id * 10;
            let dl = now + if id % 3 == 0 { 250 } else { 125 };
            let sector = id.wrapping_mul(0x9E37_79B9) % 100_000;
            q.insert(Request::new(id, 0, Op::Read, sector, 8, now), dl);
            model.insert((dl, id), (sector, id));
            if id % 2 == 1 {
                // Dispatch the FIFO head every other time, a sector-order pick otherwise.
                let (&o, &k) = if id % 4 == 1 {
                    model.iter().next().unwrap()
                } else {
                    model
                        .iter()
                        .find(|(_, k)| k.0 >= sector)
                        .or(model.iter().next())
                        .unwrap()
                };
                q.remove(k).unwrap();
                model.remove(&o);
            }
            assert!(q.late.is_empty(), "request {id} went out of order");
            assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), model.keys().next().copied());
            assert_eq!(q.deadline((sector, id)), model.get(&(dl, id)).map(|_| dl));
        }
    }

    /// `remove_if` removes the request only when its test agrees, and
    /// otherwise leaves the queue as it was.
    #[test]
    fn remove_if_removes_only_what_its_test_accepts() {
        let mut q = SortedFifo::new();
        for id in 0..300u64 {
            q.insert(Request::new(id, 0, Op::Read, id * 7 % 101, 8, 0), id);
        }
        let before: Vec<SortKey> = q.iter().map(key).collect();
        assert_eq!(q.remove_if((7, 2), |_| true), None, "not queued");
        assert_eq!(q.remove_if((14, 2), |r| r.id == 3), None, "refused");
        assert_eq!(q.iter().map(key).collect::<Vec<_>>(), before);
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((0, 0)));
        assert_eq!(q.remove_if((0, 0), |r| r.arrival == 0).map(|r| r.id), Some(0));
        assert_eq!(q.remove_if((14, 2), |r| r.id == 2).map(|r| r.id), Some(2));
        assert_eq!(q.len(), 298);
        assert!(!q.contains((14, 2)) && q.contains((21, 3)));
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((1, 1)));
    }

    /// A lane's next front is found past the removed entries behind its
    /// front, within two bitmap words.
    #[test]
    fn second_live_skips_removed_entries() {
        let mut l = Lane::default();
        for slot in 0..200u32 {
            l.push(slot);
        }
        assert_eq!(l.second_live(), Some(1));
        for seq in 1..=100 {
            l.blank(seq);
        }
        assert_eq!(l.second_live(), Some(101));
        l.blank(0);
        assert_eq!(l.fifo.front(), Some(&101));
        assert_eq!(l.second_live(), Some(102));
        for seq in 102..200 {
            l.blank(seq);
        }
        assert_eq!(l.second_live(), None);
    }

    #[test]
    fn fifo_front_skips_removed_requests_and_keeps_deadline_order() {
        let mut q = SortedFifo::new();
        for (id, sector, dl) in [(1u64, 300u64, 10u64), (2, 100, 20), (3, 200, 30)] {
            q.insert(Request::new(id, 0, Op::Read, sector, 8, 0), dl);
        }
        // Out of order deadline goes to its place.
        q.insert(Request::new(4, 0, Op::Read, 50, 8, 0), 15);
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((10, 1)));
        q.remove((100, 2)).unwrap();
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((10, 1)));
        q.remove((300, 1)).unwrap();
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((15, 4)));
        q.remove((50, 4)).unwrap();
        // Request 2's stale entry was dropped on the way.
        assert_eq!(q.fifo_head().map(|(d, r)| (d, r.id)), Some((30, 3)));
        assert_eq!(q.first().map(|r| r.id), Some(3));
        q.remove((200, 3)).unwrap();
        assert!(q.fifo_head().is_none() && q.is_empty());
    }
}

#[cfg(test)]
mod sorted_index_tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// The three binary searches agree with `partition_point` on sorted
        /// keys (with repeats), for probes inside, between and outside them.
        #[test]
        fn searches_match_partition_point(mut keys in prop::collection::vec(0u128..200, 0..64), probes in prop::collection::vec(0u128..210, 1..20)) {
            keys.sort_unstable();
            for k in probes {
                let want = keys.partition_point(|&x| x < k);
                prop_assert_eq!(lower_bound(&keys, k), want);
                prop_assert_eq!(lower_bound_steps::<{ CHUNK.ilog2() }, u128>(&keys, k), want);
                prop_assert_eq!(lower_bound_steps::<16, u128>(&keys, k), want);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Against a B-tree, over enough keys to split and merge chunks: every
        /// ordered query (at or after, after, before, first, get) and the order.
        /// Sectors `scale` apart put keys more than 2^32 apart in one chunk
        /// (moved bases, chunks of their own, merges refused).
        #[test]
        fn matches_a_btree(
            ops in prop::collection::vec((0u8..4, 0u64..600, any::<prop::sample::Index>()), 1..3000),
            scale in prop::sample::select(vec![1u64, 1 << 23, 1 << 26, 1 << 40]),
        ) {
            let mut ix = SortedIndex::default();
            // Slot n holds the key inserted at step n, whose id is n % 7.
            let id = |s: u32| s as u64 % 7;
            let mut model: BTreeMap<SortKey, u32> = BTreeMap::new();
            // The key after the last one removed: op 3 removes it next, as an elevator does (the hint).
            let mut after_removed: Option<SortKey> = None;
            for (n, (op, sector, pick)) in ops.into_iter().enumerate() {
                let sector = sector * scale;
                let key = (sector, n as u64 % 7);
                if (op == 1 || op == 2) || model.is_empty() {
                    if let std::collections::btree_map::Entry::Vacant(e) = model.entry(key) {
                        e.insert(n as u32);
                        prop_assert!(ix.insert(pack(key), n as u32, id));
                    }
                } else {
                    let k = match after_removed.filter(|k| op == 3 && model.contains_key(k)) {
                        Some(k) => k,
                        None => *model.keys().nth(pick.index(model.len())).unwrap(),
                    };
                    let want_next = model.range((std::ops::Bound::Excluded(k), std::ops::Bound::Unbounded)).next().map(|e| (*e.0, *e.1));
                    prop_assert_eq!(ix.remove(pack(k), id), model.remove(&k).map(|s| (s, want_next.map(|(k, s)| (k.0, s)))));
                    after_removed = want_next.map(|(k, _)| k);
                }
                if let Some(k) = after_removed.filter(|k| model.contains_key(k)) {
                    prop_assert_eq!(unpack(ix.key_at(ix.hint, id)), k, "the hint follows the key after the last removal");
                }
                let probe = (sector, 3);
                if let Some(&k) = model.keys().next() {
                    prop_assert!(!ix.insert(pack(k), 0, id), "a present key is not inserted twice");
                }
                let probe_p = pack(probe);
                prop_assert_eq!(ix.at_or_after(probe_p, id), model.range(probe..).next().map(|e| *e.1));
                prop_assert_eq!(ix.after(probe_p, id), model.range((std::ops::Bound::Excluded(probe), std::ops::Bound::Unbounded)).next().map(|e| *e.1));
                prop_assert_eq!(ix.before(probe_p, id), model.range(..probe).next_back().map(|e| *e.1));
                prop_assert_eq!(ix.get(probe_p, id), model.get(&probe).copied());
                let lowest = (sector, 0);
                prop_assert_eq!(ix.sector_at_or_after(pack(lowest), id), model.range(lowest..).next().map(|e| e.0 .0));
                prop_assert_eq!(ix.first(), model.values().next().copied());
                prop_assert_eq!(ix.lens.len(), ix.chunks.len());
                prop_assert!(ix.lens.iter().all(|&n| n > 0 && n as usize <= CHUNK));
                let lasts: Vec<Sector> = (0..ix.chunks.len()).map(|ci| ix.sector_at((ci, ix.len(ci) - 1))).collect();
                prop_assert_eq!(ix.max_sectors.clone(), lasts);
                prop_assert_eq!(ix.bases.len(), ix.chunks.len());
                for ci in 0..ix.chunks.len() {
                    let (base, first) = (ix.bases[ci], ix.sector_at((ci, 0)));
                    prop_assert!(base <= first && ix.max_sectors[ci] - base <= MAX_OFFSET, "chunk {} within its base's range", ci);
                }
            }
            prop_assert_eq!(ix.iter().map(|e| e.1).collect::<Vec<_>>(), model.values().copied().collect::<Vec<_>>());
            prop_assert_eq!(ix.iter().map(|(sector, s)| (sector, id(s))).collect::<Vec<_>>(), model.keys().copied().collect::<Vec<_>>());
        }
    }
}
