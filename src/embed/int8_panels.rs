//! Matrix products for a few rows (a query) in int8 with AVX-512 VNNI: weights quantised once per
//! output column, the input quantised per row and per block of 64 inputs at each product.
//!
//! Why: a query's linear layers are skinny products (~14 rows), and in f16 (`half_panels`) one
//! core spends most of a query's time on broadcast FMAs, one input per instruction and lane.
//! `vpdpbusd` multiplies 64 byte pairs and sums them in fours into 16 int32 lanes: four inputs
//! per instruction, and the weights shrink again by half (10.6 MB for MiniLM's six layers,
//! against 21 MB in f16), which matters because recall's vector scan evicts them from L3
//! between queries.
//!
//! Quantisation (symmetric, no zero points):
//! - weight column `n`: `w_q = round(w / s_n)`, `s_n = max_k |w[k][n]| / 127`;
//! - input row `r`, block `b` of [`BLOCK`] inputs: `x_q = round(x / s_rb)`, `s_rb = max_{k in b}
//!   |x[r][k]| / 127`, stored as the unsigned byte `x_q + 128` that `vpdpbusd` wants; the
//!   `128 * sum_{k in b} w_q[k][n]` this adds is subtracted per block and column;
//! - `y[r][n] += s_n * sum_b s_rb * (sum_{k in b} x_q w_q)`, each block's sum exact in int32.
//!
//! One scale per row, as dynamic int8 usually does, loses what matters here: the inputs are
//! what the error is made of (16-bit inputs with int8 weights keep a cosine of 0.9996 to the
//! f32 path, int8 inputs 0.9976), and a row's largest input sets the step for all 384. A scale
//! per 64 inputs takes the cosine to ~0.9993 for ~a quarter more instructions (measured in
//! `docs/PERFORMANCE.md`, "int8 query products"; `cargo bench --bench embed` prints both).
//!
//! Only x86-64 with AVX-512 F/BW and VNNI gets these panels ([`Int8Panels::supported`]).

use super::tiles::even_tiles;

/// Columns per panel: sixteen int32 lanes of one AVX-512 register.
const PANEL: usize = 16;
/// Inputs per `vpdpbusd` lane.
const GROUP: usize = 4;
/// Inputs per input scale: 16 groups.
const BLOCK: usize = 64;
/// Groups per block.
const BLOCK_GROUPS: usize = BLOCK / GROUP;
/// The byte offset that makes a signed input unsigned for `vpdpbusd`.
const OFFSET: i32 = 128;

/// A linear layer's weights (`inputs x outputs`, transposed) as int8 panels of [`PANEL`]
/// columns: panel `p`, input group `g` holds 64 bytes, for each of its 16 columns the weights of
/// inputs `4g..4g+4`, so one load feeds one `vpdpbusd` per row.
pub(super) struct Int8Panels {
    data: Vec<i8>,
    /// `s_n` per column, padded to whole panels with zeros.
    scales: Vec<f32>,
    /// `128 * sum_{k in b} w_q[k][n]` per block `b` and column `n` (`b * columns + n`, columns
    /// padded like `scales`).
    block_offsets: Vec<i32>,
    inputs: usize,
    outputs: usize,
}

impl Int8Panels {
    /// Whether this CPU runs the kernel (AVX-512 F and BW with VNNI, on x86-64).
    pub(super) fn supported() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// Quantised panels of `weight_t` (`inputs x outputs`, row-major); inputs beyond a multiple
    /// of 4 and outputs beyond a multiple of 16 are padded with zero weights.
    pub(super) fn from_transposed(weight_t: &[f32], inputs: usize, outputs: usize) -> Self {
        assert_eq!(weight_t.len(), inputs * outputs);
        let panels = outputs.div_ceil(PANEL);
        let groups = inputs.div_ceil(GROUP);
        let columns = panels * PANEL;
        let mut scales = vec![0f32; columns];
        let mut block_offsets = vec![0i32; inputs.div_ceil(BLOCK) * columns];
        let mut data = vec![0i8; panels * groups * GROUP * PANEL];
        for col in 0..outputs {
            let max = (0..inputs)
                .map(|k| weight_t[k * outputs + col].abs())
                .fold(0f32, f32::max);
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            scales[col] = scale;
            let (p, c) = (col / PANEL, col % PANEL);
            for k in 0..inputs {
                let q = quantise(weight_t[k * outputs + col], 1.0 / scale);
                block_offsets[k / BLOCK * columns + col] += OFFSET * i32::from(q);
                let (g, j) = (k / GROUP, k % GROUP);
                data[((p * groups + g) * PANEL + c) * GROUP + j] = q;
            }
        }
        Self {
            data,
            scales,
            block_offsets,
            inputs,
            outputs,
        }
    }

