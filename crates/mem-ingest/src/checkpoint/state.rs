//! Checkpoints: what earlier runs consumed, per session file, and the
//! deduplication sets, so a re-run reads only what is new.
//!
//! The state file is `MEMINGST`, the format version (u32, little endian),
//! then the state in postcard's compact encoding: it describes every file
//! of the archive and is read on every run, so it must load in
//! milliseconds. It is written atomically (temporary file, fsync, rename,
//! fsync of the folder) and only after the output it covers is durable. A
//! lock file beside it keeps two runs off one state.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::layout::{
    output_v5, FileV2, OptionsV10, OptionsV12, OptionsV4, OptionsV5, OptionsV6, OptionsV7, RefV11,
    RefV3, ResponseRef, ResponseWire, WireV11, WireV3,
};
use super::model::{blob, FileState, LineageState, Mark, OutputOptions, OutputState};
use super::stamp::Identity;
use crate::archive::dedupe::Lineages;
use crate::error::{Error, ErrorKind};
#[cfg(test)]
use crate::line::{Header, Parent};
use crate::usage::Response;

/// Version of the state file's layout (see the `layout` module). Versions
/// 1 to 10 are still read, and saved anew in this one. Version 9 is version
/// 8's encoding with files keyed by their path's spelling
/// ([`crate::path_text`]) instead of the path made UTF-8 lossily: see
/// [`respell_keys`]. Version 10 records whether links met while walking
/// are followed ([`OutputOptions::links`]). Version 11 records what kind
/// of parent a file's header names ([`Parent`]). Version 12 records
/// whether the records' text was redacted ([`OutputOptions::redact`]).
/// Version 13 records what the checkpoint covers of the usage rows' file
/// (`--usage-out`, [`State::usage_output`]), after the rest.
pub const STATE_VERSION: u32 = 13;
/// Version of what a record line holds; a state written for another one is
/// refused, since re-runs append to the same output.
pub const RECORD_FORMAT: u32 = 1;

/// A checkpoint as saved: the options, what the output holds, every file
/// read, and the deduplication lineages.
#[derive(Debug, Clone, Deserialize)]
pub struct State {
    /// The layout version it was read in.
    pub version: u32,
    /// The options that shape the output.
    #[serde(with = "OptionsV12")]
    pub options: OutputOptions,
    /// Bytes of the output file the state covers (`-o`), if any.
    pub output: Option<OutputState>,
    /// Shared with the plan, which reads them without copying.
    #[serde(deserialize_with = "files_v11")]
    pub files: BTreeMap<String, Arc<FileState>>,
    /// The deduplication lineages in postcard's encoding of a
    /// `Vec<LineageState>`, decoded only when a run reads a file: a re-run
    /// over an unchanged archive never needs them, and decoding the
    /// generated archive's 3,207 lineages was 40% of loading its state.
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    /// The kept copy of every usage-bearing response seen (see
    /// [`crate::usage`]), in the layout's encoding, as loaded (a run keeps
    /// the live table itself, and a checkpoint hands it to the store);
    /// empty when none.
    #[serde(with = "blob")]
    responses: Vec<u8>,
    /// With `--shard`: the root of every lineage the archive's headers
    /// named at the last run, this shard's or another's (see
    /// [`super::shard`]), so that a file keeps its shard when a file
    /// between it and its root goes. Empty in a state before layout
    /// version 8 and in a run of the whole archive.
    pub(crate) shard_roots: BTreeMap<String, String>,
    /// Forks (their keys in `files`) that dropped copies of a parent's
    /// entries read ahead, for the parent to emit, by the parent's key,
    /// while the parent is not delivered (a run stopped or killed before
    /// it): if it then fails or is gone, they are read again. Empty in a
    /// state before layout version 8.
    pub(crate) pending_forks: BTreeMap<String, Vec<String>>,
    /// Bytes of the usage rows' file the state covers (`--usage-out`), if
    /// any. None in a state before layout version 13.
    pub usage_output: Option<OutputState>,
}

/// The layout of version 12 (no usage output), read and converted.
#[derive(Deserialize)]
struct StateV12 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV12")]
    options: OutputOptions,
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v11")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    #[serde(with = "blob")]
    responses: Vec<u8>,
    shard_roots: BTreeMap<String, String>,
    pending_forks: BTreeMap<String, Vec<String>>,
}

impl State {
    /// A state read in an older layout `version` (which it says, so that
    /// the run saves it anew in this one), with no lineages yet.
    fn of_layout(
        version: u32,
        options: OutputOptions,
        output: Option<OutputState>,
        files: BTreeMap<String, Arc<FileState>>,
    ) -> State {
        let mut st = State::new(options);
        st.version = version;
        st.output = output;
        st.files = files;
        st
    }

    /// What the state covers of the usage rows' file, as a mark's
    /// [`Mark::usage`].
    pub fn usage_mark(&self) -> Option<(String, u64)> {
        self.usage_output.as_ref().map(|u| (u.path.clone(), u.len))
    }

    /// A new, empty state.
    pub fn new(options: OutputOptions) -> State {
        let mut st = State {
            version: STATE_VERSION,
            options,
            output: None,
            files: BTreeMap::new(),
            lineages: Vec::new(),
            responses: Vec::new(),
            shard_roots: BTreeMap::new(),
            pending_forks: BTreeMap::new(),
            usage_output: None,
        };
        st.set_lineages(&[]);
        st
    }

    /// The kept responses, decoded (none for a state saved before layout
    /// version 4: the command line kept only pi files in those).
    ///
    /// # Errors
    /// The encoded responses are damaged: why.
    pub(crate) fn responses(&self) -> Result<Vec<Response>, String> {
        if self.responses.is_empty() {
            return Ok(Vec::new());
        }
        let wire: Vec<ResponseWire> = postcard::from_bytes(&self.responses)
            .map_err(|e| format!("damaged usage responses ({e})"))?;
        Ok(wire.into_iter().map(|w| w.0).collect())
    }

    /// Replaces the kept responses with ones
    /// [`Checkpoint::encoded_responses`] gave (a store that keeps them as
    /// one value).
    pub fn set_encoded_responses(&mut self, b: Vec<u8>) {
        self.responses = b;
    }

    /// Replaces the kept responses with the rows
    /// [`Checkpoint::changed_responses`] gave, in the order of their
    /// indexes (a store that keeps one row per response). A damaged row is
    /// found when the run decodes them.
    pub fn set_response_rows(&mut self, rows: impl ExactSizeIterator<Item = Vec<u8>>) {
        if rows.len() == 0 {
            self.responses.clear();
            return;
        }
        // A postcard sequence: its length, then its elements.
        let mut b = postcard::to_stdvec(&rows.len()).expect("a length encodes");
        for r in rows {
            b.extend_from_slice(&r);
        }
        self.responses = b;
    }

    /// Replaces the forks waiting for a parent with ones
    /// [`Checkpoint::pending_forks`] gave (a store that keeps its own
    /// checkpoint).
    pub fn set_pending_forks(&mut self, pending: BTreeMap<String, Vec<String>>) {
        self.pending_forks = pending;
    }

    /// Replaces the recorded shard roots with ones
    /// [`Checkpoint::shard_roots`] gave (a store that keeps its own
    /// checkpoint).
    pub fn set_shard_roots(&mut self, roots: BTreeMap<String, String>) {
        self.shard_roots = roots;
    }

    /// The lineages, decoded.
    ///
    /// # Errors
    /// The encoded lineages are damaged: why.
    pub fn lineages(&self) -> Result<Vec<LineageState>, String> {
        let l: Vec<LineageState> = postcard::from_bytes(&self.lineages)
            .map_err(|e| format!("damaged deduplication sets ({e})"))?;
        if l.iter().any(|l| !l.fingerprints.len().is_multiple_of(8)) {
            return Err("damaged deduplication sets (a fingerprint set is not whole)".into());
        }
        Ok(l)
    }

    /// Replaces the lineages.
    pub fn set_lineages(&mut self, l: &[LineageState]) {
        self.lineages = postcard::to_stdvec(l).expect("lineages encode");
    }

