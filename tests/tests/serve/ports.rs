//! The port conformance suite (`hookline_tests::conformance`) on the embedded
//! SQLite backend: every case on a fresh database file.

use hookline_sqlite::Backend;
use hookline_tests::server::TempDir;

/// A fresh backend on its own database file; the directory lives as long as
/// the returned guard.
async fn fresh(tag: &str) -> (TempDir, Backend) {
    let dir = TempDir::new(tag);
    let master = shared::data_key::MasterKeys::generate();
    let backend = Backend::open(&dir.0.join("hookline.db"), &master).await.expect("open the SQLite backend");
    (dir, backend)
}

macro_rules! case {
    ($name:ident) => {
        #[tokio::test]
        async fn $name() {
            let (_dir, backend) = fresh(stringify!($name)).await;
            hookline_tests::conformance::$name(&backend.stores).await;
        }
    };
}

hookline_tests::for_each_conformance_case!(case);

/// The data key's store: the `settings` row of a fresh database (opened
/// without a data key).
#[tokio::test]
async fn data_key_store_creates_once_and_replaces_only_what_it_read() {
    let dir = TempDir::new("data_key_store");
    let db = hookline_sqlite::Db::open(&dir.0.join("hookline.db")).expect("open the database");
    let store = hookline_sqlite::SqliteSettings(db);
    hookline_tests::conformance::data_key_store_creates_once_and_replaces_only_what_it_read(&store).await;
}
