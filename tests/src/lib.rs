//! Test harness: a real HTTP receiver on 127.0.0.1 whose behaviour each test
//! scripts; the two backends behind one [`pipeline::Pipeline`] trait (a real
//! `hookline serve` process that tests can `kill -9` and restart, and the
//! Lambda handlers on the AWS emulator driven by [`lambda_driver`]); the
//! scenario suite both run; and the port conformance suite.

pub mod receiver;
pub mod server;

pub use receiver::{Behaviour, Delivery, Receiver};
pub use server::Server;

/// One producer-format example from the `shared` crate's
/// `tests/fixtures/envelopes/` (docs/formats.md#producer-formats).
pub fn fixture(name: &str) -> Vec<u8> {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    let path = workspace.join("shared").join("tests").join("fixtures").join("envelopes").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Polls `f` every 25 ms until it returns `Some`, or panics after `secs` with `what`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually_every(secs, std::time::Duration::from_millis(25), what, f).await
}

/// As [`eventually`], polling every `every`: for checks that cost the
/// system under test real work (listing hundreds of records from the
/// emulator), which polled every 25 ms would compete with the pipeline
/// they wait for.
pub async fn eventually_every<T, F, Fut>(secs: u64, every: std::time::Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {secs}s waiting for: {what}");
        }
        tokio::time::sleep(every).await;
    }
}
pub mod ack_scenarios;
pub mod aws_pipeline;
pub mod catalog_scenarios;
pub mod cli_ops;
pub mod conformance;
pub mod destination_scenarios;
pub mod destination_stages;
pub mod emulator;
pub mod error_code_scenarios;
pub mod guard_scenarios;
pub mod iam;
pub mod idempotency_scenarios;
pub mod input_scenarios;
pub mod isolation;
pub mod key_scenarios;
pub mod lambda_driver;
pub mod lane_scenarios;
pub mod metering;
pub mod pipeline;
pub mod portal_scenarios;
pub mod pull_scenarios;
pub mod recovery_stages;
pub mod router_scenarios;
pub mod scenarios;
pub mod stages;
pub mod strict;
pub mod subscription_wire_scenarios;
pub mod tenancy_scenarios;
pub mod wait_scenarios;

/// One `#[tokio::test]` per listed scenario of `$module` on `$backend`:
/// `aws` ([`aws_pipeline::AwsPipeline`], the Lambda handlers on the
/// emulator) or `serve` ([`Server`], a real `hookline serve`). Each
/// scenario module keeps its list once, in a macro that calls this one
/// (e.g. [`tenancy_scenario_tests`]), and each backend's test binary
/// invokes that macro, so both run the same cases. A case is
/// `name` (runs `$module::name(&mut pipeline)`), or
/// `name = function(args…)` (runs `$module::function(&mut pipeline, args…)`),
/// either followed by `; settings` (a [`pipeline::Settings`]) when it needs
/// settings other than the test defaults.
#[macro_export]
macro_rules! scenario_tests {
    ($backend:ident, $module:ident; $(
        $(#[$meta:meta])*
        $name:ident $(= $func:ident ( $($arg:expr),* $(,)? ))? $(; $settings:expr)?
    ),* $(,)?) => {$(
        $(#[$meta])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let settings: $crate::pipeline::Settings = $crate::__settings!($($settings)?);
            #[allow(unused_mut)]
            let mut p = $crate::__start!($backend, stringify!($name), &settings);
            $crate::__run!($module, $name, p $(, $func ($($arg),*))?);
        }
    )*};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __settings {
    () => {
        $crate::pipeline::Settings::default()
    };
    ($s:expr) => {
        $s
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __start {
    (aws, $tag:expr, $settings:expr) => {
        $crate::aws_pipeline::AwsPipeline::start_with_settings($tag, $settings).await
    };
    (serve, $tag:expr, $settings:expr) => {
        $crate::Server::start_with_settings($tag, $settings)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __run {
    ($module:ident, $name:ident, $p:ident) => {
        $crate::$module::$name(&mut $p).await
    };
    ($module:ident, $name:ident, $p:ident, $func:ident ( $($arg:expr),* )) => {
        $crate::$module::$func(&mut $p, $($arg),*).await
    };
}

/// Every scenario suite both backends run, listed once: each backend's test
/// binary expands this (`hookline_tests::both_backend_suites!(aws)`,
/// `(serve)`), so a suite added here runs on both.
#[macro_export]
macro_rules! both_backend_suites {
    ($backend:ident) => {
        /// The scenario suite (`hookline_tests::scenarios`).
        mod scenarios {
            $crate::scenario_suite_tests!($backend);
        }

        /// Input validation (`hookline_tests::input_scenarios`).
        mod input_scenarios {
            $crate::input_scenario_tests!($backend);
        }

        /// Ordered lanes cannot wedge (`hookline_tests::lane_scenarios`).
        mod lanes {
            $crate::lane_scenario_tests!($backend);
        }

        /// A replay never crosses tenants (`hookline_tests::tenancy_scenarios`).
        mod tenancy {
            $crate::tenancy_scenario_tests!($backend);
        }

        /// Issue 24's guards (`hookline_tests::guard_scenarios`).
        mod guard {
            $crate::guard_scenario_tests!($backend);
        }

        /// Keys and grants, the X-Actor header (`hookline_tests::key_scenarios`).
        mod key_scenarios {
            $crate::key_scenario_tests!($backend);
        }

        /// The router: 405/Allow, path decoding (`hookline_tests::router_scenarios`).
        mod router_scenarios {
            $crate::router_scenario_tests!($backend);
        }

        /// Waits (`hookline_tests::wait_scenarios`).
        mod wait_scenarios {
            $crate::wait_scenario_tests!($backend);
        }

        /// Idempotency-Key on creating routes (`hookline_tests::idempotency_scenarios`).
        mod idempotency_scenarios {
            $crate::idempotency_scenario_tests!($backend);
        }
        /// The subscriptions' wire contract (`hookline_tests::subscription_wire_scenarios`).
        mod subscription_wire {
            $crate::subscription_wire_scenario_tests!($backend);
        }
        /// Every documented error code is reachable
        /// (`hookline_tests::error_code_scenarios`).
        mod error_codes {
            $crate::error_code_scenario_tests!($backend);
        }
        /// Portal links, `/v1/me`, test events, event types
        /// (`hookline_tests::portal_scenarios`).
        mod portal {
            $crate::portal_scenario_tests!($backend);
        }
        /// The event catalog and versioned types
        /// (`hookline_tests::catalog_scenarios`).
        mod catalog {
            $crate::catalog_scenario_tests!($backend);
        }
        /// Subscriber acknowledgements (`hookline_tests::ack_scenarios`).
        mod acks {
            $crate::ack_scenario_tests!($backend);
        }
        /// Pull (`hookline_tests::pull_scenarios`).
        mod pull {
            $crate::pull_scenario_tests!($backend);
        }
        /// Queue and bus destinations (`hookline_tests::destination_scenarios`).
        mod destination_scenarios {
            $crate::destination_scenario_tests!($backend);
        }
    };
}
