//! The task behind one WebSocket connection: it moves bytes between the
//! WebSocket's binary messages and the pipe whose other end the hub reads
//! and writes as a [`Transport`], and closes the WebSocket as
//! `spec/PROTOCOL.md` §11.3 says:
//!
//! * the hub ended the stream (after its GOAWAY, if any): every byte is
//!   sent, then Close 1000;
//! * the peer sent Close, or the TCP connection ended: the hub reads end of
//!   stream after the bytes that came before;
//! * a text message (1003) or a message over the limit (1009): Close with
//!   that code, no GOAWAY (the stream may stop mid-frame), and the hub
//!   reads end of stream.
//!
//! The closing handshake is bounded by [`CLOSE_GRACE`], so a peer that never
//! answers a Close does not hold the connection.

use std::future::poll_fn;
use std::io::IoSlice;
use std::time::Duration;

use bytes::BytesMut;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use hubwire::transport::memory::MemoryTransport;
use hubwire::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::error::CapacityError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

/// Bytes sent in one message at most: what one read of the pipe takes
/// (the hub's writes are usually far smaller, and arrive whole).
const CHUNK: usize = 64 * 1024;
/// How long the closing handshake may take once either side has ended.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How the inbound half ended.
enum Inbound {
    /// Close received, or the TCP connection ended.
    PeerEnded,
    /// The peer broke the rules: close the WebSocket with this.
    Refused(CloseFrame),
}

/// Pumps until both sides are done. `pipe` is the pump's end.
pub(crate) async fn run<S>(ws: WebSocketStream<S>, pipe: MemoryTransport, label: String)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let ended = {
        let inbound = inbound(&mut stream, &pipe);
        let outbound = outbound(&mut sink, &pipe);
        tokio::pin!(inbound, outbound);
        tokio::select! {
            why = &mut inbound => Some(why),
            () = &mut outbound => None,
        }
    };
    let closing = async {
        match ended {
            // The hub ended the stream and all of it was sent: Close 1000,
            // then wait for the peer's Close.
            None => {
                let _ = sink.send(Message::Close(Some(close_frame(CloseCode::Normal, "")))).await;
                while let Some(Ok(m)) = stream.next().await {
                    if m.is_close() {
                        break;
                    }
                }
            }
            Some(Inbound::PeerEnded) => {
                pipe.shutdown();
                // Sends the Close reply tungstenite queued, if the peer sent one.
                let _ = sink.close().await;
            }
            Some(Inbound::Refused(frame)) => {
                tracing::info!(client = %label, "websocket closed: {}", frame.reason);
                pipe.shutdown();
                let _ = sink.send(Message::Close(Some(frame))).await;
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, closing).await;
    pipe.shutdown();
}

/// Binary messages → the pipe, until the peer ends or breaks a rule. Once
/// the hub's end is gone it waits: the hub is closing the stream, and
/// `outbound` ends with the last bytes it wrote sent (returning here
/// first could drop them mid-send).
async fn inbound<S>(stream: &mut SplitStream<WebSocketStream<S>>, pipe: &MemoryTransport) -> Inbound
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        let bytes = match stream.next().await {
            Some(Ok(Message::Binary(b))) => b,
            Some(Ok(Message::Text(_))) => {
                let why = "protocol_error: text message (hubwire travels in binary messages)";
                return Inbound::Refused(close_frame(CloseCode::Unsupported, why));
            }
            Some(Ok(Message::Close(_))) | None => return Inbound::PeerEnded,
            Some(Ok(_)) => continue, // Ping, Pong: answered by tungstenite.
            Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                let why = format!("message of {size} bytes is over the limit of {max_size}");
                return Inbound::Refused(close_frame(CloseCode::Size, &why));
            }
            Some(Err(WsError::Protocol(e))) => return Inbound::Refused(close_frame(CloseCode::Protocol, &e.to_string())),
            Some(Err(_)) => return Inbound::PeerEnded,
        };
        let mut at = 0;
        while at < bytes.len() {
            match poll_fn(|cx| pipe.poll_write(cx, &[IoSlice::new(&bytes[at..])])).await {
                Ok(n) => at += n,
                Err(_) => std::future::pending().await,
            }
        }
    }
}

/// The pipe → one binary message per read, until the hub ends the stream
/// (or the WebSocket fails).
async fn outbound<S>(sink: &mut SplitSink<WebSocketStream<S>, Message>, pipe: &MemoryTransport)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        // A fresh buffer each time: its capacity caps the message at CHUNK,
        // and the message owns it until sent.
        let mut buf = BytesMut::with_capacity(CHUNK);
        match poll_fn(|cx| pipe.poll_read(cx, &mut buf)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if sink.send(Message::Binary(buf.freeze())).await.is_err() {
            return;
        }
    }
}

fn close_frame(code: CloseCode, reason: &str) -> CloseFrame {
    CloseFrame { code, reason: reason.into() }
}

/// Checked at compile time: the pump reads at most [`CHUNK`] bytes, which
/// must fit in one message.
const _: () = assert!(CHUNK <= crate::websocket::MAX_MESSAGE);
