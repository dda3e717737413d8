//! The routes: what each path answers, from what the control thread published (`Published`),
//! the serving thread's bus reader (`Feed`) and the serving plane's own counters.
//!
//! Every answer but `/metrics` and the status page is JSON. Decimals (prices, sizes) are exact
//! strings (`Fixed::write_to`: no exponent, no rounding), never JSON numbers, which most readers
//! parse as binary floating point.

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::SinkExt;
use serde::Serialize;
use serde_json::json;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tickwire_bus::event::EventKind;
use tickwire_client::{Book, BookState, Fixed};
use tokio::sync::mpsc;

use super::feed::{Filter, Subscriber};
use super::Shared;

/// The status page and its script, served from the binary.
const STATUS_HTML: &str = include_str!("status.html");
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// `/v1/book`'s depth when the query gives none, and the most it may ask for.
const DEFAULT_DEPTH: usize = 10;
const MAX_DEPTH: usize = 5_000;
/// How long a book request waits for the bus reader to finish a venue message it stopped in.
const CONSISTENT_WAIT: Duration = Duration::from_millis(200);
/// The control thread publishes every 100 ms; this many seconds without it and `/healthz` fails.
const STALLED_AFTER: Duration = Duration::from_secs(5);

pub fn router(shared: Arc<Shared>) -> Router {
    let router = Router::new()
        .route("/", get(status_page))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/venues", get(venues))
        .route("/v1/instruments", get(instruments))
        .route("/v1/latency", get(latency))
        .route("/v1/quotes", get(quotes))
        .route("/v1/book/{venue}/{symbol}", get(book))
        .route("/v1/stream", get(stream))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    // The guard only where there is a token to check: a middleware costs every request a boxed
    // future, which `/healthz` at tens of thousands of requests a second notices.
    let router = if shared.token.is_some() {
        router.layer(middleware::from_fn_with_state(shared.clone(), guard))
    } else {
        router
    };
    router.with_state(shared)
}

/// A JSON error body: `{"error": "..."}` and the status.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    json_response(status, &json!({ "error": message.into() }))
}

fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(mut body) => {
            body.push(b'\n');
            (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        // Only a map with non-string keys fails to serialize, and none is built here.
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Refuses requests without the token (401, JSON), when one is set; `/healthz` excepted, which
/// says only that the process runs, for supervisors and load balancers that hold no secret.
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    if let Some(token) = &shared.token {
        let header = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        if !token.accepts(header) {
            shared.counters.unauthorized.fetch_add(1, Ordering::Relaxed);
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: send `Authorization: Bearer <token>`",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

async fn not_found(request: Request) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no such path: {}; try /, /healthz, /readyz, /metrics, /v1/venues, /v1/instruments, \
             /v1/latency, /v1/quotes, /v1/book/{{venue}}/{{symbol}}?depth=N or /v1/stream",
            request.uri().path()
        ),
    )
}

async fn method_not_allowed(request: Request) -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not served; only GET (and HEAD)", request.method()),
    )
}

/// The status page's Content-Security-Policy: its one inline script and its one inline style
/// by their SHA-256 (so that nothing injected into the page could run), fetches to this origin
/// only, and no framing, forms, base or anything else.
static STATUS_CSP: LazyLock<HeaderValue> = LazyLock::new(|| {
    let policy = format!(
        "default-src 'none'; script-src '{}'; style-src '{}'; connect-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        inline_hash(STATUS_HTML, "<script>", "</script>"),
        inline_hash(STATUS_HTML, "<style>", "</style>"),
    );
    HeaderValue::from_str(&policy).unwrap_or(HeaderValue::from_static("default-src 'none'"))
});

/// `sha256-<base64>` of what lies between `open` and `close` in `page`, as CSP hashes an inline
/// element's text.
fn inline_hash(page: &str, open: &str, close: &str) -> String {
    use base64::Engine;
    let text = page
        .split_once(open)
        .and_then(|(_, rest)| rest.split_once(close))
        .map_or("", |(text, _)| text);
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}

async fn status_page() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CONTENT_SECURITY_POLICY, STATUS_CSP.clone()),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        STATUS_HTML,
    )
        .into_response()
}

