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

    #[test]
    fn a_small_or_full_buffer_is_left_alone() {
        let mut small: Vec<u8> = Vec::with_capacity(1024);
        assert_eq!(release_spare(&mut small), 0);
        let mut full = vec![7u8; 1 << 20];
        assert_eq!(release_spare(&mut full), 0);
        assert!(full.iter().all(|byte| *byte == 7));
    }
}
