//! Fuzz the simulator's configuration loader (`hvio sim`'s TOML): any text
//! is a configuration or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = hvio_sim::config::Config::from_toml_str(text, "fuzz.toml") {
        assert!(!e.to_string().is_empty());
    }
});
