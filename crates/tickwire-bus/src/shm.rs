//! The bus's files: made by the writer under a lock and a temporary name, mapped read-only by
//! readers that check whose file it is.
//!
//! The writer takes an exclusive `flock` on `<path>.lock` (a second appliance on the same path
//! fails at start, naming the first one's pid), makes the file as `<path>.tmp` with mode 0640 and
//! the configured group, sizes it, maps and fills every page (so the appliance's memory is
//! reached at start, not when the ring first wraps), writes the header and renames it onto
//! `path`. A reader that opens `path` therefore only ever sees a complete header. A restarted
//! appliance renames a new file over the old one: readers still mapping the old one see its
//! cursor stop and find a new file (another epoch) at the path.
//!
//! # Whose files
//!
//! The directory may be one that other users can write too (`/dev/shm`, sticky and
//! world-writable), where another user could make the bus's names first. So the writer follows
//! no symbolic link and creates every file with `O_EXCL`: each of the lock, the temporary file,
//! the request socket and the bus itself is either made new by the appliance, or, found there
//! already, used or replaced only when it belongs to the appliance's user (an earlier run left
//! it; it is removed, never followed, and made anew), and otherwise refused with an error naming
//! its owner ([`BusError::ForeignFile`]). Modes and groups are set on descriptors (`fchmod`,
//! `fchown`), or, for the request socket, on a name inside a directory of the appliance's own
//! that no one else can enter ([`bind_request_socket`]). A directory that others may write
//! without the sticky bit (where anyone could rename the appliance's files away) is refused.
//!
//! Readers open the file without blocking (a FIFO planted at the path cannot hang them), refuse
//! anything but a regular file, and accept it only from an owner they trust ([`Owner`]): by
//! default root, their own user, or the owner of the bus's directory when no one else may write
//! there (`/run/tickwire` under systemd); else the user they name. A file another user made in
//! `/dev/shm` is refused with [`BusError::Untrusted`], naming its owner, not read as a feed.

use crate::layout::{self, Geometry, HEADER_BYTES, LAYOUT_VERSION, MAGIC};
use std::ffi::CString;
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
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
    /// Not a regular file (a directory, a FIFO, a device...): no bus.
    NotAFile { path: PathBuf, kind: &'static str },
    /// A bus of another layout version.
    LayoutVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// The header's sizes do not fit the file.
    Malformed { path: PathBuf, what: String },
    /// A reader: the file belongs to a user this reader does not trust ([`Owner`]).
    Untrusted {
        path: PathBuf,
        /// The file's owner.
        uid: u32,
        /// Whom the reader trusts, in words.
        trusted: String,
    },
    /// The writer: one of the bus's names (`what`) is taken by another user's file.
    ForeignFile {
        path: PathBuf,
        what: &'static str,
        /// Its owner.
        uid: u32,
    },
    /// The writer: the bus's directory may be written by any user and has no sticky bit.
    UnsafeDirectory { path: PathBuf, mode: u32 },
    /// Another appliance writes this bus.
    Locked { path: PathBuf, holder: String },
    /// A configured group that does not exist.
    UnknownGroup { group: String },
    /// A user name that does not exist.
    UnknownUser { user: String },
    /// The sizes asked for are out of range.
    Geometry(String),
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
}

