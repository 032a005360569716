//! Background threads at a lower CPU priority.
//!
//! Work nobody waits for (the sync loop's runs and libSQL's file work for the replica) must
//! not take a core from the calls an app waits for. On Linux a thread's nice value is its own
//! (NPTL), so raising it on one thread leaves the rest of the process alone; raising it needs
//! no privilege. Elsewhere this is a no-op and such work competes at normal priority.

/// How much lower: at nice 10 the scheduler gives a thread about a tenth of the share of a
/// normal one while both want the same core, and all of an otherwise idle one.
#[cfg(target_os = "linux")]
const BACKGROUND_NICE: libc::c_int = 10;

/// Lowers the calling thread's priority for background work (a no-op off Linux, and if the
/// system refuses). Meant for `on_thread_start` of a runtime that runs only such work.
pub(crate) fn lower_current_thread() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take plain integers and touch no memory of ours.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        // Failure leaves the thread at normal priority, which is only slower for others.
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE);
    }
}
