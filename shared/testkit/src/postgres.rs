//! Throwaway PostgreSQL clusters.
//!
//! [`Postgres::start`] runs `initdb` and `pg_ctl start` into a fresh instance directory (see
//! `instance.rs` for its layout and cleanup) and bootstraps:
//! - a superuser `postgres` that connects over the cluster's private unix socket with trust auth;
//!   testkit uses it for administration ([`Postgres::psql_as_superuser`]);
//! - a role `dq` with a random password, owner of a database `dq`; over TCP every role must pass
//!   scram-sha-256 password auth, so a wrong password really is rejected.
//!
//! The server listens on 127.0.0.1 only, on a port picked with [`crate::free_port`], with
//! durability turned off for speed (`fsync`, `synchronous_commit`, `full_page_writes`).
//!
//! `initdb` and the server refuse to run as root. When the test process is root, testkit runs the
//! server binaries as an unprivileged user (env [`PG_USER_ENV`], default `nobody`) through
//! `runuser -u <user> --` and hands that user the instance directory.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

use crate::instance::{self, sh_quote, Watchdog};
use crate::{Error, Result};

/// Env var naming the directory with `initdb`, `pg_ctl`, `postgres` and `psql`.
pub const PG_BIN_ENV: &str = "DQ_PG_BIN";
/// Directory used when [`PG_BIN_ENV`] is unset (Debian's `postgresql-15` package).
pub const DEFAULT_PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// Env var naming the non-root user that runs the server when the tests run as root.
pub const PG_USER_ENV: &str = "DQ_PG_USER";
/// User used when [`PG_USER_ENV`] is unset.
pub const DEFAULT_PG_USER: &str = "nobody";

/// Superuser created by `initdb`; reachable only over the unix socket.
const SUPERUSER: &str = "postgres";
/// Password-protected application role and its database.
const APP_ROLE: &str = "dq";
const APP_DATABASE: &str = "dq";
/// How often a start is retried with a new port when another process took the chosen one.
const PORT_ATTEMPTS: usize = 5;
/// Seconds `pg_ctl` waits for the server to start or stop.
const PG_CTL_TIMEOUT_SECS: &str = "60";
/// Binaries that must exist in the bin directory.
const REQUIRED_BINARIES: [&str; 4] = ["initdb", "pg_ctl", "postgres", "psql"];

/// A running throwaway PostgreSQL cluster; stopped and deleted on drop.
///
/// Share one cluster between the tests of a binary with [`shared_postgres`] and give each test its
/// own database with [`Postgres::create_database`]. Tests that stop or restart the server should
/// start their own cluster instead.
pub struct Postgres {
    dir: PathBuf,
    bin_dir: PathBuf,
    run_as: Option<RunAs>,
    password: String,
    /// Current port; it only changes while the first start retries after a port clash.
    port: Mutex<u16>,
    watchdog: Watchdog,
}

/// The unprivileged account the server runs as when the test process is root.
#[derive(Debug, Clone)]
struct RunAs {
    user: String,
    uid: u32,
    gid: u32,
}

impl Postgres {
    /// Creates, starts and bootstraps a new cluster (typically 1–2 s).
    pub fn start() -> Result<Postgres> {
        let bin_dir = std::env::var_os(PG_BIN_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PG_BIN));
        for binary in REQUIRED_BINARIES {
            if !bin_dir.join(binary).is_file() {
                return Err(Error::PgBinMissing {
                    dir: bin_dir,
                    binary,
                });
            }
        }
        let run_as = if effective_uid_is_root()? {
            let user = std::env::var(PG_USER_ENV).unwrap_or_else(|_| DEFAULT_PG_USER.to_owned());
            Some(RunAs::lookup(&user)?)
        } else {
            None
        };

