//! DiskSim disk descriptions that DiskSim's own model rules out are errors
//! naming the file, line and key: zones sharing cylinders, slips that are
//! not a track or sector of their zone.

use hvio_device::disksim::load_disk;
use std::path::PathBuf;

mod common;

/// The IBM 18ES description copied to a fresh directory, its model file
/// edited by `edit`; only called by tests that checked [`common::have_hdd_validation`].
fn ibm18es_with(name: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let src = common::hdd_validation().expect("checked by have_hdd_validation");
    let src = src.display();
    let dir = std::env::temp_dir().join(format!("hvio-disksim-refuse-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["ibm18es.parv", "ibm18es.diskspecs", "ibm18es.seek"] {
        std::fs::copy(format!("{src}/{f}"), dir.join(f)).unwrap();
    }
    let model = std::fs::read_to_string(format!("{src}/ibm18es.model")).unwrap();
    std::fs::write(dir.join("ibm18es.model"), edit(&model)).unwrap();
    dir
}

#[test]
fn the_unedited_description_loads() {
    if !common::have_hdd_validation() {
        return;
    }
    let dir = ibm18es_with("same", str::to_string);
    load_disk(&dir.join("ibm18es.parv"), None).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn overlapping_zones_are_an_error() {
    if !common::have_hdd_validation() {
        return;
    }
    let dir = ibm18es_with("overlap", |m| {
        m.replacen("Last cylinder number = 377,", "Last cylinder number = 400,", 1)
    });
    let Err(e) = load_disk(&dir.join("ibm18es.parv"), None) else {
        panic!("overlapping zones accepted");
    };
    let e = e.to_string();
    assert!(
        e.contains("ibm18es.model:") && e.contains("zone cylinders 378..=513 overlap another zone's 258..=400"),
        "{e}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn slips_outside_their_zone_or_not_whole_are_an_error() {
    if !common::have_hdd_validation() {
        return;
    }
    for (i, bad) in ["nan", "-1", "-1e300", "1e300", "2.5", "99999999"].iter().enumerate() {
        let dir = ibm18es_with(&format!("slip{i}"), |m| m.replacen("187771", bad, 1));
        let e = load_disk(&dir.join("ibm18es.parv"), None).err();
        let e = e.unwrap_or_else(|| panic!("slip {bad} accepted")).to_string();
        assert!(
            e.contains("ibm18es.model:") && e.contains("slips") && e.contains("is not a sector of the zone"),
            "{bad}: {e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn defect_lists_of_non_sectors_or_unpaired_are_an_error() {
    if !common::have_hdd_validation() {
        return;
    }
    for (i, (list, want)) in [
        ("nan, 5", "is not a sector number"),
        ("-1, 5", "is not a sector number"),
        ("1e300, 5", "is not a sector number"),
        ("3", "defects come in pairs"),
    ]
    .iter()
    .enumerate()
    {
        let dir = ibm18es_with(&format!("defect{i}"), |m| {
            m.replacen("defects = []", &format!("defects = [ {list} ]"), 1)
        });
        let Err(e) = load_disk(&dir.join("ibm18es.parv"), None) else {
            panic!("defects [{list}] accepted");
        };
        let e = e.to_string();
        assert!(
            e.contains("ibm18es.model:") && e.contains("defects") && e.contains(want),
            "{list}: {e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
    // A pair of sectors is read (and reported as not modelled).
    let dir = ibm18es_with("defect-ok", |m| m.replacen("defects = []", "defects = [ 10, 20 ]", 1));
    load_disk(&dir.join("ibm18es.parv"), None).unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}
