//! What can go wrong with TLS, in words a venue operator can act on.
//!
//! Two enums for the module's two boundaries: [`TlsConfigError`] comes from building the
//! configuration on the control thread (a CA file, a server name), [`TlsError`] from a session on
//! the network thread. A session error is terminal for its connection and happens at most once
//! per connection, so it may carry strings; nothing here is on the per-record path.

use rustls::pki_types::ServerName;
use rustls::{AlertDescription, CertificateError};
use std::fmt;
use std::path::PathBuf;

/// Why the TLS configuration for a venue could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error("tls.extra_ca_file {}: cannot read it: {source}", path.display())]
    CaFileUnreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "tls.extra_ca_file {}: no certificate in it; expected one or more PEM blocks \
         starting with -----BEGIN CERTIFICATE-----",
        path.display()
    )]
    CaFileEmpty { path: PathBuf },
    #[error("tls.extra_ca_file {}: not valid PEM: {reason}", path.display())]
    CaFileNotPem { path: PathBuf, reason: String },
    #[error(
        "tls.extra_ca_file {}: certificate {number} (counting from 1) cannot be used as a CA: \
         {reason}",
        path.display()
    )]
    CaCertificateUnusable {
        path: PathBuf,
        number: usize,
        reason: String,
    },
    #[error(
        "\"{name}\" cannot be a TLS server name: it is neither a DNS name nor an IP address \
         (use the URL's host or tls.sni)"
    )]
    InvalidServerName { name: String },
    #[error("cannot build the TLS configuration: {message}")]
    Rustls { message: String },
}

/// Why a TLS session failed. Each message says what to check or change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error(
        "the server's certificate is not signed by a trusted CA; for a local simulator set \
         tls.extra_ca_file to the simulator's CA certificate (PEM)"
    )]
    UntrustedCertificate,
    #[error(
        "the server's certificate names a trusted CA as its issuer but its signature does not \
         verify with that CA's key: if the simulator's CA was regenerated, point \
         tls.extra_ca_file at its current CA certificate; otherwise the connection may be \
         intercepted"
    )]
    CaKeyMismatch,
    #[error(
        "the server's certificate is not valid for \"{expected}\" (the name this client \
         verifies: the URL's host or tls.sni); {}",
        PresentedNames(.presented)
    )]
    NameMismatch {
        expected: String,
        /// The DNS names and IP addresses the certificate covers, when rustls reports them.
        presented: Vec<String>,
    },
    #[error(
        "the server's certificate expired{}; the venue must renew it, unless this host's \
         clock is wrong{}",
        At(.not_after_unix_s),
        Now(.now_unix_s)
    )]
    CertificateExpired {
        not_after_unix_s: Option<u64>,
        now_unix_s: Option<u64>,
    },
    #[error(
        "the server's certificate is not valid yet{}; check this host's clock{}",
        Before(.not_before_unix_s),
        Now(.now_unix_s)
    )]
    CertificateNotYetValid {
        not_before_unix_s: Option<u64>,
        now_unix_s: Option<u64>,
    },
    #[error("the server's certificate was rejected: {reason}")]
    BadCertificate { reason: String },
    #[error("the server sent the TLS alert {alert:?}{}", AlertHint(*.alert))]
    AlertReceived { alert: AlertDescription },
    #[error(
        "the server closed the connection during the TLS handshake; check that the port \
         serves TLS and that the server accepts this host"
    )]
    PeerClosedDuringHandshake,
    #[error(
        "the server did not answer with TLS (it sent {first_bytes:?}); check that the URL's \
         scheme (wss://, https://, tls://) and port belong to a TLS endpoint"
    )]
    NotTls {
        /// The first bytes the server sent, with anything unprintable escaped.
        first_bytes: String,
    },
    #[error("TLS error: {message}")]
    Other { message: String },
}

