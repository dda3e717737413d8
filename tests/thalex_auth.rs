//! Thalex login tokens (`tickwire::venue::thalex::auth`): signed, verified, refused. Here rather
//! than beside the code because they sign with test-only keys, which the appliance crate does not
//! carry.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use tickwire::venue::thalex::auth::*;

/// The simulator's test-only key pair (`crates/tickwire-sim/src/thalex_test_key.pem`, PKCS#8).
const TEST_PEM: &str = tickwire_sim::thalex::TEST_PRIVATE_KEY_PEM;

// Test-only keys, made once with openssl for these tests and used nowhere else: another
// 2048-bit RSA key (PKCS#1 form), a P-256 key and a 1024-bit RSA key.
const OTHER_PKCS1_PEM: &str = "\
-----BEGIN RSA PRIVATE KEY-----
MIIEpAIBAAKCAQEAtkasroM+Zz5RlggWdxycQ8xFAHvK/tzRAifUx1lhDuEzXcet
SfSATn8GFGdnITPzA26wgZ5flSS29cDo4eo83GlV70DfAvTDLth8zab4iuQEsGoB
zcd5GdT/jErf+3lSn0/JdDXQcIdPsqfFKqjcc5Gi3Mv1d4BRbd94LZkXap0s0W0o
GArkX2/mD9JhYsbj7RCM3/qetxsqheS+KrwJyVSY0qP+i79Ax4XgmiLY4/dHSUbY
eYG/fawFP4ExXUlRAEdKR30adpjKu3ZbXVKYxSwt/mt5c8MGwHvLrgT/Dtz3Hgoh
PCNRxAihVMM/AvQ6PkakICOqiCAqj48c63k1MQIDAQABAoIBAAbtuSWpuScH2uZm
6KJeyjUs4BiXHA3DtgbXcxf1dqIv/u8F0TlPm8r1ZXVEGEr4+bf72VDBWjpwmqsi
dJfAes9utO9dxLxiMm3RmS42C8TidafWYmWAkMK3HSmniku5qQwuO7xOSV3lqYAN
2YmiwT0mtY1Ktsoel2R49fgBwD6d/2xcQ9s7scrz4TrImklnlcLQ5/1/iJmCE5ud
azOk1BDNKBhOiEwy9uSrVcoYhz0Ca2U36QWKluKr2o7bNUOlFDrQeSjv/ziGh2ZI
JK/khxgHa/Lvq6iAT9k70t+qdqAzeGvF/wiXB4ZCORu4PK33VYSzVGe/TLE+2H0R
SKbzzPkCgYEA5KZ6nZztO3oeOqD1wdkW5HEyod+cskHHHxLdlX8vNiGflxtE5333
VsV7K6sjlcp+yrkRsSOnFMoL2fOu50iqJtdvH1DtZKp9wKAwVGeIVzMWT2pdNVHA
easVvHl8bRjmgXai0jkyMhwK2+eidQ1+2B+L8de9DdrLlL4pD1mID50CgYEAzBQq
geZ/gTJszCnW4NwzyrDgHO/e94kKa5CEqyfbKYAWD1pxgheRXyToC6w4R0ZPfm7h
h/0xRPTfbjUm5wPRpsDuF+AgMifLyFcps7fjMdeRnZhkzNMKIwKgb1dV5SXSxWhD
nkjMFTr8T9qjV7d9sQnd6ommxtKLOyw2lpAzKaUCgYEA2HzzzXV+fHj0VCiAZ8jG
zwaKnQ9eiryS7s3q9RgVuFf/hY+xHsl6vTJ/m2oPaEzw3bp6kNCj6qAetn7uFFgN
mncR5IG4Mz7lj9Nbzx6zzXQ2ZHzdwZUk+03MZ8ZS0+zmmp+cLBUxfJZmha18eP2N
Is5Dr3jHrG2DodKmh70KgVUCgYEAmyY5qsgx52cOj6i/U/QU6+PMfjNer5Hf+ibE
tdp3I/Xcz49S/DQusMa+IyGrJ4SsqtJhY6F585K2ynJeQQMGQGAsorohv//BTW32
pksGzr20Vruk5pMLAdLdZchf5PX8Z1f9EDkH7pwJdiwiQm2dgRqfO8+qmz013Kag
WZcHToECgYAMXD/Kajp8rLvzZgp3wlD1+m+eAzUtzLbX1hti8Vm8uUbRvzb3zxg7
UvNrXu2dgXBZi1XA3/3nnRaDz6h7bknbIbe+HN+/BJ/1bDWOxu2IlgcL7tQU/kt0
mQuEK1/WwlGt3+ipKsdOdtA1pEoG6fncrNSvoVv2CMu0OTjNBgRlsQ==
-----END RSA PRIVATE KEY-----
";