    /// Replaces the lineages with the ones these rows describe: each
    /// fingerprint with the session that emitted it, and the joins of
    /// sessions into one lineage (what [`Checkpoint::new_fingerprints`] and
    /// [`Checkpoint::new_joins`] hand a store that appends rows).
    pub fn set_lineages_from_rows(
        &mut self,
        fingerprints: impl IntoIterator<Item = (String, u64)>,
        joins: &[(String, String)],
    ) {
        let mut l = Lineages::default();
        for (a, b) in joins {
            l.join(a, b);
        }
        for (session, fp) in fingerprints {
            l.insert(&session, fp);
        }
        let snapshot: Vec<LineageState> = l
            .snapshot()
            .into_iter()
            .map(|(sessions, fps)| LineageState {
                sessions,
                fingerprints: encode_fingerprints(&fps),
            })
            .collect();
        self.set_lineages(&snapshot);
    }
}

impl FileState {
    /// The file's entry in the state's layout ([`STATE_VERSION`]), for a
    /// store that keeps one row per file.
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_stdvec(&RefV11(self)).expect("a file state encodes")
    }

    /// A file's entry from [`FileState::to_bytes`].
    ///
    /// # Errors
    /// The bytes are not one: why.
    pub fn from_bytes(b: &[u8]) -> Result<FileState, String> {
        FileState::from_bytes_of(b, STATE_VERSION)
    }

    /// A file's entry in the state's layout `version` (3 to
    /// [`STATE_VERSION`]), for a store that migrates the rows an earlier
    /// version wrote.
    ///
    /// # Errors
    /// The bytes are not one in that layout, or the layout is not one of
    /// these: why.
    pub fn from_bytes_of(b: &[u8], version: u32) -> Result<FileState, String> {
        let damaged = |e: postcard::Error| format!("damaged file state ({e})");
        match version {
            11..=STATE_VERSION => postcard::from_bytes::<WireV11>(b)
                .map(|w| w.0)
                .map_err(damaged),
            3..=10 => postcard::from_bytes::<WireV3>(b)
                .map(|w| w.0)
                .map_err(damaged),
            v => Err(format!("no file state layout {v}")),
        }
    }
}

/// The files of a state, read as they were written: in key order, so the
/// map is built in one pass (`BTreeMap::from_iter` checks the order with
/// one comparison per key) instead of one search among thousands of long
/// keys per file, a fifth of loading the generated archive's state. `W` is
/// a file's layout, converted.
fn files_in_order<'de, D, W>(d: D) -> Result<BTreeMap<String, Arc<FileState>>, D::Error>
where
    D: serde::Deserializer<'de>,
    W: Deserialize<'de> + Into<FileState>,
{
    struct Files<W>(std::marker::PhantomData<W>);
    impl<'de, W: Deserialize<'de> + Into<FileState>> serde::de::Visitor<'de> for Files<W> {
        type Value = BTreeMap<String, Arc<FileState>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map of file states")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut files = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1 << 20));
            while let Some((k, w)) = map.next_entry::<String, W>()? {
                files.push((k, Arc::new(w.into())));
            }
            Ok(files.into_iter().collect())
        }
    }
    d.deserialize_map(Files::<W>(std::marker::PhantomData))
}

fn files_v3<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, Arc<FileState>>, D::Error> {
    files_in_order::<D, WireV3>(d)
}

fn files_v11<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, Arc<FileState>>, D::Error> {
    files_in_order::<D, WireV11>(d)
}

fn files_v2<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, Arc<FileState>>, D::Error> {
    files_in_order::<D, FileV2>(d)
}

impl From<WireV3> for FileState {
    fn from(w: WireV3) -> FileState {
        w.0
    }
}

impl From<WireV11> for FileState {
    fn from(w: WireV11) -> FileState {
        w.0
    }
}

/// The layout of version 11 (no redaction in the options), read and
/// converted.
#[derive(Deserialize)]
struct StateV11 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV10")]
    options: OutputOptions,
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v11")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    #[serde(with = "blob")]
    responses: Vec<u8>,
    shard_roots: BTreeMap<String, String>,
    pending_forks: BTreeMap<String, Vec<String>>,
}

/// The layout of version 10 (a file's parent as its text alone), read
/// and converted.
#[derive(Deserialize)]
struct StateV10 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV10")]
    options: OutputOptions,
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v3")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    #[serde(with = "blob")]
    responses: Vec<u8>,
    shard_roots: BTreeMap<String, String>,
    pending_forks: BTreeMap<String, Vec<String>>,
}

/// The layout of versions 8 and 9 (no links in the options), read and
/// converted.
#[derive(Deserialize)]
struct StateV9 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV7")]
    options: OutputOptions,
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v3")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    #[serde(with = "blob")]
    responses: Vec<u8>,
    shard_roots: BTreeMap<String, String>,
    pending_forks: BTreeMap<String, Vec<String>>,
}

/// The layout of version 7 (no shard roots), read and converted.
#[derive(Deserialize)]
struct StateV7 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV7")]
    options: OutputOptions,
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v3")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    #[serde(with = "blob")]
    responses: Vec<u8>,
}

/// The layout of version 6 (no line hash in the options), read and
/// converted.
#[derive(Deserialize)]
struct StateV6 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV6")]
    options: OutputOptions,
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v3")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    #[serde(with = "blob")]
    responses: Vec<u8>,
}

/// The layout of version 5 (no shard in the options, a file's output
/// only), read and converted.
#[derive(Deserialize)]
struct StateV5 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV5")]
    options: OutputOptions,
    #[serde(deserialize_with = "output_v5::deserialize")]
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v3")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    #[serde(with = "blob")]
    responses: Vec<u8>,
}

/// The layout of version 4 (no sources in the options), read and
/// converted.
#[derive(Deserialize)]
struct StateV4 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV4")]
    options: OutputOptions,
    #[serde(deserialize_with = "output_v5::deserialize")]
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v3")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
    #[serde(with = "blob")]
    responses: Vec<u8>,
}

/// The layout of version 3 (no responses), read and converted.
#[derive(Deserialize)]
struct StateV3 {
    #[allow(dead_code)]
    version: u32,
    #[serde(with = "OptionsV4")]
    options: OutputOptions,
    #[serde(deserialize_with = "output_v5::deserialize")]
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v3")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
}

/// Responses in the layout's encoding.
fn encode_responses(kept: &[Response]) -> Vec<u8> {
    if kept.is_empty() {
        return Vec::new();
    }
    let wire: Vec<ResponseRef<'_>> = kept.iter().map(ResponseRef).collect();
    postcard::to_stdvec(&wire).expect("responses encode")
}

/// Responses kept as one value ([`Checkpoint::encoded_responses`]) as one
/// row each ([`Checkpoint::changed_responses`]): for a store that moves
/// from the one to the other.
///
/// # Errors
/// The value is damaged: why.
pub fn response_rows(encoded: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    if encoded.is_empty() {
        return Ok(Vec::new());
    }
    let wire: Vec<ResponseWire> =
        postcard::from_bytes(encoded).map_err(|e| format!("damaged usage responses ({e})"))?;
    Ok(wire
        .iter()
        .map(|w| postcard::to_stdvec(&ResponseRef(&w.0)).expect("a response encodes"))
        .collect())
}

/// The layout of version 2, read and converted.
#[derive(Deserialize)]
struct StateV2 {
    #[serde(with = "OptionsV4")]
    shape: OutputOptions,
    #[serde(deserialize_with = "output_v5::deserialize")]
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v2")]
    files: BTreeMap<String, Arc<FileState>>,
    #[serde(with = "blob")]
    lineages: Vec<u8>,
}

/// The layout of version 1, read and converted.
#[derive(Deserialize)]
struct StateV1 {
    #[serde(with = "OptionsV4")]
    shape: OutputOptions,
    #[serde(deserialize_with = "output_v5::deserialize")]
    output: Option<OutputState>,
    #[serde(deserialize_with = "files_v2")]
    files: BTreeMap<String, Arc<FileState>>,
    lineages: Vec<LineageState>,
}

/// The lock that keeps a second run off the state while this one runs.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// Takes the lock of the state at `state`: a file beside it, created when
/// missing, held for the life of the [`Lock`].
///
/// # Errors
/// `Locked` when another run holds it; I/O errors naming the lock file.
pub fn lock(state: &Path) -> Result<Lock, Error> {
    lock_file(state, "state")
}

