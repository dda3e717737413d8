//! Venue files (`config/venues/*.toml`): where one venue's feed is, what to subscribe to, how to
//! reconnect, when a stream counts as stale, and where its API key comes from.
//!
//! **Invariant:** no secret is ever read from a venue file. `find_secret_keys` runs before serde
//! and rejects secret-looking keys anywhere in the document; the key itself is fetched at start-up
//! by `VenueConfig::api_key` from the environment or a systemd credential.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::endpoint::{is_valid_host_name, Endpoint, EndpointError, Scheme};
use super::error::{ConfigError, CredentialError};
use super::source::{KeyPath, Problem, SourceFile};
use crate::venue::protocol::{KeyUse, Protocol, RestUrl, TableCheck};

/// The validated venue file.
#[derive(Debug, Clone, PartialEq)]
pub struct VenueConfig {
    /// Unique across the appliance's venue files; used as the venue label in logs and metrics.
    pub name: String,
    pub kind: VenueKind,
    /// The market-data feed.
    pub url: Endpoint,
    /// The venue's REST API, for snapshots (order book sync) where the kind needs them.
    pub rest_url: Option<Endpoint>,
    pub symbols: Vec<String>,
    pub channels: Vec<String>,
    /// The most streams (symbol × channel) one connection carries; more open more connections.
    pub max_streams_per_connection: u32,
    /// Levels per side asked for in a REST depth snapshot (Binance `limit`), where the venue
    /// takes them (`Protocol::check_book_depth`).
    pub book_depth: u32,
    pub tls: TlsConfig,
    pub reconnect: ReconnectConfig,
    pub lifecycle: LifecycleConfig,
    pub staleness: StalenessConfig,
    pub credentials: CredentialsConfig,
    /// `decoder = N`: the decoder thread (0-based, `[[threads.decoders]]`) that decodes this
    /// venue; `None` leaves it to the deterministic default (`LoadedConfig::venue_decoders`).
    pub decoder: Option<usize>,
    /// The venue's own table, raw (the one its kind's `FileRules::table` names, such as
    /// Databento's `[databento]`; `None` when the kind names none or the file has none). The
    /// venue's folder reads it into its typed config (`read_venue_table`) and checks it
    /// (`Protocol::check_table`).
    pub table: Option<toml::Value>,
}

/// The protocols tickwire speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VenueKind {
    BinanceUsdmFutures,
    BinanceSpot,
    BinanceSpotSbe,
    BybitSpot,
    BybitLinear,
    Databento,
    Thalex,
    NasdaqItch,
    Okx,
}

impl VenueKind {
    /// Every kind, in the order the config's enum lists them (for the tools that offer each
    /// kind's protocol, such as `tickwire decode`).
    pub const ALL: [VenueKind; 9] = [
        VenueKind::BinanceUsdmFutures,
        VenueKind::BinanceSpot,
        VenueKind::BinanceSpotSbe,
        VenueKind::BybitSpot,
        VenueKind::BybitLinear,
        VenueKind::Databento,
        VenueKind::Thalex,
        VenueKind::NasdaqItch,
        VenueKind::Okx,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            VenueKind::BinanceUsdmFutures => "binance-usdm-futures",
            VenueKind::BinanceSpot => "binance-spot",
            VenueKind::BinanceSpotSbe => "binance-spot-sbe",
            VenueKind::BybitSpot => "bybit-spot",
            VenueKind::BybitLinear => "bybit-linear",
            VenueKind::Databento => "databento",
            VenueKind::Thalex => "thalex",
            VenueKind::NasdaqItch => "nasdaq-itch",
            VenueKind::Okx => "okx",
        }
    }

    /// The venue's protocol: everything else tickwire knows about a kind goes through it.
    /// This is the one `match` over venue kinds (adding a venue adds its variant and its arm
    /// here, its spelling in `as_str` and its place in `ALL`).
    pub fn protocol(self) -> &'static dyn Protocol {
        match self {
            VenueKind::BinanceUsdmFutures => &crate::venue::binance::protocol::BinanceUsdmFutures,
            VenueKind::BinanceSpot => &crate::venue::binance_spot::protocol::BinanceSpot,
            VenueKind::BinanceSpotSbe => &crate::venue::binance_spot::sbe_protocol::BinanceSpotSbe,
            VenueKind::BybitSpot => &crate::venue::bybit::protocol::BybitSpot,
            VenueKind::BybitLinear => &crate::venue::bybit::protocol::BybitLinear,
            VenueKind::Databento => &crate::venue::databento::protocol::Databento,
            VenueKind::Thalex => &crate::venue::thalex::protocol::Thalex,
            VenueKind::NasdaqItch => &crate::venue::nasdaq_itch::protocol::NasdaqItch,
            VenueKind::Okx => &crate::venue::okx::protocol::Okx,
        }
    }

    /// Schemes valid for `url`: Binance and Thalex stream over WebSocket, Databento's live
    /// gateway over a raw TCP session.
    pub fn feed_schemes(self) -> &'static [Scheme] {
        self.protocol().feed_schemes()
    }

    /// The heartbeat defaults: (ping interval, read timeout) in ms. Thalex asks clients to
    /// ping; Binance pings its clients and closes the ones that do not answer.
    pub fn default_heartbeat_ms(self) -> (Option<u64>, Option<u64>) {
        self.protocol().default_heartbeat_ms()
    }

    /// Binance documents "a single connection can listen to a maximum of 1024 streams" (USDⓈ-M
    /// Futures, WebSocket Market Streams; the same for Spot, "WebSocket Limits",
    /// `venue::binance_spot::protocol::MAX_STREAMS_PER_CONNECTION`). The other venues document
    /// no per-connection limit, so they share the same cap, which also bounds the size of one
    /// subscribe message.
    pub fn default_max_streams_per_connection(self) -> u32 {
        MAX_STREAMS_PER_CONNECTION
    }
}

