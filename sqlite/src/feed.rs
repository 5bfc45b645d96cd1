//! The outbox streams' new rows, handed to their consumer in memory as
//! they commit, so that `hookline serve`'s stages do not read back what the
//! writer has just written. The outbox tables stay the truth: every row is
//! written there in the same transaction as its record (and deleted once
//! its stage succeeded), and a consumer reads the table whenever the feed
//! cannot vouch for being complete: at start-up (what a crash left), after
//! its buffer overflowed, and after a quiet second.
//!
//! Completeness is checked, not assumed: each fed row carries the sequence
//! number of the row committed before it on the same stream, so a consumer
//! that holds rows up to `seen` takes a fed row only if it follows `seen`
//! directly, and otherwise reads the table after `seen` first.
//!
//! At a steady, moderate rate this takes two writer round trips per stream
//! and event (reading the row, then finding the table empty) off the
//! pipeline; flat out, the consumer takes its batches from the feed as it
//! took them from the table.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::Stream;

/// Rows a stream's feed holds for its consumer; beyond them new rows are
/// left to the table (the consumer notices the gap and reads it).
const FEED_ROWS: usize = 4096;

/// One outbox row a call wrote: its stream, its sequence number, the
/// sequence number of the row written before it on the stream (set by
/// [`stamp`] as the call runs, so in the order the rows were written,
/// whenever they are offered) and its record as stored (JSON).
pub(crate) struct Fed {
    pub stream: Stream,
    pub seq: i64,
    pub prev: i64,
    pub data: String,
}

/// Gives each row its stream's previous row, `last` holding each stream's
/// last written sequence number (updated here). Called as the rows are
/// written, under the writer's lock.
pub(crate) fn stamp(rows: &mut [Fed], last: &mut [i64; 5]) {
    for row in rows {
        row.prev = std::mem::replace(&mut last[row.stream.index()], row.seq);
    }
}

/// A row as the feed hands it over: the sequence number of the row committed
/// before it on its stream (`prev`), its own, and its record.
#[derive(Debug)]
pub struct FedRow {
    /// The sequence number of the row committed before this one on the same
    /// stream (0 when none was since the database was opened and the table
    /// was empty).
    pub prev: i64,
    /// This row's sequence number in its outbox table.
    pub seq: i64,
    /// The record it announces, as stored.
    pub data: String,
}

/// The feeds of the outbox streams, shared by the writer (which offers each
/// committed row) and the consumers (one per stream).
#[derive(Default)]
pub(crate) struct Feeds {
    senders: [Mutex<Option<mpsc::Sender<FedRow>>>; 5],
    /// Bumped when rows already fed were taken back (a failed commit): every
    /// consumer then starts over from its table.
    epoch: AtomicU64,
}

impl Feeds {
    /// Offers written rows ([`stamp`]ed) to their streams' consumers. A row
    /// that finds no consumer or a full feed is only in its table.
    pub(crate) fn offer(&self, rows: Vec<Fed>) {
        for Fed { stream, seq, prev, data } in rows {
            let i = stream.index();
            let mut sender = self.senders[i].lock().unwrap_or_else(|p| p.into_inner());
            if let Some(tx) = sender.as_ref() {
                if let Err(mpsc::error::TrySendError::Closed(_)) = tx.try_send(FedRow { prev, seq, data }) {
                    *sender = None;
                }
            }
        }
    }

    /// A new consumer of `stream`'s feed (replacing any earlier one).
    pub(crate) fn subscribe(self: &Arc<Self>, stream: Stream) -> FeedReader {
        let (tx, rx) = mpsc::channel(FEED_ROWS);
        *self.senders[stream.index()].lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        // The table is read first: whatever a crash or another process left.
        FeedReader { rx, feeds: self.clone(), epoch: self.epoch.load(Ordering::Acquire), seen: 0, behind: true }
    }

    /// Rows fed since the last commit were taken back: every consumer
    /// starts over from its table (what it handled again is done again,
    /// which the stages tolerate).
    pub(crate) fn restart(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }
}

