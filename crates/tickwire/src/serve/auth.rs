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

/// The token as the guard holds it: an HMAC-SHA-256 key drawn at start and the token's tag under
/// it, never the token's bytes.
///
/// A presented token is checked with `ring::hmac::verify`: it computes the presented token's tag
/// and compares the two fixed-length tags in constant time. So the time taken depends neither on
/// where the presented token first differs from the real one nor on the real one's length (a
/// shorter or longer guess costs the same as any other), and with the key unknown to the client
/// even a comparison that leaked would leak nothing about the token itself. (ring's
/// `constant_time::verify_slices_are_equal` is deprecated as "not intended for external use";
/// `hmac::verify` is its supported constant-time comparison.)
pub struct Token {
    key: ring::hmac::Key,
    tag: ring::hmac::Tag,
}

impl Token {
    pub fn new(token: &str) -> Token {
        let key =
            ring::hmac::Key::generate(ring::hmac::HMAC_SHA256, &ring::rand::SystemRandom::new())
                // The kernel's random source does not fail on Linux; were it to, a fixed key still
                // compares in constant time (only the defence in depth is lost).
                .unwrap_or_else(|_| {
                    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"tickwire-http-token")
                });
        let tag = ring::hmac::sign(&key, token.as_bytes());
        Token { key, tag }
    }

    /// Whether a presented `Authorization` header carries the token (`Bearer <token>`).
    pub fn accepts(&self, header: Option<&[u8]>) -> bool {
        let Some(presented) = header.and_then(|value| value.strip_prefix(b"Bearer ")) else {
            return false;
        };
        ring::hmac::verify(&self.key, presented, self.tag.as_ref()).is_ok()
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Token(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_compared_whole() {
        let token = Token::new("0123456789abcdef0123");
        assert!(token.accepts(Some(b"Bearer 0123456789abcdef0123")));
        for refused in [
            // Wrong in the last byte, the first byte, and everywhere.
            &b"Bearer 0123456789abcdef0124"[..],
            b"Bearer 1123456789abcdef0123",
            b"Bearer zzzzzzzzzzzzzzzzzzzz",
            // Shorter: a prefix of the token, and nothing at all.
            b"Bearer 0123456789abcdef012",
            b"Bearer 0123",
            b"Bearer ",
            // Longer: the token with more after it.
            b"Bearer 0123456789abcdef01234",
            b"Bearer 0123456789abcdef0123 ",
            b"Bearer 0123456789abcdef01230123456789abcdef0123",
            // Another scheme, no scheme, and the token alone.
            b"Basic 0123456789abcdef0123",
            b"Bearer0123456789abcdef0123",
            b"0123456789abcdef0123",
        ] {
            assert!(
                !token.accepts(Some(refused)),
                "{:?}",
                String::from_utf8_lossy(refused)
            );
        }
        assert!(!token.accepts(None));
        // Two guards of one token hold different keys, and both accept it.
        let again = Token::new("0123456789abcdef0123");
        assert_ne!(token.tag.as_ref(), again.tag.as_ref());
        assert!(again.accepts(Some(b"Bearer 0123456789abcdef0123")));
        assert_eq!(format!("{token:?}"), "Token(..)");
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
