#![no_main]
// A custom blkparse -f format (first line) applied to the rest of the input.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (fmt, body) = text.split_once('\n').unwrap_or((&text, ""));
    let o = hvio_trace::ReadOptions {
        format: Some(hvio_trace::Format::Blkparse),
        blkparse_format: Some(fmt.to_string()),
        skip_bad: true,
        ..Default::default()
    };
    let r = hvio_trace::TraceReader::from_reader("fuzz", Box::new(std::io::Cursor::new(body.as_bytes().to_vec())), &o);
    if let Ok(r) = r {
        for rec in r.take(100_000) {
            let _ = rec;
        }
    }
});
