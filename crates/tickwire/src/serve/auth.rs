//! The serving plane's bearer token: read from an environment variable, else from a systemd
//! credential (`LoadCredential=` puts it in `$CREDENTIALS_DIRECTORY/<name>`), never from the
//! TOML file (STYLE.md: secrets never live in TOML).

use crate::config::HttpConfig;

/// A token shorter than this is refused as if absent: a bearer token is the only thing between
/// another host and the API, and a short one is guessed.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The token, when one is set and long enough: `$<token_env>`, else the credential file.
/// Surrounding whitespace (the file's final newline) is not part of it.
pub fn token(config: &HttpConfig) -> Option<String> {
    token_from(
        config,
        std::env::var(&config.token_env).ok(),
        std::env::var_os("CREDENTIALS_DIRECTORY").map(std::path::PathBuf::from),
    )
}

/// [`token`] with the environment given: the variable's value and the credentials directory.
fn token_from(
    config: &HttpConfig,
    from_env: Option<String>,
    credentials_dir: Option<std::path::PathBuf>,
) -> Option<String> {
    let from_credential =
        || std::fs::read_to_string(credentials_dir?.join(&config.token_credential)).ok();
    let token = from_env.or_else(from_credential)?;
    let token = token.trim();
    (token.len() >= MIN_TOKEN_BYTES && token.bytes().all(|byte| byte.is_ascii_graphic()))
        .then(|| token.to_owned())
}

/// Compares a presented `Authorization` header with the token in time that does not depend on
/// where they first differ, so that the token cannot be found a byte at a time by timing.
pub fn authorized(header: Option<&[u8]>, token: &str) -> bool {
    let Some(presented) = header.and_then(|value| value.strip_prefix(b"Bearer ")) else {
        return false;
    };
    let expected = token.as_bytes();
    if presented.len() != expected.len() {
        return false;
    }
    presented
        .iter()
        .zip(expected)
        .fold(0u8, |differ, (a, b)| differ | (a ^ b))
        == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_compared_whole() {
        let token = "0123456789abcdef0123";
        assert!(authorized(Some(b"Bearer 0123456789abcdef0123"), token));
        assert!(!authorized(Some(b"Bearer 0123456789abcdef0124"), token));
        assert!(!authorized(Some(b"Bearer 0123456789abcdef012"), token));
        assert!(!authorized(Some(b"Basic 0123456789abcdef0123"), token));
        assert!(!authorized(None, token));
    }

    #[test]
    fn the_token_comes_from_the_variable_else_the_credential_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cred"), "  secret-secret-secret-1\n").unwrap();
        let config = HttpConfig {
            token_credential: "cred".to_owned(),
            ..HttpConfig::default()
        };
        let credentials = Some(dir.path().to_owned());
        assert_eq!(
            token_from(&config, None, credentials.clone()).as_deref(),
            Some("secret-secret-secret-1")
        );
        assert_eq!(
            token_from(
                &config,
                Some("from-the-variable-0001".to_owned()),
                credentials.clone()
            )
            .as_deref(),
            Some("from-the-variable-0001")
        );
        assert_eq!(token_from(&config, None, None), None);
        std::fs::write(dir.path().join("cred"), "short\n").unwrap();
        assert_eq!(token_from(&config, None, credentials), None);
    }
}
