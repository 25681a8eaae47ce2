//! The NBD export: fixed newstyle handshake, simple replies, many requests in
//! flight per connection, several connections per export.
//!
//! Every request owns its buffer and its reply path: a client that
//! disconnects mid-request only makes its replies go nowhere; the requests
//! still complete at the backend and their buffers are freed. A FLUSH is an
//! `fdatasync` of the VM's backing file, which covers every write any
//! connection has completed (hence `CAN_MULTI_CONN`).

pub mod proto;
pub mod ring;

use crate::buf::AlignedBuf;
use crate::engine::EngineHandle;
use crate::faults::Fault;
use crate::io::{DoneFn, IoJob, IoKind};
use proto::*;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

/// One VM's disk as an NBD export.
#[derive(Debug, Clone)]
pub struct NbdExport {
    /// The export's name.
    pub name: String,
    /// The VM it serves.
    pub vm: usize,
    /// Size in bytes.
    pub size: u64,
    /// Whether writes are refused.
    pub read_only: bool,
}

/// What every connection shares.
pub struct NbdServer {
    /// The exports, by name.
    pub exports: Vec<NbdExport>,
    /// The engine that schedules and serves requests.
    pub engine: EngineHandle,
    /// Requests in flight per connection.
    pub max_inflight: usize,
    /// A client must reach transmission within this (`[nbd] handshake_timeout_s`).
    pub handshake_timeout: std::time::Duration,
    /// Advertise `NBD_FLAG_ROTATIONAL`.
    pub rotational: bool,
    /// Becomes true when the daemon stops.
    pub shutdown: watch::Receiver<bool>,
    /// Set a grace period after `shutdown`: replies a client has not taken
    /// by then are dropped and the connection closed.
    pub abort: watch::Receiver<bool>,
    /// Held by every connection task; the daemon waits for all clones to drop.
    pub alive: mpsc::Sender<()>,
}

struct Reply {
    cookie: u64,
    error: u32,
    data: Option<AlignedBuf>,
    /// The request's slot and buffer bytes, given back once the reply is written.
    _hold: (OwnedSemaphorePermit, Option<OwnedSemaphorePermit>),
}

impl Reply {
    fn new(
        cookie: u64,
        error: u32,
        data: Option<AlignedBuf>,
        hold: (OwnedSemaphorePermit, Option<OwnedSemaphorePermit>),
    ) -> Reply {
        Reply {
            cookie,
            error,
            data,
            _hold: hold,
        }
    }
}

/// Bytes of request buffers one connection may hold at once (READ and
/// WRITE data from the request's arrival until its reply is sent): a client
/// that floods large reads, or never reads its replies, is no longer read
/// once it holds this much. A request of `MAX_PAYLOAD` always fits.
pub const CONN_BUDGET: usize = 64 << 20;
const _: () = assert!(MAX_PAYLOAD as usize <= CONN_BUDGET);

/// The buffer bytes a request holds against [`CONN_BUDGET`].
pub(crate) fn request_cost(kind: IoKind, length: u32) -> usize {
    match kind {
        IoKind::Read | IoKind::Write => length as usize,
        _ => 0,
    }
}

const OPT_DATA_MAX: u32 = 64 * 1024;

/// A request for the log: command, offset, length, flags.
pub(crate) fn describe(r: &RawRequest) -> String {
    format!(
        "command {} at offset {} length {} flags {:#x}",
        r.typ, r.offset, r.length, r.flags
    )
}

/// A client socket: served on the async runtime during the handshake, then
/// (io_uring engine) handed to the scheduler thread's ring as a descriptor.
pub trait NbdStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// The socket as a blocking descriptor (io_uring parks blocking sockets
    /// in its own poll; a non-blocking one would make it return `EAGAIN`).
    fn into_blocking_fd(self) -> std::io::Result<OwnedFd>;
}

impl NbdStream for tokio::net::UnixStream {
    fn into_blocking_fd(self) -> std::io::Result<OwnedFd> {
        let s = self.into_std()?;
        s.set_nonblocking(false)?;
        Ok(s.into())
    }
}

impl NbdStream for tokio::net::TcpStream {
    fn into_blocking_fd(self) -> std::io::Result<OwnedFd> {
        let s = self.into_std()?;
        s.set_nonblocking(false)?;
        Ok(s.into())
    }
}

