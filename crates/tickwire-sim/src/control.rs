//! The venue's live subscription requests, sans-IO: a client's JSON text message in, the reply
//! out, the connection's subscriptions updated. Shapes and error codes follow Binance USDⓈ-M
//! "Live Subscribing/Unsubscribing to streams": `SUBSCRIBE`, `UNSUBSCRIBE`, `LIST_SUBSCRIPTIONS`,
//! `SET_PROPERTY` and `GET_PROPERTY` of the one property, `combined`; errors as
//! `{"error":{"code":..,"msg":".."},"id":..}` with codes 0 (unknown property), 1 (invalid value
//! type), 2 (invalid request) and 3 (invalid JSON).

use crate::options::SimVenue;
use serde_json::{Map, Value};

/// What one connection listens to and how its payloads are shaped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subscriptions {
    /// Stream names in subscription order, each once, matched case-sensitively as the venue does.
    pub streams: Vec<String>,
    /// Combined payloads (`{"stream":..,"data":..}`) rather than raw ones.
    pub combined: bool,
}

impl Subscriptions {
    pub fn contains(&self, stream: &str) -> bool {
        self.streams.iter().any(|name| name == stream)
    }

    pub fn add(&mut self, streams: &[String]) {
        for stream in streams {
            if !self.contains(stream) {
                self.streams.push(stream.clone());
            }
        }
    }

    pub fn remove(&mut self, streams: &[String]) {
        self.streams.retain(|name| !streams.contains(name));
    }
}

/// The reply to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub text: String,
    /// Whether the request subscribed to something (the pacer may be waiting for that).
    pub subscribed: bool,
}

const METHODS: &str = "SUBSCRIBE, UNSUBSCRIBE, LIST_SUBSCRIPTIONS, SET_PROPERTY, GET_PROPERTY";

/// Handles one text message from a client, as Binance USDⓈ-M does.
#[cfg(test)]
pub fn handle(text: &[u8], subscriptions: &mut Subscriptions) -> Reply {
    handle_for(SimVenue::BinanceUsdmFutures, text, subscriptions)
}

