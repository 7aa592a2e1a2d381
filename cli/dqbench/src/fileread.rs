//! The file-read floor under the `signals` cases (`dq-bench all`): the rows dq's direct read
//! selects — the vehicle's `speed` rows in the window — read from the same Parquet files by two
//! readers, timed without any aggregation, catalog work, HTTP or GraphQL:
//! - DuckDB (`read_parquet` over the files, what dq's direct read runs), and
//! - arrow-rs (`parquet` crate), the files split over the machine's cores, each read whole
//!   (projection of the four columns the read needs, one row group per file) and filtered in
//!   Rust.
//!
//! Both must return the same rows (count, and sums of the times and values). The files are
//! those holding any row of the vehicle's bucket in the window: after din's maintenance, one
//! per bucket-day, the files dq's listing opens. Neither reader applies delete files (dq's read
//! does): both read the files as written, so the two stay comparable.

use std::fs::File;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use dq_lake::testing::TestLake;
use duckdb::arrow::array::{Array, AsArray};
use duckdb::arrow::datatypes::{Float64Type, Int64Type, TimestampMicrosecondType};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use crate::query::{timestamptz, Case, Sampling, Target, SIGNAL};
use crate::suite::{files_of, fresh_conn, sample, table_files, Samples};

/// The two readers' samples over the same files, and how many files that is.
pub(crate) struct FileReads {
    pub(crate) duckdb: Samples,
    pub(crate) arrow_rs: Samples,
    pub(crate) files: usize,
}

/// What a reader returned: rows, and the sums that check two readers returned the same rows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Read {
    rows: usize,
    ts_sum: i128,
    value_sum: f64,
}

impl Read {
    fn same(&self, other: &Read) -> bool {
        self.rows == other.rows
            && self.ts_sum == other.ts_sum
            && (self.value_sum - other.value_sum).abs() <= 1e-6 * self.value_sum.abs().max(1.0)
    }

    fn add(&mut self, ts: i64, value: Option<f64>) {
        self.rows += 1;
        self.ts_sum += i128::from(ts);
        self.value_sum += value.unwrap_or(0.0);
    }

    fn merge(&mut self, other: Read) {
        self.rows += other.rows;
        self.ts_sum += other.ts_sum;
        self.value_sum += other.value_sum;
    }
}

/// The columns the read needs, as `lake.signals` names them.
const COLUMNS: [&str; 4] = ["subject", "timestamp", "name", "value_number"];

