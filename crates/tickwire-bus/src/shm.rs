//! The bus file: made by the writer under a lock and a temporary name, mapped read-only by readers.
//!
//! The writer takes an exclusive `flock` on `<path>.lock` (a second appliance on the same path
//! fails at start, naming the first one's pid), makes the file as `<path>.tmp-<pid>` with mode
//! 0640 and the configured group, sizes it, maps and fills every page (so the appliance's memory
//! is reached at start, not when the ring first wraps), writes the header and renames it onto
//! `path`. A reader that opens `path` therefore only ever sees a complete header. A restarted
//! appliance renames a new file over the old one: readers still mapping the old one see its
//! cursor stop and find a new file (another epoch) at the path.

use crate::layout::{self, Geometry, HEADER_BYTES, LAYOUT_VERSION, MAGIC};
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

/// Why a bus could not be made or opened. Each names the path.
#[derive(Debug)]
pub enum BusError {
    /// No file at the path: no appliance has made a bus there.
    NotFound { path: PathBuf },
    /// The file exists but this user may not read (or, for the writer, write) it.
    PermissionDenied { path: PathBuf, detail: String },
    /// The file is not a tickwire bus.
    NotABus { path: PathBuf },
    /// A bus of another layout version.
    LayoutVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// The header's sizes do not fit the file.
    Malformed { path: PathBuf, what: String },
    /// Another appliance writes this bus.
    Locked { path: PathBuf, holder: String },
    /// A configured group that does not exist.
    UnknownGroup { group: String },
    /// The sizes asked for are out of range.
    Geometry(String),
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
}

