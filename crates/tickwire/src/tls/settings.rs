//! The client configuration for one venue, built once on the control thread.
//!
//! **Invariant:** certificate verification is always on. There is no setting that turns it off;
//! a venue with a private CA (the local simulator) is trusted by adding that CA with
//! `tls.extra_ca_file`, never by skipping the check.

use super::error::TlsConfigError;
use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The protocol versions a client offers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsVersions {
    /// TLS 1.3, and TLS 1.2 for servers that have nothing newer.
    #[default]
    Tls12AndTls13,
    /// TLS 1.3 only.
    Tls13Only,
}

/// How a venue's TLS client is set up; [`TlsSettings::build`] turns it into a rustls config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    extra_ca_file: Option<PathBuf>,
    alpn_http11: bool,
    versions: TlsVersions,
}

/// Where the trust anchors of a built configuration came from, for the start-up log and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrustAnchorCounts {
    /// Certificates of the platform store that were added.
    pub platform_added: usize,
    /// Certificates of the platform store that could not be used (malformed, not a CA).
    pub platform_skipped: usize,
    /// Errors met while reading the platform store (a missing directory, an unreadable file).
    pub platform_errors: usize,
    /// Roots from the `webpki-roots` crate (Mozilla's list, compiled in).
    pub webpki_roots: usize,
    /// Certificates from `tls.extra_ca_file`.
    pub extra: usize,
}

impl TlsSettings {
    /// Platform and `webpki-roots` anchors, TLS 1.2 and 1.3, no ALPN.
    pub fn new() -> Self {
        Self::default()
    }

    /// The settings a venue file asks for (`[tls]`). The server name (`tls.sni`) is not part of
    /// the shared configuration; pass it to [`server_name`] for each session.
    pub fn from_venue(tls: &crate::config::TlsConfig) -> Self {
        Self {
            extra_ca_file: tls.extra_ca_file.clone(),
            ..Self::default()
        }
    }

