//! `hvio serve host.toml`: the virtual-disk daemon (crate hvio-vdisk).

pub use hvio_vdisk::cli::ServeArgs;

pub fn serve(a: ServeArgs) -> anyhow::Result<()> {
    hvio_vdisk::cli::serve(&a)?;
    Ok(())
}
