//! An NBD connection in its transmission phase, driven by the io_uring
//! engine thread itself (see `backend::Uring`).
//!
//! The handshake runs on the async runtime; then the socket is handed to the
//! scheduler thread, whose ring receives requests, completes disk I/O and
//! sends replies. A request thus crosses no thread: the receive completion
//! is parsed, inserted into the scheduler, dispatched to the ring, and its
//! reply is sent by the same thread — with every reply that completed in
//! the same round coalesced into one `send`.
//!
//! This type holds the connection's state; the backend owns the ring and
//! asks it what to receive into ([`RingConn::want_recv`]) and what to send
//! ([`RingConn::want_send`]), and tells it what came back.

use super::proto::*;
use super::{command_io, describe, io_buffer, request_cost, NbdExport, CONN_BUDGET};
use crate::faults::{Fault, Faults};
use crate::io::{DoneFn, IoJob, IoKind};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// Receive buffer for request headers (and small payloads that arrive with them).
const INBUF: usize = 256 * 1024;
/// Capacity of the send buffer kept after a send (larger is given back).
const KEEP_SEND_BUF: usize = 16 << 20;
/// Replies not yet taken by the kernel beyond which no more requests are
/// read (a client that sends without reading its replies).
const MAX_BACKLOG: usize = 64 << 20;

/// Replies the requests' completions appended (their `done` runs on the engine thread).
#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    /// Requests answered since the connection last looked.
    answered: usize,
    /// Their buffer bytes (`request_cost`).
    answered_bytes: usize,
}

impl Outbox {
    fn reply(&mut self, cookie: u64, error: u32, data: &[u8]) {
        self.bytes.extend_from_slice(&simple_reply(cookie, error));
        self.bytes.extend_from_slice(data);
    }
}

/// A WRITE whose payload is still arriving: received straight into its buffer.
struct Pending {
    job: IoJob,
    filled: usize,
}

/// One NBD connection served from the engine's ring.
pub struct RingConn {
    fd: OwnedFd,
    vm: usize,
    name: String,
    lim: Limits,
    max_inflight: usize,
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
    /// Payload bytes of a rejected WRITE still to drop.
    skip: u64,
    pending: Option<Pending>,
    /// Still taking requests (false after EOF, DISC, a bad magic or shutdown).
    reading: bool,
    /// Requests submitted and not yet answered.
    inflight: usize,
    /// Their buffer bytes (`request_cost`), held against `CONN_BUDGET`.
    held: usize,
    /// Parsing stopped at the in-flight or byte limit: no receive is armed
    /// until completions let it go on.
    blocked: bool,
    outbox: Arc<Mutex<Outbox>>,
    /// Bytes handed to the kernel (stable while a send is armed).
    sending: Vec<u8>,
    sent: usize,
    /// The client is gone: replies are dropped.
    broken: bool,
    recv_armed: bool,
    /// The armed receive goes into the pending WRITE's buffer, not `inbuf`.
    recv_into_pending: bool,
    send_armed: bool,
    _alive: tokio::sync::mpsc::Sender<()>,
    /// The rejection counters, the peer, and whether a rejection was logged.
    faults: (Arc<Faults>, String, bool),
}

impl RingConn {
    /// `leftover`: bytes the handshake's reader had already buffered.
    pub fn new(
        fd: OwnedFd,
        export: &NbdExport,
        enforce_alignment: bool,
        leftover: &[u8],
        max_inflight: usize,
        alive: tokio::sync::mpsc::Sender<()>,
        faults: (Arc<Faults>, String, bool),
    ) -> RingConn {
        let mut inbuf = vec![0u8; INBUF.max(leftover.len())];
        inbuf[..leftover.len()].copy_from_slice(leftover);
        RingConn {
            fd,
            vm: export.vm,
            name: export.name.clone(),
            lim: Limits {
                size: export.size,
                read_only: export.read_only,
                enforce_alignment,
            },
            max_inflight: max_inflight.max(1),
            inbuf,
            start: 0,
            end: leftover.len(),
            skip: 0,
            pending: None,
            reading: true,
            inflight: 0,
            held: 0,
            blocked: false,
            outbox: Arc::default(),
            sending: Vec::new(),
            sent: 0,
            broken: false,
            recv_armed: false,
            recv_into_pending: false,
            send_armed: false,
            _alive: alive,
            faults,
        }
    }

    /// The io_uring's file descriptor.
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    fn reply_now(&mut self, cookie: u64, error: u32) {
        self.outbox
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reply(cookie, error, &[]);
    }

