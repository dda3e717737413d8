//! Which requests the serving plane answers at all, by their `Host` and `Origin` headers: the
//! guard against DNS rebinding and cross-site WebSocket hijacking. On loopback the serving plane
//! needs no token, so without this any web page the operator opens could read the API (a name
//! of the attacker's that resolves to 127.0.0.1 makes the browser send `Host: that-name`) or
//! open the event stream (a browser lets any page open a WebSocket anywhere, and says which page
//! in `Origin`).
//!
//! - `Host`: the name in it must be the address the connection reached (the socket's local
//!   address, so that a wildcard listener answers for each of its addresses; an IPv6 one in
//!   brackets), `localhost` when that address is loopback, or a name in `[http] allowed_hosts`;
//!   its port the listener's (or none when that is 80), or for an `allowed_hosts` entry with a
//!   port that port. Anything else is answered 421 (Misdirected Request). A request with no
//!   `Host` at all is not a browser's (browsers always send one) and passes. `/healthz` is
//!   exempt, as it is from the token: it answers a constant.
//! - `Origin`, on a WebSocket upgrade (any request with an `Upgrade` header): `http://` or
//!   `https://` and a host that passes the rule above (the status page's own origin), or an
//!   entry of `[http] allowed_origins`. Anything else, `null` included, is answered 403. An
//!   upgrade without `Origin` is not a browser's (`tickwire tail`, Python's `websockets`, curl)
//!   and passes.
//!
//! The check runs in the connection's service (`conn`), before the routes: no middleware, so no
//! boxed future per request.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;

use super::ServeCounters;
use crate::config::HttpConfig;

/// How much of a refused header the answer repeats.
const ECHO_MAX: usize = 128;

/// A `host[:port]` as a `Host` header or an origin carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authority {
    /// Lower-case; an IPv6 address without its brackets.
    pub name: String,
    pub port: Option<u16>,
}

/// Parses `host[:port]`: a DNS name (letters, digits, `-`, `_`, dots between labels), an IPv4
/// address, or an IPv6 address in brackets; the port 1 to 65535 in decimal digits. `None` for
/// anything else (a scheme, a path, user information, an empty name, an unbracketed IPv6).
pub fn parse_authority(text: &str) -> Option<Authority> {
    let (name, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        inside.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        };
        (inside, port)
    } else {
        match text.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => None,
        Some(digits) => {
            if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            Some(digits.parse::<u16>().ok().filter(|&port| port != 0)?)
        }
    };
    if !text.starts_with('[') {
        let valid_label = |label: &str| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        };
        if name.len() > 253 || !name.split('.').all(valid_label) {
            return None;
        }
    }
    Some(Authority {
        name: name.to_ascii_lowercase(),
        port,
    })
}