/// The process is alive and its control thread is publishing. The body is a constant: this is
/// the path load balancers and supervisors hit most.
async fn healthz(State(shared): State<Arc<Shared>>) -> Response {
    let age = shared.published_at.load().elapsed();
    if age > STALLED_AFTER {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the control thread has not published for {:.1} s",
                age.as_secs_f64()
            ),
        );
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        "{\"status\":\"ok\"}\n",
    )
        .into_response()
}

/// Every venue live, every stream fresh, every hot thread running; else 503 with the reasons.
async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    let published = shared.published.load();
    if published.problems.is_empty() {
        json_response(StatusCode::OK, &json!({ "ready": true }))
    } else {
        json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "ready": false, "reasons": published.problems }),
        )
    }
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let published = shared.published.load();
    let mut out = String::with_capacity(published.metrics_text.len() + 2048);
    out.push_str(&published.metrics_text);
    render_counters(&shared.counters, &mut out);
    ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], out).into_response()
}

async fn venues(State(shared): State<Arc<Shared>>) -> Response {
    let published = shared.published.load();
    json_response(StatusCode::OK, &json!({ "venues": published.venues }))
}

async fn instruments(State(shared): State<Arc<Shared>>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({ "instruments": shared.instruments.as_slice() }),
    )
}

async fn latency(State(shared): State<Arc<Shared>>) -> Response {
    let published = shared.published.load();
    json_response(
        StatusCode::OK,
        &json!({ "stages": published.latency, "history": *published.latency_history }),
    )
}

fn state_name(state: BookState) -> &'static str {
    match state {
        BookState::Unknown => "unknown",
        BookState::Building => "building",
        BookState::Valid => "valid",
    }
}

/// Waits (bounded) until the bus reader is not inside a venue message, then runs `answer` on
/// the feed. 503 when there is no bus, it is not attached, or the message does not end in time.
async fn with_consistent_feed(
    shared: &Shared,
    answer: impl Fn(&super::feed::Feed) -> Response,
) -> Response {
    let Some(feed) = &shared.feed else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no books: the appliance has no [bus], which the serving plane reads them from",
        );
    };
    let deadline = tokio::time::Instant::now() + CONSISTENT_WAIT;
    loop {
        // Registered before the check; the pump cannot run between the two (one thread).
        let consistent = shared.consistent.notified();
        {
            let feed = feed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(problem) = &feed.error {
                return error(StatusCode::SERVICE_UNAVAILABLE, problem.clone());
            }
            if !feed.mid_message {
                return answer(&feed);
            }
        }
        if tokio::time::timeout_at(deadline, consistent).await.is_err() {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the book is being updated by a message that has not ended; try again",
            );
        }
    }
}

