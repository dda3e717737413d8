//! One config file held in memory: its text, its parsed span-carrying document, and the machinery
//! that turns a problem at a key path into a `ConfigError` with a line and column.
//!
//! Each file is parsed twice. `toml_edit::ImDocument` keeps the byte span of every key and value,
//! which is what lets a semantic check found after deserialization point at the right line;
//! `toml::Deserializer` (under `serde_path_to_error`) does the typed decoding and reports the first
//! type error with a span and key path of its own. Config files are small and read once at start,
//! so the second parse costs nothing that matters.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use toml_edit::{ImDocument, Item, Table, TableLike, Value};

use super::error::ConfigError;

/// A key path into a TOML document, such as `threads.net.core` or `venues[1]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPath(Vec<Segment>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

impl KeyPath {
    /// Builds a path from dot-separated bare keys, for the fixed key names of the schema.
    pub(crate) fn dotted(path: &str) -> Self {
        Self(
            path.split('.')
                .filter(|key| !key.is_empty())
                .map(|key| Segment::Key(key.to_owned()))
                .collect(),
        )
    }

    /// The path one table deeper, at `key`. The key may be any string, such as a quoted channel
    /// name under `staleness.channels`.
    pub(crate) fn key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        Self(segments)
    }

    /// The path to element `index` of the array at this path.
    pub(crate) fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        Self(segments)
    }

    fn from_serde(path: &serde_path_to_error::Path) -> Self {
        use serde_path_to_error::Segment as Serde;
        Self(
            path.iter()
                .map(|segment| match segment {
                    Serde::Seq { index } => Segment::Index(*index),
                    Serde::Map { key } => Segment::Key(key.clone()),
                    Serde::Enum { variant } => Segment::Key(variant.clone()),
                    // An unknown segment only comes from a deserializer that does not report keys,
                    // which the toml one always does; "?" keeps the rest of the path readable.
                    Serde::Unknown => Segment::Key("?".to_owned()),
                })
                .collect(),
        )
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) => {
                    if position > 0 {
                        formatter.write_str(".")?;
                    }
                    // Keys are printed the way they would be written in TOML, so a channel key
                    // like `depth@100ms` comes out quoted and can be pasted back into the file.
                    if is_bare_key(key) {
                        formatter.write_str(key)?;
                    } else {
                        write!(formatter, "{key:?}")?;
                    }
                }
                Segment::Index(index) => write!(formatter, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// TOML bare keys are `A-Za-z0-9_-` (TOML 1.0, "Keys"); anything else has to be quoted.
fn is_bare_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// A semantic problem found after deserialization, not yet tied to a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) key: KeyPath,
    pub(crate) message: String,
    /// The problem is with the key's value (a wrong type or value, as serde reports them), so
    /// its position is the value's rather than the key's.
    pub(crate) at_value: bool,
}

impl Problem {
    pub(crate) fn new(key: KeyPath, message: impl Into<String>) -> Self {
        Self {
            key,
            message: message.into(),
            at_value: false,
        }
    }
}

/// A config file that was read and is syntactically valid TOML.
pub(crate) struct SourceFile {
    path: PathBuf,
    document: ImDocument<String>,
}

