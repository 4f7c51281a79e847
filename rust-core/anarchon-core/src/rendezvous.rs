//! Rendezvous (highest-random-weight) hashing: which live instances are the
//! candidates of a job.
//!
//! Every member gets a score for every key; the members with the highest
//! scores are the key's candidates, in that order (rank 0 first). Removing a
//! member only moves the keys it ranked on, and every instance computes the
//! same ranks from the same member list, with no coordination
//! (docs/engine.md, "Delays and rendezvous ranking").
//!
//! The score must be the same in every process of a fleet, whatever its
//! platform, Rust version or build, so it is computed by a hash fixed here
//! (never std's `DefaultHasher`/`RandomState`, which may change or be seeded):
//!
//! ```text
//! h(tag, s)         = fmix64(fnv1a64([tag] ++ u64_le(len(s)) ++ utf8(s)))
//! score(member, key) = fmix64(h(b'm', member) ^ h(b'k', key))
//! ```
//!
//! `fnv1a64` is 64-bit FNV-1a (offset basis `0xcbf29ce484222325`, prime
//! `0x100000001b3`) and `fmix64` is MurmurHash3's 64-bit finalizer. Hashing
//! each string once and mixing the two 64-bit hashes keeps the cost per
//! (member, key) pair at two multiplications, whatever the lengths of the
//! strings. Ties of equal scores (about one in 2^64) go to the smaller
//! instance id (byte order).

use std::cmp::Reverse;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
const MEMBER_TAG: u8 = b'm';
const KEY_TAG: u8 = b'k';

/// 64-bit FNV-1a, continued from `h` over `bytes`.
fn fnv1a64(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// MurmurHash3's 64-bit finalizer: every input bit flips about half the output bits.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The hash of one string, tagged by its role (member or key).
fn string_hash(tag: u8, s: &str) -> u64 {
    let len = u64::try_from(s.len()).unwrap_or(u64::MAX);
    let h = fnv1a64(FNV_OFFSET, &[tag]);
    let h = fnv1a64(h, &len.to_le_bytes());
    fmix64(fnv1a64(h, s.as_bytes()))
}

fn member_hash(member: &str) -> u64 {
    string_hash(MEMBER_TAG, member)
}

fn key_hash(key: &str) -> u64 {
    string_hash(KEY_TAG, key)
}

fn mix(member_hash: u64, key_hash: u64) -> u64 {
    fmix64(member_hash ^ key_hash)
}

/// True if a member with `score` ranks above one with `own`; on equal
/// scores, the member whose id sorts first ranks above.
fn outranks(score: u64, id_sorts_first: bool, own: u64) -> bool {
    score > own || (score == own && id_sorts_first)
}

/// The weight of `member` for `key`: higher ranks first.
pub fn score(member: &str, key: &str) -> u64 {
    mix(member_hash(member), key_hash(key))
}

/// The distinct members, sorted by id.
fn distinct<'a>(members: &[&'a str]) -> Vec<&'a str> {
    let mut out = members.to_vec();
    out.sort_unstable();
    out.dedup();
    out
}

/// For each key, the 0-based rank of `me` among `members` (higher score
/// first, equal scores by instance id), or None when the rank is `k` or
/// more, or `me` is not a member. Duplicate member ids count once.
///
/// Costs O(keys × members) score computations and allocates only the result
/// and one hash per member.
pub fn ranks(members: &[&str], me: &str, keys: &[&str], k: usize) -> Vec<Option<u32>> {
    let others = distinct(members);
    if k == 0 || others.binary_search(&me).is_err() {
        return vec![None; keys.len()];
    }
    // A member whose id sorts before `me` outranks it on an equal score too.
    let (before, after): (Vec<&str>, Vec<&str>) = others
        .into_iter()
        .filter(|m| *m != me)
        .partition(|m| *m < me);
    let before: Vec<u64> = before.into_iter().map(member_hash).collect();
    let after: Vec<u64> = after.into_iter().map(member_hash).collect();
    let mine = member_hash(me);
    keys.iter()
        .map(|key| {
            let kh = key_hash(key);
            let own = mix(mine, kh);
            let above = before
                .iter()
                .filter(|m| outranks(mix(**m, kh), true, own))
                .count()
                + after
                    .iter()
                    .filter(|m| outranks(mix(**m, kh), false, own))
                    .count();
            if above < k {
                u32::try_from(above).ok()
            } else {
                None
            }
        })
        .collect()
}

