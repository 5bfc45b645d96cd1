//! Where `hookline serve`'s API keys come from, never the command line
//! (every user of the machine can read a process's arguments):
//!
//! - `HOOKLINE_API_KEY`: one admin secret, named `default`, taken whole
//!   (only surrounding whitespace is dropped: an `=` or `,` is part of it);
//! - `--api-keys-file PATH` (`HOOKLINE_API_KEYS_FILE`): a JSON array of
//!   `{"name", "role", "tenant_id"?, "secret"}`, readable by its owner only
//!   (a file others can read is refused; one its group can read is warned
//!   about);
//! - the key store (`POST /v1/keys`), always;
//! - without the first two, an admin key generated on the first run,
//!   stored hashed only, shown once and written to `<db>.admin-key` (0600).
//!
//! Every secret is checked ([`check_secret`]: printable ASCII, no space at either end); a name
//! or a secret given twice is refused.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;
use shared::access::Role;
use shared::api_key::{check_name, check_secret};
use shared::ids::TenantId;

use hookline_api::ApiKey;

/// One entry of a keys file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKey {
    name: String,
    role: String,
    #[serde(default)]
    tenant_id: Option<String>,
    secret: String,
}

/// The error for `--api-key` and `HOOKLINE_API_KEYS`, which are gone.
pub const NO_KEYS_ON_THE_COMMAND_LINE: &str = "--api-key is no longer accepted: a key on the command line \
    is visible to every user of the machine in the process list. Give one admin key in the environment \
    (HOOKLINE_API_KEY=<secret>), named keys in a file readable only by you (--api-keys-file PATH, a JSON \
    array of {\"name\", \"role\", \"tenant_id\"?, \"secret\"}), or create keys with `hookline keys create`";

/// The error for `HOOKLINE_API_KEYS`: its `name=secret,…` pairs were split
/// at the first `=`, which cut base64 secrets.
pub const NO_KEY_PAIRS: &str = "HOOKLINE_API_KEYS (name=secret pairs) is no longer read: a secret holding `=` \
    or `,` could not be told from the separators. Put named keys in a file (--api-keys-file PATH, a JSON array \
    of {\"name\", \"role\", \"tenant_id\"?, \"secret\"}); HOOKLINE_API_KEY still takes one admin secret whole";

/// The static keys: `env` (`HOOKLINE_API_KEY`) named `default`, then the
/// keys of `file` (its text). Names and secrets unique.
///
/// # Errors
///
/// What is wrong, naming the entry and field (never a secret).
pub fn static_keys(env: Option<&str>, file: Option<(&Path, &str)>) -> anyhow::Result<Vec<ApiKey>> {
    let mut keys: Vec<ApiKey> = Vec::new();
    if let Some(secret) = env.map(str::trim).filter(|s| !s.is_empty()) {
        check_secret(secret).map_err(|e| anyhow::anyhow!("HOOKLINE_API_KEY: the secret {e}"))?;
        keys.push(ApiKey { name: "default".into(), secret: secret.to_string(), role: Role::Admin, tenant: None });
    }
    if let Some((path, text)) = file {
        let entries: Vec<FileKey> = serde_json::from_str(text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a JSON array of {{\"name\", \"role\", \"tenant_id\"?, \"secret\"}}: {e}",
                path.display()
            )
        })?;
        for (i, k) in entries.into_iter().enumerate() {
            let at = format!("{} entry {i}", path.display());
            check_name(&k.name).map_err(|e| anyhow::anyhow!("{at}: name {e}"))?;
            let role = Role::parse(&k.role)
                .ok_or_else(|| anyhow::anyhow!("{at}: role must be one of producer, reader, operator, admin"))?;
            check_secret(&k.secret).map_err(|e| anyhow::anyhow!("{at} ({}): secret {e}", k.name))?;
            if k.tenant_id.as_deref().is_some_and(|t| t.is_empty() || t.chars().any(char::is_control)) {
                bail!("{at} ({}): tenant_id must be non-empty, without control characters", k.name);
            }
            keys.push(ApiKey { name: k.name, secret: k.secret, role, tenant: k.tenant_id.map(TenantId::new) });
        }
    }
    for (i, k) in keys.iter().enumerate() {
        if keys[..i].iter().any(|o| o.name == k.name) {
            bail!("API keys: the name {:?} is given twice", k.name);
        }
        if let Some(o) = keys[..i].iter().find(|o| o.secret == k.secret) {
            bail!("API keys: {:?} and {:?} have the same secret; each key needs its own", o.name, k.name);
        }
    }
    Ok(keys)
}

