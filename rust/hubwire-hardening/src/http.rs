//! Raw HTTP/1.1 requests to the hub's gateway, written byte for byte so
//! that they can carry what a browser or an attacker would send (any Host,
//! any Origin, a body trickled or never finished).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An answer: status code and body.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body as text (chunked framing left in: cases only search it).
    pub body: String,
}

/// Sends `head` (the request line and headers, without the blank line; a
/// `Connection: close` is added) and `body`, and reads the whole answer
/// within 5 s.
pub async fn request(addr: &str, head: &str, body: &[u8]) -> Result<Answer, String> {
    let go = async {
        let mut s = TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        let mut req = format!("{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
        req.extend_from_slice(body);
        s.write_all(&req).await.map_err(|e| format!("write: {e}"))?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.map_err(|e| format!("read: {e}"))?;
        parse(&out)
    };
    tokio::time::timeout(Duration::from_secs(5), go).await.map_err(|_| "no answer within 5 s".to_string())?
}

/// Parses a whole HTTP/1.1 answer.
fn parse(bytes: &[u8]) -> Result<Answer, String> {
    let text = String::from_utf8_lossy(bytes);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {:?}", text.chars().take(60).collect::<String>()))?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok(Answer { status, body })
}

/// Sends `head` (request line and headers, no blank line) and reads only
/// the answer's status line and headers, within 3 s: for requests whose
/// answer keeps the connection open (a WebSocket upgrade).
pub async fn status_of(addr: &str, head: &str) -> Result<u16, String> {
    let go = async {
        let mut s = TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        s.write_all(format!("{head}\r\n\r\n").as_bytes()).await.map_err(|e| format!("write: {e}"))?;
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") && got.len() < 65536 {
            let n = s.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..n]);
        }
        parse(&got).map(|a| a.status)
    };
    tokio::time::timeout(Duration::from_secs(3), go).await.map_err(|_| "no answer within 3 s".to_string())?
}
