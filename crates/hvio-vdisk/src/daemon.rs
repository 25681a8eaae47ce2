//! Wiring: store → backend → scheduling core → exports, and an orderly stop.

use crate::backend::{ThreadPool, Uring};
use crate::config::{Config, Engine as EngineKind, ExportKind, StoreKind};
use crate::engine::{self, Backend, EngineHandle, EngineSetup};
use crate::iolog::IoLog;
use crate::nbd::{NbdExport, NbdServer};
use crate::store::{Store, StoreError};
use hvio_core::{DeviceInfo, LinearSeek, StreamInfo, SECTOR_BYTES};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{mpsc, watch};

/// Why the daemon could not start or stopped with an error.
#[derive(Debug, Error)]
pub enum ServeError {
    /// A bad configuration.
    #[error(transparent)]
    Config(#[from] crate::config::ConfError),
    /// The backing store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A reshaped image could not be opened.
    #[error(transparent)]
    Image(#[from] crate::image::ImageError),
    /// A file or socket operation failed.
    #[error("{what} {path}: {err}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On what.
        path: String,
        /// What the operating system said.
        err: std::io::Error,
    },
    /// Anything else, already phrased.
    #[error("{0}")]
    Other(String),
}

fn io_err(what: &'static str, path: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> ServeError {
    let path = path.to_string();
    move |err| ServeError::Io { what, path, err }
}

/// A running daemon (exports open, scheduler running).
pub struct Running {
    /// The engine: send it control requests.
    pub engine: EngineHandle,
    /// The backing store.
    pub store: Arc<Store>,
    shutdown: watch::Sender<bool>,
    /// Set when the shutdown grace is over: connections still owing replies close.
    abort: watch::Sender<bool>,
    alive: Option<mpsc::Sender<()>>,
    alive_rx: mpsc::Receiver<()>,
    engine_thread: Option<std::thread::JoinHandle<()>>,
    sockets: Vec<PathBuf>,
    /// Where the control API listens, if configured (the bound address).
    pub control_addr: Option<std::net::SocketAddr>,
    /// Where the NBD server listens on TCP, if it does (the bound address).
    pub nbd_addr: Option<std::net::SocketAddr>,
    extras: Vec<Box<dyn FnOnce() + Send>>,
}

/// How long a stopping daemon waits for clients to take their last replies.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Start everything `cfg` describes. Must be called inside a tokio runtime.
///
/// If any part fails, what started is stopped again and nothing is left
/// behind: the sockets bound are removed, and so are the backing files,
/// directories and request log this start created.
pub async fn start(cfg: &Config) -> Result<Running, ServeError> {
    let mut created = Vec::new();
    if let Err(e) = create_images(cfg, &mut created) {
        crate::store::remove_created(&created);
        return Err(e);
    }
    let store = match Store::open(cfg) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            crate::store::remove_created(&created);
            return Err(e.into());
        }
    };
    created.extend(store.created.iter().cloned());
    let r = match start_scheduler(cfg, store, &mut created) {
        Ok((mut running, rotational)) => match running.open_exports(cfg, rotational, &mut created).await {
            Ok(()) => return Ok(running),
            Err(e) => {
                let _ = running.stop().await;
                Err(e)
            }
        },
        Err(e) => Err(e),
    };
    crate::store::remove_created(&created);
    r
}

/// Make the reshaped images that do not exist yet (with `[store] create`).
fn create_images(cfg: &Config, created: &mut Vec<PathBuf>) -> Result<(), ServeError> {
    for vm in &cfg.vms {
        let Some(path) = vm.image.as_ref() else { continue };
        if cfg.layout_of(vm) != crate::config::Layout::Reshaped || path.exists() || !cfg.store.create {
            continue;
        }
        if let Some(dir) = path.parent() {
            crate::store::create_dirs(dir, created).map_err(io_err("create directory", dir.display()))?;
        }
        let sb = crate::image::create(path, vm.size.0, cfg.reshape_config(vm))?;
        created.push(path.clone());
        tracing::info!(vm = %vm.name, image = %path.display(), bytes = sb.file_bytes(), "reshaped image created");
    }
    Ok(())
}

