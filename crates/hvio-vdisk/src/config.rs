//! `host.toml`: the daemon's configuration.
//!
//! Every table denies unknown keys; every error names the file, the key and
//! the value. Sizes are integers (bytes) or strings with a unit
//! (`"4GiB"`, `"512MiB"`, `"1M"` = MiB, `"10GB"` = 10⁹ bytes).

use hvio_core::{ConfigError, ParamValues};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why a configuration could not be used.
#[derive(Debug, Error)]
pub enum ConfError {
    /// The file could not be read.
    #[error(transparent)]
    Read(#[from] hvio_core::input::ReadError),
    /// The file is not valid TOML.
    #[error("{origin}: {message}")]
    Toml {
        /// The file.
        origin: String,
        /// What the TOML reader said.
        message: String,
    },
    /// A bad key or value.
    #[error("{origin}{}: {err}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        origin: String,
        /// The line of the key at fault, when it can be found.
        line: Option<usize>,
        /// What is wrong.
        err: Box<ConfigError>,
    },
}

/// A size in bytes, written as an integer or a string with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(v) if v >= 0 => Ok(Size(v as u64)),
            Raw::Int(v) => Err(serde::de::Error::custom(format!("size {v} is negative"))),
            Raw::Str(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

/// Parse `"4GiB"`, `"512M"`, `"1000"`, `"10GB"`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "size `{text}`: unknown unit `{unit}` (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("size `{text}` is not a number with a unit"))?;
    let bytes = v * mult;
    if !bytes.is_finite() || bytes < 0.0 || bytes > 2f64.powi(62) {
        return Err(format!("size `{text}` is out of range"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("size `{text}` is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Which kind of backend serves the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// Real I/O on a file or block device.
    #[default]
    File,
    /// Data in a file, each request completed when the HDD/SSD model says.
    Emulator,
}

/// How a VM's disk is laid out in its backing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// Disk byte n is file byte n (of the VM's region).
    #[default]
    Raw,
    /// A reshaped image (paper 001): writes appended to a metadata or a data
    /// region through a remap table, with a log and checkpoints (see
    /// `docs/reshaped-image.md`). The VM needs an `image` file of its own.
    Reshaped,
}

/// How real I/O is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// A pool of threads doing pread/pwrite.
    #[default]
    Threads,
    /// One io_uring ring.
    IoUring,
}

/// `[store]`: where the VMs' disks live.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// Real I/O, or the disk-model emulator.
    #[serde(default)]
    pub kind: StoreKind,
    /// The shared backing file or block device; VMs without `image` are regions of it.
    pub path: Option<PathBuf>,
    /// Create missing backing files and extend them to fit (regular files only).
    #[serde(default = "yes")]
    pub create: bool,
    /// Open with O_DIRECT where the file system allows it.
    #[serde(default = "yes")]
    pub direct: bool,
    /// How requests reach the store (`threads` or `io_uring`).
    #[serde(default)]
    pub engine: Engine,
    /// Worker threads of the `threads` engine.
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// Requests in flight at the backend at once (the device queue depth the
    /// scheduler dispatches up to). Emulator: at most the model's depth.
    #[serde(default = "default_depth")]
    pub depth: usize,
    /// What the scheduler is told about seeks. Default: detected from sysfs
    /// for the file backend, from the model for the emulator.
    pub rotational: Option<bool>,
    /// Emulator only: the device model, as the simulator's `[disk]` table.
    pub device: Option<toml::Table>,
    /// io_uring engine: longest busy-poll window before sleeping (µs, 0 = off).
    #[serde(default = "default_poll_max_us")]
    pub poll_max_us: u64,
    /// Factor the busy-poll window grows by when an event came just after it.
    #[serde(default = "default_poll_grow")]
    pub poll_grow: u64,
    /// Divisor the window shrinks by after a wait longer than `poll_max_us`
    /// (0: polling stops at once, QEMU's default).
    #[serde(default = "default_poll_shrink")]
    pub poll_shrink: u64,
    /// Crash-consistency tests only: hold plain writes in memory until FLUSH
    /// (see `volatile.rs`). Never for real data.
    pub volatile_test: Option<crate::volatile::VolatileConfig>,
    /// Every VM's layout, unless the VM sets its own.
    #[serde(default)]
    pub layout: Layout,
    /// The reshape keys (`hvio_reshape::ReshapeConfig`) for images this
    /// daemon creates, unless the VM sets its own.
    pub reshape: Option<hvio_reshape::ReshapeConfig>,
}

fn yes() -> bool {
    true
}
fn default_threads() -> usize {
    4
}
fn default_depth() -> usize {
    32
}
/// Above this machine's device latency (virtio disk, ~500 µs at depth 32),
/// where the engine's waits fall: QEMU's 32 µs caught none of them. See
/// docs/serve.md, *Busy-polling*, for the sweep behind it.
fn default_poll_max_us() -> u64 {
    512
}
fn default_poll_grow() -> u64 {
    2
}
/// Halve rather than reset: the waits alternate between short (requests
/// arriving) and long (the device), and one long wait should not throw the
/// window away.
fn default_poll_shrink() -> u64 {
    2
}

/// `Ok` when `ok`, else the error naming `[store]`'s `key` and its `value`.
fn store_range(key: &str, value: impl ToString, ok: bool, reason: &str) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError::invalid("[store]", key, value, reason))
    }
}

