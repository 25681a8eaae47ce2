#![no_main]
// Includes are skipped: they read other files (bounded at 16 MiB each, but slow for a fuzzer).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if !text.contains("include") {
        let _ = hvio_trace::fio::parse_job_str(&text, "/nonexistent/fuzz.fio");
    }
});