impl TlsError {
    /// Maps a rustls error to the venue-facing error.
    ///
    /// `expected` is the name this session verifies (for a name mismatch rustls did not
    /// describe); `first_bytes` the start of what the server sent, used to tell a server that
    /// does not speak TLS from one that speaks it badly.
    pub(crate) fn from_rustls(
        error: rustls::Error,
        expected: &ServerName<'_>,
        handshaking: bool,
        first_bytes: &[u8],
    ) -> Self {
        use rustls::Error as E;
        match error {
            E::InvalidCertificate(certificate_error) => {
                Self::from_certificate_error(certificate_error, expected)
            }
            // A close_notify during the handshake is the server hanging up politely.
            E::AlertReceived(AlertDescription::CloseNotify) if handshaking => {
                Self::PeerClosedDuringHandshake
            }
            E::AlertReceived(alert) => Self::AlertReceived { alert },
            // rustls reports a record header it cannot read as one of these; the first record
            // of a server that does not speak TLS (an HTTP error page, a banner) is the usual
            // cause, so look at the bytes before blaming the protocol.
            E::InvalidMessage(_) if handshaking && !looks_like_tls(first_bytes) => Self::NotTls {
                first_bytes: printable(first_bytes),
            },
            other => Self::Other {
                message: other.to_string(),
            },
        }
    }

    fn from_certificate_error(error: CertificateError, expected: &ServerName<'_>) -> Self {
        use CertificateError as C;
        match error {
            C::UnknownIssuer => Self::UntrustedCertificate,
            C::BadSignature => Self::CaKeyMismatch,
            C::NotValidForNameContext {
                expected,
                presented,
            } => Self::NameMismatch {
                expected: expected.to_str().into_owned(),
                presented: presented.into_iter().map(readable_name).collect(),
            },
            C::NotValidForName => Self::NameMismatch {
                expected: expected.to_str().into_owned(),
                presented: Vec::new(),
            },
            C::Expired => Self::CertificateExpired {
                not_after_unix_s: None,
                now_unix_s: None,
            },
            C::ExpiredContext { time, not_after } => Self::CertificateExpired {
                not_after_unix_s: Some(not_after.as_secs()),
                now_unix_s: Some(time.as_secs()),
            },
            C::NotValidYet => Self::CertificateNotYetValid {
                not_before_unix_s: None,
                now_unix_s: None,
            },
            C::NotValidYetContext { time, not_before } => Self::CertificateNotYetValid {
                not_before_unix_s: Some(not_before.as_secs()),
                now_unix_s: Some(time.as_secs()),
            },
            other => Self::BadCertificate {
                reason: rustls::Error::InvalidCertificate(other).to_string(),
            },
        }
    }
}

/// Whether `bytes` can be the start of a TLS record from a server: a content type a server
/// sends first (handshake 22, alert 21) and a legacy version with major 3 (RFC 8446 section 5.1).
pub(crate) fn looks_like_tls(bytes: &[u8]) -> bool {
    match bytes {
        [] => true,
        [content_type] => matches!(content_type, 21 | 22),
        [content_type, major, ..] => matches!(content_type, 21 | 22) && *major == 3,
    }
}

/// A name as webpki reports it (`DnsName("example.com")`, `IpAddress(10.0.0.1)`) as the name
/// alone; other kinds of name are left as reported.
fn readable_name(presented: String) -> String {
    let inner = presented
        .strip_prefix("DnsName(\"")
        .and_then(|rest| rest.strip_suffix("\")"))
        .or_else(|| {
            presented
                .strip_prefix("IpAddress(")
                .and_then(|rest| rest.strip_suffix(')'))
        });
    match inner {
        Some(name) => name.to_owned(),
        None => presented,
    }
}

/// The bytes as text, with anything outside printable ASCII escaped, so that an HTTP status
/// line reads as one and binary reads as hex.
fn printable(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// The end of a name-mismatch message.
struct PresentedNames<'a>(&'a [String]);