const EC_PEM: &str = "\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgyof36vaW8xil9yVM
8/CAAeHz4aLmsiY4SiJlfwi7iWahRANCAAQcbhqCpJI5rsow5rYSFcwZjgTpeGTK
7KhT881k9qMYaer5rz3nXu2Tpb5k1I+RVriGQWvTqIuoX912jo8HhoIr
-----END PRIVATE KEY-----
";

const RSA_1024_PEM: &str = "\
-----BEGIN PRIVATE KEY-----
MIICdgIBADANBgkqhkiG9w0BAQEFAASCAmAwggJcAgEAAoGBANh9VKws3Ge3265C
JowNM/q8vQy2sKWQv8nY3oNWHnUnTqzgmXS8+L3qTf1dzVPEctx97dk5zcKv9uHA
3ncpFZcsFTsj30OSndwm56xKJUU37ZMBWZzOkDjDqd134nCy4Mhlj807nMSlCEmp
rXfnYpOCdyhUuj0kRu7JwY1XDl/XAgMBAAECgYApB8/1decsDS+onkb6AkKYwg6+
ix19s6p10hGSKM9K+vExWLwc4Pfv3ql7XLzepHv0iDV9FzSFMp6C+O/w+6toix+i
w2zwXT06tLCobMjodRcAXLqT2BPz/wtDQZil8tPMU33PsKfuctTzOehgOgk/Jfxq
1A1TpVuWeupiS/EbcQJBAPIg1HO3f34ymIY5m3+IBH99Y+k5aRFCe4Nf1hgtvU8S
1A0Nsml8LfizMecPJ3sG+AQZ+/Bc1ob/F5ruHZSWXakCQQDk5HjDFOlxRs5GRp7O
wARvfTNIn3qv4/yLl/3Ac8704qTd2o9sjBGji1E0NbGXlqGhc5nnwIWT1hiMW6p9
/kF/AkBqTId5FgJfAQ99PiVKZAi1f/MxHQdHkIxxLM3tZ4dJA9ccs/qz3NTB7snl
yv1mQbT49/9nkxqLwco3Nnq+FRWhAkEAj2T2prhWGuoR1gLuAHZZEQNtemS2trRs
hYNdrBChKddHE9mVmpoRftSLtdqhfGcYsQ278G0zAc/RpzTSFYaQvwJAP5XKmgu0
DcGQjhbjrEeHrk6Yk2jSv1SS/xGQHI5WEz5Ce1wZm+/e0DCDy9RAf7zihASIZkch
oQtILTITN4lRnw==
-----END PRIVATE KEY-----
";

fn claims_of(token: &str, der: &[u8]) -> Result<Claims, AuthError> {
    verify_token(token, der)
}

#[test]
fn a_signed_token_verifies_and_carries_its_claims() {
    let token = login_token("key-1", TEST_PEM, 1_700_000_000).unwrap();
    let der = public_key_der(TEST_PEM).unwrap();
    assert_eq!(
        claims_of(&token, &der).unwrap(),
        Claims {
            kid: "key-1".into(),
            iat: 1_700_000_000
        }
    );
    let header = token.split('.').next().unwrap();
    assert_eq!(
        URL_SAFE_NO_PAD.decode(header).unwrap(),
        br#"{"alg":"RS512","typ":"JWT","kid":"key-1"}"#
    );
    assert!(!token.contains('='), "base64url without padding");
}

