//! Test fixtures (feature `testing`): a fresh lake on either catalog backend, so one test body
//! runs against both the file catalog and a PostgreSQL catalog (see `tests/it`).

use std::path::PathBuf;

use crate::{Lake, LakeConfig, Result};

/// The catalog backends every lake test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `ducklake:<tempdir>/catalog.ducklake`.
    File,
    /// A fresh database on the shared throwaway PostgreSQL cluster.
    Postgres,
}

/// An isolated lake: its own catalog (file or PostgreSQL database) and data directory, removed
/// when dropped (the PostgreSQL cluster removes its databases at exit).
pub struct TestLake {
    /// The backend.
    pub backend: Backend,
    /// The config that opens it (tests may tweak it before [`TestLake::open_with`]).
    pub config: LakeConfig,
    /// Scratch directory holding the data path (and the file catalog).
    pub dir: tempfile::TempDir,
}

impl TestLake {
    /// A fresh, not yet created lake on `backend`.
    pub fn new(backend: Backend) -> TestLake {
        let dir = tempfile::Builder::new()
            .prefix("dq-lake-")
            .tempdir()
            .expect("create temp dir");
        let data = dir.path().join("data");
        let dsn = match backend {
            Backend::File => dir.path().join("catalog.ducklake").display().to_string(),
            Backend::Postgres => dq_testkit::shared_postgres()
                .create_database(&dq_testkit::unique_name("lake"))
                .expect("create test database"),
        };
        let mut config = LakeConfig::new(&dsn, Some(&data.display().to_string()));
        config.extension_dir = extension_dir();
        config.threads = Some(2);
        config.memory_limit = Some("2GB".into());
        TestLake {
            backend,
            config,
            dir,
        }
    }

    /// Opens (creating on first use) the lake.
    pub fn open(&self) -> Result<Lake> {
        Lake::open(self.config.clone())
    }

    /// Opens the lake with a modified config.
    pub fn open_with(&self, tweak: impl FnOnce(&mut LakeConfig)) -> Result<Lake> {
        let mut cfg = self.config.clone();
        tweak(&mut cfg);
        Lake::open(cfg)
    }

    /// A scratch path inside this lake's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `DUCKDB_EXTENSION_DIR`, else `<workspace>/.extensions` (what `make extensions` fills).
pub fn extension_dir() -> PathBuf {
    std::env::var_os(crate::config::DUCKDB_EXTENSION_DIR)
        .map(PathBuf::from)
        .unwrap_or_else(|| dq_testkit::workspace_root().join(".extensions"))
}

/// Instantiates each listed test body once per backend: `backend_tests!(name, ...)` expects a
/// `fn name(backend: Backend)` in scope and generates `mod name { fn file(); fn postgres(); }`.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn file() {
                    super::$name($crate::testing::Backend::File)
                }
                #[test]
                fn postgres() {
                    super::$name($crate::testing::Backend::Postgres)
                }
            }
        )*
    };
}