/// Top of book of every instrument: from the book when it is valid, else the last quote event.
async fn quotes(State(shared): State<Arc<Shared>>) -> Response {
    with_consistent_feed(&shared, |feed| {
        let Some(client) = feed.client() else {
            return error(StatusCode::SERVICE_UNAVAILABLE, "the bus is not attached");
        };
        let books = client.books();
        let mut entries: Vec<_> = client.directory().iter().collect();
        // In the appliance's order (venue file, then symbol list), not the directory's.
        entries.sort_by_key(|entry| (entry.venue_id, entry.instrument_id));
        // Written straight into one buffer, as `/v1/book` is: a dashboard polls this, and a
        // `serde_json::Value` per instrument cost a third of the requests it could answer.
        let mut out = String::with_capacity(16 + entries.len() * 192);
        out.push_str("{\"quotes\":[");
        for (index, entry) in entries.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            let key = (entry.venue_id, entry.instrument_id);
            let book: Option<&Book> =
                books.and_then(|books| books.book(entry.venue_id, entry.instrument_id));
            out.push_str("{\"venue\":");
            push_json_string(&mut out, &entry.venue);
            out.push_str(",\"symbol\":");
            push_json_string(&mut out, &entry.symbol);
            out.push_str(",\"book\":\"");
            out.push_str(book.map_or("unknown", |book| state_name(book.state())));
            out.push('"');
            let mut top = (None, None);
            if let Some(book) = book.filter(|book| book.is_valid()) {
                top = (book.best_bid(), book.best_ask());
                out.push_str(",\"source\":\"book\",\"bid\":");
                push_level(&mut out, top.0);
                out.push_str(",\"ask\":");
                push_level(&mut out, top.1);
            } else if let Some(last) = feed.quotes.get(&key) {
                let quote = last.quote;
                // A side the quote leaves empty (price and size zero) is null.
                let side = |price: Fixed, size: Fixed| {
                    (price != Fixed::ZERO || size != Fixed::ZERO).then_some((price, size))
                };
                top = (
                    side(quote.bid_px, quote.bid_sz),
                    side(quote.ask_px, quote.ask_sz),
                );
                out.push_str(",\"source\":\"quote\",\"bid\":");
                push_level(&mut out, top.0);
                out.push_str(",\"ask\":");
                push_level(&mut out, top.1);
                let _ = write!(out, ",\"recv_ts_ns\":{}", last.recv_ts_ns);
            } else {
                out.push_str(",\"source\":null,\"bid\":null,\"ask\":null");
            }
            out.push_str(",\"mid\":");
            match top {
                (Some((bid, _)), Some((ask, _))) => {
                    out.push('"');
                    push_mid(&mut out, bid, ask);
                    out.push('"');
                }
                _ => out.push_str("null"),
            }
            out.push_str(",\"last_trade\":");
            match feed.trades.get(&key) {
                Some(trade) => {
                    push_level(&mut out, Some((trade.price, trade.size)));
                    // Inside the level's object: `{"price":..,"size":..,"recv_ts_ns":N}`.
                    out.pop();
                    let _ = write!(out, ",\"recv_ts_ns\":{}}}", trade.recv_ts_ns);
                }
                None => out.push_str("null"),
            }
            out.push('}');
        }
        out.push_str("]}\n");
        ([(header::CONTENT_TYPE, "application/json")], out).into_response()
    })
    .await
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BookQuery {
    depth: Option<String>,
}

/// Parses a query string into `T`, or the 400 that says what is wrong.
fn parse_query<T: serde::de::DeserializeOwned>(query: Option<&str>) -> Result<T, Box<Response>> {
    serde_urlencoded_query(query.unwrap_or("")).map_err(|message| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            format!("bad query string: {message}"),
        ))
    })
}

fn serde_urlencoded_query<T: serde::de::DeserializeOwned>(query: &str) -> Result<T, String> {
    let uri: axum::http::Uri = format!("/?{query}")
        .parse()
        .map_err(|error: axum::http::uri::InvalidUri| error.to_string())?;
    axum::extract::Query::<T>::try_from_uri(&uri)
        .map(|axum::extract::Query(value)| value)
        .map_err(|rejection| rejection.body_text())
}

/// One book, both sides to `depth` levels, as the bus reader holds it after whole messages.
async fn book(
    State(shared): State<Arc<Shared>>,
    path: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
    RawQuery(query): RawQuery,
) -> Response {
    // A percent-escape that decodes to bad UTF-8 (`/v1/book/%FF/x`): axum's own rejection is
    // plain text, and every error here is JSON (found by the `http_router` fuzz target).
    let Path((venue, symbol)) = match path {
        Ok(path) => path,
        Err(rejection) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("bad path: {}", rejection.body_text()),
            )
        }
    };
    let query: BookQuery = match parse_query(query.as_deref()) {
        Ok(query) => query,
        Err(response) => return *response,
    };
    let depth = match query.depth.as_deref().map(str::parse::<usize>) {
        None => DEFAULT_DEPTH,
        Some(Ok(depth)) if (1..=MAX_DEPTH).contains(&depth) => depth,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("depth must be a whole number from 1 to {MAX_DEPTH}"),
            )
        }
    };
    with_consistent_feed(&shared, |feed| {
        let Some(client) = feed.client() else {
            return error(StatusCode::SERVICE_UNAVAILABLE, "the bus is not attached");
        };
        let Some(entry) = client.directory().find(&venue, &symbol) else {
            return error(
                StatusCode::NOT_FOUND,
                format!("no instrument {symbol:?} on venue {venue:?}; see /v1/instruments"),
            );
        };
        let book = client
            .books()
            .and_then(|books| books.book(entry.venue_id, entry.instrument_id));
        let Some(book) = book.filter(|book| book.is_valid()) else {
            let state = book.map_or("unknown", |book| state_name(book.state()));
            return json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({
                    "error": format!("the book is not valid now ({state}): it waits for a snapshot"),
                    "venue": venue, "symbol": symbol, "state": state,
                }),
            );
        };
        // Written straight into one buffer rather than through `serde_json::Value`: this is
        // the API's heaviest frequent answer (issue 22's goal: 20,000 books of depth 20 a
        // second), and the levels are the bulk of it.
        let mut out = String::with_capacity(96 + 2 * depth.min(64) * 48);
        out.push_str("{\"venue\":");
        push_json_string(&mut out, &entry.venue);
        out.push_str(",\"symbol\":");
        push_json_string(&mut out, &entry.symbol);
        out.push_str(",\"state\":\"valid\",\"bids\":");
        push_levels(&mut out, book.bids().take(depth));
        out.push_str(",\"asks\":");
        push_levels(&mut out, book.asks().take(depth));
        out.push_str("}\n");
        ([(header::CONTENT_TYPE, "application/json")], out).into_response()
    })
    .await
}

