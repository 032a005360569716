//! Runtime choice of the widest vector unit for plain-Rust numeric loops.
//!
//! The crate builds for baseline x86-64 (SSE2) so one binary runs everywhere; hot loops written
//! as simple generic Rust are compiled again with AVX-512 and AVX2 enabled and the widest one the
//! CPU has is picked at run time. LLVM auto-vectorises the loops; no intrinsics are needed.

/// Defines `$name` to run `$generic` compiled for the widest vector unit this CPU has: the
/// crate builds for baseline x86-64 (SSE2), so without this the elementwise passes would use a
/// quarter of an AVX-512 unit.
macro_rules! widest_simd {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) => $generic:ident) => {
        $(#[$doc])*
        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) {
                    $generic($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) {
                    $generic($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                {
                    // SAFETY: the features it was compiled for were just detected.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: as above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $generic($($arg),*)
        }
    };
}