/// Handles one text message from a client of `venue`. Binance Spot differs in three documented
/// ways: its errors are `{"code":..,"msg":..,"id":..}` ("Error Messages"), its `id` may be a
/// 64-bit signed integer, an alphanumeric string of at most 36 characters or `null` (CHANGELOG
/// 2024-04-10), and only its stream names subscribe (`crate::spot::is_spot_stream`; the
/// answer to another name is a code 2 "Invalid request", the documented code for a request the
/// venue cannot take, since the page lists no message of its own for it).
pub fn handle_for(venue: SimVenue, text: &[u8], subscriptions: &mut Subscriptions) -> Reply {
    let spot = venue.is_spot();
    let error_reply = |code: u8, msg: &str, id: Value| error_reply(spot, code, msg, id);
    let reply = |text: String| Reply {
        text,
        subscribed: false,
    };
    let value: Value = match serde_json::from_slice(text) {
        Ok(value) => value,
        Err(error) => {
            return reply(error_reply(
                3,
                &format!("Invalid JSON: {error}"),
                Value::Null,
            ))
        }
    };
    let Value::Object(request) = value else {
        return reply(error_reply(
            2,
            "Invalid request: expected a JSON object",
            Value::Null,
        ));
    };
    let id = match request.get("id") {
        Some(Value::Number(number)) if number.is_u64() => Value::Number(number.clone()),
        Some(Value::Number(number)) if spot && number.is_i64() => Value::Number(number.clone()),
        Some(Value::String(text))
            if spot && text.len() <= 36 && text.bytes().all(|b| b.is_ascii_alphanumeric()) =>
        {
            Value::String(text.clone())
        }
        Some(Value::Null) if spot => Value::Null,
        other => {
            // Echo what was sent where it is a JSON scalar, so the client can match the error.
            let id = other
                .filter(|id| !id.is_object() && !id.is_array())
                .cloned();
            return reply(error_reply(
                2,
                "Invalid request: request ID must be an unsigned integer",
                id.unwrap_or(Value::Null),
            ));
        }
    };
    if request
        .keys()
        .any(|key| !matches!(key.as_str(), "method" | "params" | "id"))
    {
        return reply(error_reply(2, "Invalid request: too many parameters", id));
    }
    let method = match request.get("method") {
        Some(Value::String(method)) => method.as_str(),
        Some(other) => {
            return reply(error_reply(
                2,
                &format!("Invalid request: unknown variant {other}, expected one of {METHODS}"),
                id,
            ))
        }
        None => {
            return reply(error_reply(
                2,
                "Invalid request: missing field `method`",
                id,
            ))
        }
    };
    match method {
        "SUBSCRIBE" | "UNSUBSCRIBE" => {
            let streams = match stream_params(&request) {
                Ok(streams) => streams,
                Err(msg) => return reply(error_reply(2, msg, id)),
            };
            if spot && method == "SUBSCRIBE" {
                let known = if venue == SimVenue::BinanceSpotSbe {
                    crate::sbe::is_sbe_stream
                } else {
                    crate::spot::is_spot_stream
                };
                if let Some(unknown) = streams.iter().find(|name| !known(name)) {
                    return reply(error_reply(
                        2,
                        &format!("Invalid request: unknown stream name {unknown}"),
                        id,
                    ));
                }
            }
            if method == "SUBSCRIBE" {
                subscriptions.add(&streams);
            } else {
                subscriptions.remove(&streams);
            }
            Reply {
                text: result_reply(&Value::Null, &id),
                subscribed: method == "SUBSCRIBE" && !streams.is_empty(),
            }
        }
        "LIST_SUBSCRIPTIONS" => match request.get("params") {
            None | Some(Value::Null) => reply(result_reply(&streams_value(subscriptions), &id)),
            Some(Value::Array(params)) if params.is_empty() => {
                reply(result_reply(&streams_value(subscriptions), &id))
            }
            Some(_) => reply(error_reply(2, "Invalid request: too many parameters", id)),
        },
        "SET_PROPERTY" | "GET_PROPERTY" => {
            let params = match request.get("params") {
                Some(Value::Array(params)) => params.as_slice(),
                Some(_) => {
                    return reply(error_reply(
                        2,
                        "Invalid request: params must be an array",
                        id,
                    ))
                }
                None => {
                    return reply(error_reply(
                        2,
                        "Invalid request: missing field `params`",
                        id,
                    ))
                }
            };
            let expected = if method == "SET_PROPERTY" { 2 } else { 1 };
            if params.len() > expected {
                return reply(error_reply(2, "Invalid request: too many parameters", id));
            }
            let Some(Value::String(name)) = params.first() else {
                return reply(error_reply(
                    2,
                    "Invalid request: property name must be a string",
                    id,
                ));
            };
            if name != "combined" {
                return reply(error_reply(0, "Unknown property", id));
            }
            if method == "GET_PROPERTY" {
                return reply(result_reply(&Value::Bool(subscriptions.combined), &id));
            }
            match params.get(1) {
                Some(Value::Bool(combined)) => {
                    subscriptions.combined = *combined;
                    reply(result_reply(&Value::Null, &id))
                }
                _ => reply(error_reply(1, "Invalid value type: expected Boolean", id)),
            }
        }
        other => reply(error_reply(
            2,
            &format!("Invalid request: unknown variant {other}, expected one of {METHODS}"),
            id,
        )),
    }
}

/// The stream names of a SUBSCRIBE or UNSUBSCRIBE.
fn stream_params(request: &Map<String, Value>) -> Result<Vec<String>, &'static str> {
    let Some(Value::Array(params)) = request.get("params") else {
        return Err("Invalid request: params must be an array of stream names");
    };
    params
        .iter()
        .map(|param| match param {
            Value::String(stream) if !stream.is_empty() => Ok(stream.clone()),
            _ => Err("Invalid request: params must be an array of stream names"),
        })
        .collect()
}

/// `{"result":..,"id":..}`, in the venue's key order (serde_json's maps would sort the keys).
fn result_reply(result: &Value, id: &Value) -> String {
    format!("{{\"result\":{result},\"id\":{id}}}")
}

fn streams_value(subscriptions: &Subscriptions) -> Value {
    Value::Array(
        subscriptions
            .streams
            .iter()
            .map(|stream| Value::String(stream.clone()))
            .collect(),
    )
}

