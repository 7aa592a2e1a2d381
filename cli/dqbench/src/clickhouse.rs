//! ClickHouse beside dq (issue 9): chDB, the ClickHouse engine packaged for Python (PyPI `chdb`),
//! driven through `chdb_engine.py` over a JSON-lines pipe. The rows are the lake's own, exported
//! to Parquet by DuckDB and loaded into MergeTree tables ordered like the telemetry API's
//! ClickHouse tables (`signals` by subject, name, timestamp; `raw_events` by subject, time).
//! Times are taken inside the helper around the engine call, so the pipe is not counted.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use dq_query::segments::{
    ActiveWindow, LevelSample, SignalSource, StateChange, TimeRange, Ts, WindowSpec,
};
use serde_json::{json, Value};

/// The Python that has `chdb` (`make bench` provisions `.venv-bench`).
pub fn python() -> PathBuf {
    std::env::var_os("DQ_BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| dq_testkit::workspace_root().join(".venv-bench/bin/python"))
}

/// One chDB session in a helper process; killed on drop.
pub struct ChDb {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Time the helper took to open the session (the engine's "open").
    pub open: Duration,
}

fn ms(v: &Value) -> Duration {
    Duration::from_secs_f64(v.as_f64().unwrap_or(f64::NAN).max(0.0) / 1e3)
}

impl ChDb {
    /// Starts a helper on the session directory `dir` (created by chDB when missing).
    pub fn spawn(dir: &Path) -> anyhow::Result<ChDb> {
        let script = dq_testkit::workspace_root().join("cli/dqbench/chdb_engine.py");
        let python = python();
        let mut child = Command::new(&python)
            .arg(&script)
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| {
                format!(
                    "start {} {} (run `make bench-venv`, or set DQ_BENCH_PYTHON)",
                    python.display(),
                    script.display()
                )
            })?;
        let stdin = child.stdin.take().context("helper stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("helper stdout")?);
        let mut ch = ChDb {
            child,
            stdin,
            stdout,
            open: Duration::ZERO,
        };
        let ready = ch.read()?;
        ensure_ok(&ready)?;
        ch.open = ms(&ready["open_ms"]);
        Ok(ch)
    }

    fn read(&mut self) -> anyhow::Result<Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            let status = self.child.wait()?;
            bail!("the chDB helper exited ({status})");
        }
        serde_json::from_str(&line).with_context(|| format!("chDB helper said: {line}"))
    }

    fn call(&mut self, req: Value) -> anyhow::Result<Value> {
        writeln!(self.stdin, "{req}")?;
        self.stdin.flush()?;
        let answer = self.read()?;
        ensure_ok(&answer)?;
        Ok(answer)
    }

    /// Runs a statement; its engine time.
    pub fn exec(&mut self, sql: &str) -> anyhow::Result<Duration> {
        let a = self
            .call(json!({"op": "exec", "sql": sql}))
            .with_context(|| format!("chDB: {}", first_line(sql)))?;
        Ok(a["ms"]
            .as_array()
            .and_then(|m| m.first())
            .map_or(Duration::ZERO, ms))
    }

    /// Runs a query `repeat` times: each run's engine time and the last run's rows.
    pub fn query(
        &mut self,
        sql: &str,
        repeat: usize,
    ) -> anyhow::Result<(Vec<Duration>, Vec<Vec<Value>>)> {
        let a = self
            .call(json!({"op": "query", "sql": sql, "repeat": repeat}))
            .with_context(|| format!("chDB: {}", first_line(sql)))?;
        let times = a["ms"].as_array().map(|m| m.iter().map(ms).collect());
        let rows = a["data"].as_array().map(|rows| {
            rows.iter()
                .map(|r| r.as_array().cloned().unwrap_or_default())
                .collect()
        });
        Ok((times.unwrap_or_default(), rows.unwrap_or_default()))
    }
}

impl Drop for ChDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ensure_ok(answer: &Value) -> anyhow::Result<()> {
    match answer.get("error") {
        Some(e) => Err(anyhow!("{}", e.as_str().unwrap_or("chDB error"))),
        None => Ok(()),
    }
}

