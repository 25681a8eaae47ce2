//! DiskSim 4.0 disk descriptions: the parameter-file reader and the mapping
//! onto hvio's HDD model.

mod load;
pub mod parse;

pub use load::{load_disk, load_disk_with, LoadOptions, Loaded, DIXTRAC_SEEK_OVERHEAD_MS};
pub use parse::{read_spec, Block, Entry, SpecError, SpecFile, Value};