/// The rows a stream's consumer holds in order, filled from the feed while
/// it is complete and from the table otherwise (see the module's doc).
pub struct FeedReader {
    rx: mpsc::Receiver<FedRow>,
    feeds: Arc<Feeds>,
    /// The feeds' epoch this reader's `seen` belongs to.
    epoch: u64,
    /// The highest sequence number taken in.
    seen: i64,
    /// The table must be read after `seen` before the feed is trusted.
    behind: bool,
}

/// What the consumer should do next to fill its rows.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Read the table after this sequence number (at most a batch).
    ReadTable(i64),
    /// Rows were taken from the feed.
    Took,
    /// Nothing new: wait for the feed.
    Wait,
}

impl FeedReader {
    /// Takes fed rows into `rows` while they follow on, up to `max` held.
    pub fn fill(&mut self, rows: &mut std::collections::VecDeque<(i64, String)>, max: usize) -> Next {
        let epoch = self.feeds.epoch.load(Ordering::Acquire);
        if epoch != self.epoch {
            (self.epoch, self.seen, self.behind) = (epoch, 0, true);
            while self.rx.try_recv().is_ok() {}
        }
        if self.behind {
            return Next::ReadTable(self.seen);
        }
        let before = rows.len();
        while rows.len() < max {
            match self.rx.try_recv() {
                Ok(row) => self.take(row, rows),
                Err(_) => break,
            }
            if self.behind {
                break;
            }
        }
        match (rows.len() > before, self.behind) {
            (true, _) => Next::Took,
            (false, true) => Next::ReadTable(self.seen),
            (false, false) => Next::Wait,
        }
    }

    /// Waits for the next fed row (taking it into `rows`), at most `idle`;
    /// after a quiet `idle` the table is read again, for rows another
    /// process or a full feed left there.
    pub async fn wait(&mut self, rows: &mut std::collections::VecDeque<(i64, String)>, idle: std::time::Duration) {
        match tokio::time::timeout(idle, self.rx.recv()).await {
            Ok(Some(row)) => self.take(row, rows),
            Ok(None) | Err(_) => self.behind = true,
        }
    }

    /// Records a table read after `after` that returned `read` (the last
    /// one's sequence number, if any) with `full` true when it filled a
    /// batch (more may follow).
    pub fn read_table(&mut self, last: Option<i64>, full: bool) {
        if let Some(l) = last {
            self.seen = self.seen.max(l);
        }
        self.behind = full;
    }

    /// A table read failed: read it again before trusting the feed.
    pub fn read_failed(&mut self) {
        self.behind = true;
    }