impl StoreConfig {
    /// The engine's busy-polling settings.
    pub fn poll(&self) -> crate::poll::PollConfig {
        crate::poll::PollConfig {
            max_ns: self.poll_max_us * 1000,
            grow: self.poll_grow,
            shrink: self.poll_shrink,
        }
    }
}

/// `[scheduler]`: the host scheduler.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Its name (`hvio schedulers` lists them).
    #[serde(default = "default_sched")]
    pub name: String,
    /// Its tunables by Linux name.
    #[serde(default)]
    pub params: ParamValues,
}

fn default_sched() -> String {
    "noop".into()
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            name: default_sched(),
            params: ParamValues::new(),
        }
    }
}

impl Default for NbdConfig {
    fn default() -> Self {
        NbdConfig {
            unix: None,
            tcp: None,
            max_inflight: default_conn_inflight(),
            handshake_timeout_s: default_handshake_timeout(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: default_level(),
            requests: None,
        }
    }
}

/// `[nbd]`: where the NBD server listens.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NbdConfig {
    /// Unix socket path.
    pub unix: Option<PathBuf>,
    /// Loopback TCP address (e.g. `127.0.0.1:10809`).
    pub tcp: Option<SocketAddr>,
    /// Requests in flight per connection before the server stops reading.
    #[serde(default = "default_conn_inflight")]
    pub max_inflight: usize,
    /// Seconds a client has to finish the handshake (qemu-nbd's
    /// `--handshake-limit`, 10 s by default): idle or stuck connections are
    /// closed instead of holding a descriptor forever.
    #[serde(default = "default_handshake_timeout")]
    pub handshake_timeout_s: u64,
}

fn default_handshake_timeout() -> u64 {
    10
}

fn default_conn_inflight() -> usize {
    128
}

/// `[fuse]`: the FUSE export.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FuseConfig {
    /// Directory where every VM's disk appears as a file named after the VM.
    pub mountpoint: PathBuf,
    /// Let users other than root open the files.
    #[serde(default)]
    pub allow_other: bool,
}

/// `[control]`: the control API and metrics.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ControlConfig {
    /// Loopback HTTP address of the control API and `/metrics`.
    pub http: Option<SocketAddr>,
    /// Unix socket path of the same HTTP API.
    pub unix: Option<PathBuf>,
    /// Seconds a client may take to send a request's headers, idle or not
    /// (default 10): a silent connection is closed instead of holding a descriptor.
    pub header_timeout_s: Option<u64>,
}

impl ControlConfig {
    /// How long a client may take to send its request's header.
    pub fn header_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.header_timeout_s.unwrap_or(10))
    }
}

/// `[log]`: log level and the request log.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `error`, `warn`, `info`, `debug`, `trace` (overridden by `RUST_LOG`).
    #[serde(default = "default_level")]
    pub level: String,
    /// Write every request to this file as a fio iolog v3 (replayable).
    pub requests: Option<PathBuf>,
}

fn default_level() -> String {
    "info".into()
}

/// The values `[log] level` takes.
pub const LOG_LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// Where a VM's disk is exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportKind {
    /// Over NBD.
    Nbd,
    /// Over FUSE.
    Fuse,
}

