//! The network addresses a venue file names: `wss://host[:port]/path?query` for WebSocket feeds,
//! `https://host[:port]` for REST, `tcp://host:port` or `tls://host:port` for raw feeds.
//!
//! This is a deliberately small parser rather than the `url` crate: the appliance only ever needs
//! scheme, host, port and request target, and rejecting everything else (userinfo, fragments,
//! non-ASCII) up front is simpler than deciding what the rest of the stack should do with it.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The schemes a venue file may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Ws,
    Wss,
    Http,
    Https,
    Tcp,
    Tls,
    /// UDP datagrams (a multicast group:port: a feed that is live when datagrams flow).
    Udp,
}

impl Scheme {
    const ALL: [Scheme; 7] = [
        Scheme::Ws,
        Scheme::Wss,
        Scheme::Http,
        Scheme::Https,
        Scheme::Tcp,
        Scheme::Tls,
        Scheme::Udp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Ws => "ws",
            Scheme::Wss => "wss",
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Tcp => "tcp",
            Scheme::Tls => "tls",
            Scheme::Udp => "udp",
        }
    }

    /// Whether the connection is wrapped in TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, Scheme::Wss | Scheme::Https | Scheme::Tls)
    }

    /// The port implied when none is written (RFC 6455 section 3 for ws/wss, RFC 9110 section 4.2
    /// for http/https). Raw TCP feeds have no conventional port, so theirs must be explicit.
    pub fn default_port(self) -> Option<u16> {
        match self {
            Scheme::Ws | Scheme::Http => Some(80),
            Scheme::Wss | Scheme::Https => Some(443),
            Scheme::Tcp | Scheme::Tls | Scheme::Udp => None,
        }
    }

    /// Whether a path (request target) means anything for this scheme.
    fn takes_path(self) -> bool {
        !matches!(self, Scheme::Tcp | Scheme::Tls | Scheme::Udp)
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// A parsed, validated address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub scheme: Scheme,
    /// A DNS name or an IP literal; IPv6 literals are stored without their brackets.
    pub host: String,
    /// Explicit, or the scheme's default.
    pub port: u16,
    /// The request target: the path with its query, always starting with `/` for the schemes
    /// that take one, and empty for `tcp` and `tls`.
    pub path: String,
}

impl Endpoint {
    /// Parses and validates `text`.
    pub fn parse(text: &str) -> Result<Self, EndpointError> {
        if let Some(bad) = text
            .chars()
            .find(|c| !c.is_ascii() || c.is_ascii_whitespace() || c.is_ascii_control())
        {
            return Err(EndpointError::InvalidCharacter(bad));
        }
        let (scheme_text, rest) = text.split_once("://").ok_or(EndpointError::MissingScheme)?;
        let scheme = Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.as_str().eq_ignore_ascii_case(scheme_text))
            .ok_or_else(|| EndpointError::UnsupportedScheme(scheme_text.to_owned()))?;
        if rest.contains('#') {
            return Err(EndpointError::Fragment);
        }

        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, target) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err(EndpointError::UserInfo);
        }
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            Some(port) => port,
            None => scheme
                .default_port()
                .ok_or(EndpointError::MissingPort(scheme))?,
        };

        let path = if !scheme.takes_path() {
            if !target.is_empty() && target != "/" {
                return Err(EndpointError::PathNotAllowed(scheme));
            }
            String::new()
        } else if target.starts_with('/') {
            target.to_owned()
        } else {
            // "wss://host" and "wss://host?x=1" both request the root (RFC 3986 section 6.2.3).
            format!("/{target}")
        };
        Ok(Self {
            scheme,
            host: host.to_owned(),
            port,
            path,
        })
    }

    /// `host:port`, with an IPv6 host bracketed, as needed for a `Host` header or `connect`.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Whether the host is an IP literal, which cannot be sent as a TLS server name
    /// (RFC 6066 section 3).
    pub fn host_is_ip(&self) -> bool {
        self.host.parse::<Ipv4Addr>().is_ok() || self.host.parse::<Ipv6Addr>().is_ok()
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "{}://{}{}",
            self.scheme,
            self.authority(),
            self.path
        )
    }
}

/// Why an address was rejected. The messages are written to follow "key `url`: ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error(
        "invalid character {0:?}; addresses are ASCII without spaces (percent-encode the rest)"
    )]
    InvalidCharacter(char),
    #[error("no scheme; expected the form scheme://host[:port][/path]")]
    MissingScheme,
    #[error("unsupported scheme `{0}`; valid schemes are ws, wss, http, https, tcp and tls")]
    UnsupportedScheme(String),
    #[error("a #fragment is never sent to a server; remove it")]
    Fragment,
    #[error(
        "user info (`user@`) is not allowed: credentials never live in config files, use \
         credentials.api_key_env or credentials.api_key_credential"
    )]
    UserInfo,
    #[error("no host")]
    MissingHost,
    #[error("host `{0}` is not a valid DNS name or IP address")]
    InvalidHost(String),
    #[error("port `{0}` is not a number from 1 to 65535")]
    InvalidPort(String),
    #[error("no port, and {0}:// has no default port; add one, as in {0}://host:port")]
    MissingPort(Scheme),
    #[error("{0}:// addresses are host:port only; remove the path")]
    PathNotAllowed(Scheme),
}

fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), EndpointError> {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| EndpointError::InvalidHost(authority.to_owned()))?;
        if host.parse::<Ipv6Addr>().is_err() {
            return Err(EndpointError::InvalidHost(host.to_owned()));
        }
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| EndpointError::InvalidHost(authority.to_owned()))?,
            ),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(EndpointError::MissingHost);
    }
    if !authority.starts_with('[') && !is_valid_host_name(host) {
        return Err(EndpointError::InvalidHost(host.to_owned()));
    }
    let port = match port {
        None => None,
        Some(port) => Some(parse_port(port)?),
    };
    Ok((host, port))
}

fn parse_port(text: &str) -> Result<u16, EndpointError> {
    // `u16::from_str` accepts a leading '+', which has no place in a URL.
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(EndpointError::InvalidPort(text.to_owned()));
    }
    match text.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(EndpointError::InvalidPort(text.to_owned())),
    }
}

/// A DNS name (RFC 1123 section 2.1 labels, with `_` tolerated as many internal zones use it) or a
/// dotted IPv4 address. A name whose last label is all digits must be a valid IPv4 address, as in
/// the WHATWG URL standard's host parser, so `127.0.0.300` is an error rather than a DNS lookup.
pub(crate) fn is_valid_host_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() || host.len() > 253 {
        return false;
    }
    let labels_ok = host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
    });
    if !labels_ok {
        return false;
    }
    let last_label = host.rsplit('.').next().unwrap_or(host);
    if last_label.bytes().all(|byte| byte.is_ascii_digit()) {
        return host.parse::<Ipv4Addr>().is_ok();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Endpoint {
        Endpoint::parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    #[test]
    fn parses_the_shapes_venues_use() {
        let binance = parse("wss://fstream.binance.com/stream");
        assert_eq!(binance.scheme, Scheme::Wss);
        assert_eq!(binance.host, "fstream.binance.com");
        assert_eq!(binance.port, 443);
        assert_eq!(binance.path, "/stream");

        let sim = parse("wss://127.0.0.1:9443/stream?streams=btcusdt@bookTicker");
        assert_eq!((sim.host.as_str(), sim.port), ("127.0.0.1", 9443));
        assert_eq!(sim.path, "/stream?streams=btcusdt@bookTicker");

        let rest = parse("https://fapi.binance.com");
        assert_eq!((rest.port, rest.path.as_str()), (443, "/"));

        let raw = parse("tcp://glbx-mdp3.lsg.databento.com:13000");
        assert_eq!((raw.port, raw.path.as_str()), (13000, ""));

        let v6 = parse("ws://[::1]:8080/ws");
        assert_eq!(v6.host, "::1");
        assert_eq!(v6.authority(), "[::1]:8080");
        assert!(v6.host_is_ip());
        assert_eq!(v6.to_string(), "ws://[::1]:8080/ws");
    }

    #[test]
    fn rejects_what_the_stack_cannot_use() {
        let cases = [
            ("fstream.binance.com/stream", EndpointError::MissingScheme),
            (
                "ftp://host",
                EndpointError::UnsupportedScheme("ftp".to_owned()),
            ),
            ("wss://user:pw@host/", EndpointError::UserInfo),
            ("wss://host/#x", EndpointError::Fragment),
            ("wss:///stream", EndpointError::MissingHost),
            ("wss://host:0/", EndpointError::InvalidPort("0".to_owned())),
            (
                "wss://host:99999/",
                EndpointError::InvalidPort("99999".to_owned()),
            ),
            ("wss://host:/", EndpointError::InvalidPort(String::new())),
            (
                "wss://127.0.0.300/",
                EndpointError::InvalidHost("127.0.0.300".to_owned()),
            ),
            (
                "wss://-bad-.com/",
                EndpointError::InvalidHost("-bad-.com".to_owned()),
            ),
            ("wss://[::g]/", EndpointError::InvalidHost("::g".to_owned())),
            ("tcp://host", EndpointError::MissingPort(Scheme::Tcp)),
            ("tls://host:1/x", EndpointError::PathNotAllowed(Scheme::Tls)),
            ("wss://host/a b", EndpointError::InvalidCharacter(' ')),
        ];
        for (text, expected) in cases {
            assert_eq!(Endpoint::parse(text), Err(expected), "{text}");
        }
    }
}