/// `user NAME (uid N)`, or `uid N` for an id with no name here.
pub fn describe_user(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("user {name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
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
            BusError::NotAFile { path, kind } => write!(
                f,
                "{} is not a tickwire bus: it is {kind}, not a regular file",
                path.display()
            ),
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
            BusError::Untrusted { path, uid, trusted } => write!(
                f,
                "bus {} belongs to {}, whom this reader does not trust (it trusts {trusted}): a \
                 file another user made at the path could be a forged feed, so it is not read; \
                 if that user runs the appliance, name it as the bus's owner \
                 (ClientOptions::owner, BusReader::open_owned)",
                path.display(),
                describe_user(*uid)
            ),
            BusError::ForeignFile { path, what, uid } => write!(
                f,
                "{} ({what}) belongs to {}, not to this appliance's {}: another user made it, \
                 so the appliance neither uses nor replaces it; remove it (as root or its owner), \
                 or give [bus] path a directory only the appliance's user may write \
                 (/run/tickwire under systemd)",
                path.display(),
                describe_user(*uid),
                describe_user(effective_uid())
            ),
            BusError::UnsafeDirectory { path, mode } => write!(
                f,
                "bus directory {} (mode {mode:04o}) may be written by any user and has no sticky \
                 bit, so anyone could replace the bus's files; give [bus] path a directory only \
                 the appliance's user may write (/run/tickwire under systemd)",
                path.display()
            ),
            BusError::Locked { path, holder } => write!(
                f,
                "bus {} is written by another appliance ({holder}); give each appliance its \
                 own [bus] path",
                path.display()
            ),
            BusError::UnknownGroup { group } => {
                write!(f, "[bus] group {group:?}: no such group on this host")
            }
            BusError::UnknownUser { user } => write!(f, "no user {user:?} on this host"),
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
        let Some(guard) = crate::sigbus::register(base, len) else {
            // SAFETY: the mapping just made, never used, unmapped once.
            unsafe {
                libc::munmap(base.cast(), len);
            }
            return Err(io::Error::other(format!(
                "this process already maps {} buses, the most its SIGBUS guard protects",
                crate::sigbus::SLOTS
            )));
        };
        Ok(Mapping { base, len, guard })
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

    /// Each partition's ring's words and the directory's words in this mapping, where
    /// `geometry` places them.
    ///
    /// # Safety
    ///
    /// - The mapping holds the whole file `geometry` describes (the writer sized it so;
    ///   `shm::open` checked it against the file's size).
    /// - The results are used only while `self` lives, and their words only atomically.
    pub(crate) unsafe fn regions(
        &self,
        geometry: Geometry,
    ) -> (
        Vec<crate::ring::RingWords>,
        crate::directory::DirectoryWords,
    ) {
        use crate::layout::offsets;
        let base = self.base;
        let word = |offset: usize| base.wrapping_add(offset) as *const AtomicU64;
        let rings = (0..geometry.partitions)
            .map(|k| {
                // SAFETY: partition k's header words are inside the header page
                // (`Geometry::with_partitions` keeps k below `MAX_PARTITIONS`) and its ring is
                // inside the mapping (the caller's first precondition); all are page- or
                // word-aligned (the mapping is page-aligned, the offsets are multiples of 8 and
                // rings start on 64-byte boundaries), valid while `self` lives (the second);
                // `capacity` is a power of two (`Geometry::new` checked it).
                unsafe {
                    crate::ring::RingWords::new(
                        word(offsets::claim(k as usize)),
                        word(offsets::cursor(k as usize)),
                        word(geometry.partition_offset(k) as usize),
                        geometry.capacity,
                    )
                }
            })
            .collect();
        // SAFETY: as above, for the directory count and the directory region.
        let directory = unsafe {
            crate::directory::DirectoryWords::new(
                word(offsets::DIRECTORY_COUNT),
                word(geometry.directory_offset() as usize),
                geometry.directory_capacity,
            )
        };
        (rings, directory)
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
        // Waits out a SIGBUS handler inside the slot: after this none touches the mapping.
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

/// This process's effective user id: the one its files get.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() }
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

/// Resolves a user name to its id (for [`Owner::Uid`]); a number is taken as the id itself.
pub fn user_id(name: &str) -> Result<u32, BusError> {
    if let Ok(uid) = name.parse::<u32>() {
        return Ok(uid);
    }
    let unknown = || BusError::UnknownUser {
        user: name.to_owned(),
    };
    let c_name = CString::new(name).map_err(|_| unknown())?;
    let mut entry: libc::passwd = {
        // SAFETY: `libc::passwd` is a plain C struct of pointers and integers; all-zero is a
        // valid (empty) value that `getpwnam_r` overwrites.
        unsafe { std::mem::zeroed() }
    };
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer names live memory of the stated size; `getpwnam_r` is reentrant.
    let status = unsafe {
        libc::getpwnam_r(
            c_name.as_ptr(),
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut result,
        )
    };
    if status != 0 || result.is_null() {
        return Err(unknown());
    }
    Ok(entry.pw_uid)
}

/// The name of user `uid`, if it has one here.
pub fn user_name(uid: u32) -> Option<String> {
    let mut entry: libc::passwd = {
        // SAFETY: as in `user_id`.
        unsafe { std::mem::zeroed() }
    };
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer names live memory of the stated size; `getpwuid_r` is reentrant.
    let status = unsafe {
        libc::getpwuid_r(
            uid,
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut result,
        )
    };
    if status != 0 || result.is_null() || entry.pw_name.is_null() {
        return None;
    }
    // SAFETY: `getpwuid_r` succeeded: `pw_name` is a NUL-terminated string inside `buffer`.
    let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
    Some(name.to_string_lossy().into_owned())
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

/// The temporary name the writer makes a new bus under before renaming it into place.
fn temporary_path(path: &Path) -> PathBuf {
    sibling(path, ".tmp")
}

/// The private directory the writer binds the request socket in before renaming it into place.
fn bind_directory_path(path: &Path) -> PathBuf {
    sibling(path, ".rqd")
}

/// The directory a bus path is in (`.` for a bare name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// What a file's type is, in words, for errors.
fn kind_of(metadata: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = metadata.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "a regular file"
    }
}

/// Makes way at `path` for a file the writer is about to create with `O_EXCL`: nothing there
/// is fine; a file, link, socket or FIFO of this user (an earlier run's) is removed, without
/// following it; anything of another user is refused by name.
fn clear_stale(path: &Path, what: &'static str) -> Result<(), BusError> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(BusError::Io {
                path: path.to_owned(),
                what,
                source,
            })
        }
    };
    if metadata.uid() != effective_uid() {
        return Err(BusError::ForeignFile {
            path: path.to_owned(),
            what,
            uid: metadata.uid(),
        });
    }
    let removed = if metadata.is_dir() {
        // `remove_dir_all` follows no symbolic link inside.
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match removed {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(BusError::Io {
            path: path.to_owned(),
            what: "removing an earlier run's file",
            source,
        }),
    }
}

