//! Throwaway moto servers standing in for S3 and DynamoDB.
//!
//! [`Moto::start`] runs `<venv>/bin/moto_server -H 127.0.0.1 -p <port>` (the venv comes from
//! `scripts/venv.sh`), waits until the server has bound its port and answers, and kills it on drop.
//! Moto accepts any credentials and does not check signatures, but it routes a request to a
//! service by the credential scope of the `Authorization` header: an unsigned DynamoDB call lands
//! in S3. [`Moto::auth_header`] gives a dummy header that routes correctly.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::http::{self, Response};
use crate::instance::{self, sh_quote, Watchdog};
use crate::{Error, Result};

/// Env var naming the Python virtualenv with `moto[server]`; relative paths are taken from the
/// workspace root. Default: `<workspace root>/.venv`.
pub const VENV_ENV: &str = "DQ_VENV";
/// Access key id accepted by moto (any value is).
pub const ACCESS_KEY: &str = "testing";
/// Secret access key accepted by moto (any value is).
pub const SECRET_KEY: &str = "testing";
/// Region used for every request.
pub const REGION: &str = "us-east-1";

/// How long the server may take to answer after being spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a start is retried with a new port when another process took the chosen one.
const PORT_ATTEMPTS: usize = 5;

/// A running moto server; killed on drop.
///
/// Share one server between the tests of a binary with [`shared_moto`]; give each test its own
/// buckets and tables named with [`crate::unique_name`] rather than calling [`Moto::reset`], which
/// wipes the state of every test using the server.
pub struct Moto {
    dir: PathBuf,
    port: u16,
    child: Mutex<Child>,
    watchdog: Watchdog,
}

impl Moto {
    /// Starts a moto server on a free port (about a second).
    pub fn start() -> Result<Moto> {
        let executable = venv_dir().join("bin").join("moto_server");
        if !executable.is_file() {
            return Err(Error::MotoMissing { path: executable });
        }
        instance::sweep_once();
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            match Self::start_once(&executable) {
                Ok(moto) => return Ok(moto),
                Err(error) if error.to_string().contains("Address already in use") => {
                    last_error = Some(error)
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Command {
            what: "moto_server".into(),
            status: "not run".into(),
            output: String::new(),
        }))
    }

    fn start_once(executable: &std::path::Path) -> Result<Moto> {
        let dir = instance::create_instance_dir("moto")?;
        let log_path = dir.join("moto.log");
        let spawned = fs::File::create(&log_path)
            .and_then(|log| Ok((log.try_clone()?, log)))
            .map_err(|e| Error::io(format!("create {}", log_path.display()), e))
            .and_then(|(stdout, stderr)| {
                let port = crate::free_port()?;
                let child = Command::new(executable)
                    .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                    .current_dir(&dir)
                    .stdin(Stdio::null())
                    .stdout(stdout)
                    .stderr(stderr)
                    .spawn()
                    .map_err(|e| Error::io(format!("spawn {}", executable.display()), e))?;
                Ok((port, child))
            });
        let (port, mut child) = match spawned {
            Ok(spawned) => spawned,
            Err(error) => {
                let _ = fs::remove_dir_all(&dir);
                return Err(error);
            }
        };
        let cleanup = cleanup_script(&dir, child.id());
        let armed = instance::write_file(&dir.join("moto.pid"), &format!("{}\n", child.id()))
            .and_then(|()| instance::write_cleanup_script(&dir, &cleanup))
            .and_then(|()| Watchdog::arm(&cleanup));
        let watchdog = match armed {
            Ok(watchdog) => watchdog,
            Err(error) => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = fs::remove_dir_all(&dir);
                return Err(error);
            }
        };
        let moto = Moto {
            dir,
            port,
            child: Mutex::new(child),
            watchdog,
        };
        moto.wait_until_ready()?;
        Ok(moto)
    }

    /// Waits until moto itself reports the port bound, then until it answers HTTP.
    ///
    /// The log line matters: probing the port alone could reach another process that took it.
    fn wait_until_ready(&self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let bound_line = format!("Running on {}", self.endpoint());
        loop {
            let exited = {
                let mut child = self
                    .child
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                child
                    .try_wait()
                    .map_err(|e| Error::io("wait for moto_server", e))?
            };
            if let Some(status) = exited {
                return Err(Error::Command {
                    what: "moto_server".into(),
                    status: status.to_string(),
                    output: instance::log_tail(&self.log_path(), 20),
                });
            }
            let bound =
                fs::read_to_string(self.log_path()).is_ok_and(|log| log.contains(&bound_line));
            if bound && self.request("GET", "/", &[], b"").is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!("moto_server on port {}", self.port),
                    seconds: READY_TIMEOUT.as_secs(),
                    details: instance::log_tail(&self.log_path(), 20),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Returns the endpoint URL, `http://127.0.0.1:<port>`, for S3 and DynamoDB alike.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Returns the TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Returns the process id of the server.
    pub fn pid(&self) -> u32 {
        self.child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .id()
    }

    /// Returns the fake access key id, [`ACCESS_KEY`].
    pub fn access_key(&self) -> &'static str {
        ACCESS_KEY
    }

    /// Returns the fake secret access key, [`SECRET_KEY`].
    pub fn secret_key(&self) -> &'static str {
        SECRET_KEY
    }

    /// Returns the region, [`REGION`] (`us-east-1`).
    pub fn region(&self) -> &'static str {
        REGION
    }

    /// Returns S3 settings that reach this server with its fake credentials.
    pub fn s3_config(&self) -> dq_config::s3::S3Config {
        self.s3_config_via(&self.endpoint())
    }

    /// Returns S3 settings with this server's credentials and region but another endpoint: a
    /// fault proxy in front of this server, say.
    pub fn s3_config_via(&self, endpoint: &str) -> dq_config::s3::S3Config {
        dq_config::s3::S3Config {
            region: Some(REGION.into()),
            access_key_id: Some(ACCESS_KEY.into()),
            secret_access_key: Some(SECRET_KEY.into()),
            endpoint: Some(endpoint.into()),
            kms_key_id: None,
        }
    }

    /// Returns the environment an AWS SDK needs to talk to this server: credentials, region and
    /// `AWS_ENDPOINT_URL`. Pass it to a child process, or read it in a test's config builder.
    pub fn aws_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_DEFAULT_REGION", REGION.to_owned()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
        ]
    }

    /// Returns an `Authorization` header value with a SigV4 credential scope for `service`
    /// (`s3`, `dynamodb`, ...) and a dummy signature. Moto does not verify signatures; it uses
    /// the scope to pick the service.
    pub fn auth_header(&self, service: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/20240101/{REGION}/{service}/aws4_request, \
             SignedHeaders=host, Signature=0000000000000000000000000000000000000000000000000000000000000000"
        )
    }

    /// Sends a raw request to `path` (starting with `/`) on this server and returns the response,
    /// whatever its status.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response> {
        http::request(method, &format!("{}{path}", self.endpoint()), headers, body)
    }

    /// Creates an S3 bucket with a path-style `PUT /<name>`.
    ///
    /// Names follow S3's rules: 3 to 63 lowercase letters, digits, `-` and `.`.
    pub fn create_bucket(&self, name: &str) -> Result<()> {
        validate_bucket_name(name)?;
        let auth = self.auth_header("s3");
        let response =
            self.request("PUT", &format!("/{name}"), &[("Authorization", &auth)], b"")?;
        expect_success("PUT", &format!("{}/{name}", self.endpoint()), &response)
    }

    /// Creates a bucket no other test uses, named after `prefix` ([`crate::unique_name`]
    /// already makes a valid bucket name), and returns its name.
    pub fn create_unique_bucket(&self, prefix: &str) -> Result<String> {
        let name = crate::unique_name(prefix);
        self.create_bucket(&name)?;
        Ok(name)
    }

    /// Wipes all state of every service (`POST /moto-api/reset`).
    pub fn reset(&self) -> Result<()> {
        let response = self.request("POST", "/moto-api/reset", &[], b"")?;
        expect_success(
            "POST",
            &format!("{}/moto-api/reset", self.endpoint()),
            &response,
        )
    }

    /// Returns the server's log file (werkzeug's request log and any tracebacks).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("moto.log")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let mut child = self
            .child
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = child.kill();
        let _ = child.wait();
        // The process is reaped: disarm before its pid can be reused, then remove the files.
        self.watchdog.disarm();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl std::fmt::Debug for Moto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Moto")
            .field("dir", &self.dir)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// Returns the moto server shared by all tests of this test binary, starting it on first use.
