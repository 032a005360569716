//! Row tiles for the few-row matrix kernels (`half_panels`, `int8_panels`): how a product's rows
//! are split into register tiles, and the dispatch from a tile's height to a kernel compiled for
//! it (a const generic, so each height's accumulators live in registers).

/// Row tiles of at most `max` rows, as even as possible (14 rows in tiles of 6: 5, 5, 4), so
/// no tile is too short to keep the FMA units busy.
pub(super) fn even_tiles(rows: usize, max: usize) -> impl Iterator<Item = (usize, usize)> {
    let count = rows.div_ceil(max);
    let (base, extra) = (rows / count.max(1), rows % count.max(1));
    (0..count).scan(0, move |start, i| {
        let len = base + usize::from(i < extra);
        let tile = (*start, len);
        *start += len;
        Some(tile)
    })
}

/// Instantiates `$kernel::<R>` for every tile height up to the widest any kernel uses, and calls
/// the one for `$rows`.
macro_rules! by_tile_height {
    ($rows:expr, $kernel:ident($($arg:expr),*)) => {
        match $rows {
            1 => $kernel::<1>($($arg),*),
            2 => $kernel::<2>($($arg),*),
            3 => $kernel::<3>($($arg),*),
            4 => $kernel::<4>($($arg),*),
            5 => $kernel::<5>($($arg),*),
            6 => $kernel::<6>($($arg),*),
            7 => $kernel::<7>($($arg),*),
            8 => $kernel::<8>($($arg),*),
            9 => $kernel::<9>($($arg),*),
            10 => $kernel::<10>($($arg),*),
            11 => $kernel::<11>($($arg),*),
            12 => $kernel::<12>($($arg),*),
            13 => $kernel::<13>($($arg),*),
            14 => $kernel::<14>($($arg),*),
            15 => $kernel::<15>($($arg),*),
            16 => $kernel::<16>($($arg),*),
            17 => $kernel::<17>($($arg),*),
            18 => $kernel::<18>($($arg),*),
            19 => $kernel::<19>($($arg),*),
            20 => $kernel::<20>($($arg),*),
            21 => $kernel::<21>($($arg),*),
            22 => $kernel::<22>($($arg),*),
            23 => $kernel::<23>($($arg),*),
            24 => $kernel::<24>($($arg),*),
            other => unreachable!("a tile of {other} rows"),
        }
    };
}

pub(super) use by_tile_height;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_are_even_and_cover_every_row() {
        let tiles = |rows, max| even_tiles(rows, max).collect::<Vec<_>>();
        assert_eq!(tiles(14, 6), vec![(0, 5), (5, 5), (10, 4)]);
        assert_eq!(tiles(14, 24), vec![(0, 14)]);
        assert_eq!(tiles(32, 24), vec![(0, 16), (16, 16)]);
        assert_eq!(tiles(6, 6), vec![(0, 6)]);
        assert_eq!(tiles(1, 6), vec![(0, 1)]);
        assert_eq!(tiles(0, 6), vec![]);
    }
}