/// A JSON string literal, escaped (RFC 8259 section 7).
fn push_json_string(out: &mut String, value: &str) {
    out.push('"');
    for character in value.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            control if u32::from(control) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(control));
            }
            other => out.push(other),
        }
    }
    out.push('"');
}

/// `[{"price":"..","size":".."},...]` with exact decimals.
fn push_levels(out: &mut String, levels: impl Iterator<Item = (Fixed, Fixed)>) {
    out.push('[');
    for (index, level) in levels.enumerate() {
        if index > 0 {
            out.push(',');
        }
        push_level(out, Some(level));
    }
    out.push(']');
}

/// The mid of `bid` and `ask` as an exact decimal: their sum (in 1e-9 units, as i128, which no
/// pair of prices overflows) times 5 is the mid in 1e-10 units, written with ten decimals and
/// its trailing zeros dropped.
fn push_mid(out: &mut String, bid: Fixed, ask: Fixed) {
    let tenths = (i128::from(bid.raw()) + i128::from(ask.raw())) * 5;
    let (sign, magnitude) = if tenths < 0 {
        ("-", tenths.unsigned_abs())
    } else {
        ("", tenths.unsigned_abs())
    };
    const SCALE: u128 = 10_000_000_000;
    let (whole, fraction) = (magnitude / SCALE, magnitude % SCALE);
    let _ = write!(out, "{sign}{whole}");
    if fraction != 0 {
        let digits = format!("{fraction:010}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
}

/// `{"price":"..","size":".."}` with exact decimals, or `null`.
fn push_level(out: &mut String, level: Option<(Fixed, Fixed)>) {
    let Some((price, size)) = level else {
        out.push_str("null");
        return;
    };
    let mut digits = [0u8; 21];
    out.push_str("{\"price\":\"");
    let len = price.write_to(&mut digits);
    out.push_str(std::str::from_utf8(&digits[..len]).unwrap_or("0"));
    out.push_str("\",\"size\":\"");
    let len = size.write_to(&mut digits);
    out.push_str(std::str::from_utf8(&digits[..len]).unwrap_or("0"));
    out.push_str("\"}");
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamQuery {
    venue: Option<String>,
    symbol: Option<String>,
    /// Event kinds, comma-separated (`quote,trade`).
    kind: Option<String>,
}

/// A WebSocket of normalized events as JSON, one object per message (the `tickwire decode`
/// format), filtered by venue, symbol and kind.
async fn stream(
    State(shared): State<Arc<Shared>>,
    RawQuery(query): RawQuery,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let query: StreamQuery = match parse_query(query.as_deref()) {
        Ok(query) => query,
        Err(response) => return *response,
    };
    let kinds = match &query.kind {
        None => None,
        Some(list) => {
            let mut kinds = Vec::new();
            for name in list.split(',') {
                match EventKind::from_name(name) {
                    Some(kind) => kinds.push(kind),
                    None => {
                        let valid: Vec<&str> =
                            EventKind::ALL.iter().map(|kind| kind.name()).collect();
                        return error(
                            StatusCode::BAD_REQUEST,
                            format!("unknown kind {name:?}; valid kinds: {}", valid.join(", ")),
                        );
                    }
                }
            }
            Some(kinds)
        }
    };
    let known_venue = |venue: &str| shared.instruments.iter().any(|i| i.venue == venue);
    if let Some(venue) = &query.venue {
        if !known_venue(venue) {
            return error(
                StatusCode::BAD_REQUEST,
                format!("unknown venue {venue:?}; see /v1/venues"),
            );
        }
    }
    if let Some(symbol) = &query.symbol {
        let listed = shared.instruments.iter().any(|instrument| {
            instrument.symbol == *symbol
                && query
                    .venue
                    .as_deref()
                    .is_none_or(|venue| instrument.venue == venue)
        });
        if !listed {
            return error(
                StatusCode::BAD_REQUEST,
                format!("unknown symbol {symbol:?}; see /v1/instruments"),
            );
        }
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("/v1/stream is a WebSocket: {}", rejection.body_text()),
            )
        }
    };
    let Some(feed) = &shared.feed else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no stream: the appliance has no [bus], which the serving plane reads events from",
        );
    };
    let (queue, receiver) = mpsc::channel(shared.stream_queue);
    let overflowed = Arc::new(AtomicBool::new(false));
    feed.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .subscribers
        .push(Subscriber {
            filter: Filter {
                venue: query.venue,
                symbol: query.symbol,
                kinds,
            },
            queue,
            overflowed: overflowed.clone(),
        });
    let queue_len = shared.stream_queue;
    let counters = shared.counters.clone();
    counters.stream_clients.fetch_add(1, Ordering::Relaxed);
    upgrade
        // Clients send nothing but control frames; a large message from one is refused.
        .max_message_size(4096)
        .on_upgrade(move |socket| async move {
            run_stream(socket, receiver, overflowed, queue_len).await;
            counters.stream_clients.fetch_sub(1, Ordering::Relaxed);
        })
}

