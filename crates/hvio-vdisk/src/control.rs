//! The control API: HTTP/1.1 on a loopback TCP port and/or a unix socket.
//!
//! | method and path | what |
//! |---|---|
//! | `GET /vms` | every VM with its weight, attributes and statistics (JSON) |
//! | `GET /status` | the scheduler, its parameters and counters, and the VMs (JSON) |
//! | `GET /metrics` | Prometheus text |
//! | `GET /schedulers` | the schedulers that can be switched to |
//! | `PUT /scheduler` | `{"name": "cfq", "params": {"slice_idle": 0}, "policy": "freeze"}`: switch (policy `freeze`, the default, `drain` or `migrate`); answers once swapped, with the switch's cost |
//! | `PUT /vms/NAME` | `{"weight": 250, "attrs": {"rate_iops": 100}}`: `Scheduler::set_stream` |
//! | `POST /phase` | `{"name": "shuffle"}` (or `{}`: the next step): take a plan step now; answers once swapped, with the cost |
//! | `GET /plan`, `PUT /plan` | the plan; `{"phase": [{"name": ..., "at_s": 0, "host": "cfq", ...}]}`: run this plan from now (`[]`: none) |

use crate::config::ControlConfig;
use crate::daemon::ServeError;
use crate::engine::{Control, EngineHandle};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hvio_sched::SwitchPolicy;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use tokio::sync::{oneshot, watch};

type Resp = Response<Full<Bytes>>;

fn reply(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Resp {
    Response::builder()
        .status(status)
        .header("content-type", ctype)
        .body(Full::new(body.into()))
        .expect("static response parts are valid")
}

fn json<T: serde::Serialize>(v: &T) -> Resp {
    match serde_json::to_vec_pretty(v) {
        Ok(b) => reply(StatusCode::OK, "application/json", b),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

fn error(status: StatusCode, msg: &str) -> Resp {
    let body = serde_json::json!({ "error": msg });
    reply(status, "application/json", body.to_string())
}

struct SwitchBody {
    name: String,
    params: BTreeMap<String, f64>,
    policy: SwitchPolicy,
}

struct StreamBody {
    weight: Option<u32>,
    attrs: BTreeMap<String, f64>,
}

/// A JSON object body; errors name the key that is wrong and its value.
fn object(body: &[u8], known: &[&str]) -> Result<serde_json::Map<String, Value>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let Value::Object(m) = v else {
        return Err(format!("body must be a JSON object, not {v}"));
    };
    if let Some(k) = m.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!("unknown key `{k}` (known: {})", known.join(", ")));
    }
    Ok(m)
}

/// `{"key": number, ...}` under `key` (absent: empty).
fn numbers(m: &serde_json::Map<String, Value>, key: &str) -> Result<BTreeMap<String, f64>, String> {
    match m.get(key) {
        None => Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, v)| match v.as_f64() {
                Some(x) => Ok((k.clone(), x)),
                None => Err(format!("`{key}.{k}`: expected a number, got {v}")),
            })
            .collect(),
        Some(v) => Err(format!("`{key}`: expected an object of numbers, got {v}")),
    }
}

impl SwitchBody {
    fn parse(body: &[u8]) -> Result<SwitchBody, String> {
        let m = object(body, &["name", "params", "policy"])?;
        let name = match m.get("name") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => return Err(format!("`name`: expected a scheduler name, got {v}")),
            None => return Err("`name`: missing (the scheduler to switch to)".into()),
        };
        let policy = match m.get("policy") {
            None => SwitchPolicy::Freeze,
            Some(Value::String(s)) => s.parse().map_err(|e| format!("`policy`: {e}"))?,
            Some(v) => return Err(format!("`policy`: expected drain, freeze or migrate, got {v}")),
        };
        Ok(SwitchBody {
            name,
            params: numbers(&m, "params")?,
            policy,
        })
    }
}

/// A finished switch as the API answers it: the scheduler now running and the cost.
fn switch_json(r: &hvio_sched::SwitchReport) -> Value {
    serde_json::json!({
        "scheduler": r.to,
        "from": r.from,
        "policy": r.policy.as_str(),
        "drain_us": r.drain_time() / 1_000,
        "handed_over": r.handed_over,
        "bypassed": r.bypassed,
        "held": r.held,
    })
}

/// `POST /phase`: `{"name": "..."}`, or `{}` / no body for the next step.
fn phase_body(body: &[u8]) -> Result<Option<String>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let m = object(body, &["name"])?;
    match m.get("name") {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(format!("`name`: expected a step name, got {v}")),
    }
}

