//! Checkpoints: what a run consumed and delivered, saved so that the next
//! run goes on from there exactly once. The seam a sink that keeps its own
//! checkpoint implements ([`CheckpointStore`], handed a [`Checkpoint`]),
//! a sink's [`Mark`], the state file (`--state`) with its model, its
//! layouts (every earlier one loads) and its lock, files' stamps, and
//! shards.

mod layout;
pub(crate) mod model;
pub(crate) mod shard;
pub(crate) mod stamp;
pub(crate) mod state;

pub use model::{FileState, LineageState, Mark, OutputOptions, OutputState};
pub use shard::{fnv1a, shard_of, Shard};
pub use stamp::Identity;
#[doc(hidden)]
pub use state::respell_keys;
pub use state::{
    lock_file, real_path, response_rows, Checkpoint, CheckpointStore, Lock, State, StateFile,
    RECORD_FORMAT, STATE_VERSION,
};