/// Reads a keys file, refusing one that users other than its owner and
/// group can read or write, and warning when its group can.
///
/// # Errors
///
/// It cannot be read, or others may read it.
pub fn read_keys_file(path: &Path) -> anyhow::Result<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(path).with_context(|| format!("--api-keys-file {}", path.display()))?.mode();
        if mode & 0o007 != 0 {
            bail!(
                "--api-keys-file {}: other users may read or change it (mode {:o}); run `chmod 600 {}`",
                path.display(),
                mode & 0o777,
                path.display()
            );
        }
        if mode & 0o070 != 0 {
            tracing::warn!(path = %path.display(), mode = format!("{:o}", mode & 0o777), "the API keys file is readable by its group");
        }
    }
    std::fs::read_to_string(path).with_context(|| format!("--api-keys-file {}", path.display()))
}

/// Where the admin key generated on the first run is written: beside the
/// database, `<db>.admin-key`.
pub fn admin_key_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push(".admin-key");
    PathBuf::from(p)
}

/// Writes `secret` to `path`, readable and writable by its owner only.
///
/// # Errors
///
/// The file cannot be written.
pub fn write_private(path: &Path, secret: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o.open(path).with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    f.write_all(format!("{secret}\n").as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    f.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key as (name, secret, role, tenant).
    type Flat = (String, String, Role, Option<String>);

    fn keys(env: Option<&str>, file: Option<&str>) -> anyhow::Result<Vec<Flat>> {
        let f = file.map(|t| (Path::new("keys.json"), t));
        Ok(static_keys(env, f)?
            .into_iter()
            .map(|k| (k.name, k.secret, k.role, k.tenant.map(|t| t.into_string())))
            .collect())
    }

    #[test]
    fn the_environment_key_is_taken_whole() {
        let k = keys(Some(" abc== \n"), None).unwrap();
        assert_eq!(k, [("default".into(), "abc==".into(), Role::Admin, None)]);
        assert_eq!(keys(Some("ops=s1,x=y"), None).unwrap()[0].1, "ops=s1,x=y", "never split");
        assert_eq!(keys(Some("="), None).unwrap()[0].1, "=");
        assert!(keys(Some("   "), None).unwrap().is_empty());
        assert_eq!(keys(Some("two words"), None).unwrap()[0].1, "two words", "spaces inside are part of it");
        let e = keys(Some("tabbed\tsecret"), None).unwrap_err().to_string();
        assert!(e.contains("HOOKLINE_API_KEY") && !e.contains("tabbed"), "{e}");
    }

    #[test]
    fn a_keys_file_names_roles_and_tenants() {
        let file = r#"[{"name": "ops", "role": "operator", "secret": "c2VjcmV0=="},
                       {"name": "acme-ci", "role": "producer", "tenant_id": "acme", "secret": "x,y=z"}]"#;
        let k = keys(Some("root-secret"), Some(file)).unwrap();
        assert_eq!(k.len(), 3);
        assert_eq!(k[1], ("ops".into(), "c2VjcmV0==".into(), Role::Operator, None));
        assert_eq!(k[2], ("acme-ci".into(), "x,y=z".into(), Role::Producer, Some("acme".into())));
    }

    #[test]
    fn bad_or_duplicate_keys_are_refused_without_showing_secrets() {
        let bad = |file: &str| keys(None, Some(file)).unwrap_err().to_string();
        let e =
            bad(r#"[{"name": "a", "role": "admin", "secret": "s1"}, {"name": "b", "role": "admin", "secret": "s1"}]"#);
        assert!(e.contains("same secret") && !e.contains("s1"), "{e}");
        assert!(bad(
            r#"[{"name": "a", "role": "admin", "secret": "s1"}, {"name": "a", "role": "admin", "secret": "s2"}]"#
        )
        .contains("twice"));
        assert!(bad(r#"[{"name": "a b", "role": "admin", "secret": "s"}]"#).contains("name"));
        assert!(bad(r#"[{"name": "a", "role": "root", "secret": "s"}]"#).contains("role"));
        assert!(bad(r#"[{"name": "a", "role": "admin", "secret": "s\ts"}]"#).contains("secret"));
        assert!(bad(r#"[{"name": "a", "role": "admin", "secret": " s"}]"#).contains("secret"));
        assert!(bad(r#"[{"name": "a", "role": "admin"}]"#).contains("secret"));
        assert!(bad(r#"{"name": "a"}"#).contains("JSON array"));
        let e = keys(Some("same"), Some(r#"[{"name": "x", "role": "reader", "secret": "same"}]"#)).unwrap_err();
        assert!(e.to_string().contains("same secret"), "the environment's key counts too");
    }

    #[test]
    fn the_admin_key_file_sits_beside_the_database_and_is_private() {
        let dir = std::env::temp_dir().join(format!("hookline-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("hookline.db");
        let p = admin_key_path(&db);
        assert_eq!(p, dir.join("hookline.db.admin-key"));
        assert_ne!(p, dir.join("hookline.db.key"), "not the master key file");
        write_private(&p, "hlk_x").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "hlk_x\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
            let f = dir.join("keys.json");
            std::fs::write(&f, "[]").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
            assert!(read_keys_file(&f).unwrap_err().to_string().contains("chmod 600"));
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert_eq!(read_keys_file(&f).unwrap(), "[]");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
