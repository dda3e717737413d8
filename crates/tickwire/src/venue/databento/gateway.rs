//! The Databento Live Subscription Gateway's text protocol, sans-IO: the challenge-response
//! authentication the network thread runs before the DBN stream ([`GatewayAuth`], a
//! [`Preamble`]), and the subscription lines the control thread sends once it is done.
//!
//! The exchange, per connection (plain TCP, lines end in `\n`, fields are `key=value` joined by
//! `|`):
//!
//! ```text
//! gateway: lsg_version=...            (a greeting, content ignored)
//! gateway: cram=<challenge>
//! client:  auth=<sha256("<challenge>|<key>") hex>-<last 5 of key>|dataset=..|encoding=dbn|...
//! gateway: success=1|session_id=..    (or success=0|error=..)
//! client:  schema=..|stype_in=..|symbols=..|snapshot=0|is_last=1[|start=..][|id=..]  (per chunk)
//! client:  start_session
//! gateway: DBN metadata, then records
//! ```
//!
//! **Invariant:** the key never leaves this module except hashed with the gateway's challenge
//! (and its last five characters, which the protocol sends as the key's bucket).

use crate::net::engine::{Preamble, PreambleError, PreambleStep};
use std::fmt::Write as _;

/// Symbols per subscription line: the gateway's limit (Databento's clients chunk the same way).
pub const SYMBOLS_PER_LINE: usize = 500;
/// The longest control line accepted from the gateway before its DBN stream starts.
const MAX_LINE: usize = 4096;
/// The gateway's port.
pub const GATEWAY_PORT: u16 = 13000;
/// What the client tells the gateway it is.
pub const CLIENT: &str = concat!("tickwire/", env!("CARGO_PKG_VERSION"));

/// The gateway host of a dataset: `GLBX.MDP3` is at `glbx-mdp3.lsg.databento.com`.
pub fn gateway_host(dataset: &str) -> String {
    format!(
        "{}.lsg.databento.com",
        dataset.to_ascii_lowercase().replace('.', "-")
    )
}

/// What the gateway does when the client reads too slowly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlowReaderBehavior {
    /// Keep everything, send a warning (`SystemMsg`, slow-reader warning).
    Warn,
    /// Skip records to catch up, and say so (`ErrorMsg`, skipped records).
    Skip,
}

impl SlowReaderBehavior {
    pub fn as_str(self) -> &'static str {
        match self {
            SlowReaderBehavior::Warn => "warn",
            SlowReaderBehavior::Skip => "skip",
        }
    }
}

/// The session settings sent with the authentication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    pub dataset: String,
    /// Ask for the gateway's send timestamp after each record (tickwire does not: false).
    pub ts_out: bool,
    /// Seconds between the gateway's heartbeats when idle (`None`: the gateway's 30 s).
    pub heartbeat_interval_s: Option<u32>,
    pub slow_reader_behavior: Option<SlowReaderBehavior>,
}

/// The `auth=` line answering `challenge` with `key`.
pub fn auth_line(challenge: &str, key: &str, options: &SessionOptions) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{challenge}|{key}").as_bytes(),
    );
    let mut line = String::with_capacity(256);
    line.push_str("auth=");
    for byte in digest.as_ref() {
        let _ = write!(line, "{byte:02x}");
    }
    let bucket = &key[key.len().saturating_sub(5)..];
    let _ = write!(
        line,
        "-{bucket}|dataset={}|encoding=dbn|compression=none|ts_out={}|client={CLIENT}",
        options.dataset,
        u8::from(options.ts_out)
    );
    if let Some(seconds) = options.heartbeat_interval_s {
        let _ = write!(line, "|heartbeat_interval_s={seconds}");
    }
    if let Some(behavior) = options.slow_reader_behavior {
        let _ = write!(line, "|slow_reader_behavior={}", behavior.as_str());
    }
    line.push('\n');
    line
}

