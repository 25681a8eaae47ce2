//! Requests in flight and who owns them.
//!
//! Every request of a run, from the guest's to the host's, has a slot here;
//! its [`Request::id`] is `(serial << SLOT_BITS) | slot`. A request is owned
//! by a guest thread (or the guest's journal or flusher), or by the VM's
//! host-path stage (I/O the stage originates, carrying the stage's tag). A
//! request the image map splits has a part per physical extent: each part's
//! `parent` is the request, whose `parts` counts the parts still in flight;
//! it completes when its last part has. Requests merged into one host request
//! (tapdisk's `io_merge`, the dom0 elevator's back merges) are linked by
//! `chain` and complete with it.

use super::*;

/// What a request in flight is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Data,
    /// The journal write of a thread's fsync; the flush follows when it completes.
    FsyncJournal,
    FsyncFlush,
    /// Periodic journal commit / metadata write-back (nobody waits).
    Journal,
    /// A page-cache read (read-ahead or a miss) for buffered jobs.
    CacheRead,
    /// A page-cache write-back; `flusher`: by the background flusher.
    CacheWrite {
        flusher: bool,
    },
}

/// Who waits for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The guest: thread `thread` of the VM (`u32::MAX` for the journal
    /// and the flusher), for `kind`.
    Guest { thread: u32, kind: Kind },
    /// The VM's host-path stage, with the stage's own tag.
    Stage { tag: u64 },
    /// A part of the request in slot `parent` (one extent of its split).
    Part { parent: u32 },
}

#[derive(Clone, Copy)]
pub(crate) struct Slot {
    pub(crate) vm: u16,
    pub(crate) owner: Owner,
    /// The request as its owner issued it (a guest request as the guest
    /// scheduler saw it, in image sectors; a part in physical sectors).
    pub(crate) guest: Request,
    /// When the application issued it.
    pub(crate) issued: Nanos,
    pub(crate) host_arrival: Nanos,
    pub(crate) host_dispatch: Nanos,
    /// The next request merged into the same host request (`NO_SLOT` for none).
    pub(crate) chain: u32,
    /// Parts still in flight, for a request sent as several.
    pub(crate) parts: u32,
    /// The host-path stage's own note on the request (blktap: its tapdisk
    /// ring slot; `NO_SLOT` for none).
    pub(crate) stage_note: u32,
}

impl Slot {
    /// A request of `owner` in VM `vm`, issued at `issued`.
    pub(crate) fn new(vm: usize, owner: Owner, rq: Request, issued: Nanos) -> Slot {
        Slot {
            vm: vm as u16,
            owner,
            guest: rq,
            issued,
            host_arrival: 0,
            host_dispatch: 0,
            chain: NO_SLOT,
            parts: 0,
            stage_note: NO_SLOT,
        }
    }
}

/// No slot (the end of a merge chain, no parent, no stage note).
pub(crate) const NO_SLOT: u32 = u32::MAX;

pub(crate) const SLOT_BITS: u32 = 20;
pub(crate) const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// The slot of request `id`.
#[inline]
pub(crate) fn slot_of(id: RequestId) -> u32 {
    (id & SLOT_MASK) as u32
}

/// Every request in flight.
#[derive(Default)]
pub(crate) struct Requests {
    slots: Vec<Slot>,
    free: Vec<u32>,
    next_id: u64,
    /// Requests allocated and not yet released.
    pub(crate) live: u64,
}

impl Requests {
    /// Give `slot` a place and its request an id; returns the slot index.
    #[inline(always)]
    pub(crate) fn alloc(&mut self, slot: Slot) -> Result<u32> {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => self.grow()?,
        };
        self.next_id += 1;
        self.live += 1;
        let s = &mut self.slots[idx as usize];
        *s = slot;
        s.guest.id = (self.next_id << SLOT_BITS) | idx as u64;
        Ok(idx)
    }

    /// A new place at the end of the table (its content is overwritten).
    #[cold]
    fn grow(&mut self) -> Result<u32> {
        if self.slots.len() as u64 > SLOT_MASK {
            return Err(SimError::Other(format!("more than {SLOT_MASK} requests outstanding")));
        }
        self.slots.push(Slot::new(
            0,
            Owner::Stage { tag: 0 },
            Request::new(0, 0, Op::Flush, 0, 0, 0),
            0,
        ));
        Ok((self.slots.len() - 1) as u32)
    }

    /// The request in `slot` is done: its place can be reused.
    pub(crate) fn release(&mut self, slot: u32) {
        self.live -= 1;
        self.free.push(slot);
    }

    /// The most requests in flight at once (the table's size).
    pub(crate) fn high_water(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The last request of the merge chain starting at `slot`.
    pub(crate) fn chain_tail(&self, mut slot: u32) -> u32 {
        while self.slots[slot as usize].chain != NO_SLOT {
            slot = self.slots[slot as usize].chain;
        }
        slot
    }
}

impl std::ops::Index<u32> for Requests {
    type Output = Slot;
    #[inline]
    fn index(&self, i: u32) -> &Slot {
        &self.slots[i as usize]
    }
}

impl std::ops::IndexMut<u32> for Requests {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut Slot {
        &mut self.slots[i as usize]
    }
}