/// The I/O a valid command asks for: kind, offset, length, FUA; `None` for DISC.
pub(crate) fn command_io(cmd: Command) -> Option<(IoKind, u64, u32, bool)> {
    Some(match cmd {
        Command::Disc => return None,
        Command::Read { offset, length } => (IoKind::Read, offset, length, false),
        Command::Write { offset, length, fua } => (IoKind::Write, offset, length, fua),
        Command::Flush => (IoKind::Flush, 0, 0, false),
        Command::Trim { offset, length, fua } => (IoKind::Trim, offset, length, fua),
        Command::WriteZeroes {
            offset,
            length,
            fua,
            no_hole,
        } => (IoKind::WriteZeroes { punch: !no_hole }, offset, length, fua),
    })
}

/// The buffer a request's data lives in: `length` bytes for reads and
/// writes, none for the other commands.
pub(crate) fn io_buffer(kind: IoKind, length: u32) -> AlignedBuf {
    match kind {
        IoKind::Read | IoKind::Write => AlignedBuf::zeroed(length as usize),
        _ => AlignedBuf::empty(),
    }
}

impl NbdServer {
    fn find(&self, name: &str) -> Option<&NbdExport> {
        if name.is_empty() {
            return self.exports.first();
        }
        self.exports.iter().find(|e| e.name == name)
    }

    fn flags(&self, e: &NbdExport) -> u16 {
        let mut f =
            TF_HAS_FLAGS | TF_SEND_FLUSH | TF_SEND_FUA | TF_SEND_TRIM | TF_SEND_WRITE_ZEROES | TF_CAN_MULTI_CONN;
        if e.read_only {
            f |= TF_READ_ONLY;
        }
        if self.rotational {
            f |= TF_ROTATIONAL;
        }
        f
    }

