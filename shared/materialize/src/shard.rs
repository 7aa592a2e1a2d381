//! [`Shard`]: which `subject_bucket`s one materializer decodes, and the names that keep shards
//! apart (cursor row, consumer name, lease).
//!
//! Shard `i` of `n` owns the contiguous bucket range `[i·256/n, (i+1)·256/n)`, so the `n`
//! shards of one layout cover every bucket exactly once. Each shard reads the whole change feed
//! and drops other shards' rows before fetching blobs or decoding, keeps its own cursor row in
//! `lake.ingest_progress`, reports its own consumer name to din's floor (the floor is the MIN
//! over live names, so a slow shard holds expiry back for itself) and holds its own lease.
//!
//! Shards write disjoint buckets, so they cannot duplicate each other's rows. Their window
//! transactions still conflict in DuckLake 1.5.4 (a transaction deleting from a table conflicts
//! with any concurrent insert into it, and every window updates the progress table and the
//! rollups), so the loser of a race re-runs its window on the new snapshot. The same rule is
//! what makes two *layouts* running at once (a deploy overlap) safe: their windows cannot both
//! commit over rows the other has not seen.
//!
//! The unsharded layout (`0 of 1`) keeps the names dq has always used.

use std::fmt;
use std::ops::RangeInclusive;

use dq_cloudevent::bucket::{subject_bucket, NUM_BUCKETS};
use dq_tables::schema::CURSOR_PARTITION;

use crate::config::CONSUMER;

/// One shard of a layout of `count` shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Default for Shard {
    /// The single writer: every bucket.
    fn default() -> Self {
        Shard::ALL
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard-{}-of-{}", self.index, self.count)
    }
}

