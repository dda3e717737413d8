//! The gateway's text control lines (`key=value` fields joined by `|`, one line per request, as
//! `databento/src/live/protocol.rs` writes them): the CRAM reply the server expects, and the
//! parsing of the client's authentication, subscription and unsubscription lines. Sans-IO: strings
//! in, values or a message for the client out.

use dbn::{SType, Schema};
use std::fmt::Write as _;

/// The API key length the gateway and the official client accept (`ApiKey::new` checks it).
pub const API_KEY_LEN: usize = 32;

/// The key's last characters that the client appends to its CRAM reply, its "bucket id".
pub const BUCKET_ID_LEN: usize = 5;

/// The symbol that names every instrument of the dataset.
pub const ALL_SYMBOLS: &str = "ALL_SYMBOLS";

/// `<lowercase hex sha256("<challenge>|<key>")>-<last 5 characters of key>`, the `auth` field
/// a client with `key` sends for `challenge`.
pub fn cram_reply(challenge: &str, key: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{challenge}|{key}").as_bytes(),
    );
    let mut reply = String::with_capacity(64 + 1 + BUCKET_ID_LEN);
    for byte in digest.as_ref() {
        let _ = write!(reply, "{byte:02x}");
    }
    reply.push('-');
    reply.push_str(&key[key.len().saturating_sub(BUCKET_ID_LEN)..]);
    reply
}

/// The fields of a line, in order; an error names a field without `=`.
fn fields(line: &str) -> Result<Vec<(&str, &str)>, String> {
    line.split('|')
        .filter(|field| !field.is_empty())
        .map(|field| {
            field
                .split_once('=')
                .ok_or_else(|| format!("field {field:?} is not key=value"))
        })
        .collect()
}

fn field<'a>(fields: &[(&'a str, &'a str)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, value)| *value)
}

fn flag(fields: &[(&str, &str)], key: &str) -> Result<Option<bool>, String> {
    match field(fields, key) {
        None => Ok(None),
        Some("0") => Ok(Some(false)),
        Some("1") => Ok(Some(true)),
        Some(other) => Err(format!("{key} must be 0 or 1, not {other:?}")),
    }
}

/// A client's authentication line, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthRequest {
    /// `<hex>-<bucket>`.
    pub auth: String,
    pub dataset: String,
    pub encoding: String,
    pub compression: String,
    pub ts_out: bool,
    pub client: String,
    pub heartbeat_interval_s: Option<u64>,
    pub slow_reader_behavior: Option<String>,
}

/// Parses `auth=..|dataset=..|encoding=..|compression=..|ts_out=..|client=..[|..]`; the error
/// is the text of the `error` field the gateway answers with.
pub fn parse_auth(line: &str) -> Result<AuthRequest, String> {
    let fields = fields(line)?;
    let required = |key: &str| {
        field(&fields, key)
            .map(str::to_owned)
            .ok_or_else(|| format!("missing {key}"))
    };
    let heartbeat_interval_s = match field(&fields, "heartbeat_interval_s") {
        None => None,
        Some(text) => match text.parse::<u64>() {
            Ok(seconds) if (1..=3600).contains(&seconds) => Some(seconds),
            _ => {
                return Err(format!(
                    "heartbeat_interval_s must be a whole number of seconds from 1 to 3600, not {text:?}"
                ))
            }
        },
    };
    let slow_reader_behavior = match field(&fields, "slow_reader_behavior") {
        None => None,
        Some(behavior @ ("warn" | "skip")) => Some(behavior.to_owned()),
        Some(other) => {
            return Err(format!(
                "slow_reader_behavior must be warn or skip, not {other:?}"
            ))
        }
    };
    Ok(AuthRequest {
        auth: required("auth")?,
        dataset: required("dataset")?,
        encoding: required("encoding")?,
        compression: required("compression")?,
        ts_out: flag(&fields, "ts_out")?.unwrap_or(false),
        client: field(&fields, "client").unwrap_or_default().to_owned(),
        heartbeat_interval_s,
        slow_reader_behavior,
    })
}

/// One subscription line: a chunk of a subscription's symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionLine {
    pub schema: Schema,
    pub stype_in: SType,
    pub symbols: Vec<String>,
    pub snapshot: bool,
    /// The last chunk of its subscription.
    pub is_last: bool,
    /// Replay from this time (ns since the Unix epoch).
    pub start: Option<u64>,
    pub id: Option<u32>,
}

/// One unsubscription line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsubscriptionLine {
    pub schema: Schema,
    pub stype_in: SType,
    pub symbols: Vec<String>,
    pub is_last: bool,
}

/// What a client may send after authenticating.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientLine {
    Subscribe(SubscriptionLine),
    Unsubscribe(UnsubscriptionLine),
    StartSession,
}

