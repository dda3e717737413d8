//! WebSocket client (RFC 6455), sans-IO.
