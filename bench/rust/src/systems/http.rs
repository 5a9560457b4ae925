//! HTTP/1.1: a POST per call on a keep-alive connection, hyper on both
//! sides (the Go hub study's "web"). Raw payloads are the body as is; JSON
//! payloads are parsed and re-serialized by the server, as a JSON API would.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::endpoint::{Addr, Listening};
use crate::client::{check_len, runtime, AsyncClient, Client, OnRuntime};
use crate::model::{Encoding, Job};
use crate::payload::{shape, Payload};
use crate::runner::Target;
use crate::serve::{Listen, ServeConnection};

/// Starts `bench-peer http1`.
pub fn start(job: &Job) -> io::Result<Box<dyn Target>> {
    Ok(Box::new(Server {
        server: Listening::start(&["http1"], job.transport)?,
        payload: job.payload.clone(),
        json: job.encoding == Encoding::Json,
    }))
}

struct Server {
    server: Listening,
    payload: Arc<Payload>,
    json: bool,
}

impl Target for Server {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let rt = runtime()?;
        let sender = rt.block_on(async {
            match &self.server.addr {
                Addr::Unix(p) => handshake(tokio::net::UnixStream::connect(p).await?).await,
                Addr::Tcp(a) => {
                    let s = tokio::net::TcpStream::connect(a).await?;
                    s.set_nodelay(true)?;
                    handshake(s).await
                }
            }
        })?;
        let (payload, json) = (self.payload.clone(), self.json);
        Ok(OnRuntime::boxed(rt, HttpClient { sender, payload, json }))
    }

    fn peers(&self) -> Vec<u32> {
        vec![self.server.pid()]
    }
}

/// Opens an HTTP/1.1 connection (kept alive) and drives it in a task.
async fn handshake<S>(s: S) -> io::Result<SendRequest>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s)).await.map_err(io::Error::other)?;
    tokio::spawn(conn);
    Ok(tx)
}

type SendRequest = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

struct HttpClient {
    sender: SendRequest,
    payload: Arc<Payload>,
    json: bool,
}

async fn post(sender: &mut SendRequest, payload: &Payload, json: bool) -> io::Result<()> {
    let (body, ctype) = if json {
        (Bytes::from(serde_json::to_vec(&payload.json_value())?), "application/json")
    } else {
        (payload.raw.clone(), "application/octet-stream")
    };
    let req =
        Request::post("/echo").header("host", "bench").header("content-type", ctype).body(Full::new(body)).map_err(io::Error::other)?;
    sender.ready().await.map_err(io::Error::other)?;
    let resp = sender.send_request(req).await.map_err(io::Error::other)?;
    if !resp.status().is_success() {
        return Err(io::Error::other(format!("HTTP {}", resp.status())));
    }
    let got = resp.into_body().collect().await.map_err(io::Error::other)?.to_bytes();
    if json {
        let v: Value = serde_json::from_slice(&got)?;
        check_len(shape(&v), shape(&payload.json_value()))
    } else {
        check_len(got.len(), payload.len())
    }
}

impl AsyncClient for HttpClient {
    async fn call(&mut self) -> io::Result<()> {
        post(&mut self.sender, &self.payload, self.json).await
    }
}

async fn echo(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let json = req.headers().get("content-type").is_some_and(|v| v == "application/json");
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(Response::builder().status(400).body(Full::new(Bytes::from(e.to_string()))).expect("a valid response")),
    };
    let out = if json {
        match serde_json::from_slice::<Value>(&body).and_then(|v| serde_json::to_vec(&v)) {
            Ok(v) => Bytes::from(v),
            Err(e) => return Ok(Response::builder().status(400).body(Full::new(Bytes::from(e.to_string()))).expect("a valid response")),
        }
    } else {
        body
    };
    Ok(Response::new(Full::new(out)))
}

/// `bench-peer http1`: an echo server, one task per connection.
pub fn serve(listen: Listen) -> io::Result<()> {
    runtime()?.block_on(listen.serve_tokio(EchoServer(hyper::server::conn::http1::Builder::new())))
}

/// hyper's HTTP/1.1 server with `echo` as its service.
#[derive(Clone)]
struct EchoServer(hyper::server::conn::http1::Builder);

impl ServeConnection for EchoServer {
    async fn serve<S>(self, s: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let _ = self.0.serve_connection(TokioIo::new(s), hyper::service::service_fn(echo)).await;
    }
}
