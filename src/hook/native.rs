//! The entry point the native `engram-hook` launcher calls in the addon (`src/bin/engram-hook.rs`
//! loads the `.node` file without Node and calls [`engram_hook_main`]): one hook run in ~10 ms
//! where Node's own start takes 70-110 ms on two cores. It reads stdin under the hook's time
//! budget, runs the event, prints the answer and returns; the launcher exits at once, leaving
//! the database open (see the module doc of [`super`]).

use std::ffi::{c_char, c_int, CStr};
use std::io::{Read, Write};
use std::time::Duration;

use super::{HookArgs, LogTarget, MAX_STDIN_BYTES, TIMEOUT_MS};

/// Runs one hook event with the launcher's arguments (`argv[0]` is the program); returns the
/// exit code, always 0 (a failing hook must not disturb the agent).
///
/// # Safety
///
/// `argv` must point to `argc` valid NUL-terminated strings, as `main` receives them.
#[no_mangle]
pub unsafe extern "C" fn engram_hook_main(argc: c_int, argv: *const *const c_char) -> c_int {
    let args: Vec<String> = (1..usize::try_from(argc).unwrap_or(0))
        // SAFETY: the caller passes main's argc/argv.
        .map(|i| unsafe { CStr::from_ptr(*argv.add(i)) })
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if args.first().map(String::as_str) == Some("--version") {
        println!("{}", env!("CARGO_PKG_VERSION"));
        return 0;
    }
    let args = HookArgs::parse(&args);
    // A panic must not unwind into the launcher's C frame (that aborts, exit 134): it is
    // logged as ENGRAM_INTERNAL, without its message, which may quote the payload.
    let ran = std::panic::catch_unwind(|| hook_main(&args));
    if ran.is_err() {
        log_target(&args).line("ENGRAM_INTERNAL", "panic");
    }
    0
}

/// Reads stdin, runs the event and prints its answer.
fn hook_main(args: &HookArgs) {
    start_watchdog(args);
    let mut stdin = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(MAX_STDIN_BYTES as u64 + 1)
        .read_to_end(&mut stdin);
    let early_failure = match read {
        Err(e) => Some(format!("reading stdin: {e}")),
        Ok(n) if n > MAX_STDIN_BYTES => {
            Some(format!("stdin holds more than {MAX_STDIN_BYTES} bytes"))
        }
        Ok(_) => None,
    };
    if let Some(message) = early_failure {
        log_target(args).line("ENGRAM_INVALID_ARG", &message);
        return;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log_target(args).line("ENGRAM_INTERNAL", &format!("runtime: {e}"));
            return;
        }
    };
    let outcome = runtime.block_on(super::run(args.clone(), &stdin));
    if let Some(line) = outcome.stdout {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|_| out.flush());
    }
    // The process exits next: closing the database would checkpoint and fsync the WAL, and
    // shutting the runtime down would wait on background work, for nothing.
    std::mem::forget(outcome.handle);
    std::mem::forget(runtime);
}

/// Where a failure before the payload is read goes: the root given, else the working
/// directory (Claude Code runs hooks in the project).
fn log_target(args: &HookArgs) -> LogTarget {
    let root = args.root.clone().or_else(|| std::env::current_dir().ok());
    let event = args
        .event
        .as_deref()
        .map(|e| super::event_name(e).unwrap_or(e));
    LogTarget::new(event.unwrap_or("?"), root)
}

/// Ends the process silently (locks released) once the hook's time budget
/// (`ENGRAM_HOOK_TIMEOUT_MS`, default [`TIMEOUT_MS`]) is spent: a payload that never ends, a
/// database held by another process.
fn start_watchdog(args: &HookArgs) {
    let limit = std::env::var("ENGRAM_HOOK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .unwrap_or(TIMEOUT_MS);
    let log = log_target(args);
    let spawned = std::thread::Builder::new()
        .name("engram-hook-watchdog".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_millis(limit));
            log.line("ENGRAM_ABORTED", &format!("gave up after {limit} ms"));
            // At once, with the other threads stopped where they are: the OS releases the
            // locks, and nothing runs on after another hook took them.
            let _ = std::io::stderr().flush();
            #[cfg(unix)]
            // SAFETY: _exit ends the process; it touches no Rust state.
            unsafe {
                libc::_exit(0)
            };
            #[cfg(not(unix))]
            std::process::exit(0);
        });
    drop(spawned);
}