impl fmt::Display for VenueKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

const MAX_STREAMS_PER_CONNECTION: u32 = 1024;

/// `[tls]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// A PEM file of CA certificates trusted in addition to the system roots, such as the
    /// simulator's own CA. Relative paths are resolved against the venue file's directory, and
    /// the loaded config holds the resolved path.
    pub extra_ca_file: Option<PathBuf>,
    /// The server name to send and verify instead of the URL's host.
    pub sni: Option<String>,
}

/// `[reconnect]`: exponential backoff between connection attempts.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReconnectConfig {
    /// The first delay after a connection drops.
    pub initial_delay_ms: u64,
    /// The delay stops growing here.
    pub max_delay_ms: u64,
    /// Each failed attempt multiplies the delay by this.
    pub factor: f64,
    /// Give up after this many consecutive failures; `None` retries forever.
    pub max_attempts: Option<u32>,
    /// A connection that stays live this long resets the delay and the attempt count.
    pub reset_after_live_ms: u64,
    /// A hard cap on attempts in any minute, whatever the backoff says, so that a misbehaving
    /// endpoint cannot get the appliance's IP rate-limited or banned.
    pub max_attempts_per_minute: u32,
}

impl Default for ReconnectConfig {
    fn default() -> Self {
        Self {
            initial_delay_ms: 100,
            max_delay_ms: 30_000,
            factor: 2.0,
            max_attempts: None,
            reset_after_live_ms: 60_000,
            max_attempts_per_minute: 10,
        }
    }
}

/// `[lifecycle]`: how long each step of a connection may take, and when a connection is
/// replaced before the venue's own lifetime limit ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LifecycleConfig {
    /// From the TCP connection being up to the WebSocket upgrade being done (TLS included).
    pub handshake_timeout_ms: u64,
    /// How long the venue may take to acknowledge a subscription request.
    pub ack_timeout_ms: u64,
    /// A live connection is replaced (make-before-break) after this long; 0 never rotates.
    pub rotate_after_ms: u64,
    /// How long the old and the new connection may run side by side before the switch is made
    /// even though some stream has not shown both agreeing on an update id yet.
    pub rotation_overlap_ms: u64,
    /// How long a WebSocket closing handshake may take before the socket is dropped.
    pub close_timeout_ms: u64,
    /// Send a WebSocket ping this often on every open connection, as the heartbeat. Unset: the
    /// kind's default (Thalex 5000, Binance none: Binance pings the client); 0: never.
    pub ping_interval_ms: Option<u64>,
    /// Recycle a connection that has read nothing (data, pongs, anything) for this long. Unset:
    /// the kind's default (Thalex 7000, Binance none: its per-stream staleness watches it); 0:
    /// never.
    pub read_timeout_ms: Option<u64>,
}

impl LifecycleConfig {
    /// The ping interval in effect, if any.
    pub fn ping_interval(&self) -> Option<u64> {
        self.ping_interval_ms.filter(|&ms| ms > 0)
    }

    /// The read timeout in effect, if any.
    pub fn read_timeout(&self) -> Option<u64> {
        self.read_timeout_ms.filter(|&ms| ms > 0)
    }
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            handshake_timeout_ms: 10_000,
            ack_timeout_ms: 5_000,
            // Binance closes every connection after 24 h; rotate an hour before.
            rotate_after_ms: 23 * 3_600_000,
            rotation_overlap_ms: 10_000,
            close_timeout_ms: 1_000,
            ping_interval_ms: None,
            read_timeout_ms: None,
        }
    }
}

const BACKOFF_FACTOR_MAX: f64 = 10.0;
const ATTEMPTS_PER_MINUTE_MAX: u32 = 600;
/// The longest `reconnect.initial_delay_ms` and `reconnect.max_delay_ms`: an hour. Every `_ms`
/// key becomes nanoseconds (`* 1_000_000`), which a release build would wrap past 584 years
/// (issue 32); the bounds keep each far inside, and the conversions saturate besides.
pub const RECONNECT_DELAY_MS_MAX: u64 = 3_600_000;
/// The longest `reconnect.reset_after_live_ms`: a day.
pub const RESET_AFTER_LIVE_MS_MAX: u64 = 86_400_000;
/// The longest staleness threshold (`staleness.default_ms`, `staleness.channels`): a day.
pub const STALENESS_MS_MAX: u64 = 86_400_000;

/// `[staleness]`: how long a stream may be silent before it is reported stale.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StalenessConfig {
    /// The threshold for channels without an override; `None` means they are never stale.
    pub default_ms: Option<u64>,
    /// Per-channel thresholds, keyed by a channel from the venue's `channels`.
    #[serde(default)]
    pub channels: BTreeMap<String, u64>,
}

impl StalenessConfig {
    /// The silence after which `channel` counts as stale, if any.
    pub fn threshold_ms(&self, channel: &str) -> Option<u64> {
        self.channels.get(channel).copied().or(self.default_ms)
    }
}

