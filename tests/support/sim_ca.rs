//! The simulator venue files without the simulator: the shipped `*-sim.toml` venue files name
//! the CA file `tickwire sim` writes, which exists only once a simulator has run with its
//! default directory; tests that load them without opening a TLS connection name a placeholder.

/// The line of the shipped simulator venue files that names the CA file `tickwire sim` writes,
/// which exists only once a simulator has run with its default directory.
pub const SIM_CA_LINE: &str = "extra_ca_file = \"/tmp/tickwire-sim/ca.pem\"";

/// A CA file's text the configuration loader accepts, for tests that load a simulator venue file
/// without opening a TLS connection.
pub const PLACEHOLDER_CA_PEM: &str = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";

/// `text` (a venue file) with its [`SIM_CA_LINE`], if any, naming `ca_file` instead.
pub fn with_ca_file(text: &str, ca_file: &std::path::Path) -> String {
    text.replace(
        SIM_CA_LINE,
        &format!("extra_ca_file = {:?}", ca_file.display().to_string()),
    )
}