/// Messages written to a stream client before one flush.
const STREAM_BATCH: usize = 256;

/// Close code 1008 (policy violation, RFC 6455 section 7.4.1) for a client too slow for its
/// queue.
pub const CLOSE_SLOW: u16 = 1008;

async fn run_stream(
    mut socket: WebSocket,
    mut receiver: mpsc::Receiver<axum::extract::ws::Utf8Bytes>,
    overflowed: Arc<AtomicBool>,
    queue_len: usize,
) {
    loop {
        tokio::select! {
            queued = receiver.recv() => match queued {
                Some(text) => {
                    // Whatever else is queued goes out in the same write: one syscall for a
                    // burst rather than one per event. A client that stops reading fails this
                    // at the socket's write deadline.
                    if socket.feed(Message::Text(text)).await.is_err() {
                        return;
                    }
                    for _ in 1..STREAM_BATCH {
                        let Ok(text) = receiver.try_recv() else {
                            break;
                        };
                        if socket.feed(Message::Text(text)).await.is_err() {
                            return;
                        }
                    }
                    if socket.flush().await.is_err() {
                        return;
                    }
                }
                None => {
                    let frame = if overflowed.load(Ordering::Relaxed) {
                        CloseFrame {
                            code: CLOSE_SLOW,
                            reason: format!(
                                "too slow: {queue_len} events queued and not read"
                            )
                            .into(),
                        }
                    } else {
                        CloseFrame {
                            code: 1001,
                            reason: "the appliance is stopping".into(),
                        }
                    };
                    let _ = socket.send(Message::Close(Some(frame))).await;
                    return;
                }
            },
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                // Pings are answered by the WebSocket layer; anything else is ignored.
                Some(Ok(_)) => {}
            },
        }
    }
}

