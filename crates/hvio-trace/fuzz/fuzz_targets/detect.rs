#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| hvio_trace_fuzz::read(None, data));