impl Shard {
    /// The single writer (`0 of 1`): every bucket, dq's historical names.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Shard `index` of `count`: `1 <= count <= 256` (a shard owns at least one bucket) and
    /// `index < count`.
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 || count > NUM_BUCKETS {
            return Err(format!(
                "shard count {count} is outside 1..={NUM_BUCKETS} (one bucket per shard at most)"
            ));
        }
        if index >= count {
            return Err(format!(
                "shard index {index} is not below the shard count {count}"
            ));
        }
        Ok(Shard { index, count })
    }

    /// This shard's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The number of shards in the layout.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// True for the single writer.
    pub fn is_all(&self) -> bool {
        self.count == 1
    }

    /// The buckets this shard owns, inclusive.
    pub fn buckets(&self) -> RangeInclusive<i32> {
        let edge = |i: u32| (u64::from(i) * u64::from(NUM_BUCKETS) / u64::from(self.count)) as i32;
        edge(self.index)..=edge(self.index + 1) - 1
    }

    /// True when `subject`'s rows belong to this shard.
    pub fn owns(&self, subject: &str) -> bool {
        self.is_all() || self.buckets().contains(&subject_bucket(subject))
    }

    /// The SQL predicate on `subject_bucket` (of `alias`, if given) selecting this shard's rows.
    pub fn bucket_predicate(&self, alias: Option<&str>) -> String {
        let column = alias.map_or_else(
            || "subject_bucket".to_owned(),
            |a| format!("{a}.subject_bucket"),
        );
        let r = self.buckets();
        format!("{column} BETWEEN {} AND {}", r.start(), r.end())
    }

    /// This shard's cursor row in `lake.ingest_progress`.
    pub fn cursor_partition(&self) -> String {
        if self.is_all() {
            CURSOR_PARTITION.to_owned()
        } else {
            format!("{CURSOR_PARTITION}/{self}")
        }
    }

    /// The prefix of every shard's cursor row, of any layout (matched with `starts_with`: a
    /// `LIKE` pattern would read the `_` of `raw_events` as a wildcard).
    pub fn cursor_partition_prefix() -> String {
        format!("{CURSOR_PARTITION}/shard-")
    }

    /// The shard whose cursor row `partition` is, of any layout (`None`: not a cursor row, or
    /// one this build cannot read).
    pub fn of_cursor_partition(partition: &str) -> Option<Shard> {
        if partition == CURSOR_PARTITION {
            return Some(Shard::ALL);
        }
        let rest = partition.strip_prefix(&Shard::cursor_partition_prefix())?;
        let (index, count) = rest.split_once("-of-")?;
        Shard::new(index.parse().ok()?, count.parse().ok()?).ok()
    }

    /// Where a new cursor row of this shard starts, given the cursor rows of every layout
    /// (`rows`: each row's shard and cursor). A row's cursor says every snapshot at or below it
    /// is decoded for each of its shard's buckets, so a bucket is decoded up to the highest
    /// cursor of the rows covering it (0 when none does); the new row starts at the lowest of
    /// those over its buckets. A stale row of an older layout (the single writer's, seeded at 0
    /// and left behind by shards) does not hold a new layout back.
    pub fn seed_cursor(&self, rows: &[(Shard, i64)]) -> i64 {
        self.buckets()
            .map(|b| {
                rows.iter()
                    .filter(|(shard, _)| shard.buckets().contains(&b))
                    .map(|(_, cursor)| *cursor)
                    .max()
                    .unwrap_or(0)
            })
            .min()
            .unwrap_or(0)
    }

    /// The consumer name this shard reports to din's floor (`meta.din_consumer_progress`).
    pub fn consumer(&self) -> String {
        if self.is_all() {
            CONSUMER.to_owned()
        } else {
            format!("{CONSUMER}/{self}")
        }
    }

    /// The lease item id of this shard, from the layout's base id.
    pub fn lease_id(&self, base: &str) -> String {
        if self.is_all() {
            base.to_owned()
        } else {
            format!("{base}/{self}")
        }
    }

    /// The local lease file of this shard, from the single writer's file
    /// (`materializer.lease` → `materializer-shard-1-of-2.lease`).
    pub fn lease_file(&self, base: &std::path::Path) -> std::path::PathBuf {
        if self.is_all() {
            return base.to_path_buf();
        }
        let stem = base
            .file_stem()
            .map_or_else(|| "materializer".into(), |s| s.to_string_lossy());
        let name = match base.extension() {
            Some(ext) => format!("{stem}-{self}.{}", ext.to_string_lossy()),
            None => format!("{stem}-{self}"),
        };
        base.with_file_name(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_of_a_layout_cover_every_bucket_once() {
        for count in [1, 2, 3, 4, 7, 16, 255, 256] {
            let mut owner = vec![None; NUM_BUCKETS as usize];
            for index in 0..count {
                let shard = Shard::new(index, count).unwrap();
                let r = shard.buckets();
                assert!(!r.is_empty(), "{shard} owns no bucket");
                for b in r {
                    let slot = &mut owner[usize::try_from(b).unwrap()];
                    assert_eq!(*slot, None, "bucket {b} owned twice in {count} shards");
                    *slot = Some(index);
                }
            }
            assert!(owner.iter().all(Option::is_some), "{count} shards");
        }
        assert_eq!(Shard::new(1, 2).unwrap().buckets(), 128..=255);
        assert_eq!(Shard::new(0, 4).unwrap().buckets(), 0..=63);
        assert_eq!(Shard::ALL.buckets(), 0..=255);
    }

    #[test]
    fn owns_agrees_with_the_bucket_hash() {
        let subject = "did:erc721:137:0xbA5738a18d83D41847dfFbDC6101d37C69c9B0cF:1"; // bucket 219
        assert!(Shard::new(1, 2).unwrap().owns(subject));
        assert!(!Shard::new(0, 2).unwrap().owns(subject));
        assert!(Shard::new(3, 4).unwrap().owns(subject));
        assert!(Shard::ALL.owns(subject));
        assert_eq!(
            Shard::new(3, 4).unwrap().bucket_predicate(Some("t")),
            "t.subject_bucket BETWEEN 192 AND 255"
        );
    }

    #[test]
    fn cursor_partitions_name_their_shard() {
        for shard in [
            Shard::ALL,
            Shard::new(1, 2).unwrap(),
            Shard::new(255, 256).unwrap(),
        ] {
            assert_eq!(
                Shard::of_cursor_partition(&shard.cursor_partition()),
                Some(shard)
            );
        }
        for other in [
            "lake.signals_latest#daily_watermark",
            "lake.raw_events#snapshot/shard-2-of-2",
            "lake.raw_events#snapshot/shard-x-of-2",
            "lake.raw_events#snapshot/shard-1",
        ] {
            assert_eq!(Shard::of_cursor_partition(other), None, "{other}");
        }
    }

    #[test]
    fn a_new_row_starts_where_every_one_of_its_buckets_is_decoded() {
        let half = |i| Shard::new(i, 2).unwrap();
        let quarter = |i| Shard::new(i, 4).unwrap();
        // Nothing yet: from the start.
        assert_eq!(Shard::ALL.seed_cursor(&[]), 0);
        // Two shards ran from day one past the single writer's row seeded at 0: a new layout
        // starts at the shards' lowest cursor, the stale row does not drag it to 0.
        let rows = [(Shard::ALL, 0), (half(0), 90), (half(1), 70)];
        assert_eq!(quarter(0).seed_cursor(&rows), 90);
        assert_eq!(quarter(3).seed_cursor(&rows), 70);
        assert_eq!(Shard::ALL.seed_cursor(&rows), 70);
        // A shard that never ran covers nothing: its buckets are decoded only as far as the
        // single writer's row says.
        let rows = [(Shard::ALL, 10), (half(0), 90)];
        assert_eq!(quarter(1).seed_cursor(&rows), 90);
        assert_eq!(quarter(2).seed_cursor(&rows), 10);
        assert_eq!(Shard::ALL.seed_cursor(&rows), 10);
        // No row covers shard 1's buckets at all.
        assert_eq!(quarter(3).seed_cursor(&[(half(0), 90)]), 0);
    }

    #[test]
    fn rejects_impossible_layouts() {
        assert!(Shard::new(0, 0).is_err());
        assert!(Shard::new(2, 2).is_err());
        assert!(Shard::new(0, 257).is_err());
        assert!(Shard::new(255, 256).is_ok());
    }

    #[test]
    fn the_single_writer_keeps_dq_names() {
        assert_eq!(Shard::ALL.cursor_partition(), CURSOR_PARTITION);
        assert_eq!(Shard::ALL.consumer(), "dq");
        assert_eq!(
            Shard::ALL.lease_id("dq-prod-materializer"),
            "dq-prod-materializer"
        );
        let s = Shard::new(1, 2).unwrap();
        assert_eq!(
            s.cursor_partition(),
            "lake.raw_events#snapshot/shard-1-of-2"
        );
        assert_eq!(s.consumer(), "dq/shard-1-of-2");
        assert_eq!(
            s.lease_id("dq-prod-materializer"),
            "dq-prod-materializer/shard-1-of-2"
        );
        assert_eq!(
            s.lease_file(std::path::Path::new("/x/materializer.lease")),
            std::path::Path::new("/x/materializer-shard-1-of-2.lease")
        );
        assert!(s
            .cursor_partition()
            .starts_with(&Shard::cursor_partition_prefix()));
    }
}
