//! JSON-RPC 2.0 over a child's stdin and stdout, one request per line (the
//! Go hub study's winning "cli" design, made a protocol). Requests carry
//! the payload's JSON value as `params`; the child parses each line and
//! answers with it as `result`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::endpoint::{spawn_stdio, Children};
use crate::client::{check_len, Client};
use crate::model::Job;
use crate::payload::shape;
use crate::peer::Peer;
use crate::runner::Target;

#[derive(Serialize, Deserialize)]
struct Request {
    jsonrpc: String,
    id: u64,
    method: String,
    params: Value,
}

#[derive(Serialize, Deserialize)]
struct Response {
    jsonrpc: String,
    id: u64,
    result: Value,
}

/// One child per connection.
pub fn start(job: &Job) -> io::Result<Box<dyn Target>> {
    Ok(Box::new(Stdio { params: job.payload.json_value(), children: Children::default() }))
}

struct Stdio {
    params: Value,
    children: Children,
}

impl Target for Stdio {
    fn connect(&self) -> io::Result<Box<dyn Client>> {
        let (peer, r, w) = spawn_stdio(&["jsonrpc"])?;
        self.children.add(peer.pid());
        Ok(Box::new(RpcClient {
            r: BufReader::with_capacity(1 << 16, File::from(r)),
            w: BufWriter::with_capacity(1 << 16, File::from(w)),
            line: String::new(),
            id: 0,
            params: self.params.clone(),
            _peer: peer,
        }))
    }

    fn peers(&self) -> Vec<u32> {
        self.children.pids()
    }
}

struct RpcClient {
    r: BufReader<File>,
    w: BufWriter<File>,
    line: String,
    id: u64,
    params: Value,
    _peer: Peer,
}

impl Client for RpcClient {
    fn call(&mut self) -> io::Result<()> {
        self.id += 1;
        let req = Request { jsonrpc: "2.0".into(), id: self.id, method: "echo".into(), params: self.params.clone() };
        serde_json::to_writer(&mut self.w, &req)?;
        self.w.write_all(b"\n")?;
        self.w.flush()?;
        self.line.clear();
        if self.r.read_line(&mut self.line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let resp: Response = serde_json::from_str(&self.line)?;
        if resp.id != self.id {
            return Err(io::Error::other(format!("answer to request {} instead of {}", resp.id, self.id)));
        }
        check_len(shape(&resp.result), shape(&self.params))
    }
}

/// `bench-peer jsonrpc`: answers each request line with its params.
pub fn serve() -> io::Result<()> {
    let mut r = io::stdin().lock();
    let mut w = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let req: Request = serde_json::from_str(&line)?;
        serde_json::to_writer(&mut w, &Response { jsonrpc: "2.0".into(), id: req.id, result: req.params })?;
        w.write_all(b"\n")?;
        w.flush()?;
    }
}
