//! The signals and waits of both kinds of process (launcher and worker).

use std::time::Duration;

use pgrx::pg_sys;

// Postgres' own signal handlers, by their C symbols (pgrx wraps the
// declarations in pg_sys into Rust functions, which are not handlers).
unsafe extern "C-unwind" {
    #[link_name = "die"]
    fn postgres_die(signal: std::ffi::c_int);
    #[link_name = "SignalHandlerForConfigReload"]
    fn postgres_reload(signal: std::ffi::c_int);
}

/// `pqsignal`, which PostgreSQL 18's headers make a macro for the backend's
/// `pqsignal_be`.
#[cfg(feature = "pg15")]
use pg_sys::pqsignal;
#[cfg(feature = "pg18")]
use pg_sys::pqsignal_be as pqsignal;

/// The signal handlers of both kinds of process: reload on SIGHUP, Postgres'
/// own `die` on SIGTERM (so CHECK_FOR_INTERRUPTS ends the process cleanly).
pub(super) fn attach_signals() {
    // SAFETY: installing Postgres' own handlers, before unblocking signals.
    unsafe {
        pqsignal(libc::SIGHUP, Some(postgres_reload));
        pqsignal(libc::SIGTERM, Some(postgres_die));
        pg_sys::BackgroundWorkerUnblockSignals();
    }
}

/// Sleeps until `timeout` passes or the latch is set; serves interrupts
/// (SIGTERM ends the process here) and reloads settings after a SIGHUP.
pub(super) fn nap(timeout: Duration) {
    // SAFETY: the standard latch loop of a background worker.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            timeout.as_millis().min(i32::MAX as u128) as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    reload_if_asked();
}

pub(super) fn reload_if_asked() {
    pgrx::check_for_interrupts!();
    // SAFETY: the flag is set by the SIGHUP handler and read on this thread.
    unsafe {
        if pg_sys::ConfigReloadPending != 0 {
            pg_sys::ConfigReloadPending = 0;
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}