/// Why a key cannot be used with the gateway.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.len() < 5 {
        return Err("is shorter than 5 characters; Databento keys are 32".to_owned());
    }
    if !key
        .bytes()
        .all(|byte| byte.is_ascii_graphic() && byte != b'|')
    {
        return Err(
            "holds characters a Databento key does not (spaces, `|`, non-ASCII)".to_owned(),
        );
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AuthState {
    Greeting,
    Challenge,
    Reply,
    Done,
}

/// The client side of the gateway's challenge-response authentication, run by the network
/// thread before the DBN stream: a [`Preamble`].
pub struct GatewayAuth {
    key: String,
    options: SessionOptions,
    state: AuthState,
    session_id: Option<String>,
}

impl GatewayAuth {
    pub fn new(key: String, options: SessionOptions) -> GatewayAuth {
        GatewayAuth {
            key,
            options,
            state: AuthState::Greeting,
            session_id: None,
        }
    }

    /// The session id the gateway gave, once authenticated.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    fn line(&mut self, line: &str, reply: &mut Vec<u8>) -> Result<(), PreambleError> {
        let line = line.trim_end_matches('\r');
        match self.state {
            // The greeting (`lsg_version=...`) says nothing the client needs; a gateway that
            // skips it and challenges at once is answered all the same.
            AuthState::Greeting if !line.starts_with("cram=") => {
                self.state = AuthState::Challenge;
                Ok(())
            }
            AuthState::Greeting | AuthState::Challenge => {
                let challenge = line.strip_prefix("cram=").ok_or_else(|| {
                    PreambleError::Protocol(format!(
                        "the gateway sent `{}` where its challenge (`cram=...`) belongs",
                        printable(line)
                    ))
                })?;
                reply.extend_from_slice(auth_line(challenge, &self.key, &self.options).as_bytes());
                self.state = AuthState::Reply;
                Ok(())
            }
            AuthState::Reply => {
                let mut success = None;
                let mut error = None;
                for field in line.split('|') {
                    match field.split_once('=') {
                        Some(("success", value)) => success = Some(value == "1"),
                        Some(("error", value)) => error = Some(value),
                        Some(("session_id", value)) => self.session_id = Some(value.to_owned()),
                        _ => {}
                    }
                }
                match success {
                    Some(true) => {
                        self.state = AuthState::Done;
                        Ok(())
                    }
                    Some(false) => Err(PreambleError::Refused(
                        error.map_or_else(|| printable(line), printable),
                    )),
                    None => Err(PreambleError::Protocol(format!(
                        "the gateway's answer to the authentication has no `success`: `{}`",
                        printable(line)
                    ))),
                }
            }
            AuthState::Done => Ok(()),
        }
    }
}

impl Preamble for GatewayAuth {
    fn read(&mut self, input: &[u8], reply: &mut Vec<u8>) -> Result<PreambleStep, PreambleError> {
        let mut consumed = 0;
        while self.state != AuthState::Done {
            let rest = &input[consumed..];
            let Some(end) = rest.iter().position(|&byte| byte == b'\n') else {
                if rest.len() > MAX_LINE {
                    return Err(PreambleError::Protocol(format!(
                        "the gateway sent {} bytes without a line break during authentication",
                        rest.len()
                    )));
                }
                break;
            };
            let line = std::str::from_utf8(&rest[..end]).map_err(|_| {
                PreambleError::Protocol(
                    "the gateway sent a line that is not UTF-8 during authentication".to_owned(),
                )
            })?;
            consumed += end + 1;
            self.line(line, reply)?;
        }
        Ok(PreambleStep {
            consumed,
            done: self.state == AuthState::Done,
        })
    }
}

/// A gateway line for a log: control characters escaped, cut at 200 characters.
fn printable(text: &str) -> String {
    text.chars()
        .take(200)
        .flat_map(char::escape_default)
        .collect()
}

/// One subscription: a schema for some symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription<'a> {
    pub schema: &'a str,
    pub stype_in: &'a str,
    pub symbols: &'a [String],
    /// Ask for an MBO snapshot first (`snapshot=1`).
    pub snapshot: bool,
    /// Replay from this time (ns since the epoch), intraday.
    pub start_ns: Option<u64>,
    pub id: Option<u32>,
}

/// Appends a subscription's lines to `out`: one per 500 symbols, `is_last=1` on the last.
pub fn subscription_lines(subscription: &Subscription<'_>, out: &mut String) {
    let chunks = subscription.symbols.chunks(SYMBOLS_PER_LINE).count().max(1);
    let mut symbols = subscription.symbols.chunks(SYMBOLS_PER_LINE);
    for index in 0..chunks {
        let chunk = symbols.next().unwrap_or(&[]);
        let _ = write!(
            out,
            "schema={}|stype_in={}|symbols={}|snapshot={}|is_last={}",
            subscription.schema,
            subscription.stype_in,
            chunk.join(","),
            u8::from(subscription.snapshot),
            u8::from(index + 1 == chunks),
        );
        if let Some(start) = subscription.start_ns {
            let _ = write!(out, "|start={start}");
        }
        if let Some(id) = subscription.id {
            let _ = write!(out, "|id={id}");
        }
        out.push('\n');
    }
}