/// Refuses a directory that any user may write without the sticky bit.
fn check_directory(path: &Path) -> Result<(), BusError> {
    let directory = directory_of(path);
    let metadata = std::fs::metadata(directory).map_err(|source| BusError::Io {
        path: path.to_owned(),
        what: if source.kind() == io::ErrorKind::NotFound {
            "its directory does not exist"
        } else {
            "reading its directory"
        },
        source,
    })?;
    if !metadata.is_dir() {
        return Err(BusError::Io {
            path: path.to_owned(),
            what: "its directory is not a directory",
            source: io::Error::from(io::ErrorKind::NotADirectory),
        });
    }
    let mode = metadata.mode() & 0o7777;
    if mode & 0o002 != 0 && mode & 0o1000 == 0 {
        return Err(BusError::UnsafeDirectory {
            path: directory.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Opens (or makes) the lock file: never through a symbolic link, only a regular file of this
/// user with no other name (a hard link to another file of the appliance's would be truncated
/// when the pid is written).
fn open_lock(lock_path: &Path) -> Result<File, BusError> {
    const WHAT: &str = "the bus's lock file";
    for _ in 0..16 {
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(lock_path);
        match opened {
            Ok(file) => {
                let metadata = file
                    .metadata()
                    .map_err(io_error(lock_path, "reading the lock file"))?;
                if metadata.uid() != effective_uid() {
                    return Err(BusError::ForeignFile {
                        path: lock_path.to_owned(),
                        what: WHAT,
                        uid: metadata.uid(),
                    });
                }
                if metadata.is_file() && metadata.nlink() == 1 {
                    return Ok(file);
                }
                drop(file);
                clear_stale(lock_path, WHAT)?;
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let created = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o640)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(lock_path);
                match created {
                    Ok(file) => {
                        set_mode(&file, 0o640).map_err(io_error(lock_path, "setting mode 0640"))?;
                        return Ok(file);
                    }
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(source) => {
                        return Err(BusError::Io {
                            path: lock_path.to_owned(),
                            what: "creating the lock file",
                            source,
                        })
                    }
                }
            }
            // A symbolic link (O_NOFOLLOW) or a file this user may not open: whose?
            Err(error)
                if error.raw_os_error() == Some(libc::ELOOP)
                    || error.kind() == io::ErrorKind::PermissionDenied =>
            {
                clear_stale(lock_path, WHAT)?;
            }
            Err(source) => {
                return Err(BusError::Io {
                    path: lock_path.to_owned(),
                    what: "opening the lock file",
                    source,
                })
            }
        }
    }
    Err(BusError::Io {
        path: lock_path.to_owned(),
        what: "the lock file kept changing under the appliance",
        source: io::Error::from(io::ErrorKind::Interrupted),
    })
}

/// `fchmod`: the mode outright, whatever the umask took from it at creation.
fn set_mode(file: &File, mode: u32) -> io::Result<()> {
    // SAFETY: fchmod on a descriptor we own; no memory is passed.
    if unsafe { libc::fchmod(file.as_raw_fd(), mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Creates `path` new (`O_EXCL`, following nothing), clearing an earlier run's file first.
fn create_new(path: &Path, what: &'static str) -> Result<File, BusError> {
    for _ in 0..16 {
        let created = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o640)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path);
        match created {
            Ok(file) => return Ok(file),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                clear_stale(path, what)?;
            }
            Err(source) => {
                return Err(BusError::Io {
                    path: path.to_owned(),
                    what: "creating the bus file",
                    source,
                })
            }
        }
    }
    Err(BusError::Io {
        path: path.to_owned(),
        what: "the temporary bus file kept reappearing",
        source: io::Error::from(io::ErrorKind::AlreadyExists),
    })
}

/// Refuses to rename over `path` when another user's file is there.
fn check_replaceable(path: &Path, what: &'static str) -> Result<(), BusError> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.uid() != effective_uid() => Err(BusError::ForeignFile {
            path: path.to_owned(),
            what,
            uid: metadata.uid(),
        }),
        _ => Ok(()),
    }
}