/// How long a lock that is taken is tried again before the run is
/// refused: a lock is also held, for an instant, by a process this one
/// (another thread of it: a test harness, an application) is starting,
/// which holds a copy of every descriptor between its fork and its exec.
/// A second run is refused after this, not waited for.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// Takes the lock of the file at `path` (a state, a store: `what`):
/// `<path>.lock` beside it, created when missing, held for the life of the
/// [`Lock`]; a second run is refused within [`LOCK_RETRY`] instead of
/// waiting.
///
/// # Errors
/// `Locked` when another run holds it; I/O errors naming the lock file.
pub fn lock_file(path: &Path, what: &'static str) -> Result<Lock, Error> {
    // The file's lock, not the name's: a second name for it through a
    // symbolic link takes the same lock.
    let lock = sibling(&real_path(path), ".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|e| Error::io(&lock, e))?;
    let tried = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Lock { _file: file }),
            Err(fs::TryLockError::WouldBlock) if tried.elapsed() < LOCK_RETRY => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(Error::new(path, ErrorKind::Locked { lock, what }))
            }
            Err(fs::TryLockError::Error(e)) => return Err(Error::io(&lock, e)),
        }
    }
}

/// The file `path` names: the symbolic links of its last component
/// followed (a chain of them, relative ones from their own folder), whether
/// the file they end at exists yet or not; `path` itself when it is no
/// link. A folder of the path that is a link needs nothing: the names
/// below it are the same files.
pub fn real_path(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    // As the kernel does, at most 40 links in a chain.
    for _ in 0..40 {
        match fs::read_link(&p) {
            Ok(target) => {
                p = match p.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                }
            }
            Err(_) => break,
        }
    }
    p
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

const MAGIC: &[u8; 8] = b"MEMINGST";

/// Loads the state; `Ok(None)` when there is none yet.
///
/// # Errors
/// I/O; `StateForeign`, `StateDamaged`, `StateNewer`, each naming `path`.
pub fn load(path: &Path) -> Result<Option<State>, Error> {
    let mut st = load_layout(path)?;
    if let Some(st) = st.as_mut().filter(|st| st.version < 9) {
        let _ = respell_keys(&mut st.files, &mut st.pending_forks);
    }
    Ok(st)
}

/// The files of a checkpoint saved before paths were spelled (state layout
/// 8 and before, store schema 3 and before: each file keyed by its path
/// made UTF-8 lossily), keyed anew by their spelling
/// ([`crate::path_text`]): a backslash doubled. A key that held U+FFFD
/// stood for a path that was not UTF-8, whose bytes the key lost: the file
/// of that folder whose lossy path is the key and whose device and inode
/// are the ones recorded takes it (a rename since changed the inode's path,
/// not the inode); when none is found, the entry is dropped, and the file,
/// if it is still there, is read as a new one. The forks waiting for a
/// parent are keyed and listed the same way. Returns each file's new key
/// by its old one (a file dropped has none).
pub fn respell_keys(
    files: &mut BTreeMap<String, Arc<FileState>>,
    pending_forks: &mut BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, String> {
    use crate::path_text::{respell_legacy, spell};
    let legacy = |k: &String| k.contains('\\') || k.contains('\u{fffd}');
    if !files.keys().any(legacy) && !pending_forks.keys().any(legacy) {
        return files.keys().map(|k| (k.clone(), k.clone())).collect();
    }
    let find = |key: &str, st: &FileState| -> Option<String> {
        let parent = Path::new(key).parent()?;
        let entries = fs::read_dir(parent).ok()?;
        entries.flatten().find_map(|e| {
            let p = e.path();
            let m = fs::symlink_metadata(&p).ok()?;
            let id = Identity::of(&m);
            (p.to_string_lossy() == key && id.dev == st.identity.dev && id.ino == st.identity.ino)
                .then(|| spell(&p).into_owned())
        })
    };
    let mut renamed = BTreeMap::new();
    for (key, st) in std::mem::take(files) {
        let new = match respell_legacy(&key) {
            Some(k) => Some(k.into_owned()),
            None => find(&key, &st),
        };
        if let Some(new) = new {
            renamed.insert(key, new.clone());
            files.insert(new, st);
        }
    }
    // A parent may have no entry (it was not delivered): its key is
    // respelled alone, or kept when its bytes are lost (it then names no
    // file, as it named none that could be told apart).
    let anew = |k: String| match renamed.get(&k) {
        Some(n) => n.clone(),
        None => respell_legacy(&k).map_or(k.clone(), |n| n.into_owned()),
    };
    for (parent, kids) in std::mem::take(pending_forks) {
        pending_forks.insert(anew(parent), kids.into_iter().map(anew).collect());
    }
    renamed
}

/// [`load`] in the layout the file says, its keys as saved.
fn load_layout(path: &Path) -> Result<Option<State>, Error> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(path, e)),
    };
    let not_ours = || Error::new(path, ErrorKind::StateForeign);
    let (Some(magic), Some(version)) = (bytes.get(..8), bytes.get(8..12)) else {
        return Err(not_ours());
    };
    if magic != MAGIC {
        return Err(not_ours());
    }
    let version = u32::from_le_bytes(version.try_into().expect("4 bytes"));
    let damaged = |e: postcard::Error| {
        Error::new(
            path,
            ErrorKind::StateDamaged(format!("damaged state ({e})")),
        )
    };
    match version {
        STATE_VERSION => postcard::from_bytes(&bytes[12..])
            .map(|st: State| Some(State { version, ..st }))
            .map_err(damaged),
        12 => {
            let v12: StateV12 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(12, v12.options, v12.output, v12.files);
            Ok(Some(State {
                lineages: v12.lineages,
                responses: v12.responses,
                shard_roots: v12.shard_roots,
                pending_forks: v12.pending_forks,
                ..st
            }))
        }
        11 => {
            let v11: StateV11 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(11, v11.options, v11.output, v11.files);
            Ok(Some(State {
                lineages: v11.lineages,
                responses: v11.responses,
                shard_roots: v11.shard_roots,
                pending_forks: v11.pending_forks,
                ..st
            }))
        }
        10 => {
            let v10: StateV10 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(10, v10.options, v10.output, v10.files);
            Ok(Some(State {
                lineages: v10.lineages,
                responses: v10.responses,
                shard_roots: v10.shard_roots,
                pending_forks: v10.pending_forks,
                ..st
            }))
        }
        // Version 8 is version 9's encoding, its keys spelled lossily.
        9 | 8 => {
            let v9: StateV9 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(version, v9.options, v9.output, v9.files);
            Ok(Some(State {
                lineages: v9.lineages,
                responses: v9.responses,
                shard_roots: v9.shard_roots,
                pending_forks: v9.pending_forks,
                ..st
            }))
        }
        7 => {
            let v7: StateV7 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(7, v7.options, v7.output, v7.files);
            Ok(Some(State {
                lineages: v7.lineages,
                responses: v7.responses,
                ..st
            }))
        }
        6 => {
            let v6: StateV6 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(6, v6.options, v6.output, v6.files);
            Ok(Some(State {
                lineages: v6.lineages,
                responses: v6.responses,
                ..st
            }))
        }
        5 => {
            let v5: StateV5 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(5, v5.options, v5.output, v5.files);
            Ok(Some(State {
                lineages: v5.lineages,
                responses: v5.responses,
                ..st
            }))
        }
        4 => {
            let v4: StateV4 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(4, v4.options, v4.output, v4.files);
            Ok(Some(State {
                lineages: v4.lineages,
                responses: v4.responses,
                ..st
            }))
        }
        3 => {
            let v3: StateV3 = postcard::from_bytes(&bytes[12..]).map_err(damaged)?;
            let st = State::of_layout(3, v3.options, v3.output, v3.files);
            Ok(Some(State {
                lineages: v3.lineages,
                ..st
            }))
        }
        2 => {
            // The version field came first in the body too.
            let (_, body): (u32, &[u8]) =
                postcard::take_from_bytes(&bytes[12..]).map_err(damaged)?;
            let v2: StateV2 = postcard::from_bytes(body).map_err(damaged)?;
            let st = State::of_layout(2, v2.shape, v2.output, v2.files);
            Ok(Some(State {
                lineages: v2.lineages,
                ..st
            }))
        }
        1 => {
            // The version field came first in version 1's body too.
            let (_, body): (u32, &[u8]) =
                postcard::take_from_bytes(&bytes[12..]).map_err(damaged)?;
            let v1: StateV1 = postcard::from_bytes(body).map_err(damaged)?;
            let mut st = State::of_layout(1, v1.shape, v1.output, v1.files);
            st.set_lineages(&v1.lineages);
            Ok(Some(st))
        }
        _ => Err(Error::new(
            path,
            ErrorKind::StateNewer {
                version,
                reads: STATE_VERSION,
            },
        )),
    }
}