impl SourceFile {
    /// Reads and parses `path`. An unreadable file and a TOML syntax error both come back as a
    /// `ConfigError` against `path` itself.
    pub(crate) fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
            file: path.to_path_buf(),
            line: 1,
            column: 1,
            key: String::new(),
            message: format!("cannot read this file: {error}"),
        })?;
        Self::parse(path.to_path_buf(), text)
    }

    /// Parses text that was already read; `path` is used only in error messages.
    pub(crate) fn parse(path: PathBuf, text: String) -> Result<Self, ConfigError> {
        match ImDocument::parse(text.clone()) {
            Ok(document) => Ok(Self { path, document }),
            Err(error) => {
                let (line, column) = error
                    .span()
                    .map_or((1, 1), |span| position_in(&text, span.start));
                Err(ConfigError {
                    file: path,
                    line,
                    column,
                    key: String::new(),
                    message: format!("TOML syntax error: {}", one_line(error.message())),
                })
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's text.
    pub(crate) fn text(&self) -> &str {
        self.document.raw()
    }

    pub(crate) fn root(&self) -> &Table {
        self.document.as_table()
    }

    /// Decodes the whole file into `T`. Serde stops at the first error, so this reports one.
    ///
    /// `top_level_keys` are the keys valid at the top of this kind of file. They are only used to
    /// explain the commonest TOML mistake: a top-level key written below a `[table]` header
    /// belongs to that table, and so comes out as an unknown key there.
    pub(crate) fn deserialize<T: DeserializeOwned>(
        &self,
        top_level_keys: &[&str],
    ) -> Result<T, ConfigError> {
        let deserializer = toml::Deserializer::new(self.document.raw());
        serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let mut key = KeyPath::from_serde(error.path());
            let inner = error.into_inner();
            let table = key.to_string();
            let table = table.rsplit_once('.').map_or("", |(table, _)| table);
            let (missing_key, mut message) = describe_serde_error(inner.message(), table);
            if let Some(missing_key) = missing_key {
                key = key.key(&missing_key);
            }
            if let [_, .., Segment::Key(name)] = key.0.as_slice() {
                if message.starts_with("unknown key") && top_level_keys.contains(&name.as_str()) {
                    message.push_str(&format!(
                        "; `{name}` is a top-level key, so it must come before the first \
                         [table] header"
                    ));
                }
            }
            // The toml error's span survives serde_path_to_error's wrapping and points at the
            // offending key (unknown field) or value (bad type or variant). When it is absent,
            // as for a required key missing from the top level, the document walk is next best.
            let span = inner.span().or_else(|| self.locate(&key));
            self.error_at_span(span, &key, message)
        })
    }

    /// Ties a semantic problem to the line and column of its key.
    pub(crate) fn error(&self, problem: Problem) -> ConfigError {
        let span = if problem.at_value {
            // A missing key's value is its table, where serde's own error points.
            let parent = KeyPath(problem.key.0[..problem.key.0.len().saturating_sub(1)].to_vec());
            self.locate_value(&problem.key)
                .or_else(|| self.locate_value(&parent))
                .or_else(|| self.locate(&problem.key))
        } else {
            self.locate(&problem.key)
        };
        self.error_at_span(span, &problem.key, problem.message)
    }

    /// Every key path in the document whose last key satisfies `matches`, in document order.
    pub(crate) fn find_keys(&self, matches: &dyn Fn(&str) -> bool) -> Vec<KeyPath> {
        let mut found = Vec::new();
        find_keys_in(
            Node::Table(self.document.as_table()),
            &KeyPath::default(),
            matches,
            &mut found,
        );
        found
    }

    fn error_at_span(
        &self,
        span: Option<Range<usize>>,
        key: &KeyPath,
        message: String,
    ) -> ConfigError {
        let (line, column) =
            span.map_or((1, 1), |span| position_in(self.document.raw(), span.start));
        ConfigError {
            file: self.path.clone(),
            line,
            column,
            key: key.to_string(),
            message,
        }
    }

    /// The span of the value at `path`, when it is there.
    fn locate_value(&self, path: &KeyPath) -> Option<Range<usize>> {
        let mut node = Node::Table(self.document.as_table());
        for segment in &path.0 {
            node = match segment {
                Segment::Key(key) => node.child(key)?.1,
                Segment::Index(index) => node.element(*index)?,
            };
        }
        node.span()
    }

    /// Finds the span of the deepest part of `path` that exists in the document: the key itself
    /// when it is there, else its closest ancestor, so that a problem with a missing key still
    /// points at the table that should hold it.
    fn locate(&self, path: &KeyPath) -> Option<Range<usize>> {
        let mut node = Node::Table(self.document.as_table());
        let mut best = None;
        for segment in &path.0 {
            let (key_span, child) = match segment {
                Segment::Key(key) => match node.child(key) {
                    Some(found) => found,
                    None => break,
                },
                Segment::Index(index) => match node.element(*index) {
                    Some(child) => (None, child),
                    None => break,
                },
            };
            best = key_span.or_else(|| child.span()).or(best);
            node = child;
        }
        best
    }
}

/// The three shapes a position in a `toml_edit` document can take while walking it.
#[derive(Clone, Copy)]
enum Node<'a> {
    Table(&'a Table),
    Item(&'a Item),
    Value(&'a Value),
}

impl<'a> Node<'a> {
    fn table_like(self) -> Option<&'a dyn TableLike> {
        match self {
            Node::Table(table) => Some(table),
            Node::Item(item) => item.as_table_like(),
            Node::Value(value) => value.as_inline_table().map(|table| table as &dyn TableLike),
        }
    }

    fn child(self, key: &str) -> Option<(Option<Range<usize>>, Node<'a>)> {
        let (key, item) = self.table_like()?.get_key_value(key)?;
        Some((key.span(), Node::Item(item)))
    }

    fn element(self, index: usize) -> Option<Node<'a>> {
        match self {
            Node::Item(Item::ArrayOfTables(tables)) => tables.get(index).map(Node::Table),
            Node::Item(Item::Value(Value::Array(array))) | Node::Value(Value::Array(array)) => {
                array.get(index).map(Node::Value)
            }
            _ => None,
        }
    }

    fn span(self) -> Option<Range<usize>> {
        match self {
            Node::Table(table) => table.span(),
            Node::Item(item) => item.span(),
            Node::Value(value) => value.span(),
        }
    }

    fn len(self) -> usize {
        match self {
            Node::Item(Item::ArrayOfTables(tables)) => tables.len(),
            Node::Item(Item::Value(Value::Array(array))) | Node::Value(Value::Array(array)) => {
                array.len()
            }
            _ => 0,
        }
    }
}