/// The backend and the scheduler thread; returns whether the store is rotational.
fn start_scheduler(cfg: &Config, store: Arc<Store>, created: &mut Vec<PathBuf>) -> Result<(Running, bool), ServeError> {
    let depth = cfg.store.depth;
    let (tx, rx) = engine::channel();
    let (backend, device): (Box<dyn Backend>, DeviceInfo) = match cfg.store.kind {
        StoreKind::File => {
            let rotational = cfg
                .store
                .rotational
                .or_else(|| store.detect_rotational())
                .unwrap_or(false);
            let capacity = store.capacity() / SECTOR_BYTES;
            let device = DeviceInfo {
                capacity,
                rotational,
                queue_depth: depth,
                seek: Arc::new(if rotational {
                    LinearSeek {
                        ns_per_sector: 8.0e6 / capacity.max(1) as f64,
                        max: 8_000_000,
                        revolution: 8_333_333,
                    }
                } else {
                    LinearSeek {
                        ns_per_sector: 0.0,
                        max: 0,
                        revolution: 0,
                    }
                }),
            };
            let b: Box<dyn Backend> = match cfg.store.engine {
                EngineKind::Threads => Box::new(
                    ThreadPool::new(store.clone(), cfg.store.threads, tx.clone())
                        .map_err(io_err("start I/O threads for", "the store"))?,
                ),
                EngineKind::IoUring => {
                    // Made on a thread of its own that ends at once: the
                    // kernel ties a ring to the task that created it, and
                    // tearing the ring down (at stop) queues task work there
                    // with a signal, which interrupted the caller's next
                    // blocking read with a timeout (EINTR) — an
                    // application's thread, or a test's.
                    let (s, t) = (store.clone(), tx.clone());
                    let ring = std::thread::scope(|sc| sc.spawn(move || Uring::new(s, depth, t)).join())
                        .unwrap_or_else(|_| Err(std::io::Error::other("the thread setting up io_uring panicked")));
                    Box::new(ring.map_err(io_err("set up io_uring for", "the store"))?)
                }
            };
            (b, device)
        }
        StoreKind::Emulator => crate::emulator::build(cfg, store.clone(), tx.clone())?,
    };
    let depth = if cfg.store.kind == StoreKind::Emulator {
        depth.min(device.queue_depth.max(1))
    } else {
        depth
    };
    let streams: Vec<StreamInfo> = cfg
        .vms
        .iter()
        .zip(&store.disks)
        .enumerate()
        .map(|(i, (vm, d))| {
            let (first, sectors) = d.region();
            let mut s = StreamInfo::new(i as u32, vm.name.clone())
                .with_weight(vm.weight)
                .with_region(first, sectors);
            s.attrs = vm.attrs.clone();
            s
        })
        .collect();
    let iolog = match &cfg.log.requests {
        Some(p) => {
            if store.is_backing_file(p) {
                return Err(ServeError::Other(format!(
                    "[log] requests = \"{}\" is a backing file of the store: the log would overwrite a disk",
                    p.display()
                )));
            }
            let is_new = !p.exists();
            let names: Vec<String> = cfg.vms.iter().map(|v| v.name.clone()).collect();
            let log = IoLog::create(p, &names).map_err(io_err("create request log", p.display()))?;
            if is_new {
                created.push(p.clone());
            }
            Some(log)
        }
        None => None,
    };
    let rotational = device.rotational;
    let plan = cfg.plan().map_err(|e| ServeError::Other(e.to_string()))?;
    // A plan step at time 0 is the scheduler the daemon starts on.
    let first = plan
        .first()
        .filter(|s| s.at == 0)
        .map_or(&cfg.scheduler.name, |s| &s.host)
        .clone();
    let mut images = Vec::with_capacity(cfg.vms.len());
    for (i, vm) in cfg.vms.iter().enumerate() {
        images.push(if cfg.layout_of(vm) == crate::config::Layout::Reshaped {
            let disk = Arc::new(crate::reshaped::ReshapedDisk::open(store.clone(), i)?);
            disk.load_layout();
            Some(disk)
        } else {
            None
        });
    }
    let (engine, engine_thread) = engine::spawn(
        EngineSetup {
            store: store.clone(),
            scheduler: cfg.scheduler.name.clone(),
            params: cfg.scheduler.params.clone(),
            streams,
            device,
            depth,
            iolog,
            poll: cfg.store.poll(),
            plan,
            online: cfg
                .online
                .as_ref()
                .map(|o| o.check())
                .transpose()
                .map_err(|e| ServeError::Other(e.to_string()))?,
            images: images.clone(),
        },
        tx,
        rx,
        backend,
    )
    .map_err(ServeError::Other)?;
    for img in images.iter().flatten() {
        img.attach(engine.clone());
    }
    tracing::info!(scheduler = %first, depth, rotational, vms = cfg.vms.len(), "scheduler running");

    let (shutdown, _) = watch::channel(false);
    let (alive, alive_rx) = mpsc::channel(1);
    let running = Running {
        engine,
        store,
        shutdown,
        abort: watch::channel(false).0,
        alive: Some(alive),
        alive_rx,
        engine_thread: Some(engine_thread),
        sockets: Vec::new(),
        control_addr: None,
        nbd_addr: None,
        extras: Vec::new(),
    };
    Ok((running, rotational))
}

