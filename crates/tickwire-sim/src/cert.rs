//! The run's certificates: a throwaway CA, made fresh on every start, and a server certificate it
//! signs. Only the CA leaves the process (`ca.pem`, for the client's `tls.extra_ca_file`); the
//! keys live in memory and die with the run, so a leaked `ca.pem` trusts nothing afterwards.

use super::SimError;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The only name of the certificate served under `Faults::wrong_host_cert`: `.invalid` is
/// reserved (RFC 2606), so it can never be a real host.
pub const WRONG_HOST: &str = "wrong-host.invalid";

/// Makes the CA and the server certificate for `hosts`, writes `cert_dir/ca.pem`, and returns
/// the server's TLS configuration and the path written.
pub fn server_config(
    cert_dir: &Path,
    hosts: &[String],
) -> Result<(Arc<ServerConfig>, PathBuf), SimError> {
    let ca_key = KeyPair::generate().map_err(SimError::Certificate)?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(SimError::Certificate)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "tickwire sim throwaway CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = ca_params
        .self_signed(&ca_key)
        .map_err(SimError::Certificate)?;

    let server_key = KeyPair::generate().map_err(SimError::Certificate)?;
    let mut server_params =
        CertificateParams::new(hosts.to_vec()).map_err(SimError::Certificate)?;
    server_params
        .distinguished_name
        .push(DnType::CommonName, "tickwire sim");
    let server = server_params
        .signed_by(&server_key, &ca, &ca_key)
        .map_err(SimError::Certificate)?;

    std::fs::create_dir_all(cert_dir).map_err(|source| SimError::CertDir {
        path: cert_dir.to_owned(),
        source,
    })?;
    let ca_path = cert_dir.join("ca.pem");
    std::fs::write(&ca_path, ca.pem()).map_err(|source| SimError::CertDir {
        path: ca_path.clone(),
        source,
    })?;

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    // The chain carries the CA too, as a venue's does, although the client has it already.
    let chain = vec![server.der().clone(), ca.der().clone()];
    // The provider is named rather than taken from the process default, as in `tls::settings`.
    let config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(SimError::Tls)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(SimError::Tls)?;
    Ok((Arc::new(config), ca_path))
}