impl fmt::Display for PresentedNames<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [] => formatter.write_str("the certificate's names were not reported"),
            names => {
                formatter.write_str("it is valid for ")?;
                for (index, name) in names.iter().enumerate() {
                    if index > 0 {
                        formatter.write_str(", ")?;
                    }
                    write!(formatter, "\"{name}\"")?;
                }
                Ok(())
            }
        }
    }
}

/// " at <time>" when the time is known.
struct At<'a>(&'a Option<u64>);

impl fmt::Display for At<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(unix_s) => write!(formatter, " at {}", Utc(*unix_s)),
            None => Ok(()),
        }
    }
}

/// " (valid from <time>)" when the time is known.
struct Before<'a>(&'a Option<u64>);

impl fmt::Display for Before<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(unix_s) => write!(formatter, " (valid from {})", Utc(*unix_s)),
            None => Ok(()),
        }
    }
}

/// " (this host's time: <time>)" when the time is known.
struct Now<'a>(&'a Option<u64>);

impl fmt::Display for Now<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(unix_s) => write!(formatter, " (this host's time: {})", Utc(*unix_s)),
            None => Ok(()),
        }
    }
}

/// What an alert usually means when a server sends it to a client in the handshake.
struct AlertHint(AlertDescription);

impl fmt::Display for AlertHint {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        use AlertDescription as A;
        let hint = match self.0 {
            A::ProtocolVersion => "; the server and this client have no TLS version in common",
            A::HandshakeFailure | A::InsufficientSecurity => {
                "; the server and this client have no cipher suite or key exchange in common"
            }
            A::CertificateRequired | A::NoCertificate => {
                "; the server requires a client certificate, which tickwire does not send"
            }
            A::UnrecognisedName => {
                "; the server does not serve the name this client asked for (check the URL's \
                 host or tls.sni)"
            }
            A::NoApplicationProtocol => {
                "; the server accepts none of the application protocols offered (ALPN)"
            }
            A::AccessDenied => "; the server refuses this client",
            A::InternalError => "; the server failed internally",
            _ => "",
        };
        formatter.write_str(hint)
    }
}

/// A Unix time as `YYYY-MM-DD HH:MM:SS UTC`.
struct Utc(u64);

impl fmt::Display for Utc {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0 / 86_400;
        let second_of_day = self.0 % 86_400;
        let (year, month, day) = civil_from_days(days);
        write!(
            formatter,
            "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
            second_of_day / 3600,
            second_of_day % 3600 / 60,
            second_of_day % 60
        )
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian date: Howard Hinnant's `civil_from_days`
/// ("chrono-Compatible Low-Level Date Algorithms"), restricted to dates from 1970 on.
fn civil_from_days(days_since_epoch: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01 so that a leap day ends its year.
    let days = days_since_epoch + 719_468;
    let era = days / 146_097;
    let day_of_era = days % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::UnixTime;

    fn unix(unix_s: u64) -> UnixTime {
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(unix_s))
    }

