//! The effect side of the control plane: carries out the link logic's [`LinkCommand`]s on the
//! [`Runtime`]. It decides nothing; it holds the prepared streams (resolved addresses and TLS
//! settings) so that the link logic need not.

use super::links::LinkCommand;
use crate::net::engine::StreamSpec;
use crate::pipeline::{Runtime, RuntimeError};

/// Carries out link commands.
pub struct Applier {
    /// By venue index: its prepared stream (`None`: it could not be prepared, the error was
    /// logged, and the link logic never opens it).
    specs: Vec<Option<StreamSpec>>,
}

impl Applier {
    pub fn new(specs: Vec<Option<StreamSpec>>) -> Applier {
        Applier { specs }
    }

    /// Applies `commands` in order, leaving the vector empty for reuse. Stops at the first
    /// command the runtime cannot take (its threads are gone).
    pub fn apply(
        &self,
        runtime: &mut Runtime,
        commands: &mut Vec<LinkCommand>,
    ) -> Result<(), RuntimeError> {
        for command in commands.drain(..) {
            match command {
                LinkCommand::Open {
                    venue,
                    slot,
                    generation,
                } => {
                    let Some(Some(spec)) = self.specs.get(venue) else {
                        continue;
                    };
                    runtime.open_stream(slot, generation, spec.clone())?;
                }
                LinkCommand::Send { slot, text } => runtime.send_text(slot, text)?,
                LinkCommand::Ping { slot } => runtime.ping(slot)?,
                LinkCommand::Close { slot } => runtime.close_stream(slot)?,
                LinkCommand::Abort { slot } => runtime.abort_stream(slot)?,
                LinkCommand::Disconnected {
                    venue,
                    slot,
                    instruments,
                } => runtime.notify_disconnect(venue, slot, instruments)?,
                LinkCommand::Event(event) => runtime.send_status(event)?,
            }
        }
        Ok(())
    }
}
