//! `hookline`: the embedded pipeline (`serve`), a local receiver (`listen`),
//! and ops commands that talk to a running Hookline over its HTTP API.

mod credentials;
mod listen;
mod ops;
mod serve;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "hookline", version, about = "Reliable, signed webhook delivery")]
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
    /// Inspect, requeue, skip, replay and reindex through a running Hookline's API.
    #[command(flatten)]
    Ops(ops::OpsCommand),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        match cli.command {
            Command::Serve(a) => serve::run(*a).await,
            Command::Listen(a) => listen::run(a).await,
            Command::Ops(c) => ops::run(c).await,
        }
    })
}
