//! A test process that dies without running destructors must not leave services behind.
//!
//! The parent test re-runs this test binary, filtered to `child_holds_shared_services`, which
//! starts the shared cluster and moto server, reports where they live and waits; the parent
//! SIGKILLs it and expects the watchdogs to stop both services and delete their directories.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{eventually, postmaster_pid, process_is_gone};

/// Set in the child's environment; without it the child test returns at once.
const CHILD_ENV: &str = "TESTKIT_CLEANUP_CHILD";

#[test]
fn killed_test_process_leaves_no_services_behind() {
    let mut child = Command::new(std::env::current_exe().expect("current test binary"))
        .args([
            "--ignored",
            "--exact",
            "cleanup::child_holds_shared_services",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child test process");
    let stdout = child.stdout.take().expect("child stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("READY ").map(str::to_owned));
    let Some(ready) = ready else {
        let _ = child.kill();
        panic!(
            "child exited without starting its services: {:?}",
            child.wait()
        );
    };
    let mut fields = ready.split(' ');
    let pg_dir = PathBuf::from(fields.next().expect("pg dir"));
    let postmaster: u32 = fields
        .next()
        .and_then(|f| f.parse().ok())
        .expect("postmaster pid");
    let moto_dir = PathBuf::from(fields.next().expect("moto dir"));
    let moto_pid: u32 = fields
        .next()
        .and_then(|f| f.parse().ok())
        .expect("moto pid");
    assert!(pg_dir.exists() && moto_dir.exists());

    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");

    let timeout = Duration::from_secs(10);
    assert!(
        eventually(timeout, || process_is_gone(postmaster)),
        "postmaster {postmaster} survived"
    );
    assert!(
        eventually(timeout, || process_is_gone(moto_pid)),
        "moto_server {moto_pid} survived"
    );
    assert!(
        eventually(timeout, || !pg_dir.exists()),
        "{} survived",
        pg_dir.display()
    );
    assert!(
        eventually(timeout, || !moto_dir.exists()),
        "{} survived",
        moto_dir.display()
    );
}

/// Run only by `killed_test_process_leaves_no_services_behind`.
#[test]
#[ignore = "helper process of killed_test_process_leaves_no_services_behind"]
fn child_holds_shared_services() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let pg = dq_testkit::shared_postgres();
    let moto = dq_testkit::shared_moto();
    let pg_dir = pg.data_dir().parent().expect("cluster dir").to_path_buf();
    let moto_dir = moto.log_path().parent().expect("moto dir").to_path_buf();
    let postmaster = postmaster_pid(&pg.data_dir()).expect("postmaster pid");
    println!(
        "READY {} {postmaster} {} {}",
        pg_dir.display(),
        moto_dir.display(),
        moto.pid()
    );
    std::thread::sleep(Duration::from_secs(60));
}