fn first_line(sql: &str) -> &str {
    let s = sql.trim();
    &s[..s.len().min(120)]
}

/// A ClickHouse string literal.
pub fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A `DateTime64(6, 'UTC')` literal from µs.
pub fn ts_lit(us: i64) -> String {
    format!("fromUnixTimestamp64Micro(toInt64({us}), 'UTC')")
}

/// An integer cell (ClickHouse may quote 64-bit integers).
pub fn int(v: &Value) -> anyhow::Result<i64> {
    match v {
        Value::Number(n) => n.as_i64().context("not an integer"),
        Value::String(s) => s.parse().with_context(|| format!("not an integer: {s}")),
        other => bail!("not an integer: {other}"),
    }
}

/// A float cell (`None` for NULL).
pub fn float(v: &Value) -> anyhow::Result<Option<f64>> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_f64()),
        Value::String(s) => Ok(Some(s.parse()?)),
        other => bail!("not a number: {other}"),
    }
}

/// Loads the Parquet exports into MergeTree tables; returns the load time.
pub fn load(ch: &mut ChDb, signals: &Path, raw: &Path) -> anyhow::Result<Duration> {
    let statements = [
        "DROP TABLE IF EXISTS signals".to_owned(),
        "DROP TABLE IF EXISTS raw_events".to_owned(),
        "CREATE TABLE signals (subject String, name String, ts DateTime64(6, 'UTC'), \
         source String, value_number Nullable(Float64), value_string Nullable(String), \
         loc_lat Nullable(Float64), loc_lon Nullable(Float64)) \
         ENGINE = MergeTree ORDER BY (subject, name, ts)"
            .to_owned(),
        format!(
            "INSERT INTO signals SELECT subject, name, fromUnixTimestamp64Micro(ts, 'UTC'), \
             source, value_number, value_string, loc_lat, loc_lon FROM file({}, Parquet)",
            lit(&signals.display().to_string())
        ),
        "CREATE TABLE raw_events (subject String, ts DateTime64(6, 'UTC'), type String, \
         id String, source String, data Nullable(String), data_base64 Nullable(String)) \
         ENGINE = MergeTree ORDER BY (subject, ts)"
            .to_owned(),
        format!(
            "INSERT INTO raw_events SELECT subject, fromUnixTimestamp64Micro(ts, 'UTC'), type, \
             id, source, data, data_base64 FROM file({}, Parquet)",
            lit(&raw.display().to_string())
        ),
        // Merged parts, as a long-running ClickHouse table would have.
        "OPTIMIZE TABLE signals FINAL".to_owned(),
        "OPTIMIZE TABLE raw_events FINAL".to_owned(),
    ];
    let mut total = Duration::ZERO;
    for sql in &statements {
        total += ch.exec(sql)?;
    }
    Ok(total)
}

/// The detectors' reads over ClickHouse, for IGNITION_DETECTION (the mechanism the benchmark
/// runs); the other reads answer with an error naming the mechanism they would serve.
pub struct ChSource<'a> {
    ch: std::cell::RefCell<&'a mut ChDb>,
}

/// A failed ClickHouse read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ChError(String);

impl<'a> ChSource<'a> {
    /// A source over `ch`.
    pub fn new(ch: &'a mut ChDb) -> Self {
        ChSource {
            ch: std::cell::RefCell::new(ch),
        }
    }

    fn rows(&self, sql: &str) -> Result<Vec<Vec<Value>>, ChError> {
        let (_, rows) = self
            .ch
            .borrow_mut()
            .query(sql, 1)
            .map_err(|e| ChError(format!("{e:#}")))?;
        Ok(rows)
    }
}

fn ts(us: i64) -> Ts {
    Ts::from_timestamp_micros(us).unwrap_or_default()
}

fn unsupported<T>(read: &str) -> Result<T, ChError> {
    Err(ChError(format!(
        "the ClickHouse benchmark source reads for IGNITION_DETECTION only, not {read}"
    )))
}