impl Running {
    /// The NBD listeners, the FUSE mount and the control API.
    /// What it creates (socket directories) is appended to `created`.
    async fn open_exports(
        &mut self,
        cfg: &Config,
        rotational: bool,
        created: &mut Vec<PathBuf>,
    ) -> Result<(), ServeError> {
        let running = self;
        let engine = running.engine.clone();
        let store = running.store.clone();
        let shutdown_rx = running.shutdown.subscribe();
        let alive = running.alive.clone().expect("alive until stop");

        // NBD.
        let exports: Vec<NbdExport> = cfg
            .vms
            .iter()
            .enumerate()
            .filter(|(_, vm)| cfg.exported(vm, ExportKind::Nbd))
            .map(|(i, vm)| NbdExport {
                name: vm.name.clone(),
                vm: i,
                size: vm.size.0,
                read_only: vm.read_only,
            })
            .collect();
        if !exports.is_empty() {
            let server = Arc::new(NbdServer {
                exports,
                engine: engine.clone(),
                max_inflight: cfg.nbd.max_inflight,
                handshake_timeout: Duration::from_secs(cfg.nbd.handshake_timeout_s),
                rotational,
                shutdown: shutdown_rx.clone(),
                abort: running.abort.subscribe(),
                alive: alive.clone(),
            });
            if let Some(path) = &cfg.nbd.unix {
                remove_stale_socket(path, created)?;
                let l = tokio::net::UnixListener::bind(path).map_err(io_err("bind NBD unix socket", path.display()))?;
                running.sockets.push(path.clone());
                tracing::info!(path = %path.display(), "NBD export listening (unix)");
                tokio::spawn(server.clone().serve_unix(l));
            }
            if let Some(addr) = cfg.nbd.tcp {
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(io_err("bind NBD TCP", addr))?;
                let local = l.local_addr().map_err(io_err("bind NBD TCP", addr))?;
                running.nbd_addr = Some(local);
                tracing::info!(addr = %local, "NBD export listening (tcp)");
                tokio::spawn(server.clone().serve_tcp(l));
            }
        }

        // vhost-user-blk.
        for (i, vm) in cfg.vms.iter().enumerate() {
            let Some(vu) = &vm.vhost_user else { continue };
            remove_stale_socket(&vu.socket, created)?;
            let dev = crate::vhost_user::BlkDevice::new(i, &vm.name, vm.size.0, vm.read_only, vu, engine.clone());
            let export = crate::vhost_user::Export::start(&vu.socket, dev)
                .map_err(io_err("bind vhost-user socket", vu.socket.display()))?;
            tracing::info!(vm = %vm.name, path = %vu.socket.display(), queues = vu.queues, "vhost-user-blk export listening");
            running.extras.push(Box::new(move || export.stop(SHUTDOWN_GRACE)));
        }

        // FUSE.
        if let Some(fc) = &cfg.fuse {
            let disks: Vec<usize> = (0..cfg.vms.len())
                .filter(|&i| cfg.exported(&cfg.vms[i], ExportKind::Fuse))
                .collect();
            if !disks.is_empty() {
                let unmount = crate::fuse::mount(fc, &store, &disks, engine.clone())?;
                running.extras.push(unmount);
            }
        }

        // Control API.
        if cfg.control.http.is_some() || cfg.control.unix.is_some() {
            let (addr, sockets) =
                crate::control::start(&cfg.control, engine.clone(), shutdown_rx.clone(), created).await?;
            running.control_addr = addr;
            running.sockets.extend(sockets);
        }
        Ok(())
    }
}