    /// Turn buffered bytes into requests (`submit` queues each for the scheduler).
    fn parse(&mut self, submit: &mut dyn FnMut(IoJob)) {
        self.blocked = false;
        while self.reading {
            let avail = self.end - self.start;
            if self.skip > 0 {
                let n = (self.skip.min(avail as u64)) as usize;
                self.start += n;
                self.skip -= n as u64;
                if self.skip > 0 {
                    break;
                }
                continue;
            }
            if let Some(p) = &mut self.pending {
                let want = p.job.len as usize - p.filled;
                let n = want.min(avail);
                p.job.buf.as_mut_slice()[p.filled..p.filled + n]
                    .copy_from_slice(&self.inbuf[self.start..self.start + n]);
                p.filled += n;
                self.start += n;
                if p.filled < p.job.len as usize {
                    break;
                }
                let p = self.pending.take().expect("pending write");
                submit(p.job);
                continue;
            }
            if self.inflight >= self.max_inflight {
                self.blocked = true;
                break;
            }
            if avail < REQUEST_LEN {
                break;
            }
            let hdr: &[u8; REQUEST_LEN] = self.inbuf[self.start..self.start + REQUEST_LEN]
                .try_into()
                .expect("header length");
            let Some(raw) = parse_header(hdr) else {
                let (f, who, logged) = &mut self.faults;
                let what = format_args!("a request without its magic on `{}`; disconnecting", self.name);
                f.record(Fault::BadMagic, logged, who, what);
                self.reading = false;
                break;
            };
            // A READ/WRITE waits (unparsed) while the connection holds too many bytes.
            let cost = match raw.typ {
                CMD_READ | CMD_WRITE if raw.length <= MAX_PAYLOAD => raw.length as usize,
                _ => 0,
            };
            // (A request of MAX_PAYLOAD always fits an idle connection's budget.)
            if cost > 0 && self.held + self.backlog() + cost > CONN_BUDGET {
                self.blocked = true;
                break;
            }
            self.start += REQUEST_LEN;
            let cmd = match check(&raw, &self.lim) {
                Ok(c) => c,
                Err(rej) => {
                    let (f, who, logged) = &mut self.faults;
                    f.record(
                        rej.fault,
                        logged,
                        who,
                        format_args!("{} on `{}`", describe(&raw), self.name),
                    );
                    self.skip = rej.skip as u64;
                    self.reply_now(raw.cookie, rej.error);
                    continue;
                }
            };
            let Some((kind, offset, length, fua)) = command_io(cmd) else {
                self.reading = false; // DISC
                break;
            };
            if length == 0 && matches!(kind, IoKind::Read | IoKind::Write) {
                self.reply_now(raw.cookie, 0);
                continue;
            }
            let buf = io_buffer(kind, length);
            let outbox = self.outbox.clone();
            let cookie = raw.cookie;
            let cost = request_cost(kind, length);
            let done: DoneFn = Box::new(move |res, buf| {
                let mut o = outbox.lock().unwrap_or_else(|e| e.into_inner());
                match res {
                    Ok(()) if kind == IoKind::Read => o.reply(cookie, 0, buf.as_slice()),
                    Ok(()) => o.reply(cookie, 0, &[]),
                    Err(e) => o.reply(cookie, nbd_error(e), &[]),
                }
                o.answered += 1;
                o.answered_bytes += cost;
            });
            let job = IoJob {
                vm: self.vm,
                kind,
                offset,
                len: length as u64,
                fua,
                buf,
                done,
            };
            self.inflight += 1;
            self.held += cost;
            if kind == IoKind::Write {
                self.pending = Some(Pending { job, filled: 0 });
            } else {
                submit(job);
            }
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.start > 0 && self.inbuf.len() - self.end < REQUEST_LEN {
            self.inbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// Take the answered requests' replies and parse what the in-flight
    /// limit held back. Call after completions.
    pub fn pump(&mut self, submit: &mut dyn FnMut(IoJob)) {
        let (answered, bytes) = {
            let mut o = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
            if self.broken {
                o.bytes.clear();
            } else if !self.send_armed && self.sending.is_empty() && !o.bytes.is_empty() {
                std::mem::swap(&mut self.sending, &mut o.bytes);
                self.sent = 0;
            }
            (std::mem::take(&mut o.answered), std::mem::take(&mut o.answered_bytes))
        };
        self.inflight -= answered.min(self.inflight);
        self.held -= bytes.min(self.held);
        // Replies went out or requests completed: parse what the limits held back.
        if self.blocked && !self.recv_armed {
            self.parse(submit);
        }
    }

    /// Reply bytes waiting for the socket.
    fn backlog(&self) -> usize {
        self.sending.len() - self.sent + self.outbox.lock().unwrap_or_else(|e| e.into_inner()).bytes.len()
    }

    /// Where the next receive should land, if one should be armed now.
    pub fn want_recv(&mut self) -> Option<(*mut u8, u32)> {
        if !self.reading || self.recv_armed || self.broken {
            return None;
        }
        if let Some(p) = &mut self.pending {
            debug_assert_eq!(self.start, self.end);
            let len = p.job.len as usize - p.filled;
            // SAFETY: `filled < len` (a complete payload is submitted at once).
            let ptr = unsafe { p.job.buf.as_mut_ptr().add(p.filled) };
            self.recv_armed = true;
            self.recv_into_pending = true;
            return Some((ptr, len.min(u32::MAX as usize) as u32));
        }
        if self.skip == 0 && (self.blocked || self.backlog() > MAX_BACKLOG) {
            return None; // back-pressure: read on once replies went out
        }
        if self.end == self.inbuf.len() {
            if self.start == 0 {
                return None;
            }
            self.inbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        self.recv_armed = true;
        self.recv_into_pending = false;
        let room = self.inbuf.len() - self.end;
        // SAFETY: `end < len`.
        Some((unsafe { self.inbuf.as_mut_ptr().add(self.end) }, room as u32))
    }

    /// The armed receive completed with `res` (bytes, 0 at EOF, or -errno).
    pub fn on_recv(&mut self, res: i32, submit: &mut dyn FnMut(IoJob)) {
        self.recv_armed = false;
        if res <= 0 {
            if res < 0 && res != -libc::ECONNRESET {
                tracing::debug!(export = %self.name, error = %std::io::Error::from_raw_os_error(-res), "nbd: connection ended");
            }
            self.reading = false;
            self.drop_pending();
            return;
        }
        let n = res as usize;
        if self.recv_into_pending {
            let p = self.pending.as_mut().expect("receive into a pending write");
            p.filled += n;
            if p.filled == p.job.len as usize {
                let p = self.pending.take().expect("pending write");
                submit(p.job);
            }
        } else {
            self.end += n;
        }
        self.parse(submit);
    }

    /// The next bytes to send, if a send should be armed now.
    pub fn want_send(&mut self) -> Option<(*const u8, u32)> {
        if self.send_armed || self.broken || self.sent == self.sending.len() {
            return None;
        }
        self.send_armed = true;
        let rest = self.sending.len() - self.sent;
        // SAFETY: `sent < len`; `sending` is left untouched until the send completes.
        Some((
            unsafe { self.sending.as_ptr().add(self.sent) },
            rest.min(u32::MAX as usize) as u32,
        ))
    }

    /// The armed send completed with `res` (bytes or -errno).
    pub fn on_send(&mut self, res: i32) {
        self.send_armed = false;
        if res < 0 {
            tracing::debug!(export = %self.name, error = %std::io::Error::from_raw_os_error(-res), "nbd: reply not delivered; dropping replies");
            self.abort();
            self.sending.clear();
            self.sent = 0;
            return;
        }
        self.sent += res as usize;
        if self.sent >= self.sending.len() {
            self.sending.clear();
            // Keep the buffer for the next replies (no allocation per round),
            // unless very large replies grew it: that memory goes back.
            if self.sending.capacity() > KEEP_SEND_BUF {
                self.sending.shrink_to(INBUF);
            }
            self.sent = 0;
        }
    }

    /// A WRITE whose payload will never come: never submitted, nobody will answer it.
    fn drop_pending(&mut self) {
        if let Some(p) = self.pending.take() {
            self.inflight -= 1;
            self.held -= request_cost(p.job.kind, p.job.len as u32).min(self.held);
        }
    }

    fn stop(&mut self) {
        self.reading = false;
        if !self.recv_armed {
            self.drop_pending();
        }
    }

    /// Take no more requests (server shutdown): an armed receive returns at once.
    pub fn stop_reading(&mut self) {
        self.stop();
        // SAFETY: shutdown(2) on our own socket.
        unsafe { libc::shutdown(self.fd(), libc::SHUT_RD) };
    }

    /// Give up on the client (engine stop, or a reply could not be sent):
    /// armed operations return at once.
    pub fn abort(&mut self) {
        self.stop();
        self.broken = true;
        // SAFETY: shutdown(2) on our own socket.
        unsafe { libc::shutdown(self.fd(), libc::SHUT_RDWR) };
    }

    /// Nothing armed in the ring.
    pub fn quiet(&self) -> bool {
        !self.recv_armed && !self.send_armed
    }

    /// Every request read was answered and sent: the connection can close.
    pub fn finished(&self) -> bool {
        if self.reading || self.inflight > 0 || !self.quiet() {
            return false;
        }
        self.broken
            || (self.sending.is_empty() && self.outbox.lock().unwrap_or_else(|e| e.into_inner()).bytes.is_empty())
    }
}