    /// Trusts the CA certificates of this PEM file too (one or more certificates).
    pub fn extra_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.extra_ca_file = Some(path.into());
        self
    }

    /// Offers `http/1.1` by ALPN, for servers that route the WebSocket upgrade by it.
    pub fn alpn_http11(mut self, offer: bool) -> Self {
        self.alpn_http11 = offer;
        self
    }

    /// The protocol versions to offer.
    pub fn versions(mut self, versions: TlsVersions) -> Self {
        self.versions = versions;
        self
    }

    /// Builds the client configuration: the `ring` provider, verification against the trust
    /// anchors of [`TlsSettings::trust_anchors`], the chosen versions and ALPN. Reads files, so
    /// call it on the control thread, once per venue, and share the result between sessions
    /// (the `Arc` also shares rustls's session cache, so a reconnect can resume).
    pub fn build(&self) -> Result<Arc<ClientConfig>, TlsConfigError> {
        let roots = self.shared_trust_anchors()?;
        let versions: &[&'static rustls::SupportedProtocolVersion] = match self.versions {
            TlsVersions::Tls12AndTls13 => &[&rustls::version::TLS13, &rustls::version::TLS12],
            TlsVersions::Tls13Only => &[&rustls::version::TLS13],
        };
        // The provider is named, not taken from the process default, so that another crate
        // installing a different default cannot change what tickwire negotiates.
        let mut config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_protocol_versions(versions)
            .map_err(|error| TlsConfigError::Rustls {
                message: error.to_string(),
            })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        if self.alpn_http11 {
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
        }
        // After the handshake the session protects records itself, with the traffic keys
        // rustls hands over (`client.rs`, `records.rs`): rustls's own record layer allocates per
        // record.
        config.enable_secret_extraction = true;
        Ok(Arc::new(config))
    }

    /// The trust anchors as one store shared by every configuration whose extra CA file has the
    /// same path and the same contents (read again each time, so a CA file replaced on disk is
    /// a new store): built (and logged) the first time, then handed out again. A process with
    /// several venues, each with a WebSocket and a REST client, keeps one copy of the
    /// platform's and `webpki-roots`' 150-odd roots instead of one per configuration.
    fn shared_trust_anchors(&self) -> Result<Arc<RootCertStore>, TlsConfigError> {
        type Key = (Option<PathBuf>, Option<Vec<u8>>);
        static STORES: std::sync::Mutex<Vec<(Key, Arc<RootCertStore>)>> =
            std::sync::Mutex::new(Vec::new());
        // An unreadable file is not cached: `trust_anchors` reports it.
        let contents = self
            .extra_ca_file
            .as_ref()
            .and_then(|path| std::fs::read(path).ok());
        let key = (self.extra_ca_file.clone(), contents);
        let mut stores = STORES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if key.0.is_none() || key.1.is_some() {
            if let Some((_, roots)) = stores.iter().find(|(known, _)| *known == key) {
                return Ok(Arc::clone(roots));
            }
        }
        let (roots, counts) = self.trust_anchors()?;
        tracing::info!(
            platform_added = counts.platform_added,
            platform_skipped = counts.platform_skipped,
            webpki_roots = counts.webpki_roots,
            extra = counts.extra,
            extra_ca_file = ?self.extra_ca_file,
            "TLS trust anchors loaded"
        );
        let roots = Arc::new(roots);
        stores.push((key, Arc::clone(&roots)));
        Ok(roots)
    }

    /// The trust anchors: the platform store, `webpki-roots`, and the extra CA file.
    ///
    /// A host without a platform store, or with a partly unreadable one, is not an error: what
    /// could not be loaded is logged as a warning and `webpki-roots` still covers the public
    /// venues. An unreadable, empty or malformed extra CA file is an error, because the venue
    /// that names it cannot work without it.
    pub fn trust_anchors(&self) -> Result<(RootCertStore, TrustAnchorCounts), TlsConfigError> {
        let mut roots = RootCertStore::empty();
        let mut counts = TrustAnchorCounts::default();

        let platform = rustls_native_certs::load_native_certs();
        for error in &platform.errors {
            tracing::warn!(%error, "could not load part of the platform's CA store");
        }
        counts.platform_errors = platform.errors.len();
        let (added, skipped) = roots.add_parsable_certificates(platform.certs);
        counts.platform_added = added;
        counts.platform_skipped = skipped;
        if added == 0 {
            tracing::warn!(
                "the platform's CA store is empty or missing; trusting the compiled-in \
                 webpki-roots and tls.extra_ca_file only"
            );
        } else if skipped > 0 {
            tracing::warn!(
                skipped,
                "some certificates of the platform's CA store were unusable"
            );
        }

        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        counts.webpki_roots = webpki_roots::TLS_SERVER_ROOTS.len();

        if let Some(path) = &self.extra_ca_file {
            counts.extra = add_ca_file(&mut roots, path)?;
        }
        Ok((roots, counts))
    }
}

/// Adds every certificate of a PEM file; returns how many.
fn add_ca_file(roots: &mut RootCertStore, path: &Path) -> Result<usize, TlsConfigError> {
    let pem = std::fs::read(path).map_err(|source| TlsConfigError::CaFileUnreadable {
        path: path.to_owned(),
        source,
    })?;
    let mut added = 0;
    for (index, certificate) in CertificateDer::pem_slice_iter(&pem).enumerate() {
        let certificate = certificate.map_err(|error| TlsConfigError::CaFileNotPem {
            path: path.to_owned(),
            reason: error.to_string(),
        })?;
        roots
            .add(certificate)
            .map_err(|error| TlsConfigError::CaCertificateUnusable {
                path: path.to_owned(),
                number: index + 1,
                reason: error.to_string(),
            })?;
        added += 1;
    }
    if added == 0 {
        return Err(TlsConfigError::CaFileEmpty {
            path: path.to_owned(),
        });
    }
    Ok(added)
}