impl std::fmt::Display for BusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BusError::NotFound { path } => write!(
                f,
                "no bus at {}: no appliance has made one there (is it running, with [bus] in its \
                 tickwire.toml naming this path?)",
                path.display()
            ),
            BusError::PermissionDenied { path, detail } => write!(
                f,
                "bus {}: permission denied ({detail}); readers need to be in the group that \
                 [bus] group names",
                path.display()
            ),
            BusError::NotABus { path } => {
                write!(
                    f,
                    "{} is not a tickwire bus (no TICKWBUS magic)",
                    path.display()
                )
            }
            BusError::LayoutVersion {
                path,
                found,
                supported,
            } => write!(
                f,
                "bus {} has layout version {found}; this reader reads version {supported} \
                 (update the reader or the appliance so that they match)",
                path.display()
            ),
            BusError::Malformed { path, what } => {
                write!(f, "bus {} is damaged: {what}", path.display())
            }
            BusError::Locked { path, holder } => write!(
                f,
                "bus {} is written by another appliance ({holder}); give each appliance its \
                 own [bus] path",
                path.display()
            ),
            BusError::UnknownGroup { group } => {
                write!(f, "[bus] group {group:?}: no such group on this host")
            }
            BusError::Geometry(what) => write!(f, "[bus] {what}"),
            BusError::Io { path, what, source } => {
                write!(f, "bus {}: {what}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for BusError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BusError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_error<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(io::Error) -> BusError + 'a {
    move |source| BusError::Io {
        path: path.to_owned(),
        what,
        source,
    }
}

/// A shared mapping of a whole bus file, protected from SIGBUS while it lives (`sigbus.rs`),
/// unmapped on drop.
pub(crate) struct Mapping {
    base: *mut u8,
    len: usize,
    guard: crate::sigbus::Guard,
}

// SAFETY: the mapping is plain shared memory, accessed through atomics for everything that
// changes after the file is published; the pointer is not thread-bound.
unsafe impl Send for Mapping {}
// SAFETY: as above: `&Mapping` hands out atomics and the immutable header only.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn map(file: &File, len: usize, writable: bool) -> io::Result<Mapping> {
        let (prot, flags) = if writable {
            (
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
            )
        } else {
            (libc::PROT_READ, libc::MAP_SHARED)
        };
        // SAFETY: a fresh mapping chosen by the kernel (no address hint), of a file we hold
        // open; the result is checked before use.
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, file.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base: *mut u8 = base.cast();
        Ok(Mapping {
            base,
            len,
            guard: crate::sigbus::register(base, len),
        })
    }

    /// Whether a page of the mapping was found cut off by a truncation of the file.
    #[inline]
    pub(crate) fn truncated(&self) -> bool {
        self.guard.truncated()
    }

    /// The header word at byte `offset`.
    pub(crate) fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= HEADER_BYTES as usize);
        // SAFETY: inside the header page (checked), 8-byte aligned (the mapping is page
        // aligned), valid for the life of `&self`; shared words are only accessed atomically.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// The ring's and the directory's words in this mapping, where `geometry` places them.
    ///
    /// # Safety
    ///
    /// - The mapping holds the whole file `geometry` describes (the writer sized it so;
    ///   `shm::open` checked it against the file's size).
    /// - The results are used only while `self` lives, and their words only atomically.
    pub(crate) unsafe fn regions(
        &self,
        geometry: Geometry,
    ) -> (crate::ring::RingWords, crate::directory::DirectoryWords) {
        use crate::layout::offsets;
        let base = self.base;
        let word = |offset: usize| base.wrapping_add(offset) as *const AtomicU64;
        // SAFETY: the header words and both regions are inside the mapping (the caller's first
        // precondition), page- or word-aligned (the mapping is page-aligned, the offsets are
        // multiples of 8 and the regions start on pages), and valid while `self` lives (the
        // second); `capacity` is a power of two (`Geometry::new` checked it).
        unsafe {
            (
                crate::ring::RingWords::new(
                    word(offsets::CLAIM),
                    word(offsets::CURSOR),
                    word(geometry.ring_offset() as usize),
                    geometry.capacity,
                ),
                crate::directory::DirectoryWords::new(
                    word(offsets::DIRECTORY_COUNT),
                    word(geometry.directory_offset() as usize),
                    geometry.directory_capacity,
                ),
            )
        }
    }

    /// Reads the header's identity fields (written before the file became visible, never after).
    pub(crate) fn read_u64(&self, offset: usize) -> u64 {
        self.word(offset).load(std::sync::atomic::Ordering::Relaxed)
    }

    fn read_u32(&self, offset: usize) -> u32 {
        let word = self.read_u64(offset & !7);
        (word >> ((offset & 7) * 8)) as u32
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // No longer ours to repair once it is unmapped.
        self.guard.release();
        // SAFETY: the mapping made in `Mapping::map`, unmapped once.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// What the writer holds: the mapping, the lock, and where it all is.
pub(crate) struct Created {
    pub mapping: Mapping,
    pub lock: File,
    pub epoch: u64,
}

/// Resolves a group name to its id.
pub fn group_id(name: &str) -> Result<u32, BusError> {
    let unknown = || BusError::UnknownGroup {
        group: name.to_owned(),
    };
    let c_name = CString::new(name).map_err(|_| unknown())?;
    let mut group: libc::group = {
        // SAFETY: `libc::group` is a plain C struct of pointers and integers; all-zero is a
        // valid (empty) value that `getgrnam_r` overwrites.
        unsafe { std::mem::zeroed() }
    };
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer names live memory of the stated size; `getgrnam_r` is reentrant.
    let status = unsafe {
        libc::getgrnam_r(
            c_name.as_ptr(),
            &mut group,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut result,
        )
    };
    if status != 0 || result.is_null() {
        return Err(unknown());
    }
    Ok(group.gr_gid)
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// The lock file beside a bus.
pub fn lock_path(path: &Path) -> PathBuf {
    sibling(path, ".lock")
}

/// The request socket beside a bus.
pub fn request_socket_path(path: &Path) -> PathBuf {
    sibling(path, layout::REQUEST_SOCKET_SUFFIX)
}

/// Makes a bus file at `path` (replacing any earlier one) and maps it for writing.
pub(crate) fn create(
    path: &Path,
    geometry: Geometry,
    group: Option<u32>,
    epoch: u64,
    created_ns: u64,
) -> Result<Created, BusError> {
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        if !parent.is_dir() {
            return Err(BusError::Io {
                path: path.to_owned(),
                what: "its directory does not exist",
                source: io::Error::from(io::ErrorKind::NotFound),
            });
        }
    }
    let lock_path = lock_path(path);
    let mut lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o640)
        .open(&lock_path)
        .map_err(io_error(&lock_path, "opening the lock file"))?;
    // SAFETY: flock on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let holder = std::fs::read_to_string(&lock_path)
            .ok()
            .map(|text| format!("pid {}", text.trim()))
            .unwrap_or_else(|| "unknown pid".into());
        return Err(BusError::Locked {
            path: path.to_owned(),
            holder,
        });
    }
    {
        use std::io::Write;
        lock.set_len(0)
            .map_err(io_error(&lock_path, "writing the lock file"))?;
        writeln!(lock, "{}", std::process::id())
            .map_err(io_error(&lock_path, "writing the lock file"))?;
    }
    let temporary = sibling(path, &format!(".tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o640)
        .open(&temporary)
        .map_err(io_error(path, "creating the bus file"))?;
    let made = (|| {
        // The umask may have taken bits from the mode: set it outright.
        file.set_permissions(std::fs::Permissions::from_mode(0o640))
            .map_err(io_error(path, "setting mode 0640"))?;
        if let Some(gid) = group {
            // SAFETY: fchown on a descriptor we own; -1 leaves the owner as it is.
            if unsafe { libc::fchown(file.as_raw_fd(), u32::MAX, gid) } != 0 {
                return Err(BusError::Io {
                    path: path.to_owned(),
                    what: "giving the file its group (the appliance must be a member)",
                    source: io::Error::last_os_error(),
                });
            }
        }
        let bytes = geometry.file_bytes();
        file.set_len(bytes)
            .map_err(io_error(path, "sizing the bus file"))?;
        let mapping = Mapping::map(&file, bytes as usize, true)
            .map_err(io_error(path, "mapping the bus file"))?;
        write_header(&mapping, geometry, epoch, created_ns);
        std::fs::rename(&temporary, path).map_err(io_error(path, "renaming into place"))?;
        Ok(mapping)
    })();
    match made {
        Ok(mapping) => Ok(Created {
            mapping,
            lock,
            epoch,
        }),
        Err(error) => {
            let _ = std::fs::remove_file(&temporary);
            Err(error)
        }
    }
}

fn write_header(mapping: &Mapping, geometry: Geometry, epoch: u64, created_ns: u64) {
    use layout::offsets;
    use std::sync::atomic::Ordering::Relaxed;
    let version_and_size = u64::from(LAYOUT_VERSION) | (u64::from(layout::EVENT_SIZE) << 32);
    let fields = [
        (offsets::MAGIC, u64::from_le_bytes(MAGIC)),
        (offsets::LAYOUT_VERSION, version_and_size),
        (offsets::CAPACITY, geometry.capacity),
        (offsets::EPOCH, epoch),
        (offsets::RING_OFFSET, geometry.ring_offset()),
        (offsets::DIRECTORY_OFFSET, geometry.directory_offset()),
        (offsets::DIRECTORY_CAPACITY, geometry.directory_capacity),
        (offsets::DIRECTORY_ENTRY_SIZE, layout::DIRECTORY_ENTRY_BYTES),
        (offsets::CREATED_NS, created_ns),
        (offsets::WRITER_PID, u64::from(std::process::id())),
        (offsets::STATE, layout::STATE_LIVE),
    ];
    for (offset, value) in fields {
        mapping.word(offset).store(value, Relaxed);
    }
}

/// What a reader holds: the mapping and what identifies the file it maps.
pub(crate) struct Opened {
    pub mapping: Mapping,
    pub geometry: Geometry,
    pub epoch: u64,
    /// Device and inode: a different pair at the path means a new bus.
    pub identity: (u64, u64),
}

/// The identity (device, inode) of the file at `path` now, `None` when there is none: a bus
/// at a path whose identity changed is another bus.
pub fn identity_at(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path)
        .ok()
        .map(|metadata| (metadata.dev(), metadata.ino()))
}