///
/// It lives in a `static` and is never dropped: its watchdog kills it when the test process exits.
///
/// # Panics
///
/// Panics, in every test that calls it, if the server cannot be started.
pub fn shared_moto() -> &'static Moto {
    static SHARED: OnceLock<std::result::Result<Moto, String>> = OnceLock::new();
    match SHARED.get_or_init(|| Moto::start().map_err(|error| error.to_string())) {
        Ok(moto) => moto,
        Err(error) => panic!("testkit: the shared moto server failed to start: {error}"),
    }
}

/// Returns the venv directory: `$DQ_VENV` (relative to the workspace root) or `<root>/.venv`.
pub fn venv_dir() -> PathBuf {
    match std::env::var_os(VENV_ENV).map(PathBuf::from) {
        Some(venv) if venv.is_absolute() => venv,
        Some(venv) => crate::workspace_root().join(venv),
        None => crate::workspace_root().join(".venv"),
    }
}

/// Shell script that kills the server (if `pid` still is moto) and deletes `dir`.
fn cleanup_script(dir: &std::path::Path, pid: u32) -> String {
    let dir = sh_quote(&dir.to_string_lossy());
    format!(
        r#"dir={dir}
if grep -qa moto_server "/proc/{pid}/cmdline" 2>/dev/null; then
    kill -KILL {pid} 2>/dev/null
fi
rm -rf "$dir"
"#
    )
}

fn validate_bucket_name(name: &str) -> Result<()> {
    let invalid = |reason| Error::InvalidName {
        kind: "bucket",
        name: name.to_owned(),
        reason,
    };
    if !(3..=63).contains(&name.len()) {
        return Err(invalid("must be 3 to 63 characters long"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return Err(invalid(
            "only lowercase letters, digits, `-` and `.` are allowed",
        ));
    }
    Ok(())
}

fn expect_success(method: &str, url: &str, response: &Response) -> Result<()> {
    if response.is_success() {
        return Ok(());
    }
    Err(Error::Http {
        method: method.to_owned(),
        url: url.to_owned(),
        reason: format!("status {}: {}", response.status, response.text()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_are_validated() {
        assert!(validate_bucket_name("my-bucket.1").is_ok());
        assert!(validate_bucket_name("ab").is_err());
        assert!(validate_bucket_name("Upper").is_err());
        assert!(validate_bucket_name("under_score").is_err());
    }
}