impl SignalSource for ChSource<'_> {
    type Error = ChError;

    fn windowed_signal_counts(
        &self,
        _subject: &str,
        _from: Ts,
        _to: Ts,
        _spec: WindowSpec,
    ) -> Result<Vec<ActiveWindow>, ChError> {
        unsupported("windowed signal counts")
    }

    fn level_samples(
        &self,
        _subject: &str,
        _name: &str,
        _from: Ts,
        _to: Ts,
    ) -> Result<Vec<LevelSample>, ChError> {
        unsupported("level samples")
    }

    /// The same answer as the DuckDB read: state changes in the 30-day lookback + range, the
    /// first one's previous state from the reading before the lookback (else 0), changes from
    /// `from` on plus the last one before it; with no change, a synthetic "on" at the first
    /// reading when the last reading is on.
    fn ignition_state_changes(
        &self,
        subject: &str,
        from: Ts,
        to: Ts,
    ) -> Result<Vec<StateChange>, ChError> {
        let lookback = from.timestamp_micros()
            - dq_query::segments::source::IGNITION_LOOKBACK_DAYS * 86_400 * 1_000_000;
        let scope = format!(
            "subject = {} AND name = {} AND value_number IS NOT NULL",
            lit(subject),
            lit(dq_query::segments::source::IGNITION_SIGNAL)
        );
        let window = format!(
            "{scope} AND ts >= {} AND ts < {}",
            ts_lit(lookback),
            ts_lit(to.timestamp_micros())
        );
        let sql = format!(
            "SELECT toUnixTimestamp64Micro(ts), new_state, prev_state FROM (\
               SELECT ts, value_number AS new_state, \
                 coalesce(lagInFrame(value_number, 1, NULL) OVER (ORDER BY ts ROWS BETWEEN \
                   UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), \
                   (SELECT value_number FROM signals WHERE {scope} AND ts < {lb} \
                    ORDER BY ts DESC LIMIT 1), 0) AS prev_state \
               FROM signals WHERE {window}) \
             WHERE new_state != prev_state ORDER BY ts",
            lb = ts_lit(lookback),
        );
        let parse = |r: &Vec<Value>| -> Result<StateChange, ChError> {
            let bad = |e: anyhow::Error| ChError(format!("{e:#}"));
            Ok(StateChange {
                ts: ts(int(&r[0]).map_err(bad)?),
                new_state: float(&r[1]).map_err(bad)?.unwrap_or(0.0),
                prev_state: float(&r[2]).map_err(bad)?.unwrap_or(0.0),
            })
        };
        let all = self
            .rows(&sql)?
            .iter()
            .map(parse)
            .collect::<Result<Vec<_>, _>>()?;
        let split = all.partition_point(|c| c.ts < from);
        let mut changes: Vec<StateChange> = all[split.saturating_sub(1)..split].to_vec();
        changes.extend_from_slice(&all[split..]);
        if !changes.is_empty() {
            return Ok(changes);
        }
        let probe = self.rows(&format!(
            "SELECT argMax(value_number, ts) = 1, toUnixTimestamp64Micro(min(ts)), count() \
             FROM signals WHERE {window}"
        ))?;
        let row = probe.first().cloned().unwrap_or_default();
        let on = matches!(row.first(), Some(Value::Number(n)) if n.as_i64() == Some(1))
            || matches!(row.first(), Some(Value::Bool(true)));
        let count = row.get(2).and_then(|v| int(v).ok()).unwrap_or(0);
        Ok(
            match (on, count > 0, row.get(1).and_then(|v| int(v).ok())) {
                (true, true, Some(first)) => vec![StateChange::synthetic_on(ts(first))],
                _ => Vec::new(),
            },
        )
    }

    fn idle_runs(
        &self,
        _subject: &str,
        _name: &str,
        _from: Ts,
        _to: Ts,
        _max_idle_rpm: f64,
        _max_gap_seconds: i64,
    ) -> Result<Vec<TimeRange>, ChError> {
        unsupported("idle runs")
    }
}