/// `PUT /plan`: `{"phase": [...]}`, each step as a `[[phase]]` table;
/// errors name the step, the key and the value.
fn plan_body(body: &[u8]) -> Result<Vec<crate::plan::Step>, String> {
    let m = object(body, &["phase"])?;
    let list = match m.get("phase") {
        Some(Value::Array(a)) => a,
        Some(v) => return Err(format!("`phase`: expected a list of steps, got {v}")),
        None => return Err("`phase`: missing (the plan's steps; [] for none)".into()),
    };
    let tables = list
        .iter()
        .enumerate()
        .map(|(i, v)| {
            serde_json::from_value::<crate::plan::PhaseTable>(v.clone()).map_err(|e| {
                format!(
                    "[[phase]] #{}: {}",
                    i + 1,
                    hvio_core::message::tidy_serde_error(&e.to_string())
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    crate::plan::check(&tables).map_err(|e| e.to_string())
}

impl StreamBody {
    fn parse(body: &[u8]) -> Result<StreamBody, String> {
        let m = object(body, &["weight", "attrs"])?;
        let weight = match m.get("weight") {
            None => None,
            Some(v) => match v.as_u64().and_then(|w| u32::try_from(w).ok()) {
                Some(w) => Some(w),
                None => return Err(format!("`weight`: expected a whole number 1..10000, got {v}")),
            },
        };
        Ok(StreamBody {
            weight,
            attrs: numbers(&m, "attrs")?,
        })
    }
}

/// Largest request body read (the API's JSON bodies are a few hundred bytes).
pub const MAX_BODY: usize = 64 * 1024;

/// The request's body, at most [`MAX_BODY`] bytes of it: a larger one is
/// refused (413) without being buffered, as soon as its length is known.
async fn read_body(req: Request<Incoming>) -> Result<Bytes, Resp> {
    let too_large = |n: &dyn std::fmt::Display| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("body of {n} bytes: at most {MAX_BODY} bytes are accepted"),
        )
    };
    let announced = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = announced.filter(|&n| n > MAX_BODY as u64) {
        return Err(too_large(&n));
    }
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(too_large(&format!("more than {MAX_BODY}"))),
        Err(e) => Err(error(StatusCode::BAD_REQUEST, &format!("body: {e}"))),
    }
}

async fn ask<T>(engine: &EngineHandle, make: impl FnOnce(oneshot::Sender<T>) -> Control) -> Option<T> {
    let (tx, rx) = oneshot::channel();
    if !engine.control(make(tx)) {
        return None;
    }
    rx.await.ok()
}

async fn handle(req: Request<Incoming>, engine: EngineHandle) -> Result<Resp, std::convert::Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().trim_end_matches('/').to_string();
    let gone = || error(StatusCode::SERVICE_UNAVAILABLE, "the scheduler is stopping");
    let resp = match (&method, path.as_str()) {
        (&Method::GET, "/metrics") => match ask(&engine, Control::Metrics).await {
            Some(text) => reply(StatusCode::OK, "text/plain; version=0.0.4", text),
            None => gone(),
        },
        (&Method::GET, "/status") => match ask(&engine, Control::Status).await {
            Some(s) => json(&s),
            None => gone(),
        },
        (&Method::GET, "/vms") => match ask(&engine, Control::Status).await {
            Some(s) => json(&s.vms),
            None => gone(),
        },
        (&Method::GET, "/schedulers") => {
            let list: Vec<_> = hvio_sched::SCHEDULERS
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "name": s.name,
                        "summary": s.summary,
                        "params": s.params.iter().map(|p| serde_json::json!({"name": p.name, "default": p.default, "unit": p.unit, "doc": p.doc})).collect::<Vec<_>>(),
                    })
                })
                .collect();
            json(&list)
        }
        (&Method::PUT, "/scheduler") | (&Method::POST, "/scheduler") => {
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(resp) => return Ok(resp),
            };
            match SwitchBody::parse(&body) {
                Err(e) => error(StatusCode::BAD_REQUEST, &e),
                Ok(b) => match ask(&engine, |reply| Control::Switch {
                    name: b.name.clone(),
                    params: b.params,
                    policy: b.policy,
                    reply,
                })
                .await
                {
                    Some(Ok(r)) => json(&switch_json(&r)),
                    Some(Err(e)) => error(StatusCode::BAD_REQUEST, &e),
                    None => gone(),
                },
            }
        }
        (&Method::POST, "/phase") | (&Method::PUT, "/phase") => {
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(resp) => return Ok(resp),
            };
            match phase_body(&body) {
                Err(e) => error(StatusCode::BAD_REQUEST, &e),
                Ok(name) => match ask(&engine, |reply| Control::Phase { name, reply }).await {
                    Some(Ok((step, r))) => {
                        let mut v = switch_json(&r);
                        v["step"] = Value::String(step);
                        json(&v)
                    }
                    Some(Err(e)) if e.contains("in progress") => error(StatusCode::CONFLICT, &e),
                    Some(Err(e)) => error(StatusCode::BAD_REQUEST, &e),
                    None => gone(),
                },
            }
        }
        (&Method::GET, "/plan") => match ask(&engine, Control::Status).await {
            Some(s) => json(&s.plan),
            None => gone(),
        },
        (&Method::PUT, "/plan") | (&Method::POST, "/plan") => {
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(resp) => return Ok(resp),
            };
            match plan_body(&body) {
                Err(e) => error(StatusCode::BAD_REQUEST, &e),
                Ok(steps) => match ask(&engine, |reply| Control::LoadPlan { steps, reply }).await {
                    Some(Ok(plan)) => json(&plan),
                    Some(Err(e)) => error(StatusCode::CONFLICT, &e),
                    None => gone(),
                },
            }
        }
        (&Method::PUT, p) | (&Method::POST, p) if p.starts_with("/vms/") => {
            let vm = p["/vms/".len()..].to_string();
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(resp) => return Ok(resp),
            };
            match StreamBody::parse(&body) {
                Err(e) => error(StatusCode::BAD_REQUEST, &e),
                Ok(b) => match ask(&engine, |reply| Control::SetStream {
                    vm: vm.clone(),
                    weight: b.weight,
                    attrs: b.attrs,
                    reply,
                })
                .await
                {
                    Some(Ok(())) => json(&serde_json::json!({ "vm": vm })),
                    Some(Err(e)) if e.starts_with("unknown VM") => error(StatusCode::NOT_FOUND, &e),
                    Some(Err(e)) => error(StatusCode::BAD_REQUEST, &e),
                    None => gone(),
                },
            }
        }
        _ => error(
            StatusCode::NOT_FOUND,
            &format!(
                "no route {method} {path}: try GET /vms, /status, /metrics, /schedulers, /plan; PUT /scheduler, /vms/NAME, /plan; POST /phase"
            ),
        ),
    };
    Ok(resp)
}

