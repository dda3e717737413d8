//! Records tickwire's event bus to DBN files and reads them back (issue 21).
//!
//! A bus consumer like any other: [`run::record_bus`] reads a [`tickwire_client::Client`] and
//! hands each batch to a [`Recorder`], which writes one set of files per venue with the
//! official `dbn` crate's encoder ([`codec`] maps every event kind to a DBN record, losslessly;
//! [`file`] frames them in zstd so that a killed recorder's files read back to their last
//! flush). [`reader`] reads recordings back into the same 64-byte events, in time order across
//! files, for `tickwire replay`.
//!
//! Its own crate, beside `tickwire-client`, so that both the `tickwire record --events`
//! process and the appliance's recorder thread run the same code, and a user's program can
//! record or read recordings without the appliance.

pub mod codec;
pub mod file;
pub mod reader;
pub mod recorder;
pub mod run;

pub use codec::{decode, encode, Encoded};
pub use file::{FsyncPolicy, RecordingFile};
pub use reader::{ReadError, RecordingReader, Replay, Source, MAX_METADATA_BYTES};
pub use recorder::{
    venue_of_file_name, Clock, Recorder, RecorderConfig, RecorderStats, SystemClock,
};
pub use run::{record_bus, RunOutcome, SharedStats};