        instance::sweep_once();
        let dir = instance::create_instance_dir("pg")?;
        let cleanup = cleanup_script(&dir);
        // The directory exists from here on: arm the watchdog before anything can fail.
        let armed =
            instance::write_cleanup_script(&dir, &cleanup).and_then(|()| Watchdog::arm(&cleanup));
        let watchdog = match armed {
            Ok(watchdog) => watchdog,
            Err(error) => {
                let _ = fs::remove_dir_all(&dir);
                return Err(error);
            }
        };
        let postgres = Postgres {
            dir,
            bin_dir,
            run_as,
            password: format!("pw{:016x}", instance::random_u64()),
            port: Mutex::new(0),
            watchdog,
        };
        // From here on Drop tears down whatever was created.
        postgres.init_cluster()?;
        postgres.start_on_free_port()?;
        postgres.bootstrap()?;
        Ok(postgres)
    }

    /// Returns the TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        *self
            .port
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Returns the password of the `dq` role.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// Returns the password-protected role name, `dq`.
    pub fn user(&self) -> &str {
        APP_ROLE
    }

    /// Returns the libpq keyword DSN of the `dq` database as role `dq` over TCP:
    /// `host=127.0.0.1 port=… dbname=dq user=dq password=…`.
    pub fn dsn_keyword(&self) -> String {
        self.dsn_keyword_for(APP_DATABASE)
    }

    /// Returns the URL DSN of the `dq` database: `postgresql://dq:…@127.0.0.1:…/dq`.
    pub fn dsn_url(&self) -> String {
        self.dsn_url_for(APP_DATABASE)
    }

    /// Returns the keyword DSN of database `dbname` as role `dq`.
    pub fn dsn_keyword_for(&self, dbname: &str) -> String {
        format!(
            "host=127.0.0.1 port={} dbname={dbname} user={APP_ROLE} password={}",
            self.port(),
            self.password
        )
    }

    /// Returns the URL DSN of database `dbname` as role `dq`.
    pub fn dsn_url_for(&self, dbname: &str) -> String {
        format!(
            "postgresql://{APP_ROLE}:{}@127.0.0.1:{}/{dbname}",
            self.password,
            self.port()
        )
    }

    /// Creates database `name` owned by `dq` and returns its keyword DSN (see
    /// [`Postgres::dsn_keyword_for`]); use [`crate::unique_name`] for the name.
    ///
    /// Names are limited to ASCII letters, digits, `_` and `-`, at most 63 bytes.
    pub fn create_database(&self, name: &str) -> Result<String> {
        validate_database_name(name)?;
        self.psql_as_superuser(
            "postgres",
            &format!("CREATE DATABASE \"{name}\" OWNER {APP_ROLE}"),
        )?;
        Ok(self.dsn_keyword_for(name))
    }

    /// Runs SQL as the superuser over the unix socket with `psql` and returns its unaligned,
    /// tuples-only output (fields separated by `|`, one row per line).
    ///
    /// For test setup that the `dq` role may not do (extensions, `pg_terminate_backend`, ...).
    pub fn psql_as_superuser(&self, dbname: &str, sql: &str) -> Result<String> {
        let output = Command::new(self.bin_dir.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.socket_dir())
            .args([
                "-p",
                &self.port().to_string(),
                "-U",
                SUPERUSER,
                "-d",
                dbname,
                "-c",
                sql,
            ])
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io("run psql", e))?;
        let output = succeeded("psql", output)?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Stops the server with `pg_ctl stop -m fast` (open sessions are terminated); the data is kept.
    pub fn stop_server(&self) -> Result<()> {
        self.pg_ctl_stop("fast")
    }

    /// Starts the stopped server again on the same port.
    pub fn start_server(&self) -> Result<()> {
        self.pg_ctl_start()
    }

    /// Stops and starts the server on the same port; clients see their connections dropped.
    pub fn restart(&self) -> Result<()> {
        self.stop_server()?;
        self.start_server()
    }

    /// Tells whether the server answers (`pg_ctl status`).
    pub fn is_running(&self) -> bool {
        self.pg_command("pg_ctl")
            .arg("status")
            .arg("-D")
            .arg(self.data_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Returns the data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Returns the server log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Returns the directory holding the server's unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// Returns the directory of the PostgreSQL binaries in use (for running `psql` in tests).
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    /// Runs `initdb` and writes the configuration that does not depend on the port.
    fn init_cluster(&self) -> Result<()> {
        let socket_dir = self.socket_dir();
        fs::create_dir(&socket_dir)
            .map_err(|e| Error::io(format!("create {}", socket_dir.display()), e))?;
        if let Some(run_as) = &self.run_as {
            for path in [&self.dir, &socket_dir] {
                std::os::unix::fs::chown(path, Some(run_as.uid), Some(run_as.gid)).map_err(
                    |e| Error::io(format!("chown {} to {}", path.display(), run_as.user), e),
                )?;
            }
        }

        let output = self
            .pg_command("initdb")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-locale"])
            // No fsync of the new files, no "start the server with" hint.
            .args(["--no-sync", "--no-instructions"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(self.describe("initdb"), e))?;
        succeeded("initdb", output)?;

        let hba = "# Written by testkit.\n\
                   local all all trust\n\
                   host all all 127.0.0.1/32 scram-sha-256\n";
        self.write_server_file("pg_hba.conf", hba)?;
        let conf = format!(
            "\n# testkit: fast, throwaway settings; the port is in testkit-port.conf\n\
             listen_addresses = '127.0.0.1'\n\
             unix_socket_directories = {}\n\
             fsync = off\n\
             synchronous_commit = off\n\
             full_page_writes = off\n\
             shared_buffers = 16MB\n\
             max_connections = 200\n\
             password_encryption = 'scram-sha-256'\n\
             include 'testkit-port.conf'\n",
            sql_literal(&socket_dir.to_string_lossy())
        );
        let conf_path = self.data_dir().join("postgresql.conf");
        fs::OpenOptions::new()
            .append(true)
            .open(&conf_path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, conf.as_bytes()))
            .map_err(|e| Error::io(format!("append to {}", conf_path.display()), e))
    }

    /// Starts the server on a free port, retrying with another port if one was taken meanwhile.
    fn start_on_free_port(&self) -> Result<()> {
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = crate::free_port()?;
            *self
                .port
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = port;
            self.write_server_file("testkit-port.conf", &format!("port = {port}\n"))?;
            match self.pg_ctl_start() {
                Ok(()) => return Ok(()),
                Err(error) if error.to_string().contains("could not bind") => {
                    last_error = Some(error)
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Command {
            what: "pg_ctl start".into(),
            status: "not run".into(),
            output: String::new(),
        }))
    }

    /// Creates the password-protected role and its database.
    fn bootstrap(&self) -> Result<()> {
        self.psql_as_superuser(
            "postgres",
            &format!(
                "CREATE ROLE {APP_ROLE} LOGIN CREATEDB PASSWORD {}",
                sql_literal(&self.password)
            ),
        )?;
        self.psql_as_superuser(
            "postgres",
            &format!("CREATE DATABASE {APP_DATABASE} OWNER {APP_ROLE}"),
        )?;
        Ok(())
    }

    fn pg_ctl_start(&self) -> Result<()> {
        let output = self
            .pg_command("pg_ctl")
            .arg("start")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_path())
            .args(["-w", "-t", PG_CTL_TIMEOUT_SECS])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(self.describe("pg_ctl start"), e))?;
        if output.status.success() {
            return Ok(());
        }
        Err(Error::Command {
            what: "pg_ctl start".into(),
            status: output.status.to_string(),
            output: format!(
                "{}{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                instance::log_tail(&self.log_path(), 20)
            ),
        })
    }

    fn pg_ctl_stop(&self, mode: &str) -> Result<()> {
        let output = self
            .pg_command("pg_ctl")
            .arg("stop")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", mode, "-w", "-t", PG_CTL_TIMEOUT_SECS])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(self.describe("pg_ctl stop"), e))?;
        succeeded("pg_ctl stop", output).map(drop)
    }

    /// Returns a command for a server binary, run as the unprivileged user when we are root.
    fn pg_command(&self, binary: &str) -> Command {
        let program = self.bin_dir.join(binary);
        let mut command = match &self.run_as {
            Some(run_as) => {
                let mut command = Command::new("runuser");
                command.args(["-u", &run_as.user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        };
        // The unprivileged user may not be able to enter the test's working directory.
        command.current_dir(&self.dir);
        command
    }

    /// Names a server command for error messages, including how it is run.
    fn describe(&self, command: &str) -> String {
        match &self.run_as {
            Some(run_as) => format!("run {command} via `runuser -u {}`", run_as.user),
            None => format!("run {command}"),
        }
    }

    /// Writes a file in the data directory, owned by the server's user.
    fn write_server_file(&self, name: &str, contents: &str) -> Result<()> {
        let path = self.data_dir().join(name);
        instance::write_file(&path, contents)?;
        if let Some(run_as) = &self.run_as {
            std::os::unix::fs::chown(&path, Some(run_as.uid), Some(run_as.gid))
                .map_err(|e| Error::io(format!("chown {}", path.display()), e))?;
        }
        Ok(())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let stopped = !self.data_dir().join("postmaster.pid").exists()
            || self.pg_ctl_stop("immediate").is_ok();
        if stopped && fs::remove_dir_all(&self.dir).is_ok() {
            self.watchdog.disarm();
        } else {
            // Let the watchdog's script have a go (it signals the postmaster directly).
            self.watchdog.fire();
        }
    }
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("dir", &self.dir)
            .field("port", &self.port())
            .field("run_as", &self.run_as.as_ref().map(|run_as| &run_as.user))
            .finish_non_exhaustive()
    }
}

/// Returns the cluster shared by all tests of this test binary, starting it on first use.
///
/// Each test should create its own database on it with [`Postgres::create_database`] and a
/// [`crate::unique_name`]. The cluster lives in a `static` and is never dropped: its watchdog stops it
/// and deletes its directory when the test process exits (see the crate docs).
///
/// # Panics
///
/// Panics, in every test that calls it, if the cluster cannot be started.
pub fn shared_postgres() -> &'static Postgres {
    static SHARED: OnceLock<std::result::Result<Postgres, String>> = OnceLock::new();
    match SHARED.get_or_init(|| Postgres::start().map_err(|error| error.to_string())) {
        Ok(postgres) => postgres,
        Err(error) => panic!("testkit: the shared postgres cluster failed to start: {error}"),
    }
}