    fn take(&mut self, row: FedRow, rows: &mut std::collections::VecDeque<(i64, String)>) {
        if row.seq <= self.seen {
            return;
        }
        if row.prev != self.seen {
            // Rows between `seen` and this one were not fed (a full feed,
            // rows from before the consumer started): the table has them,
            // and this one too.
            self.behind = true;
            return;
        }
        self.seen = row.seq;
        rows.push_back((row.seq, row.data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn fed(stream: Stream, seq: i64) -> Fed {
        Fed { stream, seq, prev: 0, data: format!("r{seq}") }
    }

    /// Offers rows as the writer does: stamped as written.
    fn write(feeds: &Feeds, mut rows: Vec<Fed>, last: &mut [i64; 5]) {
        stamp(&mut rows, last);
        feeds.offer(rows);
    }

    #[tokio::test]
    async fn rows_are_taken_only_while_they_follow_on_and_the_table_fills_the_gaps() {
        let feeds = Arc::new(Feeds::default());
        let mut last = [0; 5];
        // Committed before the consumer came: only in the table.
        write(&feeds, vec![fed(Stream::Events, 1), fed(Stream::Events, 2)], &mut last);
        let mut r = feeds.subscribe(Stream::Events);
        let mut rows = VecDeque::new();
        assert_eq!(r.fill(&mut rows, 10), Next::ReadTable(0));
        // The table read finds 1 and 2.
        rows.extend([(1, "r1".to_string()), (2, "r2".to_string())]);
        r.read_table(Some(2), false);
        rows.clear();
        write(&feeds, vec![fed(Stream::Events, 3), fed(Stream::Sagas, 1), fed(Stream::Events, 4)], &mut last);
        assert_eq!(r.fill(&mut rows, 10), Next::Took);
        assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), vec![3, 4]);
        rows.clear();
        assert_eq!(r.fill(&mut rows, 10), Next::Wait);
        // A row the feed did not hand over (as when it was full): the next
        // one shows the gap, and the table is read after what was seen.
        last[Stream::Events.index()] = 5;
        write(&feeds, vec![fed(Stream::Events, 6)], &mut last);
        assert_eq!(r.fill(&mut rows, 10), Next::ReadTable(4));
        assert!(rows.is_empty());
        r.read_table(Some(6), false);
        write(&feeds, vec![fed(Stream::Events, 7)], &mut last);
        assert_eq!(r.fill(&mut rows, 10), Next::Took);
        assert_eq!(rows.pop_front().map(|r| r.0), Some(7));
    }

    /// An API write's rows are offered once it is on disk, possibly after
    /// rows the pipeline wrote after it: they are stamped as written, so
    /// the later row shows the gap and the table is read.
    #[tokio::test]
    async fn rows_offered_out_of_order_send_the_reader_to_the_table() {
        let feeds = Arc::new(Feeds::default());
        let mut last = [0; 5];
        let mut r = feeds.subscribe(Stream::Events);
        r.read_table(None, false);
        let mut api_row = vec![fed(Stream::Events, 1)];
        stamp(&mut api_row, &mut last);
        write(&feeds, vec![fed(Stream::Events, 2)], &mut last);
        feeds.offer(api_row);
        let mut rows = VecDeque::new();
        assert_eq!(r.fill(&mut rows, 10), Next::ReadTable(0), "row 2 follows row 1, not yet seen");
        rows.extend([(1, "r1".to_string()), (2, "r2".to_string())]);
        r.read_table(Some(2), false);
        rows.clear();
        assert_eq!(r.fill(&mut rows, 10), Next::Wait, "row 1, offered late, was read from the table");
    }

    #[tokio::test]
    async fn a_full_feed_leaves_rows_to_the_table_and_a_quiet_wait_reads_it() {
        let feeds = Arc::new(Feeds::default());
        let mut last = [0; 5];
        let mut r = feeds.subscribe(Stream::Sagas);
        r.read_table(None, false);
        let many: Vec<Fed> = (1..=(FEED_ROWS as i64 + 10)).map(|s| fed(Stream::Sagas, s)).collect();
        write(&feeds, many, &mut last);
        let mut rows = VecDeque::new();
        assert_eq!(r.fill(&mut rows, FEED_ROWS * 2), Next::Took);
        assert_eq!(rows.len(), FEED_ROWS, "the feed holds at most its size");
        // The next row offered after the overflow is a gap.
        write(&feeds, vec![fed(Stream::Sagas, FEED_ROWS as i64 + 11)], &mut last);
        rows.clear();
        assert_eq!(r.fill(&mut rows, 10), Next::ReadTable(FEED_ROWS as i64));
        r.read_table(Some(FEED_ROWS as i64 + 11), false);
        r.wait(&mut rows, std::time::Duration::from_millis(1)).await;
        assert_eq!(r.fill(&mut rows, 10), Next::ReadTable(FEED_ROWS as i64 + 11), "quiet: the table is read again");
        // Taken back (a failed commit): the reader starts over from its table.
        r.read_table(None, false);
        write(&feeds, vec![fed(Stream::Sagas, FEED_ROWS as i64 + 12)], &mut last);
        feeds.restart();
        assert_eq!(r.fill(&mut rows, 10), Next::ReadTable(0));
        assert!(rows.is_empty(), "what was fed before is dropped");
    }
}
