//! Matrix products for a few rows (a query, up to 128 tokens) against weights kept as f16 panels.
//!
//! Why: a query is ~14 tokens, so each of MiniLM's linear layers is a skinny product whose cost
//! is reading the weights, not multiplying them. In f32 the six layers are 42 MB, more than this
//! machine's 32 MB L3, so every query streams them from DRAM again, and `gemm` packs them for a
//! general product first. Stored as f16 the weights are 21 MB (they stay in L3 between queries)
//! and the kernel below reads each 16-column panel once, converting on the fly with F16C, while
//! every row of the input stays in registers.
//!
//! Precision: f16 keeps 11 significant bits, so each weight moves by at most 2^-12 of itself;
//! accumulation stays f32. The resulting embeddings agree with the f32 path to a cosine above
//! 0.9999 (tested in `bert`), far below the differences between two models: vectors from either
//! path are compared as one model's.
//!
//! Only x86-64 with AVX2, FMA and F16C gets panels ([`HalfPanels::supported`]); elsewhere the
//! encoder keeps using the f32 `gemm` path for every product.

use super::tiles::even_tiles;

/// Columns per panel: one AVX-512 register, two AVX2 ones.
const PANEL: usize = 16;

/// The transpose of a linear layer's weights (`inputs x outputs`), as f16 in panels of
/// [`PANEL`] columns: panel `p` holds, for every input `k`, columns `16p..16p+16` of row `k`
/// contiguously, so the kernel streams one panel front to back.
pub(super) struct HalfPanels {
    data: Vec<u16>,
    inputs: usize,
    outputs: usize,
}

impl HalfPanels {
    /// Whether this CPU runs the kernel (AVX2, FMA and F16C on x86-64).
    pub(super) fn supported() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("f16c")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Panels of `weight_t` (`inputs x outputs`, row-major), rounded to f16; outputs beyond a
    /// multiple of 16 are padded with zeros.
    pub(super) fn from_transposed(weight_t: &[f32], inputs: usize, outputs: usize) -> Self {
        assert_eq!(weight_t.len(), inputs * outputs);
        let panels = outputs.div_ceil(PANEL);
        let mut data = vec![0u16; panels * inputs * PANEL];
        for p in 0..panels {
            let panel = &mut data[p * inputs * PANEL..(p + 1) * inputs * PANEL];
            for k in 0..inputs {
                for c in 0..PANEL {
                    let col = p * PANEL + c;
                    if col < outputs {
                        panel[k * PANEL + c] = f32_to_f16(weight_t[k * outputs + col]);
                    }
                }
            }
        }
        Self {
            data,
            inputs,
            outputs,
        }
    }