impl RunAs {
    fn lookup(user: &str) -> Result<RunAs> {
        let id = |flag: &str| -> Option<u32> {
            let output = Command::new("id")
                .args([flag, user])
                .stderr(Stdio::null())
                .output()
                .ok()?;
            if !output.status.success() {
                return None;
            }
            String::from_utf8_lossy(&output.stdout).trim().parse().ok()
        };
        match (id("-u"), id("-g")) {
            (Some(uid), Some(gid)) if uid != 0 => Ok(RunAs {
                user: user.to_owned(),
                uid,
                gid,
            }),
            _ => Err(Error::PgUserMissing {
                user: user.to_owned(),
            }),
        }
    }
}

/// Tells whether this process runs with effective uid 0.
fn effective_uid_is_root() -> Result<bool> {
    // The owner of /proc/self is the process's effective uid; no libc call needed.
    let metadata = fs::metadata("/proc/self").map_err(|e| Error::io("stat /proc/self", e))?;
    Ok(metadata.uid() == 0)
}

/// Shell script that stops the cluster in `dir` and deletes `dir`, used by the watchdog and by
/// sweeps. It signals the postmaster directly (SIGQUIT = immediate shutdown, what
/// `pg_ctl stop -m immediate` sends), so it needs neither the binaries nor `runuser`.
fn cleanup_script(dir: &Path) -> String {
    let dir = sh_quote(&dir.to_string_lossy());
    format!(
        r#"dir={dir}
pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null)
if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ]; then
    kill -QUIT "$pid" 2>/dev/null
    i=0
    while [ $i -lt 100 ] && [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
fi
rm -rf "$dir"
"#
    )
}

/// Quotes a string as an SQL (and postgresql.conf) literal.
fn sql_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn validate_database_name(name: &str) -> Result<()> {
    let invalid = |reason| Error::InvalidName {
        kind: "database",
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() || name.len() > 63 {
        return Err(invalid("must be 1 to 63 bytes long"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(invalid(
            "only ASCII letters, digits, `_` and `-` are allowed",
        ));
    }
    Ok(())
}

/// Turns a failed command into [`Error::Command`] with its output.
fn succeeded(what: &str, output: Output) -> Result<Output> {
    if output.status.success() {
        return Ok(output);
    }
    Err(Error::Command {
        what: what.to_owned(),
        status: output.status.to_string(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names_are_validated() {
        assert!(validate_database_name("it_works-1").is_ok());
        assert!(validate_database_name("").is_err());
        assert!(validate_database_name("a\"; DROP").is_err());
        assert!(validate_database_name(&"x".repeat(64)).is_err());
    }

    #[test]
    fn sql_literals_escape_quotes() {
        assert_eq!(sql_literal("a'b"), "'a''b'");
    }
}
