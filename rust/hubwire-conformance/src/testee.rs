//! Starting a testee and talking to it over the control protocol
//! (`conformance/README.md`): JSON lines on its stdin and stdout.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hubwire::transport::{child, memory, DynTransport};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::pattern::{match_scalar, Vars};

/// How to start the implementation under test.
#[derive(Clone, Debug)]
pub struct Testee {
    /// Language, for reports and known-failing files.
    pub lang: String,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Run the Rust testee in this process for the `memory` transport.
    pub in_process: bool,
}

/// A running testee.
pub struct Running {
    control: Box<dyn AsyncWrite + Unpin + Send>,
    events: mpsc::UnboundedReceiver<Value>,
    backlog: Vec<Value>,
    /// Its last stderr lines, for failure messages.
    pub stderr: Arc<Mutex<Vec<String>>>,
    _child: Option<Child>,
    _task: Option<tokio::task::JoinHandle<()>>,
}

fn route_line(line: &str, events: &mpsc::UnboundedSender<Value>, stderr: &Mutex<Vec<String>>, stream: &str) {
    if stream == "stdout" && line.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            let _ = events.send(v);
            return;
        }
    }
    let mut e = stderr.lock().unwrap();
    e.push(format!("[{stream}] {line}"));
    if e.len() > 40 {
        e.remove(0);
    }
}

impl Testee {
    /// Starts the testee for `transport`. For `child` and `memory`, also
    /// returns the runner's end of the connection.
    pub async fn start(&self, transport: &str) -> Result<(Running, Option<DynTransport>), String> {
        let (tx, events) = mpsc::unbounded_channel();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let running =
            |control, child, task| Running { control, events, backlog: Vec::new(), stderr: stderr.clone(), _child: child, _task: task };
        match transport {
            "memory" if self.in_process => {
                let (ours, theirs) = memory::pair();
                let (ctl_ours, ctl_theirs) = tokio::io::duplex(64 * 1024);
                let (ev_ours, ev_theirs) = tokio::io::duplex(64 * 1024);
                let task = tokio::spawn(async move {
                    let _ = hubwire_testee::run(BufReader::new(ctl_theirs), ev_theirs, Some(Arc::new(theirs))).await;
                });
                pump(ev_ours, tx.clone(), stderr.clone(), "stdout");
                Ok((running(Box::new(ctl_ours), None, Some(task)), Some(Arc::new(ours))))
            }
            "memory" => Err("memory transport needs an in-process testee".into()),
            "child" => {
                let (tx2, err2) = (tx.clone(), stderr.clone());
                let opts = child::SpawnOptions {
                    name: self.lang.clone(),
                    log: Some(Arc::new(move |_: &str, stream: &str, line: &str| route_line(line, &tx2, &err2, stream))),
                    pipe_stdin: true,
                    line_max: child::DEFAULT_LINE_MAX,
                };
                let (t, mut proc_) = child::spawn(self.command(), opts).map_err(|e| e.to_string())?;
                let stdin = proc_.stdin.take().ok_or("no stdin")?;
                Ok((running(Box::new(stdin), Some(proc_), None), Some(Arc::new(t))))
            }
            _ => {
                let mut cmd = self.command();
                cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
                let mut proc_ = cmd.spawn().map_err(|e| format!("cannot start {:?}: {e}", self.command))?;
                if let Some(out) = proc_.stdout.take() {
                    pump(out, tx.clone(), stderr.clone(), "stdout");
                }
                if let Some(err) = proc_.stderr.take() {
                    pump(err, tx.clone(), stderr.clone(), "stderr");
                }
                let stdin = proc_.stdin.take().ok_or("no stdin")?;
                Ok((running(Box::new(stdin), Some(proc_), None), None))
            }
        }
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.command[0]);
        c.args(&self.command[1..]);
        c
    }
}

/// Routes the lines of one of the testee's outputs.
fn pump<R: AsyncRead + Unpin + Send + 'static>(r: R, tx: mpsc::UnboundedSender<Value>, err: Arc<Mutex<Vec<String>>>, stream: &'static str) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(r).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            route_line(&l, &tx, &err, stream);
        }
    });
}

impl Running {
    /// Sends one command.
    pub async fn send(&mut self, cmd: &Value) -> Result<(), String> {
        let mut line = cmd.to_string();
        line.push('\n');
        self.control.write_all(line.as_bytes()).await.map_err(|e| format!("control write failed: {e}"))?;
        self.control.flush().await.map_err(|e| format!("control write failed: {e}"))
    }

    /// Waits for an event matching `pattern` (fields it names; variables
    /// allowed). Events that do not match are kept for later.
    pub async fn expect(&mut self, pattern: &Map<String, Value>, vars: &mut Vars, wait: Duration) -> Result<Value, String> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut i = 0;
        loop {
            while i < self.backlog.len() {
                let mut trial = vars.clone();
                if event_matches(pattern, &self.backlog[i], &mut trial).is_ok() {
                    *vars = trial;
                    return Ok(self.backlog.remove(i));
                }
                i += 1;
            }
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(ev)) => self.backlog.push(ev),
                Ok(None) => return Err(format!("the testee exited; waiting for event {}", Value::Object(pattern.clone()))),
                Err(_) => {
                    let close = self.backlog.iter().map(|e| {
                        let mut t = vars.clone();
                        format!("{e} ({})", event_matches(pattern, e, &mut t).unwrap_err())
                    });
                    return Err(format!(
                        "no event {} within {wait:?}; events seen: [{}]",
                        Value::Object(pattern.clone()),
                        close.collect::<Vec<_>>().join(", ")
                    ));
                }
            }
        }
    }
}

/// Checks an event against a pattern. `items` compares element-wise;
/// `message_contains` is a substring check.
pub fn event_matches(pattern: &Map<String, Value>, ev: &Value, vars: &mut Vars) -> Result<(), String> {
    for (k, want) in pattern {
        if k == "message_contains" {
            let msg = ev["message"].as_str().unwrap_or("");
            if !msg.contains(want.as_str().unwrap_or("")) {
                return Err(format!("message {msg:?} does not contain {want}"));
            }
            continue;
        }
        let got = ev.get(k).ok_or_else(|| format!("no field {k}"))?;
        match_scalar(k, want, got, vars)?;
    }
    Ok(())
}
