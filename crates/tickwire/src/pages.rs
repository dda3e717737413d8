//! Giving the pages of a preallocated buffer back to the kernel while it is empty.
//!
//! The hot path allocates its buffers once, at their limits (a Binance book's diff buffer holds
//! up to 131,072 levels, 2 MiB). Such a buffer is only written while a book waits for its
//! snapshot, at start and after a resync; between those times it is empty, but every page it was
//! once written to stays resident. [`release_spare`] hands the whole pages of a `Vec`'s unused
//! capacity back with `madvise(MADV_DONTNEED)`: the allocation stays the `Vec`'s, mapped and
//! valid, and the next write to such a page takes a zero page from the kernel (a minor fault, on
//! the next resync, never in the steady feed). The lean profile's resident memory fell by the
//! 0.8 MiB its ten books had written at start (BENCHMARKING.md, "Memory").
//!
//! [`release_startup_pages`] does the same for what start-up leaves behind (issue 39): the pages
//! of the code and read-only data that only start-up ran (arguments, config, TLS set-up, the
//! handshakes) and the heap's free pages. The lean profile asks for it (`[process]
//! release_startup_pages`); [`StartupRelease`] calls it once every venue has been live for
//! [`RELEASE_AFTER_LIVE_NS`], and again after each recovery.

/// Below this much spare capacity the call is not worth its syscall.
const MIN_SPARE_BYTES: usize = 64 * 1024;

/// Gives back the whole pages of `buffer`'s spare capacity (`len..capacity`); what the `Vec`
/// holds is untouched. Returns the bytes given back (0 under Miri, for a small spare capacity,
/// or if the kernel refused).
pub fn release_spare<T>(buffer: &mut Vec<T>) -> usize {
    if cfg!(miri) {
        return 0;
    }
    let element = std::mem::size_of::<T>();
    let spare = buffer.capacity().saturating_sub(buffer.len()) * element;
    if element == 0 || spare < MIN_SPARE_BYTES {
        return 0;
    }
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        size if size > 0 => size as usize,
        _ => return 0,
    };
    let begin = buffer.spare_capacity_mut().as_mut_ptr() as usize;
    let start = begin.next_multiple_of(page);
    let end = (begin + spare) / page * page;
    if end <= start {
        return 0;
    }
    // SAFETY: [start, end) lies inside the Vec's own allocation, past its initialised elements
    // (its spare capacity, which holds no values: the Vec reads none of it before writing), and
    // covers whole pages only, so neither the allocator's bookkeeping, which sits outside the
    // allocation, nor any other object shares them. On private anonymous memory (a large
    // allocation's own mapping, or the heap) MADV_DONTNEED leaves the range mapped; later reads
    // see zeros, later writes fault in fresh pages.
    let status =
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    if status == 0 {
        end - start
    } else {
        0
    }
}

/// How long every venue must have been live before [`StartupRelease`] gives the start-up pages
/// back: the subscriptions' replies and the books' first snapshots come in this time.
pub const RELEASE_AFTER_LIVE_NS: u64 = 2_000_000_000;

/// What [`release_startup_pages`] gave back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Bytes of code and read-only data whose pages were unmapped from this process (they stay
    /// in the page cache; what runs again faults them back in).
    pub code_bytes: usize,
    /// Whether the allocator gave free heap pages back (glibc's `malloc_trim`).
    pub heap_trimmed: bool,
}

const DT_NULL: i64 = 0;
const DT_TEXTREL: i64 = 22;
const DT_FLAGS: i64 = 30;
const DF_TEXTREL: u64 = 4;

/// Gives back the resident pages of every loaded object's read-only segments (code, read-only
/// data, unwind tables), and the heap's free pages.
///
/// Only segments that are never written are touched: a `PT_LOAD` without `PF_W`, of an object
/// with no text relocations, shrunk inward to whole pages and kept clear of `PT_GNU_RELRO` (the
/// relocated read-only data is written at start, so its pages are private copies that
/// `MADV_DONTNEED` would throw away). Such pages are clean copies of the file: dropping them
/// unmaps them from this process and nothing else; the next instruction or read that needs one
/// maps it again from the page cache (a minor fault, once a page). The vDSO is left alone. Under
/// `mlockall` the kernel refuses (`EINVAL`) and nothing changes; the config refuses the pair.
pub fn release_startup_pages() -> Released {
    if cfg!(miri) {
        return Released::default();
    }
    let mut released = Released::default();
    // SAFETY: getauxval has no preconditions; 0 when there is no vDSO.
    let vdso = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
    let mut state = (vdso, 0usize);
    // SAFETY: the callback only reads the program headers the loader hands it, for the duration
    // of the call, and `state` outlives the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(release_object),
            (&mut state as *mut (usize, usize)).cast(),
        );
    }
    released.code_bytes = state.1;
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only gives back free memory of glibc's arenas.
        released.heap_trimmed = unsafe { libc::malloc_trim(0) } == 1;
    }
    released
}

