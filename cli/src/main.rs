//! `hookline`: the embedded pipeline (`serve`), a local receiver (`listen`),
//! and ops commands that talk to a running Hookline over its HTTP API.

use awsreq::credentials;
mod backup;
mod listen;
mod ops;
mod serve;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hookline",
    version,
    about = "Reliable, signed webhook delivery",
    after_help = "Ops commands print a table on a terminal and JSON otherwise (--output json|table): one \
                  JSON document for a single object, JSON lines for lists. Colours only on a terminal, \
                  never with NO_COLOR.\n\n\
                  Exit status: 0 ok, 1 other failure, 2 invalid input (usage, HTTP 400/422), \
                  3 not found (404), 4 conflict (409)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole pipeline in this process on an SQLite file.
    Serve(Box<serve::ServeArgs>),
    /// A local webhook receiver that answers verification and checks signatures.
    Listen(listen::ListenArgs),
    /// Copy a `hookline serve` database while it runs: consistent, checked, secrets still sealed.
    Backup(backup::BackupArgs),
    /// Put a backup in place of a stopped `hookline serve` database.
    Restore(backup::RestoreArgs),
    /// Inspect, requeue, skip, replay and reindex through a running Hookline's API.
    #[command(flatten)]
    Ops(Box<ops::OpsCommand>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // File work on this thread: no runtime needed.
    let cli = match cli.command {
        Command::Backup(a) => return backup::run_backup(a),
        Command::Restore(a) => return backup::run_restore(a),
        command => Cli { command },
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Command::Serve(a) = &cli.command {
        builder.worker_threads(serve::worker_threads(a));
    }
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::from(ops::client::exit::OTHER);
        }
    };
    let result = rt.block_on(async move {
        match cli.command {
            Command::Serve(a) => serve::run(*a).await,
            Command::Listen(a) => listen::run(a).await,
            Command::Ops(c) => ops::run(*c).await,
            Command::Backup(_) | Command::Restore(_) => unreachable!("run above"),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let code = ops::client::exit_code(&e);
            if code != ops::client::exit::OK {
                eprintln!("error: {e:#}");
            }
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// Every ops command has an example and the exit statuses in its help.
    #[test]
    fn every_ops_command_has_an_example() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            let subs: Vec<_> = cmd.get_subcommands().filter(|c| c.get_name() != "help").collect();
            if subs.is_empty() {
                let help = cmd.get_after_help().map(|h| h.to_string()).unwrap_or_default();
                if !(help.contains("Examples:\n  hookline ") && help.contains("3 not found")) {
                    missing.push(path.clone());
                }
            }
            for s in subs {
                walk(s, &path, missing);
            }
        }
        let cli = super::Cli::command();
        let mut missing = Vec::new();
        for c in cli.get_subcommands().filter(|c| !["serve", "listen", "help", "inspect"].contains(&c.get_name())) {
            walk(c, "hookline", &mut missing);
        }
        assert!(missing.is_empty(), "without an example: {missing:?}");
    }
}
