//! tree-sitter allocates through mimalloc, as the rest of engram does.
//!
//! tree-sitter's C library calls `malloc`/`free` for every subtree, stack node and query state:
//! in a profile of a cold index of CPython's standard library, glibc's allocator was 7.5% of the
//! parser threads' CPU. [`tree_sitter::set_allocator`] points the library at mimalloc instead.
//! It must run before tree-sitter allocates anything (memory from one allocator must never be
//! freed by the other), so it runs when the library is loaded, before `main` or at the addon's
//! `dlopen`, ahead of any parser, tree or query. Measured in docs/PERFORMANCE.md ("Where cold
//! indexing goes").

use std::ffi::c_void;

unsafe extern "C" fn ts_malloc(size: usize) -> *mut c_void {
    // SAFETY: mimalloc's malloc has C malloc's contract.
    unsafe { libmimalloc_sys::mi_malloc(size) }
}

unsafe extern "C" fn ts_calloc(count: usize, size: usize) -> *mut c_void {
    // SAFETY: mimalloc's calloc has C calloc's contract.
    unsafe { libmimalloc_sys::mi_calloc(count, size) }
}

unsafe extern "C" fn ts_realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `ptr` came from these functions (installed before any tree-sitter allocation).
    unsafe { libmimalloc_sys::mi_realloc(ptr, size) }
}

unsafe extern "C" fn ts_free(ptr: *mut c_void) {
    // SAFETY: as for `ts_realloc`.
    unsafe { libmimalloc_sys::mi_free(ptr) }
}

ctor::declarative::ctor! {
    /// Installs mimalloc as tree-sitter's allocator when the library loads.
    // SAFETY (of running before main): it only stores four function pointers in tree-sitter's
    // globals; no tree-sitter object can exist yet, and nothing else runs concurrently.
    #[ctor(unsafe)]
    fn install() {
        // SAFETY: see above; the functions follow C's allocation contracts.
        unsafe {
            tree_sitter::set_allocator(
                Some(ts_malloc),
                Some(ts_calloc),
                Some(ts_realloc),
                Some(ts_free),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tree_sitter_allocates_through_mimalloc() {
        let mut parser = tree_sitter::Parser::new();
        let language: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
        parser.set_language(&language).unwrap();
        let tree = parser.parse("def f():\n    return 1\n", None).unwrap();
        assert_eq!(tree.root_node().kind(), "module");
        // The parser's own struct, allocated by `ts_parser_new`, lies in mimalloc's heap (a
        // glibc allocation would not).
        let raw = parser.into_raw();
        // SAFETY: `raw` is a live parser; it is handed back to its owner right after.
        let owned = unsafe { libmimalloc_sys::mi_is_in_heap_region(raw.cast()) };
        // SAFETY: `raw` came from `into_raw` and is not used elsewhere.
        drop(unsafe { tree_sitter::Parser::from_raw(raw) });
        assert!(owned, "tree-sitter allocated outside mimalloc");
    }
}
