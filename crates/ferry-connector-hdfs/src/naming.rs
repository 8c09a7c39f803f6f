//! File names: committed files as Confluent's connector names them
//! (`<topics.dir>/<topic>/<partition path>/<topic>+<partition>+<start>+<end><ext>`, offsets
//! zero-padded) so that its readers and a directory it wrote keep working, and temporary files
//! unique per (topic, partition, generation, uuid) under `<topics.dir>/+tmp/`, so that a task
//! can find and clean its own partitions' leftovers and nobody else's.

/// The naming settings of one connector.
#[derive(Clone, Debug)]
pub struct Names {
    /// `topics.dir`.
    pub topics_dir: String,
    /// `file.delim`: between the parts of a committed file's name.
    pub delim: String,
    /// `filename.offset.zero.pad.width`.
    pub pad: usize,
    /// The format's file extension.
    pub extension: &'static str,
}

/// What a committed file name says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The topic of its records.
    pub topic: String,
    /// Their partition.
    pub partition: i32,
    /// The offset of its first record.
    pub start: i64,
    /// The offset of its last record.
    pub end: i64,
}

impl Names {
    /// The directory of a topic's committed files.
    pub fn topic_dir(&self, topic: &str) -> String {
        format!("{}/{topic}", self.topics_dir)
    }

    /// The directory of a topic's temporary files.
    pub fn tmp_topic_dir(&self, topic: &str) -> String {
        format!("{}/+tmp/{topic}", self.topics_dir)
    }

    /// A committed file's path.
    pub fn committed(
        &self,
        topic: &str,
        encoded: &str,
        partition: i32,
        start: i64,
        end: i64,
    ) -> String {
        let (d, w) = (&self.delim, self.pad);
        format!(
            "{}/{encoded}/{topic}{d}{partition}{d}{start:0w$}{d}{end:0w$}{}",
            self.topic_dir(topic),
            self.extension
        )
    }

    /// A new temporary file's path.
    pub fn tmp(
        &self,
        topic: &str,
        encoded: &str,
        partition: i32,
        generation: u64,
        unique: &str,
    ) -> String {
        format!(
            "{}/{encoded}/{}{generation}{d}{unique}_tmp{}",
            self.tmp_topic_dir(topic),
            self.tmp_prefix(topic, partition),
            self.extension,
            d = self.delim
        )
    }

    /// What every temporary file name of a topic partition starts with.
    pub fn tmp_prefix(&self, topic: &str, partition: i32) -> String {
        format!("{topic}{d}{partition}{d}", d = self.delim)
    }

    /// A committed file name (the last path element), if it is one of this format.
    pub fn parse_committed(&self, name: &str) -> Option<Committed> {
        let stem = name.strip_suffix(self.extension)?;
        let mut parts = stem.rsplitn(4, self.delim.as_str());
        let end = parts.next()?.parse().ok()?;
        let start = parts.next()?.parse().ok()?;
        let partition = parts.next()?.parse().ok()?;
        let topic = parts.next()?.to_string();
        (!topic.is_empty() && start <= end).then_some(Committed {
            topic,
            partition,
            start,
            end,
        })
    }
}

/// The last element of a path.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        Names {
            topics_dir: "/data/log".into(),
            delim: "+".into(),
            pad: 10,
            extension: ".avro",
        }
    }

    #[test]
    fn committed_names_are_confluents() {
        let n = names();
        let path = n.committed(
            "irene-shopping-log",
            "20190314/16/30/201903141630",
            3,
            0,
            599_999,
        );
        assert_eq!(
            path,
            "/data/log/irene-shopping-log/20190314/16/30/201903141630/irene-shopping-log+3+0000000000+0000599999.avro"
        );
        assert_eq!(
            n.parse_committed(file_name(&path)),
            Some(Committed {
                topic: "irene-shopping-log".into(),
                partition: 3,
                start: 0,
                end: 599_999
            })
        );
        // A name written by Confluent with another pad width still parses.
        assert_eq!(
            n.parse_committed("t+0+12+15.avro")
                .map(|c| (c.start, c.end)),
            Some((12, 15))
        );
        for other in [
            "t+0+12+15.parquet",
            "t+0+15.avro",
            "t+x+1+2.avro",
            "t+0+9+2.avro",
            "+0+1+2.avro",
        ] {
            assert_eq!(n.parse_committed(other), None, "{other}");
        }
    }

    #[test]
    fn temporary_names_are_unique_and_found_by_their_partition() {
        let n = names();
        let tmp = n.tmp(
            "irene-shopping-log",
            "20190314/16/30/201903141630",
            3,
            7,
            "4f2a",
        );
        assert_eq!(
            tmp,
            "/data/log/+tmp/irene-shopping-log/20190314/16/30/201903141630/irene-shopping-log+3+7+4f2a_tmp.avro"
        );
        assert!(file_name(&tmp).starts_with(&n.tmp_prefix("irene-shopping-log", 3)));
        assert!(!file_name(&tmp).starts_with(&n.tmp_prefix("irene-shopping-log", 33)));
        assert_eq!(n.parse_committed(file_name(&tmp)), None);
    }
}