/// After a failed `accept` (out of descriptors, out of memory): log it and
/// pause before the next try, instead of spinning on a listener that stays
/// readable. `false`: the daemon is stopping.
pub(crate) async fn accept_failed(what: &str, err: &std::io::Error, stop: &mut watch::Receiver<bool>) -> bool {
    tracing::warn!(listener = what, error = %err, "accept failed; retrying in 100 ms");
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(100)) => true,
        _ = stop.changed() => false,
    }
}

/// Make way for a listening socket at `path`: remove a socket nobody listens
/// on any more, refuse anything else there (a live socket, a file), and
/// create the missing directories (appended to `created`).
pub(crate) fn remove_stale_socket(path: &std::path::Path, created: &mut Vec<PathBuf>) -> Result<(), ServeError> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.file_type().is_socket() {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(ServeError::Other(format!(
                    "{}: another server is listening on this socket",
                    path.display()
                )));
            }
            std::fs::remove_file(path).map_err(io_err("remove stale socket", path.display()))?;
        } else {
            return Err(ServeError::Other(format!(
                "{}: exists and is not a socket",
                path.display()
            )));
        }
    }
    if let Some(dir) = path.parent() {
        crate::store::create_dirs(dir, created).map_err(io_err("create directory", dir.display()))?;
    }
    Ok(())
}

impl Running {
    /// Stop taking requests, answer every request already read, flush the
    /// store, close the exports.
    pub async fn stop(mut self) -> Result<(), ServeError> {
        tracing::info!("shutting down: draining in-flight requests");
        self.shutdown.send_replace(true);
        self.engine.stop_reading();
        self.alive = None;
        // Connections finish their in-flight requests, deliver their
        // replies, then close. A client that does not take its replies
        // within the grace loses them: its connection is closed.
        if tokio::time::timeout(SHUTDOWN_GRACE, self.alive_rx.recv())
            .await
            .is_err()
        {
            tracing::warn!(
                grace_s = SHUTDOWN_GRACE.as_secs(),
                "clients still not taking their replies: closing their connections"
            );
            self.abort.send_replace(true);
            self.engine.abort_connections();
            if tokio::time::timeout(Duration::from_secs(60), self.alive_rx.recv())
                .await
                .is_err()
            {
                tracing::warn!("connections still open after 60 s more; stopping anyway");
            }
        }
        for f in self.extras.drain(..) {
            tokio::task::spawn_blocking(f).await.ok();
        }
        let engine = self.engine.clone();
        let r = tokio::task::spawn_blocking(move || engine.shutdown())
            .await
            .unwrap_or(Ok(()));
        if let Some(t) = self.engine_thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        for s in &self.sockets {
            let _ = std::fs::remove_file(s);
        }
        match r {
            Ok(()) => {
                tracing::info!("store flushed; stopped");
                Ok(())
            }
            Err(e) => Err(ServeError::Other(format!(
                "final flush of the store failed: {}",
                std::io::Error::from_raw_os_error(e)
            ))),
        }
    }
}

/// Run in the foreground until SIGINT or SIGTERM.
pub fn run(cfg: &Config) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("hvio-net")
        .build()
        .map_err(io_err("start", "the async runtime"))?;
    rt.block_on(async {
        let running = start(cfg).await?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(io_err("install handler for", "SIGTERM"))?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
            _ = term.recv() => tracing::info!("SIGTERM"),
        }
        running.stop().await
    })
}

/// Set up levelled logging to stderr (`RUST_LOG` overrides `level`).
pub fn init_logging(level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .try_init();
}