/// Where checkpoints are kept: a state file ([`StateFile`]), or a sink's
/// own store (a database keeps them with its rows, in one transaction).
pub trait CheckpointStore {
    /// The checkpoint of the last run; `Ok(None)` when there is none yet.
    ///
    /// # Errors
    /// The store is unreadable, foreign or newer.
    fn load(&mut self) -> Result<Option<State>, Error>;

    /// How line bytes were hashed into the fingerprints the store itself
    /// holds beside its checkpoint (a database's rows), when it records
    /// that: a run with no checkpoint (a new one, or one lost) hashes the
    /// same way. Default: none (a state file's checkpoint says it).
    fn line_hash(&self) -> Option<crate::LineHash> {
        None
    }

    /// Saves a checkpoint, after the sink made the output it covers
    /// durable. A store that appends takes [`Checkpoint::changed_files`],
    /// [`Checkpoint::new_fingerprints`] and [`Checkpoint::new_joins`]; one
    /// that rewrites takes the whole state.
    ///
    /// # Errors
    /// Saving failed: the run stops.
    fn save(&mut self, checkpoint: &mut Checkpoint<'_>) -> Result<(), Error>;

    /// Whether the store was made before it kept usage rows and has not
    /// had what its checkpoint covers read again for them: the run then
    /// reads it ([`crate::archive::UsageReread`]) and hands the rows to
    /// [`CheckpointStore::save_reread_usage`] before it goes on. Default
    /// false.
    ///
    /// # Errors
    /// The store cannot be read.
    fn usage_reread_pending(&mut self) -> Result<bool, Error> {
        Ok(false)
    }

    /// Whether the store holds usage rows written before its pending
    /// re-read (a store the release before migrated, which did not read
    /// again, wrote rows from its migration on): the re-read then leaves
    /// the files of a lineage with a file it cannot read as they are.
    /// Default false.
    ///
    /// # Errors
    /// The store cannot be read.
    fn usage_rows_before_reread(&mut self) -> Result<bool, Error> {
        Ok(false)
    }

    /// Writes the usage rows of what the checkpoint covers, read again,
    /// and records that they are written, in one transaction: a run killed
    /// before it commits leaves the re-read to the next run, and a row is
    /// never written twice.
    ///
    /// # Errors
    /// Writing failed: the run stops.
    fn save_reread_usage(
        &mut self,
        reread: &crate::archive::counted::UsageReread,
    ) -> Result<(), Error> {
        let _ = reread;
        Ok(())
    }

    /// The run that created this store failed having written nothing:
    /// remove it, so a failed first run leaves nothing behind.
    fn abandon_new(&mut self) {}

    /// What errors about the checkpoint call its holder, and its path:
    /// `state` and the file for a state file, `store` and the database
    /// for a store. Default: `checkpoint`, no path.
    fn describe(&self) -> (&'static str, &Path) {
        ("checkpoint", Path::new(""))
    }
}

/// The checkpoint file of `--state`: the whole state rewritten atomically
/// at each checkpoint, with a lock beside it held while the store lives.
#[derive(Debug)]
pub struct StateFile {
    /// As named, for messages.
    path: PathBuf,
    /// The file it names ([`real_path`]): read, and written whole in place
    /// of, so that a link to it stays a link.
    real: PathBuf,
    _lock: Lock,
}

impl StateFile {
    /// Takes the state's lock (see [`lock_file`]); the state itself is read by
    /// [`CheckpointStore::load`].
    ///
    /// # Errors
    /// `Locked` when another run holds the lock.
    pub fn open(path: impl Into<PathBuf>) -> Result<StateFile, Error> {
        let path = path.into();
        let lock = lock(&path)?;
        let real = real_path(&path);
        Ok(StateFile {
            path,
            real,
            _lock: lock,
        })
    }

    /// The state file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl CheckpointStore for StateFile {
    fn load(&mut self) -> Result<Option<State>, Error> {
        load(&self.real).map_err(|e| e.naming(&self.path))
    }

    fn save(&mut self, checkpoint: &mut Checkpoint<'_>) -> Result<(), Error> {
        let lineages = checkpoint.encoded_lineages();
        let responses = checkpoint.encoded_responses();
        save_with(&self.real, checkpoint.state, &lineages, &responses)
            .map_err(|e| Error::io(&self.path, e))
    }

    fn abandon_new(&mut self) {
        let _ = fs::remove_file(&self.real);
    }

    fn describe(&self) -> (&'static str, &Path) {
        ("state", &self.path)
    }
}

/// One checkpoint: the whole state as of now, and what changed since the
/// last one.
pub struct Checkpoint<'a> {
    pub(crate) state: &'a State,
    /// The live lineages, once a run restored them (else the state's
    /// encoded ones are current).
    pub(crate) lineages: Option<&'a mut Lineages>,
    /// The live usage responses.
    pub(crate) responses: &'a crate::usage::Responses,
    /// Keys of the files whose entry changed (or went) since the last one.
    pub(crate) changed: &'a std::collections::BTreeSet<String>,
}

impl Checkpoint<'_> {
    /// The options that shape the output.
    pub fn options(&self) -> &OutputOptions {
        &self.state.options
    }

    /// Every kept usage response, in the layout's encoding as one value
    /// (for a store that rewrites the whole state; see
    /// [`State::set_encoded_responses`]).
    pub fn encoded_responses(&self) -> Vec<u8> {
        encode_responses(self.responses.kept())
    }

    /// The kept usage responses added or replaced since the last
    /// checkpoint, each with its index (from 0, in the order responses
    /// were first seen; a replaced one keeps its index) and in the layout's
    /// encoding: for a store that keeps one row per response, inserting
    /// or replacing the row of that index (see
    /// [`State::set_response_rows`]).
    pub fn changed_responses(&self) -> Vec<(u32, Vec<u8>)> {
        let kept = self.responses.kept();
        self.responses
            .changed()
            .into_iter()
            .map(|i| {
                let r = ResponseRef(&kept[i as usize]);
                (i, postcard::to_stdvec(&r).expect("a response encodes"))
            })
            .collect()
    }

    /// [`Checkpoint::changed_responses`] as usage rows, each with its
    /// index: for a sink that keeps its own checkpoint, inserting or
    /// replacing the usage row of that index in the same transaction (a
    /// response replaced by a larger copy replaces its row).
    ///
    /// Those outside the run's `--since`/`--until` (by the response's
    /// time) are left out, as the files' rows are.
    pub fn changed_response_usage(&self) -> Vec<(u32, crate::archive::counted::CountedUsage)> {
        let kept = self.responses.kept();
        let (since, until) = (self.state.options.since, self.state.options.until);
        self.responses
            .changed()
            .into_iter()
            .filter(|&i| match kept[i as usize].time {
                Some(t) => since.is_none_or(|s| t >= s) && until.is_none_or(|u| t < u),
                None => since.is_none() && until.is_none(),
            })
            .map(|i| {
                (
                    i,
                    crate::archive::counted::CountedUsage::of_response(&kept[i as usize]),
                )
            })
            .collect()
    }

    /// What the checkpoint covers of the output.
    pub fn mark(&self) -> Option<Mark> {
        self.state.output.as_ref().map(|o| {
            let mut m = o.mark();
            m.usage = self.state.usage_mark();
            m
        })
    }

    /// Every file of the state, by key.
    pub fn files(&self) -> impl Iterator<Item = (&str, &FileState)> + '_ {
        self.state.files.iter().map(|(k, f)| (k.as_str(), &**f))
    }

    /// Files whose entry changed since the last checkpoint: the new entry,
    /// or None for a file gone from the state.
    pub fn changed_files(&self) -> impl Iterator<Item = (&str, Option<&FileState>)> + '_ {
        self.changed
            .iter()
            .map(|k| (k.as_str(), self.state.files.get(k).map(|f| &**f)))
    }

    /// Fingerprints recorded since the last checkpoint, by the session
    /// that emitted them.
    pub fn new_fingerprints(&self) -> Vec<(&str, &[u64])> {
        self.lineages
            .as_ref()
            .map(|l| l.new_fingerprints())
            .unwrap_or_default()
    }

    /// Forks waiting for a parent read ahead that is not delivered yet:
    /// the forks' file keys by the parent's (a store that keeps them beside
    /// its rows hands them back through [`State::set_pending_forks`]; one
    /// that does not reads such a fork again only when it reads it anyway).
    pub fn pending_forks(&self) -> &BTreeMap<String, Vec<String>> {
        &self.state.pending_forks
    }

    /// With a shard: the root recorded for each lineage (see
    /// [`crate::archive::shard_of`]; a store that keeps them beside its
    /// rows hands them back through [`State::set_shard_roots`], else a
    /// fork of a fork can change shards when the fork between goes).
    pub fn shard_roots(&self) -> &BTreeMap<String, String> {
        &self.state.shard_roots
    }

    /// Sessions joined into one lineage since the last checkpoint.
    pub fn new_joins(&self) -> &[(String, String)] {
        self.lineages.as_ref().map_or(&[], |l| l.new_joins())
    }

    /// Every lineage with its fingerprints, encoded (for a store that
    /// rewrites the whole state).
    pub fn encoded_lineages(&mut self) -> Vec<u8> {
        match self.lineages.as_mut() {
            Some(l) => {
                let snapshot: Vec<LineageState> = l
                    .snapshot()
                    .into_iter()
                    .map(|(sessions, fps)| LineageState {
                        sessions,
                        fingerprints: encode_fingerprints(&fps),
                    })
                    .collect();
                postcard::to_stdvec(&snapshot).expect("lineages encode")
            }
            None => self.state.lineages.clone(),
        }
    }
}