    /// Accept connections on a unix socket until shutdown.
    pub async fn serve_unix(self: Arc<Self>, listener: tokio::net::UnixListener) {
        let mut stop = self.shutdown.clone();
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, _)) => {
                        tokio::spawn(self.clone().connection(s, "unix".to_string()));
                    }
                    Err(e) => if !crate::daemon::accept_failed("nbd unix", &e, &mut stop).await {
                        return;
                    },
                },
                _ = stop.changed() => return,
            }
        }
    }

    /// Accept connections on a loopback TCP socket until shutdown.
    pub async fn serve_tcp(self: Arc<Self>, listener: tokio::net::TcpListener) {
        let mut stop = self.shutdown.clone();
        loop {
            tokio::select! {
                r = listener.accept() => match r {
                    Ok((s, peer)) => {
                        let _ = s.set_nodelay(true);
                        tokio::spawn(self.clone().connection(s, peer.to_string()));
                    }
                    Err(e) => if !crate::daemon::accept_failed("nbd tcp", &e, &mut stop).await {
                        return;
                    },
                },
                _ = stop.changed() => return,
            }
        }
    }

    async fn connection<S: NbdStream>(self: Arc<Self>, stream: S, peer: String) {
        let _alive = self.alive.clone();
        let (rd, wr) = tokio::io::split(stream);
        let mut rd = BufReader::with_capacity(256 * 1024, rd);
        let mut wr = BufWriter::with_capacity(256 * 1024, wr);
        let mut stop = self.shutdown.clone();
        if *stop.borrow() {
            return;
        }
        // Whether this connection's first rejection has been logged.
        let mut logged = false;
        let hs = tokio::select! {
            r = self.handshake(&mut rd, &mut wr, &peer, &mut logged) => r,
            _ = stop.changed() => return,
            _ = tokio::time::sleep(self.handshake_timeout) => {
                let secs = self.handshake_timeout.as_secs_f64();
                self.engine.faults.record(Fault::HandshakeTimeout, &mut logged, &peer, format_args!("a handshake not finished in {secs} s; closing"));
                return;
            }
        };
        match hs {
            Ok(Some((export, enforce))) => {
                tracing::debug!(peer = %peer, export = %export.name, "nbd: transmission");
                if self.engine.drives_sockets() {
                    // The handshake flushed every reply; keep what the client already sent.
                    let leftover = rd.buffer().to_vec();
                    let stream = rd.into_inner().unsplit(wr.into_inner());
                    match stream.into_blocking_fd() {
                        Ok(fd) => self.engine.adopt(ring::RingConn::new(
                            fd,
                            &export,
                            enforce,
                            &leftover,
                            self.max_inflight,
                            self.alive.clone(),
                            (self.engine.faults.clone(), peer.clone(), logged),
                        )),
                        Err(e) => {
                            tracing::warn!(peer = %peer, error = %e, "nbd: cannot hand the connection to the scheduler thread")
                        }
                    }
                    return;
                }
                if let Err(e) = self.transmission(rd, wr, export, enforce, &peer, logged).await {
                    tracing::debug!(peer = %peer, error = %e, "nbd: connection ended");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(peer = %peer, error = %e, "nbd: handshake ended"),
        }
    }

    /// Option haggling. `Ok(Some)` = enter transmission with this export
    /// (and whether the client agreed to block-size constraints).
    async fn handshake<R, W>(
        &self,
        rd: &mut R,
        wr: &mut W,
        peer: &str,
        logged: &mut bool,
    ) -> std::io::Result<Option<(NbdExport, bool)>>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        wr.write_all(&NBDMAGIC.to_be_bytes()).await?;
        wr.write_all(&IHAVEOPT.to_be_bytes()).await?;
        wr.write_all(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes())
            .await?;
        wr.flush().await?;
        let cflags = rd.read_u32().await?;
        if cflags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
            let f = &self.engine.faults;
            f.record(
                Fault::BadFlags,
                logged,
                peer,
                format_args!("unknown client flags {cflags:#x}; closing"),
            );
            return Ok(None);
        }
        let no_zeroes = cflags & FLAG_C_NO_ZEROES != 0;
        loop {
            let magic = rd.read_u64().await?;
            if magic != IHAVEOPT {
                let f = &self.engine.faults;
                f.record(
                    Fault::BadMagic,
                    logged,
                    peer,
                    format_args!("option magic {magic:#x}; closing"),
                );
                return Ok(None);
            }
            let opt = rd.read_u32().await?;
            let len = rd.read_u32().await?;
            if len > OPT_DATA_MAX {
                let f = &self.engine.faults;
                f.record(
                    Fault::Oversized,
                    logged,
                    peer,
                    format_args!("option {opt} with {len} bytes of data"),
                );
                tokio::io::copy(&mut rd.take(len as u64), &mut tokio::io::sink()).await?;
                if opt == OPT_EXPORT_NAME {
                    return Ok(None);
                }
                opt_reply(wr, opt, REP_ERR_INVALID, b"option data too long").await?;
                continue;
            }
            let mut data = vec![0u8; len as usize];
            rd.read_exact(&mut data).await?;
            match opt {
                OPT_EXPORT_NAME => {
                    let name = String::from_utf8_lossy(&data);
                    let Some(e) = self.find(&name) else {
                        let f = &self.engine.faults;
                        f.record(
                            Fault::UnknownExport,
                            logged,
                            peer,
                            format_args!("EXPORT_NAME `{name}`: no such export; closing"),
                        );
                        return Ok(None);
                    };
                    wr.write_all(&e.size.to_be_bytes()).await?;
                    wr.write_all(&self.flags(e).to_be_bytes()).await?;
                    if !no_zeroes {
                        wr.write_all(&[0u8; 124]).await?;
                    }
                    wr.flush().await?;
                    return Ok(Some((e.clone(), false)));
                }
                OPT_ABORT => {
                    let _ = opt_reply(wr, opt, REP_ACK, &[]).await;
                    return Ok(None);
                }
                OPT_LIST => {
                    if !data.is_empty() {
                        let f = &self.engine.faults;
                        f.record(Fault::Malformed, logged, peer, format_args!("NBD_OPT_LIST with data"));
                        opt_reply(wr, opt, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data").await?;
                        continue;
                    }
                    for e in &self.exports {
                        let mut d = Vec::with_capacity(4 + e.name.len());
                        d.extend_from_slice(&(e.name.len() as u32).to_be_bytes());
                        d.extend_from_slice(e.name.as_bytes());
                        opt_reply(wr, opt, REP_SERVER, &d).await?;
                    }
                    opt_reply(wr, opt, REP_ACK, &[]).await?;
                }
                OPT_INFO | OPT_GO => {
                    if *self.shutdown.borrow() {
                        opt_reply(wr, opt, REP_ERR_SHUTDOWN, b"server is shutting down").await?;
                        continue;
                    }
                    let Some(go) = parse_go(&data) else {
                        let f = &self.engine.faults;
                        f.record(
                            Fault::Malformed,
                            logged,
                            peer,
                            format_args!("malformed option {opt} data"),
                        );
                        opt_reply(wr, opt, REP_ERR_INVALID, b"malformed NBD_OPT_INFO/GO data").await?;
                        continue;
                    };
                    let Some(e) = self.find(&go.name) else {
                        let f = &self.engine.faults;
                        f.record(
                            Fault::UnknownExport,
                            logged,
                            peer,
                            format_args!("option {opt} for `{}`: no such export", go.name),
                        );
                        let msg = format!("no export named `{}`", go.name);
                        opt_reply(wr, opt, REP_ERR_UNKNOWN, msg.as_bytes()).await?;
                        continue;
                    };
                    let mut info = Vec::with_capacity(12);
                    info.extend_from_slice(&INFO_EXPORT.to_be_bytes());
                    info.extend_from_slice(&e.size.to_be_bytes());
                    info.extend_from_slice(&self.flags(e).to_be_bytes());
                    opt_reply(wr, opt, REP_INFO, &info).await?;
                    let mut bs = Vec::with_capacity(14);
                    bs.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
                    for v in [MIN_BLOCK, PREFERRED_BLOCK, MAX_PAYLOAD] {
                        bs.extend_from_slice(&v.to_be_bytes());
                    }
                    opt_reply(wr, opt, REP_INFO, &bs).await?;
                    if go.infos.contains(&INFO_NAME) {
                        let mut d = INFO_NAME.to_be_bytes().to_vec();
                        d.extend_from_slice(e.name.as_bytes());
                        opt_reply(wr, opt, REP_INFO, &d).await?;
                    }
                    if go.infos.contains(&INFO_DESCRIPTION) {
                        let mut d = INFO_DESCRIPTION.to_be_bytes().to_vec();
                        d.extend_from_slice(format!("hvio disk of VM {}", e.name).as_bytes());
                        opt_reply(wr, opt, REP_INFO, &d).await?;
                    }
                    opt_reply(wr, opt, REP_ACK, &[]).await?;
                    if opt == OPT_GO {
                        return Ok(Some((e.clone(), go.infos.contains(&INFO_BLOCK_SIZE))));
                    }
                }
                OPT_STARTTLS => {
                    opt_reply(
                        wr,
                        opt,
                        REP_ERR_POLICY,
                        b"TLS is not offered: loopback and unix sockets only",
                    )
                    .await?
                }
                _ => opt_reply(wr, opt, REP_ERR_UNSUP, &[]).await?,
            }
        }
    }

    async fn transmission<R, W>(
        &self,
        mut rd: R,
        wr: W,
        export: NbdExport,
        enforce: bool,
        peer: &str,
        mut logged: bool,
    ) -> std::io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel::<Reply>();
        let writer = tokio::spawn(write_replies(wr, rx, self.abort.clone()));
        // Every request holds a slot from its header until its reply is
        // written, and a READ/WRITE its buffer's bytes: a client that does
        // not read its replies stops being read, with bounded memory held.
        let slots = Arc::new(Semaphore::new(self.max_inflight));
        let bytes = Arc::new(Semaphore::new(CONN_BUDGET));
        let lim = Limits {
            size: export.size,
            read_only: export.read_only,
            enforce_alignment: enforce,
        };
        let mut stop = self.shutdown.clone();
        let mut result = Ok(());
        loop {
            let mut hdr = [0u8; REQUEST_LEN];
            let r = tokio::select! {
                r = rd.read_exact(&mut hdr) => r,
                _ = stop.changed() => break,
            };
            if let Err(e) = r {
                if e.kind() != std::io::ErrorKind::UnexpectedEof {
                    result = Err(e);
                }
                break;
            }
            let Some(raw) = parse_header(&hdr) else {
                let f = &self.engine.faults;
                f.record(
                    Fault::BadMagic,
                    &mut logged,
                    peer,
                    format_args!("a request without its magic on `{}`; disconnecting", export.name),
                );
                break;
            };
            let slot = tokio::select! {
                p = slots.clone().acquire_owned() => p,
                _ = stop.changed() => break,
            };
            let Ok(slot) = slot else { break };
            let cmd = match check(&raw, &lim) {
                Ok(c) => c,
                Err(rej) => {
                    self.engine.faults.record(
                        rej.fault,
                        &mut logged,
                        peer,
                        format_args!("{} on `{}`", describe(&raw), export.name),
                    );
                    if rej.skip > 0 {
                        tokio::io::copy(&mut (&mut rd).take(rej.skip as u64), &mut tokio::io::sink()).await?;
                    }
                    let _ = tx.send(Reply::new(raw.cookie, rej.error, None, (slot, None)));
                    continue;
                }
            };
            let Some((kind, offset, length, fua)) = command_io(cmd) else {
                break;
            };
            if length == 0 && matches!(kind, IoKind::Read | IoKind::Write) {
                let _ = tx.send(Reply::new(raw.cookie, 0, None, (slot, None)));
                continue;
            }
            let held = match request_cost(kind, length) {
                0 => None,
                n => {
                    let p = tokio::select! {
                        p = bytes.clone().acquire_many_owned(n as u32) => p,
                        _ = stop.changed() => break,
                    };
                    let Ok(p) = p else { break };
                    Some(p)
                }
            };
            let mut buf = io_buffer(kind, length);
            if kind == IoKind::Write {
                tokio::select! {
                    r = rd.read_exact(buf.as_mut_slice()) => { r?; }
                    _ = stop.changed() => break,
                }
            }
            let tx = tx.clone();
            let cookie = raw.cookie;
            let hold = (slot, held);
            let done: DoneFn = Box::new(move |res, buf| {
                let reply = match res {
                    Ok(()) => Reply::new(cookie, 0, (kind == IoKind::Read).then_some(buf), hold),
                    Err(e) => Reply::new(cookie, nbd_error(e), None, hold),
                };
                let _ = tx.send(reply);
            });
            self.engine.submit(IoJob {
                vm: export.vm,
                kind,
                offset,
                len: length as u64,
                fua,
                buf,
                done,
            });
        }
        // Every request already read is answered before the connection closes.
        drop(tx);
        let _ = writer.await;
        result
    }
}