/// Opens and maps the bus at `path` read-only, checking its header against the file.
pub(crate) fn open(path: &Path) -> Result<Opened, BusError> {
    let file = File::open(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => BusError::NotFound {
            path: path.to_owned(),
        },
        io::ErrorKind::PermissionDenied => BusError::PermissionDenied {
            path: path.to_owned(),
            detail: source.to_string(),
        },
        _ => BusError::Io {
            path: path.to_owned(),
            what: "opening",
            source,
        },
    })?;
    let metadata = file
        .metadata()
        .map_err(io_error(path, "reading its size"))?;
    let malformed = |what: String| BusError::Malformed {
        path: path.to_owned(),
        what,
    };
    let bytes = metadata.len();
    if bytes < HEADER_BYTES {
        // A file this short has no complete header; say what it is when it can be told.
        let mut start = [0u8; 8];
        use std::io::Read;
        let read = (&file).read(&mut start).unwrap_or(0);
        if read < 8 || start != MAGIC {
            return Err(BusError::NotABus {
                path: path.to_owned(),
            });
        }
        return Err(malformed(format!(
            "{bytes} bytes, shorter than its {HEADER_BYTES}-byte header"
        )));
    }
    let mapping = Mapping::map(&file, bytes as usize, false)
        .map_err(io_error(path, "mapping the bus file"))?;
    use layout::offsets;
    if mapping.read_u64(offsets::MAGIC).to_le_bytes() != MAGIC {
        return Err(BusError::NotABus {
            path: path.to_owned(),
        });
    }
    let version = mapping.read_u32(offsets::LAYOUT_VERSION);
    if version != LAYOUT_VERSION {
        return Err(BusError::LayoutVersion {
            path: path.to_owned(),
            found: version,
            supported: LAYOUT_VERSION,
        });
    }
    let event_size = mapping.read_u32(offsets::EVENT_SIZE);
    if event_size != layout::EVENT_SIZE {
        return Err(malformed(format!("event size {event_size}, not 64")));
    }
    let geometry = Geometry::new(
        mapping.read_u64(offsets::CAPACITY),
        mapping.read_u64(offsets::DIRECTORY_CAPACITY),
    )
    .map_err(malformed)?;
    if mapping.read_u64(offsets::RING_OFFSET) != geometry.ring_offset()
        || mapping.read_u64(offsets::DIRECTORY_OFFSET) != geometry.directory_offset()
        || mapping.read_u64(offsets::DIRECTORY_ENTRY_SIZE) != layout::DIRECTORY_ENTRY_BYTES
    {
        return Err(malformed(
            "its region offsets do not follow from its capacity".into(),
        ));
    }
    if bytes < geometry.file_bytes() {
        return Err(malformed(format!(
            "{bytes} bytes, shorter than the {} its header describes",
            geometry.file_bytes()
        )));
    }
    let epoch = mapping.read_u64(offsets::EPOCH);
    Ok(Opened {
        mapping,
        geometry,
        epoch,
        identity: (metadata.dev(), metadata.ino()),
    })
}
