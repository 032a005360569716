//! Background threads at a lower CPU priority.
//!
//! Work nobody waits for (the sync loop's runs and libSQL's file work for the replica) must
//! not take a core from the calls an app waits for. On Linux a thread's nice value is its own
//! (NPTL), so raising it on one thread leaves the rest of the process alone; raising it needs
//! no privilege, but lowering it again does, so such a thread stays lowered. Elsewhere this
//! is a no-op and such work competes at normal priority.
//!
//! A lowered thread must never hold the store's writer: app writes queue behind the holder,
//! and a holder that gets a tenth of a busy core would make them all wait (priority
//! inversion). Sections of background work that write go back to the engine's runtime; the
//! store checks this in debug builds ([`is_lowered`]).

use std::cell::Cell;

/// How much lower: at 10 more nice than the app's threads, the scheduler gives a thread
/// about a tenth of the share of one of them while both want the same core, and all of an
/// otherwise idle one.
#[cfg(target_os = "linux")]
const BACKGROUND_NICE_STEP: libc::c_int = 10;

/// The weakest priority there is (the highest nice value).
#[cfg(target_os = "linux")]
const NICEST: libc::c_int = 19;

thread_local! {
    static LOWERED: Cell<bool> = const { Cell::new(false) };
}

/// Lowers the calling thread's priority for background work (a no-op off Linux, and if the
/// system refuses). Meant for `on_thread_start` of a runtime that runs only such work.
pub(crate) fn lower_current_thread() {
    LOWERED.with(|l| l.set(true));
    #[cfg(target_os = "linux")]
    // SAFETY: gettid, getpid, getpriority and setpriority take plain integers, and errno is this
    // thread's own; none touches memory of ours.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        // Relative to the process's main thread, not to this thread's inherited nice (a
        // thread started by a lowered one would be lowered twice): an app run nice stays
        // above its sync. -1 is a valid nice, so errors are told apart by errno.
        *libc::__errno_location() = 0;
        let app = libc::getpriority(libc::PRIO_PROCESS, libc::getpid() as libc::id_t);
        if app == -1 && *libc::__errno_location() != 0 {
            return;
        }
        let lowered = (app + BACKGROUND_NICE_STEP).min(NICEST);
        // Failure leaves the thread at normal priority, which is only slower for others.
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid, lowered);
    }
}

/// Whether the calling thread was lowered by [`lower_current_thread`] (on any platform).
pub(crate) fn is_lowered() -> bool {
    LOWERED.with(Cell::get)
}
