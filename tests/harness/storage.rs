//! Checks of the HDFS sink's committed files, on any store: Confluent's names, and offset
//! ranges that tile each partition from 0 without a gap or an overlap.

use std::collections::BTreeMap;

/// `files`: each committed file's path and how many records it holds. Panics unless every
/// name is `<topic>+<partition>+<start>+<end>.<ext>` (offsets zero-padded to 10) and, per
/// partition, the files' ranges tile the offsets from 0 and each holds its range. Returns the
/// number of files of each partition.
pub fn check_tiling(files: &[(String, usize)], topic: &str, ext: &str) -> BTreeMap<i32, usize> {
    let mut ranges: BTreeMap<i32, Vec<(i64, i64, usize, &str)>> = BTreeMap::new();
    for (path, records) in files {
        let name = path.rsplit('/').next().unwrap_or(path);
        let stem = name
            .strip_suffix(ext)
            .unwrap_or_else(|| panic!("{path}: not a {ext} file"));
        let parts: Vec<&str> = stem.split('+').collect();
        assert_eq!(parts.len(), 4, "{path}");
        assert_eq!(parts[0], topic, "{path}");
        assert_eq!(parts[2].len(), 10, "zero-padded: {path}");
        let number = |s: &str| s.parse::<i64>().unwrap_or_else(|_| panic!("{path}"));
        let partition = number(parts[1]) as i32;
        ranges.entry(partition).or_default().push((
            number(parts[2]),
            number(parts[3]),
            *records,
            path,
        ));
    }
    let mut counts = BTreeMap::new();
    for (p, mut r) in ranges {
        r.sort();
        counts.insert(p, r.len());
        let mut next = 0;
        for (s, e, n, path) in r {
            assert_eq!(s, next, "partition {p}: files tile the offsets ({path})");
            assert_eq!(
                (e - s + 1) as usize,
                n,
                "partition {p}: {path} holds its range"
            );
            next = e + 1;
        }
    }
    counts
}
