//! `hvio image`: create, info, check, repair, compact, and the bad input
//! each refuses with the image's path and the problem, writing nothing.

use hvio_reshape::encoding::{encode_tx, Entry, Mapping};
use hvio_reshape::Target;
use hvio_vdisk::image;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

fn hvio(args: &[&str]) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hvio")).args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

fn create(p: &Path) {
    let (ok, out, err) = hvio(&[
        "image",
        "create",
        p.to_str().unwrap(),
        "--size",
        "4MiB",
        "--set",
        "data_region_bytes=8388608",
        "--set",
        "meta_region_bytes=3145728",
        "--set",
        "segment_bytes=1048576",
        "--set",
        "log_bytes=1048576",
        "--set",
        "commit_entries=16",
    ]);
    assert!(ok, "{out}{err}");
}

/// Two committed log transactions mapping disk blocks 0 and 1 apart into the data region.
fn write_log(p: &Path) -> image::Superblock {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(p).unwrap();
    let sb = image::read_superblock(p, &f).unwrap();
    let l = sb.layout();
    for seq in 1..=2u64 {
        let e = Entry {
            start: (seq - 1) * 8,
            sectors: 8,
            mapping: Mapping::Map(Target::At(l.data.start + (seq - 1) * 64)),
        };
        let tx = encode_tx(seq, &[e], 4096);
        f.write_all_at(&tx, sb.header_bytes + (l.log.start + (seq - 1) * 8) * 512)
            .unwrap();
    }
    sb
}

#[test]
fn create_info_check_compact() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.rsi");
    create(&p);
    let ps = p.to_str().unwrap();
    let (ok, _, err) = hvio(&["image", "create", ps, "--size", "4MiB"]);
    assert!(!ok && err.contains("a.rsi") && err.contains("exists"), "{err}");
    write_log(&p);
    let (ok, out, err) = hvio(&["image", "info", ps]);
    assert!(ok, "{err}");
    assert!(
        out.contains("data region") && out.contains("2 committed transactions"),
        "{out}"
    );
    let (ok, out, err) = hvio(&["image", "check", ps]);
    assert!(ok && out.contains("clean"), "{out}{err}");
    let (ok, out, err) = hvio(&["image", "compact", ps]);
    assert!(ok && out.contains("2 extents -> 1"), "{out}{err}");
    let rep = image::check(&p).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert_eq!(rep.opened.reshaper.table_extents(), 1);
}

#[test]
fn bad_input_names_the_image_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b.rsi");
    let ps = p.to_str().unwrap();
    create(&p);
    let sb = write_log(&p);
    let l = sb.layout();
    let f = std::fs::OpenOptions::new().read(true).write(true).open(&p).unwrap();

    // A log record with a bad checksum, a committed one after it.
    let at = sb.header_bytes + l.log.start * 512 + 30;
    f.write_all_at(&[0x5a], at).unwrap();
    let before = std::fs::read(&p).unwrap();
    for cmd in ["check", "compact"] {
        let (ok, _, err) = hvio(&["image", cmd, ps]);
        assert!(!ok && err.contains("b.rsi"), "{cmd} accepted a damaged log: {err}");
    }
    let (_, out, _) = hvio(&["image", "check", ps]);
    assert!(
        out.contains("checksum") && out.contains("committed transaction 2"),
        "{out}"
    );
    let (ok, out, _) = hvio(&["image", "info", ps]);
    assert!(ok && out.contains("damage"), "{out}");
    assert_eq!(std::fs::read(&p).unwrap(), before, "a read-only command wrote");
    let (ok, out, err) = hvio(&["image", "repair", ps]);
    assert!(ok && out.contains("accepted the loss"), "{out}{err}");
    let (ok, out, err) = hvio(&["image", "check", ps]);
    assert!(ok, "{out}{err}");

    // A torn superblock.
    f.write_all_at(&[0xff; 8], 100).unwrap();
    let before = std::fs::read(&p).unwrap();
    let (ok, _, err) = hvio(&["image", "check", ps]);
    assert!(
        !ok && err.contains("b.rsi") && err.contains("checksum") && err.contains("image repair"),
        "{err}"
    );
    assert_eq!(std::fs::read(&p).unwrap(), before);
    let (ok, _, err) = hvio(&["image", "repair", ps]);
    assert!(ok, "{err}");

    // A newer format version.
    let mut newer = sb.clone();
    newer.version = 9;
    image::write_superblock(&p, &f, &newer).unwrap();
    let (ok, _, err) = hvio(&["image", "repair", ps]);
    assert!(
        !ok && err.contains("b.rsi") && err.contains("version 9 is newer"),
        "{err}"
    );
    image::write_superblock(&p, &f, &sb).unwrap();

    // A region past the end of the file.
    f.set_len(sb.file_bytes() - 8192).unwrap();
    let (ok, _, err) = hvio(&["image", "info", ps]);
    assert!(
        !ok && err.contains("b.rsi") && err.contains("checkpoint slot 1") && err.contains("past the end"),
        "{err}"
    );
}