/// The serving plane's own counters in the Prometheus text format.
pub fn render_counters(counters: &super::ServeCounters, out: &mut String) {
    let families: [(&str, &str, &str, u64); 9] = [
        (
            "tickwire_http_requests_total",
            "counter",
            "HTTP requests the serving plane received.",
            counters.requests.load(Ordering::Relaxed),
        ),
        (
            "tickwire_http_connections_total",
            "counter",
            "Connections the serving plane accepted.",
            counters.connections.load(Ordering::Relaxed),
        ),
        (
            "tickwire_http_unauthorized_total",
            "counter",
            "Requests refused for a missing or wrong bearer token.",
            counters.unauthorized.load(Ordering::Relaxed),
        ),
        (
            "tickwire_http_refused_host_total",
            "counter",
            "Requests refused (421) for a Host header that names neither this listener's address \
             nor an [http] allowed_hosts entry: DNS rebinding, or a name to add.",
            counters.refused_host.load(Ordering::Relaxed),
        ),
        (
            "tickwire_http_refused_origin_total",
            "counter",
            "WebSocket upgrades refused (403) for an Origin that is neither the status page's own \
             nor an [http] allowed_origins entry.",
            counters.refused_origin.load(Ordering::Relaxed),
        ),
        (
            "tickwire_http_header_timeouts_total",
            "counter",
            "Connections closed because the request head did not arrive in time.",
            counters.header_timeouts.load(Ordering::Relaxed),
        ),
        (
            "tickwire_http_stream_clients",
            "gauge",
            "WebSocket stream clients connected now.",
            counters.stream_clients.load(Ordering::Relaxed),
        ),
        (
            "tickwire_http_stream_slow_closed_total",
            "counter",
            "WebSocket stream clients closed because their queue filled.",
            counters.stream_slow_closed.load(Ordering::Relaxed),
        ),
        (
            "tickwire_http_bus_missed_total",
            "counter",
            "Bus events the serving thread's reader lost to a lap.",
            counters.bus_missed.load(Ordering::Relaxed),
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_page_policy_names_its_inline_script_and_style() {
        let policy = STATUS_CSP.to_str().unwrap();
        assert!(
            policy.starts_with("default-src 'none'; script-src 'sha256-"),
            "{policy}"
        );
        // Exactly one inline script and style, each hashed; nothing else inline to allow.
        assert_eq!(STATUS_HTML.matches("<script").count(), 1);
        assert_eq!(STATUS_HTML.matches("<style").count(), 1);
        assert!(!STATUS_HTML.contains(" style="));
        let handler_attribute = STATUS_HTML.match_indices(" on").any(|(at, _)| {
            let rest = &STATUS_HTML[at + 3..];
            let name_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            name_len > 0 && rest[name_len..].starts_with('=')
        });
        assert!(
            !handler_attribute,
            "an inline event handler the policy would block"
        );
        let script = inline_hash(STATUS_HTML, "<script>", "</script>");
        assert!(
            policy.contains(&format!("script-src '{script}'")),
            "{policy}"
        );
        assert_eq!(script.len(), "sha256-".len() + 44);
        assert_ne!(script, inline_hash(STATUS_HTML, "<style>", "</style>"));
        assert!(!policy.contains("unsafe"), "{policy}");
    }

    #[test]
    fn hand_written_json_reads_back_as_serde_json_writes_it() {
        for text in ["BTCUSDT", "a\"b\\c", "tab\there\nnewline\u{1}", "ünï"] {
            let mut out = String::new();
            push_json_string(&mut out, text);
            assert_eq!(serde_json::from_str::<String>(&out).unwrap(), text);
        }
        let levels = [
            (Fixed(60_000_100_000_000), Fixed(1_803_000_000)),
            (Fixed(1), Fixed(i64::MAX)),
            (Fixed(-5_000_000_000), Fixed(0)),
        ];
        let mut out = String::new();
        push_levels(&mut out, levels.into_iter());
        // What serde_json writes for the same levels, each decimal through `Fixed::write_to`.
        let decimal = |value: Fixed| {
            let mut digits = [0u8; 21];
            let len = value.write_to(&mut digits);
            String::from_utf8_lossy(&digits[..len]).into_owned()
        };
        let expected: Vec<serde_json::Value> = levels
            .into_iter()
            .map(|(price, size)| json!({ "price": decimal(price), "size": decimal(size) }))
            .collect();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&out).unwrap(),
            serde_json::Value::Array(expected)
        );
        assert!(out.contains("\"price\":\"60000.1\""), "{out}");
        let mut out = String::new();
        push_level(&mut out, None);
        assert_eq!(out, "null");
    }
}