fn schema_and_stype(fields: &[(&str, &str)]) -> Result<(Schema, SType, Vec<String>), String> {
    let schema_text = field(fields, "schema").ok_or("missing schema")?;
    let schema: Schema = schema_text
        .parse()
        .map_err(|_| format!("unknown schema {schema_text:?}"))?;
    let stype_text = field(fields, "stype_in").ok_or("missing stype_in")?;
    let stype_in: SType = stype_text
        .parse()
        .map_err(|_| format!("unknown stype_in {stype_text:?}"))?;
    let symbols: Vec<String> = field(fields, "symbols")
        .ok_or("missing symbols")?
        .split(',')
        .map(str::trim)
        .filter(|symbol| !symbol.is_empty())
        .map(str::to_owned)
        .collect();
    if symbols.is_empty() {
        return Err("symbols names no symbol".to_owned());
    }
    Ok((schema, stype_in, symbols))
}

/// Parses a line after authentication (without its `\n`); the error says what is wrong, for an
/// `ErrorMsg` with code `InvalidSubscription`.
pub fn parse_client_line(line: &str) -> Result<ClientLine, String> {
    if line == "start_session" {
        return Ok(ClientLine::StartSession);
    }
    if let Some(rest) = line.strip_prefix("unsubscribe|") {
        let fields = fields(rest)?;
        let (schema, stype_in, symbols) = schema_and_stype(&fields)?;
        return Ok(ClientLine::Unsubscribe(UnsubscriptionLine {
            schema,
            stype_in,
            symbols,
            is_last: flag(&fields, "is_last")?.unwrap_or(true),
        }));
    }
    let fields = fields(line)?;
    if field(&fields, "schema").is_none() {
        let shown: String = line.chars().take(64).collect();
        return Err(format!("not a subscription: {shown:?}"));
    }
    let (schema, stype_in, symbols) = schema_and_stype(&fields)?;
    let snapshot = flag(&fields, "snapshot")?.unwrap_or(false);
    let start = match field(&fields, "start") {
        None => None,
        Some(text) => Some(
            text.parse::<u64>()
                .map_err(|_| format!("start must be ns since the Unix epoch, not {text:?}"))?,
        ),
    };
    if snapshot && start.is_some() {
        return Err("cannot request snapshot with start time".to_owned());
    }
    let id = match field(&fields, "id") {
        None => None,
        Some(text) => Some(
            text.parse::<u32>()
                .map_err(|_| format!("id must be a u32, not {text:?}"))?,
        ),
    };
    Ok(ClientLine::Subscribe(SubscriptionLine {
        schema,
        stype_in,
        symbols,
        snapshot,
        is_last: flag(&fields, "is_last")?.unwrap_or(true),
        start,
        id,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cram_reply_is_lowercase_hex_sha256_and_the_bucket() {
        // `printf 'abc|0123456789abcdefghijklmnopqrstuv' | sha256sum`
        assert_eq!(
            cram_reply("abc", "0123456789abcdefghijklmnopqrstuv"),
            "44c2c5ec12a4b859ef481296e461afedad56e89a96c8d93cb78f3162ec165486-rstuv"
        );
    }

    #[test]
    fn auth_lines_are_parsed() {
        let auth = parse_auth(
            "auth=ab-12345|dataset=GLBX.MDP3|encoding=dbn|compression=none|ts_out=0|\
             client=Databento/0.64.0 Rust linux-x86_64|heartbeat_interval_s=5|slow_reader_behavior=skip",
        )
        .unwrap();
        assert_eq!(auth.dataset, "GLBX.MDP3");
        assert_eq!(auth.heartbeat_interval_s, Some(5));
        assert_eq!(auth.slow_reader_behavior.as_deref(), Some("skip"));
        assert!(!auth.ts_out);
        assert!(parse_auth("auth=x|dataset=D|encoding=dbn|compression=none|ts_out=2").is_err());
        assert!(parse_auth("dataset=D|encoding=dbn|compression=none").is_err());
        assert!(parse_auth(
            "auth=x|dataset=D|encoding=dbn|compression=none|heartbeat_interval_s=0"
        )
        .is_err());
    }

    #[test]
    fn subscription_lines_are_parsed_and_checked() {
        let line = parse_client_line(
            "schema=mbo|stype_in=raw_symbol|symbols=ESM5,NQM5|snapshot=0|is_last=1|start=17|id=3",
        )
        .unwrap();
        assert_eq!(
            line,
            ClientLine::Subscribe(SubscriptionLine {
                schema: Schema::Mbo,
                stype_in: SType::RawSymbol,
                symbols: vec!["ESM5".into(), "NQM5".into()],
                snapshot: false,
                is_last: true,
                start: Some(17),
                id: Some(3),
            })
        );
        assert_eq!(
            parse_client_line("start_session"),
            Ok(ClientLine::StartSession)
        );
        for bad in [
            "schema=nope|stype_in=raw_symbol|symbols=A",
            "schema=mbo|stype_in=raw_symbol",
            "schema=mbo|stype_in=raw_symbol|symbols=A|snapshot=1|start=5",
            "schema=mbo|stype_in=raw_symbol|symbols=A|id=-1",
            "schema=mbo|stype_in=raw_symbol|symbols=",
            "hello",
            "",
        ] {
            assert!(parse_client_line(bad).is_err(), "{bad}");
        }
        let ClientLine::Unsubscribe(unsub) =
            parse_client_line("unsubscribe|schema=mbo|stype_in=raw_symbol|symbols=A|is_last=1")
                .unwrap()
        else {
            panic!("an unsubscription")
        };
        assert_eq!(unsub.symbols, ["A"]);
    }
}