    /// `out += x W` for `rows` rows of `x` (`rows x inputs`) into `out` (`rows x outputs`).
    /// Callers check [`HalfPanels::supported`] first; the panels of a CPU without it are never
    /// built.
    pub(super) fn multiply_add(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        assert!(x.len() >= rows * self.inputs && out.len() >= rows * self.outputs);
        #[cfg(target_arch = "x86_64")]
        {
            assert!(Self::supported(), "half panels need AVX2, FMA and F16C");
            // SAFETY: the features were just detected; the bounds are asserted above.
            unsafe {
                if avx512::supported() {
                    avx512::multiply_add(self, x, rows, out)
                } else {
                    avx2::multiply_add(self, x, rows, out)
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (x, rows, out);
            unreachable!("half panels are only built on x86-64");
        }
    }
}

/// Rounds to the nearest f16 (ties to even), saturating to infinity; subnormals are kept.
fn f32_to_f16(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x007f_ffff;
    if exponent == 0xff {
        // Infinity or NaN (a NaN keeps a mantissa bit).
        return sign | 0x7c00 | if mantissa != 0 { 0x200 } else { 0 };
    }
    let unbiased = exponent - 127;
    if unbiased > 15 {
        return sign | 0x7c00;
    }
    if unbiased >= -14 {
        // Normal: 10 of 23 mantissa bits, rounded to nearest even.
        let half = ((unbiased + 15) as u32) << 10 | (mantissa >> 13);
        let rest = mantissa & 0x1fff;
        let round_up = rest > 0x1000 || (rest == 0x1000 && (half & 1) == 1);
        // A carry out of the mantissa correctly bumps the exponent (up to infinity).
        return sign | (half + u32::from(round_up)) as u16;
    }
    if unbiased < -25 {
        return sign;
    }
    // Subnormal: the implicit bit joins the mantissa, shifted into place with rounding.
    let full = mantissa | 0x0080_0000;
    let shift = (-1 - unbiased) as u32; // 14..=24 bits dropped from the 24-bit significand
    let half = full >> shift;
    let rest = full & ((1 << shift) - 1);
    let midpoint = 1 << (shift - 1);
    let round_up = rest > midpoint || (rest == midpoint && (half & 1) == 1);
    sign | (half + u32::from(round_up)) as u16
}

/// The f32 value of an f16 bit pattern (for tests and the scalar reference).
#[cfg(test)]
fn f16_to_f32(half: u16) -> f32 {
    let sign = u32::from(half & 0x8000) << 16;
    let exponent = u32::from((half >> 10) & 0x1f);
    let mantissa = u32::from(half & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise.
            let shift = m.leading_zeros() - 21;
            let m = (m << shift) & 0x3ff;
            sign | ((113 - shift) << 23) | (m << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Rows `start..start+len` of `x` (`rows x inputs`) transposed to `inputs x len`, so a kernel
/// reads the tile's `len` values of input `k` from one address with constant offsets.
fn transpose_tile(x: &[f32], inputs: usize, start: usize, len: usize, xt: &mut Vec<f32>) {
    xt.clear();
    xt.resize(inputs * len, 0.0);
    for r in 0..len {
        let row = &x[(start + r) * inputs..(start + r + 1) * inputs];
        for (k, &v) in row.iter().enumerate() {
            xt[k * len + r] = v;
        }
    }
}

/// Runs `kernel(xt, start, len, panel)` for every row tile of at most `max_rows` rows (its rows
/// transposed into `xt`) against every panel; a tile's transposed rows (at most 24 x 1536
/// values) and a panel (at most 48 KB) stay in L1/L2 while they are used.
#[inline(always)]
fn for_each_tile(
    w: &HalfPanels,
    x: &[f32],
    rows: usize,
    max_rows: usize,
    mut kernel: impl FnMut(&[f32], usize, usize, usize),
) {
    let mut xt = Vec::new();
    for (start, len) in even_tiles(rows, max_rows) {
        transpose_tile(x, w.inputs, start, len, &mut xt);
        for p in 0..w.outputs.div_ceil(PANEL) {
            kernel(&xt, start, len, p);
        }
    }
}

/// Adds a tile's 16-column accumulator row into `out` (fewer columns at a padded right edge).
#[inline(always)]
fn add_into(dst: &mut [f32], lanes: &[f32; PANEL]) {
    for (d, v) in dst.iter_mut().zip(lanes) {
        *d += v;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{for_each_tile, HalfPanels, PANEL};
    use crate::embed::tiles::by_tile_height;
    use std::arch::x86_64::*;

    /// Tiles of up to 24 rows x 16 columns: 24 accumulators + 1 weight register of AVX-512's 32,
    /// and each input value is broadcast straight from memory into its FMA.
    const TILE_ROWS: usize = 24;

    /// Whether this CPU has what [`multiply_add`] is compiled for.
    pub(super) fn supported() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
    }

    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    pub(super) unsafe fn multiply_add(w: &HalfPanels, x: &[f32], rows: usize, out: &mut [f32]) {
        for_each_tile(w, x, rows, TILE_ROWS, |xt, start, len, p| {
            // SAFETY: the tile's rows exist in `out` (asserted by the caller); `xt` holds
            // `inputs x len` values and the panel `inputs x 16`.
            unsafe { by_tile_height!(len, tile_kernel(w, xt, start, p, out)) }
        });
    }

    #[target_feature(enable = "avx512f,avx2,fma,f16c")]
    #[inline]
    unsafe fn tile_kernel<const R: usize>(
        w: &HalfPanels,
        xt: &[f32],
        start: usize,
        p: usize,
        out: &mut [f32],
    ) {
        let inputs = w.inputs;
        debug_assert_eq!(xt.len(), inputs * R);
        let panel = w.data[p * inputs * PANEL..(p + 1) * inputs * PANEL].as_ptr();
        let xt = xt.as_ptr();
        let mut acc = [_mm512_setzero_ps(); R];
        for k in 0..inputs {
            // SAFETY: `k < inputs`: 16 halves at `k*16` in the panel, R values at `k*R` in `xt`.
            unsafe {
                let weights =
                    _mm512_cvtph_ps(_mm256_loadu_si256(panel.add(k * PANEL) as *const __m256i));
                let column = xt.add(k * R);
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm512_fmadd_ps(_mm512_set1_ps(*column.add(r)), weights, *acc);
                }
            }
        }
        let col = p * PANEL;
        let width = (w.outputs - col).min(PANEL);
        for (r, acc) in acc.iter().enumerate() {
            let mut lanes = [0f32; PANEL];
            // SAFETY: `lanes` holds 16 values.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), *acc) };
            let at = (start + r) * w.outputs + col;
            super::add_into(&mut out[at..at + width], &lanes);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{for_each_tile, HalfPanels, PANEL};
    use crate::embed::tiles::by_tile_height;
    use std::arch::x86_64::*;

    /// Tiles of up to 6 rows x 16 columns: 12 accumulators + 2 weights + 1 broadcast within
    /// AVX2's 16 registers.
    const TILE_ROWS: usize = 6;

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn multiply_add(w: &HalfPanels, x: &[f32], rows: usize, out: &mut [f32]) {
        for_each_tile(w, x, rows, TILE_ROWS, |xt, start, len, p| {
            // SAFETY: as in the AVX-512 kernel; `len <= 6` here.
            unsafe { by_tile_height!(len, tile_kernel(w, xt, start, p, out)) }
        });
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn tile_kernel<const R: usize>(
        w: &HalfPanels,
        xt: &[f32],
        start: usize,
        p: usize,
        out: &mut [f32],
    ) {
        let inputs = w.inputs;
        debug_assert_eq!(xt.len(), inputs * R);
        let panel = w.data[p * inputs * PANEL..(p + 1) * inputs * PANEL].as_ptr();
        let xt = xt.as_ptr();
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        for k in 0..inputs {
            // SAFETY: `k < inputs`: 16 halves at `k*16` in the panel, R values at `k*R` in `xt`.
            unsafe {
                let halves = _mm256_loadu_si256(panel.add(k * PANEL) as *const __m256i);
                let low = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
                let high = _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(halves));
                let column = xt.add(k * R);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let b = _mm256_broadcast_ss(&*column.add(r));
                    acc[0] = _mm256_fmadd_ps(b, low, acc[0]);
                    acc[1] = _mm256_fmadd_ps(b, high, acc[1]);
                }
            }
        }
        let col = p * PANEL;
        let width = (w.outputs - col).min(PANEL);
        for (r, acc) in acc.iter().enumerate() {
            let mut lanes = [0f32; PANEL];
            // SAFETY: `lanes` holds 16 values.
            unsafe {
                _mm256_storeu_ps(lanes.as_mut_ptr(), acc[0]);
                _mm256_storeu_ps(lanes.as_mut_ptr().add(8), acc[1]);
            }
            let at = (start + r) * w.outputs + col;
            super::add_into(&mut out[at..at + width], &lanes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_rounding_matches_the_format() {
        for (value, bits) in [
            (0.0f32, 0x0000u16),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00), // rounds up to infinity
            (1e9, 0x7c00),
            (6.103_515_6e-5, 0x0400), // smallest normal
            (5.960_464_5e-8, 0x0001), // smallest subnormal
            (2.0e-8, 0x0000),         // below half the smallest subnormal
            (1.000_488_3, 0x3c00),    // 1 + 2^-11: a tie, to even
            (1.001_464_8, 0x3c02),    // 1 + 3*2^-11: a tie, to even (up)
        ] {
            assert_eq!(f32_to_f16(value), bits, "{value}");
        }
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
        // Every finite f16 survives the round trip exactly.
        for half in 0u16..=0xffff {
            if (half >> 10) & 0x1f == 0x1f {
                continue;
            }
            assert_eq!(f32_to_f16(f16_to_f32(half)), half, "{half:#06x}");
        }
    }

    #[test]
    fn relative_error_is_within_half_an_ulp() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let value = ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0;
            if value.abs() < 1e-4 {
                continue;
            }
            let back = f16_to_f32(f32_to_f16(value));
            assert!(
                ((back - value) / value).abs() <= 1.0 / 2048.0,
                "{value} -> {back}"
            );
        }
    }

    /// The kernel against a scalar product over the same rounded weights, for every row count
    /// a tile can have and a ragged column count.
    #[test]
    fn kernel_matches_the_scalar_product() {
        if !HalfPanels::supported() {
            eprintln!("skipped: this CPU lacks AVX2/FMA/F16C, so the kernel is never used");
            return;
        }
        let (inputs, outputs) = (37, 45);
        let weight_t: Vec<f32> = (0..inputs * outputs)
            .map(|i| ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 0.2)
            .collect();
        let panels = HalfPanels::from_transposed(&weight_t, inputs, outputs);
        assert_eq!(panels.data.len(), 3 * 16 * inputs);
        type Kernel = unsafe fn(&HalfPanels, &[f32], usize, &mut [f32]);
        let mut kernels: Vec<(&str, Kernel)> = vec![("avx2", avx2::multiply_add)];
        if avx512::supported() {
            kernels.push(("avx512", avx512::multiply_add));
        }
        for (name, kernel) in kernels {
            for rows in [1, 2, 5, 6, 7, 13, 14, 24, 25, 32, 33, 64, 97, 128] {
                let x: Vec<f32> = (0..rows * inputs)
                    .map(|i| ((i * 104_729 % 997) as f32 / 997.0 - 0.5) * 3.0)
                    .collect();
                let bias: Vec<f32> = (0..rows * outputs).map(|i| i as f32 * 0.01).collect();
                let mut out = bias.clone();
                // SAFETY: the kernel's features were detected above; the sizes match.
                unsafe { kernel(&panels, &x, rows, &mut out) };
                for r in 0..rows {
                    for c in 0..outputs {
                        let expected: f32 = bias[r * outputs + c]
                            + (0..inputs)
                                .map(|k| {
                                    x[r * inputs + k]
                                        * f16_to_f32(f32_to_f16(weight_t[k * outputs + c]))
                                })
                                .sum::<f32>();
                        let got = out[r * outputs + c];
                        assert!(
                            (got - expected).abs() <= 1e-4 * (1.0 + expected.abs()),
                            "{name}, rows {rows}, ({r}, {c}): {got} vs {expected}"
                        );
                    }
                }
            }
        }
    }
}
