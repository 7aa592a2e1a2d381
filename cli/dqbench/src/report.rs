//! Writing results: one marked section of `BENCHMARKS.md` per case, replaced in place.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// `BENCHMARKS.md` at the workspace root.
pub fn benchmarks_md() -> PathBuf {
    dq_testkit::workspace_root().join("BENCHMARKS.md")
}

/// Replaces the `<!-- {name}:start -->` … `<!-- {name}:end -->` section of `path` with `body`,
/// appending it when absent (the file is created when missing).
pub fn update_section(path: &Path, name: &str, body: &str) -> anyhow::Result<()> {
    let (start, end) = (
        format!("<!-- {name}:start -->"),
        format!("<!-- {name}:end -->"),
    );
    let section = format!("{start}\n{}\n{end}", body.trim_end());
    let current = std::fs::read_to_string(path).unwrap_or_else(|_| "# Benchmarks\n".into());
    let updated = match (current.find(&start), current.find(&end)) {
        (Some(s), Some(e)) if e > s => {
            format!("{}{section}{}", &current[..s], &current[e + end.len()..])
        }
        _ => format!("{}\n\n{section}\n", current.trim_end()),
    };
    std::fs::write(path, updated).with_context(|| format!("write {}", path.display()))
}

/// Prints `body`, and unless `no_write` makes it the `section` of `BENCHMARKS.md` and merges
/// the top-level keys of `json` into `BENCHMARKS.json`, keeping the keys other runs wrote (the
/// `all` and `listing` runs each own theirs).
pub fn publish(
    section: &str,
    body: &str,
    no_write: bool,
    json: serde_json::Value,
) -> anyhow::Result<()> {
    print!("{body}");
    if no_write {
        eprintln!("--no-write: BENCHMARKS.md and BENCHMARKS.json left as is");
        return Ok(());
    }
    let md = benchmarks_md();
    update_section(&md, section, body)?;
    let json_path = md.with_extension("json");
    let mut doc = std::fs::read_to_string(&json_path)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    if let (Some(doc), serde_json::Value::Object(keys)) = (doc.as_object_mut(), json) {
        doc.extend(keys);
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("write {}", json_path.display()))?;
    println!("updated {} and {}", md.display(), json_path.display());
    Ok(())
}

/// What a figure was measured on: the commit (`DQ_BENCH_COMMIT`, set by the Makefile), the CPU
/// count and model.
pub fn machine() -> String {
    let commit = std::env::var("DQ_BENCH_COMMIT").unwrap_or_else(|_| "unknown".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("commit `{commit}`, {cpus} cores ({model})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_replaced_in_place_or_appended() {
        let dir = tempfile_dir();
        let path = dir.join("B.md");
        update_section(&path, "a", "one").unwrap();
        update_section(&path, "b", "two").unwrap();
        update_section(&path, "a", "three").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "# Benchmarks\n\n<!-- a:start -->\nthree\n<!-- a:end -->\n\n<!-- b:start -->\ntwo\n<!-- b:end -->\n"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(dq_testkit::unique_name("dq-bench-report"));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