/// Times both readers over the files of `case`'s window (module docs).
pub(crate) fn file_reads(
    t: &TestLake,
    case: Case,
    target: &Target,
    sampling: &Sampling,
) -> anyhow::Result<FileReads> {
    let bucket = dq_cloudevent::bucket::subject_bucket(&target.subject);
    let (from, to) = target.window(case);
    let in_window = format!(
        "subject_bucket = {bucket} AND \"timestamp\" >= {} AND \"timestamp\" < {}",
        timestamptz(from),
        timestamptz(to)
    );
    let files: Vec<String> = {
        let ((_lake, conn), _) = fresh_conn(t, None)?;
        let all = table_files(&conn, "signals")?;
        let sql = format!(
            "SELECT DISTINCT filename FROM read_parquet({}, filename = true) \
             WHERE {in_window} ORDER BY 1",
            files_of(&all)
        );
        let found = conn
            .prepare(&sql)?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        found
    };
    ensure!(
        !files.is_empty(),
        "{}: no file holds the window",
        case.name()
    );
    let sql = format!(
        "SELECT epoch_us(\"timestamp\"), value_number FROM read_parquet({}) \
         WHERE {in_window} AND subject = ? AND name = '{SIGNAL}'",
        files_of(&files)
    );

    let open = |last| fresh_conn(t, last);
    let expected = std::cell::Cell::new(None::<Read>);
    let check = |read: Read, reader: &str| -> anyhow::Result<()> {
        ensure!(
            read.rows > 0,
            "{}: the files hold none of the rows",
            case.name()
        );
        match expected.get() {
            None => expected.set(Some(read)),
            Some(e) => ensure!(
                e.same(&read),
                "{}: {reader} read {read:?} where DuckDB read {e:?}",
                case.name()
            ),
        }
        Ok(())
    };
    let by_duckdb = |(_, conn): &mut (dq_lake::Lake, dq_lake::Conn), n: usize| {
        (0..n)
            .map(|_| {
                let started = Instant::now();
                let mut stmt = conn.prepare(&sql)?;
                let batches: Vec<_> = stmt.query_arrow([&target.subject])?.collect();
                let took = started.elapsed();
                let mut read = Read::default();
                for b in &batches {
                    let ts = b.column(0).as_primitive::<Int64Type>();
                    let v = b.column(1).as_primitive::<Float64Type>();
                    for i in 0..b.num_rows() {
                        read.add(ts.value(i), v.is_valid(i).then(|| v.value(i)));
                    }
                }
                check(read, "DuckDB")?;
                Ok(took)
            })
            .collect()
    };
    let (duckdb, _) = sample(sampling, open, by_duckdb)?;

    let by_arrow = |(): &mut (), n: usize| {
        (0..n)
            .map(|_| {
                let started = Instant::now();
                let read = arrow_read(&files, &target.subject, (from, to))?;
                let took = started.elapsed();
                check(read, "arrow-rs")?;
                Ok(took)
            })
            .collect()
    };
    let (arrow_rs, ()) = sample(sampling, |_| Ok(((), Duration::ZERO)), by_arrow)?;
    eprintln!(
        "{} rows of its {} files: warm p50 DuckDB {:.2} ms, arrow-rs {:.2} ms",
        case.name(),
        files.len(),
        crate::query::percentile(&duckdb.warm, 50.0),
        crate::query::percentile(&arrow_rs.warm, 50.0)
    );
    Ok(FileReads {
        duckdb,
        arrow_rs,
        files: files.len(),
    })
}

/// The read by arrow-rs: `files` split over every core, each file's four columns read and the
/// subject's `speed` rows in `[from, to)` kept.
fn arrow_read(files: &[String], subject: &str, (from, to): (i64, i64)) -> anyhow::Result<Read> {
    let mut paths: Vec<&String> = files.iter().collect();
    let parts = crate::cores::on_every_core(&mut paths, |_, part| {
        let mut read = Read::default();
        for path in part.iter() {
            read_file(path, subject, (from, to), &mut read)
                .with_context(|| format!("read {path}"))?;
        }
        Ok(read)
    })?;
    let mut total = Read::default();
    for part in parts {
        total.merge(part);
    }
    Ok(total)
}

fn read_file(
    path: &str,
    subject: &str,
    (from, to): (i64, i64),
    read: &mut Read,
) -> anyhow::Result<()> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?;
    let schema = builder.parquet_schema();
    let mut leaves = Vec::with_capacity(COLUMNS.len());
    for name in COLUMNS {
        leaves.push(
            (0..schema.num_columns())
                .find(|&i| schema.column(i).name() == name)
                .with_context(|| format!("no column {name}"))?,
        );
    }
    let mask = ProjectionMask::leaves(schema, leaves);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(65_536)
        .build()?;
    for batch in reader {
        let batch = batch?;
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .with_context(|| format!("no {name}"))
        };
        let subjects = column("subject")?.as_string::<i32>();
        let names = column("name")?.as_string::<i32>();
        let times = column("timestamp")?.as_primitive::<TimestampMicrosecondType>();
        let values = column("value_number")?.as_primitive::<Float64Type>();
        for i in 0..batch.num_rows() {
            let ts = times.value(i);
            if times.is_valid(i)
                && ts >= from
                && ts < to
                && names.value(i) == SIGNAL
                && subjects.value(i) == subject
            {
                read.add(ts, values.is_valid(i).then(|| values.value(i)));
            }
        }
    }
    Ok(())
}
