//! Thalex login tokens: the JWT that `public/login` carries (`{"token": <JWT>}`).
//!
//! Thalex API keys are RSA key pairs; the client signs a JWT with the private key and the venue
//! checks it with the public key it holds under the key id. The token is RS512 (RSASSA-PKCS1-v1_5
//! with SHA-512, RFC 7518 section 3.3) over `base64url(header) "." base64url(claims)`, both
//! without padding (RFC 7515 section 2), with header `{"alg":"RS512","typ":"JWT","kid":<key id>}`
//! and claims `{"iat":<unix seconds>}`.
//!
//! Keys and tokens are secrets: nothing here logs them, and no error message quotes them.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, KeyPair, RsaKeyPair};

/// Why a token could not be made or verified. The messages never quote key or token bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("the private key is not a PEM block: {0}")]
    BadPem(&'static str),
    #[error("the private key is not an RSA key ({0}); Thalex login tokens are RS512 and need one")]
    NotRsa(&'static str),
    #[error("the RSA key is too small: RS512 signing here needs at least 2048 bits")]
    KeyTooSmall,
    #[error("the RSA private key was rejected: {0}")]
    BadKey(String),
    #[error("signing the token failed")]
    Signing,
    #[error("the token is malformed: {0}")]
    Malformed(&'static str),
    #[error("the token's algorithm is {0:?}, not RS512")]
    WrongAlgorithm(String),
    #[error("the token's signature does not verify with this public key")]
    BadSignature,
}

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The key id of the header.
    pub kid: String,
    /// Issued at, in seconds since the Unix epoch.
    pub iat: u64,
}

/// A login token for key `key_id`, signed with `private_key_pem` (PKCS#8
/// `-----BEGIN PRIVATE KEY-----` or PKCS#1 `-----BEGIN RSA PRIVATE KEY-----`), issued at
/// `iat_secs` seconds since the Unix epoch.
pub fn login_token(
    key_id: &str,
    private_key_pem: &str,
    iat_secs: u64,
) -> Result<String, AuthError> {
    let key_pair = key_pair_from_pem(private_key_pem)?;
    // Written by hand to keep the documented key order; serde_json escapes the key id.
    let kid = serde_json::Value::String(key_id.to_owned());
    let header = format!(r#"{{"alg":"RS512","typ":"JWT","kid":{kid}}}"#);
    let claims = format!(r#"{{"iat":{iat_secs}}}"#);
    let mut token = URL_SAFE_NO_PAD.encode(header);
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(claims));
    let mut signature = vec![0u8; key_pair.public().modulus_len()];
    key_pair
        .sign(
            &signature::RSA_PKCS1_SHA512,
            &SystemRandom::new(),
            token.as_bytes(),
            &mut signature,
        )
        .map_err(|_| AuthError::Signing)?;
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(&signature));
    Ok(token)
}

/// The `public/login` request: `{"method":"public/login","params":{"token":".."},"id":N}`.
pub fn login_request(id: u64, token: &str) -> String {
    // serde_json escapes the token, although a JWT is base64url and dots only.
    let token = serde_json::Value::String(token.to_owned());
    format!(r#"{{"method":"public/login","params":{{"token":{token}}},"id":{id}}}"#)
}

/// Checks a token's structure, that its algorithm is RS512 and that its signature verifies with
/// `public_key_der` (a PKCS#1 `RSAPublicKey` in DER, what `RsaKeyPair::public_key()` gives), and
/// returns its claims. Whether the key id and the issue time are acceptable is the caller's call.
pub fn verify_token(token: &str, public_key_der: &[u8]) -> Result<Claims, AuthError> {
    let mut parts = token.split('.');
    let (Some(header_b64), Some(claims_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed("not three dot-separated parts"));
    };
    let header: serde_json::Value = decode_json(
        header_b64,
        "the header is not base64url",
        "the header is not JSON",
    )?;
    let alg = header
        .get("alg")
        .and_then(serde_json::Value::as_str)
        .ok_or(AuthError::Malformed("the header has no alg"))?;
    if alg != "RS512" {
        return Err(AuthError::WrongAlgorithm(alg.chars().take(16).collect()));
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature_b64)
        .map_err(|_| AuthError::Malformed("the signature is not base64url"))?;
    let signed_bytes = header_b64.len() + 1 + claims_b64.len();
    signature::UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA512, public_key_der)
        .verify(&token.as_bytes()[..signed_bytes], &signature)
        .map_err(|_| AuthError::BadSignature)?;
    let kid = header
        .get("kid")
        .and_then(serde_json::Value::as_str)
        .ok_or(AuthError::Malformed("the header has no kid"))?
        .to_owned();
    let claims: serde_json::Value = decode_json(
        claims_b64,
        "the claims are not base64url",
        "the claims are not JSON",
    )?;
    let iat = claims
        .get("iat")
        .and_then(serde_json::Value::as_u64)
        .ok_or(AuthError::Malformed(
            "the claims have no iat in whole seconds",
        ))?;
    Ok(Claims { kid, iat })
}

/// The public half of a private key PEM, as [`verify_token`] takes it.
pub fn public_key_der(private_key_pem: &str) -> Result<Vec<u8>, AuthError> {
    Ok(key_pair_from_pem(private_key_pem)?
        .public_key()
        .as_ref()
        .to_vec())
}

fn decode_json(
    part: &str,
    not_base64: &'static str,
    not_json: &'static str,
) -> Result<serde_json::Value, AuthError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| AuthError::Malformed(not_base64))?;
    serde_json::from_slice(&bytes).map_err(|_| AuthError::Malformed(not_json))
}

