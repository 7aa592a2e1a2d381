//! Tests of the throwaway PostgreSQL clusters.

use std::process::Command;

use dq_testkit::{shared_postgres, unique_name, Postgres};

use crate::support::{own_uid, postmaster_pid, process_is_gone, process_uid, psql, psql_ok};

#[test]
fn server_runs_as_unprivileged_user_when_tests_run_as_root() {
    let pg = shared_postgres();
    let pid = postmaster_pid(&pg.data_dir()).expect("postmaster.pid of a running cluster");
    let server_uid = process_uid(pid).expect("uid of the postmaster");
    if own_uid() == 0 {
        let user = std::env::var(dq_testkit::PG_USER_ENV)
            .unwrap_or_else(|_| dq_testkit::DEFAULT_PG_USER.into());
        let output = Command::new("id")
            .args(["-u", &user])
            .output()
            .expect("run id");
        let expected: u32 = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .expect("numeric uid");
        assert_eq!(server_uid, expected, "postgres should run as {user}");
    } else {
        assert_eq!(server_uid, own_uid());
    }
}

#[test]
fn password_login_works_in_keyword_and_url_form() {
    let pg = shared_postgres();
    assert_eq!(psql_ok(pg, &pg.dsn_keyword(), "select current_user"), "dq");
    assert_eq!(
        psql_ok(pg, &pg.dsn_url(), "select current_database()"),
        "dq"
    );
    assert!(pg.dsn_keyword().contains(&format!("port={}", pg.port())));
    assert!(pg
        .dsn_url()
        .starts_with(&format!("postgresql://dq:{}@127.0.0.1:", pg.password())));
}

#[test]
fn wrong_or_missing_password_is_rejected() {
    let pg = shared_postgres();
    let wrong = pg.dsn_keyword().replace(pg.password(), "not-the-password");
    let output = psql(pg, &wrong, "select 1");
    assert!(
        !output.status.success(),
        "login with a wrong password must fail"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );

    let missing = format!("host=127.0.0.1 port={} dbname=dq user=dq", pg.port());
    let output = psql(pg, &missing, "select 1");
    assert!(
        !output.status.success(),
        "login without a password must fail"
    );

    let superuser = format!("host=127.0.0.1 port={} dbname=dq user=postgres", pg.port());
    let output = psql(pg, &superuser, "select 1");
    assert!(
        !output.status.success(),
        "the superuser has no TCP access without a password"
    );
}

#[test]
fn created_databases_are_isolated_and_owned_by_dq() {
    let pg = shared_postgres();
    let first_name = unique_name("isolated_a");
    let first = pg.create_database(&first_name).unwrap();
    let second = pg.create_database(&unique_name("isolated_b")).unwrap();
    psql_ok(pg, &first, "create table only_here (x int)");
    assert_eq!(
        psql_ok(
            pg,
            &first,
            "select count(*) from pg_tables where tablename = 'only_here'"
        ),
        "1"
    );
    assert_eq!(
        psql_ok(
            pg,
            &second,
            "select count(*) from pg_tables where tablename = 'only_here'"
        ),
        "0"
    );
    let owner = pg
        .psql_as_superuser(
            "postgres",
            &format!(
                "select pg_get_userbyid(datdba) from pg_database where datname = '{first_name}'"
            ),
        )
        .unwrap();
    assert_eq!(owner.trim(), "dq");
    assert_eq!(pg.dsn_keyword_for(&first_name), first);

    let error = pg.create_database("bad\"name").unwrap_err();
    assert!(
        error.to_string().contains("invalid database name"),
        "{error}"
    );
}

#[test]
fn databases_can_be_created_concurrently() {
    let pg = shared_postgres();
    let dsns: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| pg.create_database(&unique_name("concurrent")).unwrap()))
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .collect()
    });
    for dsn in &dsns {
        assert_eq!(psql_ok(pg, dsn, "select 1"), "1");
    }
}

#[test]
fn restart_keeps_port_and_data_and_drop_removes_everything() {
    let pg = Postgres::start().unwrap();
    let port = pg.port();
    psql_ok(
        &pg,
        &pg.dsn_keyword(),
        "create table kept (x int); insert into kept values (42)",
    );

    pg.restart().unwrap();
    assert_eq!(pg.port(), port);
    assert_eq!(psql_ok(&pg, &pg.dsn_keyword(), "select x from kept"), "42");

    pg.stop_server().unwrap();
    assert!(!pg.is_running());
    assert!(!psql(&pg, &pg.dsn_keyword(), "select 1").status.success());
    pg.start_server().unwrap();
    assert!(pg.is_running());
    assert_eq!(psql_ok(&pg, &pg.dsn_url(), "select x from kept"), "42");

    let data_dir = pg.data_dir();
    let pid = postmaster_pid(&data_dir).expect("postmaster.pid");
    drop(pg);
    assert!(!data_dir.exists(), "drop removes the cluster directory");
    assert!(
        crate::support::eventually(std::time::Duration::from_secs(5), || process_is_gone(pid)),
        "drop stops the server"
    );
}

#[test]
fn missing_binaries_error_says_how_to_install_them() {
    let error = dq_testkit::Error::PgBinMissing {
        dir: "/nowhere".into(),
        binary: "initdb",
    };
    assert!(
        error.to_string().contains("apt-get install -y postgresql"),
        "{error}"
    );
}