/// `[[vm]]`: one VM's disk.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    /// Its name (the NBD export and FUSE file name).
    pub name: String,
    /// Its size.
    pub size: Size,
    /// Start of the VM's region in the shared backing store (default: after
    /// the previous VM's region, 1 MiB aligned).
    pub offset: Option<Size>,
    /// The VM's own image file instead of a region of `store.path`.
    pub image: Option<PathBuf>,
    /// Its weight at the host scheduler.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Scheduler attributes (`rate_iops`, ...): see `hvio schedulers`.
    #[serde(default)]
    pub attrs: BTreeMap<String, f64>,
    /// Exports of this disk (default: every export configured).
    pub exports: Option<Vec<ExportKind>>,
    /// Refuse writes.
    #[serde(default)]
    pub read_only: bool,
    /// This VM's layout (default: `[store] layout`).
    pub layout: Option<Layout>,
    /// The reshape keys for its image if this daemon creates it (default: `[store] reshape`).
    pub reshape: Option<hvio_reshape::ReshapeConfig>,
    /// Export this disk as a vhost-user-blk device (`[vm.vhost_user]`).
    pub vhost_user: Option<VhostUserConfig>,
}

/// `[vm.vhost_user]`: the VM's disk as a vhost-user-blk device on a unix
/// socket (QEMU: `-chardev socket,path=SOCKET -device vhost-user-blk-pci`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VhostUserConfig {
    /// The unix socket the hypervisor connects to.
    pub socket: PathBuf,
    /// Virtqueues offered (the guest uses up to one per vCPU).
    #[serde(default = "default_vhost_queues")]
    pub queues: u16,
    /// Descriptors per virtqueue.
    #[serde(default = "default_vhost_queue_size")]
    pub queue_size: u16,
}

fn default_vhost_queues() -> u16 {
    1
}

fn default_vhost_queue_size() -> u16 {
    256
}

fn default_weight() -> u32 {
    500
}

/// A host configuration (`hvio serve host.toml`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The backing store.
    pub store: StoreConfig,
    /// The host scheduler.
    #[serde(default)]
    pub scheduler: SchedulerConfig,
    /// The NBD server.
    #[serde(default)]
    pub nbd: NbdConfig,
    /// The FUSE export, if any.
    pub fuse: Option<FuseConfig>,
    /// The control API.
    #[serde(default)]
    pub control: ControlConfig,
    /// Logging.
    #[serde(default)]
    pub log: LogConfig,
    /// The VMs.
    #[serde(rename = "vm")]
    pub vms: Vec<VmConfig>,
    /// A switch plan: the host scheduler by time (see [`crate::plan`]).
    #[serde(default, rename = "phase")]
    pub phases: Vec<crate::plan::PhaseTable>,
    /// The host scheduler chosen by the request mix (see [`crate::online`]).
    pub online: Option<crate::online::OnlineConfig>,
}

fn device_from(t: &toml::Table) -> Result<hvio_device::DeviceConfig, toml::de::Error> {
    toml::Value::Table(t.clone()).try_into()
}

/// A `[store.device]` table that does not deserialise, as an error naming
/// the key at fault (the table was parsed already, so toml's message has
/// lost it): each key is tried alone beside `model`, and the one whose error
/// differs from `model`'s alone is named.
fn device_key_error(t: &toml::Table, e: toml::de::Error) -> ConfigError {
    let msg = |e: &toml::de::Error| hvio_core::message::tidy_serde_error(e.message());
    let base: toml::Table = t
        .iter()
        .filter(|(k, _)| *k == "model")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let base_err = device_from(&base).err().map(|e| msg(&e));
    for (k, v) in t.iter().filter(|(k, _)| *k != "model") {
        let mut one = base.clone();
        one.insert(k.clone(), v.clone());
        if let Err(e) = device_from(&one) {
            if base_err.as_deref() != Some(msg(&e).as_str()) {
                return ConfigError::invalid("[store.device]", k, v, msg(&e));
            }
        }
    }
    match (t.get("model"), base_err) {
        (Some(m), Some(why)) => ConfigError::invalid("[store.device]", "model", m, why),
        _ => ConfigError::Other(format!("[store.device]: {}", msg(&e))),
    }
}