/// The two PEM labels an RSA private key comes under (RFC 7468 sections 10 and 11 for PKCS#8,
/// OpenSSL's traditional label for PKCS#1).
enum PemKind {
    Pkcs8,
    Pkcs1,
}

fn key_pair_from_pem(pem: &str) -> Result<RsaKeyPair, AuthError> {
    let (kind, der) = pem_block(pem)?;
    let parsed = match kind {
        PemKind::Pkcs8 => RsaKeyPair::from_pkcs8(&der),
        PemKind::Pkcs1 => RsaKeyPair::from_der(&der),
    };
    // ring names its rejections with fixed words (`KeyRejected`'s Display).
    parsed.map_err(|rejected| match rejected.to_string().as_str() {
        "TooSmall" => AuthError::KeyTooSmall,
        "WrongAlgorithm" => AuthError::NotRsa("the PKCS#8 key's algorithm is not rsaEncryption"),
        other => AuthError::BadKey(other.to_owned()),
    })
}

/// The label and the decoded body of the first PEM block.
fn pem_block(pem: &str) -> Result<(PemKind, Vec<u8>), AuthError> {
    let begin = pem
        .find("-----BEGIN ")
        .ok_or(AuthError::BadPem("no -----BEGIN line"))?;
    let rest = &pem[begin + "-----BEGIN ".len()..];
    let label_end = rest
        .find("-----")
        .ok_or(AuthError::BadPem("the BEGIN line is not closed"))?;
    let label = &rest[..label_end];
    let kind = match label {
        "PRIVATE KEY" => PemKind::Pkcs8,
        "RSA PRIVATE KEY" => PemKind::Pkcs1,
        "EC PRIVATE KEY" => return Err(AuthError::NotRsa("the PEM holds an EC key")),
        "ENCRYPTED PRIVATE KEY" => {
            return Err(AuthError::BadPem(
                "the key is encrypted; decrypt it first (openssl pkey -in key.pem)",
            ))
        }
        "PUBLIC KEY" | "RSA PUBLIC KEY" => {
            return Err(AuthError::BadPem(
                "the PEM holds a public key, not a private one",
            ))
        }
        _ => return Err(AuthError::BadPem("not a private key label")),
    };
    let body = &rest[label_end + "-----".len()..];
    let end_line = format!("-----END {label}-----");
    let end = body
        .find(&end_line)
        .ok_or(AuthError::BadPem("no matching -----END line"))?;
    let base64_text: String = body[..end]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let der = STANDARD
        .decode(base64_text)
        .map_err(|_| AuthError::BadPem("the body is not base64"))?;
    Ok((kind, der))
}

// The tests (tests/thalex_auth.rs) sign with the simulator's test-only key, which this crate does
// not carry.
