//! What the integration tests share: finding shared data and the binary (`common`), an
//! appliance in a thread with a simulator (`appliance`), a thread-local allocation counter
//! installed as the binary's global allocator (`counting_alloc`), the MBO oracle and streams of
//! the L3 book tests, a blocking WebSocket client for the simulator tests (`ws_client`), and
//! network namespaces for the NATS cluster test and benchmark (`netns`).

pub mod appliance;
pub mod common;
pub mod counting_alloc;
pub mod mbo_oracle;
pub mod mbo_stream;
pub mod netns;
pub mod skip;
pub mod ws_client;