/// The line of the key an error is about (`[store.device]` `rpm`,
/// `[[vm]] #2 ...` `size`), or of its table when the key is not written.
fn line_of(text: &str, err: &ConfigError) -> Option<usize> {
    let ConfigError::InvalidValue { context, key, .. } = err else {
        return None;
    };
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let array = [
        ("[[vm]] #", &["vm"][..]),
        ("[[phase]] #", &["phase"]),
        ("[[online.class]] #", &["online", "class"]),
    ]
    .into_iter()
    .find_map(|(prefix, path)| context.strip_prefix(prefix).map(|rest| (rest, path)));
    let (table, span) = if let Some((rest, path)) = array {
        let n: usize = rest.split(' ').next()?.parse().ok()?;
        let mut item = doc.get(path[0])?;
        for part in &path[1..] {
            item = item.as_table_like()?.get(part)?;
        }
        let t = item.as_array_of_tables()?.get(n.checked_sub(1)?)?;
        (t as &dyn toml_edit::TableLike, t.span())
    } else {
        let mut t: &dyn toml_edit::TableLike = doc.as_table();
        let mut span = None;
        for part in context.strip_prefix('[')?.strip_suffix(']')?.split('.') {
            let item = t.get(part)?;
            span = t.key(part).and_then(|k| k.span()).or(span);
            t = item.as_table_like()?;
        }
        (t, span)
    };
    let at = table.key(key).and_then(|k| k.span()).or(span)?.start.min(text.len());
    Some(text.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1)
}

/// Where a VM's bytes live once the configuration is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Index into [`Config::backing_files`].
    pub file: usize,
    /// Byte offset of the VM's first byte in that file.
    pub base: u64,
}

const REGION_ALIGN: u64 = 1 << 20;

impl Config {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<Config, ConfError> {
        let origin = path.display().to_string();
        let text = hvio_core::input::read_text(path, hvio_core::input::MAX_CONFIG_BYTES, "config")?;
        let cfg = Config::from_toml_str(&text, &origin)?;
        cfg.check_outputs(path).map_err(|err| ConfError::Invalid {
            origin,
            line: None,
            err: Box::new(ConfigError::Other(err.to_string())),
        })?;
        Ok(cfg)
    }

    /// The rule for outputs (`hvio_core::output::check_outputs`): every
    /// file the daemon writes, creates or binds (store, images, sockets,
    /// mountpoint, request log) is neither the configuration `path`, nor a
    /// `[store.device]` spec, nor another of them (same inode, or same path
    /// once resolved).
    pub fn check_outputs(&self, path: &Path) -> Result<(), hvio_core::output::SameFile> {
        let named = self.named_paths();
        let outputs: Vec<hvio_core::output::Named<'_>> = named.iter().map(|(r, p)| (r.as_str(), *p)).collect();
        let spec = self
            .store
            .device
            .as_ref()
            .and_then(|t| t.get("spec"))
            .and_then(|v| v.as_str())
            .map(PathBuf::from);
        let mut inputs: Vec<hvio_core::output::Named<'_>> = vec![("config", path)];
        if let Some(s) = &spec {
            inputs.push(("[store.device] spec", s));
        }
        hvio_core::output::check_outputs(&outputs, &inputs)
    }