    fn name(text: &str) -> ServerName<'static> {
        ServerName::try_from(text.to_owned()).expect("valid name")
    }

    #[test]
    fn dates_match_known_instants() {
        assert_eq!(Utc(0).to_string(), "1970-01-01 00:00:00 UTC");
        assert_eq!(Utc(951_782_400).to_string(), "2000-02-29 00:00:00 UTC");
        assert_eq!(Utc(1_709_251_199).to_string(), "2024-02-29 23:59:59 UTC");
        assert_eq!(Utc(4_102_444_800).to_string(), "2100-01-01 00:00:00 UTC");
    }

    #[test]
    fn dates_agree_with_day_by_day_counting() {
        // Counts days forward from the epoch with the leap-year rule, the plain oracle.
        let (mut year, mut month, mut day) = (1970_u64, 1_u64, 1_u64);
        for days in 0..200_000 {
            assert_eq!(civil_from_days(days), (year, month, day), "day {days}");
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
            let month_days = match month {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            day += 1;
            if day > month_days {
                day = 1;
                month += 1;
                if month > 12 {
                    month = 1;
                    year += 1;
                }
            }
        }
    }

    #[test]
    fn unknown_issuer_points_at_extra_ca_file() {
        let error = TlsError::from_rustls(
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
            &name("localhost"),
            true,
            &[22, 3, 3],
        );
        assert_eq!(error, TlsError::UntrustedCertificate);
        assert!(error.to_string().contains("tls.extra_ca_file"));
    }

    #[test]
    fn name_mismatch_without_context_names_the_expected_name() {
        let error = TlsError::from_rustls(
            rustls::Error::InvalidCertificate(CertificateError::NotValidForName),
            &name("fstream.binance.com"),
            true,
            &[],
        );
        let message = error.to_string();
        assert!(message.contains("\"fstream.binance.com\""), "{message}");
        assert!(message.contains("not reported"), "{message}");
    }

    #[test]
    fn expiry_messages_carry_both_times() {
        let error = TlsError::from_rustls(
            rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
                time: unix(1_700_000_000),
                not_after: unix(1_600_000_000),
            }),
            &name("localhost"),
            true,
            &[],
        );
        assert_eq!(
            error.to_string(),
            "the server's certificate expired at 2020-09-13 12:26:40 UTC; the venue must renew \
             it, unless this host's clock is wrong (this host's time: 2023-11-14 22:13:20 UTC)"
        );
        let error = TlsError::from_rustls(
            rustls::Error::InvalidCertificate(CertificateError::NotValidYet),
            &name("localhost"),
            true,
            &[],
        );
        assert_eq!(
            error.to_string(),
            "the server's certificate is not valid yet; check this host's clock"
        );
    }

    #[test]
    fn alerts_are_named_with_a_hint() {
        let error = TlsError::from_rustls(
            rustls::Error::AlertReceived(AlertDescription::ProtocolVersion),
            &name("localhost"),
            true,
            &[21, 3, 3],
        );
        assert_eq!(
            error.to_string(),
            "the server sent the TLS alert ProtocolVersion; the server and this client have no \
             TLS version in common"
        );
        let error = TlsError::from_rustls(
            rustls::Error::AlertReceived(AlertDescription::CloseNotify),
            &name("localhost"),
            true,
            &[21, 3, 3],
        );
        assert_eq!(error, TlsError::PeerClosedDuringHandshake);
    }

    #[test]
    fn a_malformed_record_is_not_tls_only_when_the_bytes_say_so() {
        let http = b"HTTP/1.1 400 Bad Request\r\n";
        let error = TlsError::from_rustls(
            rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType),
            &name("localhost"),
            true,
            http,
        );
        assert_eq!(
            error,
            TlsError::NotTls {
                first_bytes: "HTTP/1.1 400 Bad Request\\r\\n".to_owned()
            }
        );
        let error = TlsError::from_rustls(
            rustls::Error::InvalidMessage(rustls::InvalidMessage::MessageTooShort),
            &name("localhost"),
            true,
            &[22, 3, 3, 0, 1],
        );
        assert!(matches!(error, TlsError::Other { .. }), "{error:?}");
    }

    #[test]
    fn presented_names_lose_their_wrappers() {
        assert_eq!(
            readable_name("DnsName(\"a.example\")".to_owned()),
            "a.example"
        );
        assert_eq!(readable_name("IpAddress(10.1.2.3)".to_owned()), "10.1.2.3");
        assert_eq!(readable_name("IpAddress(::1)".to_owned()), "::1");
        assert_eq!(readable_name("DirectoryName".to_owned()), "DirectoryName");
    }

    #[test]
    fn tls_record_starts_are_recognised() {
        assert!(looks_like_tls(&[]));
        assert!(looks_like_tls(&[22]));
        assert!(looks_like_tls(&[22, 3, 1, 0, 5]));
        assert!(looks_like_tls(&[21, 3, 3]));
        assert!(!looks_like_tls(b"H"));
        assert!(!looks_like_tls(&[23, 3, 3]));
        assert!(!looks_like_tls(&[22, 2]));
    }
}
