//! The `truss-push` executable: parse, run, exit. Nothing else exits.
//! A refused command line is salvaged (`Cli::salvage`), so its error is
//! reported where `--json`/`--output-file` asked.

use std::process::ExitCode;

use truss_push::cli::Cli;

#[expect(
    clippy::disallowed_methods,
    reason = "the debug log's filter, read before the run starts"
)]
fn main() -> ExitCode {
    let (cli, parse_error) = match Cli::try_parse() {
        Ok(cli) => (cli, None),
        Err(e) if !e.use_stderr() => {
            // --help / --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => (Cli::salvage(), Some(e.to_string().trim().to_string())),
    };
    if let Ok(filter) = std::env::var(truss_push::env_vars::TRUSS_PUSH_LOG) {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(|| truss_push::RedactedStderr)
            .init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(truss_push::run(cli, parse_error));
    // A blocking task (packaging a huge file, reading a stuck file) may
    // still run after a cancelled run wrote its outputs: do not wait for it.
    runtime.shutdown_background();
    ExitCode::from(code)
}
