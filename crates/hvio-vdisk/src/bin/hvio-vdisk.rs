//! `hvio-vdisk host.toml`: the daemon on its own (the same as `hvio serve`).

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "hvio-vdisk",
    version,
    about = "hvio's virtual-disk daemon (same as `hvio serve`)"
)]
struct Cli {
    #[command(flatten)]
    serve: hvio_vdisk::cli::ServeArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = hvio_vdisk::cli::serve(&cli.serve) {
        let mut msg = format!("hvio serve: {e}");
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            msg.push_str(&format!(": {s}"));
            src = s.source();
        }
        eprintln!("{msg}");
        std::process::exit(1);
    }
}