fn find_keys_in(
    node: Node<'_>,
    path: &KeyPath,
    matches: &dyn Fn(&str) -> bool,
    found: &mut Vec<KeyPath>,
) {
    if let Some(table) = node.table_like() {
        for (key, _) in table.iter() {
            let child_path = path.key(key);
            if matches(key) {
                found.push(child_path.clone());
            }
            if let Some((_, child)) = node.child(key) {
                find_keys_in(child, &child_path, matches, found);
            }
        }
        return;
    }
    for index in 0..node.len() {
        if let Some(child) = node.element(index) {
            find_keys_in(child, &path.index(index), matches, found);
        }
    }
}

/// Converts a byte offset into a 1-based line and a 1-based column counted in characters.
fn position_in(text: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(text, offset);
    let before = &text[..offset];
    let line = before.bytes().filter(|&byte| byte == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// toml_edit's syntax messages span several lines ("invalid string\nexpected `\"`"); a
/// `ConfigError` is displayed one per line, so they are folded.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// A serde error from reading the table `name` on its own (a venue's own table, read in its
/// folder from the raw value the config keeps): the (dotted key, message) of
/// [`SourceFile::deserialize`]'s error, the same words, the key path under `name`.
pub(crate) fn describe_table_error(
    name: &str,
    error: serde_path_to_error::Error<toml::de::Error>,
    top_level_keys: &[&str],
) -> crate::venue::protocol::TableProblem {
    let mut key = KeyPath::default().key(name);
    key.0.extend(KeyPath::from_serde(error.path()).0);
    let inner = error.into_inner();
    let table = key.to_string();
    let table = table.rsplit_once('.').map_or("", |(table, _)| table);
    let (missing_key, mut message) = describe_serde_error(inner.message(), table);
    let missing = missing_key.is_some();
    if let Some(missing_key) = missing_key {
        key = key.key(&missing_key);
    }
    if let [_, .., Segment::Key(name)] = key.0.as_slice() {
        if message.starts_with("unknown key") && top_level_keys.contains(&name.as_str()) {
            message.push_str(&format!(
                "; `{name}` is a top-level key, so it must come before the first [table] header"
            ));
        }
    }
    // Serde's own errors about a value (a wrong type, an unknown variant, a number out of
    // range; a missing key: its table) point at the value, as `SourceFile::deserialize`'s do.
    let at_value = message.starts_with("invalid ") || missing;
    crate::venue::protocol::TableProblem {
        key: key.to_string(),
        message,
        at_value,
    }
}

/// Keys (dotted paths) that are accepted by serde only to be refused by validation with a
/// message naming their new place (`metrics.listen`: now `[http] listen`), so never listed as
/// valid.
const RETIRED_KEYS: &[&str] = &["metrics.listen"];

/// Rewrites serde's messages into the config's vocabulary (keys rather than fields, values rather
/// than variants) and lists what is valid. Returns the name of a missing key separately because it
/// belongs on the key path, which serde leaves at the parent table.
///
/// The messages parsed here are the fixed formats of `serde::de::Error::unknown_field`,
/// `unknown_variant` and `missing_field` (serde's `de/mod.rs`), which have been stable since 1.0.
///
/// `table` is the dotted path of the table the message is about ("" at the top): the keys of
/// [`RETIRED_KEYS`] in it are left out of the valid keys it lists.
fn describe_serde_error(message: &str, table: &str) -> (Option<String>, String) {
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (name, expected) = split_expected(rest);
        let valid: Vec<&str> = backticked(expected)
            .into_iter()
            .filter(|key| {
                let path = if table.is_empty() {
                    (*key).to_owned()
                } else {
                    format!("{table}.{key}")
                };
                !RETIRED_KEYS.contains(&path.as_str())
            })
            .collect();
        let message = if valid.is_empty() {
            format!("unknown key `{name}`; no keys are valid here")
        } else {
            format!(
                "unknown key `{name}`; valid keys here: {}",
                valid.join(", ")
            )
        };
        return (None, message);
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (name, expected) = split_expected(rest);
        let valid: Vec<String> = backticked(expected)
            .into_iter()
            .map(|value| format!("\"{value}\""))
            .collect();
        return (
            None,
            format!(
                "invalid value \"{name}\"; valid values: {}",
                valid.join(", ")
            ),
        );
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        let name = rest.trim_matches('`').to_owned();
        let message = format!("missing required key `{name}`");
        return (Some(name), message);
    }
    (None, plain_type_names(message))
}

/// Splits "`name`, expected ..." into the name and the expectation.
fn split_expected(rest: &str) -> (&str, &str) {
    let rest = rest.strip_prefix('`').unwrap_or(rest);
    match rest.split_once("`, ") {
        Some((name, expected)) => (name, expected),
        None => (rest.trim_end_matches('`'), ""),
    }
}

/// The `backticked` words of serde's "expected one of `a`, `b`" lists.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Serde names Rust types in type errors ("expected usize"); a config author thinks in TOML.
fn plain_type_names(message: &str) -> String {
    const RUST_TO_TOML: [(&str, &str); 8] = [
        ("expected usize", "expected a non-negative integer"),
        ("expected u64", "expected a non-negative integer"),
        ("expected u32", "expected a non-negative integer below 2^32"),
        ("expected u16", "expected an integer in 0..=65535"),
        ("expected u8", "expected an integer in 0..=255"),
        ("expected f64", "expected a number"),
        ("expected a borrowed string", "expected a string"),
        ("expected path string", "expected a string"),
    ];
    for (rust, toml) in RUST_TO_TOML {
        if let Some(prefix) = message.strip_suffix(rust) {
            return format!("{prefix}{toml}");
        }
    }
    message.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(position_in(text, 0), (1, 1));
        assert_eq!(position_in(text, 6), (2, 1));
        // "bé = " is six bytes but five characters, so the `2` after it is in column 6.
        assert_eq!(position_in(text, 12), (2, 6));
        assert_eq!(position_in(text, 10_000), (3, 1));
    }

    #[test]
    fn key_paths_display_like_toml() {
        let path = KeyPath::dotted("staleness.channels").key("depth@100ms");
        assert_eq!(path.to_string(), "staleness.channels.\"depth@100ms\"");
        assert_eq!(KeyPath::dotted("venues").index(2).to_string(), "venues[2]");
    }

    #[test]
    fn serde_messages_are_rewritten() {
        assert_eq!(
            describe_serde_error(
                "unknown field `wiat`, expected `core` or `wait`",
                "threads.net"
            )
            .1,
            "unknown key `wiat`; valid keys here: core, wait"
        );
        assert_eq!(
            describe_serde_error("unknown field `x`, there are no fields", "").1,
            "unknown key `x`; no keys are valid here"
        );
        assert_eq!(
            describe_serde_error(
                "unknown variant `spinn`, expected one of `spin`, `park`",
                "threads.net"
            )
            .1,
            "invalid value \"spinn\"; valid values: \"spin\", \"park\""
        );
        assert_eq!(
            describe_serde_error("missing field `url`", ""),
            (
                Some("url".to_owned()),
                "missing required key `url`".to_owned()
            )
        );
        assert_eq!(
            describe_serde_error("invalid value: integer `-1`, expected usize", "").1,
            "invalid value: integer `-1`, expected a non-negative integer"
        );
    }

    #[test]
    fn locate_finds_keys_in_headers_dotted_keys_inline_tables_and_arrays() {
        let text = "top = 1\n[a.b]\nc = 2\n[d]\ne = { f = 3 }\ng = [\"x\",\n  \"y\"]\nh.i = 4\n";
        let source = SourceFile::parse(PathBuf::from("t.toml"), text.to_owned())
            .expect("test document is valid TOML");
        let at = |path: KeyPath| {
            let span = source.locate(&path).expect("key is present");
            position_in(text, span.start)
        };
        assert_eq!(at(KeyPath::dotted("top")), (1, 1));
        assert_eq!(at(KeyPath::dotted("a.b.c")), (3, 1));
        assert_eq!(at(KeyPath::dotted("d.e.f")), (5, 7));
        assert_eq!(at(KeyPath::dotted("d.g").index(1)), (7, 3));
        assert_eq!(at(KeyPath::dotted("d.h.i")), (8, 3));
        // A missing key falls back to its nearest ancestor.
        assert_eq!(
            at(KeyPath::dotted("d.e.missing")),
            at(KeyPath::dotted("d.e"))
        );
    }
}