/// `dl_iterate_phdr`'s callback: releases one object's read-only segments, adding the bytes to
/// `data` (a `(vdso address, bytes released)`).
unsafe extern "C" fn release_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid info for the call's duration, and `data` is the state
    // `release_startup_pages` passed.
    let (info, state) = unsafe { (&*info, &mut *data.cast::<(usize, usize)>()) };
    if info.dlpi_phdr.is_null() || info.dlpi_phnum == 0 {
        return 0;
    }
    // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
    let headers =
        unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let base = info.dlpi_addr as usize;
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        size if size > 0 => size as usize,
        _ => return 1,
    };
    let range = |header: &libc::Elf64_Phdr| {
        let start = base.wrapping_add(header.p_vaddr as usize);
        (start, start.wrapping_add(header.p_memsz as usize))
    };
    // The vDSO is the kernel's, mapped specially: not ours to drop.
    if state.0 != 0
        && headers.iter().any(|header| {
            let (start, end) = range(header);
            header.p_type == libc::PT_LOAD && (start..end).contains(&state.0)
        })
    {
        return 0;
    }
    // An object with text relocations has written to its code: its pages are private copies.
    for header in headers
        .iter()
        .filter(|header| header.p_type == libc::PT_DYNAMIC)
    {
        let mut entry = range(header).0 as *const [i64; 2];
        loop {
            // SAFETY: PT_DYNAMIC is an array of (tag, value) pairs ending with DT_NULL, mapped
            // for the object's lifetime.
            let [tag, value] = unsafe { entry.read() };
            if tag == DT_NULL {
                break;
            }
            if tag == DT_TEXTREL || (tag == DT_FLAGS && value as u64 & DF_TEXTREL != 0) {
                return 0;
            }
            // SAFETY: the next pair, before the DT_NULL that ends the array.
            entry = unsafe { entry.add(1) };
        }
    }
    // Whether [start, end) overlaps the object's RELRO (read directly: no allocation while
    // the loader's lock is held).
    let overlaps_relro = |start: usize, end: usize| {
        headers
            .iter()
            .filter(|header| header.p_type == libc::PT_GNU_RELRO)
            .map(range)
            .any(|(relro_start, relro_end)| relro_start < end && start < relro_end)
    };
    for header in headers {
        if header.p_type != libc::PT_LOAD || header.p_flags & libc::PF_W != 0 {
            continue;
        }
        let (start, end) = range(header);
        let start = start.next_multiple_of(page);
        let end = end / page * page;
        if end <= start || overlaps_relro(start, end) {
            continue;
        }
        // SAFETY: [start, end) is whole pages of a read-only segment of a loaded object, never
        // written (no text relocations, clear of RELRO): MADV_DONTNEED drops this process's
        // mappings of clean file pages, and any later access maps the same bytes again.
        let status =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        if status == 0 {
            state.1 += end - start;
        }
    }
    0
}

/// Calls [`release_startup_pages`] once every venue has been live for
/// [`RELEASE_AFTER_LIVE_NS`], and again after each time they all come back.
#[derive(Debug, Default)]
pub struct StartupRelease {
    /// Since when every venue has been live, while none has released yet.
    live_since: Option<u64>,
    released: bool,
}

impl StartupRelease {
    /// Called on every control tick; returns what was released when it released.
    pub fn tick(&mut self, now_ns: u64, all_live: bool) -> Option<Released> {
        if !all_live {
            self.live_since = None;
            self.released = false;
            return None;
        }
        let since = *self.live_since.get_or_insert(now_ns);
        if self.released || now_ns.saturating_sub(since) < RELEASE_AFTER_LIVE_NS {
            return None;
        }
        self.released = true;
        Some(release_startup_pages())
    }