async fn opt_reply<W: AsyncWrite + Unpin>(wr: &mut W, opt: u32, typ: u32, data: &[u8]) -> std::io::Result<()> {
    let mut h = [0u8; 20];
    h[0..8].copy_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    h[8..12].copy_from_slice(&opt.to_be_bytes());
    h[12..16].copy_from_slice(&typ.to_be_bytes());
    h[16..20].copy_from_slice(&(data.len() as u32).to_be_bytes());
    wr.write_all(&h).await?;
    wr.write_all(data).await?;
    wr.flush().await
}

async fn write_replies<W: AsyncWrite + Unpin>(
    wr: W,
    mut rx: mpsc::UnboundedReceiver<Reply>,
    mut abort: watch::Receiver<bool>,
) {
    let mut wr = wr;
    let mut ok = true;
    // Once aborted (a client still not reading at the end of the shutdown
    // grace), nothing more is written: the remaining replies are dropped.
    let mut aborted = async move || {
        let _ = abort.wait_for(|a| *a).await;
    };
    while let Some(r) = rx.recv().await {
        let mut next = Some(r);
        while let Some(r) = next {
            if ok {
                ok = tokio::select! {
                    w = write_one(&mut wr, &r) => w.is_ok(),
                    _ = aborted() => false,
                };
            }
            next = rx.try_recv().ok();
        }
        if ok {
            ok = tokio::select! {
                w = wr.flush() => w.is_ok(),
                _ = aborted() => false,
            };
        }
    }
    if ok {
        let _ = wr.shutdown().await;
    }
}

async fn write_one<W: AsyncWrite + Unpin>(wr: &mut W, r: &Reply) -> std::io::Result<()> {
    wr.write_all(&simple_reply(r.cookie, r.error)).await?;
    if let Some(d) = &r.data {
        wr.write_all(d.as_slice()).await?;
    }
    Ok(())
}
