//! Address reshaping as a host-path stage (paper 001 §III, Fig. 2–4): the
//! sequentializer of `hvio-reshape` between a VM's virtio ring and the host
//! scheduler, in QEMU's place.
//!
//! A batch handed to [`Reshaper::submit`] is what QEMU takes from the ring
//! at once (§II.A; Fig. 3's "requests after VM exit"): on a VM with
//! `qemu_path`, the guest requests a thread's pass pops (those that reached
//! the host since the last pass began, [`HostPath::pass_begins`]); without
//! it, those that reach the host at one instant. Its writes are placed at
//! their region's append point and leave as at most one metadata and one
//! data write (Fig. 3).
//! Every I/O the reshaper asks for — guest data at the append points, reads
//! split across the extents they touch, cleaning reads and writes (the idle
//! class), cache flushes, log transactions and checkpoints — goes to the
//! host as the stage's own request ([`PathCx::originate`]), so the host
//! scheduler and the device see and time it like any other. A guest request
//! completes when the reshaper says so ([`PathCx::complete`]): a write once
//! its data is on the image and the table updated, without waiting for the
//! log (a FLUSH or FUA write once its transaction is durable), a read once
//! its last piece is in.

use super::*;
use hvio_reshape::{Event, IoKind, Layout, Reshaper};

/// One VM's sequentializer.
pub(crate) struct Reshape {
    /// The VM's name, for errors.
    vm: String,
    reshaper: Reshaper,
    /// Guest requests of this instant, not yet submitted.
    batch: Vec<Request>,
}

impl Reshape {
    /// A fresh reshaped image of `layout` (empty tables, every segment free).
    pub(crate) fn new(vm: &str, layout: Layout) -> Reshape {
        Reshape {
            vm: vm.to_string(),
            reshaper: Reshaper::new(layout),
            batch: Vec::new(),
        }
    }

    fn error(&self, e: impl std::fmt::Display) -> SimError {
        SimError::Other(format!("VM {}: address reshaping: {e}", self.vm))
    }

    /// The batch to the reshaper (nothing when it is empty: a pass that
    /// pops no guest request, for the stage's own I/O, brings no batch).
    fn submit_batch(&mut self, cx: &mut PathCx) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        if let Err(e) = self.reshaper.submit(&batch) {
            return Err(self.error(e));
        }
        self.drain(cx)
    }

    /// Carry out what the reshaper asks for: its I/O to the host, its
    /// completed guest requests back up.
    fn drain(&mut self, cx: &mut PathCx) -> Result<()> {
        while let Some(ev) = self.reshaper.poll() {
            match ev {
                Event::Io(io) => {
                    let mut rq = io.request(0, cx.vm as StreamId, cx.now);
                    if matches!(io.kind, IoKind::GuestWrite(_)) {
                        // QEMU writes the image with O_DIRECT (cache=none,
                        // aio=native): WRITE_ODIRECT is WRITE | REQ_SYNC, so
                        // the host scheduler sees the guest's data writes as
                        // synchronous, as on the direct path.
                        rq.sync = true;
                    }
                    cx.originate(io.id, rq)?;
                }
                Event::Done(id) => cx.complete(slot_of(id)),
                Event::Failed(id, e) => return Err(self.error(format_args!("request {id}: {e}"))),
            }
        }
        Ok(())
    }
}

impl HostPath for Reshape {
    /// The request joins the batch: on a VM with `qemu_path`, the batch
    /// is submitted when a QEMU thread's pass begins; without it, once
    /// every arrival of the instant is in.
    fn arrive(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        if self.batch.is_empty() && cx.qemu.is_none() {
            cx.wake_at(cx.now);
        }
        self.batch.push(cx.host_request(slot));
        Ok(())
    }

    fn wake(&mut self, cx: &mut PathCx) -> Result<()> {
        self.submit_batch(cx)
    }

    fn pass_begins(&mut self, cx: &mut PathCx) -> Result<()> {
        self.submit_batch(cx)
    }

    fn done(&mut self, slot: u32, cx: &mut PathCx) -> Result<()> {
        let Owner::Stage { tag } = cx.requests[slot].owner else {
            return Err(self.error(format_args!(
                "request {} reached the host without the sequentializer",
                cx.requests[slot].guest.id
            )));
        };
        if let Err(e) = self.reshaper.complete(tag) {
            return Err(self.error(e));
        }
        self.drain(cx)
    }

    /// Guest requests not yet submitted or not yet completed by the reshaper.
    fn held(&self) -> usize {
        self.batch.len() + self.reshaper.guest_outstanding()
    }

    /// The image keeps its tables, segments and log; its counters start again.
    fn restart(&mut self) {
        self.reshaper.reset_stats();
    }

    fn reshape(&self) -> Option<ReshapeResult> {
        Some(ReshapeResult {
            stats: self.reshaper.stats().clone(),
            table_extents: self.reshaper.table_extents() as u64,
            table_bytes: self.reshaper.table_bytes(),
        })
    }
}
