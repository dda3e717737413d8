//! What the integration tests share: finding shared data and the binary (`common`), an
//! appliance in a thread with a simulator (`appliance`), a thread-local allocation counter
//! installed as the binary's global allocator (`counting_alloc`), the MBO oracle and streams of
//! the L3 book tests, a blocking WebSocket client for the simulator tests (`ws_client`), network
//! namespaces for the NATS cluster test and benchmark (`netns`), and the simulator venue files'
//! CA line pointed at a placeholder (`sim_ca`).

pub mod appliance;
pub mod common;
pub mod counting_alloc;
pub mod mbo_oracle;
pub mod mbo_stream;
pub mod netns;
pub mod sim_ca;
pub mod skip;
pub mod ws_client;

/// Two namespaces joined by a veth (`netns::Pair`), or `None` with a printed skip reason: a
/// failure under `TICKWIRE_REQUIRE_NETNS=1`, which `.ci/run` sets.
pub fn netns_pair(tag: &str, subnet: u8) -> Option<netns::Pair> {
    match netns::Pair::create(tag, subnet) {
        Ok(pair) => Some(pair),
        Err(reason) => {
            let required = std::env::var("TICKWIRE_REQUIRE_NETNS").is_ok_and(|v| v == "1");
            assert!(!required, "TICKWIRE_REQUIRE_NETNS=1 but: {reason}");
            skip::skipped(format_args!(
                "network namespaces cannot be made here (root and `ip netns` needed): {reason}"
            ));
            None
        }
    }
}