/// Makes a bus file at `path` (replacing an earlier one of this user) and maps it for writing.
pub(crate) fn create(
    path: &Path,
    geometry: Geometry,
    group: Option<u32>,
    epoch: u64,
    created_ns: u64,
) -> Result<Created, BusError> {
    check_directory(path)?;
    let lock_path = lock_path(path);
    let mut lock = open_lock(&lock_path)?;
    // SAFETY: flock on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut text = String::new();
        use std::io::Read;
        let holder = match (&lock).read_to_string(&mut text) {
            Ok(_) if !text.trim().is_empty() => format!("pid {}", text.trim()),
            _ => "unknown pid".into(),
        };
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
    // We hold the lock: a temporary file of ours is an earlier run's.
    let temporary = temporary_path(path);
    let file = create_new(&temporary, "the bus's temporary file")?;
    let made = (|| {
        // The umask may have taken bits from the mode: set it outright.
        set_mode(&file, 0o640).map_err(io_error(path, "setting mode 0640"))?;
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
        check_replaceable(path, "the bus file")?;
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

/// Binds the Unix datagram socket that takes readers' snapshot requests beside the bus at
/// `path`, mode 0660 with the bus's group (sending to a Unix socket needs write permission on
/// its file), for the writer that holds the bus's lock.
///
/// A socket's file is made by `bind`, by name, so its mode and group cannot be set on a
/// descriptor. It is bound in a directory of the appliance's own (`<path>.rqd`, mode 0700, made
/// new, so no one else can put anything in it), given its mode and group there, and renamed onto
/// `<path>.requests`. An earlier run's socket there is replaced; another user's file is refused
/// by name ([`BusError::ForeignFile`]).
pub fn bind_request_socket(path: &Path, group: Option<u32>) -> Result<UnixDatagram, BusError> {
    use std::os::unix::fs::DirBuilderExt;
    let socket_path = request_socket_path(path);
    let private = bind_directory_path(path);
    const PRIVATE: &str = "the request socket's private directory";
    clear_stale(&private, PRIVATE)?;
    clear_stale(&socket_path, "the bus's request socket")?;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(|source| match source.kind() {
            // Another user made it between our look and our mkdir.
            io::ErrorKind::AlreadyExists => match clear_stale(&private, PRIVATE) {
                Err(error) => error,
                Ok(()) => BusError::Io {
                    path: private.clone(),
                    what: "making the request socket's private directory",
                    source,
                },
            },
            _ => BusError::Io {
                path: private.clone(),
                what: "making the request socket's private directory",
                source,
            },
        })?;
    let bound = (|| {
        // The mode outright, whatever the umask took from it.
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700))
            .map_err(io_error(&private, "setting mode 0700"))?;
        let directory = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(&private)
            .map_err(io_error(
                &private,
                "opening the request socket's private directory",
            ))?;
        let owner = directory
            .metadata()
            .map_err(io_error(
                &private,
                "reading the request socket's private directory",
            ))?
            .uid();
        if owner != effective_uid() {
            return Err(BusError::ForeignFile {
                path: private.clone(),
                what: PRIVATE,
                uid: owner,
            });
        }
        let inside = private.join("s");
        let socket = UnixDatagram::bind(&inside).map_err(io_error(&socket_path, "binding"))?;
        // Relative to the directory's descriptor, inside a directory this user made and only it
        // may write: nothing but the socket just bound can be at that name, and no path is
        // resolved again.
        let name = c"s";
        // SAFETY: a descriptor we own and a NUL-terminated name; no other memory is passed.
        if unsafe { libc::fchmodat(directory.as_raw_fd(), name.as_ptr(), 0o660, 0) } != 0 {
            return Err(BusError::Io {
                path: socket_path.clone(),
                what: "setting mode 0660",
                source: io::Error::last_os_error(),
            });
        }
        if let Some(gid) = group {
            // SAFETY: as above; -1 leaves the owner as it is; AT_SYMLINK_NOFOLLOW: the socket
            // itself, never what a link names.
            let changed = unsafe {
                libc::fchownat(
                    directory.as_raw_fd(),
                    name.as_ptr(),
                    u32::MAX,
                    gid,
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            };
            if changed != 0 {
                return Err(BusError::Io {
                    path: socket_path.clone(),
                    what: "giving the socket the bus's group (the appliance must be a member)",
                    source: io::Error::last_os_error(),
                });
            }
        }
        check_replaceable(&socket_path, "the bus's request socket")?;
        std::fs::rename(&inside, &socket_path)
            .map_err(io_error(&socket_path, "renaming the socket into place"))?;
        Ok(socket)
    })();
    let _ = std::fs::remove_dir_all(&private);
    bound
}

/// Removes the request socket beside the bus at `path` when it is the appliance's (a socket of
/// this user); anything else at the name is left alone.
pub fn remove_request_socket(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let socket_path = request_socket_path(path);
    let ours = std::fs::symlink_metadata(&socket_path).is_ok_and(|metadata| {
        metadata.file_type().is_socket() && metadata.uid() == effective_uid()
    });
    if ours {
        let _ = std::fs::remove_file(&socket_path);
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
        (offsets::PARTITIONS, u64::from(geometry.partitions)),
        (offsets::STATE, layout::STATE_LIVE),
    ];
    for (offset, value) in fields {
        mapping.word(offset).store(value, Relaxed);
    }
}

/// Whose bus files a reader accepts.
///
/// A reader maps whatever file is at the path; in a directory other users may write
/// (`/dev/shm`), one of them could put a forged bus there first. The owner check is made on the
/// opened file (`fstat`), so the file checked is the file read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Owner {
    /// Root, this process's user, or the owner of the directory the bus path names when no one
    /// else may write it (mode without group or other write: `/run/tickwire` under systemd,
    /// owned by the appliance's user). What to use unless the appliance runs as another user
    /// in a shared directory.
    #[default]
    Trusted,
    /// Exactly this user (the appliance's): [`user_id`] resolves a name.
    Uid(u32),
}

impl Owner {
    /// Whether a file of `uid` at `path` is accepted; the error says whom it trusts.
    fn check(self, path: &Path, uid: u32) -> Result<(), BusError> {
        let trusted = match self {
            Owner::Uid(expected) if uid == expected => return Ok(()),
            Owner::Uid(expected) => format!("{} only, as asked", describe_user(expected)),
            Owner::Trusted => {
                let me = effective_uid();
                if uid == 0 || uid == me {
                    return Ok(());
                }
                let directory = directory_of(path);
                if let Ok(metadata) = std::fs::metadata(directory) {
                    if metadata.uid() == uid && metadata.mode() & 0o022 == 0 {
                        return Ok(());
                    }
                }
                format!(
                    "root, its own {} and the owner of {} when no one else may write there",
                    describe_user(me),
                    directory.display()
                )
            }
        };
        Err(BusError::Untrusted {
            path: path.to_owned(),
            uid,
            trusted,
        })
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

/// Opens and maps the bus at `path` read-only, checking its owner and its header against the
/// file.
pub(crate) fn open(path: &Path, owner: Owner) -> Result<Opened, BusError> {
    let file = OpenOptions::new()
        .read(true)
        // A FIFO at the path must not hang the reader.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| match source.kind() {
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
    if !metadata.is_file() {
        return Err(BusError::NotAFile {
            path: path.to_owned(),
            kind: kind_of(&metadata),
        });
    }
    owner.check(path, metadata.uid())?;
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
    let partitions = u32::try_from(mapping.read_u64(offsets::PARTITIONS)).unwrap_or(u32::MAX);
    let geometry = Geometry::new(
        mapping.read_u64(offsets::CAPACITY),
        mapping.read_u64(offsets::DIRECTORY_CAPACITY),
    )
    .and_then(|geometry| geometry.with_partitions(partitions))
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