/// Writes the state atomically: a temporary file beside it, fsync, rename,
/// fsync of the folder.
#[cfg(test)]
pub fn save(path: &Path, state: &State) -> io::Result<()> {
    save_with(path, state, &state.lineages, &state.responses)
}

/// Writes `state` in the layout of version 7 (no shard roots), as
/// mem-ingest before version 8 did: for tests of the upgrade.
#[cfg(test)]
pub fn save_v7(path: &Path, state: &State) -> io::Result<()> {
    save_in(path, state, &state.lineages, &state.responses, 7)
}

/// Writes `state` in the layout of version 11 (no redaction in the
/// options), as mem-ingest before version 12 did: for tests of the upgrade.
#[cfg(test)]
pub fn save_v11(path: &Path, state: &State) -> io::Result<()> {
    save_in(path, state, &state.lineages, &state.responses, 11)
}

/// Writes `state` in the layout of version 12 (no usage output), as
/// mem-ingest before version 13 did: for tests of the upgrade.
#[cfg(test)]
pub fn save_v12(path: &Path, state: &State) -> io::Result<()> {
    save_in(path, state, &state.lineages, &state.responses, 12)
}

/// Writes `state` in the layout of version 9 (no links in the options),
/// as mem-ingest before version 10 did: for tests of the upgrade.
#[cfg(test)]
pub fn save_v9(path: &Path, state: &State) -> io::Result<()> {
    save_in(path, state, &state.lineages, &state.responses, 9)
}

/// [`save`] with these encoded lineages and responses instead of the
/// state's.
fn save_with(path: &Path, state: &State, lineages: &[u8], responses: &[u8]) -> io::Result<()> {
    save_in(path, state, lineages, responses, STATE_VERSION)
}

/// [`save_with`] in layout `version`: [`STATE_VERSION`]; 11, which is
/// this layout without redaction in the options; 10, which is 11 with a
/// parent written as its text alone; 8 or 9, which are
/// this layout with the options of 7 (no links); or 7, which is 9 less its
/// last two fields.
fn save_in(
    path: &Path,
    state: &State,
    lineages: &[u8],
    responses: &[u8],
    version: u32,
) -> io::Result<()> {
    /// The layout of [`State`], borrowed.
    #[derive(Serialize)]
    struct StateRef<'a> {
        version: u32,
        shape: Shape<'a>,
        output: &'a Option<OutputState>,
        files: FilesOf<'a>,
        #[serde(with = "blob")]
        lineages: &'a [u8],
        #[serde(with = "blob")]
        responses: &'a [u8],
        // postcard writes no field names: a field left out at the end is
        // the layout before it.
        #[serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "ser_present"
        )]
        shard_roots: Option<&'a BTreeMap<String, String>>,
        #[serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "ser_present"
        )]
        pending_forks: Option<&'a BTreeMap<String, Vec<String>>>,
        #[serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "ser_present"
        )]
        usage_output: Option<&'a Option<OutputState>>,
    }
    /// The options in the layout of `version`.
    struct Shape<'a>(&'a OutputOptions, u32);
    impl Serialize for Shape<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match self.1 {
                12.. => OptionsV12::serialize(self.0, s),
                10..=11 => OptionsV10::serialize(self.0, s),
                _ => OptionsV7::serialize(self.0, s),
            }
        }
    }
    assert!(
        (7..=STATE_VERSION).contains(&version),
        "layout {version} is not written"
    );
    let body = postcard::to_stdvec(&StateRef {
        version,
        shape: Shape(&state.options, version),
        output: &state.output,
        files: FilesOf(&state.files, version),
        lineages,
        responses,
        shard_roots: (version >= 8).then_some(&state.shard_roots),
        pending_forks: (version >= 8).then_some(&state.pending_forks),
        usage_output: (version >= 13).then_some(&state.usage_output),
    })
    .map_err(io::Error::other)?;
    crate::atomic::write_durably(path, |f| {
        f.write_all(MAGIC)?;
        f.write_all(&version.to_le_bytes())?;
        f.write_all(&body)
    })
}

/// A field that is written when present, as its value (postcard would
/// write an `Option`'s tag first).
fn ser_present<S: serde::Serializer, T: Serialize>(
    v: &Option<&T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => v.serialize(s),
        None => s.serialize_unit(),
    }
}

/// The options as layout 6 wrote them (for the writer of that layout the
/// upgrade tests use).
#[cfg(test)]
fn ser_options_v6<S: serde::Serializer>(o: &&OutputOptions, s: S) -> Result<S::Ok, S::Error> {
    OptionsV6::serialize(o, s)
}

/// The options as layouts 1 to 4 wrote them (for the writers of those
/// layouts the upgrade tests use).
#[cfg(test)]
fn ser_options_v4<S: serde::Serializer>(o: &&OutputOptions, s: S) -> Result<S::Ok, S::Error> {
    OptionsV4::serialize(o, s)
}

fn ser_files_v3<S: serde::Serializer>(
    files: &&BTreeMap<String, Arc<FileState>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_map(files.iter().map(|(k, f)| (k, RefV3(f))))
}

/// The files in the layout of a version: 11's or, before it, 3's.
struct FilesOf<'a>(&'a BTreeMap<String, Arc<FileState>>, u32);

impl Serialize for FilesOf<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.1 {
            11.. => s.collect_map(self.0.iter().map(|(k, f)| (k, RefV11(f)))),
            _ => ser_files_v3(&self.0, s),
        }
    }
}

/// Sorted fingerprints as their little-endian bytes.
pub fn encode_fingerprints(fps: &[u64]) -> Vec<u8> {
    fps.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// Fingerprints from their bytes (whole: [`State::lineages`] refuses sets
/// that are not).
pub fn decode_fingerprints(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// Writes `state` in the layout of version 1 (lineages decoded in line),
/// as mem-ingest before version 2 did: for tests of the upgrade.
#[cfg(test)]
pub fn save_v1(path: &Path, state: &State) {
    #[derive(Serialize)]
    struct V1<'a> {
        version: u32,
        #[serde(serialize_with = "ser_options_v4")]
        shape: &'a OutputOptions,
        #[serde(serialize_with = "output_v5::serialize")]
        output: &'a Option<OutputState>,
        files: BTreeMap<&'a String, FileV2>,
        lineages: Vec<LineageState>,
    }
    let v1 = V1 {
        version: 1,
        shape: &state.options,
        output: &state.output,
        files: files_as_v2(state),
        lineages: state.lineages().expect("whole lineages"),
    };
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&postcard::to_stdvec(&v1).expect("encodes"));
    fs::write(path, bytes).expect("writes the state");
}

/// The files of `state` in the layout of version 2, each with the header
/// digest version 2 computed (a hash of the header serialised as JSON).
#[cfg(test)]
fn files_as_v2(state: &State) -> BTreeMap<&String, FileV2> {
    state
        .files
        .iter()
        .map(|(k, f)| (k, FileV2::of(f, header_digest_v2(&f.header))))
        .collect()
}

