//! Chat commands, one provider per command, as in the Go study this
//! project started from (study 003 in `docs/studies.md`): a chat hub
//! delegates each `!command` to the program that handles it. The hub
//! starts one process per command from `examples/hubwire.toml`:
//!
//! ```text
//! example-chat 8ball       # unary:         {"question"} -> {"text"}
//! example-chat countdown   # server stream: {"from"} -> {"text"} per tick
//! example-chat wordcount   # client stream: {"text"} per message -> {"text"}
//! ```
//!
//! Each prints a line on stdout when it starts: the hub shows it as a log
//! line tagged with the provider's name.

use std::process::ExitCode;
use std::time::Duration;

use hubwire::{ConnectionOptions, Error, ItemSink, ItemStream, Provider};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// What every command answers with: the text to post in the chat.
#[derive(Serialize, Deserialize)]
struct Reply {
    text: String,
}

#[derive(Serialize, Deserialize)]
struct Question {
    question: String,
}

#[derive(Serialize, Deserialize)]
struct Countdown {
    from: u32,
}

const ANSWERS: [&str; 8] = [
    "It is certain.",
    "Without a doubt.",
    "Ask again later.",
    "Outlook good.",
    "Very doubtful.",
    "Signs point to yes.",
    "My reply is no.",
    "Cannot predict now.",
];

fn reply_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

fn eight_ball() -> Provider {
    Provider::new("8ball")
        .unary("8ball", |_ctx, q: Question| async move {
            if q.question.trim().is_empty() {
                return Err(Error::invalid_argument("ask a question"));
            }
            // The same question always gets the same answer.
            let h = q.question.bytes().fold(5381u32, |h, b| h.wrapping_mul(33) ^ b as u32);
            Ok(Reply { text: format!("🎱 {}", ANSWERS[h as usize % ANSWERS.len()]) })
        })
        .describe(
            "8ball",
            json!({"type": "object", "properties": {"question": {"type": "string", "pattern": "\\S"}}, "required": ["question"]}),
            reply_schema(),
            None,
        )
        .doc("8ball", "!8ball <question>: the magic 8-ball answers (the question must not be blank)")
}

fn countdown() -> Provider {
    Provider::new("countdown")
        .server_stream("countdown", |_ctx, c: Countdown, sink: ItemSink<Reply>| async move {
            if c.from > 60 {
                return Err(Error::invalid_argument("count down from 60 at most"));
            }
            for n in (1..=c.from).rev() {
                sink.send(&Reply { text: format!("{n}…") }).await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            sink.send(&Reply { text: "🚀 liftoff!".into() }).await
        })
        .describe(
            "countdown",
            json!({"type": "object", "properties": {"from": {"type": "integer", "minimum": 0, "maximum": 60}}, "required": ["from"]}),
            reply_schema(),
            None,
        )
        .doc("countdown", "!countdown <n>: counts down from n (0 to 60; more is invalid_argument) in the channel, one message per tick")
}

fn wordcount() -> Provider {
    Provider::new("wordcount")
        .client_stream("wordcount", |_ctx, mut messages: ItemStream<Reply>| async move {
            let (mut n, mut words) = (0, 0);
            while let Some(m) = messages.next().await? {
                n += 1;
                words += m.text.split_whitespace().count();
            }
            Ok(Reply { text: format!("{words} words in {n} messages") })
        })
        .describe("wordcount", reply_schema(), reply_schema(), None)
        .doc("wordcount", "!wordcount: counts the words of the messages streamed to it")
}

fn main() -> ExitCode {
    let command = std::env::args().nth(1).unwrap_or_default();
    let provider = match command.as_str() {
        "8ball" => eight_ball(),
        "countdown" => countdown(),
        "wordcount" => wordcount(),
        _ => {
            eprintln!("usage: example-chat 8ball|countdown|wordcount  (started by the hub: see examples/hubwire.toml)");
            return ExitCode::from(2);
        }
    };
    println!("chat command {command} ready (pid {})", std::process::id());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    match rt.block_on(provider.serve_child(ConnectionOptions::new(command.clone()))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("example-chat {command}: {e}");
            ExitCode::from(1)
        }
    }
}
