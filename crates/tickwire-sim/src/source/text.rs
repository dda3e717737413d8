//! Writing numbers into JSON buffers without `format!`: the synthetic source writes a few numbers
//! into every message, at hundreds of thousands of messages a second, so each number is a short
//! digit loop into the output `Vec` instead of a trip through `fmt`.

/// Appends `value` in decimal.
pub(crate) fn push_u64(out: &mut Vec<u8>, value: u64) {
    // 20 digits hold u64::MAX; digits are produced last first, then copied in order.
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = value;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

/// Appends `units * 10^-decimals` with exactly `decimals` digits after the point (none and no
/// point when `decimals` is 0), the way Binance writes prices and quantities: `units` 6_000_010
/// with 2 decimals is `60000.10`. Negative values never occur in a book and are written as 0.
pub(crate) fn push_decimal(out: &mut Vec<u8>, units: i64, decimals: u32) {
    let units = u64::try_from(units).unwrap_or(0);
    if decimals == 0 {
        push_u64(out, units);
        return;
    }
    let divisor = 10u64.pow(decimals);
    push_u64(out, units / divisor);
    out.push(b'.');
    let fraction = units % divisor;
    // Leading zeros of the fraction: compare against the powers of ten below the divisor.
    let mut power = divisor / 10;
    while power > 1 && fraction < power {
        out.push(b'0');
        power /= 10;
    }
    push_u64(out, fraction);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_match_display() {
        for value in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, value);
            assert_eq!(out, value.to_string().into_bytes());
        }
    }

    #[test]
    fn decimals_keep_their_trailing_zeros() {
        let cases: [(i64, u32, &str); 8] = [
            (6_000_010, 2, "60000.10"),
            (14, 3, "0.014"),
            (0, 3, "0.000"),
            (5_000, 4, "0.5000"),
            (100_000, 6, "0.100000"),
            (12, 0, "12"),
            (1, 1, "0.1"),
            (1_000_000_001, 9, "1.000000001"),
        ];
        for (units, decimals, expected) in cases {
            let mut out = Vec::new();
            push_decimal(&mut out, units, decimals);
            assert_eq!(
                std::str::from_utf8(&out).unwrap(),
                expected,
                "{units} / 10^{decimals}"
            );
        }
    }
}
