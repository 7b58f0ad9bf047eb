//! Process settings every Starling binary applies at start, for the memory its networking
//! churns through.

/// mimalloc asks for transparent huge pages on its arenas; memory it returns to the system
/// after a burst (a dash tick, a wave of handshakes) then comes back as 2 MiB pages the
/// kernel clears on each fault: 17 % of relay 0's CPU on the dash mesh, and 18 % of the load
/// generator's in a community burst. Without them relay 0 used about 10 % less CPU on that
/// mesh, its peak RSS fell from 70 to 46 MiB, and an idle subscribed session from 84 to 66
/// KiB (docs/benchmarks.md, issue 13). Linux only; a kernel that refuses leaves things as
/// they were.
pub fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