    /// `out += x W` for `rows` rows of `x` (`rows x inputs`) into `out` (`rows x outputs`).
    /// Callers check [`Int8Panels::supported`] first; the panels of a CPU without it are never
    /// built.
    pub(super) fn multiply_add(&self, x: &[f32], rows: usize, out: &mut [f32]) {
        assert!(x.len() >= rows * self.inputs && out.len() >= rows * self.outputs);
        #[cfg(target_arch = "x86_64")]
        {
            assert!(Self::supported(), "int8 panels need AVX-512 VNNI");
            // SAFETY: the features were just detected; the bounds are asserted above.
            unsafe { vnni::multiply_add(self, x, rows, out) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (x, rows, out);
            unreachable!("int8 panels are only built on x86-64");
        }
    }

    fn groups(&self) -> usize {
        self.inputs.div_ceil(GROUP)
    }

    fn blocks(&self) -> usize {
        self.inputs.div_ceil(BLOCK)
    }

    /// Columns including the padding of the last panel.
    fn columns(&self) -> usize {
        self.outputs.div_ceil(PANEL) * PANEL
    }
}

/// `round(value * inverse_scale)`, clamped to the symmetric int8 range.
#[inline(always)]
fn quantise(value: f32, inverse_scale: f32) -> i8 {
    (value * inverse_scale).round().clamp(-127.0, 127.0) as i8
}

/// Quantises rows `start..start+len` of `x` (`inputs` wide) into `tile` as `groups x len` 4-byte
/// words (the unsigned bytes of inputs `4g..4g+4` of row `r` at `g * len + r`, so a kernel
/// broadcasts them from one address with constant offsets), and each row's scale per block into
/// `block_scales` (`b * len + r`).
fn quantise_tile(
    x: &[f32],
    inputs: usize,
    start: usize,
    len: usize,
    tile: &mut Vec<u32>,
    block_scales: &mut Vec<f32>,
) {
    let groups = inputs.div_ceil(GROUP);
    tile.clear();
    // Padded inputs meet zero weights, so any byte serves; 128 is "zero".
    tile.resize(groups * len, u32::from_le_bytes([OFFSET as u8; 4]));
    block_scales.clear();
    block_scales.resize(inputs.div_ceil(BLOCK) * len, 0.0);
    for r in 0..len {
        let row = &x[(start + r) * inputs..(start + r + 1) * inputs];
        for (b, block) in row.chunks(BLOCK).enumerate() {
            let max = block.iter().map(|v| v.abs()).fold(0f32, f32::max);
            let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
            block_scales[b * len + r] = scale;
            let inverse = 1.0 / scale;
            for (i, values) in block.chunks(GROUP).enumerate() {
                let mut bytes = [OFFSET as u8; 4];
                for (byte, &v) in bytes.iter_mut().zip(values) {
                    *byte = (i32::from(quantise(v, inverse)) + OFFSET) as u8;
                }
                tile[(b * BLOCK_GROUPS + i) * len + r] = u32::from_le_bytes(bytes);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::{even_tiles, quantise_tile, Int8Panels, BLOCK_GROUPS, GROUP, PANEL};
    use crate::embed::tiles::by_tile_height;
    use std::arch::x86_64::*;

    /// Tiles of up to 12 rows x 16 columns: 12 int32 accumulators for the block in progress and
    /// 12 f32 totals, beside the weights, within AVX-512's 32 registers.
    const TILE_ROWS: usize = 12;

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn multiply_add(w: &Int8Panels, x: &[f32], rows: usize, out: &mut [f32]) {
        let (mut tile, mut block_scales) = (Vec::new(), Vec::new());
        for (start, len) in even_tiles(rows, TILE_ROWS) {
            quantise_tile(x, w.inputs, start, len, &mut tile, &mut block_scales);
            for p in 0..w.outputs.div_ceil(PANEL) {
                // SAFETY: the tile's rows exist in `out` (asserted by the caller); `tile` holds
                // `groups x len` words, `block_scales` `blocks x len` and the panel `groups x 64`
                // bytes.
                unsafe { by_tile_height!(len, tile_kernel(w, &tile, &block_scales, start, p, out)) }
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn tile_kernel<const R: usize>(
        w: &Int8Panels,
        tile: &[u32],
        block_scales: &[f32],
        start: usize,
        p: usize,
        out: &mut [f32],
    ) {
        let groups = w.groups();
        debug_assert_eq!(tile.len(), groups * R);
        debug_assert_eq!(block_scales.len(), w.blocks() * R);
        let panel_bytes = groups * GROUP * PANEL;
        let panel = w.data[p * panel_bytes..(p + 1) * panel_bytes].as_ptr();
        let col = p * PANEL;
        let tile = tile.as_ptr();
        let mut totals = [_mm512_setzero_ps(); R];
        for b in 0..w.blocks() {
            let mut acc = [_mm512_setzero_si512(); R];
            for g in b * BLOCK_GROUPS..((b + 1) * BLOCK_GROUPS).min(groups) {
                // SAFETY: `g < groups`: 64 bytes at `g*64` in the panel, R words at `g*R` in
                // `tile`.
                unsafe {
                    let weights =
                        _mm512_loadu_si512(panel.add(g * GROUP * PANEL) as *const __m512i);
                    let words = tile.add(g * R);
                    for (r, acc) in acc.iter_mut().enumerate() {
                        let inputs = _mm512_set1_epi32(*words.add(r) as i32);
                        *acc = _mm512_dpbusd_epi32(*acc, inputs, weights);
                    }
                }
            }
            // SAFETY: `block_offsets` holds `blocks x columns` values, columns padded to whole
            // panels.
            let offsets = unsafe {
                _mm512_loadu_si512(
                    w.block_offsets.as_ptr().add(b * w.columns() + col) as *const __m512i
                )
            };
            for (r, (total, acc)) in totals.iter_mut().zip(&acc).enumerate() {
                let exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(*acc, offsets));
                *total = _mm512_fmadd_ps(exact, _mm512_set1_ps(block_scales[b * R + r]), *total);
            }
        }
        let width = (w.outputs - col).min(PANEL);
        // SAFETY: `scales` is padded to whole panels.
        let scales = unsafe { _mm512_loadu_ps(w.scales.as_ptr().add(col)) };
        for (r, total) in totals.iter().enumerate() {
            let mut lanes = [0f32; PANEL];
            // SAFETY: `lanes` holds 16 values.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), _mm512_mul_ps(*total, scales)) };
            let at = (start + r) * w.outputs + col;
            for (d, v) in out[at..at + width].iter_mut().zip(&lanes) {
                *d += v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer sums the kernel must reproduce exactly, computed one product at a time.
    fn scalar_product(w: &Int8Panels, x: &[f32], rows: usize) -> Vec<f32> {
        let groups = w.groups();
        let mut out = vec![0f32; rows * w.outputs];
        let (mut tile, mut block_scales) = (Vec::new(), Vec::new());
        for r in 0..rows {
            quantise_tile(x, w.inputs, r, 1, &mut tile, &mut block_scales);
            let bytes: Vec<i32> = tile
                .iter()
                .flat_map(|word| word.to_le_bytes())
                .map(|b| i32::from(b) - OFFSET)
                .collect();
            for col in 0..w.outputs {
                let (p, c) = (col / PANEL, col % PANEL);
                let mut value = 0f32;
                for (b, scale) in block_scales.iter().enumerate() {
                    let sum: i32 = (b * BLOCK..((b + 1) * BLOCK).min(w.inputs))
                        .map(|k| {
                            let (g, j) = (k / GROUP, k % GROUP);
                            bytes[k] * i32::from(w.data[((p * groups + g) * PANEL + c) * GROUP + j])
                        })
                        .sum();
                    value += sum as f32 * scale;
                }
                out[r * w.outputs + col] = value * w.scales[col];
            }
        }
        out
    }

    fn values(count: usize, seed: usize, spread: f32) -> Vec<f32> {
        (0..count)
            .map(|i| (((i * 104_729 + seed * 7919) % 997) as f32 / 997.0 - 0.5) * spread)
            .collect()
    }

    /// The kernel against scalar integer sums over the same quantised values, for every row
    /// count a tile can have and ragged input (several blocks, the last one partial) and column
    /// counts; and both against the f32 product within the quantisation's error.
    #[test]
    fn kernel_matches_the_scalar_product() {
        if !Int8Panels::supported() {
            eprintln!("skipped: this CPU lacks AVX-512 VNNI, so the kernel is never used");
            return;
        }
        let (inputs, outputs) = (137, 45);
        let weight_t = values(inputs * outputs, 1, 0.2);
        let panels = Int8Panels::from_transposed(&weight_t, inputs, outputs);
        assert_eq!(panels.data.len(), 3 * 35 * GROUP * PANEL);
        assert_eq!(panels.blocks(), 3);
        for rows in [1, 2, 5, 11, 12, 13, 14, 24, 25, 32, 33, 64, 97, 128] {
            let x = values(rows * inputs, rows, 3.0);
            let bias: Vec<f32> = (0..rows * outputs).map(|i| i as f32 * 0.01).collect();
            let mut out = bias.clone();
            panels.multiply_add(&x, rows, &mut out);
            let scalar = scalar_product(&panels, &x, rows);
            for r in 0..rows {
                for c in 0..outputs {
                    let at = r * outputs + c;
                    let (got, expected) = (out[at] - bias[at], scalar[at]);
                    assert!(
                        (got - expected).abs() <= 1e-5 * (1.0 + expected.abs()),
                        "rows {rows}, ({r}, {c}): {got} vs {expected}"
                    );
                    let exact: f32 = (0..inputs)
                        .map(|k| x[r * inputs + k] * weight_t[k * outputs + c])
                        .sum();
                    // Each term is off by at most half a step of either factor.
                    let bound = inputs as f32 * (1.5 * 0.1 / 127.0 + 0.1 * 1.5 / 127.0);
                    assert!(
                        (got - exact).abs() <= bound,
                        "rows {rows}, ({r}, {c}): {got} vs f32 {exact}"
                    );
                }
            }
        }
    }

    /// A block of small inputs keeps its precision beside a block holding a large one: the point
    /// of a scale per block. With one scale per row, block 0 below would round to zero (a step
    /// of 100 / 127 against inputs of at most 0.01).
    #[test]
    fn a_large_input_does_not_coarsen_another_blocks_step() {
        let (inputs, outputs) = (2 * BLOCK, 16);
        let weight_t = values(inputs * outputs, 5, 1.0);
        let panels = Int8Panels::from_transposed(&weight_t, inputs, outputs);
        let mut large_only = vec![0f32; inputs];
        large_only[BLOCK + 3] = 100.0;
        let mut x = values(inputs, 6, 0.02);
        x[BLOCK..].copy_from_slice(&large_only[BLOCK..]);
        let (both, large) = (
            scalar_product(&panels, &x, 1),
            scalar_product(&panels, &large_only, 1),
        );
        // Block 0's share: 64 terms, each off by half an input step (0.01 / 254) times a weight
        // of at most 0.5 plus half a weight step (0.5 / 254) times an input of at most 0.01.
        let bound = BLOCK as f32 * 2.0 * (0.01 * 0.5 / 254.0);
        let mut clearly_nonzero = 0;
        for c in 0..outputs {
            let small: f32 = (0..BLOCK).map(|k| x[k] * weight_t[k * outputs + c]).sum();
            let share = both[c] - large[c];
            assert!(
                (share - small).abs() <= bound,
                "column {c}: block 0 gives {share}, exactly {small}"
            );
            clearly_nonzero += usize::from(small.abs() > 4.0 * bound);
        }
        assert!(clearly_nonzero > 0, "the inputs must make block 0 matter");
    }

    #[test]
    fn zero_rows_and_columns_stay_zero() {
        let (inputs, outputs) = (8, 16);
        let mut weight_t = values(inputs * outputs, 3, 1.0);
        for k in 0..inputs {
            weight_t[k * outputs + 5] = 0.0;
        }
        let panels = Int8Panels::from_transposed(&weight_t, inputs, outputs);
        assert_eq!(panels.block_offsets[5], 0);
        if !Int8Panels::supported() {
            return;
        }
        let mut x = values(2 * inputs, 4, 2.0);
        x[..inputs].fill(0.0);
        let mut out = vec![0f32; 2 * outputs];
        panels.multiply_add(&x, 2, &mut out);
        assert!(out[..outputs].iter().all(|&v| v == 0.0), "{out:?}");
        assert_eq!(out[outputs + 5], 0.0);
        assert!(out[outputs..].iter().any(|&v| v != 0.0));
    }
}
