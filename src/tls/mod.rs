//! TLS client over byte buffers (rustls).