/// The top `k` distinct members of `key`, rank 0 first.
pub fn candidates(members: &[&str], key: &str, k: usize) -> Vec<String> {
    let kh = key_hash(key);
    let mut scored: Vec<(Reverse<u64>, &str)> = distinct(members)
        .into_iter()
        .map(|m| (Reverse(mix(member_hash(m), kh)), m))
        .collect();
    scored.sort_unstable();
    scored
        .into_iter()
        .take(k)
        .map(|(_, m)| m.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: &str, n: usize) -> Vec<String> {
        (0..n).map(|i| format!("{prefix}{i}")).collect()
    }

    fn refs(strings: &[String]) -> Vec<&str> {
        strings.iter().map(String::as_str).collect()
    }

    /// The rank of `me` for `key`, by sorting every member (the definition).
    fn rank_by_sorting(members: &[&str], me: &str, key: &str) -> Option<usize> {
        candidates(members, key, usize::MAX)
            .iter()
            .position(|m| m == me)
    }

    #[test]
    fn fnv_and_fmix_match_their_published_values() {
        assert_eq!(fnv1a64(FNV_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(FNV_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(FNV_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(fmix64(0), 0);
        assert_eq!(fmix64(1), 0xb456_bcfc_34c2_cb2c);
    }

    #[test]
    fn known_answers() {
        // Pinned: every process of a fleet must compute these same values.
        assert_eq!(score("web-1", "nightly-report"), 0x166e_c5ee_ffe1_1d56);
        assert_eq!(score("web-2", "nightly-report"), 0xc3af_f3c1_036d_447b);
        assert_eq!(score("", ""), 0xb330_97d2_730d_c10e);
        assert_eq!(score("instance-é", "job/ü"), 0x81a6_9baa_949d_d016);
        let members = ["a", "b", "c", "d", "e"];
        assert_eq!(candidates(&members, "job", 5), ["c", "a", "b", "d", "e"]);
    }

    #[test]
    fn the_two_strings_are_not_confused() {
        assert_ne!(score("ab", "c"), score("a", "bc"));
        assert_ne!(score("a", "b"), score("b", "a"));
        assert_ne!(score("x", ""), score("", "x"));
    }

    #[test]
    fn deterministic_and_independent_of_member_order() {
        let members = names("i-", 7);
        let mut members = refs(&members);
        let keys = names("job-", 500);
        let keys = refs(&keys);
        let first = ranks(&members, "i-3", &keys, 3);
        assert_eq!(first, ranks(&members, "i-3", &keys, 3));
        members.reverse();
        assert_eq!(first, ranks(&members, "i-3", &keys, 3));
        assert_eq!(candidates(&members, "job-1", 3), {
            members.sort_unstable();
            candidates(&members, "job-1", 3)
        });
    }

    #[test]
    fn ranks_agree_with_candidates() {
        let members = names("node-", 9);
        let members = refs(&members);
        let keys = names("k", 300);
        let keys = refs(&keys);
        for me in &members {
            for k in [1, 2, 5, 9, 20] {
                let got = ranks(&members, me, &keys, k);
                for (key, rank) in keys.iter().zip(got) {
                    let want = rank_by_sorting(&members, me, key).filter(|r| *r < k);
                    assert_eq!(rank.map(|r| r as usize), want, "{me} {key} k={k}");
                }
            }
        }
    }

    #[test]
    fn every_rank_below_k_is_held_by_exactly_one_member() {
        let members = names("m", 6);
        let members = refs(&members);
        let keys = names("key", 200);
        let keys = refs(&keys);
        let per_member: Vec<Vec<Option<u32>>> = members
            .iter()
            .map(|me| ranks(&members, me, &keys, 3))
            .collect();
        for i in 0..keys.len() {
            let mut held: Vec<u32> = per_member.iter().filter_map(|r| r[i]).collect();
            held.sort_unstable();
            assert_eq!(held, vec![0, 1, 2]);
        }
    }

    #[test]
    fn balanced() {
        // 20,000 keys over 10 members: about 2,000 rank-0 keys each (sd ≈ 42).
        let members = names("instance-", 10);
        let members = refs(&members);
        let keys = names("job-", 20_000);
        let keys = refs(&keys);
        for me in &members {
            let owned = ranks(&members, me, &keys, 1)
                .iter()
                .filter(|r| r.is_some())
                .count();
            assert!((1_800..2_200).contains(&owned), "{me}: {owned}");
            let second = ranks(&members, me, &keys, 2)
                .iter()
                .filter(|r| **r == Some(1))
                .count();
            assert!((1_800..2_200).contains(&second), "{me}: {second}");
        }
    }

    #[test]
    fn removing_a_member_moves_only_its_keys() {
        let members = names("web-", 8);
        let members = refs(&members);
        let remaining: Vec<&str> = members.iter().copied().filter(|m| *m != "web-5").collect();
        let keys = names("job-", 5_000);
        let mut moved = 0;
        for key in &keys {
            let before = candidates(&members, key, 1);
            let after = candidates(&remaining, key, 1);
            if before[0] == "web-5" {
                moved += 1;
                assert_ne!(after[0], "web-5");
            } else {
                assert_eq!(before, after, "{key}");
            }
            // The order of the members that stay is unchanged.
            let full: Vec<String> = candidates(&members, key, 8)
                .into_iter()
                .filter(|m| m != "web-5")
                .collect();
            assert_eq!(full, candidates(&remaining, key, 7));
        }
        assert!((450..800).contains(&moved), "{moved}");
    }

    #[test]
    fn k_at_or_above_the_member_count() {
        let members = ["a", "b", "c"];
        let keys = ["x", "y", "z"];
        for k in [3, 4, usize::MAX] {
            for me in members {
                assert!(ranks(&members, me, &keys, k).iter().all(Option::is_some));
            }
            assert_eq!(candidates(&members, "x", k).len(), 3);
        }
        assert!(ranks(&members, "a", &keys, 0).iter().all(Option::is_none));
        assert!(candidates(&members, "x", 0).is_empty());
    }

    #[test]
    fn empty_members_and_absent_me() {
        let keys = ["x", "y"];
        assert_eq!(ranks(&[], "a", &keys, 3), vec![None, None]);
        assert!(candidates(&[], "x", 3).is_empty());
        assert_eq!(ranks(&["b", "c"], "a", &keys, 3), vec![None, None]);
        assert!(ranks(&["a"], "a", &[], 3).is_empty());
        assert_eq!(ranks(&["a"], "a", &keys, 1), vec![Some(0), Some(0)]);
    }

    #[test]
    fn duplicate_members_count_once() {
        let keys = names("job-", 200);
        let keys = refs(&keys);
        let once = ranks(&["a", "b", "c"], "b", &keys, 3);
        let twice = ranks(&["a", "b", "c", "a", "b", "c", "c"], "b", &keys, 3);
        assert_eq!(once, twice);
        assert_eq!(
            candidates(&["a", "a", "b"], "job-1", 3),
            candidates(&["a", "b"], "job-1", 3)
        );
    }

    #[test]
    fn equal_scores_go_to_the_smaller_id() {
        assert!(outranks(5, false, 4));
        assert!(!outranks(4, true, 5));
        assert!(outranks(5, true, 5));
        assert!(!outranks(5, false, 5));
        // `candidates` sorts the same way: (score descending, id ascending).
        let mut scored = vec![(Reverse(5_u64), "b"), (Reverse(5), "a"), (Reverse(6), "c")];
        scored.sort_unstable();
        assert_eq!(
            scored,
            vec![(Reverse(6), "c"), (Reverse(5), "a"), (Reverse(5), "b")]
        );
    }
}