/// An `http(s)://host[:port]` origin, as a browser writes it: the scheme and the authority, the
/// scheme's default port (80, 443) as no port, as browsers leave it out. `None` for `null`,
/// another scheme, a path or anything after the authority.
pub fn parse_origin(text: &str) -> Option<(&'static str, Authority)> {
    let lower = text.to_ascii_lowercase();
    let (scheme, rest, default_port): (&'static str, &str, u16) =
        if let Some(rest) = lower.strip_prefix("http://") {
            ("http", rest, 80)
        } else if let Some(rest) = lower.strip_prefix("https://") {
            ("https", rest, 443)
        } else {
            return None;
        };
    let mut authority = parse_authority(rest)?;
    if authority.port == Some(default_port) {
        authority.port = None;
    }
    Some((scheme, authority))
}

/// The `Host` and `Origin` rules of one serving plane, from `[http]`.
#[derive(Debug, Default)]
pub struct Policy {
    /// `allowed_hosts`, parsed (entries that do not parse were refused by `check-config`).
    hosts: Vec<Authority>,
    /// `allowed_origins`, parsed.
    origins: Vec<(&'static str, Authority)>,
}

impl Policy {
    pub fn new(config: &HttpConfig) -> Policy {
        Policy {
            hosts: config
                .allowed_hosts
                .iter()
                .filter_map(|host| parse_authority(host))
                .collect(),
            origins: config
                .allowed_origins
                .iter()
                .filter_map(|origin| parse_origin(origin))
                .collect(),
        }
    }

    /// Whether `authority` names this listener as reached at `local`.
    pub fn host_allowed(&self, authority: &Authority, local: SocketAddr) -> bool {
        let own_port = match authority.port {
            Some(port) => port == local.port(),
            None => local.port() == 80,
        };
        let local_ip = local.ip().to_canonical();
        let own_name = match authority.name.parse::<IpAddr>() {
            Ok(ip) => ip.to_canonical() == local_ip,
            Err(_) => authority.name == "localhost" && local_ip.is_loopback(),
        };
        if own_name && own_port {
            return true;
        }
        self.hosts.iter().any(|allowed| {
            allowed.name == authority.name
                && allowed.port.is_none_or(|port| authority.port == Some(port))
        })
    }

    /// Whether a WebSocket upgrade from the page at `origin` may open.
    pub fn origin_allowed(&self, origin: &str, local: SocketAddr) -> bool {
        let Some(origin) = parse_origin(origin) else {
            return false;
        };
        if self.origins.contains(&origin) {
            return true;
        }
        // The page's own origin: this listener's host, with the port the browser saw (none
        // for the scheme's default).
        let (scheme, mut authority) = origin;
        if authority.port.is_none() {
            authority.port = Some(if scheme == "https" { 443 } else { 80 });
        }
        self.host_allowed(&authority, local)
    }

    /// `None` when the request may go on to the routes; else the refusal, counted.
    pub fn check(
        &self,
        path: &str,
        headers: &HeaderMap,
        local: SocketAddr,
        counters: &ServeCounters,
    ) -> Option<Response> {
        if path == "/healthz" {
            return None;
        }
        if let Some(host) = headers.get(header::HOST) {
            let allowed = host
                .to_str()
                .ok()
                .and_then(parse_authority)
                .is_some_and(|authority| self.host_allowed(&authority, local));
            if !allowed {
                counters.refused_host.fetch_add(1, Ordering::Relaxed);
                return Some(super::api::error(
                    StatusCode::MISDIRECTED_REQUEST,
                    format!(
                        "this appliance does not answer for the host {:?} (a guard against DNS \
                         rebinding): reach it by its address, or add the name to [http] \
                         allowed_hosts",
                        echo(host.as_bytes())
                    ),
                ));
            }
        }
        // Any request that asks for an upgrade, whatever it names: a superset of what the
        // WebSocket extractor accepts.
        if headers.contains_key(header::UPGRADE) {
            if let Some(origin) = headers.get(header::ORIGIN) {
                let allowed = origin
                    .to_str()
                    .is_ok_and(|origin| self.origin_allowed(origin, local));
                if !allowed {
                    counters.refused_origin.fetch_add(1, Ordering::Relaxed);
                    return Some(super::api::error(
                        StatusCode::FORBIDDEN,
                        format!(
                            "a WebSocket from the page at {:?} is refused (a guard against \
                             cross-site WebSocket hijacking): only this appliance's own status \
                             page and the origins in [http] allowed_origins may open one",
                            echo(origin.as_bytes())
                        ),
                    ));
                }
            }
        }
        None
    }
}

/// The start of a refused header's value, for the answer that refuses it.
fn echo(value: &[u8]) -> String {
    String::from_utf8_lossy(&value[..value.len().min(ECHO_MAX)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(name: &str, port: Option<u16>) -> Option<Authority> {
        Some(Authority {
            name: name.to_owned(),
            port,
        })
    }

    #[test]
    fn authorities_parse_as_hosts_write_them() {
        assert_eq!(
            parse_authority("127.0.0.1:9464"),
            authority("127.0.0.1", Some(9464))
        );
        assert_eq!(parse_authority("LocalHost"), authority("localhost", None));
        assert_eq!(parse_authority("[::1]:80"), authority("::1", Some(80)));
        assert_eq!(parse_authority("[::1]"), authority("::1", None));
        assert_eq!(
            parse_authority("tick-wire.example.com:443"),
            authority("tick-wire.example.com", Some(443))
        );
        for bad in [
            "",
            ":80",
            "host:",
            "host:0",
            "host:65536",
            "host:+80",
            "host:80:80",
            "::1",
            "[::1",
            "[::1]x",
            "[nope]:80",
            "http://host",
            "host/path",
            "user@host",
            "a..b",
            ".host",
            "host.",
            "*.example.com",
            "ho st",
        ] {
            assert_eq!(parse_authority(bad), None, "{bad:?}");
        }
        assert_eq!(
            parse_origin("HTTP://127.0.0.1:9464"),
            Some(("http", authority("127.0.0.1", Some(9464)).unwrap()))
        );
        assert_eq!(
            parse_origin("https://ops.example.com"),
            Some(("https", authority("ops.example.com", None).unwrap()))
        );
        assert_eq!(
            parse_origin("https://ops.example.com:443"),
            parse_origin("https://ops.example.com")
        );
        assert_eq!(
            parse_origin("http://ops.example.com:443"),
            Some(("http", authority("ops.example.com", Some(443)).unwrap()))
        );
        for bad in ["null", "file://", "ws://127.0.0.1", "http://a/", "http://"] {
            assert_eq!(parse_origin(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_listener_answers_for_its_own_address_and_configured_names() {
        let loopback: SocketAddr = "127.0.0.1:9464".parse().unwrap();
        let v6: SocketAddr = "[::1]:9464".parse().unwrap();
        let public: SocketAddr = "192.0.2.7:9464".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:9464".parse().unwrap();
        let policy = Policy::new(&HttpConfig {
            allowed_hosts: vec!["tickwire.example.com".to_owned(), "proxy:8080".to_owned()],
            ..HttpConfig::default()
        });
        let allowed = |host: &str, local: SocketAddr| {
            policy.host_allowed(&parse_authority(host).unwrap(), local)
        };
        assert!(allowed("127.0.0.1:9464", loopback));
        assert!(allowed("localhost:9464", loopback));
        assert!(allowed("LOCALHOST:9464", loopback));
        assert!(allowed("[::1]:9464", v6));
        assert!(allowed("[0:0:0:0:0:0:0:1]:9464", v6));
        assert!(allowed("localhost:9464", v6));
        assert!(allowed("127.0.0.1:9464", mapped));
        assert!(allowed("192.0.2.7:9464", public));
        // Configured names: without a port, any port; with one, only that one.
        assert!(allowed("tickwire.example.com", loopback));
        assert!(allowed("tickwire.example.com:9464", public));
        assert!(allowed("proxy:8080", loopback));
        assert!(!allowed("proxy", loopback));
        assert!(!allowed("proxy:9464", loopback));
        // Not this listener: another name, another address, another port, no port (not 80),
        // `localhost` on an address that is not loopback.
        assert!(!allowed("rebind.attacker.example:9464", loopback));
        assert!(!allowed("127.0.0.2:9464", loopback));
        assert!(!allowed("127.0.0.1:9465", loopback));
        assert!(!allowed("127.0.0.1", loopback));
        assert!(!allowed("localhost:9464", public));
        assert!(!allowed("[::1]:9464", loopback));
        let on_80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(allowed("127.0.0.1", on_80) && allowed("localhost", on_80));

        // Origins: the page's own (http or https), a configured one, nothing else.
        let policy = Policy::new(&HttpConfig {
            allowed_origins: vec![
                "https://Dash.Example.com".to_owned(),
                "http://ops.example.com:80".to_owned(),
            ],
            ..HttpConfig::default()
        });
        assert!(policy.origin_allowed("http://127.0.0.1:9464", loopback));
        assert!(policy.origin_allowed("http://localhost:9464", loopback));
        assert!(policy.origin_allowed("https://dash.example.com", loopback));
        assert!(policy.origin_allowed("https://dash.example.com:443", loopback));
        // A browser leaves the default port out.
        assert!(policy.origin_allowed("http://ops.example.com", loopback));
        let on_80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(policy.origin_allowed("http://127.0.0.1", on_80));
        assert!(!policy.origin_allowed("http://127.0.0.1", loopback));
        for foreign in [
            "https://evil.example",
            "http://127.0.0.1:8080",
            "http://dash.example.com",
            "null",
            "",
        ] {
            assert!(!policy.origin_allowed(foreign, loopback), "{foreign:?}");
        }
    }

    #[test]
    fn refusals_are_counted_and_say_why() {
        let local: SocketAddr = "127.0.0.1:9464".parse().unwrap();
        let policy = Policy::default();
        let counters = ServeCounters::default();
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        let rebound = headers(&[("host", "rebind.attacker.example:9464")]);
        let refused = policy
            .check("/v1/quotes", &rebound, local, &counters)
            .unwrap();
        assert_eq!(refused.status(), StatusCode::MISDIRECTED_REQUEST);
        assert!(policy
            .check("/healthz", &rebound, local, &counters)
            .is_none());
        assert!(policy
            .check("/v1/quotes", &headers(&[]), local, &counters)
            .is_none());
        let hijack = headers(&[
            ("host", "127.0.0.1:9464"),
            ("upgrade", "websocket"),
            ("origin", "https://evil.example"),
        ]);
        let refused = policy
            .check("/v1/stream", &hijack, local, &counters)
            .unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        // The same Origin on a plain GET: no CORS header is ever sent, so the page cannot read
        // the answer; nothing to refuse.
        let plain = headers(&[
            ("host", "127.0.0.1:9464"),
            ("origin", "https://evil.example"),
        ]);
        assert!(policy
            .check("/v1/quotes", &plain, local, &counters)
            .is_none());
        let own = headers(&[
            ("host", "127.0.0.1:9464"),
            ("upgrade", "WebSocket"),
            ("origin", "http://127.0.0.1:9464"),
        ]);
        assert!(policy.check("/v1/stream", &own, local, &counters).is_none());
        assert_eq!(counters.refused_host.load(Ordering::Relaxed), 1);
        assert_eq!(counters.refused_origin.load(Ordering::Relaxed), 1);
    }

    proptest::proptest! {
        #[test]
        fn any_header_value_is_judged_without_panicking(text in ".{0,80}") {
            let local: SocketAddr = "[::1]:9464".parse().unwrap();
            let policy = Policy::default();
            if let Some(authority) = parse_authority(&text) {
                policy.host_allowed(&authority, local);
            }
            policy.origin_allowed(&text, local);
        }
    }
}
