//! Deterministic jitter: the same `(instance_id, job, slot)` always waits the
//! same delay, so a retried claim reuses it, and different instances spread.

/// FNV-1a over the bytes, then the splitmix64 finalizer for good low bits.
fn hash(instance_id: &str, job: &str, slot: i64) -> u64 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    };
    feed(instance_id.as_bytes());
    feed(&[0xff]);
    feed(job.as_bytes());
    feed(&[0xff]);
    feed(&slot.to_le_bytes());
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The delay in ms, uniform in `[0, min(jitter_ms, gap_ms / 2))`.
///
/// `gap_ms` is the distance to the job's next slot; a non-positive jitter or
/// gap gives 0.
pub fn jitter_ms(instance_id: &str, job: &str, slot: i64, jitter_ms: i64, gap_ms: i64) -> i64 {
    let bound = jitter_ms.min(gap_ms / 2);
    if bound <= 0 {
        return 0;
    }
    let bound_u = bound as u64;
    // Multiply-shift maps a 64-bit hash onto [0, bound) without modulo bias worth noting.
    let scaled = (u128::from(hash(instance_id, job, slot)) * u128::from(bound_u)) >> 64;
    scaled as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic() {
        let a = jitter_ms("web-1", "tick", 1_000, 2_000, 10_000);
        let b = jitter_ms("web-1", "tick", 1_000, 2_000, 10_000);
        assert_eq!(a, b);
    }

    #[test]
    fn within_bounds_and_capped_by_gap() {
        for slot in 0..5_000 {
            let j = jitter_ms("i", "job", slot * 1_000, 2_000, 60_000);
            assert!((0..2_000).contains(&j));
            let capped = jitter_ms("i", "job", slot * 1_000, 2_000, 1_000);
            assert!((0..500).contains(&capped));
        }
    }

    #[test]
    fn zero_when_disabled() {
        assert_eq!(jitter_ms("i", "j", 5, 0, 1_000), 0);
        assert_eq!(jitter_ms("i", "j", 5, 1_000, 1), 0);
        assert_eq!(jitter_ms("i", "j", 5, -3, 1_000), 0);
    }

    #[test]
    fn roughly_uniform() {
        let mut buckets = [0u32; 10];
        for slot in 0..100_000 {
            let j = jitter_ms("web-1", "tick", slot, 1_000, i64::MAX);
            buckets[(j / 100) as usize] += 1;
        }
        for count in buckets {
            assert!((9_000..11_000).contains(&count), "bucket {count}");
        }
    }

    #[test]
    fn instances_differ() {
        let differing = (0..1_000)
            .filter(|slot| {
                jitter_ms("a", "j", *slot, 10_000, i64::MAX)
                    != jitter_ms("b", "j", *slot, 10_000, i64::MAX)
            })
            .count();
        assert!(differing > 990);
    }
}
