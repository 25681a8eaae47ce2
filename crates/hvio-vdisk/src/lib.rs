//! The virtual-disk daemon behind `hvio serve`.