/// `[credentials]`: where the API key comes from. It never comes from the file itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialsConfig {
    /// The name of an environment variable holding the key.
    pub api_key_env: Option<String>,
    /// The name of a systemd credential holding the key, read from
    /// `$CREDENTIALS_DIRECTORY/<name>` (systemd.exec(5), "Credentials").
    pub api_key_credential: Option<String>,
    /// The id of the API key, where the venue needs one beside the key (Thalex: the `kid` of
    /// the login token, whose key is the RSA private key in PEM). Not a secret.
    pub key_id: Option<String>,
}

impl VenueConfig {
    /// Fetches the API key the venue file points at, or `None` when it points nowhere (public
    /// market data needs no key). Trailing line breaks are removed, since credential files and
    /// `$(cat file)` usually end with one that is not part of the key.
    pub fn api_key(&self) -> Result<Option<String>, CredentialError> {
        self.api_key_from(&|name| std::env::var_os(name))
    }

    /// `api_key` with the environment passed in, so that unit tests do not touch process state.
    fn api_key_from(
        &self,
        environment: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<Option<String>, CredentialError> {
        let venue = || self.name.clone();
        let (key, origin) = if let Some(variable) = &self.credentials.api_key_env {
            let value = environment(variable).ok_or_else(|| CredentialError::EnvUnset {
                venue: venue(),
                variable: variable.clone(),
            })?;
            let value = value
                .into_string()
                .map_err(|_| CredentialError::EnvNotUnicode {
                    venue: venue(),
                    variable: variable.clone(),
                })?;
            (value, format!("environment variable `{variable}`"))
        } else if let Some(credential) = &self.credentials.api_key_credential {
            let directory = environment("CREDENTIALS_DIRECTORY").ok_or_else(|| {
                CredentialError::CredentialsDirectoryUnset {
                    venue: venue(),
                    credential: credential.clone(),
                }
            })?;
            let path = Path::new(&directory).join(credential);
            let value = std::fs::read_to_string(&path).map_err(|source| {
                CredentialError::CredentialUnreadable {
                    venue: venue(),
                    path: path.clone(),
                    source,
                }
            })?;
            (value, format!("credential file `{}`", path.display()))
        } else {
            return Ok(None);
        };
        let key = key.trim_end_matches(['\n', '\r']);
        if key.trim().is_empty() {
            return Err(CredentialError::Empty {
                venue: venue(),
                origin,
            });
        }
        Ok(Some(key.to_owned()))
    }
}

/// Keys that look like a secret, matched case-insensitively against every key in a file.
const SECRET_KEYS: [&str; 8] = [
    "api_key",
    "api_secret",
    "secret",
    "secret_key",
    "password",
    "passphrase",
    "token",
    "private_key",
];

fn is_secret_key(key: &str) -> bool {
    SECRET_KEYS
        .iter()
        .any(|secret| secret.eq_ignore_ascii_case(key))
}

/// Rejects secrets anywhere in the file, before serde has a chance to report them as merely
/// unknown keys: the user needs to hear where the secret should go instead. The message never
/// repeats the value.
pub(crate) fn find_secret_keys(source: &SourceFile) -> Vec<Problem> {
    source
        .find_keys(&is_secret_key)
        .into_iter()
        .map(|key| {
            Problem::new(
                key,
                "secrets never live in config files; remove this key and supply the secret \
                 through an environment variable (credentials.api_key_env = \"VARIABLE\") or a \
                 systemd credential (credentials.api_key_credential = \"name\", read from \
                 $CREDENTIALS_DIRECTORY/name)",
            )
        })
        .collect()
}

/// The keys of `RawVenue`, for the hint about keys written below a table header.
pub(crate) const TOP_LEVEL_KEYS: &[&str] = &[
    "name",
    "kind",
    "url",
    "rest_url",
    "symbols",
    "channels",
    "max_streams_per_connection",
    "book_depth",
    "tls",
    "reconnect",
    "lifecycle",
    "staleness",
    "credentials",
    "decoder",
];

/// The venue file as serde sees it; `validate` turns it into a `VenueConfig`. Its top-level keys
/// are checked before serde by [`check_top_level_keys`] (the venue's own table is named by its
/// kind, so serde cannot deny the others), and the table itself is `table`, taken from the
/// document by [`own_table`]; every table below is denied unknown keys by serde.
#[derive(Debug, Deserialize)]
pub(crate) struct RawVenue {
    name: String,
    kind: VenueKind,
    url: String,
    rest_url: Option<String>,
    symbols: Vec<String>,
    channels: Vec<String>,
    max_streams_per_connection: Option<u32>,
    book_depth: Option<u32>,
    #[serde(default)]
    tls: TlsConfig,
    #[serde(default)]
    reconnect: ReconnectConfig,
    #[serde(default)]
    lifecycle: LifecycleConfig,
    #[serde(default)]
    staleness: StalenessConfig,
    #[serde(default)]
    credentials: CredentialsConfig,
    decoder: Option<usize>,
    #[serde(skip)]
    pub(crate) table: Option<toml::Value>,
}

impl RawVenue {
    pub(crate) fn kind(&self) -> VenueKind {
        self.kind
    }
}

/// The kind a venue file names, read from the document before serde (`None` when it names no
/// valid one: serde then says what is wrong with it).
fn kind_of(source: &SourceFile) -> Option<VenueKind> {
    let kind = source.root().get("kind")?.as_str()?;
    VenueKind::ALL
        .into_iter()
        .find(|known| known.as_str() == kind)
}

/// The first top-level key of a venue file that is neither one of [`TOP_LEVEL_KEYS`] nor the
/// table its kind names (`FileRules::table`): another kind's table is named as such, anything
/// else is an unknown key, with the keys valid here. Serde stops at its first error, and so
/// does this (in document order).
pub(crate) fn check_top_level_keys(source: &SourceFile) -> Option<Problem> {
    let kind = kind_of(source);
    let own = kind.and_then(|kind| kind.protocol().file_rules().table);
    let (key, _) = source
        .root()
        .iter()
        .find(|(key, _)| !TOP_LEVEL_KEYS.contains(key) && Some(*key) != own)?;
    let owners: Vec<String> = VenueKind::ALL
        .into_iter()
        .filter(|other| other.protocol().file_rules().table == Some(key))
        .map(|other| format!("kind = \"{other}\""))
        .collect();
    let message = match kind {
        Some(kind) if !owners.is_empty() => {
            format!("is only for {}; this venue is {kind}", owners.join(" or "))
        }
        _ => {
            let valid: Vec<&str> = TOP_LEVEL_KEYS.iter().copied().chain(own).collect();
            format!("unknown key `{key}`; valid keys here: {}", valid.join(", "))
        }
    };
    Some(Problem::new(KeyPath::default().key(key), message))
}

/// A top-level key serde found missing because it was written below the venue's own table's
/// header (`symbols` under `[databento]`): the table's own error for it, which says so, instead
/// of "missing required key" (serde reads the top level before the table is read in its folder).
pub(crate) fn misplaced_key(source: &SourceFile, error: &ConfigError) -> Option<Problem> {
    if !error.message.starts_with("missing required key")
        || !TOP_LEVEL_KEYS.contains(&error.key.as_str())
    {
        return None;
    }
    let kind = kind_of(source)?;
    let name = kind.protocol().file_rules().table?;
    let table = own_table(source, kind)?;
    table.get(&error.key)?;
    let mut lifecycle = LifecycleConfig::default();
    let mut check = TableCheck {
        channels: &[],
        lifecycle: &mut lifecycle,
        read_timeout_default: None,
        problems: Vec::new(),
    };
    kind.protocol().check_table(Some(&table), &mut check);
    let at = format!("{name}.{}", error.key);
    check
        .problems
        .into_iter()
        .find(|problem| problem.key == at)
        .map(table_problem)
}

/// A venue table's problem as the config's.
fn table_problem(problem: crate::venue::protocol::TableProblem) -> Problem {
    Problem {
        at_value: problem.at_value,
        ..Problem::new(KeyPath::dotted(&problem.key), problem.message)
    }
}

/// The venue's own table (`FileRules::table` of `kind`), raw, when the file has it.
pub(crate) fn own_table(source: &SourceFile, kind: VenueKind) -> Option<toml::Value> {
    let name = kind.protocol().file_rules().table?;
    let mut document: toml::Table = toml::from_str(source.text()).ok()?;
    document.remove(name)
}

/// A venue's own table (`table`, its name `name`) read into the venue's typed config, such as
/// `venue::databento::config::DatabentoConfig`, which denies unknown keys. The error is the
/// config's, worded as for every other table of the file: an unknown key
/// with the keys valid there, a missing key, a value of the wrong type.
pub fn read_venue_table<T: serde::de::DeserializeOwned>(
    name: &str,
    table: &toml::Value,
) -> Result<T, crate::venue::protocol::TableProblem> {
    serde_path_to_error::deserialize(table.clone())
        .map_err(|error| super::source::describe_table_error(name, error, TOP_LEVEL_KEYS))
}

/// Checks everything serde cannot, returning every problem found. `venue_dir` is the directory of
/// the venue file, against which a relative `tls.extra_ca_file` is resolved.
pub(crate) fn validate(raw: RawVenue, venue_dir: &Path) -> Result<VenueConfig, Vec<Problem>> {
    let mut problems = Vec::new();

    check_name(&mut problems, &raw.name);
    let url = check_endpoint(
        &mut problems,
        "url",
        &raw.url,
        raw.kind.feed_schemes(),
        &format!("the url of a {} venue", raw.kind),
    );
    if let Some(url) = &url {
        if let Err(message) = raw.kind.protocol().check_url(url) {
            problems.push(Problem::new(KeyPath::dotted("url"), message));
        }
    }
    let rest_url = raw.rest_url.as_deref().and_then(|rest_url| {
        check_endpoint(
            &mut problems,
            "rest_url",
            rest_url,
            &[Scheme::Https, Scheme::Http],
            "rest_url",
        )
    });
    check_symbols(&mut problems, raw.kind, &raw.symbols);
    check_channels(&mut problems, raw.kind, &raw.channels);
    let rules = raw.kind.protocol().file_rules();
    if let (RestUrl::Unused { why }, true) = (rules.rest_url, raw.rest_url.is_some()) {
        problems.push(Problem::new(
            KeyPath::dotted("rest_url"),
            format!("has no use for a {} venue: {why}", raw.kind),
        ));
    }

    let max_streams_per_connection = raw
        .max_streams_per_connection
        .unwrap_or_else(|| raw.kind.default_max_streams_per_connection());
    if !(1..=MAX_STREAMS_PER_CONNECTION).contains(&max_streams_per_connection) {
        problems.push(Problem::new(
            KeyPath::dotted("max_streams_per_connection"),
            format!(
                "{max_streams_per_connection} is out of range; valid values are 1 to \
                 {MAX_STREAMS_PER_CONNECTION}"
            ),
        ));
    }

    let book_depth = raw.book_depth.unwrap_or(DEFAULT_BOOK_DEPTH);
    if let Some(depth) = raw.book_depth {
        if let Err(why) = raw.kind.protocol().check_book_depth(depth) {
            problems.push(Problem::new(KeyPath::dotted("book_depth"), why));
        }
    }
    if let (RestUrl::NeededFor { channels }, None) = (rules.rest_url, &raw.rest_url) {
        if raw
            .channels
            .iter()
            .any(|channel| raw.kind.protocol().channel_needs_rest_snapshot(channel))
        {
            problems.push(Problem::new(
                KeyPath::dotted("rest_url"),
                format!("{channels} needs rest_url: its order book starts from a REST snapshot"),
            ));
        }
    }

    let uses_tls = url.as_ref().is_some_and(|url| url.scheme.is_tls())
        || rest_url.as_ref().is_some_and(|url| url.scheme.is_tls());
    let tls = check_tls(
        &mut problems,
        raw.tls,
        venue_dir,
        url.is_some() && !uses_tls,
    );
    check_reconnect(&mut problems, &raw.reconnect);
    let mut lifecycle = raw.lifecycle;
    let (ping_default, read_default) = raw.kind.default_heartbeat_ms();
    let mut check = TableCheck {
        channels: &raw.channels,
        lifecycle: &mut lifecycle,
        read_timeout_default: read_default,
        problems: Vec::new(),
    };
    raw.kind
        .protocol()
        .check_table(raw.table.as_ref(), &mut check);
    let read_default = check.read_timeout_default;
    problems.extend(check.problems.into_iter().map(table_problem));
    lifecycle.ping_interval_ms = lifecycle.ping_interval_ms.or(ping_default);
    lifecycle.read_timeout_ms = lifecycle.read_timeout_ms.or(read_default);
    check_lifecycle(&mut problems, &lifecycle);
    let has_key =
        raw.credentials.api_key_env.is_some() || raw.credentials.api_key_credential.is_some();
    match rules.key {
        KeyUse::Unused => {}
        KeyUse::SignedLogin {
            missing_key_id,
            key_id_without_key,
        } => match (has_key, &raw.credentials.key_id) {
            (true, None) => problems.push(Problem::new(
                KeyPath::dotted("credentials.key_id"),
                missing_key_id,
            )),
            (false, Some(_)) => problems.push(Problem::new(
                KeyPath::dotted("credentials.key_id"),
                key_id_without_key,
            )),
            (true, Some(_)) | (false, None) => {}
        },
        KeyUse::Required { missing } => {
            if !has_key {
                problems.push(Problem::new(KeyPath::dotted("credentials"), missing));
            }
        }
    }
    check_staleness(&mut problems, &raw.staleness, &raw.channels);
    check_credentials(&mut problems, &raw.credentials);

    match (url, problems.is_empty()) {
        (Some(url), true) => Ok(VenueConfig {
            name: raw.name,
            kind: raw.kind,
            url,
            rest_url,
            symbols: raw.symbols,
            channels: raw.channels,
            max_streams_per_connection,
            book_depth,
            tls,
            reconnect: raw.reconnect,
            lifecycle,
            staleness: raw.staleness,
            credentials: raw.credentials,
            decoder: raw.decoder,
            table: raw.table,
        }),
        // A missing url always leaves a problem behind, so `problems` is not empty here.
        _ => Err(problems),
    }
}

/// `book_depth` unset: the most levels a REST snapshot asks for, where a venue takes them
/// (Binance's 1000); a venue without REST snapshots never reads it.
const DEFAULT_BOOK_DEPTH: u32 = 1000;

const NAME_MAX_CHARS: usize = 32;

/// Names end up in metric labels and log fields, so they are kept to a set no exporter escapes.
fn check_name(problems: &mut Vec<Problem>, name: &str) {
    let valid_chars = name
        .bytes()
        .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-');
    if name.is_empty() || name.len() > NAME_MAX_CHARS || !valid_chars {
        problems.push(Problem::new(
            KeyPath::dotted("name"),
            format!(
                "\"{name}\" is not a valid venue name; use 1 to {NAME_MAX_CHARS} lowercase \
                 letters, digits and `-`"
            ),
        ));
    }
}

fn check_endpoint(
    problems: &mut Vec<Problem>,
    key: &str,
    text: &str,
    schemes: &[Scheme],
    what: &str,
) -> Option<Endpoint> {
    let endpoint = match Endpoint::parse(text) {
        Ok(endpoint) => endpoint,
        Err(error) => {
            let message = match error {
                // The user info may hold a password, which must not reach a log.
                EndpointError::UserInfo => error.to_string(),
                _ => format!("\"{text}\": {error}"),
            };
            problems.push(Problem::new(KeyPath::dotted(key), message));
            return None;
        }
    };
    if !schemes.contains(&endpoint.scheme) {
        let valid: Vec<String> = schemes.iter().map(|s| format!("{s}://")).collect();
        problems.push(Problem::new(
            KeyPath::dotted(key),
            format!(
                "{}:// is not valid for {what}; use {}",
                endpoint.scheme,
                valid.join(" or ")
            ),
        ));
        return None;
    }
    Some(endpoint)
}

fn check_symbols(problems: &mut Vec<Problem>, kind: VenueKind, symbols: &[String]) {
    if symbols.is_empty() {
        problems.push(Problem::new(
            KeyPath::dotted("symbols"),
            "is empty; list at least one symbol, such as [\"BTCUSDT\"]",
        ));
    }
    for (index, symbol) in symbols.iter().enumerate() {
        let path = KeyPath::dotted("symbols").index(index);
        if let Err(message) = kind.protocol().check_symbol(symbol) {
            problems.push(Problem::new(path, message));
        } else if let Some(first) = symbols[..index].iter().position(|s| s == symbol) {
            problems.push(Problem::new(
                path,
                format!("\"{symbol}\" is already listed at symbols[{first}]"),
            ));
        }
    }
}

fn check_channels(problems: &mut Vec<Problem>, kind: VenueKind, channels: &[String]) {
    if channels.is_empty() {
        problems.push(Problem::new(
            KeyPath::dotted("channels"),
            "is empty; list at least one channel, such as [\"bookTicker\"]",
        ));
    }
    for (index, channel) in channels.iter().enumerate() {
        let path = KeyPath::dotted("channels").index(index);
        if channel.is_empty() {
            problems.push(Problem::new(path, "is empty; expected a channel name"));
        } else if let Err(message) = kind.protocol().check_channel(channel, &channels[..index]) {
            problems.push(Problem::new(path, message));
        } else if let Some(first) = channels[..index].iter().position(|c| c == channel) {
            problems.push(Problem::new(
                path,
                format!("\"{channel}\" is already listed at channels[{first}]"),
            ));
        }
    }
}

/// Resolves and checks the TLS settings. `plaintext_only` is true when neither address uses TLS,
/// in which case any TLS setting is a mistake worth pointing out.
fn check_tls(
    problems: &mut Vec<Problem>,
    tls: TlsConfig,
    venue_dir: &Path,
    plaintext_only: bool,
) -> TlsConfig {
    if plaintext_only {
        for (key, is_set) in [
            ("extra_ca_file", tls.extra_ca_file.is_some()),
            ("sni", tls.sni.is_some()),
        ] {
            if is_set {
                problems.push(Problem::new(
                    KeyPath::dotted("tls").key(key),
                    "has no effect: neither url nor rest_url uses TLS (wss://, https://, tls://)",
                ));
            }
        }
    }
    if let Some(sni) = &tls.sni {
        let is_ip = sni.parse::<std::net::IpAddr>().is_ok();
        if is_ip || !is_valid_host_name(sni) {
            problems.push(Problem::new(
                KeyPath::dotted("tls.sni"),
                format!(
                    "\"{sni}\" is not a DNS name; SNI carries host names only, never IP \
                     addresses (RFC 6066 section 3)"
                ),
            ));
        }
    }
    let extra_ca_file = tls.extra_ca_file.map(|file| {
        let resolved = venue_dir.join(&file);
        // The file is opened now, not when the first connection is made, so that `tickwire
        // check` and start-up catch a missing CA rather than a TLS handshake failing later.
        let readable = std::fs::metadata(&resolved).and_then(|metadata| {
            if metadata.is_dir() {
                Err(std::io::Error::other("it is a directory"))
            } else {
                std::fs::File::open(&resolved).map(drop)
            }
        });
        if let Err(error) = readable {
            problems.push(Problem::new(
                KeyPath::dotted("tls.extra_ca_file"),
                format!(
                    "cannot read `{}`: {error}; the CA file must exist when the config is loaded",
                    resolved.display()
                ),
            ));
        }
        resolved
    });
    TlsConfig {
        extra_ca_file,
        sni: tls.sni,
    }
}

fn check_reconnect(problems: &mut Vec<Problem>, reconnect: &ReconnectConfig) {
    let path = KeyPath::dotted("reconnect");
    if reconnect.initial_delay_ms == 0 {
        problems.push(Problem::new(
            path.key("initial_delay_ms"),
            "0 is too small; the minimum is 1 ms, so that a failing endpoint is never retried in \
             a tight loop",
        ));
    }
    for (key, value, max) in [
        (
            "initial_delay_ms",
            reconnect.initial_delay_ms,
            RECONNECT_DELAY_MS_MAX,
        ),
        (
            "max_delay_ms",
            reconnect.max_delay_ms,
            RECONNECT_DELAY_MS_MAX,
        ),
        (
            "reset_after_live_ms",
            reconnect.reset_after_live_ms,
            RESET_AFTER_LIVE_MS_MAX,
        ),
    ] {
        if value > max {
            let low = if key == "reset_after_live_ms" { 0 } else { 1 };
            problems.push(Problem::new(
                path.key(key),
                format!("{value} is out of range; valid values are {low} to {max}"),
            ));
        }
    }
    if reconnect.max_delay_ms < reconnect.initial_delay_ms {
        problems.push(Problem::new(
            path.key("max_delay_ms"),
            format!(
                "{} is less than reconnect.initial_delay_ms ({}); it must be at least that",
                reconnect.max_delay_ms, reconnect.initial_delay_ms
            ),
        ));
    }
    // Written as a negated range so that NaN, which compares false with everything, fails it.
    if !(reconnect.factor > 1.0 && reconnect.factor <= BACKOFF_FACTOR_MAX) {
        problems.push(Problem::new(
            path.key("factor"),
            format!(
                "{} is out of range; valid values are above 1.0 (so the delay grows) and at most \
                 {BACKOFF_FACTOR_MAX:.1}",
                reconnect.factor
            ),
        ));
    }
    if reconnect.max_attempts == Some(0) {
        problems.push(Problem::new(
            path.key("max_attempts"),
            "0 is too small; the minimum is 1 (remove the key to retry forever)",
        ));
    }
    if !(1..=ATTEMPTS_PER_MINUTE_MAX).contains(&reconnect.max_attempts_per_minute) {
        problems.push(Problem::new(
            path.key("max_attempts_per_minute"),
            format!(
                "{} is out of range; valid values are 1 to {ATTEMPTS_PER_MINUTE_MAX}",
                reconnect.max_attempts_per_minute
            ),
        ));
    }
}

fn check_lifecycle(problems: &mut Vec<Problem>, lifecycle: &LifecycleConfig) {
    let path = KeyPath::dotted("lifecycle");
    let mut in_range = |key: &str, value: u64, low: u64, high: u64, extra: &str| {
        if !(low..=high).contains(&value) {
            problems.push(Problem::new(
                path.key(key),
                format!("{value} is out of range; valid values are {low} to {high}{extra}"),
            ));
        }
    };
    in_range(
        "handshake_timeout_ms",
        lifecycle.handshake_timeout_ms,
        100,
        600_000,
        "",
    );
    in_range("ack_timeout_ms", lifecycle.ack_timeout_ms, 100, 600_000, "");
    in_range(
        "rotation_overlap_ms",
        lifecycle.rotation_overlap_ms,
        100,
        600_000,
        "",
    );
    in_range(
        "close_timeout_ms",
        lifecycle.close_timeout_ms,
        10,
        60_000,
        "",
    );
    if lifecycle.rotate_after_ms != 0 {
        in_range(
            "rotate_after_ms",
            lifecycle.rotate_after_ms,
            1_000,
            7 * 24 * 3_600_000,
            " (or 0 to never rotate)",
        );
    }
    if let Some(ping) = lifecycle.ping_interval() {
        in_range(
            "ping_interval_ms",
            ping,
            100,
            600_000,
            " (or 0 to never ping)",
        );
    }
    if let Some(read) = lifecycle.read_timeout() {
        in_range(
            "read_timeout_ms",
            read,
            100,
            3_600_000,
            " (or 0 to never time out)",
        );
        if let Some(ping) = lifecycle.ping_interval().filter(|&ping| read <= ping) {
            problems.push(Problem::new(
                path.key("read_timeout_ms"),
                format!(
                    "{read} must be longer than ping_interval_ms = {ping}: a quiet but healthy \
                     connection reads only the answers to its pings"
                ),
            ));
        }
    }
}

fn check_staleness(problems: &mut Vec<Problem>, staleness: &StalenessConfig, channels: &[String]) {
    const ZERO: &str = "0 is too small; the minimum is 1 ms (remove the key to never report \
                        staleness)";
    let too_long = |value: u64| {
        format!(
            "{value} is out of range; valid values are 1 to {STALENESS_MS_MAX} (remove the key to \
             never report staleness)"
        )
    };
    if staleness.default_ms == Some(0) {
        problems.push(Problem::new(KeyPath::dotted("staleness.default_ms"), ZERO));
    }
    if let Some(value) = staleness.default_ms.filter(|&ms| ms > STALENESS_MS_MAX) {
        problems.push(Problem::new(
            KeyPath::dotted("staleness.default_ms"),
            too_long(value),
        ));
    }
    for (channel, threshold_ms) in &staleness.channels {
        let path = KeyPath::dotted("staleness.channels").key(channel);
        if !channels.contains(channel) {
            let mut quoted: Vec<String> = channels
                .iter()
                .filter(|c| !c.is_empty())
                .map(|c| format!("\"{c}\""))
                .collect();
            quoted.dedup();
            problems.push(Problem::new(
                path,
                format!(
                    "\"{channel}\" is not one of this venue's channels; valid keys here: {}",
                    quoted.join(", ")
                ),
            ));
        } else if *threshold_ms == 0 {
            problems.push(Problem::new(path, ZERO));
        } else if *threshold_ms > STALENESS_MS_MAX {
            problems.push(Problem::new(path, too_long(*threshold_ms)));
        }
    }
}

fn check_credentials(problems: &mut Vec<Problem>, credentials: &CredentialsConfig) {
    if let Some(variable) = &credentials.api_key_env {
        // POSIX portable environment variable names (IEEE Std 1003.1, chapter 8).
        let mut bytes = variable.bytes();
        let valid = bytes
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
            && bytes.all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
        if !valid {
            problems.push(Problem::new(
                KeyPath::dotted("credentials.api_key_env"),
                format!(
                    "\"{variable}\" is not an environment variable name; use letters, digits and \
                     `_`, not starting with a digit (the name of the variable, not the key)"
                ),
            ));
        }
    }
    if let Some(credential) = &credentials.api_key_credential {
        // A credential is a file name inside $CREDENTIALS_DIRECTORY; anything that could leave
        // that directory is refused.
        let valid = !credential.is_empty()
            && credential.len() <= 255
            && credential != "."
            && credential != ".."
            && !credential.contains(['/', '\0']);
        if !valid {
            problems.push(Problem::new(
                KeyPath::dotted("credentials.api_key_credential"),
                format!(
                    "\"{credential}\" is not a credential name; use a plain file name without `/`, \
                     as given to LoadCredential="
                ),
            ));
        }
    }
    if credentials.api_key_env.is_some() && credentials.api_key_credential.is_some() {
        problems.push(Problem::new(
            KeyPath::dotted("credentials.api_key_credential"),
            "set only one of credentials.api_key_env and credentials.api_key_credential, so it \
             is never in doubt which key is used",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The problems a venue file's text has: (key, message).
    fn problems(text: &str) -> Vec<(String, String)> {
        match crate::config::venue_from_text(text) {
            Ok(_) => Vec::new(),
            Err(errors) => errors
                .0
                .into_iter()
                .map(|error| (error.key, error.message))
                .collect(),
        }
    }

    const THALEX: &str = "name = \"t\"\nkind = \"thalex\"\nurl = \"wss://127.0.0.1:9444/ws\"\n\
                          symbols = [\"BTC-PERPETUAL\"]\nchannels = [\"ticker.100ms\"]\n";

    #[test]
    fn the_venues_file_rules_hold() {
        let rest = format!("rest_url = \"https://127.0.0.1:9443\"\n{THALEX}");
        assert_eq!(
            problems(&rest),
            [(
                "rest_url".to_owned(),
                "has no use for a thalex venue: its books start from the stream's own snapshot"
                    .to_owned()
            )]
        );
        let key_only = format!("{THALEX}[credentials]\napi_key_env = \"THALEX_KEY\"\n");
        let found = problems(&key_only);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "credentials.key_id");
        assert!(
            found[0].1.starts_with("is missing: a Thalex login token"),
            "{found:?}"
        );
        let id_only = format!("{THALEX}[credentials]\nkey_id = \"k\"\n");
        let found = problems(&id_only);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].1.starts_with("has no key to go with it"),
            "{found:?}"
        );
        assert!(problems(&format!(
            "{THALEX}[credentials]\nkey_id = \"k\"\napi_key_env = \"K\"\n"
        ))
        .is_empty());

        let databento = "name = \"d\"\nkind = \"databento\"\nurl = \"tcp://127.0.0.1:13000\"\n\
                         symbols = [\"ESM5\"]\nchannels = [\"mbo\"]\n\
                         [databento]\ndataset = \"GLBX.MDP3\"\n";
        assert_eq!(
            problems(databento),
            [(
                "credentials".to_owned(),
                "has no API key: the Databento gateway needs one; set credentials.api_key_env \
                 (an environment variable) or credentials.api_key_credential (a systemd \
                 credential)"
                    .to_owned()
            )]
        );
        let binance = "name = \"b\"\nkind = \"binance-usdm-futures\"\n\
                       url = \"wss://127.0.0.1:9443\"\nsymbols = [\"BTCUSDT\"]\n\
                       channels = [\"bookTicker\"]\n[databento]\ndataset = \"GLBX.MDP3\"\n";
        assert_eq!(
            problems(binance),
            [(
                "databento".to_owned(),
                "is only for kind = \"databento\"; this venue is binance-usdm-futures".to_owned()
            )]
        );
    }

    #[test]
    fn all_lists_every_kind_once_and_each_spelling_reads_back() {
        // Exhaustive: a new variant does not compile here until it has its place in `ALL`.
        let position = |kind: VenueKind| match kind {
            VenueKind::BinanceUsdmFutures => 0,
            VenueKind::BinanceSpot => 1,
            VenueKind::BinanceSpotSbe => 2,
            VenueKind::BybitSpot => 3,
            VenueKind::BybitLinear => 4,
            VenueKind::Databento => 5,
            VenueKind::Thalex => 6,
            VenueKind::NasdaqItch => 7,
            VenueKind::Okx => 8,
        };
        #[derive(Deserialize)]
        struct Kind {
            kind: VenueKind,
        }
        for (index, kind) in VenueKind::ALL.into_iter().enumerate() {
            assert_eq!(position(kind), index);
            let read: Kind = toml::from_str(&format!("kind = \"{kind}\"")).expect("its spelling");
            assert_eq!(read.kind, kind);
        }
    }

    #[test]
    fn secret_keys_match_case_insensitively_and_exactly() {
        assert!(is_secret_key("API_KEY"));
        assert!(is_secret_key("Token"));
        assert!(!is_secret_key("api_key_env"));
        assert!(!is_secret_key("tokens"));
    }

    fn venue_with(credentials: CredentialsConfig) -> VenueConfig {
        VenueConfig {
            name: "test".to_owned(),
            kind: VenueKind::BinanceUsdmFutures,
            url: Endpoint::parse("wss://example.com").expect("valid url"),
            rest_url: None,
            symbols: vec!["BTCUSDT".to_owned()],
            channels: vec!["bookTicker".to_owned()],
            max_streams_per_connection: 1024,
            book_depth: 1000,
            tls: TlsConfig::default(),
            reconnect: ReconnectConfig::default(),
            lifecycle: LifecycleConfig::default(),
            staleness: StalenessConfig::default(),
            credentials,
            decoder: None,
            table: None,
        }
    }

    #[test]
    fn api_key_from_the_environment() {
        let venue = venue_with(CredentialsConfig {
            api_key_env: Some("KEY".to_owned()),
            api_key_credential: None,
            key_id: None,
        });
        let set = |name: &str| (name == "KEY").then(|| OsString::from("abc\r\n"));
        assert_eq!(
            venue.api_key_from(&set).expect("set"),
            Some("abc".to_owned())
        );
        let unset = |_: &str| None;
        assert!(matches!(
            venue.api_key_from(&unset),
            Err(CredentialError::EnvUnset { .. })
        ));
        let empty = |_: &str| Some(OsString::from("\n"));
        assert!(matches!(
            venue.api_key_from(&empty),
            Err(CredentialError::Empty { .. })
        ));
        assert_eq!(
            venue_with(CredentialsConfig::default())
                .api_key_from(&unset)
                .expect("no key configured"),
            None
        );
    }
}
