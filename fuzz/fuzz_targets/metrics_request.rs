//! The metrics endpoint's request path (`metrics::endpoint::answer`, our own HTTP/1.1 reading of
//! a request head) on arbitrary bytes from a client: it must never panic; it waits for more only
//! while the head is incomplete and within its limit, and every answer is an HTTP/1.1 response
//! whose status says what was wrong, or what the renderer made of a well-formed GET or HEAD.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire::metrics::endpoint::{answer, Response, MAX_HEAD_BYTES};

fuzz_target!(|data: &[u8]| {
    let mut rendered = None;
    let out = answer(data, &mut |path| {
        rendered = Some(path.to_owned());
        Response {
            status: 200,
            content_type: "text/plain; charset=utf-8",
            body: format!("path {path}\n"),
        }
    });
    let complete = data.windows(4).any(|window| window == b"\r\n\r\n");
    match out {
        None => assert!(!complete && data.len() <= MAX_HEAD_BYTES),
        Some(bytes) => {
            assert!(bytes.starts_with(b"HTTP/1.1 "));
            if let Some(path) = rendered {
                assert!(path.starts_with('/'));
                assert!(data.starts_with(b"GET ") || data.starts_with(b"HEAD "));
            }
        }
    }
});