/// `{"error":{"code":..,"msg":".."},"id":..}` (USDⓈ-M) or `{"code":..,"msg":"..","id":..}`
/// (`spot`, its "Error Messages" table), in the venue's key order.
fn error_reply(spot: bool, code: u8, msg: &str, id: Value) -> String {
    let msg = Value::String(msg.to_owned());
    if spot {
        return format!("{{\"code\":{code},\"msg\":{msg},\"id\":{id}}}");
    }
    format!("{{\"error\":{{\"code\":{code},\"msg\":{msg}}},\"id\":{id}}}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(text: &str, subscriptions: &mut Subscriptions) -> Value {
        serde_json::from_str(&handle(text.as_bytes(), subscriptions).text).unwrap()
    }

    #[test]
    fn subscribe_list_unsubscribe() {
        let mut subs = Subscriptions::default();
        let reply = handle(
            br#"{"method":"SUBSCRIBE","params":["btcusdt@depth","btcusdt@bookTicker"],"id":1}"#,
            &mut subs,
        );
        assert_eq!(reply.text, r#"{"result":null,"id":1}"#);
        assert!(reply.subscribed);
        assert_eq!(
            ask(r#"{"method":"LIST_SUBSCRIPTIONS","id":2}"#, &mut subs),
            json!({"result":["btcusdt@depth","btcusdt@bookTicker"],"id":2})
        );
        ask(
            r#"{"method":"UNSUBSCRIBE","params":["btcusdt@depth"],"id":3}"#,
            &mut subs,
        );
        assert_eq!(subs.streams, ["btcusdt@bookTicker"]);
    }

    #[test]
    fn properties_and_errors_use_the_documented_codes() {
        let mut subs = Subscriptions::default();
        assert_eq!(
            ask(
                r#"{"method":"SET_PROPERTY","params":["combined",true],"id":5}"#,
                &mut subs
            ),
            json!({"result":null,"id":5})
        );
        assert!(subs.combined);
        let code = |text: &str, subs: &mut Subscriptions| ask(text, subs)["error"]["code"].clone();
        assert_eq!(
            code(
                r#"{"method":"GET_PROPERTY","params":["other"],"id":1}"#,
                &mut subs
            ),
            0
        );
        assert_eq!(
            code(
                r#"{"method":"SET_PROPERTY","params":["combined",1],"id":1}"#,
                &mut subs
            ),
            1
        );
        assert_eq!(code(r#"{"method":"NOPE","id":1}"#, &mut subs), 2);
        assert_eq!(
            code(r#"{"method":"SUBSCRIBE","params":[1],"id":1}"#, &mut subs),
            2
        );
        assert_eq!(
            code(r#"{"method":"SUBSCRIBE","params":[],"id":-1}"#, &mut subs),
            2
        );
        assert_eq!(code(r#"{"method":"#, &mut subs), 3);
    }

    #[test]
    fn spot_answers_in_its_shape_and_refuses_names_it_has_not() {
        let mut subs = Subscriptions::default();
        let ask = |text: &str, subs: &mut Subscriptions| -> Value {
            let reply = handle_for(SimVenue::BinanceSpot, text.as_bytes(), subs);
            serde_json::from_str(&reply.text).unwrap()
        };
        assert_eq!(
            ask(
                r#"{"method":"SUBSCRIBE","params":["btcusdt@aggTrade","btcusdt@depth"],"id":1}"#,
                &mut subs
            ),
            json!({"result":null,"id":1})
        );
        // A USD-M stream is not Spot's: the documented error shape, code 2, nothing subscribed.
        let refused = ask(
            r#"{"method":"SUBSCRIBE","params":["btcusdt@markPrice"],"id":2}"#,
            &mut subs,
        );
        assert_eq!(refused["code"], 2);
        assert_eq!(refused["id"], 2);
        assert!(refused["msg"]
            .as_str()
            .unwrap()
            .contains("btcusdt@markPrice"));
        assert_eq!(subs.streams, ["btcusdt@aggTrade", "btcusdt@depth"]);
        assert_eq!(
            ask(
                r#"{"method":"GET_PROPERTY","params":["other"],"id":"abc"}"#,
                &mut subs
            ),
            json!({"code":0,"msg":"Unknown property","id":"abc"})
        );
        // Spot's ids: signed integers, short alphanumeric strings, null.
        assert_eq!(
            ask(r#"{"method":"LIST_SUBSCRIPTIONS","id":-4}"#, &mut subs)["id"],
            -4
        );
        assert_eq!(
            ask(r#"{"method":"LIST_SUBSCRIPTIONS","id":null}"#, &mut subs),
            json!({"result":["btcusdt@aggTrade","btcusdt@depth"],"id":null})
        );
    }
}