    /// Parse and check a configuration; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config, ConfError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfError::Toml {
            origin: origin.to_string(),
            message: hvio_core::message::tidy_serde_error(&e.to_string()),
        })?;
        cfg.check().map_err(|err| ConfError::Invalid {
            origin: origin.to_string(),
            line: line_of(text, &err),
            err: Box::new(err),
        })?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.vms.is_empty() {
            return Err(ConfigError::Other(
                "no [[vm]] configured: at least one disk is needed".into(),
            ));
        }
        let st = &self.store;
        store_range(
            "threads",
            st.threads,
            (1..=256).contains(&st.threads),
            "must be between 1 and 256",
        )?;
        store_range(
            "depth",
            st.depth,
            (1..=4096).contains(&st.depth),
            "must be between 1 and 4096",
        )?;
        store_range(
            "poll_max_us",
            st.poll_max_us,
            st.poll_max_us <= 10_000,
            "must be between 0 (off) and 10000",
        )?;
        store_range(
            "poll_grow",
            st.poll_grow,
            (2..=64).contains(&st.poll_grow),
            "must be between 2 and 64",
        )?;
        store_range(
            "poll_shrink",
            st.poll_shrink,
            st.poll_shrink == 0 || (2..=64).contains(&st.poll_shrink),
            "must be 0 (stop polling after a long wait) or between 2 and 64",
        )?;
        if self.store.kind == StoreKind::File && self.store.device.is_some() {
            return Err(ConfigError::invalid(
                "[store]",
                "device",
                "(table)",
                "only used with kind = \"emulator\"",
            ));
        }
        if self.store.kind == StoreKind::Emulator {
            // Built, not only read: a value out of the model's range is the
            // configuration's error, found by --check.
            let dc = self.device_config()?;
            hvio_device::build_device(&dc, Path::new(".")).map_err(|e| match e {
                hvio_device::DeviceError::Param { key, value, reason } => {
                    ConfigError::invalid("[store.device]", key, value, reason)
                }
                e => ConfigError::Other(format!("[store.device]: {e}")),
            })?;
        }
        if let Some(v) = &self.store.volatile_test {
            if self.store.kind != StoreKind::File || self.store.engine != Engine::Threads {
                return Err(ConfigError::invalid(
                    "[store]",
                    "volatile_test",
                    "(table)",
                    "needs kind = \"file\" and engine = \"threads\"",
                ));
            }
            if !(0.0..=1.0).contains(&v.persist_probability) {
                return Err(ConfigError::invalid(
                    "[store] volatile_test",
                    "persist_probability",
                    v.persist_probability,
                    "must be between 0 and 1",
                ));
            }
        }
        if self.nbd.max_inflight == 0 || self.nbd.max_inflight > 65536 {
            return Err(ConfigError::invalid(
                "[nbd]",
                "max_inflight",
                self.nbd.max_inflight,
                "must be between 1 and 65536",
            ));
        }
        if let Some(t) = self.control.header_timeout_s.filter(|t| !(1..=3600).contains(t)) {
            return Err(ConfigError::invalid(
                "[control]",
                "header_timeout_s",
                t,
                "must be between 1 and 3600 seconds",
            ));
        }
        if !(1..=3600).contains(&self.nbd.handshake_timeout_s) {
            return Err(ConfigError::invalid(
                "[nbd]",
                "handshake_timeout_s",
                self.nbd.handshake_timeout_s,
                "must be between 1 and 3600 seconds",
            ));
        }
        for (table, addr) in [("[nbd]", self.nbd.tcp), ("[control]", self.control.http)] {
            if let Some(a) = addr {
                if !a.ip().is_loopback() {
                    return Err(ConfigError::invalid(
                        table,
                        "tcp",
                        a,
                        "only loopback addresses are served (127.0.0.0/8, ::1)",
                    ));
                }
            }
        }
        // The scheduler and its parameters.
        let spec = hvio_sched::spec(&self.scheduler.name)?;
        hvio_core::Params::resolve(
            &format!("[scheduler] params of `{}`", spec.name),
            spec.params,
            &self.scheduler.params,
        )?;
        let mut names = std::collections::BTreeSet::new();
        for (i, vm) in self.vms.iter().enumerate() {
            let ctx = format!("[[vm]] #{} `{}`", i + 1, vm.name);
            if vm.name.is_empty()
                || vm.name.len() > 255
                || !vm.name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                || vm.name.starts_with('.')
            {
                return Err(ConfigError::invalid(
                    &ctx,
                    "name",
                    format!("\"{}\"", vm.name),
                    "use 1-255 characters of A-Z a-z 0-9 - _ . (not starting with .)",
                ));
            }
            if !names.insert(vm.name.as_str()) {
                return Err(ConfigError::invalid(&ctx, "name", &vm.name, "is used by two VMs"));
            }
            if vm.size.0 == 0 || vm.size.0 % 512 != 0 {
                return Err(ConfigError::invalid(
                    &ctx,
                    "size",
                    vm.size.0,
                    "must be a positive multiple of 512 bytes",
                ));
            }
            if let Some(v) = &vm.vhost_user {
                if !(1..=64).contains(&v.queues) {
                    return Err(ConfigError::invalid(
                        &ctx,
                        "vhost_user.queues",
                        v.queues,
                        "must be between 1 and 64",
                    ));
                }
                if !(4..=32768).contains(&v.queue_size) || !v.queue_size.is_power_of_two() {
                    return Err(ConfigError::invalid(
                        &ctx,
                        "vhost_user.queue_size",
                        v.queue_size,
                        "must be a power of two between 4 and 32768",
                    ));
                }
            }
            if !(1..=10_000).contains(&vm.weight) {
                return Err(ConfigError::invalid(
                    &ctx,
                    "weight",
                    vm.weight,
                    "must be between 1 and 10000",
                ));
            }
            for (k, &v) in &vm.attrs {
                hvio_sched::check_stream_attr(k, v)
                    .map_err(|reason| ConfigError::invalid(&ctx, format!("attrs.{k}"), format!("{v:?}"), reason))?;
            }
            if let Some(o) = vm.offset {
                if vm.image.is_some() {
                    return Err(ConfigError::invalid(
                        &ctx,
                        "offset",
                        o.0,
                        "has no meaning for a VM with its own `image`",
                    ));
                }
                if o.0 % 4096 != 0 {
                    return Err(ConfigError::invalid(
                        &ctx,
                        "offset",
                        o.0,
                        "must be a multiple of 4096 bytes",
                    ));
                }
            }
            if vm.image.is_none() && self.store.path.is_none() {
                return Err(ConfigError::invalid(
                    &ctx,
                    "image",
                    "(missing)",
                    "needed when [store] has no `path`",
                ));
            }
            if self.layout_of(vm) == Layout::Reshaped {
                if vm.image.is_none() {
                    return Err(ConfigError::invalid(
                        &ctx,
                        "layout",
                        "reshaped",
                        "a reshaped image is a file of its own: set `image`",
                    ));
                }
                if self.store.kind != StoreKind::File {
                    return Err(ConfigError::invalid(
                        &ctx,
                        "layout",
                        "reshaped",
                        "needs [store] kind = \"file\"",
                    ));
                }
                if vm.image.as_ref().is_some_and(|p| !p.exists()) {
                    // Checked now, so `--check` finds a bad key before the image is made.
                    self.reshape_config(vm).layout(vm.size.0).map_err(|e| match e {
                        ConfigError::InvalidValue { key, value, reason, .. } => {
                            ConfigError::invalid(format!("{ctx} reshape"), key, value, reason)
                        }
                        e => e,
                    })?;
                }
            }
            if let Some(ex) = &vm.exports {
                for e in ex {
                    if *e == ExportKind::Fuse && self.fuse.is_none() {
                        return Err(ConfigError::invalid(
                            &ctx,
                            "exports",
                            "fuse",
                            "no [fuse] mountpoint configured",
                        ));
                    }
                    if *e == ExportKind::Nbd && self.nbd.unix.is_none() && self.nbd.tcp.is_none() {
                        return Err(ConfigError::invalid(
                            &ctx,
                            "exports",
                            "nbd",
                            "no [nbd] unix or tcp listener configured",
                        ));
                    }
                }
            }
        }
        self.plan()?;
        if let Some(o) = &self.online {
            o.check()?;
            if !self.phases.is_empty() {
                return Err(ConfigError::invalid(
                    "[online]",
                    "class",
                    "(table)",
                    "[online] and [[phase]] both switch the host scheduler: give one of them",
                ));
            }
        }
        if !LOG_LEVELS.contains(&self.log.level.as_str()) {
            return Err(ConfigError::invalid(
                "[log]",
                "level",
                format!("`{}`", self.log.level),
                format!("use one of {}", LOG_LEVELS.join(", ")),
            ));
        }
        // Every file the daemon opens, creates or binds is a different one.
        let mut seen: Vec<(PathBuf, String)> = Vec::new();
        for (place, path) in self.named_paths() {
            let (table, key) = place.rsplit_once(' ').unwrap_or(("", place.as_str()));
            if path.as_os_str().is_empty() {
                return Err(ConfigError::invalid(table, key, "\"\"", "must name a path"));
            }
            let norm: PathBuf = path.components().collect();
            if let Some((_, first)) = seen.iter().find(|(p, _)| *p == norm) {
                return Err(ConfigError::invalid(
                    table,
                    key,
                    format!("\"{}\"", path.display()),
                    format!("is also {first}: each file, socket and mountpoint must be a different path"),
                ));
            }
            seen.push((norm, place));
        }
        // Regions of the shared store must not overlap.
        let place = self.placements();
        let mut regions: Vec<(u64, u64, &str)> = self
            .vms
            .iter()
            .zip(&place)
            .filter(|(vm, _)| vm.image.is_none())
            .map(|(vm, p)| (p.base, p.base + vm.size.0, vm.name.as_str()))
            .collect();
        regions.sort();
        for w in regions.windows(2) {
            if w[1].0 < w[0].1 {
                return Err(ConfigError::Other(format!(
                    "[[vm]] `{}` (bytes {}..{}) overlaps `{}` (bytes {}..{}) in the shared store",
                    w[1].2, w[1].0, w[1].1, w[0].2, w[0].0, w[0].1
                )));
            }
        }
        Ok(())
    }

    /// The checked switch plan (empty without `[[phase]]`).
    pub fn plan(&self) -> Result<Vec<crate::plan::Step>, ConfigError> {
        crate::plan::check(&self.phases)
    }

    /// Every path the configuration names, with where it is named
    /// (`"<table> <key>"`), in file order.
    pub fn named_paths(&self) -> Vec<(String, &Path)> {
        let mut v: Vec<(String, &Path)> = Vec::new();
        if let Some(p) = &self.store.path {
            v.push(("[store] path".into(), p));
        }
        for (i, vm) in self.vms.iter().enumerate() {
            if let Some(p) = &vm.image {
                v.push((format!("[[vm]] #{} `{}` image", i + 1, vm.name), p));
            }
            if let Some(u) = &vm.vhost_user {
                v.push((format!("[[vm]] #{} `{}` vhost_user.socket", i + 1, vm.name), &u.socket));
            }
        }
        if let Some(p) = &self.nbd.unix {
            v.push(("[nbd] unix".into(), p));
        }
        if let Some(f) = &self.fuse {
            v.push(("[fuse] mountpoint".into(), &f.mountpoint));
        }
        if let Some(p) = &self.control.unix {
            v.push(("[control] unix".into(), p));
        }
        if let Some(p) = &self.log.requests {
            v.push(("[log] requests".into(), p));
        }
        v
    }

    /// The emulator's device model (`[store.device]`, default: the built-in HDD).
    pub fn device_config(&self) -> Result<hvio_device::DeviceConfig, ConfigError> {
        match &self.store.device {
            None => Ok(hvio_device::DeviceConfig::default()),
            Some(t) => device_from(t).map_err(|e| device_key_error(t, e)),
        }
    }

    /// The files that back the VMs: the shared store first (if any), then
    /// each VM's own image.
    pub fn backing_files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        if let Some(p) = &self.store.path {
            files.push(p.clone());
        }
        for vm in &self.vms {
            if let Some(img) = &vm.image {
                files.push(img.clone());
            }
        }
        files
    }

    /// Where each VM lives (same order as `vms`).
    pub fn placements(&self) -> Vec<Placement> {
        let shared = usize::from(self.store.path.is_some());
        let mut next_image = shared;
        let mut cursor = 0u64;
        self.vms
            .iter()
            .map(|vm| {
                if vm.image.is_some() {
                    let p = Placement {
                        file: next_image,
                        base: 0,
                    };
                    next_image += 1;
                    p
                } else {
                    let base = vm.offset.map(|o| o.0).unwrap_or(cursor);
                    cursor = (base + vm.size.0).div_ceil(REGION_ALIGN) * REGION_ALIGN;
                    Placement { file: 0, base }
                }
            })
            .collect()
    }

    /// `vm`'s layout.
    pub fn layout_of(&self, vm: &VmConfig) -> Layout {
        vm.layout.unwrap_or(self.store.layout)
    }

    /// The reshape keys for `vm`'s image, were this daemon to create it: a
    /// fresh image has no base (unwritten sectors read as zeroes).
    pub fn reshape_config(&self, vm: &VmConfig) -> hvio_reshape::ReshapeConfig {
        vm.reshape
            .clone()
            .or_else(|| self.store.reshape.clone())
            .unwrap_or(hvio_reshape::ReshapeConfig {
                base: false,
                ..Default::default()
            })
    }

    /// Whether `vm` is served by export `kind`.
    pub fn exported(&self, vm: &VmConfig, kind: ExportKind) -> bool {
        match &vm.exports {
            Some(list) => list.contains(&kind),
            None => match kind {
                ExportKind::Nbd => self.nbd.unix.is_some() || self.nbd.tcp.is_some(),
                ExportKind::Fuse => self.fuse.is_some(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[store]
path = "/tmp/x.img"
[scheduler]
name = "deadline"
params = { fifo_batch = 8 }
[nbd]
unix = "/tmp/x.sock"
[[vm]]
name = "vm1"
size = "1GiB"
weight = 1000
[[vm]]
name = "vm2"
size = 1048576
"#;

    #[test]
    fn the_example_configs_are_valid() {
        for name in ["host.toml", "host-emulated-hdd.toml", "host-online.toml"] {
            let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples")
                .join(name);
            let c = Config::load(&p).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(c.vms.len(), 2, "{name}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("10GB").unwrap(), 10_000_000_000);
        assert_eq!(parse_size("0.5KiB").unwrap(), 512);
        assert!(parse_size("4 parsecs").unwrap_err().contains("parsecs"));
        assert!(parse_size("x").is_err());
    }

    #[test]
    fn parses_and_places_regions() {
        let c = Config::from_toml_str(GOOD, "host.toml").unwrap();
        assert_eq!(c.scheduler.name, "deadline");
        let p = c.placements();
        assert_eq!(p[0], Placement { file: 0, base: 0 });
        assert_eq!(p[1], Placement { file: 0, base: 1 << 30 });
        assert!(c.exported(&c.vms[0], ExportKind::Nbd));
        assert!(!c.exported(&c.vms[0], ExportKind::Fuse));
    }

    #[test]
    fn errors_name_key_and_value() {
        let e = Config::from_toml_str(&GOOD.replace("weight = 1000", "wieght = 1000"), "host.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("host.toml") && e.contains("wieght"), "{e}");
        let e = Config::from_toml_str(&GOOD.replace("\"deadline\"", "\"dedline\""), "h.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("dedline"), "{e}");
        let e = Config::from_toml_str(&GOOD.replace("fifo_batch = 8", "fifo_batch = 0"), "h.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("fifo_batch") && e.contains('0'), "{e}");
        let e = Config::from_toml_str(&GOOD.replace("\"1GiB\"", "\"1GiX\""), "h.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("1GiX"), "{e}");
        let e = Config::from_toml_str(
            &GOOD.replace("unix = \"/tmp/x.sock\"", "tcp = \"10.0.0.1:10809\""),
            "h.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("10.0.0.1") && e.contains("loopback"), "{e}");
        let e = Config::from_toml_str(
            &GOOD.replace("size = 1048576", "size = 1048576\noffset = \"512MiB\""),
            "h.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("overlaps"), "{e}");
        let e = Config::from_toml_str(&GOOD.replace("name = \"vm2\"", "name = \"vm1\""), "h.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("two VMs"), "{e}");
        let emu = GOOD.replace(
            "[store]\n",
            "[store]\nkind = \"emulator\"\n[store.device]\nmodel = \"hdd\"\nrpmm = 5400\n[nothing]\n",
        );
        let e = Config::from_toml_str(&emu, "h.toml").unwrap_err().to_string();
        assert!(e.contains("nothing"), "{e}");
        let emu = GOOD.replace(
            "[store]\n",
            "[store]\nkind = \"emulator\"\ndevice = { model = \"hdd\", rpmm = 5400 }\n",
        );
        let e = Config::from_toml_str(&emu, "h.toml").unwrap_err().to_string();
        assert!(e.contains("[store.device]") && e.contains("rpmm"), "{e}");
        let emu = GOOD.replace(
            "[store]\n",
            "[store]\nkind = \"emulator\"\ndevice = { model = \"hdd\", rpm = 5400 }\n",
        );
        assert!(Config::from_toml_str(&emu, "h.toml").is_ok());
    }

    #[test]
    fn poll_settings() {
        let c = Config::from_toml_str(GOOD, "h.toml").unwrap();
        assert_eq!(
            c.store.poll(),
            crate::poll::PollConfig {
                max_ns: 512_000,
                grow: 2,
                shrink: 2
            }
        );
        let with =
            |extra: &str| Config::from_toml_str(&GOOD.replace("[store]\n", &format!("[store]\n{extra}\n")), "h.toml");
        let c = with("poll_max_us = 0").unwrap();
        assert_eq!(c.store.poll().max_ns, 0);
        let c = with("poll_max_us = 100\npoll_grow = 4\npoll_shrink = 0").unwrap();
        assert_eq!(
            (c.store.poll().max_ns, c.store.poll().grow, c.store.poll().shrink),
            (100_000, 4, 0)
        );
        for (extra, key, value) in [
            ("poll_max_us = 20000", "poll_max_us", "20000"),
            ("poll_grow = 1", "poll_grow", "1"),
            ("poll_shrink = 1", "poll_shrink", "1"),
            ("poll_shrink = 65", "poll_shrink", "65"),
        ] {
            let e = with(extra).unwrap_err().to_string();
            assert!(e.contains("h.toml") && e.contains(key) && e.contains(value), "{e}");
        }
        let e = with("poll_max_us = -1").unwrap_err().to_string();
        assert!(e.contains("poll_max_us"), "{e}");
    }
}
