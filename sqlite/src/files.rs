//! The files `hookline serve` keeps secrets in, readable by its own user
//! only: the database with its `-wal` and `-shm` files (created 0600 before
//! SQLite opens the database; SQLite gives the other two the database's
//! mode), and the master key file that wraps the data key
//! ([`shared::data_key`]), kept apart from the database (see
//! docs/operations.md, "The master key").

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use shared::data_key::{MasterKeyError, MasterKeys};

/// The environment variable that holds the master keys instead of a key
/// file: one key or several (separated by commas or newlines), the
/// current one first.
pub const MASTER_KEY_ENV: &str = "HOOKLINE_MASTER_KEY";

/// The key file used when none is named: the database's path with `.key`
/// appended (`hookline.db` → `hookline.db.key`).
pub fn default_key_file(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// Why the master keys could not be had. Never shows a key.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The key file could not be read or created.
    #[error("master key file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The key file can be read by other users.
    #[error("master key file {path} is readable by other users (mode {mode:o}); run `chmod 600 {path}` (and rotate the master key if others may have read it)")]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file's or the variable's text is not master keys.
    #[error("{origin}: {source}")]
    Invalid {
        /// `master key file <path>` or `HOOKLINE_MASTER_KEY`.
        origin: String,
        /// What is wrong (without the key).
        #[source]
        source: MasterKeyError,
    },
}

/// Where the master keys came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// [`MASTER_KEY_ENV`].
    Env,
    /// The key file, and whether this run created it.
    File {
        /// The file.
        path: PathBuf,
        /// Created now, with a new key (first run).
        created: bool,
    },
}

/// The master keys: from `env` (the value of [`MASTER_KEY_ENV`]) when set
/// and not blank, else from `file`, which is created (mode 0600, one new
/// key) if it does not exist. An existing file that other users can read is
/// refused.
///
/// # Errors
///
/// [`KeyFileError`]: unreadable, exposed or invalid.
pub fn master_keys(env: Option<&str>, file: &Path) -> Result<(MasterKeys, KeySource), KeyFileError> {
    if let Some(text) = env.filter(|v| !v.trim().is_empty()) {
        let keys = MasterKeys::parse(&text.replace(',', "\n"))
            .map_err(|source| KeyFileError::Invalid { origin: MASTER_KEY_ENV.into(), source })?;
        return Ok((keys, KeySource::Env));
    }
    let io = |source| KeyFileError::Io { path: file.to_path_buf(), source };
    let created = match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(file) {
        Ok(mut f) => {
            let text = format!(
                "# Hookline master key: wraps the data key that seals the secrets of the\n\
                 # database it was created with. Back it up apart from the database:\n\
                 # without it those secrets are lost. Rotate: put a new key on the first\n\
                 # line, keep this one below it until `hookline serve` has re-read the\n\
                 # file (SIGHUP, or a restart: docs/operations.md).\n{}\n",
                MasterKeys::generate_line()
            );
            f.write_all(text.as_bytes()).and_then(|()| f.sync_all()).map_err(io)?;
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(io(e)),
    };
    let mode = std::fs::metadata(file).map_err(io)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Exposed { path: file.to_path_buf(), mode });
    }
    let text = std::fs::read_to_string(file).map_err(io)?;
    let keys = MasterKeys::parse(&text)
        .map_err(|source| KeyFileError::Invalid { origin: format!("master key file {}", file.display()), source })?;
    Ok((keys, KeySource::File { path: file.to_path_buf(), created }))
}

/// Creates the database file with mode 0600 if it does not exist, and
/// takes group and other access away from an existing database and its
/// `-wal` and `-shm` files (databases created before this rule were 0644),
/// before SQLite opens it: SQLite creates `-wal` and `-shm` with the
/// database file's mode.
///
/// # Errors
///
/// The file system's.
pub fn restrict_database_files(db: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(db) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    for ext in ["", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(ext);
        let path = PathBuf::from(name);
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o700))?;
            tracing::warn!(file = %path.display(), from = format!("{mode:o}"), to = format!("{:o}", mode & 0o700), "database file was readable by other users; restricted to its owner");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hookline-files-{name}-{}-{}", std::process::id(), crate::now_ms()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_missing_key_file_is_created_0600_and_read_back_the_same() {
        let d = dir("create");
        let file = default_key_file(&d.join("hookline.db"));
        assert_eq!(file, d.join("hookline.db.key"));
        let (first, source) = master_keys(None, &file).unwrap();
        assert_eq!(source, KeySource::File { path: file.clone(), created: true });
        assert_eq!(mode(&file), 0o600);
        let (again, source) = master_keys(Some("  "), &file).unwrap();
        assert_eq!(source, KeySource::File { path: file.clone(), created: false });
        assert_eq!(first.ids(), again.ids());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn an_exposed_or_invalid_key_file_is_refused_without_showing_it() {
        let d = dir("refuse");
        let file = d.join("k");
        let line = MasterKeys::generate_line();
        std::fs::write(&file, format!("{line}\n")).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = master_keys(None, &file).unwrap_err();
        assert!(matches!(e, KeyFileError::Exposed { mode: 0o644, .. }), "{e}");
        assert!(e.to_string().contains("chmod 600") && !e.to_string().contains(&line));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&file, "not a key\n").unwrap();
        let e = master_keys(None, &file).unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = master_keys(Some("nope"), &file).unwrap_err();
        assert!(e.to_string().starts_with(MASTER_KEY_ENV), "{e}");
        let two = format!("{},{line}", MasterKeys::generate_line());
        let (keys, source) = master_keys(Some(&two), &file).unwrap();
        assert_eq!((keys.ids().len(), source), (2, KeySource::Env));
        std::fs::remove_dir_all(d).unwrap();
    }

    #[tokio::test]
    async fn the_database_and_its_wal_and_shm_files_are_0600() {
        let d = dir("modes");
        let db = d.join("hookline.db");
        let c = crate::Db::open(&db).unwrap();
        c.call(|c, _| c.execute("INSERT INTO settings (key, value) VALUES ('m', 'v')", []).map_err(crate::sql))
            .await
            .unwrap();
        for ext in ["", "-wal", "-shm"] {
            let p = PathBuf::from(format!("{}{ext}", db.display()));
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
        drop(c);
        // A database made before the rule (0644) is restricted when opened.
        let old = d.join("old.db");
        std::fs::write(&old, b"").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        let _c = crate::Db::open(&old).unwrap();
        assert_eq!(mode(&old), 0o600);
        std::fs::remove_dir_all(d).unwrap();
    }
}