/// The name a session sends (SNI) and verifies the certificate against: `sni_override` if set,
/// else the URL's host. An IP address is verified against the certificate's IP addresses and,
/// as RFC 6066 section 3 requires, not sent as SNI. IPv6 literals come without brackets, as
/// `config::Endpoint` stores them.
pub fn server_name(
    host: &str,
    sni_override: Option<&str>,
) -> Result<ServerName<'static>, TlsConfigError> {
    let name = sni_override.unwrap_or(host);
    ServerName::try_from(name.to_owned()).map_err(|_| TlsConfigError::InvalidServerName {
        name: name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    #[test]
    fn ip_hosts_become_ip_server_names() {
        let name = server_name("127.0.0.1", None).expect("an IPv4 literal");
        assert_eq!(
            name,
            ServerName::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST).into())
        );
        let name = server_name("::1", None).expect("an IPv6 literal");
        assert_eq!(
            name,
            ServerName::IpAddress(IpAddr::V6(Ipv6Addr::LOCALHOST).into())
        );
    }

    #[test]
    fn sni_override_wins_over_the_host() {
        let name = server_name("10.0.0.7", Some("fstream.binance.com")).expect("a DNS name");
        assert_eq!(name.to_str(), "fstream.binance.com");
    }

    #[test]
    fn a_bad_name_is_named_in_the_error() {
        let error = server_name("bad name!", None).expect_err("not a name");
        assert!(error.to_string().contains("\"bad name!\""), "{error}");
    }

    #[test]
    fn a_missing_ca_file_names_its_path() {
        let error = add_ca_file(
            &mut RootCertStore::empty(),
            Path::new("/nonexistent/ca.pem"),
        )
        .expect_err("missing");
        let message = error.to_string();
        assert!(message.starts_with("tls.extra_ca_file /nonexistent/ca.pem: cannot read it"));
    }

    #[test]
    fn webpki_roots_are_always_trusted() {
        let (roots, counts) = TlsSettings::new().trust_anchors().expect("no extra file");
        assert_eq!(counts.webpki_roots, webpki_roots::TLS_SERVER_ROOTS.len());
        assert!(roots.len() >= counts.webpki_roots);
    }

    #[test]
    fn configurations_share_one_trust_store_until_the_ca_file_changes() {
        let plain = TlsSettings::new().shared_trust_anchors().unwrap();
        let again = TlsSettings::new()
            .alpn_http11(true)
            .shared_trust_anchors()
            .unwrap();
        assert!(
            Arc::ptr_eq(&plain, &again),
            "one store for the same anchors"
        );

        // Two real CA certificates from the platform store, if it has them.
        let certs: Vec<Vec<u8>> = std::fs::read_dir("/etc/ssl/certs")
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter(|entry| entry.path().extension().is_some_and(|e| e == "pem"))
            .filter_map(|entry| std::fs::read(entry.path()).ok())
            .take(2)
            .collect();
        if certs.len() < 2 {
            eprintln!("SKIPPED the CA-file half: no platform certificates in /etc/ssl/certs");
            return;
        }
        let path = std::env::temp_dir().join(format!("tw-ca-{}.pem", std::process::id()));
        std::fs::write(&path, &certs[0]).unwrap();
        let settings = TlsSettings::new().extra_ca_file(&path);
        let first = settings.shared_trust_anchors().unwrap();
        assert!(!Arc::ptr_eq(&first, &plain), "an extra CA is another store");
        assert!(Arc::ptr_eq(
            &first,
            &settings.shared_trust_anchors().unwrap()
        ));
        std::fs::write(&path, &certs[1]).unwrap();
        let replaced = settings.shared_trust_anchors().unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(
            !Arc::ptr_eq(&first, &replaced),
            "a replaced CA file is read again"
        );
    }
}