/// The header digest of versions 1 and 2: FNV-1a over the header
/// serialised by serde_json, as its derive wrote it then.
#[cfg(test)]
pub fn header_digest_v2(h: &Header) -> u64 {
    #[derive(Serialize)]
    struct HeaderJson<'a> {
        id: &'a str,
        cwd: &'a str,
        version: u64,
        timestamp: Option<i64>,
        parent_session: Option<&'a str>,
        fingerprint: u64,
    }
    let text = serde_json::to_string(&HeaderJson {
        id: &h.id,
        cwd: &h.cwd,
        version: h.version,
        timestamp: h.timestamp,
        parent_session: h.parent.as_ref().map(Parent::as_str),
        fingerprint: h.fingerprint,
    })
    .expect("a header serialises");
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Writes `state` in the layout of version 6 (no line hash), as mem-ingest
/// before version 7 did: for tests of the upgrade.
#[cfg(test)]
pub fn save_v6(path: &Path, state: &State) {
    #[derive(Serialize)]
    struct V6<'a> {
        version: u32,
        #[serde(serialize_with = "ser_options_v6")]
        shape: &'a OutputOptions,
        output: &'a Option<OutputState>,
        #[serde(serialize_with = "ser_files_v3")]
        files: &'a BTreeMap<String, Arc<FileState>>,
        #[serde(with = "blob")]
        lineages: &'a [u8],
        #[serde(with = "blob")]
        responses: &'a [u8],
    }
    let v6 = V6 {
        version: 6,
        shape: &state.options,
        output: &state.output,
        files: &state.files,
        lineages: &state.lineages,
        responses: &state.responses,
    };
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&6u32.to_le_bytes());
    bytes.extend_from_slice(&postcard::to_stdvec(&v6).expect("encodes"));
    fs::write(path, bytes).expect("writes the state");
}

/// Writes `state` in the layout of version 3 (no responses), as mem-ingest
/// before version 4 did: for tests of the upgrade.
#[cfg(test)]
pub fn save_v3(path: &Path, state: &State) {
    #[derive(Serialize)]
    struct V3<'a> {
        version: u32,
        #[serde(serialize_with = "ser_options_v4")]
        shape: &'a OutputOptions,
        #[serde(serialize_with = "output_v5::serialize")]
        output: &'a Option<OutputState>,
        #[serde(serialize_with = "ser_files_v3")]
        files: &'a BTreeMap<String, Arc<FileState>>,
        #[serde(with = "blob")]
        lineages: &'a [u8],
    }
    let v3 = V3 {
        version: 3,
        shape: &state.options,
        output: &state.output,
        files: &state.files,
        lineages: &state.lineages,
    };
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&postcard::to_stdvec(&v3).expect("encodes"));
    fs::write(path, bytes).expect("writes the state");
}