#[test]
fn a_pkcs1_key_signs_too() {
    let token = login_token("other", OTHER_PKCS1_PEM, 5).unwrap();
    let der = public_key_der(OTHER_PKCS1_PEM).unwrap();
    assert_eq!(claims_of(&token, &der).unwrap().iat, 5);
}

#[test]
fn a_tampered_token_fails_the_signature() {
    let token = login_token("key-1", TEST_PEM, 1_700_000_000).unwrap();
    let der = public_key_der(TEST_PEM).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    let forged_claims = URL_SAFE_NO_PAD.encode(br#"{"iat":1800000000}"#);
    let forged = format!("{}.{forged_claims}.{}", parts[0], parts[2]);
    assert_eq!(claims_of(&forged, &der), Err(AuthError::BadSignature));
    let mut signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    signature[10] ^= 1;
    let flipped = format!(
        "{}.{}.{}",
        parts[0],
        parts[1],
        URL_SAFE_NO_PAD.encode(signature)
    );
    assert_eq!(claims_of(&flipped, &der), Err(AuthError::BadSignature));
}

#[test]
fn another_key_does_not_verify() {
    let token = login_token("key-1", TEST_PEM, 1).unwrap();
    let other = public_key_der(OTHER_PKCS1_PEM).unwrap();
    assert_eq!(claims_of(&token, &other), Err(AuthError::BadSignature));
}

#[test]
fn another_algorithm_is_refused_before_the_signature() {
    let der = public_key_der(TEST_PEM).unwrap();
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT","kid":"k"}"#);
    let claims = URL_SAFE_NO_PAD.encode(br#"{"iat":1}"#);
    let token = format!("{header}.{claims}.c2ln");
    assert_eq!(
        claims_of(&token, &der),
        Err(AuthError::WrongAlgorithm("HS256".into()))
    );
    let none = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    assert_eq!(
        claims_of(&format!("{none}.{claims}."), &der),
        Err(AuthError::WrongAlgorithm("none".into()))
    );
}

#[test]
fn garbage_is_malformed() {
    let der = public_key_der(TEST_PEM).unwrap();
    for garbage in ["", "abc", "a.b", "a.b.c.d", "!!.??.**", "e30.e30"] {
        assert!(
            matches!(claims_of(garbage, &der), Err(AuthError::Malformed(_))),
            "{garbage:?}"
        );
    }
    // Valid base64url that is not JSON.
    assert!(matches!(
        claims_of("aGVsbG8.aGVsbG8.aGVsbG8", &der),
        Err(AuthError::Malformed("the header is not JSON"))
    ));
}

#[test]
fn bad_keys_get_clear_errors() {
    assert_eq!(
        login_token("k", "not a key", 1),
        Err(AuthError::BadPem("no -----BEGIN line"))
    );
    assert_eq!(
        login_token(
            "k",
            "-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE KEY-----\n",
            1
        ),
        Err(AuthError::BadPem("the body is not base64"))
    );
    assert!(matches!(
        login_token("k", EC_PEM, 1),
        Err(AuthError::NotRsa(_))
    ));
    assert_eq!(
        login_token("k", RSA_1024_PEM, 1),
        Err(AuthError::KeyTooSmall)
    );
    let message = login_token("k", RSA_1024_PEM, 1).unwrap_err().to_string();
    assert!(message.contains("2048"), "{message}");
}

#[test]
fn the_login_request_has_the_venue_shape() {
    let request: serde_json::Value = serde_json::from_str(&login_request(7, "a.b.c")).unwrap();
    assert_eq!(
        request,
        serde_json::json!({"method": "public/login", "params": {"token": "a.b.c"}, "id": 7})
    );
}
