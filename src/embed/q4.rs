//! 4-bit `q4_0` weights, as the quantised multilingual-e5-small file stores them: blocks of 32
//! weights sharing one f16 scale, each weight a nibble offset by 8.
//!
//! Block layout (18 bytes): the scale `d` as little-endian f16, then 16 bytes whose low nibbles are
//! weights 0-15 and high nibbles weights 16-31; weight = (nibble - 8) * d.
//!
//! The encoder dequantises the layers' matrices once at load (they feed the same f32 and few-row
//! kernels as every model). The word-embedding table stays quantised ([`Q4Rows`]): 250k rows are
//! 54 MB in q4 against 384 MB in f32, and a forward pass reads only its own tokens' rows.

/// Weights per block.
pub const BLOCK_WEIGHTS: usize = 32;

/// Bytes per block: the f16 scale and 16 bytes of nibbles.
pub const BLOCK_BYTES: usize = 18;

/// Bytes `count` q4_0 weights take (`count` a multiple of [`BLOCK_WEIGHTS`]).
pub fn bytes_for(count: usize) -> usize {
    count / BLOCK_WEIGHTS * BLOCK_BYTES
}

/// Dequantises whole blocks from `blocks` into `out` (`out.len()` weights, a multiple of 32;
/// `blocks` holds at least `bytes_for(out.len())` bytes).
pub fn dequantize(blocks: &[u8], out: &mut [f32]) {
    for (block, weights) in blocks
        .chunks_exact(BLOCK_BYTES)
        .zip(out.chunks_exact_mut(BLOCK_WEIGHTS))
    {
        let scale = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        let (low, high) = weights.split_at_mut(BLOCK_WEIGHTS / 2);
        for ((byte, lo), hi) in block[2..].iter().zip(low).zip(high) {
            *lo = ((byte & 0x0F) as f32 - 8.0) * scale;
            *hi = ((byte >> 4) as f32 - 8.0) * scale;
        }
    }
}

/// A row-major matrix kept in q4_0, whose rows are dequantised on demand (an embedding table).
pub struct Q4Rows {
    blocks: Vec<u8>,
    width: usize,
}

impl Q4Rows {
    /// `rows x width` weights in `blocks` (`width` a multiple of 32, `blocks` exactly
    /// `bytes_for(rows * width)` long: the caller checked both).
    pub fn new(blocks: Vec<u8>, rows: usize, width: usize) -> Self {
        debug_assert!(width.is_multiple_of(BLOCK_WEIGHTS));
        debug_assert_eq!(blocks.len(), bytes_for(rows * width));
        Self { blocks, width }
    }

    /// Row `row`, dequantised into `out` (`width` values).
    pub fn row_into(&self, row: usize, out: &mut [f32]) {
        let bytes = bytes_for(self.width);
        dequantize(&self.blocks[row * bytes..(row + 1) * bytes], out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One block with scale `scale` and nibbles `0..16` low, `15..=0` high.
    fn block(scale: f32) -> Vec<u8> {
        let mut bytes = half::f16::from_f32(scale).to_le_bytes().to_vec();
        bytes.extend((0u8..16).map(|j| j | ((15 - j) << 4)));
        bytes
    }

    #[test]
    fn a_block_dequantises_low_nibbles_first_then_high() {
        let mut out = [0f32; 32];
        dequantize(&block(0.5), &mut out);
        for j in 0..16 {
            assert_eq!(out[j], (j as f32 - 8.0) * 0.5);
            assert_eq!(out[j + 16], ((15 - j) as f32 - 8.0) * 0.5);
        }
    }

    #[test]
    fn rows_are_read_at_their_offset() {
        let mut blocks = Vec::new();
        for scale in [1.0f32, 2.0, 4.0, 8.0] {
            blocks.extend(block(scale));
        }
        let table = Q4Rows::new(blocks, 2, 64);
        let mut row = [0f32; 64];
        table.row_into(1, &mut row);
        assert_eq!(
            (row[0], row[32], row[48]),
            (-8.0 * 4.0, -8.0 * 8.0, 7.0 * 8.0)
        );
    }
}