    /// When the next release falls due, if one is pending.
    pub fn deadline_ns(&self) -> Option<u64> {
        match (self.released, self.live_since) {
            (false, Some(since)) => Some(since + RELEASE_AFTER_LIVE_NS),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident_pages(buffer: &[u8]) -> usize {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let start = (buffer.as_ptr() as usize).next_multiple_of(page);
        let end = (buffer.as_ptr() as usize + buffer.len()) / page * page;
        let pages = (end - start) / page;
        let mut vec = vec![0u8; pages];
        // SAFETY: [start, end) is page aligned and inside `buffer`; `vec` has one byte a page.
        let status =
            unsafe { libc::mincore(start as *mut libc::c_void, end - start, vec.as_mut_ptr()) };
        assert_eq!(status, 0, "mincore failed");
        vec.iter().filter(|byte| **byte & 1 == 1).count()
    }

    #[test]
    #[cfg_attr(miri, ignore = "madvise and mincore are syscalls")]
    fn the_spare_capacity_goes_back_and_the_contents_stay() {
        let mut buffer: Vec<u64> = Vec::with_capacity(128 * 1024);
        buffer.extend((0..128 * 1024).map(|value| value as u64 * 3));
        buffer.truncate(1000);
        // SAFETY: reading the allocation's bytes as u8: it is all initialised (written above).
        let whole =
            unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), 128 * 1024 * 8) };
        let before = resident_pages(whole);
        assert!(
            before > 200,
            "the written buffer is resident ({before} pages)"
        );
        let given = release_spare(&mut buffer);
        assert!(
            given >= (128 * 1024 - 1000) * 8 - 8192,
            "gave back {given} bytes"
        );
        let after = resident_pages(whole);
        assert!(after <= 4, "{after} pages resident after the release");
        // What the Vec holds is untouched, and the spare capacity is usable again.
        assert!(buffer
            .iter()
            .enumerate()
            .all(|(index, value)| *value == index as u64 * 3));
        buffer.extend((1000..5000).map(|value| value as u64));
        assert_eq!(buffer[4999], 4999);
        assert_eq!(buffer[999], 999 * 3);
    }

    fn status_kib(field: &str) -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.trim().trim_end_matches(" kB").parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
    }

    /// Pointers the loader relocated at start (`.data.rel.ro` in a PIE): their pages must not be
    /// given back, or they would read as the file's unrelocated bytes.
    static RELOCATED: [&str; 4] = ["bookTicker", "depthUpdate", "aggTrade", "markPriceUpdate"];

    fn checksum(words: &[&str]) -> u64 {
        words.iter().fold(0u64, |sum, word| {
            word.bytes()
                .fold(sum, |sum, byte| sum.rotate_left(7) ^ u64::from(byte))
        })
    }

    #[test]
    #[cfg_attr(miri, ignore = "madvise and /proc are not emulated")]
    fn startup_pages_go_back_and_the_code_and_data_still_work() {
        let before_sum = checksum(&RELOCATED);
        let table: Vec<u64> = (0..4096u64)
            .map(|value| value.wrapping_mul(0x9e37_79b9))
            .collect();
        let file_before = status_kib("RssFile:");
        let released = release_startup_pages();
        let file_after = status_kib("RssFile:");
        assert!(
            released.code_bytes > 1 << 20,
            "the test binary's code and read-only data are megabytes: {released:?}"
        );
        assert!(
            file_after < file_before,
            "RssFile {file_before} KiB before, {file_after} KiB after"
        );
        // The code runs and the data reads the same as before.
        assert_eq!(checksum(&RELOCATED), before_sum);
        assert_eq!(RELOCATED[3], "markPriceUpdate");
        let again: Vec<u64> = (0..4096u64)
            .map(|value| value.wrapping_mul(0x9e37_79b9))
            .collect();
        assert_eq!(table, again);
        assert_eq!(format!("{:>6}|{:.2}", "x", 1.005f64), "     x|1.00");
    }

    #[test]
    fn the_release_waits_for_every_venue_live_and_comes_again_after_a_recovery() {
        let second = 1_000_000_000;
        let mut release = StartupRelease::default();
        assert!(release.tick(0, false).is_none());
        assert_eq!(release.deadline_ns(), None);
        assert!(release.tick(5 * second, true).is_none(), "live just now");
        assert_eq!(release.deadline_ns(), Some(7 * second));
        assert!(release.tick(7 * second - 1, true).is_none());
        assert!(release.tick(7 * second, true).is_some(), "live for 2 s");
        assert_eq!(release.deadline_ns(), None);
        assert!(release.tick(8 * second, true).is_none(), "once");
        assert!(
            release.tick(9 * second, false).is_none(),
            "a venue went down"
        );
        assert!(release.tick(10 * second, true).is_none());
        assert!(
            release.tick(11 * second, false).is_none(),
            "down again before 2 s"
        );
        assert!(release.tick(12 * second, true).is_none());
        assert!(
            release.tick(14 * second, true).is_some(),
            "again after the recovery"
        );
    }

    #[test]
    fn a_small_or_full_buffer_is_left_alone() {
        let mut small: Vec<u8> = Vec::with_capacity(1024);
        assert_eq!(release_spare(&mut small), 0);
        let mut full = vec![7u8; 1 << 20];
        assert_eq!(release_spare(&mut full), 0);
        assert!(full.iter().all(|byte| *byte == 7));
    }
}
