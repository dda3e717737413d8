//! Error types of the config module.
//!
//! A `ConfigError` is written for the person editing the file: it names the file, the line and
//! column an editor can jump to, the full dotted key, and what would have been valid. Loading keeps
//! going after the first semantic problem so that one `tickwire check` run lists everything that
//! needs fixing, which is why loaders return `ConfigErrors` rather than a single error.

use std::fmt;
use std::path::PathBuf;

/// One problem in one config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{}:{}: {}{}", .file.display(), .line, .column, KeyPrefix(.key), .message)]
pub struct ConfigError {
    /// The file the problem is in, as the loader was given it (venue files are joined onto the
    /// appliance file's directory).
    pub file: PathBuf,
    /// 1-based line of the offending key or value.
    pub line: usize,
    /// 1-based column, counted in characters rather than bytes so that it matches editors.
    pub column: usize,
    /// Dotted key path such as `threads.net.wait` or `venues[0]`; empty for whole-file problems
    /// such as an unreadable file or a TOML syntax error.
    pub key: String,
    /// What is wrong and, where there is a short answer, what would be valid.
    pub message: String,
}

/// Renders the `key `...`: ` part of a `ConfigError`, or nothing for whole-file errors: a bare
/// "key ``" would only make the reader wonder which key was meant.
struct KeyPrefix<'a>(&'a str);

impl fmt::Display for KeyPrefix<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(formatter, "key `{}`: ", self.0)
        }
    }
}

/// Every problem found while loading a config, in file order and then line order.
///
/// It is never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", OnePerLine(.0))]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The individual errors, in the order they are displayed.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    /// How many problems were found.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True only for a value built by hand; loaders never return an empty list.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        Self(vec![error])
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

struct OnePerLine<'a>(&'a [ConfigError]);

impl fmt::Display for OnePerLine<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                formatter.write_str("\n")?;
            }
            write!(formatter, "{error}")?;
        }
        Ok(())
    }
}

/// Why `VenueConfig::api_key` could not produce the key a venue file asks for.
///
/// The messages name the venue and the config key that pointed at the secret, because the secret
/// is looked up long after the file was loaded, typically while the appliance starts.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// `credentials.api_key_env` names a variable that is not set.
    #[error(
        "venue `{venue}`: environment variable `{variable}` (credentials.api_key_env) is not set"
    )]
    EnvUnset { venue: String, variable: String },

    /// The variable is set but is not valid UTF-8, so it cannot be an API key.
    #[error(
        "venue `{venue}`: environment variable `{variable}` (credentials.api_key_env) is not valid UTF-8"
    )]
    EnvNotUnicode { venue: String, variable: String },

    /// `credentials.api_key_credential` is set but the process was not started with systemd
    /// credentials (`LoadCredential=` / `SetCredentialEncrypted=`), so there is no directory to
    /// read it from.
    #[error(
        "venue `{venue}`: credentials.api_key_credential = \"{credential}\" needs $CREDENTIALS_DIRECTORY, \
         which is not set (start the service with LoadCredential={credential}:<path>)"
    )]
    CredentialsDirectoryUnset { venue: String, credential: String },

    /// The credential file exists in name only: it could not be read.
    #[error("venue `{venue}`: cannot read credential file `{}`: {source}", .path.display())]
    CredentialUnreadable {
        venue: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The variable or credential file is present but holds nothing but whitespace; sending an
    /// empty key would only earn an authentication error from the venue later.
    #[error("venue `{venue}`: the API key from {origin} is empty")]
    Empty { venue: String, origin: String },
}
