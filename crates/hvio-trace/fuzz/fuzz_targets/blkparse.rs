#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| hvio_trace_fuzz::read(Some(hvio_trace::Format::Blkparse), data));