/// The line that starts the session's DBN stream.
pub const START_SESSION: &str = "start_session\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> SessionOptions {
        SessionOptions {
            dataset: "GLBX.MDP3".to_owned(),
            ts_out: false,
            heartbeat_interval_s: Some(10),
            slow_reader_behavior: Some(SlowReaderBehavior::Warn),
        }
    }

    const KEY: &str = "db-abcdefghijklmnopqrstuvwxyzABC";

    #[test]
    fn answers_the_challenge_and_hands_over_the_rest() {
        let mut auth = GatewayAuth::new(KEY.to_owned(), options());
        let mut reply = Vec::new();
        // Split mid-line: nothing is consumed until a line is whole.
        let step = auth
            .read(b"lsg_version=0.7.2\ncram=abc", &mut reply)
            .unwrap();
        assert_eq!(
            step,
            PreambleStep {
                consumed: 18,
                done: false
            }
        );
        assert!(reply.is_empty());
        let step = auth.read(b"cram=abcdef\n", &mut reply).unwrap();
        assert_eq!(step.consumed, 12);
        let line = String::from_utf8(reply.clone()).unwrap();
        let expected =
            ring::digest::digest(&ring::digest::SHA256, format!("abcdef|{KEY}").as_bytes());
        let hex: String = expected
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            line,
            format!(
                "auth={hex}-yzABC|dataset=GLBX.MDP3|encoding=dbn|compression=none|ts_out=0|\
                 client={CLIENT}|heartbeat_interval_s=10|slow_reader_behavior=warn\n"
            )
        );
        let step = auth
            .read(b"success=1|session_id=42\n\x03DBN", &mut reply)
            .unwrap();
        assert_eq!(
            step,
            PreambleStep {
                consumed: 24,
                done: true
            }
        );
        assert_eq!(auth.session_id(), Some("42"));
    }

    #[test]
    fn a_refusal_carries_the_gateways_words() {
        let mut auth = GatewayAuth::new(KEY.to_owned(), options());
        let mut reply = Vec::new();
        let error = auth
            .read(
                b"lsg_version=1\ncram=x\nsuccess=0|error=Authentication failed.\n",
                &mut reply,
            )
            .unwrap_err();
        assert!(matches!(&error, PreambleError::Refused(text) if text == "Authentication failed."));
    }

    #[test]
    fn a_missing_challenge_or_an_endless_line_is_a_protocol_error() {
        let mut reply = Vec::new();
        let mut auth = GatewayAuth::new(KEY.to_owned(), options());
        assert!(matches!(
            auth.read(b"hello\nnot a challenge\n", &mut reply),
            Err(PreambleError::Protocol(_))
        ));
        let mut auth = GatewayAuth::new(KEY.to_owned(), options());
        assert!(matches!(
            auth.read(&[b'x'; MAX_LINE + 1], &mut reply),
            Err(PreambleError::Protocol(_))
        ));
        let mut auth = GatewayAuth::new(KEY.to_owned(), options());
        assert!(matches!(
            auth.read(b"v\ncram=1\nsession_id=3\n", &mut reply),
            Err(PreambleError::Protocol(_))
        ));
    }

    #[test]
    fn subscriptions_come_in_chunks_of_500_symbols() {
        let symbols: Vec<String> = (0..1_200).map(|i| format!("S{i}")).collect();
        let mut out = String::new();
        subscription_lines(
            &Subscription {
                schema: "mbo",
                stype_in: "raw_symbol",
                symbols: &symbols,
                snapshot: false,
                start_ns: Some(1_700_000_000_000_000_000),
                id: Some(7),
            },
            &mut out,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("schema=mbo|stype_in=raw_symbol|symbols=S0,S1,"));
        assert!(lines[0].ends_with("S499|snapshot=0|is_last=0|start=1700000000000000000|id=7"));
        assert!(lines[2].contains("|symbols=S1000,"));
        assert!(lines[2].ends_with("S1199|snapshot=0|is_last=1|start=1700000000000000000|id=7"));
    }

    #[test]
    fn the_gateway_host_follows_the_dataset() {
        assert_eq!(gateway_host("GLBX.MDP3"), "glbx-mdp3.lsg.databento.com");
        assert_eq!(gateway_host("XNAS.ITCH"), "xnas-itch.lsg.databento.com");
    }
}
