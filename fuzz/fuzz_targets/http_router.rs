//! The serving plane's routes on arbitrary requests (`tickwire::serve::answer_one`): the path
//! parameters, the query strings of `/v1/book` and `/v1/stream` (our own validation of depth,
//! venue, symbol and kinds behind serde's), the bearer-token check and the fallbacks. Hyper
//! parses the bytes on a real connection; here a request is built from lines (method, URI, then
//! `name: value` headers), as hyper would have handed it on. No request may panic the serving
//! thread, every error is JSON with an `error` string, and with a token set nothing but
//! `/healthz` is answered without it.
//!
//! The first byte chooses: bit 0 a token, bit 1 a bus path (a file that does not exist: books
//! and quotes answer 503).

#![no_main]

use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "fuzz-token-0123456789";

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut lines = rest.split(|&byte| byte == b'\n');
    let (Some(method), Some(uri)) = (lines.next(), lines.next()) else {
        return;
    };
    let headers: Vec<(&[u8], &[u8])> = lines
        .filter_map(|line| {
            let colon = line.iter().position(|&byte| byte == b':')?;
            let value = &line[colon + 1..];
            let value = value.strip_prefix(b" ").unwrap_or(value);
            Some((&line[..colon], value))
        })
        .collect();
    let token = (flags & 1 != 0).then_some(TOKEN);
    let bus = (flags & 2 != 0).then(|| std::path::PathBuf::from("/nonexistent/tickwire-fuzz.bus"));
    let Some((status, body)) = tickwire::serve::answer_one(method, uri, &headers, token, bus)
    else {
        return;
    };
    assert!((200..600).contains(&status), "status {status}");
    if status >= 400 {
        let value: serde_json::Value = serde_json::from_slice(&body)
            .unwrap_or_else(|_| panic!("status {status} with a body that is not JSON: {body:?}"));
        assert!(value["error"].is_string(), "status {status}: {value}");
    }
    let authorized = headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case(b"authorization") && *value == format!("Bearer {TOKEN}").as_bytes()
    });
    let path = std::str::from_utf8(uri)
        .ok()
        .and_then(|uri| uri.parse::<http::Uri>().ok())
        .map(|uri| uri.path().to_owned());
    if token.is_some() && !authorized && path.as_deref() != Some("/healthz") {
        assert!(
            status == 401 || status == 404 || status == 405,
            "status {status} without the token for {path:?}"
        );
    }
});
