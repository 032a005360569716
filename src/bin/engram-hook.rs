//! `engram-hook`: runs one Claude Code hook without Node. It loads the engram addon (the
//! `.node` file next to it, or `ENGRAM_ADDON`) as a plain shared library and calls its
//! `engram_hook_main` (`src/hook/native.rs`), so a hook costs the ~10 ms of engram's own work
//! instead of Node's 70-110 ms start on two cores.
//!
//! The addon is linked against Node's N-API functions, resolved when it loads (it is built with
//! BIND_NOW). This program exports a stub of each one it imports, so that the load succeeds;
//! the hook's code never calls them, and a stub that is called anyway aborts with its name. A
//! new import in the addon makes the load fail with `undefined symbol: napi_...`: add it to
//! [`napi_stubs`] (the package test runs this launcher against the built addon).
//!
//! A hook must never get in the agent's way: when the addon cannot be loaded this prints the
//! reason on stderr, appends it to the project's `.engram/hooks/hook.log` and exits 0.

#[cfg(target_os = "linux")]
fn main() {
    std::process::exit(linux::run());
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("engram-hook: only built for Linux; use `engram hook <event>`");
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{c_char, c_int, CString};
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;

    /// The entry point's type (`engram_hook_main` in `src/hook/native.rs`).
    type HookMain = unsafe extern "C" fn(c_int, *const *const c_char) -> c_int;

    /// Loads the addon and runs the hook; 0 whatever happens.
    pub fn run() -> i32 {
        match load() {
            Ok(main) => {
                let args: Vec<CString> = std::env::args_os()
                    .map(|a| CString::new(a.as_bytes()).unwrap_or_default())
                    .collect();
                let argv: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
                let argc = c_int::try_from(argv.len()).unwrap_or(0);
                // SAFETY: argv holds argc NUL-terminated strings that outlive the call.
                unsafe { main(argc, argv.as_ptr()) }
            }
            Err(message) => {
                eprintln!("engram-hook: {message}");
                log_failure(&message);
                0
            }
        }
    }

    /// Appends the failure to the hook log of the project (`--root`, else the working
    /// directory), as the addon's hooks log theirs: Claude Code shows no stderr of a hook that
    /// exits 0. The time is in seconds since the epoch (this program carries no calendar).
    fn log_failure(message: &str) {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let root = args
            .iter()
            .position(|a| a == "--root")
            .and_then(|i| args.get(i + 1).cloned())
            .or_else(|| {
                args.iter()
                    .find_map(|a| a.strip_prefix("--root=").map(str::to_owned))
            })
            .map(PathBuf::from)
            .or_else(|| std::env::current_dir().ok());
        let Some(root) = root.filter(|r| r.is_dir()) else {
            return;
        };
        let dir = root.join(".engram").join("hooks");
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let event = args.first().map_or("?", String::as_str);
        let line = format!("{seconds}s {event} ENGRAM_NO_BINARY: engram-hook: {message}\n");
        let _ = std::fs::create_dir_all(&dir).and_then(|_| {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("hook.log"))?
                .write_all(line.as_bytes())
        });
    }

    /// The addon's hook entry point.
    fn load() -> Result<HookMain, String> {
        let addon = addon_path()?;
        let path = CString::new(addon.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: a plain dlopen of a shared library; its imports are resolved against the
        // stubs below and libc.
        let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(format!("cannot load {}: {}", addon.display(), dl_error()));
        }
        // SAFETY: looking a symbol up in the library just loaded (never unloaded).
        let symbol = unsafe { libc::dlsym(lib, c"engram_hook_main".as_ptr()) };
        if symbol.is_null() {
            return Err(format!("{} has no engram_hook_main", addon.display()));
        }
        // SAFETY: the symbol is `engram_hook_main`, of this type.
        Ok(unsafe { std::mem::transmute::<*mut libc::c_void, HookMain>(symbol) })
    }

    /// `ENGRAM_ADDON`, else the `engram.*.node` file in this program's directory.
    fn addon_path() -> Result<PathBuf, String> {
        if let Some(path) = std::env::var_os("ENGRAM_ADDON").filter(|p| !p.is_empty()) {
            return Ok(PathBuf::from(path));
        }
        let exe = std::env::current_exe().map_err(|e| format!("locating myself: {e}"))?;
        let dir = exe.parent().ok_or("locating myself: no directory")?;
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))?;
        entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default();
                name.starts_with("engram.") && name.ends_with(".node")
            })
            .ok_or_else(|| {
                format!(
                    "no engram.*.node next to {} (set ENGRAM_ADDON)",
                    exe.display()
                )
            })
    }

    fn dl_error() -> String {
        // SAFETY: dlerror returns a NUL-terminated message or null.
        let message = unsafe { libc::dlerror() };
        if message.is_null() {
            return "unknown error".into();
        }
        // SAFETY: non-null, NUL-terminated, valid until the next dl call.
        unsafe { std::ffi::CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    }

    /// Defines an exported function per name that aborts if it is ever called.
    macro_rules! napi_stubs {
        ($($name:ident)*) => {$(
            #[no_mangle]
            pub extern "C" fn $name() {
                eprintln!(concat!("engram-hook: ", stringify!($name), " called outside Node"));
                std::process::abort();
            }
        )*};
    }

    // The N-API functions the addon imports (`nm -D --undefined-only engram.*.node | grep napi_`).
    napi_stubs! {
        napi_add_env_cleanup_hook napi_add_finalizer napi_call_function
        napi_call_threadsafe_function napi_check_object_type_tag napi_coerce_to_string
        napi_create_array_with_length napi_create_arraybuffer napi_create_double
        napi_create_error napi_create_external_arraybuffer napi_create_function
        napi_create_int64 napi_create_object napi_create_promise napi_create_reference
        napi_create_string_latin1 napi_create_string_utf8 napi_create_threadsafe_function
        napi_create_typedarray napi_create_uint32 napi_define_class napi_define_properties
        napi_delete_reference napi_fatal_exception napi_get_all_property_names
        napi_get_and_clear_last_exception napi_get_array_length napi_get_boolean
        napi_get_cb_info napi_get_element napi_get_global napi_get_named_property
        napi_get_null napi_get_property napi_get_property_names napi_get_prototype
        napi_get_reference_value napi_get_typedarray_info napi_get_undefined
        napi_get_value_bigint_words napi_get_value_bool napi_get_value_double
        napi_get_value_string_utf16 napi_get_value_string_utf8 napi_has_own_property
        napi_is_array napi_is_error napi_is_exception_pending napi_is_promise
        napi_is_typedarray napi_new_instance napi_reference_unref napi_reject_deferred
        napi_release_threadsafe_function napi_remove_env_cleanup_hook napi_resolve_deferred
        napi_set_element napi_set_named_property napi_set_property napi_strict_equals
        napi_throw napi_throw_error napi_type_tag_object napi_typeof
        napi_unref_threadsafe_function napi_unwrap napi_wrap
        // Imported by builds that use them (kept so that a small change of the binding does
        // not break the launcher).
        napi_module_register napi_create_string_utf16 napi_get_value_int32
        napi_get_value_int64 napi_get_value_uint32 napi_create_int32 napi_create_bigint_int64
        napi_create_bigint_uint64 napi_get_value_bigint_int64 napi_get_value_bigint_uint64
        napi_create_array napi_create_buffer napi_create_buffer_copy napi_get_buffer_info
        napi_is_buffer napi_get_arraybuffer_info napi_is_arraybuffer napi_create_external
        napi_get_value_external napi_create_symbol napi_throw_type_error
        napi_throw_range_error napi_create_type_error napi_create_range_error
        napi_get_last_error_info napi_get_version napi_get_node_version napi_open_handle_scope
        napi_close_handle_scope napi_open_escapable_handle_scope
        napi_close_escapable_handle_scope napi_escape_handle napi_reference_ref
        napi_set_instance_data napi_get_instance_data napi_has_property napi_has_element
        napi_delete_property napi_delete_element napi_has_named_property napi_instanceof
        napi_get_new_target napi_create_date napi_is_date napi_get_date_value
        napi_acquire_threadsafe_function napi_ref_threadsafe_function
        napi_get_threadsafe_function_context napi_get_uv_event_loop napi_create_dataview
        napi_is_dataview napi_get_dataview_info napi_detach_arraybuffer
        napi_is_detached_arraybuffer napi_object_freeze napi_object_seal
        napi_adjust_external_memory napi_run_script
        napi_create_external_buffer napi_async_init napi_async_destroy
        napi_make_callback napi_create_async_work napi_delete_async_work
        napi_queue_async_work napi_cancel_async_work napi_open_callback_scope
        napi_close_callback_scope napi_fatal_error napi_add_async_cleanup_hook
        napi_remove_async_cleanup_hook
    }
}