fn serve_conn<S>(stream: S, engine: EngineHandle, header_timeout: std::time::Duration)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let svc = hyper::service::service_fn(move |req| handle(req, engine.clone()));
        if let Err(e) = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), svc)
            .await
        {
            tracing::debug!(error = %e, "control: connection error");
        }
    });
}

/// Start the listeners; returns the bound TCP address and the socket files
/// to remove at exit. Directories made for the socket are appended to `created`.
pub async fn start(
    cfg: &ControlConfig,
    engine: EngineHandle,
    shutdown: watch::Receiver<bool>,
    created: &mut Vec<PathBuf>,
) -> Result<(Option<SocketAddr>, Vec<PathBuf>), ServeError> {
    let mut addr = None;
    let mut sockets = Vec::new();
    let header_timeout = cfg.header_timeout();
    if let Some(a) = cfg.http {
        let l = tokio::net::TcpListener::bind(a).await.map_err(|err| ServeError::Io {
            what: "bind control API",
            path: a.to_string(),
            err,
        })?;
        let local = l.local_addr().ok();
        addr = local;
        tracing::info!(addr = ?local, "control API listening (http)");
        let engine = engine.clone();
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    r = l.accept() => match r {
                        Ok((s, _)) => serve_conn(s, engine.clone(), header_timeout),
                        Err(e) => if !crate::daemon::accept_failed("control http", &e, &mut stop).await {
                            return;
                        },
                    },
                    _ = stop.changed() => return,
                }
            }
        });
    }
    if let Some(p) = &cfg.unix {
        crate::daemon::remove_stale_socket(p, created)?;
        let l = tokio::net::UnixListener::bind(p).map_err(|err| ServeError::Io {
            what: "bind control socket",
            path: p.display().to_string(),
            err,
        })?;
        sockets.push(p.clone());
        tracing::info!(path = %p.display(), "control API listening (unix)");
        let mut stop = shutdown;
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    r = l.accept() => match r {
                        Ok((s, _)) => serve_conn(s, engine.clone(), header_timeout),
                        Err(e) => if !crate::daemon::accept_failed("control unix", &e, &mut stop).await {
                            return;
                        },
                    },
                    _ = stop.changed() => return,
                }
            }
        });
    }
    Ok((addr, sockets))
}
