//! tickwire's integration tests: one binary, one module per area (`cargo test --test tickwire
//! AREA::`), sharing `support`. The storm test (tests/lifecycle_storm.rs) is a binary of its own
//! because it measures the process's CPU time.
//!
//! Tests that need `../shared` (the venues' captures and references) or Python `websockets`
//! skip where those are missing, with a `SKIPPED <test>: <reason>` line that `cargo test` shows
//! and a count at the end (`support::skip`); `.ci/run` turns such a skip into a failure.

mod support;

mod architecture;
mod binance_decode;
mod binance_decode_alloc;
mod binance_spot_decode;
mod binance_spot_sbe;
mod binance_spot_sbe_appliance;
mod binance_spot_sync;
mod binance_sync;
mod book;
mod bus;
mod bus_appliance;
mod bus_clients;
mod bybit_appliance;
mod bybit_decode_cli;
mod capture_decimals;
mod cli;
mod cli_bench;
mod cli_sim;
mod config;
mod databento_appliance;
mod dbn_files;
mod decode_cli;
mod decoder_alloc;
mod decoders;
mod lifecycle;
mod mbo_book;
mod mbo_book_alloc;
mod nasdaq_itch;
mod nasdaq_itch_netns;
mod nats;
mod net_alloc;
mod net_heartbeat;
mod net_transport;
mod net_websocket;
mod okx_appliance;
mod okx_decode_cli;
mod readme;
mod record;
mod rings;
mod serve;
mod sim_appliance;
mod sim_binance_spot;
mod sim_binance_spot_sbe;
mod sim_databento;
mod sim_server;
mod sim_source;
mod sim_thalex;
mod strategy_output;
mod thalex_appliance;
mod thalex_auth;
mod thalex_decode;
mod tls_alloc;
mod tls_client;
mod workspace;
mod ws_client;
mod ws_handshake;
mod xdp_netns;