/// Writes `state` in the layout of version 2, as mem-ingest before version
/// 3 did: for tests of the upgrade.
#[cfg(test)]
pub fn save_v2(path: &Path, state: &State) {
    #[derive(Serialize)]
    struct V2<'a> {
        version: u32,
        #[serde(serialize_with = "ser_options_v4")]
        shape: &'a OutputOptions,
        #[serde(serialize_with = "output_v5::serialize")]
        output: &'a Option<OutputState>,
        files: BTreeMap<&'a String, FileV2>,
        #[serde(with = "blob")]
        lineages: Vec<u8>,
    }
    let v2 = V2 {
        version: 2,
        shape: &state.options,
        output: &state.output,
        files: files_as_v2(state),
        lineages: state.lineages.clone(),
    };
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&2u32.to_le_bytes());
    bytes.extend_from_slice(&postcard::to_stdvec(&v2).expect("encodes"));
    fs::write(path, bytes).expect("writes the state");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::discover::Links;
    use crate::report::Report;

    #[test]
    fn fingerprints_round_trip() {
        for n in [0usize, 1, 2, 3, 7, 100] {
            let fps: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .collect();
            assert_eq!(decode_fingerprints(&encode_fingerprints(&fps)), fps);
        }
    }

    /// Fingerprints as a blob are the bytes states written before (as a
    /// sequence of bytes) hold, both ways.
    #[test]
    fn fingerprint_blob_reads_and_writes_like_a_byte_sequence() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct AsSequence {
            sessions: Vec<String>,
            fingerprints: Vec<u8>,
        }
        let fingerprints = encode_fingerprints(&[1, u64::MAX, 0x0102_0304_0506_0708]);
        let seq = AsSequence {
            sessions: vec!["a".into(), "b".into()],
            fingerprints: fingerprints.clone(),
        };
        let blob = LineageState {
            sessions: seq.sessions.clone(),
            fingerprints,
        };
        let bytes = postcard::to_stdvec(&seq).unwrap();
        assert_eq!(postcard::to_stdvec(&blob).unwrap(), bytes);
        let back: LineageState = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back.fingerprints, seq.fingerprints);
        assert_eq!(back.sessions, seq.sessions);
    }

    fn file_state() -> FileState {
        FileState {
            format: "pi".into(),
            context: Vec::new(),
            identity: Identity {
                dev: 1,
                ino: 2,
                size: 3,
                mtime_ns: 4,
            },
            header: Header {
                id: "s".into(),
                cwd: "/p".into(),
                version: 3,
                timestamp: Some(5),
                parent: None,
                fingerprint: 6,
            },
            header_digest: 7,
            offset: 3,
            line: 1,
            open_line: false,
            pending: 0,
            report: Report::default(),
        }
    }

    /// A layout 8 state keyed its files by their paths made UTF-8 lossily:
    /// loaded, a key with a backslash is respelled (doubled), a key that
    /// lost bytes (U+FFFD) goes to the file of its folder with the recorded
    /// device and inode, and one no file matches is dropped; the forks
    /// waiting for a parent follow their files.
    #[test]
    fn layout_8_keys_are_respelled_on_load() {
        let d = std::env::temp_dir().join(format!("mem-ingest-respell-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let ff = d.join(crate::sys::os_str(b"bad\xff.jsonl"));
        let fe = d.join(crate::sys::os_str(b"bad\xfe.jsonl"));
        let slash = d.join("back\\slash.jsonl");
        for p in [&ff, &fe, &slash] {
            fs::write(p, b"{}\n").unwrap();
        }
        let with_identity = |p: &Path| {
            let mut f = file_state();
            f.identity = Identity::of(&fs::metadata(p).unwrap());
            Arc::new(f)
        };
        let lossy = |p: &Path| p.to_string_lossy().into_owned();
        let mut st = State::new(OutputOptions {
            command: "backfill".into(),
            roles: vec![],
            since: None,
            until: None,
            max_text: None,
            no_dedupe: false,
            record_format: RECORD_FORMAT,
            sources: vec!["pi".into()],
            shard: None,
            line_hash: 2,
            links: Links::Skip,
            redact: Some(true),
        });
        // Both non-UTF-8 files had one key: the state held the last saved,
        // fe's.
        st.files.insert(lossy(&fe), with_identity(&fe));
        st.files.insert(lossy(&slash), with_identity(&slash));
        // A file gone since.
        let gone = d.join("gone\u{fffd}.jsonl");
        st.files.insert(lossy(&gone), Arc::new(file_state()));
        st.pending_forks
            .insert(lossy(&d.join("parent\\p.jsonl")), vec![lossy(&slash)]);
        let path = d.join("st");
        save_in(&path, &st, &[], &[], 8).unwrap();
        assert_eq!(fs::read(&path).unwrap()[8..12], 8u32.to_le_bytes());
        let back = load(&path).unwrap().unwrap();
        assert_eq!(back.version, 8, "saved anew in this layout by the run");
        // Layout 8 recorded no links: every walk followed them then.
        assert_eq!(back.options.links, Links::Follow);
        let dir = crate::path_text::spell(&d).into_owned();
        let keys: Vec<&String> = back.files.keys().collect();
        assert_eq!(
            keys,
            [
                &format!("{dir}/back\\\\slash.jsonl"),
                &format!("{dir}/bad\\xfe.jsonl"),
            ]
        );
        assert_eq!(
            back.pending_forks,
            BTreeMap::from([(
                format!("{dir}/parent\\\\p.jsonl"),
                vec![format!("{dir}/back\\\\slash.jsonl")]
            )])
        );
        // Saved in this layout and read again: the keys stay.
        save(&path, &back).unwrap();
        let again = load(&path).unwrap().unwrap();
        assert_eq!(again.version, STATE_VERSION);
        assert_eq!(
            again.files.keys().collect::<Vec<_>>(),
            back.files.keys().collect::<Vec<_>>()
        );
        fs::remove_dir_all(d).unwrap();
    }

    /// A state written by version 1 (lineages decoded in line) loads, with
    /// the same files and lineages.
    #[test]
    fn version_1_states_are_read() {
        let shape = OutputOptions {
            command: "stats".into(),
            roles: vec![],
            since: None,
            until: None,
            max_text: None,
            no_dedupe: false,
            record_format: RECORD_FORMAT,
            // not recorded before layout 5
            sources: vec![],
            shard: None,
            // read back as the serial hash before layout 7
            line_hash: 1,
            // read back as followed before layout 10
            links: Links::Follow,
            redact: None,
        };
        let mut v2 = State::new(shape.clone());
        v2.output = Some(OutputState::of(Mark::file("o", 9)));
        v2.files = BTreeMap::from([("a.jsonl".to_owned(), Arc::new(file_state()))]);
        v2.set_lineages(&[LineageState {
            sessions: vec!["s".into()],
            fingerprints: encode_fingerprints(&[3, 4]),
        }]);
        let dir = std::env::temp_dir().join(format!("mem-ingest-v1-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.state");
        save_v1(&p, &v2);
        assert_eq!(fs::read(&p).unwrap()[8..12], 1u32.to_le_bytes());
        let st = load(&p).unwrap().unwrap();
        assert_eq!(st.version, 1);
        assert_eq!(st.options, shape);
        assert_eq!(st.output, v2.output);
        assert_eq!(st.files.len(), 1);
        assert_eq!(st.files["a.jsonl"].header.id, "s");
        assert_eq!(st.files["a.jsonl"].identity, v2.files["a.jsonl"].identity);
        let l = st.lineages().unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].sessions, ["s"]);
        assert_eq!(decode_fingerprints(&l[0].fingerprints), [3, 4]);
        fs::remove_dir_all(dir).unwrap();
    }

    /// A state written by version 2 loads with the same files, headers,
    /// reports and lineages; its header digests are computed anew from the
    /// headers, as version 3 computes them.
    #[test]
    fn version_2_states_are_read() {
        let mut v2 = State::new(OutputOptions {
            command: "backfill".into(),
            roles: vec!["user".into()],
            since: Some(3),
            until: None,
            max_text: Some(5),
            no_dedupe: false,
            record_format: RECORD_FORMAT,
            // not recorded before layout 5
            sources: vec![],
            shard: None,
            // read back as the serial hash before layout 7
            line_hash: 1,
            // read back as followed before layout 10
            links: Links::Follow,
            redact: None,
        });
        v2.output = Some(OutputState::of(Mark::file("o", 9)));
        let mut f = file_state();
        f.report.records = 4;
        f.report.entries.add("message", 4);
        f.report.entries.add("future_type", 2);
        f.report.skip(3, 40, crate::SkipReason::TooLong { len: 7 });
        f.report
            .add_usage(Some("p"), Some("m"), &crate::Usage::default(), true);
        v2.files = BTreeMap::from([("a.jsonl".to_owned(), Arc::new(f.clone()))]);
        v2.set_lineages(&[LineageState {
            sessions: vec!["s".into()],
            fingerprints: encode_fingerprints(&[3, 4]),
        }]);
        let dir = std::env::temp_dir().join(format!("mem-ingest-v2-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.state");
        save_v2(&p, &v2);
        assert_eq!(fs::read(&p).unwrap()[8..12], 2u32.to_le_bytes());
        let st = load(&p).unwrap().unwrap();
        assert_eq!(st.version, 2);
        assert_eq!(st.options, v2.options);
        assert_eq!(st.output, v2.output);
        let back = &st.files["a.jsonl"];
        assert_eq!(back.header, f.header);
        assert_eq!(back.report, f.report);
        assert_eq!((back.offset, back.line, back.format.as_str()), (3, 1, "pi"));
        assert_eq!(
            back.header_digest,
            super::super::stamp::header_digest(&f.header)
        );
        assert_ne!(back.header_digest, header_digest_v2(&f.header));
        let l = st.lineages().unwrap();
        assert_eq!(decode_fingerprints(&l[0].fingerprints), [3, 4]);
        // Saved anew, it is version 3 and reads back the same.
        save(&p, &st).unwrap();
        assert_eq!(fs::read(&p).unwrap()[8..12], STATE_VERSION.to_le_bytes());
        let v3 = load(&p).unwrap().unwrap();
        assert_eq!(v3.files["a.jsonl"].report, f.report);
        assert_eq!(v3.files["a.jsonl"].header_digest, back.header_digest);
        fs::remove_dir_all(dir).unwrap();
    }

    /// Layout 10 wrote a parent as its text: it reads back as a session id
    /// in a Codex file and as a path in any other; layout 11 keeps the
    /// kind, in the state file and in a store's file rows alike, with the
    /// header digest unchanged (a resumed file is not read again).
    #[test]
    fn parents_keep_their_kind_from_layout_10_to_11() {
        let dir = std::env::temp_dir().join(format!("mem-ingest-parent-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.state");
        let mut st = State::new(OutputOptions {
            command: "backfill".into(),
            roles: Vec::new(),
            since: None,
            until: None,
            max_text: None,
            no_dedupe: false,
            record_format: RECORD_FORMAT,
            sources: vec!["pi".into(), "codex".into()],
            shard: None,
            line_hash: 2,
            links: Links::Skip,
            redact: Some(true),
        });
        let with = |format: &str, parent: Parent| {
            let mut f = file_state();
            f.format = format.into();
            f.header.parent = Some(parent);
            f.header_digest = super::super::stamp::header_digest(&f.header);
            Arc::new(f)
        };
        let codex = with("codex", Parent::Session("019a-parent".into()));
        let pi = with("pi", Parent::Path("/home/u/.pi/s/1_p.jsonl".into()));
        let odd = with("notes", Parent::Session("n-1".into()));
        st.files.insert("c".into(), codex.clone());
        st.files.insert("p".into(), pi.clone());
        st.files.insert("n".into(), odd.clone());

        save_in(&p, &st, &[], &[], 10).unwrap();
        let v10 = load(&p).unwrap().unwrap();
        assert_eq!(v10.version, 10);
        assert_eq!(v10.files["c"].header, codex.header);
        assert_eq!(v10.files["p"].header, pi.header);
        // An outside format's id was text in layout 10: it reads as a path.
        assert_eq!(
            v10.files["n"].header.parent,
            Some(Parent::Path("n-1".into()))
        );
        for f in v10.files.values() {
            assert_eq!(
                super::super::stamp::header_digest(&f.header),
                f.header_digest
            );
        }

        save(&p, &st).unwrap();
        let v11 = load(&p).unwrap().unwrap();
        assert_eq!(v11.version, STATE_VERSION);
        for k in ["c", "p", "n"] {
            assert_eq!(v11.files[k].header, st.files[k].header);
            assert_eq!(v11.files[k].header_digest, st.files[k].header_digest);
        }

        // A store's rows: layout 10's bytes read as 10, this layout's as 11.
        let old = postcard::to_stdvec(&RefV3(&odd)).unwrap();
        assert_eq!(
            FileState::from_bytes_of(&old, 10).unwrap().header.parent,
            Some(Parent::Path("n-1".into()))
        );
        let old = postcard::to_stdvec(&RefV3(&codex)).unwrap();
        assert_eq!(
            FileState::from_bytes_of(&old, 10).unwrap().header,
            codex.header
        );
        assert_eq!(
            FileState::from_bytes(&odd.to_bytes()).unwrap().header,
            odd.header
        );
        assert!(FileState::from_bytes(&old).is_err());
        assert_eq!(
            FileState::from_bytes_of(&old, 2).unwrap_err(),
            "no file state layout 2"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    /// A lock held for an instant (as by a process being started, between
    /// its fork and its exec) is waited out; one held on is refused, within
    /// the retry's time.
    #[test]
    fn a_lock_held_for_an_instant_is_waited_out_and_a_held_one_refused() {
        let dir = std::env::temp_dir().join(format!("mem-ingest-lock-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.state");
        let held = lock_file(&p, "state").unwrap();
        let t = std::time::Instant::now();
        let Err(e) = lock_file(&p, "state") else {
            panic!("a held lock taken again");
        };
        assert!(
            matches!(e.kind(), ErrorKind::Locked { what: "state", .. }),
            "{e}"
        );
        assert!(t.elapsed() >= LOCK_RETRY, "{:?}", t.elapsed());
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            drop(held);
        });
        let again = lock_file(&p, "state");
        release.join().unwrap();
        assert!(again.is_ok());
        drop(again);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn state_round_trips_and_refuses_what_is_not_one() {
        let dir = std::env::temp_dir().join(format!("mem-ingest-st-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.state");
        let mut st = State::new(OutputOptions {
            command: "backfill".into(),
            roles: vec!["user".into()],
            since: Some(-5),
            until: None,
            max_text: Some(9),
            no_dedupe: false,
            record_format: RECORD_FORMAT,
            sources: vec!["pi".into(), "claude".into()],
            shard: Some(crate::archive::Shard { k: 1, n: 3 }),
            line_hash: 2,
            links: Links::Skip,
            redact: Some(true),
        });
        st.output = Some(OutputState {
            path: "o".into(),
            len: 42,
            id: 0x1234,
            parts: vec![
                "format=pi/date=2026-01-01/part-1of3-0000000000001234-000000.parquet".into(),
            ],
        });
        let lineage = LineageState {
            sessions: vec!["a".into(), "b".into()],
            fingerprints: encode_fingerprints(&[1, 2]),
        };
        st.set_lineages(std::slice::from_ref(&lineage));
        // Files whose keys sort in byte order, not path order.
        for (i, k) in ["/a/b.jsonl", "/a-c.jsonl", "/a.x/d.jsonl", "/b.jsonl"]
            .into_iter()
            .enumerate()
        {
            let mut f = file_state();
            f.offset = i as u64;
            st.files.insert(k.to_owned(), Arc::new(f));
        }
        st.pending_forks.insert(
            "/b.jsonl".into(),
            vec!["/a/b.jsonl".into(), "/a-c.jsonl".into()],
        );
        st.shard_roots = [("fork2", "root"), ("fork1", "root"), ("root", "root")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        save(&p, &st).unwrap();
        let back = load(&p).unwrap().unwrap();
        assert_eq!(back.version, STATE_VERSION);
        assert_eq!(back.shard_roots, st.shard_roots);
        assert_eq!(back.pending_forks, st.pending_forks);
        assert_eq!(back.options, st.options);
        assert_eq!(back.output, st.output);
        assert_eq!(
            back.files.keys().collect::<Vec<_>>(),
            st.files.keys().collect::<Vec<_>>()
        );
        for (k, f) in &back.files {
            assert_eq!(f.offset, st.files[k].offset, "{k}");
        }
        let l = back.lineages().unwrap();
        assert_eq!(l[0].sessions, ["a", "b"]);
        assert_eq!(decode_fingerprints(&l[0].fingerprints), [1, 2]);
        // Links followed round-trip too.
        let mut follows = st.clone();
        follows.options.links = Links::Follow;
        save(&p, &follows).unwrap();
        assert_eq!(load(&p).unwrap().unwrap().options, follows.options);
        // Layouts 7 to 9 recorded no links: they read back as followed
        // (every walk followed them then), the rest as saved.
        let mut followed = st.options.clone();
        followed.links = Links::Follow;
        followed.redact = None;
        save_v9(&p, &st).unwrap();
        assert_eq!(fs::read(&p).unwrap()[8..12], 9u32.to_le_bytes());
        let v9 = load(&p).unwrap().unwrap();
        assert_eq!(v9.version, 9);
        assert_eq!(
            (&v9.options, &v9.output, &v9.shard_roots, &v9.pending_forks),
            (&followed, &st.output, &st.shard_roots, &st.pending_forks)
        );
        assert_eq!(
            v9.files.keys().collect::<Vec<_>>(),
            st.files.keys().collect::<Vec<_>>()
        );
        assert_eq!(v9.responses, st.responses);
        assert_eq!(
            decode_fingerprints(&v9.lineages().unwrap()[0].fingerprints),
            [1, 2]
        );
        // Saved anew, it is this layout, links followed.
        save(&p, &v9).unwrap();
        assert_eq!(fs::read(&p).unwrap()[8..12], STATE_VERSION.to_le_bytes());
        assert_eq!(load(&p).unwrap().unwrap().options, followed);
        // Layout 11 recorded no redaction: it reads back as None (saved
        // before it existed), the rest as saved; saved anew, layout 12
        // keeps each choice.
        assert_eq!(st.options.redact, Some(true));
        save_v11(&p, &st).unwrap();
        assert_eq!(fs::read(&p).unwrap()[8..12], 11u32.to_le_bytes());
        let v11 = load(&p).unwrap().unwrap();
        assert_eq!(v11.version, 11);
        let mut before = st.options.clone();
        before.redact = None;
        assert_eq!(v11.options, before);
        assert_eq!(
            (
                &v11.output,
                &v11.shard_roots,
                &v11.pending_forks,
                &v11.responses
            ),
            (
                &st.output,
                &st.shard_roots,
                &st.pending_forks,
                &st.responses
            )
        );
        for choice in [None, Some(false), Some(true)] {
            let mut again = st.clone();
            again.options.redact = choice;
            save(&p, &again).unwrap();
            assert_eq!(fs::read(&p).unwrap()[8..12], 13u32.to_le_bytes());
            assert_eq!(load(&p).unwrap().unwrap().options.redact, choice);
        }
        // Layout 12 recorded no usage rows' file: it reads back with none,
        // the rest as saved; layout 13 keeps it.
        let mut with_usage = st.clone();
        with_usage.usage_output = Some(OutputState::of(Mark::file("u.ndjson", 77)));
        save(&p, &with_usage).unwrap();
        assert_eq!(fs::read(&p).unwrap()[8..12], 13u32.to_le_bytes());
        let v13 = load(&p).unwrap().unwrap();
        assert_eq!(v13.usage_output, with_usage.usage_output);
        assert_eq!(v13.usage_mark(), Some(("u.ndjson".to_owned(), 77)));
        assert_eq!((&v13.options, &v13.output), (&st.options, &st.output));
        save_v12(&p, &with_usage).unwrap();
        assert_eq!(fs::read(&p).unwrap()[8..12], 12u32.to_le_bytes());
        let v12 = load(&p).unwrap().unwrap();
        assert_eq!(v12.version, 12);
        assert_eq!(v12.usage_output, None);
        assert_eq!(
            (
                &v12.options,
                &v12.output,
                &v12.shard_roots,
                &v12.pending_forks,
                &v12.responses
            ),
            (
                &st.options,
                &st.output,
                &st.shard_roots,
                &st.pending_forks,
                &st.responses
            )
        );
        assert_eq!(v12.files.len(), st.files.len());
        // Layout 7 recorded no shard roots: it reads back with none.
        save_v7(&p, &st).unwrap();
        assert_eq!(fs::read(&p).unwrap()[8..12], 7u32.to_le_bytes());
        let v7 = load(&p).unwrap().unwrap();
        assert_eq!(v7.version, 7);
        assert!(v7.shard_roots.is_empty() && v7.pending_forks.is_empty());
        assert_eq!(
            (&v7.options, &v7.output, v7.files.len()),
            (&followed, &st.output, 4)
        );
        assert_eq!(v7.responses, st.responses);
        assert_eq!(
            decode_fingerprints(&v7.lineages().unwrap()[0].fingerprints),
            [1, 2]
        );
        // Layout 6 recorded no line hash: it reads back as the serial one,
        // the rest as saved.
        save_v6(&p, &st);
        assert_eq!(fs::read(&p).unwrap()[8..12], 6u32.to_le_bytes());
        let v6 = load(&p).unwrap().unwrap();
        assert_eq!(v6.version, 6);
        assert_eq!(v6.options.line_hash, crate::LineHash::Serial.id());
        let mut want = followed.clone();
        want.line_hash = crate::LineHash::Serial.id();
        assert_eq!(v6.options, want);
        assert_eq!(v6.output, st.output);
        assert_eq!(v6.files.len(), 4);
        assert_eq!(
            decode_fingerprints(&v6.lineages().unwrap()[0].fingerprints),
            [1, 2]
        );
        assert_eq!(load(&dir.join("none")).unwrap().map(|s| s.version), None);
        fs::write(&p, b"{\"json\": true}").unwrap();
        assert!(load(&p)
            .unwrap_err()
            .to_string()
            .ends_with("not a mem-ingest state file"));
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&99u32.to_le_bytes());
        fs::write(&p, &bytes).unwrap();
        assert!(load(&p)
            .unwrap_err()
            .to_string()
            .contains("state version 99"));
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&STATE_VERSION.to_le_bytes());
        bytes.extend_from_slice(&[0xff; 3]);
        fs::write(&p, &bytes).unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("damaged state"));
        // A fingerprint set of 7 bytes: refused when the sets are decoded,
        // before a run relies on them.
        let mut torn = lineage.clone();
        torn.fingerprints.pop();
        st.set_lineages(&[torn]);
        save(&p, &st).unwrap();
        assert_eq!(
            load(&p).unwrap().unwrap().lineages().unwrap_err(),
            "damaged deduplication sets (a fingerprint set is not whole)"
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
